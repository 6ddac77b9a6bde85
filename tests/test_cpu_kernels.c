/* Every CPU kernel against the reference (bp_ref_gemm, double accumulation over the kinds'
 * reference dequantizers), for every weight kind, every ISA path this machine has, awkward
 * shapes (rows not a multiple of the thread count / SIMD width / panel, one block per row,
 * wide rows, column counts that leave a partial GEMM depth block) and odd batches. Also:
 * the result is bit-identical for 1, 2 and 3 threads, and with the AVX512_VBMI kernels on or
 * off. BF16 runs twice: as the library runs it (t >= 2 may round x to bf16 on AVX512_BF16 CPUs:
 * the table's BF16 gemm row, test_cpu_bf16 has the rest) and in exact mode, where every BF16
 * kernel is held to the FLOAT bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testing/tolerance.h"
#include "cpu/cpu_internal.h"
#include "harness.h"

static int g_verbose; /* BP_TEST_VERBOSE=1: print every NMSE and the kernel that produced it */

typedef struct shape {
    int64_t rows, cols;
} shape;

/* exact: run in exact mode (bp_set_exact_mode(true), set by the caller). */
static void check_kind(const bp_kind_info *ki, uint64_t *rng, bool exact) {
    const int64_t be = ki->block_elems;
    const shape shapes[] = {
        {37, be},                        /* one block per row; rows odd, not a panel multiple */
        {19, 4096},                      /* wide rows: 16 GEMM depth blocks */
        {50, 768},                       /* 3 depth blocks exactly */
        {35, be == 1 ? 37 : be * 5},     /* a partial depth block; odd columns for the float kinds */
        {21, be == 1 ? 1100 : 0},        /* float kinds: 2 KB column blocks with a tail (avx512/float_kinds.c) */
        {1100, be == 256 ? 256 : 0},     /* one thread's chunk (~1/8 of the rows) over 128 rows: the
                                          * 16-input kernels' row blocks (avx512/decode_kquant.c) */
        {17, be == 32 ? 352 : 0},        /* 32-element kinds: a partial GEMM depth block after a whole one */
    };
    /* Every way the multi-input kernels split a batch (8 + 5 = 13, 6, 7, ...), each side of the
     * max_batch limits (12, 16, 20, 24, 28, 32, 40, 44, 48, 64) and past them (65: the GEMM for
     * most kinds; on AVX2 Q8_0 and IQ2_XXS run their kernels to 128, IQ3_XXS / IQ3_S to 512 and
     * TQ2_0 at every batch, whose GEMM panels test_cpu_dequant checks); 9: a partly filled 16-input panel (avx512/decode_grid_lowbit.c, from t = 9); 400: the int8
     * GEMM's requantized panels for the kinds with direct ones below it (avx512/gemm_int8.c). */
    const int64_t batches[] = {1,  2,  3,  5,  6,  7,  8,  9,  12, 13, 16, 17, 20, 21, 24, 25,
                               28, 29, 32, 33, 40, 41, 44, 45, 48, 49, 64, 65, 400};
    /* quick (valgrind, TSan): no 4096-wide rows, batches 1, 5 and 65, one thread count */
    const bool quick = bp_test_quick();
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        if (quick && (shapes[si].cols == 4096 || shapes[si].rows == 1100)) continue;
        if (shapes[si].cols == 0) continue;
        const int64_t rows = shapes[si].rows, cols = shapes[si].cols;
        size_t rb, wbytes = 0;
        if (bp_kind_row_bytes(ki->kind, cols, &rb) != BP_OK) continue;
        uint8_t *w = bp_test_make_weight(ki->kind, rows, cols, rng, &wbytes);
        bp_weight wt;
        memset(&wt, 0, sizeof wt);
        bool wt_used = false;
        const int64_t tmax = 400;
        float *x = malloc(sizeof(float) * (size_t)(tmax * cols));
        float *ref = malloc(sizeof(float) * (size_t)(tmax * rows));
        float *got = malloc(sizeof(float) * (size_t)(tmax * rows));
        float *got1 = malloc(sizeof(float) * (size_t)(tmax * rows));
        float *big = malloc(sizeof(float) * (size_t)(tmax * rows)); /* t = 64, for the grouping check */
        /* Every kind has a finished reference now: a weight that cannot be made, or a non-finite
         * reference output, is a failure (it was a skip while kinds were pending). */
        CHECK(w != NULL, "%s: no %lld x %lld test weight: %s", ki->name, (long long)rows, (long long)cols,
              bp_last_error());
        if (!w) goto next;
        for (int64_t i = 0; i < tmax * cols; i++) x[i] = bp_test_randf(rng);
        wt_used = true;
        CHECK(bp_weight_init(&wt, ki->kind, w, wbytes, rows, cols) == BP_OK, "%s: %s", ki->name, bp_last_error());
        for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
            const int64_t t = batches[bi];
            if (quick && t != 1 && t != 5 && t != 65) continue;
            if (rows == 1100 && t != 17 && t != 33) continue; /* 16 + 1 and 32 + 1 inputs: enough */
            /* 400: past the int8 GEMM's direct panels (avx512/gemm_int8.c: t <= 160 / 384) to its
             * requantized ones, on the small shapes only */
            if (t == 400 && (cols == 4096 || rows > 64)) continue;
            CHECK_OK(bp_ref_gemm(ki->kind, w, rb * (size_t)rows, rows, cols, x, t, ref));
            CHECK(bp_test_all_finite(ref, (size_t)(t * rows)), "%s t=%lld: the reference output is not finite",
                  ki->name, (long long)t);
            const char *op = t == 1 ? "matvec" : "gemm";
            /* BF16 has a looser gemm row for the kernels that round x to bf16 (avx512/bf16_dot.c);
             * every other BF16 kernel -- exact mode, t = 1, paths without AVX512_BF16 -- is held
             * to the FLOAT class bound (F32's row). test_cpu_bf16 checks which kernel runs where. */
            const double tol_exact = bp_test_tolerance(BP_KIND_F32, op);
            for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
                if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
                CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
                /* Passes 0-2: 1, 2 and 3 threads, bit-identical. Pass 3: repacking off, so the
                 * plain-layout kernels (the fallback when a copy cannot be allocated) run too;
                 * they sum in another order, so only their error is checked. */
                /* Passes 4 and 5 (batch 1, kinds with two decode kernels on this path): the main
                 * and the alternative kernel, not only the one the first-use timing picked. */
                const int npass = t == 1 && bp_cpu_has_decode_alt(ki->kind) ? 6 : 4;
                for (int pass = 0; pass < npass; pass++) {
                    if (quick && (pass == 1 || pass == 2)) continue; /* thread counts: TSan's job */
                    const int nth = pass < 3 ? pass + 1 : 2;
                    bp_cpu_set_repack(pass != 3);
                    bp_cpu_set_decode_pick(pass < 4 ? 0 : pass - 3);
                    CHECK_OK(bp_cpu_set_threads(nth));
                    float *out = pass == 0 ? got1 : got;
                    for (int64_t i = 0; i < t * rows; i++) out[i] = NAN;
                    CHECK_OK(bp_cpu_gemm(&wt, x, t, out));
                    double e = bp_test_nmse(out, ref, (size_t)(t * rows));
                    const bool rounded = strstr(bp_cpu_kernel_name(ki->kind, t), "rounded to bf16") != NULL;
                    CHECK(!(rounded && exact), "%s t=%lld: exact mode ran %s", ki->name, (long long)t,
                          bp_cpu_kernel_name(ki->kind, t));
                    const double tol = bp_tolerance_float_class(ki->kind) && !rounded ? tol_exact : bp_test_tolerance(ki->kind, op);
                    if (g_verbose && (pass == 0 || pass >= 3))
                        fprintf(stderr, "%-8s %-7s %4lldx%-5lld t=%-3lld NMSE %.2e  %s%s%s\n", ki->name,
                                bp_cpu_isa_name((bp_cpu_isa)isa), (long long)rows, (long long)cols,
                                (long long)t, e, bp_cpu_kernel_name(ki->kind, t), pass == 3 ? " [repack off]" : "",
                                exact ? " [exact mode]" : "");
                    CHECK(e <= tol, "%s %s [%s]%s%s %lldx%lld t=%lld threads=%d: NMSE %.3g > %.3g", ki->name,
                          bp_cpu_isa_name((bp_cpu_isa)isa), bp_cpu_kernel_name(ki->kind, t),
                          pass == 3 ? " repack off" : "", exact ? " exact mode" : "", (long long)rows, (long long)cols,
                          (long long)t, nth, e, tol);
                    if (pass == 1 || pass == 2)
                        CHECK(!memcmp(out, got1, sizeof(float) * (size_t)(t * rows)),
                              "%s %s %lldx%lld t=%lld: %d threads differ from 1 thread", ki->name,
                              bp_cpu_isa_name((bp_cpu_isa)isa), (long long)rows, (long long)cols, (long long)t, nth);
                    /* The k-quant kernels (avx512/decode_kquant.c) and the grid / IQ1 kernels (avx512/decode_grid_lowbit.c)
                     * promise more: an input's result does not depend on the batch it came in (row-kernel
                     * and 16/32-input panel groups sum alike). Checked against t = 64, or t = 32 or 16 where
                     * that is the kernel's last batch. */
                    const char *kn = bp_cpu_kernel_name(ki->kind, t);
                    const int64_t tb = !strcmp(kn, bp_cpu_kernel_name(ki->kind, 64)) ? 64
                                       : t < 32 && !strcmp(kn, bp_cpu_kernel_name(ki->kind, 32)) ? 32
                                       : t < 16 && !strcmp(kn, bp_cpu_kernel_name(ki->kind, 16)) ? 16 : 0;
                    if (pass == 0 && t >= 2 && t < tb && (strstr(kn, "16-32 from t = 16") || strstr(kn, "16-32 from t = 9"))) {
                        CHECK_OK(bp_cpu_gemm(&wt, x, tb, big));
                        CHECK(!memcmp(out, big, sizeof(float) * (size_t)(t * rows)),
                              "%s %s %lldx%lld: t=%lld differs from the first %lld inputs of t=%lld", ki->name,
                              bp_cpu_isa_name((bp_cpu_isa)isa), (long long)rows, (long long)cols, (long long)t, (long long)t,
                              (long long)tb);
                    }
                }
                bp_cpu_set_repack(true);
                bp_cpu_set_decode_pick(0);
                /* Kinds with an AVX512_VBMI kernel (vpermb lookups): the kernel it replaced too, where
                 * the CPU has VBMI. Same bytes from either lookup, same sums: bit for bit pass 0's. */
                if (bp_cpu_has_vbmi_kernel(ki->kind)) {
                    const char *with = bp_cpu_kernel_name(ki->kind, t);
                    bp_cpu_set_vbmi(false);
                    const char *without = bp_cpu_kernel_name(ki->kind, t);
                    CHECK_OK(bp_cpu_set_threads(2));
                    for (int64_t i = 0; i < t * rows; i++) got[i] = NAN;
                    CHECK_OK(bp_cpu_gemm(&wt, x, t, got));
                    bp_cpu_set_vbmi(true);
                    const double e = bp_test_nmse(got, ref, (size_t)(t * rows));
                    if (g_verbose)
                        fprintf(stderr, "%-8s %-7s %4lldx%-5lld t=%-3lld NMSE %.2e  %s [VBMI off]\n", ki->name,
                                bp_cpu_isa_name((bp_cpu_isa)isa), (long long)rows, (long long)cols, (long long)t, e, without);
                    CHECK(e <= bp_test_tolerance(ki->kind, op), "%s %s [%s] VBMI off %lldx%lld t=%lld: NMSE %.3g > %.3g",
                          ki->name, bp_cpu_isa_name((bp_cpu_isa)isa), without, (long long)rows, (long long)cols,
                          (long long)t, e, bp_test_tolerance(ki->kind, op));
                    CHECK(!memcmp(got, got1, sizeof(float) * (size_t)(t * rows)),
                          "%s %s %lldx%lld t=%lld: [%s] and [%s] differ", ki->name, bp_cpu_isa_name((bp_cpu_isa)isa),
                          (long long)rows, (long long)cols, (long long)t, without, with);
                }
            }
        }
    next:
        /* Kernels that repack keep their copy in the weight, as bp_weight_free would free it. */
        if (wt_used && wt.backend_state[BP_BACKEND_CPU] && wt.backend_free[BP_BACKEND_CPU])
            wt.backend_free[BP_BACKEND_CPU](wt.backend_state[BP_BACKEND_CPU]);
        free(w);
        free(x);
        free(ref);
        free(got);
        free(got1);
        free(big);
    }
}

