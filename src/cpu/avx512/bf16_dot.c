/* BF16 weights at batches t >= 2 on AMD CPUs with AVX512_BF16 (cpu.c: on Intel the exact
 * kernels were faster), outside exact mode: the activations
 * are rounded to bf16 once per call (round to nearest even, as vcvtne2ps2bf16 does: NaN stays a
 * (quiet) NaN, Inf stays Inf, f32 denormals become zero) and multiplied with vdpbf16ps, whose
 * bf16 x bf16 products are exact in f32 and are summed in f32. Only the rounding of x differs
 * from the exact kernels (avx512/float_kinds.c, which exact mode and t = 1 keep): on
 * random 4096-long rows NMSE ~2.5e-6 against float64 (the tolerance table's BF16 gemm row), as
 * ggml's BF16 matmul (x goes to bf16 the same way there). Per the lead's decision (issue 16), the same
 * precision trade as the CUDA GEMMs on f16 tensor cores: BACKPLANE_EXACT=1 opts out.
 *
 * Activations (BP_ACT_BF16): per input bp_cpu_bf16_act_bytes(cols) bytes, the bf16 values then
 * zeros, so a 64-byte load at any column below cols stays in the buffer and reads zeros past
 * it (the weights' last pair may be half: its missing half is a masked zero, times a zero x).
 *
 * Small batches (bp_avx512_vec_bf16r, t = 2 .. MAX_BATCH): a register tile of 8 weight rows x 3 inputs
 * (4 x 4 at t = 4) reads the weight rows as they are: 32 bf16 of a row are one zmm of 16 pairs
 * along k, and so are 32 bf16 of an input, so per 32 columns NJ + NR loads feed NR * NJ
 * vdpbf16ps, and lane l of acc[row][input] sums pair l of every 32 columns; one horizontal sum
 * per (row, input) at the end. Every (row, input) has one accumulator summed in column order
 * whatever tile, row split or input group it falls in, so a result does not depend on the
 * thread count or on the batch. Batches above 4 go through column blocks (COLBLK) as the f32
 * tile does, so each input group re-reads the tile's rows from L1.
 *
 * Large batches (bp_avx512_gemm_bf16r): panels of 16 weight rows x GKC columns repacked per call into the
 * layout vdpbf16ps wants from the weight side, [column pair][16 rows] (16 x 16 dword transposes,
 * each dword a pair of one row's columns); a micro-kernel of GMR inputs x 32 rows (two panels)
 * broadcasts an input's pair (_mm512_set1_epi32) and runs 2 vdpbf16ps per broadcast, the
 * accumulators being the outputs (no horizontal sums). A pair of panels walks its rows' depth
 * blocks in order, and each pack prefetches the same rows' next block, which arrives while the
 * current one is multiplied (with depth blocks outer each pack waited on memory). Each (row,
 * input) sums its pairs in column order, block after block, whatever panel or thread it falls in.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/bf16_dot.c. */
#include <string.h>

#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512BF16__)
#include <immintrin.h>

#include "cpu/avx512/simd.h"

/* A dword read of two bf16 activations (the buffer is written as uint16_t). */
typedef uint32_t __attribute__((may_alias, aligned(1))) u32a;

/* ---- activations ------------------------------------------------------------------------- */

void bp_avx512_quant_bf16(const float *x, int64_t n, void *out) {
    uint16_t *o = out;
    int64_t c = 0;
    for (; c + 32 <= n; c += 32) {
        const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + c + 16), _mm512_loadu_ps(x + c));
        _mm512_storeu_si512((void *)(o + c), (__m512i)h);
    }
    for (; c < n; c += 16) {
        const __mmask16 m = n - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - c)) - 1);
        const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + c));
        _mm256_mask_storeu_epi16((void *)(o + c), m, (__m256i)h);
    }
    memset(o + n, 0, bp_cpu_bf16_act_bytes(n) - (size_t)n * sizeof *o);
}

/* ---- small batches: register tiles over the weight rows as they are ---------------------- */

/* MAX_BATCH: the tile's last batch, the GEMM's from MAX_BATCH + 1. 64: the two cross at t ~ 56-64
 * hot on one thread and ~100-128 streaming a 4096 x 4096 weight on two; from 65 the GEMM is
 * within ~3% of the tile. PART_MAX: the batches the parked accumulators hold. COLBLK: columns
 * per block (2 KB of each weight row, as avx512/float_kinds.c's COLBLK_BYTES; 1 KB was slower,
 * 4 KB alike). 8 x 3 beat 4 x 6 and 6 x 4 tiles.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/bf16_dot.c. */
enum { R = 8, MAX_NJ = 4, MAX_BATCH = 64, PART_MAX = 64, COLBLK = 1024 };
_Static_assert(MAX_BATCH <= PART_MAX, "the parked accumulators hold every input of a tile batch");

