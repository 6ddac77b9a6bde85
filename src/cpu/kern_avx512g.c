/* AVX-512 f32 panel GEMM for the float kinds' large batches (F32, F16, BF16 past their decode
 * kernels' max_batch; the quantized kinds use the int8 GEMM of kern_avx512.c; BF16 outside exact
 * mode on CPUs with AVX512_BF16, the vdpbf16ps GEMM of kern_avx512bf.c). The same panels
 * as the AVX2 GEMM (16 weight rows x KC columns dequantized once, k-major, bp_cpu_pack_panel_f32)
 * with an 8 x 32 micro-kernel on zmm registers over two panels at once (micro2; 8 x 16 for a last
 * single panel): per k two 16-float panel loads, 8 broadcast activations and 16 FMAs; a partial
 * panel is a masked load and store instead of a copy through a tile. On the dev machine (Zen 5, one
 * core) F16 at t = 128 ran ~100 GFLOP/s on the AVX2 GEMM after ~180 from its decode kernel at
 * t = 64. */
#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

#include "cpu/avx512_util.h"

/* MR = 8 inputs, not 12: with rows of x 4096 floats apart (16 KB) every input's line of a
 * micro-kernel call falls in the same L1 set, beside the panel's 4 lines per set; 8 + 4 fit the
 * 12 ways, 12 + 4 did not. One thread, hot 512 x 4096 at t = 512 (Zen 5, min of 20 calls),
 * 12 -> 8: F32 162 -> 180 GFLOP/s, F16 174 -> 184, BF16 171 -> 193; at 4112 columns (no
 * aliasing) both 186 (measured with the one-panel kernel; with two panels, 6 inputs or KC 128,
 * which keep fewer lines per set, measured no faster than 8 and 256). */
enum { MR = 8, NR = BP_CPU_NR, KC = BP_CPU_KC, TB = 512 };

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

/* Two panels side by side: C[M x 32] (+)= X[M x kc] * [P0 P1]; per k two panel loads and M
 * broadcasts feed 2M FMAs (one panel: one load and M broadcasts for M FMAs, a load per FMA). Each
 * (row, input) sums k in the same order either way, so results match the one-panel kernel's.
 * One thread, hot 512 x 4096, t = 512 (Zen 5, min of 20 calls): F16 200 -> 225 GFLOP/s, BF16
 * 198 -> 228; 500 x 4100, t = 300: F32 195 -> 221, F16 198 -> 233, BF16 198 -> 232. */
static ALWAYS_INLINE void micro2(const int M, const float *pk0, const float *pk1, const float *x, int64_t ldx,
                                 int64_t kc, float *c, int64_t ldc, __mmask16 m0, __mmask16 m1, int first) {
    __m512 a0[MR], a1[MR];
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
        a0[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, c + i * ldc);
        a1[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, c + i * ldc + NR);
    }
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(pk0 + k * NR), b1 = _mm512_load_ps(pk1 + k * NR);
        _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
            const __m512 xb = _mm512_set1_ps(x[i * ldx + k]);
            a0[i] = _mm512_fmadd_ps(xb, b0, a0[i]);
            a1[i] = _mm512_fmadd_ps(xb, b1, a1[i]);
        }
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
        _mm512_mask_storeu_ps(c + i * ldc, m0, a0[i]);
        _mm512_mask_storeu_ps(c + i * ldc + NR, m1, a1[i]);
    }
}

static void micro_any(int m, const float *pk, const float *pk1, const float *x, int64_t ldx, int64_t kc, float *c,
                      int64_t ldc, __mmask16 mask, __mmask16 mask1, int first) {
    if (pk1) {
        switch (m) {
#define CASE(K) case K: micro2(K, pk, pk1, x, ldx, kc, c, ldc, mask, mask1, first); break;
        CASE(8) CASE(7) CASE(6) CASE(5) CASE(4) CASE(3) CASE(2)
#undef CASE
        default: micro2(1, pk, pk1, x, ldx, kc, c, ldc, mask, mask1, first); break;
        }
        return;
    }
    switch (m) {
#define CASE(K) case K: micro(K, pk, x, ldx, kc, c, ldc, mask, first); break;
    CASE(8) CASE(7) CASE(6) CASE(5) CASE(4) CASE(3) CASE(2)
#undef CASE
    default: micro(1, pk, x, ldx, kc, c, ldc, mask, first); break;
    }
}

static void gemm_f32(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    float *rowbuf = job->scratch[ith]; /* then the two packed panels: BP_CPU_SCRATCH_FLOATS */
    float *pk = rowbuf + NR * KC, *pk1 = pk + NR * KC;
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    /* Inputs in blocks of at most TB (bp_batch_block): F16 t = 2048, 2 threads, 4096 x 4096
     * (Zen 5) 304 -> 357 GFLOP/s. */
    const int64_t tb = bp_batch_block(T, TB, MR);
    for (int64_t b0 = 0; b0 < T; b0 += tb) {
    const int64_t b1 = T - b0 < tb ? T : b0 + tb;
    for (int64_t c0 = 0; c0 < cols; c0 += KC) {
        const int64_t kc = cols - c0 < KC ? cols - c0 : KC;
        /* Two panels (32 rows) at a time; the last may be one. */
        for (int64_t p = r0; p < r1; p += 2 * NR) {
            const int nr = r1 - p < NR ? (int)(r1 - p) : NR;
            const int nr1 = r1 - p <= NR ? 0 : r1 - p - NR < NR ? (int)(r1 - p - NR) : NR;
            bp_cpu_pack_panel_f32(job, p, nr, c0, kc, rowbuf, pk);
            if (nr1) bp_cpu_pack_panel_f32(job, p + NR, nr1, c0, kc, rowbuf, pk1);
            const __mmask16 mask = (__mmask16)((1u << nr) - 1), mask1 = (__mmask16)((1u << nr1) - 1);
            for (int64_t t0 = b0; t0 < b1; t0 += MR) {
                const int m = b1 - t0 < MR ? (int)(b1 - t0) : MR;
                micro_any(m, pk, nr1 ? pk1 : NULL, job->x + t0 * cols + c0, cols, kc, job->y + t0 * rows + p, rows, mask,
                          mask1, c0 == 0);
            }
        }
    }
    }
}

bool bp_cpu_avx512g_init(bp_cpu_ops *ops) {
    ops->gemm = gemm_f32;
    ops->gemm_name = "panel GEMM (dequant + f32 FMA 8x32)";
    ops->gemm_isa = "avx512";
    return true;
}

#else
bool bp_cpu_avx512g_init(bp_cpu_ops *ops) {
    (void)ops;
    return false;
}
#endif
