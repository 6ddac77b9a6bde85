/* Helpers shared by the AVX2 kernel files (include only from files built with -mavx2 -mfma
 * -mf16c, inside their #if __AVX2__ block). All static inline: nothing here is emitted into a
 * file built without AVX2, so no AVX2 code can be reached on a machine without it. */
#ifndef BP_CPU_AVX2_UTIL_H
#define BP_CPU_AVX2_UTIL_H

#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE float f16(const uint8_t *p) { return _cvtsh_ss(bp_load_u16(p)); }

/* Software prefetch for every decode kernel's block loop (k-quants, IQ grid and IQ1 kinds, TQ,
 * AVX2's Q1_0 / Q2_0 / NVFP4, the float rows, the repacked kinds' groups): called once per
 * block of `bytes` at b, it asks for the lines of the block BP_ROW_PF bytes on, so every line of
 * a run of rows is requested once, BP_ROW_PF ahead (a row is 2-3 KB for the quantized kinds at
 * 4096 columns, so the request crosses into the next row, which the same thread takes next).
 * Every line is covered: the pointer moves `bytes` a call and the requests cover
 * (bytes + 63) / 64 lines. Why: the hardware prefetchers alone leave these loops cold at about
 * half their hot speed. 4 KB into L2 (prefetcht1): 1-2 KB gave less, 6-12 KB the same;
 * prefetcht0 (into L1) less than t1, prefetchnta half.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/simd.h. */
enum { BP_ROW_PF = 4096 };
#define BP_PREFETCH_BLOCK(b, bytes)                                                                   \
    do {                                                                                              \
        for (int pf_l_ = 0; pf_l_ < (int)(((bytes) + 63) / 64); pf_l_++)                              \
            _mm_prefetch((const char *)(b) + BP_ROW_PF + 64 * pf_l_, _MM_HINT_T1);                    \
    } while (0)

static ALWAYS_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sum of u8 x s8 products, 4 per int32 lane. maddubs saturates at +-32767: every caller's
 * operands keep a pair below that (largest: 63 * 127 * 2 = 16002 for Q6_K). */
static ALWAYS_INLINE __m256i dot_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
/* Signed x signed: move the sign of a onto b, then unsigned |a| x signed. |a| <= 127 (no -128
 * in any table or in our activations), so a pair stays under 2 * 127 * 127 = 32258. */
static ALWAYS_INLINE __m256i dot_ss(__m256i a, __m256i b) {
    return dot_us(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}
/* u8 x s8 pairs (16 int16) times per-lane int16 scales, summed to 8 int32. */
static ALWAYS_INLINE __m256i dot_us_scaled(__m256i u, __m256i s, __m256i sc16) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc16);
}
/* Low 128-bit lane scale a, high lane scale b (two 16-element groups in one register). */
static ALWAYS_INLINE __m256i scales2(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16((int16_t)b), _mm_set1_epi16((int16_t)a));
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0..15) then high (16..31). */
static ALWAYS_INLINE __m256i nibbles32(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m256i lh = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(lh, _mm256_set1_epi8(0x0f));
}

