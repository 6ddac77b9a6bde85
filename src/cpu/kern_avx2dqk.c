/* AVX2 dequantizers for the GEMM panels of Q4_K, Q5_K and IQ4_XS (kern_avx2dq.c holds the
 * others). Their reference dequantizers decode element by element; through the panel GEMM's
 * pack they held Q4_K / Q5_K / IQ4_XS at ~40-50 GFLOP/s at t = 64 on the dev machine (Zen 5,
 * 1000 x 4096, one core), where Q2_K / Q6_K with fast dequantizers ran ~250. Same decoding as
 * the decode kernels, written out as floats; tested against the reference through the GEMM
 * tests (batches past max_batch). */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2_util.h"

/* 32 unsigned bytes as q * a - m: the low 16 bytes (group g) and the high 16 (group g'). */
static ALWAYS_INLINE void put16_affine(float *dst, __m128i q, float a, float m) {
    const __m256 va = _mm256_set1_ps(a), vm = _mm256_set1_ps(m);
    _mm256_storeu_ps(dst, _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)), va, vm));
    _mm256_storeu_ps(dst + 8, _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8))), va, vm));
}
static ALWAYS_INLINE void put32_affine(float *dst, __m256i q, float a, float m) {
    put16_affine(dst, _mm256_castsi256_si128(q), a, m);
    put16_affine(dst + 16, _mm256_extracti128_si256(q, 1), a, m);
}

static void dq_q4_k(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q4_K, dst += BP_BLOCK_ELEMS_Q4_K) {
        const float d = f16(b), dmin = f16(b + 2);
        uint8_t sc[8], mn[8];
        scale_min_k4(b + 4, sc, mn);
        for (int j = 0; j < 4; j++) {
            const __m256i v = load32(b + 16 + 32 * j);
            put32_affine(dst + 64 * j, _mm256_and_si256(v, m4), d * sc[2 * j], dmin * mn[2 * j]);
            put32_affine(dst + 64 * j + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), d * sc[2 * j + 1],
                         dmin * mn[2 * j + 1]);
        }
    }
}

/* Q5_K: qh[32] at 16 (bit g of qh[l]: the fifth bit of group g's element l), quants at 48. */
static void dq_q5_k(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q5_K, dst += BP_BLOCK_ELEMS_Q5_K) {
        const float d = f16(b), dmin = f16(b + 2);
        uint8_t sc[8], mn[8];
        scale_min_k4(b + 4, sc, mn);
        __m256i qh = load32(b + 16);
        for (int j = 0; j < 4; j++) {
            const __m256i v = load32(b + 48 + 32 * j);
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
            qh = _mm256_srli_epi16(qh, 2);
            put32_affine(dst + 64 * j, _mm256_or_si256(_mm256_and_si256(v, m4), h0), d * sc[2 * j], dmin * mn[2 * j]);
            put32_affine(dst + 64 * j + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), h1),
                         d * sc[2 * j + 1], dmin * mn[2 * j + 1]);
        }
    }
}

static const int8_t iq4nl_values_dq[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* 16 signed bytes times s into dst[0..16). */
static ALWAYS_INLINE void put16s(float *dst, __m128i q, float s) {
    const __m256 vs = _mm256_set1_ps(s);
    _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), vs));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), vs));
}

/* IQ4_XS: d; scales_h u16 at 2; scales_l[4] at 4; qs[128] at 8, 16 bytes per group of 32 (low
 * nibbles: elements 0..15, high: 16..31); value kvalues[n] * d * (6-bit scale - 32). */
static void dq_iq4_xs(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    const __m128i tbl = _mm_loadu_si128((const __m128i *)iq4nl_values_dq), m4 = _mm_set1_epi8(0x0f);
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ4_XS, dst += BP_BLOCK_ELEMS_IQ4_XS) {
        const float d = f16(b);
        const unsigned sh = bp_load_u16(b + 2);
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (int)(((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4));
            const float s = d * (float)(ls - 32);
            const __m128i v = _mm_loadu_si128((const __m128i *)(b + 8 + 16 * ib));
            put16s(dst + 32 * ib, _mm_shuffle_epi8(tbl, _mm_and_si128(v, m4)), s);
            put16s(dst + 32 * ib + 16, _mm_shuffle_epi8(tbl, _mm_and_si128(_mm_srli_epi16(v, 4), m4)), s);
        }
    }
}

bool bp_cpu_avx2dqk_init(bp_cpu_ops *ops) {
    ops->dequant[BP_KIND_Q4_K] = dq_q4_k;
    ops->dequant[BP_KIND_Q5_K] = dq_q5_k;
    ops->dequant[BP_KIND_IQ4_XS] = dq_iq4_xs;
    return true;
}

#else
bool bp_cpu_avx2dqk_init(bp_cpu_ops *ops) {
    (void)ops;
    return false;
}
#endif
