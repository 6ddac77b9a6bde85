/* Large batches through the CPU GEMMs: past ~512 inputs the AVX-512 GEMMs (int8 avx512/gemm_int8.c,
 * vdpbf16ps avx512/bf16_dot.c) work in near-equal blocks of inputs, each a whole pass over the
 * weights, and the float kinds' quads (avx512/float_kinds.c) in chunks of 64. Checked on every CPU path this machine has, 40 rows (two panels and a partial one) x
 * a whole depth block and a partial one, t = 1100 (three blocks), for the float kinds (F32, F16,
 * BF16 in exact mode and not) and quantized kinds on both int8 panel forms (Q8_0, Q4_K, IQ4_XS
 * and IQ2_XXS decoded straight to int8, Q6_K requantized):
 * - against the float64 reference (bp_ref_gemm) within the tolerance table's bound;
 * - an input's result does not depend on the batch it came in: windows of 520 inputs (past every
 *   batch limit where an int8 GEMM changes its panel form, and past the AVX2 grid kinds' decoded
 *   tile, which serves up to 512 inputs: a window inside it runs another kernel) at the start,
 *   across the first block boundary and across the last, each run as a batch of its own, equal
 *   the t = 1100 outputs bit for bit (a block that started at the wrong input, or a block left
 *   out, fails this even where the error bound would not see it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testing/tolerance.h"
#include "cpu/cpu_internal.h"
#include "harness.h"

static void check_kind(const char *name, bool exact, uint64_t *rng) {
    const bp_kind kind = bp_kind_by_name(name)->kind;
    const bp_kind_info *ki = bp_kind_by_name(name);
    const int64_t rows = 40, T = 1100, W = 520;
    const int64_t cols = ki->block_elems == 256 ? 768 : ki->block_elems == 1 ? 300 : 800; /* a partial depth block but for 256 */
    const int64_t win[] = {0, 330, T - W};
    size_t wbytes = 0;
    uint8_t *w = bp_test_make_weight(kind, rows, cols, rng, &wbytes);
    float *x = malloc(sizeof(float) * (size_t)(T * cols)), *ref = malloc(sizeof(float) * (size_t)(T * rows)),
          *got = malloc(sizeof(float) * (size_t)(T * rows)), *part = malloc(sizeof(float) * (size_t)(W * rows));
    bp_weight *wt = NULL;
    CHECK(w && x && ref && got && part, "%s: out of memory", name);
    if (!w || !x || !ref || !got || !part) goto out;
    CHECK_OK(bp_weight_create(kind, w, wbytes, rows, cols, &wt));
    if (!wt) goto out;
    for (int64_t i = 0; i < T * cols; i++) x[i] = bp_test_randf(rng);
    CHECK_OK(bp_ref_gemm(kind, w, wbytes, rows, cols, x, T, ref));
    bp_set_exact_mode(exact);
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        const char *kn = bp_cpu_kernel_name(kind, T);
        for (int64_t i = 0; i < T * rows; i++) got[i] = NAN; /* nothing left from the previous path */
        CHECK_OK(bp_cpu_gemm(wt, x, T, got));
        const bool rounded = strstr(kn, "rounded to bf16") != NULL;
        const double tol = rounded || !bp_tolerance_float_class(kind) ? bp_test_tolerance(kind, "gemm")
                                                                       : bp_test_tolerance(BP_KIND_F32, "gemm");
        const double e = bp_test_nmse(got, ref, (size_t)(T * rows));
        CHECK(e <= tol, "%s %s%s t=%lld [%s]: NMSE %.3g > %.3g", name, bp_cpu_isa_name((bp_cpu_isa)isa),
              exact ? " exact" : "", (long long)T, kn, e, tol);
        for (size_t k = 0; k < sizeof win / sizeof win[0]; k++) {
            CHECK_OK(bp_cpu_gemm(wt, x + win[k] * cols, W, part));
            CHECK(!memcmp(part, got + win[k] * rows, sizeof(float) * (size_t)(W * rows)),
                  "%s %s%s: inputs %lld..%lld as a batch of %lld differ from the same inputs in a batch of %lld",
                  name, bp_cpu_isa_name((bp_cpu_isa)isa), exact ? " exact" : "", (long long)win[k],
                  (long long)(win[k] + W - 1), (long long)W, (long long)T);
        }
    }
    bp_set_exact_mode(false);
out:
    bp_weight_free(wt);
    free(w), free(x), free(ref), free(got), free(part);
}

int main(void) {
    bp_cpu_set_min_parallel_bytes(0);
    CHECK_OK(bp_cpu_set_threads(2));
    const bool was = bp_exact_mode();
    uint64_t rng = 0xb10c5;
    check_kind("F32", false, &rng);
    check_kind("F16", false, &rng);
    bp_cpu_set_bf16_dot(1); /* the vdpbf16ps GEMM where the CPU has it, whatever its maker */
    check_kind("BF16", false, &rng);
    bp_cpu_set_bf16_dot(0);
    check_kind("BF16", true, &rng);
    const char *quantized[] = {"Q8_0", "Q4_K", "IQ4_XS", "IQ2_XXS", "Q6_K"};
    for (size_t i = 0; i < sizeof quantized / sizeof quantized[0]; i++) check_kind(quantized[i], false, &rng);
    bp_set_exact_mode(was);
    return bp_test_finish();
}