/* 32 bits -> 32 bytes, byte i = 0xff when bit i is set. */
static ALWAYS_INLINE __m256i bits32(uint32_t b) {
    __m256i v = _mm256_set1_epi32((int)b);
    v = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2,
                                                 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    v = _mm256_or_si256(v, bit);
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

static ALWAYS_INLINE __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* From 16 int16 scales (a group's scale per 16 elements), the pair g, g+1 (g even) as one
 * register: scale g in the low 128-bit lane, g+1 in the high. scales_dup once per block (two
 * in-lane unpacks: each scale's word twice in a dword; dup[0] holds scales 0-3 and 8-11, dup[1]
 * 4-7 and 12-15), then one vpermd per pair, where a vpermd + vpshufb per pair took two
 * shuffle-port operations per 32 weights.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/simd.h. */
static ALWAYS_INLINE void scales_dup(__m256i sc16, __m256i dup[2]) {
    dup[0] = _mm256_unpacklo_epi16(sc16, sc16);
    dup[1] = _mm256_unpackhi_epi16(sc16, sc16);
}
static ALWAYS_INLINE __m256i pair_scales(const __m256i dup[2], int g) {
    const int a = (g >= 8 ? 4 : 0) + (g & 3);
    return _mm256_permutevar8x32_epi32(dup[(g >> 2) & 1], _mm256_setr_epi32(a, a, a, a, a + 1, a + 1, a + 1, a + 1));
}

/* sum_g w[g] * bsums[g] over a q8x256 block's 16 group sums, as 8 int32 lanes (no horizontal
 * sum: the lanes are added into a vector accumulator). w: 16 int16. */
static ALWAYS_INLINE __m256i group_dot(__m256i w16, const bp_q8x256 *x) {
    return _mm256_madd_epi16(w16, _mm256_loadu_si256((const __m256i *)x->bsums));
}

static ALWAYS_INLINE __m256i load16_u8_to_i16(const uint8_t *p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
}

/* Four 8-byte entries of a table, t[a] .. t[d], as one register (t[a] in the low 64 bits): the
 * grid kinds' 8-weight lookups (avx2/decode_grid_lowbit.c IQ2_S, avx2/decode_iq1_ternary.c IQ1_S / IQ1_M). Two
 * forms, picked per kernel by which ran faster (the form is a constant, so each call inlines one):
 * - GRID4_BLEND: one movq load and three broadcast loads merged by blends, no shuffle-port work.
 *   IQ2_S's decode uses it.
 * - GRID4_INSERT: _mm256_set_epi64x (vmovq, vpinsrq, vinserti128: three shuffles). IQ1_S/IQ1_M
 *   keep it (the blend form was slower at t = 1-2, equal at 4-8), as does IQ2_S past 2 inputs a
 *   pass (its per-group decode).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/simd.h. */
typedef enum { GRID4_INSERT, GRID4_BLEND } grid4_form;

static ALWAYS_INLINE __m256i grid4(grid4_form form, const uint64_t *t, size_t a, size_t b, size_t c, size_t d) {
    if (form == GRID4_INSERT) return _mm256_set_epi64x((long long)t[d], (long long)t[c], (long long)t[b], (long long)t[a]);
    const __m256i g0 = _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(const void *)(t + a)));
    const __m256i g1 = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(t + b)));
    const __m256i g2 = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(t + c)));
    const __m256i g3 = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(const void *)(t + d)));
    return _mm256_blend_epi32(_mm256_blend_epi32(g0, g1, 0x0c), _mm256_blend_epi32(g2, g3, 0xc0), 0xf0);
}

/* The E2M1 (MXFP4 / NVFP4) values doubled, as int8 by nibble (the scales carry the half). */
static const int8_t bp_fp4_doubled_i8[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* A 16-entry byte table in both 128-bit lanes, for pshufb lookups. */
static ALWAYS_INLINE __m256i table16(const int8_t *t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
}

/* The 6-bit scale/min pairs of Q4_K and Q5_K: 12 bytes hold 8 scales and 8 mins; as bytes 0-7
 * (the scales) and 8-15 (the mins) of one register, or into two arrays. */
static ALWAYS_INLINE __m128i scale_min_k4v(const uint8_t *s) {
    /* In two 64-bit halves: lo = [sc0-3 mn0-3] (bytes 0-7, low 6 bits), hi = [sc4-7 mn4-7]
     * (bytes 8-11's nibbles, the top 2 bits of bytes 0-7 above them), then one byte shuffle
     * into [sc0-7 mn0-7]. Two vector inserts where four 32-bit ones took 4 + 3 operations on
     * the vector ports (the decode kernels' per-block overhead). */
    const uint64_t a = bp_load_u64(s);
    const uint32_t a2 = bp_load_u32(s + 8);
    const uint64_t lo = a & 0x3f3f3f3f3f3f3f3full;
    const uint64_t hi = ((uint64_t)(a2 & 0x0f0f0f0fu) | ((uint64_t)((a2 >> 4) & 0x0f0f0f0fu) << 32)) | ((a >> 2) & 0x3030303030303030ull);
    const __m128i v = _mm_insert_epi64(_mm_cvtsi64_si128((long long)lo), (long long)hi, 1);
    return _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15));
}
static ALWAYS_INLINE void scale_min_k4(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    __m128i v = scale_min_k4v(s);
    _mm_storel_epi64((__m128i *)(void *)sc, v);
    _mm_storel_epi64((__m128i *)(void *)mn, _mm_unpackhi_epi64(v, v));
}

/* Q3_K's 16 6-bit scales (stored +32) from 12 bytes, as 16 int16. */
static ALWAYS_INLINE __m256i scales_q3_k(const uint8_t *s) {
    uint32_t a0 = bp_load_u32(s), a1 = bp_load_u32(s + 4), t = bp_load_u32(s + 8);
    const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu;
    __m128i v = _mm_setr_epi32((int)((a0 & k2) | (((t >> 0) & k1) << 4)), (int)((a1 & k2) | (((t >> 2) & k1) << 4)),
                               (int)(((a0 >> 4) & k2) | (((t >> 4) & k1) << 4)),
                               (int)(((a1 >> 4) & k2) | (((t >> 6) & k1) << 4)));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(v, _mm_set1_epi8(32)));
}

/* Q3_K's one decoding on this path: walks block b's 8 groups of 32 elements in order, running
 * the statement(s) after Q with G (0..7) and Q (__m256i: 0..7, the 2 low bits of qs[32 (G / 4)
 * + l] at bit pair G % 4 plus 4 x bit G of hmask[l]; the element is Q - 4). The decode kernels
 * (tile and rows), the GEMM panels and the dequantizer all read Q3_K through it. */
