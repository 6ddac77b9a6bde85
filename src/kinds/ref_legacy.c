/* Reference kernels for the legacy 32-element kinds: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1.
 *
 * Block layouts (facts of ggml-common.h; all little-endian, no padding):
 *   Q4_0 18 B: f16 d, 16 B nibbles         x = d * (q - 8)
 *   Q4_1 20 B: f16 d, f16 m, 16 B nibbles  x = d * q + m
 *   Q5_0 22 B: f16 d, u32 qh, 16 B nibbles x = d * (q - 16), q = nibble | bit_i(qh) << 4
 *   Q5_1 24 B: f16 d, f16 m, u32 qh, 16 B  x = d * q + m
 *   Q8_0 34 B: f16 d, 32 x int8            x = d * q
 *   Q8_1 36 B: f16 d, f16 s = d * sum(q), 32 x int8   x = d * q (s only feeds dot products)
 * Byte j of the nibble array holds element j (low nibble) and element j + 16 (high nibble).
 *
 * The quantizers reproduce the gguf package's NumPy quantizers bit for bit (Q4_0..Q8_0),
 * which themselves match ggml's *_ref quantizers; Q8_1 follows ggml's quantize_row_q8_1_ref.
 * Every float step is its own statement on a float variable: a compiler allowed to contract
 * `a * b + c` into an FMA (clang's default) would round once instead of twice and break
 * bit-exactness with NumPy, which never fuses.
 */
#include <math.h>

#include "kinds/kinds_internal.h"

enum { QK = 32 };

static float load_f16(const uint8_t *p) { return bp_f16_to_f32(bp_load_u16(p)); }

/* ---- dequantize ------------------------------------------------------------------------ */

void bp_dequant_Q4_0(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q4_0, dst += QK) {
        const float d = load_f16(b);
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = d * (float)((b[2 + j] & 0x0f) - 8);
            dst[j + QK / 2] = d * (float)((b[2 + j] >> 4) - 8);
        }
    }
}

void bp_dequant_Q4_1(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q4_1, dst += QK) {
        const float d = load_f16(b), m = load_f16(b + 2);
        for (int j = 0; j < QK / 2; j++) {
            const float lo = d * (float)(b[4 + j] & 0x0f);
            const float hi = d * (float)(b[4 + j] >> 4);
            dst[j] = lo + m;
            dst[j + QK / 2] = hi + m;
        }
    }
}

/* The 5-bit value of element j from its nibble byte and the 32-bit high-bit mask. */
static int q5_value(const uint8_t *qs, uint32_t qh, int j) {
    const int nib = j < QK / 2 ? (qs[j] & 0x0f) : (qs[j - QK / 2] >> 4);
    return nib | (int)(((qh >> j) & 1u) << 4);
}

void bp_dequant_Q5_0(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q5_0, dst += QK) {
        const float d = load_f16(b);
        const uint32_t qh = bp_load_u32(b + 2);
        for (int j = 0; j < QK; j++) dst[j] = d * (float)(q5_value(b + 6, qh, j) - 16);
    }
}

void bp_dequant_Q5_1(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q5_1, dst += QK) {
        const float d = load_f16(b), m = load_f16(b + 2);
        const uint32_t qh = bp_load_u32(b + 4);
        for (int j = 0; j < QK; j++) {
            const float v = d * (float)q5_value(b + 8, qh, j);
            dst[j] = v + m;
        }
    }
}

static void dequant_q8(const uint8_t *b, size_t block_bytes, size_t qs_off, float *dst, int64_t nblocks) {
    for (int64_t i = 0; i < nblocks; i++, b += block_bytes, dst += QK) {
        const float d = load_f16(b);
        for (int j = 0; j < QK; j++) dst[j] = d * (float)(int8_t)b[qs_off + j];
    }
}

void bp_dequant_Q8_0(const void *src, float *dst, int64_t nblocks) { dequant_q8(src, 34, 2, dst, nblocks); }
void bp_dequant_Q8_1(const void *src, float *dst, int64_t nblocks) { dequant_q8(src, 36, 4, dst, nblocks); }

/* ---- quantize -------------------------------------------------------------------------- */

