/* AVX-512 decode, batch and GEMM kernels for the float kinds (F32, F16, BF16): a register tile
 * of R = 8 rows by up to 3 inputs, or 4 x 4 for a batch of 4 (one pass over the weights).
 * Batches up to 4 stream whole rows; larger ones, where each group of inputs re-reads the tile's
 * rows, go through 2 KB blocks of each row so the re-reads come from L1 (COLBLK_BYTES). Per 16
 * columns: NJ activation loads, then per row one weight load converted to f32 (vcvtph2ps for
 * F16; BF16 per 32 columns, the even elements by a shift and the odd ones by a mask, against
 * activations stored in that order, BP_ACT_F32EO) and NJ FMAs, so an activation load serves 8
 * rows and a weight load NJ inputs. Products stay exact f32 (the tests hold these kernels to the
 * FLOAT bound); BF16 batches outside exact mode run avx512/bf16_dot.c on AMD CPUs with AVX512_BF16.
 *
 * Larger batches (F32 and F16 from t = 12, BF16 from 16) run an outer-product tile over the
 * weights turned into 4 x 4 quads a column block at a time (QUAD_KERNEL, below).
 *
 * Batch 1 runs a one-row kernel (ROW_KERNEL), faster cold than the tile. Each tile row is
 * prefetched ahead (1 KB in 8-row tiles, 2 KB in 4-row ones, by the first group of inputs only):
 * eight weight streams at once outran the hardware prefetcher. Measurements: docs/cpu-kernels.md.
 *
 * Every (row, input) has one accumulator summed in column order, whatever tile it falls in,
 * so results do not depend on the thread count (the row split) or the batch grouping (the quads
 * sum in an order of their own, the same for every row). The column tail (cols % 16) is a
 * masked load. */
#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

#include "cpu/avx2/simd.h"
#include "cpu/avx512/simd.h"

/* COLBLK_BYTES: a column block's bytes per weight row (8 rows: 16 KB, a third of L1). 2 KB:
 * blocks beat unblocked rows for every kind, 4 KB was a little slower for the half kinds and
 * 1 KB for F32. L1 set conflicts and memory are not what holds the float tiles at ~40-45% of the
 * FMA peak: the loads are, 11 whole zmm per 24 FMAs (QUAD_KERNEL's quads need 4 zmm and 6
 * 16-byte broadcasts). A 6 x 4 tile (10 loads per 24) won at t = 8-16
 * but lost at t = 5-6 and 64, so 8 x 3 stays.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/float_kinds.c. */
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

/* Columns [c0, c1) of an NR x NJ tile over weight rows r .. r + NR - 1; part: the tile's
 * accumulators between column blocks (read unless c0 == 0; written unless c1 == n, when the sums
 * go to y instead). XQ: the inputs come as BP_ACT_F32EO (job->xq) instead of x. SPLIT (BF16
 * weights, XQ): each whole 32 columns widen as their even elements (a 16-bit shift of the 32
 * bf16) and their odd ones (a mask), one operation per 16 weights where ld_bf16 takes two,
 * against the activations in the same order; the rest as ld_bf16. */