#define Q3_K_GROUPS(b, G, Q, ...)                                                                      \
    do {                                                                                               \
        const __m256i q3_m3_ = _mm256_set1_epi8(3), q3_one_ = _mm256_set1_epi8(1);                     \
        __m256i q3_hm_ = load32(b);                                                                    \
        for (int q3_n_ = 0; q3_n_ < 2; q3_n_++) {                                                      \
            __m256i q3_v_ = load32((b) + 32 + 32 * q3_n_);                                             \
            for (int q3_j_ = 0; q3_j_ < 4; q3_j_++) {                                                  \
                const int G = 4 * q3_n_ + q3_j_;                                                       \
                const __m256i Q = _mm256_or_si256(_mm256_and_si256(q3_v_, q3_m3_),                     \
                                                  _mm256_slli_epi16(_mm256_and_si256(q3_hm_, q3_one_), 2)); \
                __VA_ARGS__;                                                                           \
                q3_v_ = _mm256_srli_epi16(q3_v_, 2);                                                   \
                q3_hm_ = _mm256_srli_epi16(q3_hm_, 1);                                                 \
            }                                                                                          \
        }                                                                                              \
    } while (0)

/* Q2_K's, likewise: group G (0..7) of block b is Q = bit pair G % 4 of qs[32 (G / 4) + l] (qs at
 * byte 16), unsigned 0..3 (its scale and min are the low and high nibble of byte 2 G / 2 G + 1). */
#define Q2_K_GROUPS(b, G, Q, ...)                                                                      \
    do {                                                                                               \
        const __m256i q2_m3_ = _mm256_set1_epi8(3);                                                    \
        for (int q2_n_ = 0; q2_n_ < 2; q2_n_++) {                                                      \
            __m256i q2_v_ = load32((b) + 16 + 32 * q2_n_);                                             \
            for (int q2_j_ = 0; q2_j_ < 4; q2_j_++) {                                                  \
                const int G = 4 * q2_n_ + q2_j_;                                                       \
                const __m256i Q = _mm256_and_si256(q2_v_, q2_m3_);                                     \
                __VA_ARGS__;                                                                           \
                q2_v_ = _mm256_srli_epi16(q2_v_, 2);                                                   \
            }                                                                                          \
        }                                                                                              \
    } while (0)

/* Bit k (0..7) of every byte of v, moved to bit 4, the other bits 0: one 16-bit shift and a
 * mask (the bits a 16-bit shift carries across the byte boundary never land on bit 4). */
static ALWAYS_INLINE __m256i bit_to4(__m256i v, int k) {
    const __m256i m = _mm256_set1_epi8(0x10);
    if (k < 4) return _mm256_and_si256(_mm256_slli_epi16(v, 4 - k), m);
    if (k == 4) return _mm256_and_si256(v, m);
    return _mm256_and_si256(_mm256_srli_epi16(v, k - 4), m);
}
/* Q5_K group pair j of a block (quants at 48, qh = load32(b + 16)): the low group's and the
 * high group's 32 unsigned 5-bit values (fifth bits: bits 2j and 2j + 1 of qh). */
static ALWAYS_INLINE void q5_k_pair(const uint8_t *b, int j, __m256i qh, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i v = load32(b + 48 + 32 * j);
    *lo = _mm256_or_si256(_mm256_and_si256(v, m4), bit_to4(qh, 2 * j));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), bit_to4(qh, 2 * j + 1));
}

/* Q6_K half h of a block: its four 32-element runs as unsigned 6-bit values (stored + 32).
 * Run k's high bits are bits 2k, 2k + 1 of qh, moved to bits 4-5 by one shift (left 4 - 2k, or
 * right 2 for k = 3) and one mask: a 16-bit shift moves bits across the byte boundary only
 * outside bits 4-5 of either byte. */
static ALWAYS_INLINE void q6_k_half(const uint8_t *b, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i l0 = load32(b + 64 * h), l1 = load32(b + 64 * h + 32), qh = load32(b + 128 + 32 * h);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
}

/* Activation quantizers' helpers (avx2/float_kinds.c, avx2/gemm_int8.c; same rounding as the scalar ones:
 * nearest-even). */
static ALWAYS_INLINE __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static ALWAYS_INLINE float amax32(const float *x) {
    __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(_mm256_loadu_ps(x)), abs_ps(_mm256_loadu_ps(x + 8))),
                             _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + 16)), abs_ps(_mm256_loadu_ps(x + 24))));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 32 floats times id, rounded to int32 (nearest-even), in four registers. */
