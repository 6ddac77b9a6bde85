#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "testing/testdata.h"
#include "testing/tolerance.h"
#include "seam/seam_internal.h"

int bp_test_passed, bp_test_failed, bp_test_skipped;

void bp_test_fail_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    bp_test_failed++;
    /* Cap the noise: the first 50 failures are enough to debug, the count says the rest. */
    if (bp_test_failed > 50) return;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void bp_test_skip(const char *fmt, ...) {
    va_list ap;
    bp_test_skipped++;
    fputs("SKIP: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int bp_test_finish(void) {
    if (bp_test_skipped)
        printf("%d passed, %d failed, %d skipped\n", bp_test_passed, bp_test_failed, bp_test_skipped);
    else
        printf("%d passed, %d failed\n", bp_test_passed, bp_test_failed);
    /* A program that checked nothing and skipped nothing is a broken test, not a pass. */
    if (bp_test_passed == 0 && bp_test_skipped == 0) {
        fprintf(stderr, "FAIL: test ran no checks\n");
        return 1;
    }
    /* 77 is ctest's SKIP_RETURN_CODE (CMakeLists.txt): a program that skipped part of its work
     * shows as "Skipped" in ctest's summary, not as a plain pass. Its checks still ran and
     * still fail it. */
    if (bp_test_failed) return 1;
    return bp_test_skipped ? 77 : 0;
}

/* One generator, one NMSE, one weight maker, one tolerance table: the library's (src/core), so
 * `backplane verify` uses the same ones. */
uint64_t bp_test_rand(uint64_t *s) { return bp_rng_next(s); }
float bp_test_randf(uint64_t *s) { return bp_rng_float(s); }
double bp_test_nmse(const float *got, const float *ref, size_t n) { return bp_nmse(got, ref, n); }

double bp_test_tolerance(bp_kind k, const char *op) {
    double t = bp_tolerance_nmse(k, op);
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    CHECK(t > 0, "no tolerance row for %s %s in src/testing/tolerance.def", ki ? ki->name : "?", op);
    return t > 0 ? t : 0;
}

bool bp_test_quick(void) {
    const char *v = getenv("BP_TEST_QUICK");
    return v && *v && strcmp(v, "0");
}

void *bp_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        bp_test_fail_at(__FILE__, __LINE__, "cannot open %s", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* One byte more, a NUL: callers parse text files with string functions (strtok_r ran
     * past the end of kinds_list.txt when the buffer had no terminator). */
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    if (!buf) bp_test_fail_at(__FILE__, __LINE__, "cannot read %s", path);
    else if (len) *len = (size_t)n;
    return buf;
}

uint8_t *bp_test_make_weight(bp_kind k, int64_t rows, int64_t cols, uint64_t *rng, size_t *bytes_out) {
    return bp_random_weight(k, rows, cols, rng, bytes_out);
}

bool bp_test_all_finite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

/* One (kind, rows, cols, t) case on a backend's dispatch table: its matvec (t == 1) or GEMM
 * against bp_ref_gemm on fresh random weights and inputs, NMSE within the tolerance table. Returns whether the
 * case ran on the backend (false when the weight or the reference could not be made). */
bool bp_test_dispatch_case(const bp_backend_dispatch *d, bp_kind k, int64_t rows, int64_t cols, int64_t t,
                           uint64_t *rng) {
    const char *kn = bp_kind_lookup((uint32_t)k)->name;
    const double tol = bp_test_tolerance(k, t == 1 ? "matvec" : "gemm");
    size_t bytes = 0;
    bool ran = false;
    uint8_t *wd = bp_test_make_weight(k, rows, cols, rng, &bytes);
    CHECK(wd != NULL, "%s: could not make a %lld x %lld weight: %s", kn, (long long)rows, (long long)cols,
          bp_last_error());
    if (!wd) return false;
    float *x = malloc(sizeof(float) * (size_t)(t * cols));
    float *ref = malloc(sizeof(float) * (size_t)(t * rows));
    float *got = malloc(sizeof(float) * (size_t)(t * rows));
    for (int64_t i = 0; i < t * cols; i++) x[i] = bp_test_randf(rng);
    for (int64_t i = 0; i < t * rows; i++) got[i] = NAN;
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(k, wd, bytes, rows, cols, &w));
    CHECK_OK(bp_ref_gemm(k, wd, bytes, rows, cols, x, t, ref));
    if (w && bp_test_all_finite(ref, (size_t)(t * rows))) {
        char err[256] = "";
        bp_op_call c = {.op = t == 1 ? BP_OP_MATVEC : BP_OP_GEMM, .kind = k, .kind2 = k};
        c.u.mm.w = w, c.u.mm.x = x, c.u.mm.t = t, c.u.mm.y = got;
        bp_launch r = d->launch(&c, err, sizeof err);
        CHECK(r == BP_LAUNCH_OK, "%s %s rows %lld cols %lld t %lld: launch %d: %s", kn, t == 1 ? "matvec" : "gemm",
              (long long)rows, (long long)cols, (long long)t, (int)r, err);
        double e = bp_test_nmse(got, ref, (size_t)(t * rows));
        CHECK(e <= tol, "%s %s rows %lld cols %lld t %lld: NMSE %.3g > %.1g (got[0] %g ref[0] %g)", kn,
              t == 1 ? "matvec" : "gemm", (long long)rows, (long long)cols, (long long)t, e, tol, (double)got[0],
              (double)ref[0]);
        ran = true;
    } else if (w) {
        CHECK(0, "%s: the CPU reference gave non-finite output (reference kernel missing?)", kn);
    }
    bp_weight_free(w);
    free(wd);
    free(x);
    free(ref);
    free(got);
    return ran;
}

