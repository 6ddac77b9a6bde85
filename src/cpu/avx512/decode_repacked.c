/* AVX-512 repacked kernels four blocks at a time for the 32-element kinds (Q4_0 Q4_1 Q8_0
 * IQ4_NL MXFP4) and Q1_0, and eight at a time in 16-element groups (I16_ROWS, below) for Q5_0,
 * Q5_1, IQ4_XS and NVFP4 (as pairs of 32-element blocks with a scale per 16). One zmm holds the
 * low nibbles of four blocks (elements 0..15 of each) and another the high nibbles (16..31),
 * against activations laid out to match (BP_ACT_Q8X32Q: per 4 blocks [b0 0..15, b1 0..15,
 * b2 0..15, b3 0..15, b0 16..31, ...]); per 128 weights and input: two vpdpbusd, one conversion,
 * one permute, one FMA, half the float work of avx2/decode_repacked.inc's pair loop.
 *
 * Every line of a row is requested BP_ROW_PF ahead (avx2/simd.h, pf_group): a row read as two
 * streams (scales, quants) defeats the hardware prefetcher (measurements: docs/cpu-kernels.md).
 *
 * Weight layout per row (made once per weight at first use, like avx2/decode_repacked.inc's): [nbp scale
 * fields][nbp second fields (Q4_1's min)][quads of blocks, padded to 4 blocks]. A quad is the
 * four blocks' 16 nibble bytes back to back (64 bytes);
 * Q1_0 quads are those two masks alone; Q8_0 quads are the four blocks' first 16 quants, then
 * their last 16 (signed: |q| multiplies, the sign moves onto the activations). */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#include "cpu/avx2/simd.h"

/* The prefetch distance. A row is [scales][second fields][quads]: one line per quad 2 KB ahead
 * would cover only the first 2 KB of the next row and never its last (row bytes - 2048), so the
 * scales and second fields (Q4_1's mins) would come from the hardware prefetcher or not at all.
 * Each step of 8 blocks prefetches its own share of the row instead, that far on (pf_group),
 * BP_ROW_PF (4 KB) into L2 (prefetcht1), which beat 2 KB into L1.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_repacked.c. */
enum { MAX_NJ = 4 };

static int64_t padded_blocks(int64_t cols) { return (cols / 32 + 7) / 8 * 8; }
static int64_t quad_blocks(int64_t cols) { return (cols / 32 + 3) / 4 * 4; }

/* ---- packing ------------------------------------------------------------------------------ */

typedef enum quad_kind { QUAD_NIB, QUAD_Q1, QUAD_Q8 } quad_kind;

/* bb: block bytes (Q1_0: its 128-element block, 4 of ours); sb/so, mb/mo: scale and second field
 * (bytes, offset in the block); qo: quants (nibbles or bits). */
static bool pack4(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, quad_kind qk, int bb, int sb, int so,
                  int mb, int mo, int qo, bp_cpu_packed *out) {
    const int64_t nb = cols / 32, nbp = padded_blocks(cols), nb4 = quad_blocks(cols);
    const size_t quad = qk == QUAD_NIB ? 64 : qk == QUAD_Q8 ? 128 : 16;
    out->row_stride = (size_t)nbp * (size_t)(sb + mb) + (size_t)(nb4 / 4) * quad;
    out->data = bp_cpu_packed_alloc(rows, out->row_stride);
    if (!out->data) return false;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = w + (size_t)r * row_bytes;
        uint8_t *sp = out->data + (size_t)r * out->row_stride, *mp = sp + sb * nbp, *qp = mp + mb * nbp;
        for (int64_t b = 0; b < nb; b++) {
            /* Q1_0: block b is bits 32 (b % 4) .. of its 128-element block; the scale repeats */
            const uint8_t *blk = qk == QUAD_Q1 ? src + (size_t)bb * (size_t)(b / 4) : src + (size_t)bb * (size_t)b;
            uint8_t *qd = qp + quad * (size_t)(b / 4);
            const int k = (int)(b % 4);
            memcpy(sp + sb * b, blk + so, (size_t)sb);
            if (mb) memcpy(mp + mb * b, blk + mo, (size_t)mb);
            if (qk == QUAD_Q8) {
                memcpy(qd + 16 * k, blk + qo, 16);
                memcpy(qd + 64 + 16 * k, blk + qo + 16, 16);
            } else if (qk != QUAD_Q1) {
                memcpy(qd + 16 * k, blk + qo, 16);
            }
            if (qk == QUAD_Q1) {
                const uint32_t h = bp_load_u32(blk + qo + 4 * k);
                uint16_t lo = (uint16_t)h, hi = (uint16_t)(h >> 16);
                memcpy(qd + 2 * k, &lo, 2);
                memcpy(qd + 8 + 2 * k, &hi, 2);
            }
        }
    }
    return true;
}