/* Columns [c0, c1) of an NR x NJ tile; part: the accumulators between column blocks (read unless
 * c0 == 0; written unless c1 == cols, when the sums go to y). c0 and c1 are multiples of 32 but
 * for c1 == cols. */
static ALWAYS_INLINE void tile(const bp_cpu_job *job, int64_t r, const int NR, const int NJ, int64_t j0, int64_t c0,
                               int64_t c1, __m512 *part) {
    const int64_t n = job->cols;
    const size_t rb = job->row_bytes, xs = job->xq_stride;
    const uint8_t *w = job->w + (size_t)r * rb;
    const uint8_t *x = (const uint8_t *)job->xq + (size_t)j0 * xs;
    __m512 acc[24]; /* NR * NJ <= 24, flat: GCC keeps it in registers */
    _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++)
        _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) acc[i * NJ + j] = c0 ? part[i * NJ + j] : _mm512_setzero_ps();
    /* Prefetch in the first input group only (the others find the block in L1), 1 KB ahead a
     * row in 8-row tiles, 2 KB in 4-row ones (the distances avx512/float_kinds.c's tiles use). */
    const bool pf = j0 == 0;
    const int pfd = NR >= 8 ? 1024 : 2048;
    int64_t c = c0;
    _Pragma("GCC unroll 2") for (; c + 32 <= c1; c += 32) {
        __m512bh xv[MAX_NJ];
        _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) xv[j] = (__m512bh)_mm512_loadu_si512((const void *)(x + (size_t)j * xs + 2 * c));
        _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) {
            const uint8_t *wp = w + (size_t)i * rb + 2 * c;
            if (pf) _mm_prefetch((const char *)(wp + pfd), _MM_HINT_T0);
            const __m512bh wv = (__m512bh)_mm512_loadu_si512((const void *)wp);
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) acc[i * NJ + j] = _mm512_dpbf16_ps(acc[i * NJ + j], wv, xv[j]);
        }
    }
    if (c < c1) { /* the row's last cols % 32 columns (c1 == n): masked weights, zero-padded x */
        const __mmask32 m = (__mmask32)((1u << (c1 - c)) - 1);
        __m512bh xv[MAX_NJ];
        _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) xv[j] = (__m512bh)_mm512_loadu_si512((const void *)(x + (size_t)j * xs + 2 * c));
        _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) {
            const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w + (size_t)i * rb + 2 * c);
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) acc[i * NJ + j] = _mm512_dpbf16_ps(acc[i * NJ + j], wv, xv[j]);
        }
    }
    if (c1 < n) {
        _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) part[i * NJ + j] = acc[i * NJ + j];
    } else {
        _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++)
                job->y[(j0 + j) * job->rows + r + i] = _mm512_reduce_add_ps(acc[i * NJ + j]);
    }
}

/* Rows outer, inputs inner, column blocks of COLBLK columns (2 KB a row) past 4 inputs
 * (avx512/simd.h; the f32 tiles of avx512/float_kinds.c run the same drivers). */
BP_TILE_COLS(tile_cols, tile, R, PART_MAX, COLBLK)

void bp_avx512_vec_bf16r(const bp_cpu_job *job, int64_t r0, int64_t r1) { BP_TILE_ROWS(tile_cols, job, r0, r1, R, R); }

/* ---- large batches: repacked panels, broadcast activations ------------------------------- */

/* GKC: columns per depth block (a panel: 16 rows x GKC bf16 = 16 KB; two in the thread's
 * scratch). GMR: inputs per micro-kernel call (2 x GMR accumulators). */
enum { NR = BP_CPU_NR, GKC = 512, GMR = 12, TB = 512 };
_Static_assert(2 * NR * GKC * 2 <= BP_CPU_SCRATCH_FLOATS * sizeof(float), "two bf16 panels fit the scratch");
_Static_assert(NR == 16, "a panel is one 16 x 16 dword transpose wide");

/* Rows [p, p + nr) x columns [c0, c0 + kc) into pk as [pair][16 rows] dwords (rows past nr and
 * columns past kc zero), in steps of 32 columns: 16 row loads, one transpose, 16 stores. */
static void pack_panel(const bp_cpu_job *job, int64_t p, int nr, int64_t c0, int64_t kc, uint32_t *pk) {
    const size_t rb = job->row_bytes;
    const bool pf = c0 + GKC < job->cols;
    for (int64_t q = 0; q < kc; q += 32) {
        const __mmask32 m = kc - q >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (kc - q)) - 1);
        __m512i v[16];
        for (int i = 0; i < 16; i++) {
            const uint8_t *src = job->w + (size_t)(p + i) * rb + 2 * (size_t)(c0 + q);
            if (pf && i < nr) _mm_prefetch((const char *)(src + 2 * GKC), _MM_HINT_T0);
            v[i] = i < nr ? _mm512_maskz_loadu_epi16(m, src) : _mm512_setzero_si512();
        }
        bp_transpose16_epi32(v);
        for (int j = 0; j < 16; j++) _mm512_store_si512((void *)(pk + (q / 2 + j) * NR), v[j]);
    }
}