unsigned long long bp_test_op_calls(const char *op, const char *backend) {
    bp_op_stat st[64];
    int n = bp_stats_get(st, 64);
    for (int i = 0; i < n && i < 64; i++)
        if (!strcmp(st[i].op, op) && !strcmp(st[i].backend, backend)) return st[i].calls;
    return 0;
}

int bp_test_launch_mm(const bp_backend_dispatch *d, bp_weight *w, const float *x, int64_t t, float *y, bool gemm,
                      char *err, size_t err_len) {
    bp_op_call c = {.op = gemm ? BP_OP_GEMM : BP_OP_MATVEC, .kind = w->kind, .kind2 = w->kind};
    c.u.mm.w = w, c.u.mm.x = x, c.u.mm.t = t, c.u.mm.y = y;
    return (int)d->launch(&c, err, err_len);
}

int bp_test_route(int op, bp_kind k, bp_kind k2) {
    const bp_op_shape s = {64, 64, 1};
    return bp_seam_route((bp_op)op, k, k2, &s, NULL, NULL, 0);
}

void bp_test_jobs_on(const char *backend, uint64_t *rng) {
    static const bp_kind kinds[3] = {BP_KIND_Q4_K, BP_KIND_Q8_0, BP_KIND_Q6_K};
    static const int64_t rows[3] = {9, 33, 70};
    enum { COLS = 512, T = 3 };
    uint8_t *wd[3];
    size_t bytes[3];
    bp_weight *w[3] = {0};
    float x[T * COLS], *y[3], *ref[3];
    for (int i = 0; i < T * COLS; i++) x[i] = bp_test_randf(rng);
    for (int j = 0; j < 3; j++) {
        wd[j] = bp_test_make_weight(kinds[j], rows[j], COLS, rng, &bytes[j]);
        CHECK_OK(bp_weight_create(kinds[j], wd[j], bytes[j], rows[j], COLS, &w[j]));
        y[j] = malloc(sizeof(float) * T * (size_t)rows[j]);
        ref[j] = malloc(sizeof(float) * T * (size_t)rows[j]);
        CHECK_OK(bp_ref_gemm(kinds[j], wd[j], bytes[j], rows[j], COLS, x, T, ref[j]));
    }
    for (int t = 1; t <= T; t += T - 1) {
        bp_matmul_job jobs[3] = {{w[0], y[0]}, {w[1], y[1]}, {w[2], y[2]}};
        CHECK_OK(bp_matmul(x, t, jobs, 3));
        for (int j = 0; j < 3; j++) {
            const bp_kind_info *ki = bp_kind_lookup(kinds[j]);
            bp_run_record r;
            CHECK_OK(bp_weight_last_record(w[j], &r));
            char want[32];
            snprintf(want, sizeof want, "jobs %s", ki->name);
            CHECK(!strcmp(r.backend, backend) && !strcmp(r.kernel, want) && !r.fallback_from[0],
                  "%s jobs t=%d: %s ran on %s (%s)", backend, t, ki->name, r.backend, r.kernel);
            double e = bp_test_nmse(y[j], ref[j], (size_t)(t * rows[j]));
            CHECK(e <= bp_test_tolerance(kinds[j], t == 1 ? "matvec" : "gemm"), "%s jobs t=%d %s: NMSE %.3g", backend, t,
                  ki->name, e);
        }
    }
    for (int j = 0; j < 3; j++) bp_weight_free(w[j]), free(wd[j]), free(y[j]), free(ref[j]);
}