bool bp_avx512_pack4_q4_0(const uint8_t *w, int64_t rows, int64_t cols, size_t rb, bp_cpu_packed *out) {
    return pack4(w, rows, cols, rb, QUAD_NIB, 18, 2, 0, 0, 0, 2, out);
}
bool bp_avx512_pack4_iq4_nl(const uint8_t *w, int64_t rows, int64_t cols, size_t rb, bp_cpu_packed *out) {
    return pack4(w, rows, cols, rb, QUAD_NIB, 18, 2, 0, 0, 0, 2, out);
}
bool bp_avx512_pack4_q4_1(const uint8_t *w, int64_t rows, int64_t cols, size_t rb, bp_cpu_packed *out) {
    return pack4(w, rows, cols, rb, QUAD_NIB, 20, 2, 0, 2, 2, 4, out);
}
bool bp_avx512_pack4_mxfp4(const uint8_t *w, int64_t rows, int64_t cols, size_t rb, bp_cpu_packed *out) {
    return pack4(w, rows, cols, rb, QUAD_NIB, 17, 1, 0, 0, 0, 1, out);
}
bool bp_avx512_pack4_q8_0(const uint8_t *w, int64_t rows, int64_t cols, size_t rb, bp_cpu_packed *out) {
    return pack4(w, rows, cols, rb, QUAD_Q8, 34, 2, 0, 0, 0, 2, out);
}
bool bp_avx512_pack4_q1_0(const uint8_t *w, int64_t rows, int64_t cols, size_t rb, bp_cpu_packed *out) {
    return pack4(w, rows, cols, rb, QUAD_Q1, BP_BLOCK_BYTES_Q1_0, 2, 0, 0, 0, 2, out);
}

/* IQ4_XS's copy (bp_avx512_pack_iq4_xsi, below) starts with its superblocks' 8-byte heads back to back; its
 * nibbles from the next 64-byte boundary, so that every load is one aligned line. The same bytes
 * as the file at 4096 columns (16 x 8 = 128 bytes of heads). The copy's order is its own: keeping
 * the file's nibble order, to share avx2/decode_repacked.inc's AVX2 pair loop, ran batches slower.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_repacked.c. */
static size_t iq4xs_head_bytes(int64_t cols) { return ((size_t)(cols / 256) * 8 + 63) / 64 * 64; }

/* Element el (0..31) of block b (of 8) in the 16-element-group layout of an 8-block chunk: its
 * nibble into qd (128 bytes, bp_avx512_pack_nvfp4i's order) and its fifth bit into kd (4 u64 masks, one per
 * unpacked zmm: bit 4 l + e of mask 2 m + n is element 8 m + 4 n + e of group l = 8 h + b; kd
 * may be NULL for the kinds without one, whose bit is 0). Both start zeroed. */
static void put_i16(uint8_t *qd, uint8_t *kd, int b, int el, uint8_t nib, int bit) {
    const int l = 8 * (el / 16) + b, j = el % 16, m = j / 8, n = (j / 4) % 2, e = j % 4, pos = 4 * l + e;
    qd[64 * m + pos] |= (uint8_t)(nib << (4 * n));
    if (bit) kd[8 * (2 * m + n) + pos / 8] |= (uint8_t)(1u << (pos % 8));
}

/* NVFP4 for bp_avx512_vec_nvfp4i: avx2/decode_repacked.inc's pack_nvfp4's scales (per 8 blocks, group l = 8 h + b's scale at
 * byte l), then per 8 blocks 128 bytes of E2M1 codes in the BP_ACT_Q8X16I order: byte 64 m + 4 l +
 * e holds element 4 (2m) + e of group l in its low nibble and element 4 (2m + 1) + e in its high
 * one, so a 64-byte load unpacks to two zmm of 16 groups x 4 elements. Blocks padded to 8. */
bool bp_avx512_pack_nvfp4i(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out) {
    const int64_t nb = cols / 32, nbp = padded_blocks(cols);
    out->row_stride = (size_t)nbp * 2 + (size_t)nbp * 16;
    out->data = bp_cpu_packed_alloc(rows, out->row_stride);
    if (!out->data) return false;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = w + (size_t)r * row_bytes;
        uint8_t *sp = out->data + (size_t)r * out->row_stride, *qp = sp + 2 * nbp;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = src + (size_t)BP_BLOCK_BYTES_NVFP4 * (size_t)(b / 2), *qs = blk + 4;
            for (int h = 0; h < 2; h++) {
                const uint8_t e = blk[2 * (b % 2) + h];
                sp[16 * (b / 8) + 8 * h + b % 8] = e == 0x7f ? 0 : e & 0x7f;
                /* our elements 16 h + i are the file's sub-block 2 (b % 2) + h: element i < 8 the
                 * low nibble of its byte i, i >= 8 the high nibble of byte i - 8 */
                const uint8_t *sq = qs + 8 * (2 * (b % 2) + h);
                for (int i = 0; i < 16; i++)
                    put_i16(qp + 128 * (size_t)(b / 8), NULL, (int)(b % 8), 16 * h + i, i < 8 ? sq[i] & 15 : sq[i - 8] >> 4, 0);
            }
        }
    }
    return true;
}

/* IQ4_XS for bp_avx512_vec_iq4_xsi: per row the superblocks' 8-byte heads (d, scales_h, scales_l) back to
 * back, then from the next 64-byte boundary per superblock 128 bytes of nibbles in put_i16's order
 * (its 8 groups of 32 as the 8 blocks; in the file element e of group b is the low nibble of
 * qs[16 b + e] for e < 16, the high one of qs[16 b + e - 16] after). */
bool bp_avx512_pack_iq4_xsi(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out) {
    const int64_t nsb = cols / 256;
    const size_t head = iq4xs_head_bytes(cols);
    out->row_stride = head + (size_t)nsb * 128;
    out->data = bp_cpu_packed_alloc(rows, out->row_stride);
    if (!out->data) return false;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = w + (size_t)r * row_bytes;
        uint8_t *hp = out->data + (size_t)r * out->row_stride, *qp = hp + head;
        for (int64_t i = 0; i < nsb; i++) {
            const uint8_t *blk = src + (size_t)BP_BLOCK_BYTES_IQ4_XS * (size_t)i, *qs = blk + 8;
            memcpy(hp + 8 * i, blk, 8);
            for (int b = 0; b < 8; b++)
                for (int e = 0; e < 32; e++)
                    put_i16(qp + 128 * (size_t)i, NULL, b, e, e < 16 ? qs[16 * b + e] & 15 : qs[16 * b + e - 16] >> 4, 0);
        }
    }
    return true;
}

