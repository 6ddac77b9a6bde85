/* Batched matmul jobs against the CPU reference (bp_ref_gemm, double accumulation): Gemma 3's
 * Q/K/V (Q5_0/Q5_0/Q8_0) and gate/up (Q5_0), mixed kinds incl. K-quants and float kinds, decode
 * (t = 1), small batch (t = 3) and prefill (t = 37, odd), every ISA path, 1 and 3 threads.
 * NMSE within the tolerance table's "jobs" rows (src/testing/tolerance.def: 5e-4 quantized, 1e-6 float);
 * and each job bit-identical to its weight's own bp_gemm_on("cpu"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"
#include "seam/seam_internal.h"

typedef struct jw {
    bp_kind k;
    int64_t rows;
    uint8_t *data;
    size_t bytes;
    bp_weight *w;
} jw;

static double tol(bp_kind k) { return bp_test_tolerance(k, "jobs"); } /* src/testing/tolerance.def */

/* cpu_only: GPU backends are off, so every job runs on the CPU's shared submission and must
 * equal the single-weight CPU call bit for bit. Otherwise jobs whose kind a GPU backend takes
 * go there through the weight seam, and only the tolerance applies. */
static bool cpu_only = true;

static void run_set(const char *name, const bp_kind *kinds, const int64_t *rows, int n, int64_t cols) {
    uint64_t rng = 11;
    jw w[8];
    for (int i = 0; i < n; i++) {
        w[i].k = kinds[i], w[i].rows = rows[i];
        w[i].data = bp_test_make_weight(kinds[i], rows[i], cols, &rng, &w[i].bytes);
        CHECK_OK(bp_weight_create(kinds[i], w[i].data, w[i].bytes, rows[i], cols, &w[i].w));
    }
    const int64_t ts[] = {1, 3, 37};
    for (int ti = 0; ti < 3; ti++) {
        int64_t t = ts[ti];
        float *x = malloc((size_t)(t * cols) * sizeof *x);
        for (int64_t i = 0; i < t * cols; i++) x[i] = bp_test_randf(&rng);
        bp_matmul_job jobs[8];
        float *ref[8];
        for (int i = 0; i < n; i++) {
            jobs[i].w = w[i].w;
            jobs[i].y = malloc((size_t)(t * rows[i]) * sizeof(float));
            ref[i] = malloc((size_t)(t * rows[i]) * sizeof(float));
            CHECK_OK(bp_ref_gemm(kinds[i], w[i].data, w[i].bytes, rows[i], cols, x, t, ref[i]));
        }
        for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
            if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
            CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
            for (int th = 1; th <= 3; th += 2) {
                CHECK_OK(bp_cpu_set_threads(th));
                for (int i = 0; i < n; i++) memset(jobs[i].y, 0xff, (size_t)(t * rows[i]) * sizeof(float));
                CHECK_OK(bp_matmul(x, t, jobs, n));
                for (int i = 0; i < n && cpu_only; i++) {
                    /* The shared submission runs each weight's own kernel: bit-identical to the
                     * single-weight CPU call. */
                    float *one = malloc((size_t)(t * rows[i]) * sizeof(float));
                    CHECK_OK(bp_gemm_on(w[i].w, "cpu", x, t, one));
                    CHECK(!memcmp(one, jobs[i].y, (size_t)(t * rows[i]) * sizeof(float)),
                          "%s job %d t=%lld %s %d threads: equals bp_gemm_on(cpu)", name, i, (long long)t,
                          bp_cpu_isa_name((bp_cpu_isa)isa), th);
                    free(one);
                }
                for (int i = 0; i < n; i++) {
                    double e = bp_test_nmse(jobs[i].y, ref[i], (size_t)(t * rows[i]));
                    CHECK(e <= tol(kinds[i]) && bp_test_all_finite(jobs[i].y, (size_t)(t * rows[i])),
                          "%s job %d (%s) t=%lld %s %d threads: NMSE %.3g", name, i, bp_kind_lookup(kinds[i])->name,
                          (long long)t, bp_cpu_isa_name((bp_cpu_isa)isa), th, e);
                }
            }
        }
        fprintf(stderr, "%s t=%lld: %s\n", name, (long long)t, bp_op_last_path("jobs"));
        for (int i = 0; i < n; i++) free(jobs[i].y), free(ref[i]);
        free(x);
    }
    for (int i = 0; i < n; i++) bp_weight_free(w[i].w), free(w[i].data);
}

