/* AVX-512 decode and small-batch kernels for the float kinds (F32, F16, BF16): a register tile
 * of R = 8 rows by up to 3 inputs, or 4 x 4 for a batch of 4 (one pass over the weights: 2 + 2
 * read them twice and ran F32 at 0.66x ggml). Wider input tiles (2 x 8) measured slower on the
 * dev machine. Column blocking for every batch did too (short weight streams defeat the
 * prefetcher), so batches up to 4 (one group of inputs) stream whole rows; larger ones, where
 * each group re-reads the tile's rows, go through 2 KB blocks of each row so that the re-reads
 * come from L1 (COLBLK_BYTES, measured there). Per 16 columns: NJ activation loads, then per row one
 * weight load (converted to f32: vcvtph2ps for F16; BF16 per 32 columns, the even elements by a
 * shift and the odd ones by a mask, against activations stored in that order, BP_ACT_F32EO: on
 * the Intel Xeon VM, 2 threads, 4096 x 4096, t = 4 176 -> 207 GFLOP/s, t = 8 196 -> 222, t = 16
 * 222 -> 240, where widening 16 at a time in order took two operations) and NJ FMAs, so an
 * activation load serves 8 rows and a weight load NJ inputs (the AVX2 kernels loaded both per
 * FMA, and ran once per input). The accumulators hide the FMA latency; these kernels keep
 * exact f32 products (no bf16/f16 dot instructions: the tests hold them to the FLOAT bound). BF16
 * batches (t >= 2) outside exact mode run kern_avx512bf.c instead on AMD CPUs with AVX512_BF16.
 *
 * Batch 1 runs a one-row kernel (below: ROW_KERNEL, every float kind),
 * faster cold than the tile. Each tile row is prefetched ahead (1 KB in 8-row tiles, 2 KB in
 * 4-row ones, by the first group of inputs only): eight weight streams at once outran the
 * hardware prefetcher.
 *
 * Every (row, input) has one accumulator summed in column order, whatever tile it falls in,
 * so results do not depend on the thread count (the row split) or the batch grouping. The
 * column tail (cols % 16) is a masked load. */
#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

#include "cpu/avx2_util.h"
#include "cpu/avx512_util.h"

/* COLBLK_BYTES: a column block's bytes per weight row (8 rows: 16 KB, a third of L1). One
 * thread, hot 512 x 4096 weight, Zen 5, min of 200 calls, unblocked -> 2 KB blocks: F32 t = 8
 * 119 -> 145 GFLOP/s, t = 32 121 -> 159; F16 t = 16 186 -> 200; BF16 t = 8 177 -> 196, t = 16
 * 184 -> 203, t = 32 190 -> 210 (4 KB blocks were a little slower for the half kinds, 1 KB for F32).
 * On the Intel Xeon VM (2 threads, 4096 x 4096, hot, 5 rounds) 1, 3 and 4 KB read F32 t = 8-32
 * within 5% of 2 KB either way; a row stride off the power of two (4112, 4160 columns) read the
 * same, so set conflicts in L1 are not what holds the float tiles at ~40-45% of the FMA peak
 * there at t = 16-32 (ggml's likewise); nor is memory: the second input group prefetching the
 * next column block (into L1 or L2) read 0.91-0.99x. */
enum { R = 8, MAX_NJ = 4, MAX_BATCH = 64, COLBLK_BYTES = 2048 };