/* Q5_0 / Q5_1 for bp_avx512_vec_q5_0i / bp_avx512_vec_q5_1i: [nbp f16 d][nbp f16 m (Q5_1)][per 8 blocks the fifth
 * bits as put_i16's 4 masks][per 8 blocks 128 nibble bytes in bp_avx512_pack_nvfp4i's order]. Blocks
 * padded to 8. */
static bool pack_q5i(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, int has_m, bp_cpu_packed *out) {
    const int64_t nb = cols / 32, nbp = padded_blocks(cols);
    const int bb = has_m ? 24 : 22, hb = has_m ? 4 : 2;
    out->row_stride = (size_t)nbp * (size_t)(2 + 2 * has_m) + (size_t)nbp * 4 + (size_t)nbp * 16;
    out->data = bp_cpu_packed_alloc(rows, out->row_stride);
    if (!out->data) return false;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = w + (size_t)r * row_bytes;
        uint8_t *dp = out->data + (size_t)r * out->row_stride, *mp = dp + 2 * nbp, *kp = mp + 2 * has_m * nbp;
        uint8_t *qp = kp + 4 * nbp;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = src + (size_t)bb * (size_t)b;
            memcpy(dp + 2 * b, blk, 2);
            if (has_m) memcpy(mp + 2 * b, blk + 2, 2);
            const uint32_t qh = bp_load_u32(blk + hb);
            const uint8_t *qs = blk + hb + 4;
            for (int el = 0; el < 32; el++) /* element el: low nibble of qs[el] or high of qs[el - 16] */
                put_i16(qp + 128 * (size_t)(b / 8), kp + 32 * (size_t)(b / 8), (int)(b % 8), el,
                        el < 16 ? qs[el] & 15 : qs[el - 16] >> 4, (int)(qh >> el & 1));
        }
    }
    return true;
}
/* Q5_K for bp_avx512_vec_q5_ki: [per superblock its 16-byte head (d, dmin, the 12 bytes of 6-bit scales and
 * mins), padded to 64 bytes][per superblock put_i16's 4 masks][per superblock 128 nibble bytes in
 * bp_avx512_pack_nvfp4i's order]: the file's 176 bytes per 256, its 8 groups of 32 as the 8 blocks. In the
 * file element e of group G is nibble G % 2 of qs[32 (G / 2) + e] with its fifth bit at bit G of
 * qh[e]. */
static size_t q5k_head_bytes(int64_t cols) { return ((size_t)(cols / 256) * 16 + 63) / 64 * 64; }
bool bp_avx512_pack_q5_ki(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out) {
    const int64_t nsb = cols / 256;
    const size_t head = q5k_head_bytes(cols);
    out->row_stride = head + (size_t)nsb * (32 + 128);
    out->data = bp_cpu_packed_alloc(rows, out->row_stride);
    if (!out->data) return false;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = w + (size_t)r * row_bytes;
        uint8_t *hp = out->data + (size_t)r * out->row_stride, *kp = hp + head, *qp = kp + 32 * (size_t)nsb;
        for (int64_t i = 0; i < nsb; i++) {
            const uint8_t *blk = src + (size_t)BP_BLOCK_BYTES_Q5_K * (size_t)i, *qh = blk + 16, *qs = blk + 48;
            memcpy(hp + 16 * i, blk, 16);
            for (int G = 0; G < 8; G++)
                for (int e = 0; e < 32; e++)
                    put_i16(qp + 128 * (size_t)i, kp + 32 * (size_t)i, G, e, (uint8_t)(qs[32 * (G / 2) + e] >> (4 * (G % 2)) & 15),
                            qh[e] >> G & 1);
        }
    }
    return true;
}
bool bp_avx512_pack_q5_0i(const uint8_t *w, int64_t rows, int64_t cols, size_t rb, bp_cpu_packed *out) {
    return pack_q5i(w, rows, cols, rb, 0, out);
}
bool bp_avx512_pack_q5_1i(const uint8_t *w, int64_t rows, int64_t cols, size_t rb, bp_cpu_packed *out) {
    return pack_q5i(w, rows, cols, rb, 1, out);
}

/* Activations (BP_ACT_Q8X32Q): per 4 blocks 128 quant bytes in the quads' order, then all block
 * scales d (nbp), then all d * sum(q), then per 8 blocks d * sum(q[0..15]) of each, then
 * d * sum(q[16..31]) of each (NVFP4's offset term: its scales are per 16). */
void bp_avx512_quant_q8x32q(const float *x, int64_t n, void *out) {
    const int64_t nb = n / 32, nbp = padded_blocks(n);
    int8_t *q = out;
    float *xd = (float *)(void *)(q + 32 * nbp), *xds = xd + nbp, *xds16 = xds + nbp;
    for (int64_t b = 0; b < nbp; b++) {
        bp_q8x32 t;
        if (b < nb) bp_cpu_quant_q8x32_avx2(x + 32 * b, 32, &t);
        else memset(&t, 0, sizeof t);
        xd[b] = t.d;
        xds[b] = t.ds;
        int lo = 0, hi = 0;
        for (int i = 0; i < 16; i++) lo += t.q[i], hi += t.q[16 + i];
        xds16[16 * (b / 8) + b % 8] = t.d * (float)lo;
        xds16[16 * (b / 8) + 8 + b % 8] = t.d * (float)hi;
        int8_t *o = q + 128 * (b / 4) + 16 * (b % 4);
        memcpy(o, t.q, 16);
        memcpy(o + 64, t.q + 16, 16);
    }
}