int main(int argc, char **argv) {
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    bp_cpu_set_min_parallel_bytes(0);
    g_verbose = getenv("BP_TEST_VERBOSE") != NULL;
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++)
        fprintf(stderr, "ISA %s: %s\n", bp_cpu_isa_name((bp_cpu_isa)isa),
                bp_cpu_isa_available((bp_cpu_isa)isa) ? "tested" : "not available here");
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
        if (argc > 1 && strcmp(argv[1], ki->name)) continue;
        check_kind(ki, &rng, false);
        if (ki->kind == BP_KIND_BF16) {
            /* Again in exact mode: the exact f32 kernels at every batch, at the FLOAT bound. */
            const bool was = bp_exact_mode();
            bp_set_exact_mode(true);
            check_kind(ki, &rng, true);
            bp_set_exact_mode(was);
        }
    }
    /* Bad input is an error, never a crash. */
    bp_weight bad;
    uint8_t bytes[64] = {0};
    float xv[64] = {0}, yv[4];
    CHECK(bp_weight_init(&bad, BP_KIND_Q4_0, bytes, sizeof bytes, 2, 33) == BP_E_SHAPE,
          "Q4_0 with 33 columns must be BP_E_SHAPE");
    memset(&bad, 0, sizeof bad); /* made by hand: no kind traits resolved */
    bad.kind = BP_KIND_Q4_0, bad.rows = 2, bad.cols = 32, bad.row_bytes = 18, bad.data = bytes;
    CHECK(bp_cpu_matvec(&bad, xv, yv) == BP_E_INVAL, "a weight not made by bp_weight_init must be BP_E_INVAL");
    CHECK(bp_cpu_matvec(NULL, xv, yv) == BP_E_INVAL, "NULL weight must be BP_E_INVAL");
    return bp_test_finish();
}