/* The value with the largest magnitude, sign kept; the first one on ties (numpy argmax). */
static float signed_absmax(const float *x) {
    /* Start from x[0], not 0: an all-zero block must keep x[0]'s sign of zero as numpy does. */
    float amax = fabsf(x[0]), max = x[0];
    for (int j = 1; j < QK; j++) {
        const float a = fabsf(x[j]);
        if (a > amax) {
            amax = a;
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, float *mn, float *mx) {
    *mn = x[0];
    *mx = x[0];
    for (int j = 1; j < QK; j++) {
        if (x[j] < *mn) *mn = x[j];
        if (x[j] > *mx) *mx = x[j];
    }
}

/* trunc(v) as an integer clamped to [0, hi]; v is never below -1 here, and values past the
 * top (rounding at the block's extreme) clamp as numpy's .clip does. */
static int trunc_clamp(float v, int hi) {
    const float t = truncf(v);
    if (!(t >= 0.0f)) return 0;
    if (t >= (float)hi) return hi;
    return (int)t;
}

static float inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

void bp_quantize_Q4_0(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q4_0, src += QK) {
        const float d = signed_absmax(src) / -8.0f;
        const float id = inverse(d);
        bp_store_u16(b, bp_f32_to_f16(d));
        int q[QK];
        for (int j = 0; j < QK; j++) {
            const float s = src[j] * id;
            q[j] = trunc_clamp(s + 8.5f, 15);
        }
        for (int j = 0; j < QK / 2; j++) b[2 + j] = (uint8_t)(q[j] | (q[j + QK / 2] << 4));
    }
}

/* Type-1 rounding ("w = d * q + min") shared by Q4_1 and Q5_1: d and min go to b and b + 2 as
 * f16, the quants 0..levels to q. */
static void quantize_type1(const float *src, int levels, uint8_t *b, int *q) {
    float mn, mx;
    min_max(src, &mn, &mx);
    const float d = (mx - mn) / (float)levels;
    const float id = inverse(d);
    bp_store_u16(b, bp_f32_to_f16(d));
    bp_store_u16(b + 2, bp_f32_to_f16(mn));
    for (int j = 0; j < QK; j++) {
        const float s = (src[j] - mn) * id;
        q[j] = trunc_clamp(s + 0.5f, levels);
    }
}

void bp_quantize_Q4_1(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q4_1, src += QK) {
        int q[QK];
        quantize_type1(src, 15, b, q);
        for (int j = 0; j < QK / 2; j++) b[4 + j] = (uint8_t)(q[j] | (q[j + QK / 2] << 4));
    }
}

static void pack_q5(const int *q, uint8_t *qh_out, uint8_t *qs) {
    uint32_t qh = 0;
    for (int j = 0; j < QK; j++) qh |= (uint32_t)(q[j] >> 4) << j;
    for (int k = 0; k < 4; k++) qh_out[k] = (uint8_t)(qh >> (8 * k));
    for (int j = 0; j < QK / 2; j++) qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + QK / 2] & 0x0f) << 4));
}

void bp_quantize_Q5_0(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q5_0, src += QK) {
        const float d = signed_absmax(src) / -16.0f;
        const float id = inverse(d);
        bp_store_u16(b, bp_f32_to_f16(d));
        int q[QK];
        for (int j = 0; j < QK; j++) {
            const float s = src[j] * id;
            q[j] = trunc_clamp(s + 16.5f, 31);
        }
        pack_q5(q, b + 2, b + 6);
    }
}

void bp_quantize_Q5_1(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q5_1, src += QK) {
        int q[QK];
        quantize_type1(src, 31, b, q);
        pack_q5(q, b + 4, b + 8);
    }
}

/* Shared by Q8_0 and Q8_1: d = amax / 127, q = round-half-away(x / d). Returns sum(q). */
static int quantize_q8_block(const float *x, uint8_t *qs, float *d_out) {
    float amax = 0.0f;
    for (int j = 0; j < QK; j++) {
        const float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = inverse(d);
    int sum = 0;
    for (int j = 0; j < QK; j++) {
        const float v = x[j] * id;
        /* Finite input gives |v| <= 127 up to one rounding, so the clamp changes nothing there;
         * it keeps a NaN or inf input (inf * 0) from an undefined float -> int conversion. */
        const int q = v >= 127.0f ? 127 : v <= -127.0f ? -127 : v == v ? (int)roundf(v) : 0;
        qs[j] = (uint8_t)(int8_t)q;
        sum += q;
    }
    *d_out = d;
    return sum;
}

void bp_quantize_Q8_0(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q8_0, src += QK) {
        float d;
        quantize_q8_block(src, b + 2, &d);
        bp_store_u16(b, bp_f32_to_f16(d));
    }
}

void bp_quantize_Q8_1(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q8_1, src += QK) {
        float d;
        const int sum = quantize_q8_block(src, b + 4, &d);
        bp_store_u16(b, bp_f32_to_f16(d));
        bp_store_u16(b + 2, bp_f32_to_f16((float)sum * d));
    }
}