/* BP_ACT_Q8X16I: the bytes of bp_avx512_quant_q8x32q with each 8 blocks' quants regrouped by 16-element
 * group: byte 64 k + 4 l + e is element 4 k + e of group l = 8 h + b (block b's elements 16 h ..). */
void bp_avx512_quant_q8x16i(const float *x, int64_t n, void *out) {
    bp_avx512_quant_q8x32q(x, n, out);
    const int64_t nbp = padded_blocks(n);
    int8_t *q = out;
    for (int64_t g = 0; g < nbp; g += 8) {
        int8_t t[256];
        memcpy(t, q + 32 * g, 256);
        for (int b = 0; b < 8; b++)
            for (int h = 0; h < 2; h++)
                for (int k = 0; k < 4; k++)
                    /* bp_avx512_quant_q8x32q's element 16 h + i of block b sits at 128 (b / 4) + 64 h + 16 (b % 4) + i */
                    memcpy(q + 32 * g + 64 * k + 4 * (8 * h + b), t + 128 * (b / 4) + 64 * h + 16 * (b % 4) + 4 * k, 4);
    }
}

/* ---- kernels ------------------------------------------------------------------------------ */

static ALWAYS_INLINE __m256 f16x8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static ALWAYS_INLINE __m256 e8m0x8(const uint8_t *p) {
    __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_mask_blend_epi32(_mm256_cmplt_epi32_mask(e, _mm256_set1_epi32(2)), normal, tiny));
}

typedef struct wquad {
    __m512i a, b; /* elements 0..15 of the four blocks, then 16..31 */
} wquad;

static ALWAYS_INLINE wquad nib4(const uint8_t *q) {
    const __m512i v = _mm512_loadu_si512((const void *)q), m4 = _mm512_set1_epi8(0x0f);
    return (wquad){_mm512_and_si512(v, m4), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)};
}
static ALWAYS_INLINE wquad nib4_lut(const uint8_t *q, const int8_t *tbl) {
    const __m512i t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tbl));
    wquad w = nib4(q);
    return (wquad){_mm512_shuffle_epi8(t, w.a), _mm512_shuffle_epi8(t, w.b)};
}
/* The same lookup with AVX512_VBMI, for the kernels cpu.c runs where CPUID has it (VBMI below):
 * vpermb reads 6 bits of each index byte, so against the 16 values repeated 4 times a raw byte
 * looks up its low nibble and the byte shifted right 4 its high one, with no masks (2 uops fewer
 * per 128 weights). The bytes are nib4_lut's, so both kernels' sums are the same bit for bit
 * (test_cpu_kernels checks). A few % faster hot; cold, memory is most of a call's time.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_repacked.c. */
#define VBMI __attribute__((target("avx512vbmi")))
static ALWAYS_INLINE VBMI wquad nib4_vperm(const uint8_t *q, const int8_t *tbl) {
    const __m512i t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tbl));
    const __m512i v = _mm512_loadu_si512((const void *)q);
    return (wquad){_mm512_permutexvar_epi8(v, t), _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 4), t)};
}
/* Q5: +16 where the fifth bit is set, the masks (k, 16 bytes) straight from memory. */
static ALWAYS_INLINE wquad q5_4(const uint8_t *q, const uint8_t *k) {
    wquad w = nib4(q);
    const __m512i s = _mm512_set1_epi8(16);
    __mmask64 lo, hi;
    memcpy(&lo, k, 8);
    memcpy(&hi, k + 8, 8);
    return (wquad){_mm512_mask_add_epi8(w.a, lo, w.a, s), _mm512_mask_add_epi8(w.b, hi, w.b, s)};
}
/* Q1_0: 16 where the bit is set, 0 where not (avx2/decode_repacked.inc explains the d / 8). */
static ALWAYS_INLINE wquad q1_4(const uint8_t *q) {
    __mmask64 lo, hi;
    memcpy(&lo, q, 8);
    memcpy(&hi, q + 8, 8);
    const __m512i s = _mm512_set1_epi8(16);
    return (wquad){_mm512_maskz_mov_epi8(lo, s), _mm512_maskz_mov_epi8(hi, s)};
}

/* Q8_0: signed quants; |q| and the mask of the negative ones, the sign moved onto the
 * activations per input (a -128 byte reads as 128 unsigned, its magnitude). */
typedef struct wquad_s {
    __m512i a, b;
    __mmask64 na, nb;
} wquad_s;
static ALWAYS_INLINE wquad_s q8_4(const uint8_t *q) {
    const __m512i a = _mm512_loadu_si512((const void *)q), b = _mm512_loadu_si512((const void *)(q + 64));
    return (wquad_s){_mm512_abs_epi8(a), _mm512_abs_epi8(b), _mm512_movepi8_mask(a), _mm512_movepi8_mask(b)};
}
/* The unsigned kinds as wquad_s with no negative lanes. */
#define UNSIGNED(W) ((wquad_s){(W).a, (W).b, 0, 0})

static const int8_t iq4nl_plus127_q[16] = {0, 23, 44, 62, 78, 92, 105, 117, (int8_t)128, (int8_t)140, (int8_t)152,
                                           (int8_t)165, (int8_t)180, (int8_t)196, (int8_t)216, (int8_t)240};
