/* Per-kind block arithmetic of the CUDA kernels, written once and compiled twice: by nvcc into
 * the kernels (the .cu files of src/cuda) and by the C compiler into tests/test_cuda_host_math.c, which
 * checks it against the CPU reference for every kind on a machine without a GPU. That second
 * compilation is the only way this math is tested where no device exists, so the kernels must
 * not carry a private copy of it.
 *
 * The unit of work is a CHUNK: 32 consecutive weights of one row (every quantized kind's block
 * is 1, 2, 4 or 8 chunks). Every quantized kind unpacks a chunk into one common form:
 *
 *     w[i] = d[i / 16] * q[i] + m[i / 16]     (q int8, packed 4 per int32, element i in byte i%4)
 *
 * with m == 0 for kinds without a min (BP_CU_HAS_MIN_<K> == 0). The form is chosen so that
 * (1) the float dequant d*q (+ m) performs the same IEEE operations, in the same order, as the
 * reference dequantizer, hence is bit-exact with it -- where the compiler does not contract
 * d*q + m into a fused multiply-add: the host build (test_cuda_host_math) and exact mode's
 * kernels (cuda_gemm_exact.cu, compiled with --fmad=false) do not; the tensor-core GEMM rounds
 * the result to f16 anyway and may contract; (2) the decode dot runs on dp4a:
 *     dot(chunk, x) = xd * (d0*S0 + d1*S1) + xd * (m0*X0 + m1*X1)
 * with x quantized to q8 per chunk (xd, xq), S_h = sum q*xq and X_h = sum xq over half h.
 * IQ1_S/IQ1_M fit it by scaling: dl*(g +- 1/8) == (dl/8)*(8g +- 1) exactly.
 *
 * Layout facts (byte offsets) are those ggml-common.h publishes; the code is our own.
 *
 * BP_HD: __device__ under nvcc. Not __host__ __device__: the IQ grid tables are __device__
 * arrays there, which host code may not read; the host build of this header is the C one.
 */
#ifndef BP_CUDA_KIND_MATH_H
#define BP_CUDA_KIND_MATH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define BP_HD static __device__ __forceinline__
#define BP_TABLE(type, name, count) static __device__ const type name[count]
#else
#include <math.h>
#include <string.h>
#define BP_HD static inline
#endif
#include "iq_tables.h"

/* ---- scalar helpers ----------------------------------------------------------------------- */

BP_HD float bp_cu_bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

BP_HD uint16_t bp_cu_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
/* Little-endian u32 at any byte address. On the device: the two aligned words around it and a
 * funnel shift (2 loads instead of 4 byte loads; blocks are only 1- or 2-byte aligned). That
 * reads up to 4 bytes past p + 4, so every buffer the kernels read this way carries >= 8 bytes
 * of slack at its end (weight uploads, the shared-memory stage). */
BP_HD uint32_t bp_cu_u32(const uint8_t *p) {
#if defined(__CUDA_ARCH__)
    const uintptr_t a = (uintptr_t)p;
    const uint32_t *w = (const uint32_t *)(a & ~(uintptr_t)3);
    return __funnelshift_r(w[0], w[1], (unsigned)(a & 3) * 8u);
#else
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
#endif
}

/* IEEE half -> float; exact (every half is a float), so any correct conversion is bit-exact. */
BP_HD float bp_cu_f16(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (e == 0x1f) return bp_cu_bits_f32(sign | 0x7f800000u | (man << 13));
    if (e == 0) {
        const float v = (float)man * 5.9604644775390625e-8f; /* man * 2^-24, exact */
        return sign ? -v : v;
    }
    return bp_cu_bits_f32(sign | ((e + 112u) << 23) | (man << 13));
}
BP_HD float bp_cu_f16p(const uint8_t *p) { return bp_cu_f16(bp_cu_u16(p)); }
BP_HD float bp_cu_bf16(uint16_t h) { return bp_cu_bits_f32((uint32_t)h << 16); }

/* E8M0 exponent byte -> 2^(e-127) / 2 (MXFP4 stores its E2M1 values doubled). */
BP_HD float bp_cu_e8m0_half(uint8_t e) {
    return bp_cu_bits_f32(e < 2 ? (0x00200000u << e) : ((uint32_t)(e - 1) << 23));
}

