/* AVX2 multi-input kernels for the 1-bit and ternary kinds (IQ1_S, IQ1_M, TQ1_0, TQ2_0) against
 * bp_q8x256 activations: each block of weights is decoded once into unsigned bytes and serves up
 * to LO_NJ inputs (one maddubs per input per 32 weights), where the kernels they replace
 * (avx2/decode_grid_lowbit.c) decoded every block again for every input. All offsets are folded into one
 * multiply-add with the activations' 16-element sums (bsums) per block:
 *   TQ1_0, TQ2_0: stored 0, 1, 2 for -1, 0, +1: sum (u - 1) x = sum u x - sum x;
 *   IQ1_S, IQ1_M: w = dl / 8 * (8 g + ds), g in {-1, 0, 1}, ds = +-1 (the delta); the table below
 *   holds 8 (g + 1) in {0, 8, 16}, so 8 g + ds = table - 8 + ds.
 * The bytes are unsigned and small (<= 18), so maddubs never saturates (2 * 18 * 127 = 4572),
 * and the ternary kinds sum a block's 8 maddubs in int16 (8 * 2 * 2 * 127 = 4064) before one
 * widening madd. Integer sums are exact: only the float accumulation order differs from the
 * reference (src/kinds/ref_lowbit.c, ref_iquants.c), which the kernel tests compare against. */
#include <limits.h>

#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"
#include "kinds/iq_tables.h"

/* Inputs per pass (LO_NJ sumi registers, their float sums spill once per block) and rows per
 * block (the block's weights stay in L1/L2 while each group of inputs passes over them). */
enum { LO_NJ = 8, LO_RB = 16 };

/* The frame of a row kernel over NJ inputs starting at j0: b at block i, xj(jj) the input's
 * activations of block i, acc[jj] its float sum. */
#define LO_ROW_BEGIN(BB)                                                                 \
    const int64_t nb = job->cols / 256;                                                  \
    const size_t xs = job->xq_stride;                                                    \
    const uint8_t *xb = (const uint8_t *)job->xq + (size_t)j0 * xs;                      \
    const uint8_t *b = job->w + (size_t)r * job->row_bytes;                              \
    __m256 acc[LO_NJ];                                                                   \
    for (int jj = 0; jj < NJ; jj++) acc[jj] = _mm256_setzero_ps();                       \
    for (int64_t i = 0; i < nb; i++, b += (BB)) {                                        \
        BP_PREFETCH_BLOCK(b, BB);
#define LO_XJ(jj) ((const bp_q8x256 *)(const void *)(xb + (size_t)(jj) * xs) + i)
#define LO_ROW_END                                                                       \
    }                                                                                    \
    for (int jj = 0; jj < NJ; jj++) job->y[(j0 + jj) * job->rows + r] = hsum8(acc[jj]);

/* The row-block and input-group driver is avx2/simd.h's KQ_MULTI_N (LO_RB = KQ_RB, LO_NJ = KQ_NJ). */
_Static_assert((int)LO_RB == (int)KQ_RB && (int)LO_NJ == (int)KQ_NJ, "avx2/decode_iq1_ternary.c drives its rows with KQ_MULTI_N");

/* Keeps v in a register as it is: GCC otherwise turns each input's chain of adds into a tree
 * over all of a block's products, computes every product first and spills them (TQ2_0's loop
 * over 4 inputs made 50 stack accesses per block, and t = 4 ran slower than t = 2). */
#define LO_KEEP(v) __asm__("" : "+x"(v))

/* ---- TQ2_0: 66 bytes, qs[64] | d; element 128n + 32j + l = ((qs[32n + l] >> 2j) & 3) - 1 --- */
static ALWAYS_INLINE void tq2_0_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    LO_ROW_BEGIN(BP_BLOCK_BYTES_TQ2_0)
    __m256i s16[LO_NJ];
    for (int n = 0; n < 2; n++) {
        const __m256i v = load32(b + 32 * n);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256i u = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3);
            const int g = 4 * n + j;
#pragma GCC unroll 8
            for (int jj = 0; jj < NJ; jj++) {
                const __m256i p = _mm256_maddubs_epi16(u, load32(LO_XJ(jj)->q + 32 * g));
                s16[jj] = g == 0 ? p : _mm256_add_epi16(s16[jj], p);
                LO_KEEP(s16[jj]);
            }
        }
    }
    const float d = f16(b + 64);