/* A NaN or Inf in the shared input: every job runs the CPU reference (the non-finite policy of
 * bp_matvec), so the outputs carry the reference's NaN/Inf pattern, and each record says so. */
static void nonfinite_input(void) {
    uint64_t rng = 5;
    size_t b1, b2;
    uint8_t *w1 = bp_test_make_weight(BP_KIND_Q8_0, 8, 64, &rng, &b1), *w2 = bp_test_make_weight(BP_KIND_Q4_K, 8, 256, &rng, &b2);
    bp_weight *a = NULL, *b = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, w1, b1, 8, 64, &a));
    float x[2 * 256], y[2 * 8], ref[2 * 8];
    for (int i = 0; i < 2 * 256; i++) x[i] = bp_test_randf(&rng);
    x[3] = NAN;
    bp_matmul_job j = {a, y};
    CHECK_OK(bp_matmul(x, 1, &j, 1));
    CHECK_OK(bp_ref_gemm(BP_KIND_Q8_0, w1, b1, 8, 64, x, 1, ref));
    bool same = true;
    for (int i = 0; i < 8; i++) same = same && isnan(y[i]) == isnan(ref[i]) && (isnan(y[i]) || y[i] == ref[i]);
    CHECK(same && isnan(y[0]), "a NaN input gives the reference's NaNs through bp_matmul");
    CHECK(!strcmp(bp_weight_last_path(a), "CPU reference (non-finite input)"), "record: %s", bp_weight_last_path(a));
    CHECK_OK(bp_weight_create(BP_KIND_Q4_K, w2, b2, 8, 256, &b));
    x[3] = 1, x[256 + 7] = INFINITY;
    bp_matmul_job jb = {b, y};
    CHECK_OK(bp_matmul(x, 2, &jb, 1));
    CHECK_OK(bp_ref_gemm(BP_KIND_Q4_K, w2, b2, 8, 256, x, 2, ref));
    same = true;
    for (int i = 0; i < 16; i++) same = same && (isnan(y[i]) ? isnan(ref[i]) : y[i] == ref[i]);
    CHECK(same && !isfinite(y[8]), "an Inf in the second row gives the reference's result (%g vs %g)", y[8], ref[8]);
    bp_weight_free(a), bp_weight_free(b);
    free(w1), free(w2);
}

int main(void) {
    /* First with every GPU backend off (decided once per process, so before any op). */
#define BP_BACKEND(ENUM, name, display, ...) setenv("BACKPLANE_" #ENUM, "0", 1);
#include "backend/backends.def"
#undef BP_BACKEND
    /* Gemma 3 270M: d_model 640; q 4 x 256, k/v 1 x 256; ffn 2048. Scaled-down rows keep it fast. */
    run_set("gemma3 qkv", (const bp_kind[]){BP_KIND_Q5_0, BP_KIND_Q5_0, BP_KIND_Q8_0}, (const int64_t[]){256, 64, 64}, 3, 640);
    run_set("gemma3 gate/up", (const bp_kind[]){BP_KIND_Q5_0, BP_KIND_Q5_0}, (const int64_t[]){96, 96}, 2, 640);
    run_set("mixed", (const bp_kind[]){BP_KIND_Q4_K, BP_KIND_Q6_K, BP_KIND_F16, BP_KIND_IQ4_NL, BP_KIND_F32, BP_KIND_BF16},
            (const int64_t[]){32, 17, 24, 40, 8, 5}, 6, 512);
    /* Then as the environment says (lavapipe/PoCL when present): the same numbers. */
#define BP_BACKEND(ENUM, name, display, ...) unsetenv("BACKPLANE_" #ENUM);
#include "backend/backends.def"
#undef BP_BACKEND
    nonfinite_input();
    bp_seam_test_reset_enabled();
    cpu_only = false;
    run_set("gemma3 qkv (backends as enabled)", (const bp_kind[]){BP_KIND_Q5_0, BP_KIND_Q5_0, BP_KIND_Q8_0},
            (const int64_t[]){256, 64, 64}, 3, 640);
    return bp_test_finish();
}
