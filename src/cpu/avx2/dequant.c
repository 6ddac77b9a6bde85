/* AVX2 dequantizers for the GEMM panels of the kinds whose reference dequantizer is slow
 * (1-6 ns per value: plain per-element loops, on purpose). A 512-input prefill dequantizes
 * every weight once, so at 2-6 ns a value the reference alone would cost a third to a half of
 * the GEMM's time. Same decoding as the decode kernels (avx2/decode_legacy_kquant.c, avx2/decode_grid_lowbit.c), written
 * out as floats; tested against the reference through the GEMM tests. */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"
#include "kinds/iq_tables.h"

/* 16 signed bytes (low lane of q) times scale into dst[0..16). */
static ALWAYS_INLINE void put16(float *dst, __m128i q, __m256 scale) {
    _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), scale));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), scale));
}
/* 32 signed bytes: the first 16 times s0, the last 16 times s1. */
static ALWAYS_INLINE void put32(float *dst, __m256i q, float s0, float s1) {
    put16(dst, _mm256_castsi256_si128(q), _mm256_set1_ps(s0));
    put16(dst + 16, _mm256_extracti128_si256(q, 1), _mm256_set1_ps(s1));
}
/* 16 bytes as q * a - m. */
static ALWAYS_INLINE void put16_affine(float *dst, __m128i q, float a, float m) {
    __m256 va = _mm256_set1_ps(a), vm = _mm256_set1_ps(m);
    _mm256_storeu_ps(dst, _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)), va, vm));
    _mm256_storeu_ps(dst + 8, _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8))), va, vm));
}

void bp_avx2_dq_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(bp_load_u16(p + 2 * i));
}

void bp_avx2_dq_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(
                                      _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i))), 16)));
    for (; i < n; i++) dst[i] = bp_bf16_to_f32(bp_load_u16(p + 2 * i));
}

void bp_avx2_dq_q6_k(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    const __m256i o32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q6_K, dst += BP_BLOCK_ELEMS_Q6_K) {
        const float d = f16(b + 208);
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6_k_half(b, h, q);
            for (int k = 0; k < 4; k++)
                put32(dst + 128 * h + 32 * k, _mm256_sub_epi8(q[k], o32), d * sc[8 * h + 2 * k], d * sc[8 * h + 2 * k + 1]);
        }
    }
}

void bp_avx2_dq_q2_k(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q2_K, dst += BP_BLOCK_ELEMS_Q2_K) {
        const float d = f16(b + 80), dmin = f16(b + 82);
        Q2_K_GROUPS(b, g, q, {
            float *o = dst + 32 * g;
            const uint8_t s0 = b[2 * g], s1 = b[2 * g + 1];
            put16_affine(o, _mm256_castsi256_si128(q), d * (float)(s0 & 15), dmin * (float)(s0 >> 4));
            put16_affine(o + 16, _mm256_extracti128_si256(q, 1), d * (float)(s1 & 15), dmin * (float)(s1 >> 4));
        });
    }
}

void bp_avx2_dq_q3_k(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    const __m256i four = _mm256_set1_epi8(4);
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q3_K, dst += BP_BLOCK_ELEMS_Q3_K) {
        const float d = f16(b + 108);
        _Alignas(32) int16_t sc[16]; /* the 16 scales - 32 */
        _mm256_store_si256((__m256i *)(void *)sc, scales_q3_k(b + 96));
        Q3_K_GROUPS(b, g, q, put32(dst + 32 * g, _mm256_sub_epi8(q, four), d * (float)sc[2 * g], d * (float)sc[2 * g + 1]));
    }
}

void bp_avx2_dq_tq2_0(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_TQ2_0, dst += BP_BLOCK_ELEMS_TQ2_0) {
        const float d = f16(b + 64);
        for (int n = 0; n < 2; n++) {
            __m256i v = load32(b + 32 * n);
            for (int j = 0; j < 4; j++) {
                put32(dst + 128 * n + 32 * j, _mm256_sub_epi8(_mm256_and_si256(v, m3), one), d, d);
                v = _mm256_srli_epi16(v, 2);
            }
        }
    }
}

void bp_avx2_dq_q1_0(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q1_0, dst += BP_BLOCK_ELEMS_Q1_0) {
        const float d = f16(b);
        for (int s = 0; s < 4; s++) {
            /* Set bit: +1, clear: -1, as bytes: (mask & 2) - 1. */
            __m256i q = _mm256_sub_epi8(_mm256_and_si256(bits32(bp_load_u32(b + 2 + 4 * s)), _mm256_set1_epi8(2)),
                                        _mm256_set1_epi8(1));
            put32(dst + 32 * s, q, d, d);
        }
    }
}

/* Grid kinds: unsigned magnitudes with the weights' signs applied in bytes, then scaled. */
static ALWAYS_INLINE __m256i signed_by_mask(__m256i g, __m256i mask) {
    return _mm256_sub_epi8(_mm256_xor_si256(g, mask), mask);
}