static const int8_t fp4_plus12_q[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

/* Software prefetch BP_ROW_PF bytes ahead of a pointer that sweeps the whole row (scales, second
 * fields and quads) at the pace the loop consumes it (see above): before the group of 8 blocks
 * at g, the lines covering that group's BPG bytes (its share of the row), BP_ROW_PF on.
 * A fixed count per group (neighbouring groups may prefetch a line twice): a loop up to a moving
 * end, with 2 or 3 lines a group in turn, cost ~10% at t = 2 hot (its branch mispredicted). */
static ALWAYS_INLINE void pf_group(const uint8_t *row, int64_t g, const size_t bpg) {
    BP_PREFETCH_BLOCK(row + (size_t)(g / 8) * bpg, bpg);
}

/* Rows r0..r1 for every input, NJ at a time (inputs outer, rows inner), through ROW(job, r, NJ, j0).
 * A batch of 5-7 makes two passes (4 + 1..3; t = 5 ~10% under t = 4); rows in blocks of 8-32 run
 * for every group, so that the second pass reads them from L2 (it did not help: the second pass
 * is the unpacking, not the memory).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_repacked.c. */
#define QUAD_DISPATCH(NAME, TGT, ROW)                                                                      \
    TGT void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                  \
        for (int64_t j0 = 0; j0 < job->batch;) {                                                           \
            const int64_t left = job->batch - j0;                                                          \
            const int nj = left >= 4 ? 4 : (int)left;                                                      \
            for (int64_t r = r0; r < r1; r++) {                                                            \
                if (nj == 4) ROW(job, r, 4, j0);                                                           \
                else if (nj == 3) ROW(job, r, 3, j0);                                                      \
                else if (nj == 2) ROW(job, r, 2, j0);                                                      \
                else ROW(job, r, 1, j0);                                                                   \
            }                                                                                              \
            j0 += nj;                                                                                      \
        }                                                                                                  \
    }

/* The row loop of the quad kernels over any row layout. SETUP: declarations after sp (the row's
 * first byte); PF: the prefetch before the group of 8 blocks at g; SCALES: those 8 blocks'
 * weight scales (floats); QPTR: the quad holding block b; UNPACK: the wquad_s at q; OFFS: the
 * per-block term times d_x * sum(q_x), whose row sum is then multiplied by OFFS_K (the kinds
 * whose term is a constant times the scale pass wd and the constant: one multiply a row, not
 * one every 8 blocks); FIN: the row's result is multiplied by it (IQ4_XS: its scales come
 * 4x); TGT: empty, or VBMI for the kernels that use it. As avx2/decode_repacked.inc: 1-3 inputs split the FMA
 * chain over two accumulators; inputs outer, rows inner. */