/* Unsigned E4M3 scale byte -> value / 2 (NVFP4, same doubled-value convention). Bit 7 is not
 * part of the format and ignored; 0 and 0x7f read as 0. Every result is exact. */
BP_HD float bp_cu_ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7f) return 0.0f;
    const int e = (x >> 3) & 0xf, man = x & 7;
    if (e == 0) return (float)man * (1.0f / 1024.0f);              /* man * 2^-9 / 2 */
    return bp_cu_bits_f32((uint32_t)(e - 7 - 1 + 127) << 23 | (uint32_t)man << 20);
}

/* E2M1 code -> doubled value (MXFP4, NVFP4). */
BP_HD int bp_cu_fp4(int code) {
    const int mag = code & 7;
    const int v = mag < 4 ? mag : (mag == 4 ? 4 : mag == 5 ? 6 : mag == 6 ? 8 : 12);
    return (code & 8) ? -v : v;
}

/* ---- the chunk form ------------------------------------------------------------------------ */

typedef struct bp_cu_chunk {
    uint32_t q[8]; /* 32 int8 values, element i in byte i%4 of q[i/4] */
    float d[2];    /* scale of elements 0..15 and 16..31 */
    float m[2];    /* offset of each half (0 unless the kind has a min) */
} bp_cu_chunk;

BP_HD void bp_cu_chunk_clear(bp_cu_chunk *o) {
    for (int i = 0; i < 8; i++) o->q[i] = 0;
    o->m[0] = o->m[1] = 0.0f;
}
BP_HD void bp_cu_put(bp_cu_chunk *o, int i, int v) {
    o->q[i >> 2] |= (uint32_t)(uint8_t)(int8_t)v << (8 * (i & 3));
}
BP_HD int bp_cu_get(const bp_cu_chunk *o, int i) { return (int8_t)(uint8_t)(o->q[i >> 2] >> (8 * (i & 3))); }
BP_HD void bp_cu_same_d(bp_cu_chunk *o, float d) { o->d[0] = o->d[1] = d; }

/* ---- word (4 x int8) helpers: 4 weights per 32-bit operation in the hot unpacks ---------- */

/* Per-byte a - b with wrap-around, no borrow between bytes (SWAR: the same code on host and
 * device, so the host test covers it). */
BP_HD uint32_t bp_cu_sub4(uint32_t a, uint32_t b) {
    return ((a | 0x80808080u) - (b & 0x7f7f7f7fu)) ^ ((a ^ ~b) & 0x80808080u);
}
/* Bits 0..3 of t moved to bit 0 of bytes 0..3 (t * 0x00204081 places the four copies 7 bits
 * apart, so no carries). */
BP_HD uint32_t bp_cu_spread4(uint32_t t) { return ((t & 15u) * 0x00204081u) & 0x01010101u; }

/* ---- per-kind unpack: block bytes b, chunk c of the block -> o --------------------------- */

BP_HD void bp_cu_unpack_Q4_0(const uint8_t *b, int c, bp_cu_chunk *o) {
    (void)c;
    o->m[0] = o->m[1] = 0.0f;
    bp_cu_same_d(o, bp_cu_f16p(b));
    for (int k = 0; k < 4; k++) { /* byte j: element j low nibble, element j + 16 high */
        const uint32_t w = bp_cu_u32(b + 2 + 4 * k);
        o->q[k] = bp_cu_sub4(w & 0x0f0f0f0fu, 0x08080808u);
        o->q[k + 4] = bp_cu_sub4((w >> 4) & 0x0f0f0f0fu, 0x08080808u);
    }
}

BP_HD void bp_cu_unpack_Q4_1(const uint8_t *b, int c, bp_cu_chunk *o) {
    (void)c;
    bp_cu_same_d(o, bp_cu_f16p(b));
    o->m[0] = o->m[1] = bp_cu_f16p(b + 2);
    for (int k = 0; k < 4; k++) {
        const uint32_t w = bp_cu_u32(b + 4 + 4 * k);
        o->q[k] = w & 0x0f0f0f0fu;
        o->q[k + 4] = (w >> 4) & 0x0f0f0f0fu;
    }
}