static ALWAYS_INLINE uint32_t ksigns4_dq(uint32_t aux) {
    return (uint32_t)bp_ksigns_iq2xs[aux & 127] | (uint32_t)bp_ksigns_iq2xs[(aux >> 7) & 127] << 8 |
           (uint32_t)bp_ksigns_iq2xs[(aux >> 14) & 127] << 16 | (uint32_t)bp_ksigns_iq2xs[(aux >> 21) & 127] << 24;
}

void bp_avx2_dq_iq2_xxs(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ2_XXS, dst += BP_BLOCK_ELEMS_IQ2_XXS) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            uint32_t aux = bp_load_u32(q + 4);
            __m256i g = _mm256_set_epi64x((long long)bp_iq2xxs_grid[q[3]], (long long)bp_iq2xxs_grid[q[2]],
                                          (long long)bp_iq2xxs_grid[q[1]], (long long)bp_iq2xxs_grid[q[0]]);
            float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            put32(dst + 32 * ib, signed_by_mask(g, bits32(ksigns4_dq(aux))), db, db);
        }
    }
}

void bp_avx2_dq_iq2_xs(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ2_XS, dst += BP_BLOCK_ELEMS_IQ2_XS) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            uint16_t q0 = bp_load_u16(q), q1 = bp_load_u16(q + 2), q2 = bp_load_u16(q + 4), q3 = bp_load_u16(q + 6);
            __m256i g = _mm256_set_epi64x((long long)bp_iq2xs_grid[q3 & 511], (long long)bp_iq2xs_grid[q2 & 511],
                                          (long long)bp_iq2xs_grid[q1 & 511], (long long)bp_iq2xs_grid[q0 & 511]);
            uint32_t s4 = (uint32_t)bp_ksigns_iq2xs[q0 >> 9] | (uint32_t)bp_ksigns_iq2xs[q1 >> 9] << 8 |
                          (uint32_t)bp_ksigns_iq2xs[q2 >> 9] << 16 | (uint32_t)bp_ksigns_iq2xs[q3 >> 9] << 24;
            uint8_t sc = b[66 + ib];
            put32(dst + 32 * ib, signed_by_mask(g, bits32(s4)), d * (0.5f + (float)(sc & 15)) * 0.25f,
                  d * (0.5f + (float)(sc >> 4)) * 0.25f);
        }
    }
}

void bp_avx2_dq_iq2_s(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ2_S, dst += BP_BLOCK_ELEMS_IQ2_S) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = b + 2 + 4 * ib;
            unsigned qh = b[66 + ib];
            __m256i g = _mm256_set_epi64x((long long)bp_iq2s_grid[qs[3] | ((qh << 2) & 0x300)],
                                          (long long)bp_iq2s_grid[qs[2] | ((qh << 4) & 0x300)],
                                          (long long)bp_iq2s_grid[qs[1] | ((qh << 6) & 0x300)],
                                          (long long)bp_iq2s_grid[qs[0] | ((qh << 8) & 0x300)]);
            uint8_t sc = b[74 + ib];
            put32(dst + 32 * ib, signed_by_mask(g, bits32(bp_load_u32(b + 34 + 4 * ib))),
                  d * (0.5f + (float)(sc & 15)) * 0.25f, d * (0.5f + (float)(sc >> 4)) * 0.25f);
        }
    }
}

void bp_avx2_dq_iq3_xxs(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ3_XXS, dst += BP_BLOCK_ELEMS_IQ3_XXS) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            uint32_t aux = bp_load_u32(b + 66 + 4 * ib);
            __m256i g = _mm256_set_epi32((int)bp_iq3xxs_grid[q[7]], (int)bp_iq3xxs_grid[q[6]], (int)bp_iq3xxs_grid[q[5]],
                                         (int)bp_iq3xxs_grid[q[4]], (int)bp_iq3xxs_grid[q[3]], (int)bp_iq3xxs_grid[q[2]],
                                         (int)bp_iq3xxs_grid[q[1]], (int)bp_iq3xxs_grid[q[0]]);
            float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            put32(dst + 32 * ib, signed_by_mask(g, bits32(ksigns4_dq(aux))), db, db);
        }
    }
}

void bp_avx2_dq_iq3_s(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ3_S, dst += BP_BLOCK_ELEMS_IQ3_S) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            unsigned qh = b[66 + ib];
            int gi[8];
            for (int k = 0; k < 8; k++) gi[k] = (int)bp_iq3s_grid[q[k] | (((qh >> k) & 1u) << 8)];
            __m256i g = _mm256_loadu_si256((const __m256i *)gi);
            float db = d * (float)(1 + 2 * ((b[106 + ib / 2] >> (4 * (ib % 2))) & 15));
            put32(dst + 32 * ib, signed_by_mask(g, bits32(bp_load_u32(b + 74 + 4 * ib))), db, db);
        }
    }
}

#endif