#define FLOAT_TILE(NAME, LOAD, ESZ, XQ, SPLIT)                                                             \
    static ALWAYS_INLINE void NAME(const bp_cpu_job *job, int64_t r, const int NR, const int NJ, int64_t j0, \
                                   int64_t c0, int64_t c1, __m512 *part) {                                 \
        const uint8_t *w = job->w + (size_t)r * job->row_bytes;                                            \
        const size_t rb = job->row_bytes;                                                                  \
        const int64_t n = job->cols;                                                                       \
        const int64_t xn = (XQ) ? (int64_t)(job->xq_stride / sizeof(float)) : n;                           \
        const float *x = ((XQ) ? (const float *)job->xq : job->x) + j0 * xn;                               \
        __m512 acc[24]; /* NR * NJ <= 24, flat: GCC keeps it in registers */                               \
        _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++)                                               \
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++)                                           \
                acc[i * NJ + j] = c0 ? part[i * NJ + j] : _mm512_setzero_ps();                             \
        /* Prefetch in the first group only (the others find the block in L1): a prefetch per row          \
         * and 16 columns in every group cost 15-18% at t = 16-32 (one thread, hot 512 x 4096, F32,        \
         * F16 and BF16 alike; 2 threads at 4096 x 4096 read the same either way). */                      \
        const bool pf = j0 == 0;                                                                           \
        /* About 8 KB ahead over all rows: 4-row tiles (batch 4) 2 KB a row, which beat 1 KB;              \
         * 2 KB in the 8-row tiles was slower.                                                             \
         * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/float_kinds.c. */       \
        const int pfd = NR >= 8 || job->batch == 2 ? 1024 : 2048;                                          \
        int64_t c = c0;                                                                                    \
        /* SPLIT: the evens of all rows, then the odds (the 32 bf16 loaded twice: evens and odds           \
         * of 3 inputs held at once beside 24 accumulators would need 33 registers) */                     \
        if (SPLIT)                                                                                         \
            for (; c + 32 <= c1; c += 32) {                                                                \
                const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);                                    \
                for (int h = 0; h < 2; h++) {                                                              \
                    __m512 xv[MAX_NJ];                                                                     \
                    _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) xv[j] = _mm512_loadu_ps(x + j * xn + c + 16 * h); \
                    _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) {                                 \
                        const uint8_t *wp = w + (size_t)i * rb + (size_t)c * (ESZ);                        \
                        if (pf && h == 0) _mm_prefetch((const char *)(wp + pfd), _MM_HINT_T0);             \
                        const __m512i v = _mm512_loadu_si512((const void *)wp);                            \
                        const __m512 wv = _mm512_castsi512_ps(h ? _mm512_and_si512(v, hi) : _mm512_slli_epi32(v, 16)); \
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
                _mm_prefetch((const char *)(w + (size_t)i * rb + (size_t)c * (ESZ) + pfd), _MM_HINT_T0);   \
                __m512 wv = LOAD(w + (size_t)i * rb + (size_t)c * (ESZ), 0xffff);                          \
                _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++)                                       \
                    acc[i * NJ + j] = _mm512_fmadd_ps(wv, xv[j], acc[i * NJ + j]);                         \
            }                                                                                              \
        }                                                                                                  \
        if (c < c1) {                                                                                      \
            const __mmask16 m = (__mmask16)((1u << (c1 - c)) - 1);                                         \
            __m512 xv[MAX_NJ];                                                                             \
            _Pragma("GCC unroll 4") for (int j = 0; j < NJ; j++) xv[j] = _mm512_maskz_loadu_ps(m, x + j * xn + c); \
            _Pragma("GCC unroll 8") for (int i = 0; i < NR; i++) {                                         \
                __m512 wv = LOAD(w + (size_t)i * rb + (size_t)c * (ESZ), m);                               \
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

#define FLOAT_KERNEL(NAME, LOAD, ESZ, DEC, R2, XQ, QMIN)                                                   \
    FLOAT_TILE(NAME##_tile, LOAD, ESZ, XQ, XQ)                                                             \
    /* Rows outer, inputs inner, column blocks of COLBLK_BYTES a row past 4 inputs (avx512/simd.h);   \
     * batches below QMIN only (the quads take the rest), so the parked sums are sized for those. */  \
    BP_TILE_COLS(NAME##_cols, NAME##_tile, R, (QMIN) - 1, COLBLK_BYTES / (ESZ))                            \
    void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                      \
        if (job->batch == 1) {                                                                             \
            g_decode[DEC](job, r0, r1);                                                                    \
            return;                                                                                        \
        }                                                                                                  \
        if (job->batch >= (QMIN)) {                                             \
            g_quad[DEC](job, r0, r1);                                                                      \
            return;                                                                                        \
        }                                                                                                  \
        BP_TILE_ROWS(NAME##_cols, job, r0, r1, R, R2);                                                     \
    }

/* Batch 1 runs a one-row kernel (one weight stream, four accumulators): cold, one stream reads
 * faster than the 8-row tile's 8 weight streams, though the tile is as fast hot. Every float kind
 * runs this one on zmm registers, 64 weights per step, each line requested BP_ROW_PF ahead into
 * L2 (avx2/simd.h): 4 KB into L2 read as well as or better than 2 KB into L1 and better than 4 KB
 * into L1. Same column order for any r0, r1.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/float_kinds.c. */
#define ROW_KERNEL(NAME, LOAD, ESZ)                                                                        \
    static void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                      \
        const float *x = job->x;                                                                           \
        const int64_t n = job->cols;                                                                       \
        for (int64_t r = r0; r < r1; r++) {                                                                \
            const uint8_t *w = job->w + (size_t)r * job->row_bytes;                                        \
            __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                                    \
            int64_t c = 0;                                                                                 \
            for (; c + 64 <= n; c += 64) {                                                                 \
                BP_PREFETCH_BLOCK(w + (ESZ) * c, 64 * (ESZ));                                              \
                s0 = _mm512_fmadd_ps(LOAD(w + (ESZ) * c, 0xffff), _mm512_loadu_ps(x + c), s0);             \
                s1 = _mm512_fmadd_ps(LOAD(w + (ESZ) * (c + 16), 0xffff), _mm512_loadu_ps(x + c + 16), s1); \
                s2 = _mm512_fmadd_ps(LOAD(w + (ESZ) * (c + 32), 0xffff), _mm512_loadu_ps(x + c + 32), s2); \
                s3 = _mm512_fmadd_ps(LOAD(w + (ESZ) * (c + 48), 0xffff), _mm512_loadu_ps(x + c + 48), s3); \
            }                                                                                              \
            for (; c < n; c += 16) {                                                                       \
                const __mmask16 m = n - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - c)) - 1);    \
                s0 = _mm512_fmadd_ps(LOAD(w + (ESZ) * c, m), _mm512_maskz_loadu_ps(m, x + c), s0);         \
            }                                                                                              \
            job->y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3))); \
        }                                                                                                  \
    }
