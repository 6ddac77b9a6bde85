/* A minimal test harness: CHECK records a failure with file:line and goes on; a test program
 * ends with bp_test_finish(), which prints "N passed, N failed" and returns the exit status.
 * A test that cannot run here (no device) calls BP_SKIP, which says so on stderr and makes the
 * program exit 77, which ctest reports as "Skipped": a skip is never a silent pass. */
#ifndef BP_TEST_HARNESS_H
#define BP_TEST_HARNESS_H

#include <stdio.h>

#include "backplane.h"

extern int bp_test_passed, bp_test_failed, bp_test_skipped;

void bp_test_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void bp_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int bp_test_finish(void);
/* Deterministic xorshift random numbers for test data (src/testing/testdata.h). */
uint64_t bp_test_rand(uint64_t *state);
float bp_test_randf(uint64_t *state); /* uniform in [-1, 1) */
/* Normalised mean squared error of got against ref: sum (got-ref)^2 / sum ref^2 (bp_nmse). */
double bp_test_nmse(const float *got, const float *ref, size_t n);
/* The NMSE bound for op ("matvec", "gemm") on kind k from THE tolerance table
 * (src/testing/tolerance.def); a missing row is a recorded failure (and 0 is returned). */
double bp_test_tolerance(bp_kind k, const char *op);
/* rows x cols test weights of kind k (bp_random_weight: malloc'ed, *bytes set; NULL on
 * failure): real quantizations of random floats where the kind has a quantizer, else random
 * blocks redrawn until they decode to finite values below 1e3. */
uint8_t *bp_test_make_weight(bp_kind k, int64_t rows, int64_t cols, uint64_t *rng, size_t *bytes);
bool bp_test_all_finite(const float *v, size_t n);
/* One (kind, rows, cols, t) case on a backend's dispatch table (matvec when t == 1, else GEMM)
 * against bp_ref_gemm, NMSE within bp_test_tolerance; true when it ran on the backend. */
struct bp_backend_dispatch;
bool bp_test_dispatch_case(const struct bp_backend_dispatch *d, bp_kind k, int64_t rows, int64_t cols,
                           int64_t t, uint64_t *rng);
/* BP_TEST_QUICK=1 (set by `make valgrind` and `make tsan`, where every instruction is 20-100x
 * slower): tests run reduced sizes and fewer rounds, covering the same code paths. */
bool bp_test_quick(void);
/* With backend enabled (the caller forced it on): three jobs of different kinds sharing one input
 * through bp_matmul at t = 1 and t = 3 -- each against the reference, each weight's record naming
 * backend and its jobs kernel ("jobs Q4_K"): the backend took them as one jobs call. */
void bp_test_jobs_on(const char *backend, uint64_t *rng);
/* The slot a call of op on kinds k, k2 goes to (bp_seam_route at a 64 x 64 decode shape: the
 * mocks of these tests have no cost model, so the shape does not decide); -1: the CPU. */
int bp_test_route(int op, bp_kind k, bp_kind k2);
/* One matvec (gemm false) or gemm call of w straight into dispatch table d's launch entry. */
int bp_test_launch_mm(const struct bp_backend_dispatch *d, bp_weight *w, const float *x, int64_t t, float *y, bool gemm,
                      char *err, size_t err_len);
/* Calls of op (ops.def name) on backend ("cpu", "mockops") in the op stats (bp_stats_get). */
unsigned long long bp_test_op_calls(const char *op, const char *backend);
/* Read a whole file, followed by a NUL byte not counted in *len; NULL (with a failure
 * recorded) when missing. Caller frees. */
void *bp_test_read_file(const char *path, size_t *len);

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (cond) bp_test_passed++;                                                       \
        else bp_test_fail_at(__FILE__, __LINE__, __VA_ARGS__);                            \
    } while (0)
#define CHECK_OK(expr)                                                                    \
    do {                                                                                  \
        bp_status s_ = (expr);                                                            \
        CHECK(s_ == BP_OK, "%s -> %s: %s", #expr, bp_status_name(s_), bp_last_error());   \
    } while (0)
#define BP_SKIP(...) bp_test_skip(__VA_ARGS__)

#endif
