/* Direct int8 panel decoders shared by the int8 GEMMs (avx512/gemm_int8.c: VNNI, avx2/gemm_int8.c:
 * maddubs): for kinds whose weights are small integers q times a scale per 32 columns (plus an
 * offset for some), a row's nblk blocks are written as int8 q with s[g] the scale of 32-column
 * group g and s[8 + g] its offset (w = s q + o; written by the offset kinds only). The pack then
 * only transposes. Include only from files built with AVX2 (inside their #if __AVX2__ block);
 * where the including file is built with AVX-512 BW/F the few steps that have a one-instruction
 * mask form use it (the same values either way: test_cpu_dequant checks both paths' decoders
 * weight by weight). Kinds whose stored form differs between the two GEMMs (Q4_0, Q5_0, Q2_0:
 * signed for VNNI, unsigned + offset for maddubs) keep their decoders in the GEMM's file. */
#ifndef BP_CPU_DQ8_DIRECT_H
#define BP_CPU_DQ8_DIRECT_H

#include "cpu/avx2/simd.h"
#include "kinds/iq_tables.h"

/* nblk blocks (<= KC columns) of one row -> q; s[g] the scale of 32-column group g, s[8 + g]
 * its offset (written by the offset kinds only). */
typedef void (*dq8_fn)(const uint8_t *b, int64_t nblk, int8_t *q, float *s);

/* 16 nibble bytes -> 32 bytes: the low nibbles (elements 0-15), then the high ones (16-31). */
static ALWAYS_INLINE __m256i nib32(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p), m = _mm_set1_epi8(15);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, m)), _mm_and_si128(_mm_srli_epi16(v, 4), m), 1);
}
static ALWAYS_INLINE void st32(int8_t *q, __m256i v) { _mm256_storeu_si256((__m256i *)(void *)q, v); }

/* 32 elements' fifth bits (bit j of the u32 at qh: element j) added as 16 to the nibbles v. */
static ALWAYS_INLINE __m256i add_bit5(__m256i v, const uint8_t *qh) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_mask_add_epi8(v, (__mmask32)bp_load_u32(qh), v, _mm256_set1_epi8(16));
#else
    return _mm256_or_si256(v, _mm256_and_si256(bits32(bp_load_u32(qh)), _mm256_set1_epi8(16)));
#endif
}

static inline void d8_q8_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q8_0, q += 32) {
        s[i] = f16(b);
        st32(q, _mm256_loadu_si256((const __m256i *)(const void *)(b + 2)));
    }
}
static inline void d8_q4_1(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q4_1, q += 32) {
        s[i] = f16(b);
        s[8 + i] = f16(b + 2);
        st32(q, nib32(b + 4));
    }
}
/* Q5_1: bit j of qh is element j's fifth bit. */
static inline void d8_q5_1(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q5_1, q += 32) {
        s[i] = f16(b);
        s[8 + i] = f16(b + 2);
        st32(q, add_bit5(nib32(b + 8), b + 4));
    }
}
static inline void d8_iq4_nl(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)bp_kvalues_iq4nl));
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_IQ4_NL, q += 32) {
        s[i] = f16(b);
        st32(q, _mm256_shuffle_epi8(tbl, nib32(b + 2)));
    }
}
/* IQ4_XS: per 32 weights IQ4_NL's 16 bytes and a 6-bit scale (bias 32), as the reference. */
static inline void d8_iq4_xs(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)bp_kvalues_iq4nl));
    const __m256i sh_lo = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), sh_hi = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_IQ4_XS, s += 8) {
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)bp_load_u32(b + 4)), sh_lo), _mm256_set1_epi32(15));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(bp_load_u16(b + 2)), sh_hi), _mm256_set1_epi32(3));
        const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        _mm256_storeu_ps(s, _mm256_mul_ps(_mm256_set1_ps(f16(b)), _mm256_cvtepi32_ps(ls)));
        for (int ib = 0; ib < 8; ib++, q += 32) st32(q, _mm256_shuffle_epi8(tbl, nib32(b + 8 + 16 * ib)));
    }
}
/* Q4_K / Q5_K: group 2p the low nibbles of qs[32 p ..], 2p + 1 the high ones (+ 16 where bit g
 * of qh[l] is set, Q5_K); s = d x sc, o = -(dmin x m), each rounded as the reference's, the 8
 * of each in one zmm. */
static ALWAYS_INLINE void d8_k45(const bool Q5, const uint8_t *b, int64_t n, int8_t *q, float *s) {
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int64_t i = 0; i < n; i++, b += Q5 ? BP_BLOCK_BYTES_Q5_K : BP_BLOCK_BYTES_Q4_K, s += 8) {
        const uint8_t *qs = b + (Q5 ? 48 : 16);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(b + 16));
        for (int p = 0; p < 4; p++, q += 64) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * p));
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (Q5) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
                lo = _mm256_mask_add_epi8(lo, _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(1 << (2 * p)))), lo, _mm256_set1_epi8(16));
                hi = _mm256_mask_add_epi8(hi, _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(2 << (2 * p)))), hi, _mm256_set1_epi8(16));
#else
                const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * p))), b1 = _mm256_set1_epi8((char)(2 << (2 * p)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), _mm256_set1_epi8(16)));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), _mm256_set1_epi8(16)));