ROW_KERNEL(row_f32, ld_f32, 4)
ROW_KERNEL(row_f16, ld_f16, 2)
ROW_KERNEL(row_bf16, ld_bf16, 2)

static bp_cpu_vec_fn g_decode[3] = {row_f32, row_f16, row_bf16};

/* Larger batches (from each kind's QMIN below; past MAX_BATCH as the GEMM): the weights as
 * quads. A zmm holds 4 columns of 4 rows (a 128-bit lane a row) and meets the same 4 columns of
 * one input, broadcast to every lane (vbroadcastf32x4: a load alone, no shuffle), so the tile
 * is an outer product: per 4 columns, 4 weight vectors (16 rows) and NJ <= 6 broadcasts feed
 * 4 x NJ FMAs, against 8 + 3 loads per 24 FMAs in the dot-product tiles above (which ran at
 * about 70% of the FMA peak in L1, this one above 90%). The first input group of each column
 * block pays for it: it converts 16 rows of QCB columns to f32 and transposes each 4 x 4 of
 * 128-bit lanes into a 16 KB block that the other groups read from L1.
 *
 * The block's loads would come in a burst (16 rows at once); instead each step of the groups
 * requests two lines of the next block (or of the next tile's first) into L2, spread over the
 * block's compute. QMIN (12, 12 and 16) is where the quads overtake the tiles, on a 640 x 2048
 * weight in L3 (the later crossing; 16-row chunks, the table's row unit); the measurements are
 * in docs/cpu-kernels.md.
 *
 * Per (row, input), lane k sums the columns = k mod 4 in column order and the four lanes are
 * added ((0 + 1) + (2 + 3)) at the end, whatever the tile, the row split or the input grouping.
 * Rows past the last 16 are zeros in the block (their sums are not written); so are the columns
 * past n in the last quad, whose inputs are masked. */
enum { QR = 16, QCB = 256, QNJ = 6, QCHUNK = 64 };

/* Rows [0, nr) of w (rb bytes apart), columns [c0, c1) (c1 - c0 <= QCB), as quads into s: quad
 * column q's four zmm at s + 64 q, row group g's at + 16 g. */