static ALWAYS_INLINE __m512 ld_f32(const uint8_t *p, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, (const float *)(const void *)p);
}
static ALWAYS_INLINE __m512 ld_f16(const uint8_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
static ALWAYS_INLINE __m512 ld_bf16(const uint8_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

/* Columns [c0, c1) of an NR x NJ tile over weight rows w, w + rb, ... whose column c sits at
 * (c - corg) * ESZ; part: the tile's accumulators between column blocks (read unless c0 == 0;
 * written unless c1 == n, when the sums go to y instead). PF: prefetch the rows ahead (the
 * weights themselves; not a converted copy). XQ: the inputs come as BP_ACT_F32EO (job->xq)
 * instead of x. SPLIT (BF16 weights, XQ): each whole 32 columns widen as their even elements (a
 * 16-bit shift of the 32 bf16) and their odd ones (a mask), one operation per 16 weights where
 * ld_bf16 takes two, against the activations in the same order; the rest as ld_bf16. save: the
 * f32 weights are stored there too, in the order they were multiplied (CONV_STRIDE a row). */
#define FLOAT_TILE(NAME, LOAD, ESZ, PF, XQ, SPLIT)                                                            \
    static ALWAYS_INLINE void NAME(const bp_cpu_job *job, int64_t r, const int NR, const int NJ, int64_t j0,   \
                                   int64_t c0, int64_t c1, __m512 *part, const uint8_t *w, size_t rb,         \
                                   int64_t corg, float *save) {                                               \
        const int64_t n = job->cols;                                                                       \
        const int64_t xn = (XQ) ? (int64_t)(job->xq_stride / sizeof(float)) : n;                           \
        const float *x = ((XQ) ? (const float *)job->xq : job->x) + j0 * xn;                               \
        __m512 acc[24]; /* NR * NJ <= 24, flat: GCC keeps it in registers */                              \
        _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++)                                               \
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++)                                           \
                acc[i * NJ + j] = c0 ? part[i * NJ + j] : _mm512_setzero_ps();                             \
        /* Prefetch in the first group only (the others find the block in L1): a prefetch per row \
         * and 16 columns in every group cost 15-18% at t = 16-32 (one thread, hot 512 x 4096, F32,  \
         * F16 and BF16 alike; 2 threads at 4096 x 4096 read the same either way). */                \
        const bool pf = (PF) && j0 == 0;                                                                   \
        /* About 8 KB ahead over all rows: 4-row tiles (batch 4) 2 KB a row, where 1 KB read F32,     \
         * F16, BF16 at 103-106, 186-190, 184-193 GFLOP/s and 2 KB 111-113, 206-212, 195-207 (2   \
         * threads, 4096 x 4096); 2 KB in the 8-row tiles lost ~3% at t = 16. */                  \
        const int pfd = NR >= 8 || job->batch == 2 ? 1024 : 2048;                                          \
        int64_t c = c0;                                                                                    \
        /* SPLIT: the evens of all rows, then the odds (the 32 bf16 loaded twice: evens and odds \
         * of 3 inputs held at once beside 24 accumulators would need 33 registers) */           \
        if (SPLIT)                                                                                         \
            for (; c + 32 <= c1; c += 32) {                                                                \
                const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);                                    \
                for (int h = 0; h < 2; h++) {                                                              \
                    __m512 xv[MAX_NJ];                                                                     \
                    _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) xv[j] = _mm512_loadu_ps(x + j * xn + c + 16 * h); \
                    _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) {                                 \
                        const uint8_t *wp = w + (size_t)i * rb + (size_t)(c - corg) * (ESZ);               \
                        if (pf && h == 0) _mm_prefetch((const char *)(wp + pfd), _MM_HINT_T0);             \
                        const __m512i v = _mm512_loadu_si512((const void *)wp);                            \
                        const __m512 wv = _mm512_castsi512_ps(h ? _mm512_and_si512(v, hi) : _mm512_slli_epi32(v, 16)); \
                        if (save) _mm512_store_ps(save + i * CONV_STRIDE + (c - c0) + 16 * h, wv);         \
                        _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++)                               \
                            acc[i * NJ + j] = _mm512_fmadd_ps(wv, xv[j], acc[i * NJ + j]);                 \
                    }                                                                                      \
                }                                                                                          \
            }                                                                                              \
        _Pragma("GCC unroll 2") for (; c + 16 <= c1; c += 16) {                                            \
            __m512 xv[MAX_NJ];                                                                             \
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) xv[j] = _mm512_loadu_ps(x + j * xn + c);  \
            _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) {                                         \
                if (pf)                                                                                    \
                _mm_prefetch((const char *)(w + (size_t)i * rb + (size_t)(c - corg) * (ESZ) + pfd), _MM_HINT_T0); \
                __m512 wv = LOAD(w + (size_t)i * rb + (size_t)(c - corg) * (ESZ), 0xffff);                 \
                if (save) _mm512_store_ps(save + i * CONV_STRIDE + (c - c0), wv);                            \
                _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++)                                       \
                    acc[i * NJ + j] = _mm512_fmadd_ps(wv, xv[j], acc[i * NJ + j]);                         \
            }                                                                                              \
        }                                                                                                  \
        if (c < c1) {                                                                                      \
            const __mmask16 m = (__mmask16)((1u << (c1 - c)) - 1);                                         \
            __m512 xv[MAX_NJ];                                                                             \
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) xv[j] = _mm512_maskz_loadu_ps(m, x + j * xn + c); \
            _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) {                                         \
                __m512 wv = LOAD(w + (size_t)i * rb + (size_t)(c - corg) * (ESZ), m);                      \
                if (save) _mm512_store_ps(save + i * CONV_STRIDE + (c - c0), wv);                            \
                _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++)                                       \
                    acc[i * NJ + j] = _mm512_fmadd_ps(wv, xv[j], acc[i * NJ + j]);                         \
            }                                                                                              \
        }                                                                                                  \
        if (c1 < n) {                                                                                      \
            _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++)                                           \
                _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) part[i * NJ + j] = acc[i * NJ + j];   \
        } else {                                                                                           \
            _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++)                                           \
                _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++)                                       \
                    job->y[(j0 + j) * job->rows + r + i] = _mm512_reduce_add_ps(acc[i * NJ + j]);          \
        }                                                                                                  \
    }