#define QUAD_ROWS(NAME, TGT, ROWP, SETUP, PF, SCALES, QPTR, UNPACK, SIGNED, HAS_OFFS, OFFS, OFFS_K, FIN)  \
    static ALWAYS_INLINE TGT void NAME##_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) { \
        const int64_t nbp = padded_blocks(job->cols), nb4 = quad_blocks(job->cols);                        \
        const size_t xs = job->xq_stride;                                                                  \
        const int8_t *xq = (const int8_t *)job->xq + (size_t)j0 * xs;                                     \
        const uint8_t *sp = (ROWP);                                                                        \
        SETUP                                                                                              \
        const __m512i pick0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);          \
        const __m512i pick1 = _mm512_add_epi32(pick0, _mm512_set1_epi32(4));                               \
        __m512 acc[MAX_NJ], acc2[MAX_NJ];                                                                  \
        __m256 offs[MAX_NJ];                                                                               \
        for (int jj = 0; jj < NJ; jj++) acc[jj] = acc2[jj] = _mm512_setzero_ps(), offs[jj] = _mm256_setzero_ps(); \
        for (int64_t g = 0; g < nbp; g += 8) {                                                             \
            PF;                                                                                            \
            const __m256 wd = SCALES;                                                                      \
            __m512 s[MAX_NJ];                                                                              \
            for (int jj = 0; jj < NJ; jj++) {                                                              \
                const float *xd = (const float *)(const void *)(xq + (size_t)jj * xs + 32 * nbp);          \
                s[jj] = _mm512_castps256_ps512(_mm256_mul_ps(wd, _mm256_loadu_ps(xd + g)));                \
                if (HAS_OFFS) offs[jj] = _mm256_fmadd_ps(OFFS, _mm256_loadu_ps(xd + nbp + g), offs[jj]);   \
            }                                                                                              \
            for (int h = 0; h < 2; h++) {                                                                  \
                const int64_t b = g + 4 * h;                                                               \
                if (b >= nb4) break;                                                                       \
                const uint8_t *q = (QPTR);                                                                 \
                const wquad_s w = UNPACK;                                                                  \
                for (int jj = 0; jj < NJ; jj++) {                                                          \
                    const int8_t *x = xq + (size_t)jj * xs + 32 * b;                                       \
                    __m512i xa = _mm512_loadu_si512((const void *)x), xb = _mm512_loadu_si512((const void *)(x + 64)); \
                    if (SIGNED) {                                                                          \
                        xa = _mm512_mask_sub_epi8(xa, w.na, _mm512_setzero_si512(), xa);                   \
                        xb = _mm512_mask_sub_epi8(xb, w.nb, _mm512_setzero_si512(), xb);                   \
                    }                                                                                      \
                    __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.a, xa);                      \
                    p = _mm512_dpbusd_epi32(p, w.b, xb);                                                   \
                    const __m512 sc = _mm512_permutexvar_ps(h ? pick1 : pick0, s[jj]);                     \
                    if (NJ < 4 && h) acc2[jj] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(p), acc2[jj]);      \
                    else acc[jj] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(p), acc[jj]);                    \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        for (int jj = 0; jj < NJ; jj++)                                                                    \
            job->y[(j0 + jj) * job->rows + r] =                                                            \
                (FIN) * (_mm512_reduce_add_ps(_mm512_add_ps(acc[jj], acc2[jj])) + (OFFS_K) * hsum8(offs[jj]));  \
    }                                                                                                      \
    QUAD_DISPATCH(NAME, TGT, NAME##_row)

/* The repacked layout: SB, MB scale / second-field bytes per block, QB bytes per quad; SCALES may
 * use sp (scales) and mp (second fields) at block g. */
#define QUAD_KERNEL(NAME, TGT, SB, MB, QB, SCALES, UNPACK, SIGNED, HAS_OFFS, OFFS, OFFS_K)                 \
    QUAD_ROWS(NAME, TGT, job->packed->data + (size_t)r * job->packed->row_stride,                              \
              const uint8_t *mp = sp + (SB) * nbp; const uint8_t *qp = mp + (MB) * nbp; (void)mp;,                       \
              pf_group(sp, g, 8 * ((SB) + (MB)) + 2 * (QB)), SCALES, qp + (QB) * (size_t)(b / 4), UNPACK,  \
              SIGNED, HAS_OFFS, OFFS, OFFS_K, 1.0f)

QUAD_KERNEL(bp_avx512_vec_q4_0q, , 2, 0, 64, f16x8(sp + 2 * g), UNSIGNED(nib4(q)), 0, 1, wd, -8.0f)
QUAD_KERNEL(bp_avx512_vec_q4_1q, , 2, 2, 64, f16x8(sp + 2 * g), UNSIGNED(nib4(q)), 0, 1, f16x8(mp + 2 * g), 1.0f)
QUAD_KERNEL(bp_avx512_vec_iq4_nlq, , 2, 0, 64, f16x8(sp + 2 * g), UNSIGNED(nib4_lut(q, iq4nl_plus127_q)), 0, 1, wd, -127.0f)
QUAD_KERNEL(bp_avx512_vec_iq4_nlq_vb, VBMI, 2, 0, 64, f16x8(sp + 2 * g), UNSIGNED(nib4_vperm(q, iq4nl_plus127_q)), 0, 1, wd, -127.0f)
QUAD_KERNEL(bp_avx512_vec_mxfp4q, , 1, 0, 64, e8m0x8(sp + g), UNSIGNED(nib4_lut(q, fp4_plus12_q)), 0, 1, wd, -12.0f)
QUAD_KERNEL(bp_avx512_vec_mxfp4q_vb, VBMI, 1, 0, 64, e8m0x8(sp + g), UNSIGNED(nib4_vperm(q, fp4_plus12_q)), 0, 1, wd, -12.0f)
QUAD_KERNEL(bp_avx512_vec_q1_0q, , 2, 0, 16, _mm256_mul_ps(f16x8(sp + 2 * g), _mm256_set1_ps(0.125f)), UNSIGNED(q1_4(q)), 0, 1, wd,
            -8.0f)
QUAD_KERNEL(bp_avx512_vec_q8_0q, , 2, 0, 128, f16x8(sp + 2 * g), q8_4(q), 1, 0, wd, 1.0f)

/* IQ4_XS read in place (no repacked copy): a superblock is d, scales_h (u16), scales_l[4], then
 * qs[128], each 64-byte half of which is already a quad as the packer lays one out (16 nibble
 * bytes a group of 32: low nibbles its elements 0..15, high 16..31), so the quad loop's 8 blocks
 * are the superblock's 8 groups, scaled d * (ls - 32), and its values those of IQ4_NL (+127,
 * unsigned, the offset term as bp_avx512_vec_iq4_nlq's), against q8_0 activations (a scale per 32, finer
 * than the q8_K the AVX2 kernel and the GEMM use). It replaced a q8_K kernel in avx512/decode_kquant.c
 * (a sign mask and a negation of the activations per 64 weights, vpmaddubsw + vpdpwssd against
 * the scales). One unaligned 64-byte load (the quads sit 8 bytes past a line) beats two 32-byte
 * ones; the aligned copy (below) is faster still.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_repacked.c. */
static ALWAYS_INLINE __m256 iq4_xs_scales(const uint8_t *b) {
    /* ls_j = low nibble j of scales_l | bits 2j, 2j+1 of scales_h << 4, deposited (pdep) in bits
     * 2-7 of byte j: 4 ls_j, and with bit 7 flipped 4 (ls_j - 32) as a signed byte. The 4 leaves
     * with the row (QUAD_ROWS' FIN). */
    const uint64_t ls4 = _pdep_u64(bp_load_u32(b + 4), 0x3c3c3c3c3c3c3c3cull) | _pdep_u64(bp_load_u16(b + 2), 0xc0c0c0c0c0c0c0c0ull);
    const __m128i l8 = _mm_cvtsi64_si128((long long)(ls4 ^ 0x8080808080808080ull));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(l8)), _mm256_cvtph_ps(_mm_set1_epi16((short)bp_load_u16(b))));
}
#define IQ4XS_SB(g) (sp + BP_BLOCK_BYTES_IQ4_XS * (size_t)((g) / 8))
QUAD_ROWS(bp_avx512_vec_iq4_xsq, , job->w + (size_t)r * job->row_bytes, , BP_PREFETCH_BLOCK(IQ4XS_SB(g), BP_BLOCK_BYTES_IQ4_XS),
          iq4_xs_scales(IQ4XS_SB(g)), IQ4XS_SB(b) + 8 + 64 * (size_t)((b / 4) % 2),
          UNSIGNED(nib4_lut(q, iq4nl_plus127_q)), 0, 1, wd, -127.0f, 0.25f)
