/* AVX2 dequantizers for the GEMM panels of Q4_K, Q5_K, IQ4_XS and the 32-element kinds (Q4_0
 * Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL MXFP4; avx2/dequant.c holds the others). Their reference
 * dequantizers decode element by element, which made the panel GEMM's pack the bottleneck past
 * max_batch (the GEMM far under the decode kernels). Same decoding as the decode kernels,
 * written out as floats; tested against the reference through the GEMM tests (batches past
 * max_batch).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/dequant_4bit.c. */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"

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

void bp_avx2_dq_q4_k(const void *src, float *dst, int64_t nb) {
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
void bp_avx2_dq_q5_k(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q5_K, dst += BP_BLOCK_ELEMS_Q5_K) {
        const float d = f16(b), dmin = f16(b + 2);
        uint8_t sc[8], mn[8];
        scale_min_k4(b + 4, sc, mn);
        const __m256i qh = load32(b + 16);
        __m256i lo, hi;
        _Pragma("GCC unroll 4")
        for (int j = 0; j < 4; j++) {
            q5_k_pair(b, j, qh, &lo, &hi);
            put32_affine(dst + 64 * j, lo, d * sc[2 * j], dmin * mn[2 * j]);
            put32_affine(dst + 64 * j + 32, hi, d * sc[2 * j + 1], dmin * mn[2 * j + 1]);
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
void bp_avx2_dq_iq4_xs(const void *src, float *dst, int64_t nb) {
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

/* ---- the 32-element kinds: 32 bytes of quants per block as signed bytes, times the scale ---- */
static ALWAYS_INLINE __m256i nib32(const uint8_t *qs) { return nibbles32(qs); } /* 0..15, low nibbles first */

void bp_avx2_dq_q4_0(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q4_0, dst += 32) {
        const __m256i q = _mm256_sub_epi8(nib32(b + 2), _mm256_set1_epi8(8));
        const float d = f16(b);
        put16s(dst, _mm256_castsi256_si128(q), d);
        put16s(dst + 16, _mm256_extracti128_si256(q, 1), d);
    }
}
void bp_avx2_dq_q4_1(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q4_1, dst += 32) put32_affine(dst, nib32(b + 4), f16(b), -f16(b + 2));
}
void bp_avx2_dq_q5_0(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q5_0, dst += 32) {
        const __m256i q5 = _mm256_or_si256(nib32(b + 6), _mm256_and_si256(bits32(bp_load_u32(b + 2)), _mm256_set1_epi8(0x10)));
        const __m256i q = _mm256_sub_epi8(q5, _mm256_set1_epi8(16));
        const float d = f16(b);
        put16s(dst, _mm256_castsi256_si128(q), d);
        put16s(dst + 16, _mm256_extracti128_si256(q, 1), d);
    }
}
void bp_avx2_dq_q5_1(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q5_1, dst += 32) {
        const __m256i q5 = _mm256_or_si256(nib32(b + 8), _mm256_and_si256(bits32(bp_load_u32(b + 4)), _mm256_set1_epi8(0x10)));
        put32_affine(dst, q5, f16(b), -f16(b + 2));
    }
}
void bp_avx2_dq_q8_0(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q8_0, dst += 32) {
        const __m256i q = load32(b + 2);
        const float d = f16(b);
        put16s(dst, _mm256_castsi256_si128(q), d);
        put16s(dst + 16, _mm256_extracti128_si256(q, 1), d);
    }
}
void bp_avx2_dq_iq4_nl(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    const __m256i tbl = table16(iq4nl_values_dq);
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ4_NL, dst += 32) {
        const __m256i q = _mm256_shuffle_epi8(tbl, nib32(b + 2));
        const float d = f16(b);
        put16s(dst, _mm256_castsi256_si128(q), d);
        put16s(dst + 16, _mm256_extracti128_si256(q, 1), d);
    }
}
/* MXFP4: E8M0 exponent e -> 2^(e-127) / 2 (e < 2: the float subnormals), times the doubled
 * E2M1 value. */
void bp_avx2_dq_mxfp4(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    const __m256i tbl = table16(bp_fp4_doubled_i8);
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_MXFP4, dst += 32) {
        const uint32_t u = b[0] < 2 ? 0x00200000u << b[0] : (uint32_t)(b[0] - 1) << 23;
        float d;
        memcpy(&d, &u, sizeof d);
        const __m256i q = _mm256_shuffle_epi8(tbl, nib32(b + 1));
        put16s(dst, _mm256_castsi256_si128(q), d);
        put16s(dst + 16, _mm256_extracti128_si256(q, 1), d);
    }
}

#endif