/* F16 and BF16 from 16 inputs: the first input group's tile also stores the f32 it converts,
 * CONV_COLS columns a row (the column block), and the other groups' tiles read that instead of
 * converting each weight again for every 3 inputs (vcvtph2ps and the BF16 widening are two
 * vector operations per 16 weights on the Intel Xeon VM, on the ports the FMAs use). Same
 * products in the same column order: the results do not change. Intel Xeon VM, 2 threads,
 * 4096 x 4096, hot, 3 interleaved rounds, GFLOP/s plain -> this: F16 t = 16 214-224 -> 216-242,
 * t = 32 235 -> 262-276, BF16 t = 16 203-221 -> 217-238, t = 32 234 -> 275; but t = 6 202-209
 * -> 157-171 and t = 8 195-213 -> 176-199 (also with the conversion as a pass of its own before
 * the groups, with the block padded against 4 KB aliasing, and at 512 columns), not understood
 * without the PMU (the VM has none): so from CONV_MIN_BATCH only. The rows are CONV_STRIDE apart
 * (not a multiple of 4 KB). */
enum { CONV_COLS = 1024, CONV_STRIDE = CONV_COLS + 16, CONV_MIN_BATCH = 16 };

/* The f32 tile over a converted block (below). */
FLOAT_TILE(conv_tile, ld_f32, 4, false, false, false)
FLOAT_TILE(conv_tile_eo, ld_f32, 4, false, true, false) /* BF16's: the inputs as BP_ACT_F32EO */