BP_HD void bp_cu_unpack_Q5_0(const uint8_t *b, int c, bp_cu_chunk *o) {
    (void)c;
    o->m[0] = o->m[1] = 0.0f;
    bp_cu_same_d(o, bp_cu_f16p(b));
    const uint32_t qh = bp_cu_u32(b + 2); /* bit j: 5th bit of element j */
    for (int k = 0; k < 4; k++) {
        const uint32_t w = bp_cu_u32(b + 6 + 4 * k);
        o->q[k] = bp_cu_sub4((w & 0x0f0f0f0fu) | (bp_cu_spread4(qh >> (4 * k)) << 4), 0x10101010u);
        o->q[k + 4] = bp_cu_sub4(((w >> 4) & 0x0f0f0f0fu) | (bp_cu_spread4(qh >> (16 + 4 * k)) << 4), 0x10101010u);
    }
}

BP_HD void bp_cu_unpack_Q5_1(const uint8_t *b, int c, bp_cu_chunk *o) {
    (void)c;
    bp_cu_same_d(o, bp_cu_f16p(b));
    o->m[0] = o->m[1] = bp_cu_f16p(b + 2);
    const uint32_t qh = bp_cu_u32(b + 4);
    for (int k = 0; k < 4; k++) {
        const uint32_t w = bp_cu_u32(b + 8 + 4 * k);
        o->q[k] = (w & 0x0f0f0f0fu) | (bp_cu_spread4(qh >> (4 * k)) << 4);
        o->q[k + 4] = ((w >> 4) & 0x0f0f0f0fu) | (bp_cu_spread4(qh >> (16 + 4 * k)) << 4);
    }
}

BP_HD void bp_cu_unpack_Q8_0(const uint8_t *b, int c, bp_cu_chunk *o) {
    (void)c;
    o->m[0] = o->m[1] = 0.0f;
    bp_cu_same_d(o, bp_cu_f16p(b));
    for (int k = 0; k < 8; k++) o->q[k] = bp_cu_u32(b + 2 + 4 * k);
}

/* Q2_K: scales[16] @0, qs[64] @16, d @80, dmin @82. Chunk c: 128-element half c/4, 2-bit
 * plane c%4; its two 16-element groups use scales[2c], scales[2c+1]. */
BP_HD void bp_cu_unpack_Q2_K(const uint8_t *b, int c, bp_cu_chunk *o) {
    const float d = bp_cu_f16p(b + 80), dmin = bp_cu_f16p(b + 82);
    const uint8_t *q = b + 16 + 32 * (c >> 2);
    const int shift = 2 * (c & 3);
    for (int h = 0; h < 2; h++) {
        const uint8_t sc = b[2 * c + h];
        o->d[h] = d * (float)(sc & 15);
        o->m[h] = -(dmin * (float)(sc >> 4));
    }
    for (int k = 0; k < 8; k++) o->q[k] = (bp_cu_u32(q + 4 * k) >> shift) & 0x03030303u;
}