#undef IQ4XS_SB
/* The kernel that runs where there is memory for a copy is bp_avx512_vec_iq4_xsi (below): this one
 * reads 7 quads in 8 across two lines, which an aligned copy avoids.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_repacked.c. */

/* ---- 16-element groups (BP_ACT_Q8X16I): NVFP4, IQ4_XS, Q5_0, Q5_1 ---------------------------
 * The layout above puts 4 blocks x 16 elements in a zmm, so each vpdpbusd lane holds a partial
 * sum of one group and every 64 weights need their own conversion, scale permute and FMA. Here
 * each 8 blocks' weights (bp_avx512_pack_nvfp4i's order) are two 64-byte loads that unpack to four zmm of
 * 16 groups x 4 elements (group l = 8 h + b: block b's elements 16 h ..), against activations in
 * the same order: four vpdpbusd (two chains) leave each group's whole integer dot in its own lane,
 * and one conversion and one FMA against the groups' scales finish 256 weights (faster than the
 * quad kernels for these four kinds at every batch: docs/cpu-kernels.md, Measurements behind the
 * comments, avx512/decode_repacked.c).
 *
 * ROWP: the row; SETUP: declarations after sp (qp: the 8-block chunks of 128 quant bytes); PF: the
 * prefetch before the 8 blocks at g; WD: a declaration of their weight scales wd; S: the zmm of
 * the 16 groups' scales times input jj's block scales (xd: its d per block); OT: the type of the
 * offset accumulators, OSTEP: offs[jj]'s next value (the weight term times the activations' d *
 * sum(q), per block or per group); UNPACK(q, W0, W1): the two wquads of the chunk at q (elements
 * 0-3 / 4-7 of each group, then 8-11 / 12-15); YFIN: y from a (the sum of the products) and o (the
 * offset accumulator). Each (row, input) sums in one order for any grouping. */
#define I16_ROWS(NAME, TGT, ROWP, SETUP, PF, WD, S, OT, OSTEP, UNPACK, YFIN)                                \
    static ALWAYS_INLINE TGT void NAME##_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) { \
        const int64_t nbp = padded_blocks(job->cols), nb = job->cols / 32;                                 \
        const size_t xs = job->xq_stride;                                                                  \
        const int8_t *xq = (const int8_t *)job->xq + (size_t)j0 * xs;                                     \
        const uint8_t *sp = (ROWP);                                                                        \
        SETUP                                                                                              \
        __m512 acc[MAX_NJ];                                                                                \
        OT offs[MAX_NJ];                                                                                   \
        for (int jj = 0; jj < NJ; jj++) acc[jj] = _mm512_setzero_ps(), offs[jj] = (OT){0};                \
        for (int64_t g = 0; g < nb; g += 8) {                                                              \
            PF;                                                                                            \
            WD;                                                                                            \
            wquad w0, w1;                                                                                  \
            UNPACK(qp + 16 * (size_t)g, w0, w1);                                                           \
            for (int jj = 0; jj < NJ; jj++) {                                                              \
                const int8_t *x = xq + (size_t)jj * xs + 32 * g;                                           \
                const float *xd = (const float *)(const void *)(xq + (size_t)jj * xs + 32 * nbp);          \
                const __m512 s = (S);                                                                      \
                offs[jj] = (OSTEP);                                                                        \
                __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0.a, _mm512_loadu_si512((const void *)x)); \
                __m512i p2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w1.a, _mm512_loadu_si512((const void *)(x + 128))); \
                p = _mm512_dpbusd_epi32(p, w0.b, _mm512_loadu_si512((const void *)(x + 64)));              \
                p2 = _mm512_dpbusd_epi32(p2, w1.b, _mm512_loadu_si512((const void *)(x + 192)));           \
                acc[jj] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_add_epi32(p, p2)), acc[jj]);        \
            }                                                                                              \
        }                                                                                                  \
        for (int jj = 0; jj < NJ; jj++) {                                                                  \
            const float a = _mm512_reduce_add_ps(acc[jj]);                                                 \
            const OT o = offs[jj];                                                                         \
            job->y[(j0 + jj) * job->rows + r] = (YFIN);                                                    \
        }                                                                                                  \
    }                                                                                                      \
    QUAD_DISPATCH(NAME, TGT, NAME##_row)

#define UNPACK_LUT(q, W0, W1, LUT, TBL) (W0 = LUT(q, TBL), W1 = LUT((q) + 64, TBL))
/* The kinds with a scale per 32: the 8 scales stand under both halves of their block (a
 * broadcast of 8 floats to 16 lanes), the offset term per block. */
#define S_PER32 _mm512_broadcast_f32x8(_mm256_mul_ps(wd, _mm256_loadu_ps(xd + g)))
#define OSTEP_PER32(OFFS) _mm256_fmadd_ps(OFFS, _mm256_loadu_ps(xd + nbp + g), offs[jj])

/* NVFP4 (bp_avx512_pack_nvfp4i): the 16 scales of 8 blocks, one per group in the groups' lane order, widen
 * to f16 with a shift (an E4M3 byte << 7 is the f16 of its value / 2^8, subnormals included), so
 * the scale is that * 128 (the value halved, as the table holds doubled E2M1 values + 12); the
 * -12 comes back once per row from the activations' 16-element sums. */
#define NVFP4_WD                                                                                           \
    const __m256i e = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(sp + 2 * g))), 7); \
    const __m512 wd = _mm512_mul_ps(_mm512_cvtph_ps(e), _mm512_set1_ps(128.0f))