#define QUAD_PACK(NAME, LOAD, ESZ)                                                                         \
    static ALWAYS_INLINE void NAME##_n(const uint8_t *w, size_t rb, const int nr, int64_t c0, int64_t c1, float *s) { \
        for (int64_t c = c0; c < c1; c += 16) {                                                            \
            const __mmask16 m = c1 - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (c1 - c)) - 1);      \
            float *o = s + (c - c0) / 4 * 64;                                                              \
            _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++) {                                          \
                __m512 a[4];                                                                               \
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {                                      \
                    const int row = 4 * g + k;                                                             \
                    if (row < nr) {                                                                        \
                        const uint8_t *p = w + (size_t)row * rb + (size_t)c * (ESZ);                       \
                        a[k] = LOAD(p, m);                                                                 \
                    } else                                                                                 \
                        a[k] = _mm512_setzero_ps();                                                        \
                }                                                                                          \
                const __m512 t0 = _mm512_shuffle_f32x4(a[0], a[1], _MM_SHUFFLE(1, 0, 1, 0));               \
                const __m512 t1 = _mm512_shuffle_f32x4(a[0], a[1], _MM_SHUFFLE(3, 2, 3, 2));               \
                const __m512 t2 = _mm512_shuffle_f32x4(a[2], a[3], _MM_SHUFFLE(1, 0, 1, 0));               \
                const __m512 t3 = _mm512_shuffle_f32x4(a[2], a[3], _MM_SHUFFLE(3, 2, 3, 2));               \
                _mm512_store_ps(o + 0 * 64 + 16 * g, _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(2, 0, 2, 0))); \
                _mm512_store_ps(o + 1 * 64 + 16 * g, _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(3, 1, 3, 1))); \
                _mm512_store_ps(o + 2 * 64 + 16 * g, _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(2, 0, 2, 0))); \
                _mm512_store_ps(o + 3 * 64 + 16 * g, _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(3, 1, 3, 1))); \
            }                                                                                              \
        }                                                                                                  \
    }                                                                                                      \
    static __attribute__((noinline)) void NAME(const uint8_t *w, size_t rb, int nr, int64_t c0, int64_t c1, float *s) { \
        if (nr == QR) NAME##_n(w, rb, QR, c0, c1, s);                                                      \
        else NAME##_n(w, rb, nr, c0, c1, s);                                                               \
    }
QUAD_PACK(quad_pack_f32, ld_f32, 4)
QUAD_PACK(quad_pack_f16, ld_f16, 2)
QUAD_PACK(quad_pack_bf16, ld_bf16, 2)

/* Inputs x (xn floats apart) against a packed block of columns [c0, c1): acc[4 * j + g] for row
 * group g and input j, read from part unless first, parked back there. pf (unless NULL): step q
 * requests lines l0 + 2 q and l0 + 2 q + 1 of the nl at pf (line l: row l % 16, rb bytes apart,
 * 64 bytes times l / 16 along it). */