static ALWAYS_INLINE void round32(const float *x, float id, __m256i r[4]) {
    const __m256 vid = _mm256_set1_ps(id);
    for (int k = 0; k < 4; k++) r[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid));
}
/* Four registers of int32 (each within int8) as 32 bytes in order. */
static ALWAYS_INLINE __m256i pack32(const __m256i r[4]) {
    __m256i v = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    /* packs work per 128-bit lane: restore element order. */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
/* 32 floats times id, rounded, as 32 int8 in order. */
static ALWAYS_INLINE __m256i quant32v(const float *x, float id) {
    __m256i r[4];
    round32(x, id, r);
    return pack32(r);
}
/* 32 floats times id, rounded, packed to int8 in order; returns the sum of the 32 quants. */
static ALWAYS_INLINE int32_t quant32(const float *x, float id, int8_t *q) {
    __m256i r[4];
    round32(x, id, r);
    _mm256_storeu_si256((__m256i *)q, pack32(r));
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(r[0], r[1]), _mm256_add_epi32(r[2], r[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    return _mm_cvtsi128_si32(s4);
}

/* ---- multi-input kernels over bp_q8x256 activations (avx2/decode_legacy_kquant.c, avx2/decode_grid_lowbit.c) ---- */

/* Most inputs per pass (the row kernels' accumulator arrays) and rows per block. */
enum { KQ_NJ = 8, KQ_RB = 16 };

/* Input jj's activations of block i, in a row kernel over NJ inputs (xb, xs in scope). */
#define XJ(jj) ((const bp_q8x256 *)(const void *)(xb + (size_t)(jj) * xs) + i)
/* The frame of a multi-input row kernel: acc per input, block loop with b at block i, y. */
#define KQ_ROW_BEGIN(BB)                                                                 \
    const int64_t nb = job->cols / 256;                                                  \
    const size_t xs = job->xq_stride;                                                    \
    const uint8_t *xb = (const uint8_t *)job->xq + (size_t)j0 * xs;                      \
    const uint8_t *b = job->w + (size_t)r * job->row_bytes;                              \
    __m256 acc[KQ_NJ];                                                                   \
    __m256i sumi[KQ_NJ];                                                                 \
    for (int jj = 0; jj < NJ; jj++) acc[jj] = _mm256_setzero_ps();                       \
    for (int64_t i = 0; i < nb; i++, b += (BB)) {                                        \
        BP_PREFETCH_BLOCK(b, BB);                                                        \
        for (int jj = 0; jj < NJ; jj++) sumi[jj] = _mm256_setzero_si256();
#define KQ_ROW_END                                                                       \
    }                                                                                    \
    for (int jj = 0; jj < NJ; jj++) job->y[(j0 + jj) * job->rows + r] = hsum8(acc[jj]);

/* Rows in blocks of KQ_RB, each block run for every group of up to N inputs (N <= KQ_NJ): the
 * block's weights (16 rows x 2.3 KB at 4096 columns) stay in L1/L2 across the groups, where a
 * whole chunk of rows per group (hundreds of rows) came again from L3. Each input's sums are
 * formed the same way whatever the group, so results do not depend on the batch. */
/* KQ_MULTI_NL: the same with the function's linkage given (empty for the kernels the table names). */
#define KQ_MULTI_N(NAME, ROW, N) KQ_MULTI_NL(static, NAME, ROW, N)
#define KQ_MULTI_NL(LINKAGE, NAME, ROW, N)                                                         \
    LINKAGE void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                              \
        for (int64_t rb = r0; rb < r1; rb += KQ_RB) {                                              \
            const int64_t re = r1 - rb < KQ_RB ? r1 : rb + KQ_RB;                                  \
            for (int64_t j0 = 0; j0 < job->batch; j0 += (N)) {                                     \
                const int64_t left = job->batch - j0;                                              \
                for (int64_t r = rb; r < re; r++) {                                                \
                    switch (left >= (N) ? (N) : (int)left) {                                       \
                    case 8: ROW(job, r, (N) >= 8 ? 8 : 1, j0); break;                              \
                    case 7: ROW(job, r, (N) >= 7 ? 7 : 1, j0); break;                              \
                    case 6: ROW(job, r, (N) >= 6 ? 6 : 1, j0); break;                              \
                    case 5: ROW(job, r, (N) >= 5 ? 5 : 1, j0); break;                              \
                    case 4: ROW(job, r, 4, j0); break;                                             \
                    case 3: ROW(job, r, 3, j0); break;                                             \
                    case 2: ROW(job, r, 2, j0); break;                                             \
                    default: ROW(job, r, 1, j0); break;                                            \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
#define KQ_MULTI(NAME, ROW) KQ_MULTI_N(NAME, ROW, 4)
#define KQ_MULTI8(NAME, ROW) KQ_MULTI_N(NAME, ROW, 8)
#endif
