/* AVX-512 f32 panel GEMM for the float kinds' large batches (F32, F16, BF16 past their decode
 * kernels' max_batch; the quantized kinds use the int8 GEMM of kern_avx512.c). The same panels
 * as the AVX2 GEMM (16 weight rows x KC columns dequantized once, k-major, bp_cpu_pack_panel_f32)
 * with an 8 x 16 micro-kernel on zmm registers (MR below): per k one 16-float panel load, 8 broadcast
 * activations and 8 FMAs, twice the AVX2 6 x 16 kernel's work per instruction; a partial panel
 * is a masked load and store instead of a copy through a tile. On the dev machine (Zen 5, one
 * core) F16 at t = 128 ran ~100 GFLOP/s on the AVX2 GEMM after ~180 from its decode kernel at
 * t = 64. */
#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* MR = 8 inputs, not 12: with rows of x 4096 floats apart (16 KB) every input's line of a
 * micro-kernel call falls in the same L1 set, beside the panel's 4 lines per set; 8 + 4 fit the
 * 12 ways, 12 + 4 did not. One thread, hot 512 x 4096 at t = 512 (Zen 5, min of 20 calls),
 * 12 -> 8: F32 162 -> 180 GFLOP/s, F16 174 -> 184, BF16 171 -> 193; at 4112 columns (no
 * aliasing) both 186. */
enum { MR = 8, NR = BP_CPU_NR, KC = BP_CPU_KC };

/* C[M x 16] (+)= X[M x kc] * P[kc x 16]; columns of C past the mask are not touched. */
static ALWAYS_INLINE void micro(const int M, const float *pk, const float *x, int64_t ldx, int64_t kc, float *c,
                                int64_t ldc, __mmask16 mask, int first) {
    __m512 acc[MR];
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) acc[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, c + i * ldc);
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b = _mm512_load_ps(pk + k * NR);
        _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(x[i * ldx + k]), b, acc[i]);
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) _mm512_mask_storeu_ps(c + i * ldc, mask, acc[i]);
}

static void micro_any(int m, const float *pk, const float *x, int64_t ldx, int64_t kc, float *c, int64_t ldc,
                      __mmask16 mask, int first) {
    switch (m) {
#define CASE(K) case K: micro(K, pk, x, ldx, kc, c, ldc, mask, first); break;
    CASE(8) CASE(7) CASE(6) CASE(5) CASE(4) CASE(3) CASE(2)
#undef CASE
    default: micro(1, pk, x, ldx, kc, c, ldc, mask, first); break;
    }
}

static void gemm_f32(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    float *rowbuf = job->scratch[ith];
    float *pk = rowbuf + NR * KC;
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    for (int64_t c0 = 0; c0 < cols; c0 += KC) {
        const int64_t kc = cols - c0 < KC ? cols - c0 : KC;
        for (int64_t p = r0; p < r1; p += NR) {
            const int nr = r1 - p < NR ? (int)(r1 - p) : NR;
            bp_cpu_pack_panel_f32(job, p, nr, c0, kc, rowbuf, pk);
            const __mmask16 mask = (__mmask16)((1u << nr) - 1);
            for (int64_t t0 = 0; t0 < T; t0 += MR) {
                const int m = T - t0 < MR ? (int)(T - t0) : MR;
                micro_any(m, pk, job->x + t0 * cols + c0, cols, kc, job->y + t0 * rows + p, rows, mask, c0 == 0);
            }
        }
    }
}

bool bp_cpu_avx512g_init(bp_cpu_ops *ops) {
    ops->gemm = gemm_f32;
    ops->gemm_name = "panel GEMM (dequant + f32 FMA 8x16)";
    ops->gemm_isa = "avx512";
    return true;
}

#else
bool bp_cpu_avx512g_init(bp_cpu_ops *ops) {
    (void)ops;
    return false;
}
#endif