static ALWAYS_INLINE void quad_tile(const float *s, const float *x, int64_t xn, const int NJ, int64_t c0, int64_t c1,
                                    __m512 *part, bool first, const uint8_t *pf, size_t rb, int64_t nl, int64_t l0) {
    __m512 acc[4 * QNJ];
    _Pragma("GCC unroll 24") for (int i = 0; i < 4 * NJ; i++) acc[i] = first ? _mm512_setzero_ps() : part[i];
    const int64_t nq = (c1 - c0) / 4;
    for (int64_t q = 0; q < nq; q++) {
        const float *wq = s + q * 64;
        if (pf) {
            const int64_t l = l0 + 2 * q;
            if (l < nl) _mm_prefetch((const char *)pf + (size_t)(l & 15) * rb + (size_t)(l >> 4) * 64, _MM_HINT_T1);
            if (l + 1 < nl) _mm_prefetch((const char *)pf + (size_t)((l + 1) & 15) * rb + (size_t)((l + 1) >> 4) * 64, _MM_HINT_T1);
        }
        const __m512 w0 = _mm512_load_ps(wq), w1 = _mm512_load_ps(wq + 16), w2 = _mm512_load_ps(wq + 32),
                     w3 = _mm512_load_ps(wq + 48);
        _Pragma("GCC unroll 6") for (int j = 0; j < NJ; j++) {
            const __m512 b = _mm512_broadcast_f32x4(_mm_loadu_ps(x + j * xn + c0 + 4 * q));
            acc[4 * j + 0] = _mm512_fmadd_ps(w0, b, acc[4 * j + 0]);
            acc[4 * j + 1] = _mm512_fmadd_ps(w1, b, acc[4 * j + 1]);
            acc[4 * j + 2] = _mm512_fmadd_ps(w2, b, acc[4 * j + 2]);
            acc[4 * j + 3] = _mm512_fmadd_ps(w3, b, acc[4 * j + 3]);
        }
    }
    if (c0 + 4 * nq < c1) { /* the last, partial quad: the block holds zeros past c1, the inputs may not */
        const __mmask8 m = (__mmask8)((1u << (c1 - c0 - 4 * nq)) - 1);
        const float *wq = s + nq * 64;
        _Pragma("GCC unroll 6") for (int j = 0; j < NJ; j++) {
            const __m512 b = _mm512_broadcast_f32x4(_mm_maskz_loadu_ps(m, x + j * xn + c0 + 4 * nq));
            _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++)
                acc[4 * j + g] = _mm512_fmadd_ps(_mm512_load_ps(wq + 16 * g), b, acc[4 * j + g]);
        }
    }
    _Pragma("GCC unroll 24") for (int i = 0; i < 4 * NJ; i++) part[i] = acc[i];
}
static __attribute__((noinline)) void quad_tile_n(const float *s, const float *x, int64_t xn, int nj, int64_t c0,
                                                  int64_t c1, __m512 *part, bool first, const uint8_t *pf, size_t rb, int64_t nl, int64_t l0) {
    switch (nj) {
    case 6: quad_tile(s, x, xn, 6, c0, c1, part, first, pf, rb, nl, l0); break;
    case 5: quad_tile(s, x, xn, 5, c0, c1, part, first, pf, rb, nl, l0); break;
    case 4: quad_tile(s, x, xn, 4, c0, c1, part, first, pf, rb, nl, l0); break;
    case 3: quad_tile(s, x, xn, 3, c0, c1, part, first, pf, rb, nl, l0); break;
    case 2: quad_tile(s, x, xn, 2, c0, c1, part, first, pf, rb, nl, l0); break;
    default: quad_tile(s, x, xn, 1, c0, c1, part, first, pf, rb, nl, l0); break;
    }
}

/* Rows [r0, r1) of a batch: inputs in chunks of up to QCHUNK, each chunk over all the rows (its
 * inputs, 1 MiB at 4096 columns, stay in L2 while the weights stream once per chunk), in 16-row
 * tiles (the last may be short), column blocks of QCB, groups of at most QNJ inputs as even as
 * they go. */
