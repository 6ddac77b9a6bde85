/* Helpers shared by the AVX-512 kernel files (include only from files built with the AVX-512
 * flags, inside their #if __AVX512F__ ... block): static inline, so nothing here is emitted into
 * a file a machine without AVX-512 could reach. */
#ifndef BP_CPU_AVX512_UTIL_H
#define BP_CPU_AVX512_UTIL_H

#include <immintrin.h>

#ifndef ALWAYS_INLINE
#define ALWAYS_INLINE inline __attribute__((always_inline))
#endif

/* 16 x 16 dwords: r[i] holds row i's dwords 0..15; afterwards r[j] holds dword j of rows 0..15. */
static ALWAYS_INLINE void bp_transpose16_epi32(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* u[4 i + j], 128-bit lane L: dword 4 L + j of rows 4 i .. 4 i + 3. */
    for (int j = 0; j < 4; j++) {
        __m512i slo = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i shi = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
        __m512i wlo = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i whi = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
        r[j] = _mm512_shuffle_i32x4(slo, wlo, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + j] = _mm512_shuffle_i32x4(slo, wlo, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + j] = _mm512_shuffle_i32x4(shi, whi, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + j] = _mm512_shuffle_i32x4(shi, whi, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

#endif
