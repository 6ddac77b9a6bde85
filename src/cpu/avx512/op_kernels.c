/* The op kernels for AVX-512F (op_kern.inc with 16-float vectors). */
#include "cpu/op_kern.h"

#if defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define VF __m512
#define VL 16
#define VZERO() _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VLOADH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define VSTORE(p, v) _mm512_storeu_ps((p), (v))
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VMUL _mm512_mul_ps
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMAX _mm512_max_ps
#define VMIN _mm512_min_ps
#define VDIV _mm512_div_ps
#define VROUND(v) _mm512_roundscale_ps((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VPOW2I(v) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(v), _mm512_set1_epi32(127)), 23))
#define VKEEP_GE(r, x, c) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((x), (c), _CMP_GE_OQ), (r))
#define HSUM(v) _mm512_reduce_add_ps(v)
#define FN(name) name##_avx512
#define VEC512 1
#include "cpu/op_kern.inc"

bool bp_op_kern_avx512(bp_op_kern *k) {
    fill_avx512(k, "avx512");
    return true;
}
#else
bool bp_op_kern_avx512(bp_op_kern *k) {
    (void)k;
    return false;
}
#endif