#pragma GCC unroll 8
    for (int jj = 0; jj < NJ; jj++) {
        const __m256i s = _mm256_sub_epi16(s16[jj], load32(LO_XJ(jj)->bsums));
        acc[jj] = _mm256_fmadd_ps(_mm256_set1_ps(d * LO_XJ(jj)->d), _mm256_cvtepi32_ps(_mm256_madd_epi16(s, ones)), acc[jj]);
    }
    LO_ROW_END
}
/* 4 inputs a pass: TQ2_0's decode is two ops per 32 weights, so 8 inputs buy nothing and hold
 * more registers (8 a pass was slower).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/decode_iq1_ternary.c. */
KQ_MULTI_NL(, bp_avx2_vec_tq2_0, tq2_0_row, 4)

/* ---- TQ1_0: 54 bytes, qs[48] | qh[4] | d. Elements 0-159: trit e/32 of qs[e%32]; 160-239:
 * trit (e-160)/16 of qs[32 + e%16]; 240-255: trit (e-240)/4 of qh[e%4]. Trit k of byte q is
 * ((q * 3^k mod 256) * 3) >> 8, i.e. [q * 3^k mod 256 >= 86] + [... >= 171]: byte adds for the
 * x3 steps (they wrap mod 256 by themselves) and two byte compares per trit. */
static ALWAYS_INLINE __m256i trit_of(__m256i q) {
    __m256i s = _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)); /* unsigned order as signed */
    __m256i c1 = _mm256_cmpgt_epi8(s, _mm256_set1_epi8(85 - 128));
    __m256i c2 = _mm256_cmpgt_epi8(s, _mm256_set1_epi8(170 - 128));
    return _mm256_abs_epi8(_mm256_add_epi8(c1, c2));
}
static ALWAYS_INLINE __m256i times3(__m256i q) { return _mm256_add_epi8(_mm256_add_epi8(q, q), q); }
static ALWAYS_INLINE __m128i times3x(__m128i q) { return _mm_add_epi8(_mm_add_epi8(q, q), q); }

static ALWAYS_INLINE void tq1_0_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    const __m256i ones = _mm256_set1_epi16(1);
    LO_ROW_BEGIN(BP_BLOCK_BYTES_TQ1_0)
    __m256i s16[LO_NJ];
    /* Group g (32 weights, activations at 32 g) of trits u: into every input's int16 sums. */
#define TQ1_GROUP(g, u)                                                                            \
    do {                                                                                           \
        const __m256i u_ = (u);                                                                    \
        _Pragma("GCC unroll 8") for (int jj = 0; jj < NJ; jj++) {                                  \
            const __m256i p = _mm256_maddubs_epi16(u_, load32(LO_XJ(jj)->q + 32 * (g)));           \
            s16[jj] = (g) == 0 ? p : _mm256_add_epi16(s16[jj], p);                                 \
            LO_KEEP(s16[jj]);                                                                      \
        }                                                                                          \
    } while (0)
    __m256i q = load32(b);
#pragma GCC unroll 5
    for (int k = 0; k < 5; k++) {
        TQ1_GROUP(k, trit_of(q));
        q = times3(q);
    }
    /* Bytes 32..47: trit k of byte 32 + l is element 160 + 16k + l, two trits per register
     * (lanes k, k+1); then trit 4 of them beside the qh tail, where byte 4k + l of a broadcast
     * qh needs 3^k: element 240 + 4k + l. */
    const __m128i q1 = _mm_loadu_si128((const __m128i *)(b + 32));
    __m256i v = _mm256_set_m128i(times3x(q1), q1);
    TQ1_GROUP(5, trit_of(v));
    v = times3(times3(v));
    TQ1_GROUP(6, trit_of(v));
    const __m128i q81 = times3x(_mm256_extracti128_si256(v, 1));
    const __m128i h0 = _mm_set1_epi32((int)bp_load_u32(b + 48));
    const __m128i h1 = times3x(h0), h2 = times3x(h1), h3 = times3x(h2);
    const __m128i tail = _mm_blend_epi32(_mm_blend_epi32(h0, h1, 2), _mm_blend_epi32(h2, h3, 8), 12);
    TQ1_GROUP(7, trit_of(_mm256_set_m128i(tail, q81)));
#undef TQ1_GROUP
    const float d = f16(b + 52);
#pragma GCC unroll 8
    for (int jj = 0; jj < NJ; jj++) {
        const __m256i s = _mm256_sub_epi16(s16[jj], load32(LO_XJ(jj)->bsums));
        acc[jj] = _mm256_fmadd_ps(_mm256_set1_ps(d * LO_XJ(jj)->d), _mm256_cvtepi32_ps(_mm256_madd_epi16(s, ones)), acc[jj]);
    }
    LO_ROW_END
}
KQ_MULTI_NL(, bp_avx2_vec_tq1_0, tq1_0_row, LO_NJ)