/* Q3_K 6-bit signed scale j of 16 (12 packed bytes at s). */
BP_HD int bp_cu_q3k_scale(const uint8_t *s, int j) {
    const int lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
    const int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* Q3_K: hmask[32] @0, qs[64] @32, scales[12] @96, d @108. Chunk c uses hmask bit c. */
BP_HD void bp_cu_unpack_Q3_K(const uint8_t *b, int c, bp_cu_chunk *o) {
    o->m[0] = o->m[1] = 0.0f;
    const float d = bp_cu_f16p(b + 108);
    const uint8_t *q = b + 32 + 32 * (c >> 2);
    const int shift = 2 * (c & 3);
    for (int h = 0; h < 2; h++) o->d[h] = d * (float)bp_cu_q3k_scale(b + 96, 2 * c + h);
    for (int k = 0; k < 8; k++) { /* minus 4 where the hmask bit c is clear */
        const uint32_t lo = (bp_cu_u32(q + 4 * k) >> shift) & 0x03030303u;
        const uint32_t hi = (bp_cu_u32(b + 4 * k) >> c) & 0x01010101u;
        o->q[k] = bp_cu_sub4(lo, (hi ^ 0x01010101u) << 2);
    }
}

/* Q4_K / Q5_K 6-bit scale and min j of 8 (12 packed bytes at s). */
BP_HD void bp_cu_k4_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K: d @0, dmin @2, scales[12] @4, qs[128] @16. Chunk c: nibble plane c%2 of qs[32*(c/2)..]. */
BP_HD void bp_cu_unpack_Q4_K(const uint8_t *b, int c, bp_cu_chunk *o) {
    int sc, mn;
    bp_cu_k4_scale_min(b + 4, c, &sc, &mn);
    bp_cu_same_d(o, bp_cu_f16p(b) * (float)sc);
    o->m[0] = o->m[1] = -(bp_cu_f16p(b + 2) * (float)mn);
    const uint8_t *q = b + 16 + 32 * (c >> 1);
    const int shift = 4 * (c & 1);
    for (int k = 0; k < 8; k++) o->q[k] = (bp_cu_u32(q + 4 * k) >> shift) & 0x0f0f0f0fu;
}

/* Q5_K: d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48. High bit of chunk c: qh bit c. */
BP_HD void bp_cu_unpack_Q5_K(const uint8_t *b, int c, bp_cu_chunk *o) {
    int sc, mn;
    bp_cu_k4_scale_min(b + 4, c, &sc, &mn);
    bp_cu_same_d(o, bp_cu_f16p(b) * (float)sc);
    o->m[0] = o->m[1] = -(bp_cu_f16p(b + 2) * (float)mn);
    const uint8_t *q = b + 48 + 32 * (c >> 1);
    const int shift = 4 * (c & 1);
    for (int k = 0; k < 8; k++)
        o->q[k] = ((bp_cu_u32(q + 4 * k) >> shift) & 0x0f0f0f0fu) | (((bp_cu_u32(b + 16 + 4 * k) >> c) & 0x01010101u) << 4);
}

/* Q6_K: ql[128] @0, qh[64] @128, scales int8[16] @192, d @208. Chunk c: 128-half n = c/4,
 * k = c%4 selects the ql half (k&1) and nibble (k>=2) and the qh 2-bit plane k. */
BP_HD void bp_cu_unpack_Q6_K(const uint8_t *b, int c, bp_cu_chunk *o) {
    o->m[0] = o->m[1] = 0.0f;
    const int n = c >> 2, k2 = c & 3;
    const float d = bp_cu_f16p(b + 208);
    const uint8_t *ql = b + 64 * n + 32 * (k2 & 1), *qh = b + 128 + 32 * n;
    const int lshift = k2 >= 2 ? 4 : 0;
    for (int h = 0; h < 2; h++) o->d[h] = d * (float)(int8_t)b[192 + 8 * n + 2 * k2 + h];
    for (int k = 0; k < 8; k++) {
        const uint32_t lo = (bp_cu_u32(ql + 4 * k) >> lshift) & 0x0f0f0f0fu;
        const uint32_t hi = (bp_cu_u32(qh + 4 * k) >> (2 * k2)) & 0x03030303u;
        o->q[k] = bp_cu_sub4(lo | (hi << 4), 0x20202020u);
    }
}

/* Signed grid bytes: 8 unsigned grid values of g (element j in byte j) times the sign bits. */
BP_HD void bp_cu_put_signed8(bp_cu_chunk *o, int at, uint64_t g, int signs) {
    for (int j = 0; j < 8; j++) {
        const int v = (int)((g >> (8 * j)) & 0xff);
        bp_cu_put(o, at + j, (signs & bp_kmask_iq2xs[j]) ? -v : v);
    }
}

/* IQ2_XXS: d @0, qs @2 (8 bytes per chunk: 4 grid indexes, then 4 sign/scale bytes). */
BP_HD void bp_cu_unpack_IQ2_XXS(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    const uint8_t *p = b + 2 + 8 * c;
    const uint32_t aux = bp_cu_u32(p + 4);
    bp_cu_same_d(o, bp_cu_f16p(b) * (0.5f + (float)(aux >> 28)) * 0.25f);
    for (int l = 0; l < 4; l++)
        bp_cu_put_signed8(o, 8 * l, bp_iq2xxs_grid[p[l]], bp_ksigns_iq2xs[(aux >> (7 * l)) & 127]);
}

/* IQ2_XS: d @0, qs u16[32] @2 (9-bit grid index, 7-bit sign index), scales[8] @66. */
BP_HD void bp_cu_unpack_IQ2_XS(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    const float d = bp_cu_f16p(b);
    const uint8_t s = b[66 + c];
    o->d[0] = d * (0.5f + (float)(s & 15)) * 0.25f;
    o->d[1] = d * (0.5f + (float)(s >> 4)) * 0.25f;
    for (int l = 0; l < 4; l++) {
        const uint16_t v = bp_cu_u16(b + 2 + 2 * (4 * c + l));
        bp_cu_put_signed8(o, 8 * l, bp_iq2xs_grid[v & 511], bp_ksigns_iq2xs[v >> 9]);
    }
}

/* IQ2_S: d @0, qs[32] @2, signs[32] @34, qh[8] @66, scales[8] @74. */
BP_HD void bp_cu_unpack_IQ2_S(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    const float d = bp_cu_f16p(b);
    const uint8_t s = b[74 + c], qh = b[66 + c];
    o->d[0] = d * (0.5f + (float)(s & 15)) * 0.25f;
    o->d[1] = d * (0.5f + (float)(s >> 4)) * 0.25f;
    for (int l = 0; l < 4; l++) {
        const int idx = b[2 + 4 * c + l] | ((qh << (8 - 2 * l)) & 0x300);
        bp_cu_put_signed8(o, 8 * l, bp_iq2s_grid[idx], b[34 + 4 * c + l]);
    }
}

/* Two 4-value grid entries (uint32) into elements at..at+7 with sign bits of `signs`. */
BP_HD void bp_cu_put_grid4x2(bp_cu_chunk *o, int at, uint32_t g1, uint32_t g2, int signs) {
    const uint64_t g = (uint64_t)g1 | ((uint64_t)g2 << 32);
    bp_cu_put_signed8(o, at, g, signs);
}

/* IQ3_XXS: d @0, qs[64] @2 (8 grid indexes per chunk), scales_and_signs u32[8] @66. */
BP_HD void bp_cu_unpack_IQ3_XXS(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    const uint8_t *qs = b + 2 + 8 * c;
    const uint32_t aux = bp_cu_u32(b + 66 + 4 * c);
    bp_cu_same_d(o, bp_cu_f16p(b) * (0.5f + (float)(aux >> 28)) * 0.5f);
    for (int l = 0; l < 4; l++)
        bp_cu_put_grid4x2(o, 8 * l, bp_iq3xxs_grid[qs[2 * l]], bp_iq3xxs_grid[qs[2 * l + 1]],
                          bp_ksigns_iq2xs[(aux >> (7 * l)) & 127]);
}

/* IQ3_S: d @0, qs[64] @2, qh[8] @66, signs[32] @74, scales[4] @106. */
BP_HD void bp_cu_unpack_IQ3_S(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    const int s = (b[106 + c / 2] >> (4 * (c & 1))) & 15;
    bp_cu_same_d(o, bp_cu_f16p(b) * (float)(1 + 2 * s));
    const uint8_t *qs = b + 2 + 8 * c;
    const int qh = b[66 + c];
    for (int l = 0; l < 4; l++) {
        const int i1 = qs[2 * l] | ((qh << (8 - 2 * l)) & 256);
        const int i2 = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
        bp_cu_put_grid4x2(o, 8 * l, bp_iq3s_grid[i1], bp_iq3s_grid[i2], b[74 + 4 * c + l]);
    }
}

/* IQ1 grids hold -1/0/+1 bytes; with the +-1/8 shift the chunk stores 8g +- 1 and d/8. */
BP_HD void bp_cu_put_iq1(bp_cu_chunk *o, int at, uint64_t g, int neg) {
    for (int j = 0; j < 8; j++) bp_cu_put(o, at + j, 8 * (int)(int8_t)(uint8_t)(g >> (8 * j)) + (neg ? -1 : 1));
}

/* IQ1_S: d @0, qs[32] @2, qh u16[8] @34 (3 high index bits per group, scale, delta sign). */
BP_HD void bp_cu_unpack_IQ1_S(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    const int qh = bp_cu_u16(b + 34 + 2 * c);
    const float dl = bp_cu_f16p(b) * (float)(2 * ((qh >> 12) & 7) + 1);
    bp_cu_same_d(o, dl * BP_IQ1S_DELTA);
    for (int l = 0; l < 4; l++)
        bp_cu_put_iq1(o, 8 * l, bp_iq1s_grid[b[2 + 4 * c + l] | (((qh >> (3 * l)) & 7) << 8)], qh & 0x8000);
}

/* IQ1_M: qs[32] @0, qh[16] @32, scales u16[4] @48 (3-bit group scales; the f16 super-scale is
 * the top nibbles of the four u16). */
BP_HD void bp_cu_unpack_IQ1_M(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    const uint8_t *sp = b + 48;
    const uint16_t s0 = bp_cu_u16(sp), s1 = bp_cu_u16(sp + 2), s2 = bp_cu_u16(sp + 4), s3 = bp_cu_u16(sp + 6);
    const float d = bp_cu_f16((uint16_t)((s0 >> 12) | ((s1 >> 8) & 0x00f0) | ((s2 >> 4) & 0x0f00) | (s3 & 0xf000)));
    const int sc = bp_cu_u16(sp + 2 * (c / 2));
    o->d[0] = d * (float)(2 * ((sc >> (6 * (c % 2))) & 7) + 1) * BP_IQ1M_DELTA;
    o->d[1] = d * (float)(2 * ((sc >> (6 * (c % 2) + 3)) & 7) + 1) * BP_IQ1M_DELTA;
    const uint8_t *qs = b + 4 * c, *qh = b + 32 + 2 * c;
    for (int l = 0; l < 4; l++) {
        const int h = qh[l >> 1];
        const int idx = qs[l] | ((l & 1 ? (h << 4) : (h << 8)) & 0x700);
        bp_cu_put_iq1(o, 8 * l, bp_iq1s_grid[idx], h & (l & 1 ? 0x80 : 0x08));
    }
}

/* IQ4_NL: d @0, qs[16] @2, non-uniform 4-bit values. */
BP_HD void bp_cu_unpack_IQ4_NL(const uint8_t *b, int c, bp_cu_chunk *o) {
    (void)c;
    bp_cu_chunk_clear(o);
    bp_cu_same_d(o, bp_cu_f16p(b));
    for (int j = 0; j < 16; j++) {
        bp_cu_put(o, j, bp_kvalues_iq4nl[b[2 + j] & 15]);
        bp_cu_put(o, j + 16, bp_kvalues_iq4nl[b[2 + j] >> 4]);
    }
}

/* IQ4_XS: d @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8. */
BP_HD void bp_cu_unpack_IQ4_XS(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    const int ls = ((b[4 + c / 2] >> (4 * (c % 2))) & 15) | (((bp_cu_u16(b + 2) >> (2 * c)) & 3) << 4);
    bp_cu_same_d(o, bp_cu_f16p(b) * (float)(ls - 32));
    const uint8_t *q = b + 8 + 16 * c;
    for (int j = 0; j < 16; j++) {
        bp_cu_put(o, j, bp_kvalues_iq4nl[q[j] & 15]);
        bp_cu_put(o, j + 16, bp_kvalues_iq4nl[q[j] >> 4]);
    }
}

/* TQ1_0: qs[48] @0 (base-3, 5 trits a byte), qh[4] @48 (4 trits a byte), d @52. Element e:
 * e < 160: byte qs[e%32], trit e/32; e < 240: qs[32 + (e-160)%16], trit (e-160)/16;
 * else qh[(e-240)%4], trit (e-240)/4. A trit is the top digit of byte*3^n times 3. */
BP_HD void bp_cu_unpack_TQ1_0(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    bp_cu_same_d(o, bp_cu_f16p(b + 52));
    for (int i = 0; i < 32; i++) {
        const int e = 32 * c + i;
        int byte, n;
        if (e < 160) { byte = b[e % 32]; n = e / 32; }
        else if (e < 240) { byte = b[32 + (e - 160) % 16]; n = (e - 160) / 16; }
        else { byte = b[48 + (e - 240) % 4]; n = (e - 240) / 4; }
        const int pow3 = n == 0 ? 1 : n == 1 ? 3 : n == 2 ? 9 : n == 3 ? 27 : 81;
        const uint8_t q = (uint8_t)(byte * pow3);
        bp_cu_put(o, i, ((q * 3) >> 8) - 1);
    }
}

/* TQ2_0: qs[64] @0 (2-bit, 4 planes over each 32 bytes), d @64. */
BP_HD void bp_cu_unpack_TQ2_0(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    bp_cu_same_d(o, bp_cu_f16p(b + 64));
    const uint8_t *q = b + 32 * (c >> 2);
    const int shift = 2 * (c & 3);
    for (int m = 0; m < 32; m++) bp_cu_put(o, m, ((q[m] >> shift) & 3) - 1);
}

/* MXFP4: e (E8M0) @0, qs[16] @1. */
BP_HD void bp_cu_unpack_MXFP4(const uint8_t *b, int c, bp_cu_chunk *o) {
    (void)c;
    bp_cu_chunk_clear(o);
    bp_cu_same_d(o, bp_cu_e8m0_half(b[0]));
    for (int j = 0; j < 16; j++) {
        bp_cu_put(o, j, bp_cu_fp4(b[1 + j] & 15));
        bp_cu_put(o, j + 16, bp_cu_fp4(b[1 + j] >> 4));
    }
}

/* NVFP4: d[4] (UE4M3, one per 16 elements) @0, qs[32] @4. Chunk c = sub-blocks 2c, 2c+1. */
BP_HD void bp_cu_unpack_NVFP4(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    for (int h = 0; h < 2; h++) {
        const int s = 2 * c + h;
        o->d[h] = bp_cu_ue4m3_half(b[s]);
        for (int j = 0; j < 8; j++) {
            bp_cu_put(o, 16 * h + j, bp_cu_fp4(b[4 + 8 * s + j] & 15));
            bp_cu_put(o, 16 * h + 8 + j, bp_cu_fp4(b[4 + 8 * s + j] >> 4));
        }
    }
}

/* Q1_0: d @0, qs[16] @2, one bit per element (1: +d, 0: -d). */
BP_HD void bp_cu_unpack_Q1_0(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    bp_cu_same_d(o, bp_cu_f16p(b));
    for (int i = 0; i < 32; i++) {
        const int j = 32 * c + i;
        bp_cu_put(o, i, (b[2 + j / 8] >> (j % 8)) & 1 ? 1 : -1);
    }
}

/* Q2_0: d @0, qs[16] @2, 2 bits per element, value q - 1. */
BP_HD void bp_cu_unpack_Q2_0(const uint8_t *b, int c, bp_cu_chunk *o) {
    bp_cu_chunk_clear(o);
    bp_cu_same_d(o, bp_cu_f16p(b));
    for (int i = 0; i < 32; i++) {
        const int j = 32 * c + i;
        bp_cu_put(o, i, ((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1);
    }
}

/* ---- the quantized kinds, as one X-macro: (NAME, chunks per block, has min) ------------- */
#define BP_CU_QUANT_KINDS(X)                                                                      \
    X(Q4_0, 1, 0) X(Q4_1, 1, 1) X(Q5_0, 1, 0) X(Q5_1, 1, 1) X(Q8_0, 1, 0) X(Q2_K, 8, 1)         \
    X(Q3_K, 8, 0) X(Q4_K, 8, 1) X(Q5_K, 8, 1) X(Q6_K, 8, 0) X(IQ2_XXS, 8, 0) X(IQ2_XS, 8, 0)    \
    X(IQ2_S, 8, 0) X(IQ3_XXS, 8, 0) X(IQ3_S, 8, 0) X(IQ1_S, 8, 0) X(IQ1_M, 8, 0)                \
    X(IQ4_NL, 1, 0) X(IQ4_XS, 8, 0) X(TQ1_0, 8, 0) X(TQ2_0, 8, 0) X(MXFP4, 1, 0)               \
    X(NVFP4, 2, 0) X(Q1_0, 4, 0) X(Q2_0, 2, 0)
/* The float kinds: (NAME, bytes per element). A "block" of these is one chunk of 32. */
#define BP_CU_FLOAT_KINDS(X) X(F32, 4) X(F16, 2) X(BF16, 2)

/* Float dequant of a chunk: the same IEEE operations as the reference (see the top). */
BP_HD void bp_cu_chunk_dequant(const bp_cu_chunk *o, int has_min, float out[32]) {
    for (int i = 0; i < 32; i++) {
        const float w = o->d[i >> 4] * (float)bp_cu_get(o, i);
        out[i] = has_min ? w + o->m[i >> 4] : w;
    }
}

/* 32 weights of a float kind starting at p. */
BP_HD float bp_cu_float_elem(int esize, int is_bf16, const uint8_t *p, int i) {
    if (esize == 4) return bp_cu_bits_f32(bp_cu_u32(p + 4 * i));
    return is_bf16 ? bp_cu_bf16(bp_cu_u16(p + 2 * i)) : bp_cu_f16(bp_cu_u16(p + 2 * i));
}

/* ---- activations: x quantized to q8 per chunk for the dp4a dot --------------------------- */

typedef struct bp_cu_xq {
    uint32_t q[8]; /* 32 int8, packed as bp_cu_chunk.q */
    float d;       /* x[i] ~= d * q[i] */
    int s[2];      /* sum of q over each half, for the kinds with a min */
    int pad_;      /* 48 bytes, so an array of them keeps q 16-byte aligned (BP_CU_XQ_BYTES) */
} bp_cu_xq;

BP_HD int bp_cu_round(float v) {
#if defined(__CUDA_ARCH__)
    return __float2int_rn(v);
#else
    return (int)nearbyintf(v);
#endif
}

/* amax / 127 scale, round to nearest. Used by the device quantize kernel's per-lane code. */
BP_HD void bp_cu_quantize_x32(const float *x, bp_cu_xq *o) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    o->d = d;
    o->s[0] = o->s[1] = o->pad_ = 0;
    for (int i = 0; i < 8; i++) o->q[i] = 0;
    for (int i = 0; i < 32; i++) {
        int v = bp_cu_round(x[i] * id);
        v = v > 127 ? 127 : v < -127 ? -127 : v;
        o->q[i >> 2] |= (uint32_t)(uint8_t)(int8_t)v << (8 * (i & 3));
        o->s[i >> 4] += v;
    }
}

/* Four int8 products summed into acc: the dp4a instruction on sm_61+, its definition here. */
BP_HD int bp_cu_dp4a(uint32_t a, uint32_t b, int acc) {
#if defined(__CUDA_ARCH__)
    return __dp4a((int)a, (int)b, acc);
#else
    for (int k = 0; k < 4; k++) acc += (int8_t)(uint8_t)(a >> (8 * k)) * (int8_t)(uint8_t)(b >> (8 * k));
    return acc;
#endif
}

/* dot(weights of chunk w, x of chunk xq) in float; exact integer sums, two scalings. */
BP_HD float bp_cu_chunk_dot_q8(const bp_cu_chunk *w, int has_min, const bp_cu_xq *x) {
    int s0 = 0, s1 = 0;
    for (int k = 0; k < 4; k++) s0 = bp_cu_dp4a(w->q[k], x->q[k], s0);
    for (int k = 4; k < 8; k++) s1 = bp_cu_dp4a(w->q[k], x->q[k], s1);
    float r = w->d[0] * (float)s0 + w->d[1] * (float)s1;
    if (has_min) r += w->m[0] * (float)x->s[0] + w->m[1] * (float)x->s[1];
    return x->d * r;
}

#endif /* BP_CUDA_KIND_MATH_H */
