/* Helpers shared by the AVX-512 kernel files (include only from files built with the AVX-512
 * flags, inside their #if __AVX512F__ ... block): static inline, so nothing here is emitted into
 * a file a machine without AVX-512 could reach. */
#ifndef BP_CPU_AVX512_UTIL_H
#define BP_CPU_AVX512_UTIL_H

#include <immintrin.h>

#ifndef ALWAYS_INLINE
#define ALWAYS_INLINE inline __attribute__((always_inline))
#endif

/* 16 x 16 dwords: r[i] holds row i's dwords 0..15; afterwards r[j] holds dword j of rows 0..15. */
static ALWAYS_INLINE void bp_transpose16_epi32(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* u[4 i + j], 128-bit lane L: dword 4 L + j of rows 4 i .. 4 i + 3. */
    for (int j = 0; j < 4; j++) {
        __m512i slo = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i shi = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
        __m512i wlo = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i whi = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
        r[j] = _mm512_shuffle_i32x4(slo, wlo, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + j] = _mm512_shuffle_i32x4(slo, wlo, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + j] = _mm512_shuffle_i32x4(shi, whi, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + j] = _mm512_shuffle_i32x4(shi, whi, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* The input group a tile takes with `left` inputs to go: 4 only as the whole of a batch of 4 in
 * tiles of <= 4 rows, else 3 (never leaving 1 behind a 3 when 4 are left: 2 + 2), 2 or 1. */
static inline int bp_tile_group(int64_t left, int nr) {
    return left == 4 && nr <= 4 ? 4 : left >= 3 && left != 4 ? 3 : left >= 2 ? 2 : 1;
}

/* The float tiles' drivers, shared by avx512/float_kinds.c (exact f32 products) and avx512/bf16_dot.c
 * (vdpbf16ps): the same grouping of inputs and rows around two different register tiles.
 * TILE(job, r, NR, NJ, j0, c0, c1, part) computes columns [c0, c1) of rows r .. r + NR - 1 against
 * inputs j0 .. j0 + NJ - 1 (NJ 1-4; 4 only with NR <= 4), parking its accumulators in part between
 * column blocks. BP_TILE_COLS defines NAME(job, r, NR): rows outer, inputs inner, so the weights
 * stream from memory once per call; with more than one input group (batch > 4, up to MAXB), in
 * column blocks of BLK columns so that each group's re-reads of the tile's rows come from L1. The
 * sums keep their column order, so the blocking does not change results. */
#define BP_TILE_COLS(NAME, TILE, RMAX, MAXB, BLK)                                                        \
    static ALWAYS_INLINE void NAME(const bp_cpu_job *job, int64_t r, const int NR) {                     \
        __m512 part[(MAXB) * (RMAX)];                                                                    \
        const int64_t n = job->cols;                                                                     \
        const int64_t blk = job->batch > 4 && job->batch <= (MAXB) ? (BLK) : n; /* past MAXB: whole rows */ \
        for (int64_t c0 = 0; c0 < n; c0 += blk) {                                                        \
            const int64_t c1 = n - c0 < blk ? n : c0 + blk;                                              \
            __m512 *pp = part;                                                                           \
            for (int64_t j0 = 0; j0 < job->batch;) {                                                     \
                const int nj = bp_tile_group(job->batch - j0, NR);                                       \
                if (nj == 4) TILE(job, r, NR, 4, j0, c0, c1, pp);                                        \
                else if (nj == 3) TILE(job, r, NR, 3, j0, c0, c1, pp);                                   \
                else if (nj == 2) TILE(job, r, NR, 2, j0, c0, c1, pp);                                   \
                else TILE(job, r, NR, 1, j0, c0, c1, pp);                                                \
                j0 += nj;                                                                                \
                pp += NR * nj;                                                                           \
            }                                                                                            \
            if (c1 == n) break;                                                                          \
        }                                                                                                \
    }
/* Rows [r0, r1) of a batch through COLS (a BP_TILE_COLS function): 4-row tiles at batch 4, R2-row
 * ones at batch 2 (R2 <= RMAX), RMAX-row ones otherwise, single rows for the rest. */
#define BP_TILE_ROWS(COLS, job, r0, r1, RMAX, R2)                                                        \
    do {                                                                                                 \
        int64_t r_ = (r0);                                                                               \
        if ((job)->batch == 4)                                                                           \
            for (; r_ + 4 <= (r1); r_ += 4) COLS(job, r_, 4);                                            \
        else if ((job)->batch == 2 && (R2) < (RMAX))                                                     \
            for (; r_ + (R2) <= (r1); r_ += (R2)) COLS(job, r_, (R2));                                   \
        else                                                                                             \
            for (; r_ + (RMAX) <= (r1); r_ += (RMAX)) COLS(job, r_, (RMAX));                             \
        for (; r_ < (r1); r_++) COLS(job, r_, 1);                                                        \
    } while (0)

#endif