/* ---- IQ1 kinds ----------------------------------------------------------------------------
 * bp_iq1s_grid's 2048 entries (8 weights in {-1, 0, 1} each) as bytes 8 (g + 1), built once. */
static uint64_t g_grid8[2048];

static void init_grid8(void) {
    for (int i = 0; i < 2048; i++) {
        uint64_t v = 0;
        for (int j = 0; j < 8; j++) {
            const int8_t g = (int8_t)(bp_iq1s_grid[i] >> (8 * j));
            v |= (uint64_t)(uint8_t)(8 * (g + 1)) << (8 * j);
        }
        g_grid8[i] = v;
    }
}

/* Word ib of each 128-bit lane, in every word of that lane. */
static ALWAYS_INLINE __m256i bcast_word(__m256i v, int ib) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((int16_t)(0x0100 + 0x0202 * ib)));
}

/* One group of 32 weights u (bytes) against each input's 32 activations ib, pairs scaled by sc
 * (words), into sumi; and a block's end: acc += DW * d_x * sumi. IQ1_S and IQ1_M share both. */
#define LO_GROUP(sumi, u, sc, ib)                                                                  \
    _Pragma("GCC unroll 8") for (int jj = 0; jj < NJ; jj++) {                                      \
        sumi[jj] = _mm256_add_epi32(sumi[jj], _mm256_madd_epi16(_mm256_maddubs_epi16(u, load32(LO_XJ(jj)->q + 32 * (ib))), sc)); \
        LO_KEEP(sumi[jj]);                                                                         \
    }
#define LO_BLOCK_END(sumi, DW)                                                                     \
    _Pragma("GCC unroll 8") for (int jj = 0; jj < NJ; jj++)                                        \
        acc[jj] = _mm256_fmadd_ps(_mm256_set1_ps((DW) * LO_XJ(jj)->d), _mm256_cvtepi32_ps(sumi[jj]), acc[jj]);

/* IQ1_S, 50 bytes: d; 32 low index bytes at 2; 8 u16 at 34 per 32 weights: four 3-bit high index
 * parts, a 3-bit scale (2s + 1), the delta sign (bit 15). Group ib: ls (sum table * x + (ds - 8)
 * sum x), the second term for all 8 groups in one madd with the bsums. */
static ALWAYS_INLINE void iq1_s_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    LO_ROW_BEGIN(BP_BLOCK_BYTES_IQ1_S)
    __m256i sumi[LO_NJ];
    {
        const __m128i qh8 = _mm_loadu_si128((const __m128i *)(b + 34));
        const __m128i ls = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh8, 12), _mm_set1_epi16(7)), 1),
                                        _mm_set1_epi16(1));
        const __m128i dsm = _mm_srai_epi16(qh8, 15); /* 0, or -1 where the delta is negative */
        /* ls * (ds - 8) = ls * (2 dsm - 7), each group's twice (its two 16-element bsums) */
        const __m128i coef = _mm_mullo_epi16(ls, _mm_sub_epi16(_mm_add_epi16(dsm, dsm), _mm_set1_epi16(7)));
        const __m256i c32 = _mm256_cvtepu16_epi32(coef);
        const __m256i w16 = _mm256_or_si256(c32, _mm256_slli_epi32(c32, 16));
#pragma GCC unroll 8
        for (int jj = 0; jj < NJ; jj++) sumi[jj] = _mm256_madd_epi16(w16, load32(LO_XJ(jj)->bsums));
        const __m256i lsv = _mm256_broadcastsi128_si256(ls);
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const unsigned qh = bp_load_u16(b + 34 + 2 * ib);
            const uint8_t *q = b + 2 + 4 * ib;
            const __m256i u = grid4(GRID4_INSERT, g_grid8, q[0] | ((qh << 8) & 0x700u), q[1] | ((qh << 5) & 0x700u),
                                    q[2] | ((qh << 2) & 0x700u), q[3] | ((qh >> 1) & 0x700u));
            const __m256i sc = bcast_word(lsv, ib);
            LO_GROUP(sumi, u, sc, ib)
        }
    }
    LO_BLOCK_END(sumi, f16(b) * 0.125f)
    LO_ROW_END
}
KQ_MULTI_NL(, bp_avx2_vec_iq1_s, iq1_s_row, LO_NJ)

