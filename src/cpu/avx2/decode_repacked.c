/* AVX2 decode on repacked weights for the 32-element kinds (kernels in avx2/decode_repacked.inc). */
#include <stdlib.h>

#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"

/* Two unsigned-by-signed byte products summed to int32 lanes. Operands stay below 31 (Q5), so
 * the two halves' pair sums (<= 2 * 31 * 127 * 2 = 15748) add in 16 bits before one madd. */
static ALWAYS_INLINE __m256i dot_u2(__m256i a, __m256i xa, __m256i b, __m256i xb) {
    __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(a, xa), _mm256_maddubs_epi16(b, xb));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Signed by signed, via the sign move of dot_ss. */
static ALWAYS_INLINE __m256i dot_s1(__m256i a, __m256i b) { return dot_ss(a, b); }

/* Q5's fifth bit: broadcast the 32-bit mask from memory (a load, no GPR->vector move), byte
 * i takes mask byte i / 8, then a per-byte bit test. */
static ALWAYS_INLINE __m256i add_bit4(__m256i v, const uint8_t *qh) {
    __m256i m = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)qh));
    m = _mm256_shuffle_epi8(m, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                                3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201ull);
    m = _mm256_cmpeq_epi8(_mm256_and_si256(m, bit), bit);
    return _mm256_or_si256(v, _mm256_and_si256(m, _mm256_set1_epi8(0x10)));
}

#include "cpu/avx2/decode_repacked.inc"

#endif
