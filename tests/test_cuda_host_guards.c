/* The CUDA prefill's guards, checked with host data on every build (issue 13; no GPU needed):
 *
 * - f16 overflow: the tensor-core GEMM rounds weights and activations to f16; a finite value
 *   that rounds to infinity would make the result inf/NaN and return it as success. The kernels
 *   flag every value BP_CU_F16_OVERFLOWS says overflows, and the dispatch reruns the op on the
 *   exact f32 kernel. Checked here against the library's own f32 -> f16 rounding
 *   (bp_f32_to_f16, round-to-nearest-even, equal to numpy's astype(float16)): for a sweep of
 *   floats around 65504 and beyond, the predicate is true exactly when a finite value becomes
 *   inf. And on real weights: a Q8_0 block whose scale times a quant exceeds 65504 dequantizes
 *   (bp_dequantize, the CPU reference) to values the predicate flags; an ordinary block does not.
 * - grid limits: gridDim.y <= 65535 caps one GEMM launch at BP_CU_GEMM_MAX_T tokens; the
 *   dispatch launches bp_cu_gemm_slices(t, BP_CU_GEMM_MAX_T) slices, which must cover every
 *   token once with no slice over the limit. */
#include <math.h>
#include <string.h>

#include "cuda/cuda_kernels.h"
#include "harness.h"

static bool f16_is_inf(float v) {
    const uint16_t h = bp_f32_to_f16(v);
    return (h & 0x7fffu) == 0x7c00u;
}

static void check_overflow_predicate(void) {
    /* Exact boundary: 65519.996 rounds down to 65504, 65520 is the tie that rounds up to inf. */
    CHECK(!BP_CU_F16_OVERFLOWS(65504.0f) && !BP_CU_F16_OVERFLOWS(-65504.0f), "65504 is the largest half");
    CHECK(!BP_CU_F16_OVERFLOWS(nextafterf(65520.0f, 0.0f)), "just below 65520 rounds to 65504");
    CHECK(BP_CU_F16_OVERFLOWS(65520.0f) && BP_CU_F16_OVERFLOWS(-65520.0f), "65520 rounds to inf");
    CHECK(!BP_CU_F16_OVERFLOWS(INFINITY) && !BP_CU_F16_OVERFLOWS(-INFINITY) && !BP_CU_F16_OVERFLOWS(NAN),
          "inf and NaN are not an overflow of ours (the non-finite input policy handles them)");
    int checked = 0, bad = 0;
    for (float v = 60000.0f; v < 80000.0f; v = nextafterf(v, INFINITY)) {
        for (int sgn = 0; sgn < 2; sgn++) {
            const float x = sgn ? -v : v;
            bad += BP_CU_F16_OVERFLOWS(x) != f16_is_inf(x);
            checked++;
        }
    }
    for (float v = 1.0f; v < 3e38f; v *= 1.37f) bad += BP_CU_F16_OVERFLOWS(v) != f16_is_inf(v), checked++;
    CHECK(bad == 0, "predicate vs bp_f32_to_f16 on %d values: %d disagree", checked, bad);
}

/* A Q8_0 block is {f16 d, int8 q[32]}: value = d * q. */
static void q8_block(uint8_t blk[34], float d, int q) {
    const uint16_t h = bp_f32_to_f16(d);
    memcpy(blk, &h, 2);
    for (int i = 0; i < 32; i++) blk[2 + i] = (uint8_t)(int8_t)(i % 2 ? q : -q / 2);
}

static void check_weights(void) {
    uint8_t blk[34];
    float v[32];
    q8_block(blk, 1000.0f, 127); /* 127000 > 65504 */
    CHECK_OK(bp_dequantize(BP_KIND_Q8_0, blk, sizeof blk, v, 32));
    bool flagged = false;
    for (int i = 0; i < 32; i++) flagged = flagged || BP_CU_F16_OVERFLOWS(v[i]);
    CHECK(flagged && isfinite(v[1]) && v[1] > 65504.0f, "a Q8_0 block of d=1000, q=127 (%g) is flagged", v[1]);
    q8_block(blk, 0.01f, 127);
    CHECK_OK(bp_dequantize(BP_KIND_Q8_0, blk, sizeof blk, v, 32));
    flagged = false;
    for (int i = 0; i < 32; i++) flagged = flagged || BP_CU_F16_OVERFLOWS(v[i]);
    CHECK(!flagged, "an ordinary Q8_0 block is not flagged");
}

static void check_slices(void) {
    CHECK(BP_CU_GEMM_MAX_T / BP_CU_GEMM_TILE == 65535, "one launch: at most 65535 blocks in y");
    static const long long ts[] = {1, 2, 63, 64, 65, 512, BP_CU_GEMM_MAX_T - 1, BP_CU_GEMM_MAX_T,
                                   BP_CU_GEMM_MAX_T + 1, 3LL * BP_CU_GEMM_MAX_T + 7, 33554431};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        const long long t = ts[i];
        const int n = bp_cu_gemm_slices(t, BP_CU_GEMM_MAX_T);
        long long covered = 0;
        bool ok = n >= 1;
        for (int s = 0; s < n; s++) {
            const long long t0 = (long long)s * BP_CU_GEMM_MAX_T;
            const long long tt = t - t0 < BP_CU_GEMM_MAX_T ? t - t0 : BP_CU_GEMM_MAX_T;
            const long long blocks_y = (tt + BP_CU_GEMM_TILE - 1) / BP_CU_GEMM_TILE;
            ok = ok && t0 == covered && tt > 0 && blocks_y <= 65535;
            covered += tt;
        }
        CHECK(ok && covered == t, "t=%lld: %d slices cover %lld tokens, each within gridDim.y", t, n, covered);
    }
    CHECK(bp_cu_gemm_slices(0, BP_CU_GEMM_MAX_T) == 0, "no tokens, no launch");
}

int main(void) {
    check_overflow_predicate();
    check_weights();
    check_slices();
    return bp_test_finish();
}