#define FLOAT_KERNEL(NAME, LOAD, ESZ, DEC, R2, XQ, CTILE)                                                       \
    FLOAT_TILE(NAME##_wtile, LOAD, ESZ, true, XQ, XQ)                                                      \
    static ALWAYS_INLINE void NAME##_tile(const bp_cpu_job *job, int64_t r, const int NR, const int NJ,    \
                                          int64_t j0, int64_t c0, int64_t c1, __m512 *part) {              \
        NAME##_wtile(job, r, NR, NJ, j0, c0, c1, part, job->w + (size_t)r * job->row_bytes, job->row_bytes, 0, NULL); \
    }                                                                                                      \
    /* Rows outer, inputs inner, column blocks of COLBLK_BYTES a row past 4 inputs (avx512_util.h). */ \
    BP_TILE_COLS(NAME##_cols, NAME##_tile, R, MAX_BATCH, COLBLK_BYTES / (ESZ))                              \
    static ALWAYS_INLINE void NAME##_conv_block(const bp_cpu_job *job, int64_t r, const int NR) {          \
        _Alignas(64) float conv[R * CONV_STRIDE];                                                            \
        __m512 part[MAX_BATCH * R];                                                                        \
        const int64_t n = job->cols;                                                                       \
        const size_t rb = job->row_bytes;                                                                  \
        const uint8_t *w = job->w + (size_t)r * rb;                                                       \
        for (int64_t c0 = 0; c0 < n; c0 += CONV_COLS) {                                                    \
            const int64_t c1 = n - c0 < CONV_COLS ? n : c0 + CONV_COLS;                                    \
            __m512 *pp = part;                                                                             \
            for (int64_t j0 = 0; j0 < job->batch;) {                                                       \
                const int nj = bp_tile_group(job->batch - j0, NR);                                         \
                const uint8_t *cv = (const uint8_t *)conv;                                                 \
                /* the first group (3 inputs: the batch is >= CONV_MIN_BATCH) converts and stores */    \
                if (j0 == 0) NAME##_wtile(job, r, NR, 3, 0, c0, c1, pp, w, rb, 0, conv);                   \
                else if (nj == 3) CTILE(job, r, NR, 3, j0, c0, c1, pp, cv, 4 * CONV_STRIDE, c0, NULL);    \
                else if (nj == 2) CTILE(job, r, NR, 2, j0, c0, c1, pp, cv, 4 * CONV_STRIDE, c0, NULL);    \
                else if (nj == 4) CTILE(job, r, NR, 4, j0, c0, c1, pp, cv, 4 * CONV_STRIDE, c0, NULL);    \
                else CTILE(job, r, NR, 1, j0, c0, c1, pp, cv, 4 * CONV_STRIDE, c0, NULL);                 \
                j0 += nj;                                                                                  \
                pp += NR * nj;                                                                             \
            }                                                                                              \
        }                                                                                                  \
    }                                                                                                      \
    /* Not inlined: their stack (16 KB of block, 32 KB of parked sums) apart from NAME##_cols'. The   \
     * tiles past 4 inputs have R rows, or 1 (the rows left over). */                                   \
    static __attribute__((noinline)) void NAME##_conv_r(const bp_cpu_job *job, int64_t r) { NAME##_conv_block(job, r, R); } \
    static __attribute__((noinline)) void NAME##_conv_1(const bp_cpu_job *job, int64_t r) { NAME##_conv_block(job, r, 1); } \
    static ALWAYS_INLINE void NAME##_conv_cols(const bp_cpu_job *job, int64_t r, const int NR) {           \
        if ((ESZ) == 4 || job->batch < CONV_MIN_BATCH || job->batch > MAX_BATCH || (NR != R && NR != 1))   \
            NAME##_cols(job, r, NR);                                                                       \
        else if (NR == R) NAME##_conv_r(job, r);                                                          \
        else NAME##_conv_1(job, r);                                                                        \
    }                                                                                                      \
    static void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                      \
        if (job->batch == 1) {                                                                             \
            g_decode[DEC](job, r0, r1);                                                                    \
            return;                                                                                        \
        }                                                                                                  \
        BP_TILE_ROWS(NAME##_conv_cols, job, r0, r1, R, R2);                                                \
    }

/* Batch 1 runs a one-row kernel (one weight stream, four accumulators): cold, the AVX2 one read
 * 33-38 GB/s on one core of the dev machine where the 8-row tile (8 weight streams) read 24-32,
 * though the tile was as fast hot. Every float kind runs this one on zmm registers, 64 weights
 * per step, each line requested BP_ROW_PF ahead into L2 (avx2_util.h). On Zen 5 (2 vCPU, 2
 * threads, cold, 4096 x 4096) 2 KB ahead into L1 took F16 42.9 -> 50-51 GB/s and BF16 41 -> 51
 * (the AVX2 kernel converts 8 halves per instruction and was bound by that) while F32 read the
 * same ~51 on the AVX2 kernel, which it kept. On the Intel Xeon VM (AVX-512 FP16/BF16, 2 vCPU,
 * same shape, 5 interleaved rounds): 2 KB into L1 F32 34.7 (AVX2 kernel 28.3, ggml 29.1), F16
 * 31.2, BF16 29.5; 4 KB into L2 34.6 / 36.5 / 34.8; 4 KB into L1 27.4 / 31.4 / 28.0; 8 KB into
 * L2 35.9 / 34.7 / 34.0. Same column order for any r0, r1. */
