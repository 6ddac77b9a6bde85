/* The op kernels for AVX2 + FMA + F16C (op_kern.inc with 8-float vectors). */
#include "cpu/op_kern.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define VF __m256
#define VL 8
#define VZERO() _mm256_setzero_ps()
#define VLOAD(p) _mm256_loadu_ps(p)
#define VLOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define VSTORE(p, v) _mm256_storeu_ps((p), (v))
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VMUL _mm256_mul_ps
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMAX _mm256_max_ps
#define VMIN _mm256_min_ps
#define VDIV _mm256_div_ps
#define VROUND(v) _mm256_round_ps((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2I(v) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(127)), 23))
#define VKEEP_GE(r, x, c) _mm256_and_ps((r), _mm256_cmp_ps((x), (c), _CMP_GE_OQ))
#define FN(name) name##_avx2
#include <immintrin.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define HSUM(v) hsum8(v)
#include "cpu/op_kern.inc"

bool bp_op_kern_avx2(bp_op_kern *k) {
    fill_avx2(k, "avx2");
    return true;
}
#else
bool bp_op_kern_avx2(bp_op_kern *k) {
    (void)k;
    return false;
}
#endif
