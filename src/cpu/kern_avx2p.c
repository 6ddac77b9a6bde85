/* AVX2 decode on repacked weights for the 32-element kinds (kernels in kern_packed.inc). */
#include <stdlib.h>

#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2_util.h"

/* Two unsigned-by-signed byte products summed to int32 lanes. Operands stay below 31 (Q5), so
 * the two halves' pair sums (<= 2 * 31 * 127 * 2 = 15748) add in 16 bits before one madd. */
static ALWAYS_INLINE __m256i dot_u2(__m256i a, __m256i xa, __m256i b, __m256i xb) {
    __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(a, xa), _mm256_maddubs_epi16(b, xb));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Signed by signed, via the sign move of dot_ss. */
static ALWAYS_INLINE __m256i dot_s1(__m256i a, __m256i b) { return dot_ss(a, b); }

#define BP_P_INIT bp_cpu_avx2p_init
#define BP_P_ISA "avx2"
#include "cpu/kern_packed.inc"

#else
bool bp_cpu_avx2p_init(bp_cpu_ops *ops) {
    (void)ops;
    return false;
}
#endif