#define UNPACK_FP4(q, W0, W1) UNPACK_LUT(q, W0, W1, nib4_lut, fp4_plus12_q)
#define UNPACK_FP4_VB(q, W0, W1) UNPACK_LUT(q, W0, W1, nib4_vperm, fp4_plus12_q)
#define NVFP4I_ROWS(NAME, TGT, UNPACK)                                                                     \
    I16_ROWS(NAME, TGT, job->packed->data + (size_t)r * job->packed->row_stride, const uint8_t *qp = sp + 2 * nbp;, \
             pf_group(sp, g, 16 + 128), NVFP4_WD, _mm512_mul_ps(wd, _mm512_broadcast_f32x8(_mm256_loadu_ps(xd + g))), \
             __m512, _mm512_fmadd_ps(wd, _mm512_loadu_ps(xd + 2 * nbp + 2 * g), offs[jj]), UNPACK,           \
             a - 12.0f * _mm512_reduce_add_ps(o))
NVFP4I_ROWS(bp_avx512_vec_nvfp4i, , UNPACK_FP4)
NVFP4I_ROWS(bp_avx512_vec_nvfp4i_vb, VBMI, UNPACK_FP4_VB)

/* IQ4_XS (bp_avx512_pack_iq4_xsi): a superblock's 8 groups of 32 are the 8 blocks, scaled d * (ls - 32)
 * (iq4_xs_scales' 4x: the 0.25 leaves with the row), its values IQ4_NL's (+127, unsigned). */
#define UNPACK_IQ4(q, W0, W1) UNPACK_LUT(q, W0, W1, nib4_lut, iq4nl_plus127_q)
#define UNPACK_IQ4_VB(q, W0, W1) UNPACK_LUT(q, W0, W1, nib4_vperm, iq4nl_plus127_q)
#define IQ4XSI_ROWS(NAME, TGT, UNPACK)                                                                     \
    I16_ROWS(NAME, TGT, job->packed->data + (size_t)r * job->packed->row_stride,                          \
             const uint8_t *qp = sp + iq4xs_head_bytes(job->cols);, pf_group(sp, g, BP_BLOCK_BYTES_IQ4_XS), \
             const __m256 wd = iq4_xs_scales(sp + (size_t)g), S_PER32, __m256, OSTEP_PER32(wd), UNPACK,   \
             0.25f * (a - 127.0f * hsum8(o)))
IQ4XSI_ROWS(bp_avx512_vec_iq4_xsi, , UNPACK_IQ4)
IQ4XSI_ROWS(bp_avx512_vec_iq4_xsi_vb, VBMI, UNPACK_IQ4_VB)

/* Q5_0 / Q5_1 (pack_q5i): per 8 blocks the four zmm's fifth-bit masks (32 bytes) in a region of
 * their own, so that the 128 nibble bytes stay 64-byte aligned (in the quad layout the masks at
 * the head of 80-byte quads split three loads in four across lines).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_repacked.c. */
static ALWAYS_INLINE void q5_8(const uint8_t *q, const uint8_t *k, wquad *w0, wquad *w1) {
    *w0 = q5_4(q, k);
    *w1 = q5_4(q + 64, k + 16);
}
#define Q5_UNPACK(q, W0, W1) q5_8(q, kp + 4 * (size_t)g, &(W0), &(W1))
#define Q5I_KERNEL(NAME, MB, OFFS, OFFS_K)                                                                 \
    I16_ROWS(NAME, , job->packed->data + (size_t)r * job->packed->row_stride,                             \
             const uint8_t *mp = sp + 2 * nbp; const uint8_t *kp = mp + (MB) * nbp;                         \
             const uint8_t *qp = kp + 4 * (size_t)nbp; (void)mp;, pf_group(sp, g, 8 * (2 + (MB)) + 160),   \
             const __m256 wd = f16x8(sp + 2 * g), S_PER32, __m256, OSTEP_PER32(OFFS), Q5_UNPACK,           \
             a + (OFFS_K) * hsum8(o))
Q5I_KERNEL(bp_avx512_vec_q5_0i, 0, wd, -16.0f)
Q5I_KERNEL(bp_avx512_vec_q5_1i, 2, f16x8(mp + 2 * g), 1.0f)
/* Q5_K (bp_avx512_pack_q5_ki): a superblock's 8 groups of 32 are the 8 blocks, scaled d * sc_G, the mins'
 * term dmin * m_G times the activations' d * sum(q) per 32, subtracted once per row; q8_0
 * activations (a scale per 32, finer than the q8_K of avx512/decode_kquant.c's kernel, which stays the
 * one on the plain layout). */
#define Q5K_WD                                                                                             \
    const uint8_t *hd = sp + 16 * (size_t)(g / 8);                                                        \
    const __m128i scm = scale_min_k4v(hd + 4);                                                             \
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)bp_load_u32(hd)));                               \
    const __m256 wd = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(scm)), _mm256_broadcastss_ps(dm)); \
    const __m256 mn = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(scm, 8))),      \
                                    _mm256_broadcastss_ps(_mm_movehdup_ps(dm)))
#define Q5K_UNPACK(q, W0, W1) q5_8(q, kp + 4 * (size_t)g, &(W0), &(W1))
I16_ROWS(bp_avx512_vec_q5_ki, , job->packed->data + (size_t)r * job->packed->row_stride,
         const uint8_t *kp = sp + q5k_head_bytes(job->cols); const uint8_t *qp = kp + 4 * (size_t)nbp;,
         pf_group(sp, g, BP_BLOCK_BYTES_Q5_K), Q5K_WD, S_PER32, __m256, OSTEP_PER32(mn), Q5K_UNPACK,
         a - hsum8(o))

#endif