#define QUAD_KERNEL(NAME, PACK, ESZ)                                                                       \
    static void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                      \
        _Alignas(64) float s[QCB * QR];                                                                    \
        __m512 part[4 * QCHUNK];                                                                           \
        const int64_t n = job->cols;                                                                       \
        for (int64_t jc = 0; jc < job->batch; jc += QCHUNK) {                                              \
            const int64_t t = job->batch - jc < QCHUNK ? job->batch - jc : QCHUNK;                         \
            const float *x = job->x + jc * n;                                                              \
            float *y = job->y + jc * job->rows;                                                            \
            const int groups = (int)((t + QNJ - 1) / QNJ);                                                 \
            for (int64_t r = r0; r < r1; r += QR) {                                                        \
                const int nr = r1 - r < QR ? (int)(r1 - r) : QR;                                           \
                const uint8_t *w = job->w + (size_t)r * job->row_bytes;                                    \
                for (int64_t c0 = 0; c0 < n; c0 += QCB) {                                                  \
                    const int64_t c1 = n - c0 < QCB ? n : c0 + QCB;                                        \
                    PACK(w, job->row_bytes, nr, c0, c1, s);                                                \
                    /* the block after this one (or the next tile's first, whose rows past the weight's     \
                     * last are requested too: a prefetch does not fault), nl lines of it */                \
                    const int64_t cn = c1 < n ? c1 : 0, ncols = n - cn < QCB ? n - cn : QCB;               \
                    const uint8_t *pf = c1 < n ? w + (size_t)cn * (ESZ) : r + QR < r1 ? w + QR * job->row_bytes : NULL; \
                    const int64_t nl = QR * ((ncols * (ESZ) + 63) / 64);                                   \
                    int64_t j0 = 0;                                                                        \
                    for (int gi = 0; gi < groups; gi++) {                                                  \
                        const int nj = (int)((t - j0) / (groups - gi));                                    \
                        quad_tile_n(s, x + j0 * n, n, nj, c0, c1, part + 4 * j0, c0 == 0, pf,              \
                                    job->row_bytes, nl, 2 * gi * ((c1 - c0) / 4));                         \
                        j0 += nj;                                                                          \
                    }                                                                                      \
                }                                                                                          \
                /* lane sums ((0 + 1) + (2 + 3)) of each 128-bit lane: row 4 g + lane of group g */        \
                for (int64_t j = 0; j < t; j++)                                                            \
                    for (int g = 0; g < 4; g++) {                                                          \
                        __m512 v = part[4 * j + g];                                                        \
                        v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));               \
                        v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));               \
                        _Alignas(64) float l[16];                                                          \
                        _mm512_store_ps(l, v);                                                             \
                        for (int k = 0; k < 4 && 4 * g + k < nr; k++) y[j * job->rows + r + 4 * g + k] = l[4 * k]; \
                    }                                                                                      \
            }                                                                                              \
        }                                                                                                  \
    }
QUAD_KERNEL(quad_f32, quad_pack_f32, 4)
QUAD_KERNEL(quad_f16, quad_pack_f16, 2)
QUAD_KERNEL(quad_bf16, quad_pack_bf16, 2)
static bp_cpu_vec_fn g_quad[3] = {quad_f32, quad_f16, quad_bf16};

/* The float kinds' GEMM (ops->gemm, past the vec kernels' max_batch): the same quads, in chunks
 * of QCHUNK inputs, faster than the f32 panel GEMM it replaced (16-row panels dequantized
 * k-major, 8 broadcast inputs).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/float_kinds.c.
 * Rows [r0, r1) of every input; ith unused (no scratch: the block is on the stack). */
void bp_avx512_quad_gemm(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    (void)ith;
    const bp_kind k = job->kt->info.kind;
    g_quad[k == BP_KIND_F32 ? 0 : k == BP_KIND_F16 ? 1 : 2](job, r0, r1);
}

/* R2: rows per tile at batch 2, prefetched 1 KB ahead a row. F32 reads 16 KB a row, and eight
 * such streams at once lost to ggml at t = 2; 4 rows (1 KB ahead) beat 2 KB ahead and 1-2 rows.
 * F16 keeps 8 (4 rows cost it more). QMIN: the first batch the quads take (QUAD_KERNEL's
 * figures), also named in the kernels' names.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/float_kinds.c. */
#define QMIN_F32 12
#define QMIN_F16 12
#define QMIN_BF16 16
FLOAT_KERNEL(bp_avx512_vec_f32, ld_f32, 4, 0, 4, false, QMIN_F32)
FLOAT_KERNEL(bp_avx512_vec_f16, ld_f16, 2, 1, 8, false, QMIN_F16)
FLOAT_KERNEL(bp_avx512_vec_bf16, ld_bf16, 2, 2, 8, true, QMIN_BF16)

/* BP_ACT_F32EO (cpu_internal.h): per whole 32 columns the 16 even ones, then the 16 odd ones. */
void bp_avx512_quant_f32eo(const float *x, int64_t n, void *out) {
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

#define BP_STR_(x) #x
#define BP_STR(x) BP_STR_(x) /* a macro's value as a string */

#endif