#endif
            }
            st32(q, lo);
            st32(q + 32, hi);
        }
#if defined(__AVX512F__)
        const __m512 dd = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(f16(b)), _mm512_set1_ps(f16(b + 2)));
        const __m512 v = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(scale_min_k4v(b + 4))));
        _mm512_storeu_ps(s, _mm512_mask_sub_ps(v, 0xff00, _mm512_setzero_ps(), v));
#else
        const __m128i sm = scale_min_k4v(b + 4);
        _mm256_storeu_ps(s, _mm256_mul_ps(_mm256_set1_ps(f16(b)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm))));
        _mm256_storeu_ps(s + 8, _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(_mm256_set1_ps(f16(b + 2)),
                                                                                 _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))))));
#endif
    }
}
static inline void d8_q4_k(const uint8_t *b, int64_t n, int8_t *q, float *s) { d8_k45(false, b, n, q, s); }
static inline void d8_q5_k(const uint8_t *b, int64_t n, int8_t *q, float *s) { d8_k45(true, b, n, q, s); }

/* Grid kinds: per 32 weights 4 (IQ2_XXS: 8 bytes) or 8 (IQ3: 4 bytes) grid rows of unsigned
 * magnitudes, negated under a 32-bit sign mask (IQ2_XXS, IQ3_XXS: four 7-bit ksigns indices;
 * IQ3_S: explicit bits); the scale rounded as the reference's. */
static ALWAYS_INLINE void st_signed(int8_t *q, __m256i v, uint32_t sg) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    st32(q, _mm256_mask_sub_epi8(v, (__mmask32)sg, _mm256_setzero_si256(), v));
#else
    st32(q, _mm256_sign_epi8(v, _mm256_or_si256(bits32(sg), _mm256_set1_epi8(1))));
#endif
}
static ALWAYS_INLINE uint32_t ksigns4(uint32_t aux) {
    return (uint32_t)bp_ksigns_iq2xs[aux & 127u] | (uint32_t)bp_ksigns_iq2xs[(aux >> 7) & 127u] << 8 |
           (uint32_t)bp_ksigns_iq2xs[(aux >> 14) & 127u] << 16 | (uint32_t)bp_ksigns_iq2xs[(aux >> 21) & 127u] << 24;
}
static inline void d8_iq2_xxs(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_IQ2_XXS) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++, q += 32, s++) {
            const uint8_t *g = b + 2 + 8 * ib;
            const uint32_t aux = bp_load_u32(g + 4);
            *s = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            st_signed(q, _mm256_setr_epi64x((long long)bp_iq2xxs_grid[g[0]], (long long)bp_iq2xxs_grid[g[1]], (long long)bp_iq2xxs_grid[g[2]],
                                            (long long)bp_iq2xxs_grid[g[3]]),
                      ksigns4(aux));
        }
    }
}
static inline void d8_iq3_xxs(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_IQ3_XXS) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++, q += 32, s++) {
            const uint8_t *g = b + 2 + 8 * ib;
            const uint32_t aux = bp_load_u32(b + 66 + 4 * ib);
            *s = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            const __m256i ix = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)g));
            st_signed(q, _mm256_i32gather_epi32((const int *)(const void *)bp_iq3xxs_grid, ix, 4), ksigns4(aux));
        }
    }
}
static inline void d8_iq3_s(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_IQ3_S) {
        const float d = f16(b);
        for (int ib = 0; ib < 8; ib++, q += 32, s++) {
            const unsigned nib = (b[106 + ib / 2] >> (4 * (ib % 2))) & 15u;
            *s = d * (float)(1u + 2u * nib);
            /* index k: qs[8 ib + k] | bit k of qh[ib] << 8 */
            const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + 8 * ib)));
            const __m256i hb = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b[66 + ib]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                                _mm256_set1_epi32(1));
            const __m256i ix = _mm256_or_si256(lo, _mm256_slli_epi32(hb, 8));
            st_signed(q, _mm256_i32gather_epi32((const int *)(const void *)bp_iq3s_grid, ix, 4), bp_load_u32(b + 74 + 4 * ib));
        }
    }
}

/* The AVX2 GEMM panels' pack (avx2/gemm_int8.c, avx2/gemm_int8_scale16.c): 8 registers of 8 dwords (register
 * i = row i) -> register k = dword k of every row. */
static ALWAYS_INLINE void transpose8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
        r[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
    }
}

/* For test_cpu_dequant (bp_cpu_*_direct_dequant): kind k's decoder fn over nblocks blocks (at
 * most BP_CPU_KC columns) written out as floats s q (+ o where off). False where fn is NULL. */
static inline bool dq8_to_float(dq8_fn fn, bool off, bp_kind k, const void *blocks, int64_t nblocks, float *out) {
    const bp_kind_traits *kt = bp_kind_traits_of(k);
    if (!fn || !kt) return false;
    const int64_t n = nblocks * kt->info.block_elems;
    if (n > BP_CPU_KC || n % 32) return false;
    int8_t q[BP_CPU_KC];
    float rec[16] = {0};
    fn(blocks, nblocks, q, rec);
    for (int64_t j = 0; j < n; j++) out[j] = rec[j / 32] * (float)q[j] + (off ? rec[8 + j / 32] : 0.0f);
    return true;
}

#endif
