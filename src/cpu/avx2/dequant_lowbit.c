/* AVX2 dequantizers for the GEMM panels of TQ1_0, NVFP4, IQ1_S, IQ1_M and Q2_0, the kinds that still
 * went through their reference dequantizer (an element-by-element loop: TQ1_0 reads each trit
 * with a multiply, a shift and two divisions by constants; NVFP4 an ldexpf per 16 weights).
 * Every batch that leaves the decode kernels dequantizes the whole weight once, so through the
 * reference a batch just past max_batch cost many times the one before (~15x for TQ1_0, NVFP4),
 * and the AVX-512 int8 GEMM, which packs with these too, paid that at every batch. Each value is
 * computed with the reference's float operations in the reference's order (d * t; d * nibble
 * value; dl * (grid + delta)), so the output is bit-identical to it: test_cpu_dequant checks
 * every fast dequantizer against the reference.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/dequant_lowbit.c. */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"
#include "kinds/iq_tables.h"
#include "kinds/kinds_internal.h"

/* 16 int16 lanes -> 16 floats times d, in element order. */
static ALWAYS_INLINE void put16_i16(float *dst, __m256i v, __m256 d) {
    _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(v))), d));
    _mm256_storeu_ps(dst + 8,
                     _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(v, 1))), d));
}

/* Trit k of 16 TQ1_0 bytes as int16 -1/0/+1: the byte holds ceil(v * 256 / 243) of a 5-trit
 * number v, so (byte * 3^k mod 256) * 3 >> 8 is trit k (as the reference reads it). */
static ALWAYS_INLINE __m256i trits16(__m256i bytes16, int pow3) {
    const __m256i q = _mm256_and_si256(_mm256_mullo_epi16(bytes16, _mm256_set1_epi16((int16_t)pow3)),
                                       _mm256_set1_epi16(0xff));
    return _mm256_sub_epi16(_mm256_srli_epi16(_mm256_mullo_epi16(q, _mm256_set1_epi16(3)), 8), _mm256_set1_epi16(1));
}

/* TQ1_0, 54 bytes: qs[48] | qh[4] | d. Elements 0-159: trit e/32 of qs[e%32]; 160-239: trit
 * (e-160)/16 of qs[32 + e%16]; 240-255: trit (e-240)/4 of qh[e%4]. */
void bp_avx2_dq_tq1_0(const void *src, float *dst, int64_t nb) {
    static const int pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_TQ1_0, dst += BP_QK_K) {
        const float df = f16(b + 52);
        const __m256 d = _mm256_set1_ps(df);
        const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b));
        const __m256i hi = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b + 16)));
        const __m256i mid = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b + 32)));
        for (int k = 0; k < 5; k++) {
            put16_i16(dst + 32 * k, trits16(lo, pow3[k]), d);
            put16_i16(dst + 32 * k + 16, trits16(hi, pow3[k]), d);
            put16_i16(dst + 160 + 16 * k, trits16(mid, pow3[k]), d);
        }
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 4; j++) {
                const uint8_t q = (uint8_t)(b[48 + j] * pow3[k]);
                dst[240 + 4 * k + j] = df * (float)(((q * 3) >> 8) - 1);
            }
    }
}

/* NVFP4, 36 bytes: d[4] (UE4M3, one per 16 elements) | qs[32]; in sub-block s, element j < 8
 * is the low nibble of qs[8s + j], j >= 8 the high nibble of qs[8s + j - 8]. Values: twice the
 * E2M1 value (integers), the halved scale carrying the 1/2, as in the reference. */
static float g_ue4m3_half[256];

void bp_avx2_dq_nvfp4(const void *src, float *dst, int64_t nb) {
    const __m128i table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_NVFP4, dst += 64)
        for (int s = 0; s < 4; s++) {
            const __m128i q = _mm_loadl_epi64((const __m128i *)(b + 4 + 8 * s));
            const __m128i nib = _mm_unpacklo_epi64(_mm_and_si128(q, m4), _mm_and_si128(_mm_srli_epi16(q, 4), m4));
            const __m128i v = _mm_shuffle_epi8(table, nib);
            const __m256 d = _mm256_set1_ps(g_ue4m3_half[b[s]]);
            _mm256_storeu_ps(dst + 16 * s, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))));
            _mm256_storeu_ps(dst + 16 * s + 8,
                             _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))));
        }
}