/* IQ1_M, 56 bytes: 32 low index bytes at 0; 16 qh bytes at 32 (a nibble per 8 weights: 3 high
 * index bits, delta sign at bit 3); 4 u16 at 48: 3-bit scales per 16 weights (2s + 1) and, in
 * their top nibbles, the f16 super-scale. The delta is per 8 weights, finer than the bsums, so it
 * goes into the bytes: u = table + ds + 1 in 0..18, 8 g + ds = u - 9, and -9 ls sum x per 16 is
 * the bsums term. */
/* The four delta bits of a group (set: ds = -1) -> ds + 1 in each 8-byte lane. */
static uint64_t g_dplus[16][4] __attribute__((aligned(32)));

static void init_dplus(void) {
    for (int m = 0; m < 16; m++)
        for (int k = 0; k < 4; k++) g_dplus[m][k] = (m >> k) & 1 ? 0 : 0x0202020202020202ull;
}

static ALWAYS_INLINE void iq1_m_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    /* Scale i (of 16, 3 bits) is bits 3(i%4) of u16 i/4: replicate the u16s, shift left by
     * 9 - 3(i%4) with a multiply (AVX2 has no per-lane 16-bit shift), then right by 9. In bsums
     * order for the offset term; even scales in the low lane and odd in the high for the groups
     * (group ib's 16-element halves are scales 2 ib and 2 ib + 1, one lane each). */
    const __m256i rep_n = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7,
                                           6, 7, 6, 7, 6, 7);
    const __m256i mul_n = _mm256_setr_epi16(512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1);
    const __m256i rep_g = _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 0, 1, 0, 1, 2, 3, 2, 3, 4, 5,
                                           4, 5, 6, 7, 6, 7);
    const __m256i mul_g = _mm256_setr_epi16(512, 8, 512, 8, 512, 8, 512, 8, 64, 1, 64, 1, 64, 1, 64, 1);
    const __m256i m7 = _mm256_set1_epi16(7), one16 = _mm256_set1_epi16(1);
    LO_ROW_BEGIN(BP_BLOCK_BYTES_IQ1_M)
    __m256i sumi[LO_NJ];
    {
        const uint16_t s0 = bp_load_u16(b + 48), s1 = bp_load_u16(b + 50), s2 = bp_load_u16(b + 52),
                       s3 = bp_load_u16(b + 54);
        const uint16_t dbits = (uint16_t)((s0 >> 12) | ((s1 >> 8) & 0x00f0u) | ((s2 >> 4) & 0x0f00u) | (s3 & 0xf000u));
        const __m256i sv = _mm256_broadcastsi128_si256(_mm_loadl_epi64((const __m128i *)(b + 48)));
        __m256i scn = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(sv, rep_n), mul_n), 9), m7);
        scn = _mm256_add_epi16(_mm256_add_epi16(scn, scn), one16);
        __m256i scg = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(sv, rep_g), mul_g), 9), m7);
        scg = _mm256_add_epi16(_mm256_add_epi16(scg, scg), one16);
        const __m256i w16 = _mm256_mullo_epi16(scn, _mm256_set1_epi16(-9));
#pragma GCC unroll 8
        for (int jj = 0; jj < NJ; jj++) sumi[jj] = _mm256_madd_epi16(w16, load32(LO_XJ(jj)->bsums));
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 4 * ib;
            const unsigned hh = bp_load_u16(b + 32 + 2 * ib);
            /* bits 3, 7, 11, 15 of hh -> bits 0-3 (the products land on distinct bits) */
            const unsigned dm = (((hh & 0x8888u) * 0x249u) >> 12) & 15u;
            __m256i u = grid4(GRID4_INSERT, g_grid8, q[0] | ((hh << 8) & 0x700u), q[1] | ((hh << 4) & 0x700u),
                              q[2] | (hh & 0x700u), q[3] | ((hh >> 4) & 0x700u));
            u = _mm256_add_epi8(u, _mm256_load_si256((const __m256i *)(const void *)g_dplus[dm]));
            const __m256i sc = bcast_word(scg, ib);
            LO_GROUP(sumi, u, sc, ib)
        }
        LO_BLOCK_END(sumi, _cvtsh_ss(dbits) * 0.125f)
    }
    LO_ROW_END
}
KQ_MULTI_NL(, bp_avx2_vec_iq1_m, iq1_m_row, LO_NJ)

/* The lookup tables this file's kernels read, filled once (kernels.def BP_CPU_SETUP). */
void bp_avx2_iq1_ternary_setup(void) {
    init_grid8();
    init_dplus();
}

#endif