#define ROW_KERNEL(NAME, LOAD, ESZ)                                                                           \
    static void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                         \
        const float *x = job->x;                                                                              \
        const int64_t n = job->cols;                                                                          \
        for (int64_t r = r0; r < r1; r++) {                                                                   \
            const uint8_t *w = job->w + (size_t)r * job->row_bytes;                                          \
            __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                                       \
            int64_t c = 0;                                                                                    \
            for (; c + 64 <= n; c += 64) {                                                                    \
                BP_PREFETCH_BLOCK(w + (ESZ) * c, 64 * (ESZ));                                                 \
                s0 = _mm512_fmadd_ps(LOAD(w + (ESZ) * c, 0xffff), _mm512_loadu_ps(x + c), s0);                \
                s1 = _mm512_fmadd_ps(LOAD(w + (ESZ) * (c + 16), 0xffff), _mm512_loadu_ps(x + c + 16), s1);    \
                s2 = _mm512_fmadd_ps(LOAD(w + (ESZ) * (c + 32), 0xffff), _mm512_loadu_ps(x + c + 32), s2);    \
                s3 = _mm512_fmadd_ps(LOAD(w + (ESZ) * (c + 48), 0xffff), _mm512_loadu_ps(x + c + 48), s3);    \
            }                                                                                                 \
            for (; c < n; c += 16) {                                                                          \
                const __mmask16 m = n - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - c)) - 1);       \
                s0 = _mm512_fmadd_ps(LOAD(w + (ESZ) * c, m), _mm512_maskz_loadu_ps(m, x + c), s0);             \
            }                                                                                                 \
            job->y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));    \
        }                                                                                                     \
    }
ROW_KERNEL(row_f32, ld_f32, 4)
ROW_KERNEL(row_f16, ld_f16, 2)
ROW_KERNEL(row_bf16, ld_bf16, 2)

static bp_cpu_vec_fn g_decode[3] = {row_f32, row_f16, row_bf16};

/* R2: rows per tile at batch 2, prefetched 1 KB ahead a row. F32 reads 16 KB a row, and eight
 * such streams at once lost to ggml at t = 2 (0.89-0.92x, 59-61 vs 64 GFLOP/s); 4 rows ran
 * 0.97-1.01x (61-65), 4 rows 2 KB ahead 0.86-0.96x, 2 rows 60, 1 row 50 (2 threads, 4096 x 4096,
 * Zen 5, interleaved with ggml). F16 keeps 8: 4 rows cost it 1.30x -> 1.05-1.10x. */
FLOAT_KERNEL(vec_f32, ld_f32, 4, 0, 4, false, conv_tile)
FLOAT_KERNEL(vec_f16, ld_f16, 2, 1, 8, false, conv_tile)
FLOAT_KERNEL(vec_bf16, ld_bf16, 2, 2, 8, true, conv_tile_eo)

/* BP_ACT_F32EO (cpu_internal.h): per whole 32 columns the 16 even ones, then the 16 odd ones. */
static void quant_f32eo(const float *x, int64_t n, void *out) {
    float *o = out;
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    int64_t c = 0;
    for (; c + 32 <= n; c += 32) {
        const __m512 a = _mm512_loadu_ps(x + c), b = _mm512_loadu_ps(x + c + 16);
        _mm512_storeu_ps(o + c, _mm512_permutex2var_ps(a, ev, b));
        _mm512_storeu_ps(o + c + 16, _mm512_permutex2var_ps(a, od, b));
    }
    for (; c < n; c++) o[c] = x[c];
    for (; c < (n + 31) / 32 * 32; c++) o[c] = 0.0f;
}

bool bp_cpu_avx512f_init(bp_cpu_ops *ops) {
/* max_batch 64: the f32 panel GEMM (AVX2, 6 x 16) reaches ~100 GFLOP/s on the dev machine at
 * t = 32, these ~2x that (Zen 5, one core, hot). */
    if (!ops->vec[BP_KIND_F32].fn || !ops->vec[BP_KIND_F16].fn || !ops->vec[BP_KIND_BF16].fn) return false;
#define SET(K, ACT, FN, NAME)                                                                                          \
    ops->vec[BP_KIND_##K] = (bp_cpu_vec_kernel){FN, ACT, "CPU avx512 " #K " (" NAME ": batches 8 rows x 3 inputs, decode one row, 4 accumulators)", 64, NULL, true}
    SET(F32, BP_ACT_F32, vec_f32, "f32 FMA");
    SET(F16, BP_ACT_F32, vec_f16, "F16C + f32 FMA");
    SET(BF16, BP_ACT_F32EO, vec_bf16, "f32 FMA");
    ops->quant_f32eo = quant_f32eo;
#undef SET
    return true;
}

#else
bool bp_cpu_avx512f_init(bp_cpu_ops *ops) {
    (void)ops;
    return false;
}
#endif