/* 8 IQ1 grid weights (int8 -1/0/+1 in a u64 row) as dl * (w + delta). */
static ALWAYS_INLINE void put8_iq1(float *dst, uint64_t row, float dl, float delta) {
    const __m256 w = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128((long long)row)));
    _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_set1_ps(dl), _mm256_add_ps(w, _mm256_set1_ps(delta))));
}

/* IQ1_S, 50 bytes: f16 d; 32 low index bytes at 2; 8 u16 at 34 (per 32 weights: four 3-bit
 * high index parts, a 3-bit scale used as 2 s + 1, the delta's sign in bit 15). */
void bp_avx2_dq_iq1_s(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ1_S) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++) {
            const unsigned qh = bp_load_u16(b + 34 + 2 * ib);
            const float dl = d * (float)(2u * ((qh >> 12) & 7u) + 1u);
            const float delta = (qh & 0x8000u) ? -BP_IQ1S_DELTA : BP_IQ1S_DELTA;
            for (int l = 0; l < 4; l++, dst += 8)
                put8_iq1(dst, bp_iq1s_grid[b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8)], dl, delta);
        }
    }
}

/* IQ1_M, 56 bytes: 32 low index bytes; 16 qh bytes (a nibble per 8 weights: 3 high index bits,
 * the delta's sign); 4 u16 with sixteen 3-bit scales (one per 16 weights) and, in their top
 * nibbles, the f16 super-scale. */
void bp_avx2_dq_iq1_m(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_IQ1_M) {
        unsigned sc[4];
        for (int k = 0; k < 4; k++) sc[k] = bp_load_u16(b + 48 + 2 * k);
        const uint16_t dbits =
            (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0u) | ((sc[2] >> 4) & 0x0f00u) | (sc[3] & 0xf000u));
        const float d = _cvtsh_ss(dbits);
        for (int g = 0; g < 32; g++, dst += 8) {
            const int s = g / 2;
            const float dl = d * (float)(2u * ((sc[s / 4] >> (3 * (s % 4))) & 7u) + 1u);
            const unsigned nib = (b[32 + g / 2] >> (4 * (g % 2))) & 15u;
            const float delta = (nib & 8u) ? -BP_IQ1M_DELTA : BP_IQ1M_DELTA;
            put8_iq1(dst, bp_iq1s_grid[b[g] | ((nib & 7u) << 8)], dl, delta);
        }
    }
}

/* Q2_0, 18 bytes: f16 d | qs[16]; element j is bits 2 (j % 4) of qs[j / 4], 0..3 meaning -1..2.
 * A qs byte widened to a dword and OR-ed with itself shifted by 6, 12 and 18 holds its four
 * fields at the bottoms of its four bytes, in element order; (float)(q - 1) * d as the reference.
 * Through the reference's loop the first batch past the decode kernel ran at a third of it.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/dequant_lowbit.c. */
void bp_avx2_dq_q2_0(const void *src, float *dst, int64_t nb) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q2_0) {
        const __m256 d = _mm256_set1_ps(f16(b));
        for (int h = 0; h < 4; h++, dst += 16) {
            __m128i v = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)bp_load_u32(b + 2 + 4 * h)));
            v = _mm_or_si128(_mm_or_si128(v, _mm_slli_epi32(v, 6)), _mm_or_si128(_mm_slli_epi32(v, 12), _mm_slli_epi32(v, 18)));
            const __m128i q = _mm_sub_epi8(_mm_and_si128(v, _mm_set1_epi8(3)), _mm_set1_epi8(1));
            _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
            _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), d));
        }
    }
}

/* The lookup tables this file's kernels read, filled once (kernels.def BP_CPU_SETUP). */
void bp_avx2_dequant_lowbit_setup(void) {
    for (int v = 0; v < 256; v++) g_ue4m3_half[v] = bp_ue4m3_half((uint8_t)v);
}

#endif