/* C[M x 16 NP] (+)= X[M x 2 kp] * [P0 P1]: per pair, NP panel loads and M broadcasts feed
 * M * NP vdpbf16ps. Columns of C past the masks are not touched. */
static ALWAYS_INLINE void micro(const int M, const int NP, const uint32_t *p0, const uint32_t *p1, const uint8_t *x,
                                size_t xs, int64_t kp, float *c, int64_t ldc, __mmask16 m0, __mmask16 m1, int first) {
    __m512 a0[GMR], a1[GMR];
    _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
        a0[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, c + i * ldc);
        if (NP == 2) a1[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, c + i * ldc + NR);
    }
    for (int64_t k = 0; k < kp; k++) {
        const __m512bh b0 = (__m512bh)_mm512_load_si512((const void *)(p0 + k * NR));
        const __m512bh b1 = NP == 2 ? (__m512bh)_mm512_load_si512((const void *)(p1 + k * NR)) : b0;
        _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
            const __m512bh xb = (__m512bh)_mm512_set1_epi32((int)*(const u32a *)(x + (size_t)i * xs + 4 * k));
            a0[i] = _mm512_dpbf16_ps(a0[i], b0, xb);
            if (NP == 2) a1[i] = _mm512_dpbf16_ps(a1[i], b1, xb);
        }
    }
    _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
        _mm512_mask_storeu_ps(c + i * ldc, m0, a0[i]);
        if (NP == 2) _mm512_mask_storeu_ps(c + i * ldc + NR, m1, a1[i]);
    }
}

static void micro_any(int m, const uint32_t *p0, const uint32_t *p1, const uint8_t *x, size_t xs, int64_t kp, float *c,
                      int64_t ldc, __mmask16 m0, __mmask16 m1, int first) {
    if (p1) {
        switch (m) {
#define CASE(K) case K: micro(K, 2, p0, p1, x, xs, kp, c, ldc, m0, m1, first); break;
        CASE(12) CASE(11) CASE(10) CASE(9) CASE(8) CASE(7) CASE(6) CASE(5) CASE(4) CASE(3) CASE(2)
#undef CASE
        default: micro(1, 2, p0, p1, x, xs, kp, c, ldc, m0, m1, first); break;
        }
        return;
    }
    switch (m) {
#define CASE(K) case K: micro(K, 1, p0, p0, x, xs, kp, c, ldc, m0, m0, first); break;
    CASE(12) CASE(11) CASE(10) CASE(9) CASE(8) CASE(7) CASE(6) CASE(5) CASE(4) CASE(3) CASE(2)
#undef CASE
    default: micro(1, 1, p0, p0, x, xs, kp, c, ldc, m0, m0, first); break;
    }
}

void bp_avx512_gemm_bf16r(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    uint32_t *pk0 = (uint32_t *)(void *)job->scratch[ith], *pk1 = pk0 + NR * GKC / 2;
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    const size_t xs = job->xq_stride;
    const uint8_t *xq = job->xq;
    /* Inputs in blocks of at most TB (bp_batch_block): past ~512 inputs the blocks keep the GEMM's
     * inputs in cache (~10% at t = 1024-2048).
     * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/bf16_dot.c. */
    const int64_t tb = bp_batch_block(T, TB, GMR);
    for (int64_t b0 = 0; b0 < T; b0 += tb) {
    const int64_t b1 = T - b0 < tb ? T : b0 + tb;
    for (int64_t p = r0; p < r1; p += 2 * NR) {
        const int nr = r1 - p < NR ? (int)(r1 - p) : NR;
        const int nr1 = r1 - p <= NR ? 0 : r1 - p - NR < NR ? (int)(r1 - p - NR) : NR;
        for (int64_t c0 = 0; c0 < cols; c0 += GKC) {
            const int64_t kc = cols - c0 < GKC ? cols - c0 : GKC, kp = (kc + 1) / 2;
            pack_panel(job, p, nr, c0, kc, pk0);
            if (nr1) pack_panel(job, p + NR, nr1, c0, kc, pk1);
            const __mmask16 m0 = (__mmask16)((1u << nr) - 1), m1 = (__mmask16)((1u << nr1) - 1);
            for (int64_t t0 = b0; t0 < b1; t0 += GMR) {
                const int m = b1 - t0 < GMR ? (int)(b1 - t0) : GMR;
                micro_any(m, pk0, nr1 ? pk1 : NULL, xq + (size_t)t0 * xs + 2 * (size_t)c0, xs, kp, job->y + t0 * rows + p,
                          rows, m0, m1, c0 == 0);
            }
        }
    }
    }
}

#endif
