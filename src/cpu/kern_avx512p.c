/* AVX-512 VNNI decode on repacked weights for the 32-element kinds (kernels in
 * kern_packed.inc): vpdpbusd does a maddubs + madd in one instruction, without the 16-bit
 * intermediate. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#include "cpu/avx2_util.h"

static ALWAYS_INLINE __m256i dot_u2(__m256i a, __m256i xa, __m256i b, __m256i xb) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), a, xa), b, xb);
}

/* |a| (<= 127: no -128 in any table or activation) times b with a's sign, one instruction. */
static ALWAYS_INLINE __m256i dot_s1(__m256i a, __m256i b) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

/* Q5's fifth bit: the 32-bit mask loads straight into a mask register, one masked add. */
static ALWAYS_INLINE __m256i add_bit4(__m256i v, const uint8_t *qh) {
    __mmask32 k;
    memcpy(&k, qh, sizeof k);
    return _mm256_mask_add_epi8(v, k, v, _mm256_set1_epi8(0x10));
}

/* 4 inputs per pass as on AVX2: 8 (the 32 ymm registers hold them) ran Q8_0 at t = 8 at 0.45x
 * the speed of two passes of 4 once the rows no longer fit L2 (1000 x 4096, dev machine).
 * Unsigned operands up to 255 (vpdpbusd has no 16-bit intermediate sums). */
#define BP_P_MAX_NJ 4
#define BP_P_WIDE_U8 1
#define BP_P_INIT bp_cpu_avx512p_init
#define BP_P_ISA "avx512"
#include "cpu/kern_packed.inc"

#else
bool bp_cpu_avx512p_init(bp_cpu_ops *ops) {
    (void)ops;
    return false;
}
#endif
