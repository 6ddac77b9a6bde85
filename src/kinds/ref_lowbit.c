/* CPU reference kernels for the low-bit kinds: the ternary TQ1_0 / TQ2_0, the FP4 kinds MXFP4 /
 * NVFP4, and the sign/2-bit kinds Q1_0 / Q2_0. Plain, obviously-correct code.
 *
 * Block layouts are facts of ggml's ggml-common.h (byte offsets written out below).
 * Dequantization is bit-exact with gguf.quants.dequantize (gguf 0.19) for TQ1_0 TQ2_0 MXFP4
 * NVFP4. Q1_0 and Q2_0 are not in that package: they follow the arithmetic of ggml's
 * dequantize_row_q1_0 / _q2_0 (y = +-d, y = (q-1)*d), every product rounded to float.
 * The quantizers for TQ1_0 TQ2_0 MXFP4 are bit-exact with gguf.quants.quantize.
 */
#include <math.h>
#include <string.h>

#include "kinds/kinds_internal.h"

/* E2M1 code -> twice its value (so every entry is an integer; the block scales carry the 1/2). */
static const int8_t fp4_doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float load_f16(const uint8_t *p) { return bp_f16_to_f32(bp_load_u16(p)); }
static void store_f16(uint8_t *p, float v) { bp_store_u16(p, bp_f32_to_f16(v)); }

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* E8M0 exponent byte -> 2^(e-127) / 2 (the half pairs with fp4_doubled). e = 0 and 1 give the
 * float subnormals 2^-128 and 2^-127; e = 255 is 2^127, not NaN (ggml and gguf agree). */
static float e8m0_half(uint8_t e) {
    return f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* Unsigned E4M3 (bias 7, 3 mantissa bits) -> value / 2. 0x00 and 0x7F (the NaN pattern) read as
 * 0; the top bit is ignored, as gguf and ggml both do. Every result is exact in float. */
float bp_ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    const int ex = (x >> 3) & 0x0F, man = x & 7;
    const float raw = ex == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + (float)man / 8.0f, ex - 7);
    return raw * 0.5f;
}

/* ---------------------------------------------------------------- dequantization */

/* One base-3 digit from a TQ1_0 byte: the byte holds ceil(v * 256 / 243) for a 5-trit number v,
 * so multiplying by 3^k (mod 256) brings trit k to the top and (byte * 3) >> 8 reads it. */
static int tq1_trit(uint8_t byte, int k) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t q = (uint8_t)(byte * pow3[k]);
    return ((q * 3) >> 8) - 1;
}

/* TQ1_0, 54 bytes: qs[48] | qh[4] | d. Elements 0-159: trit e/32 of qs[e%32]; 160-239: trit
 * (e-160)/16 of qs[32 + e%16]; 240-255: trit (e-240)/4 of qh[e%4]. */
void bp_dequant_TQ1_0(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_TQ1_0, dst += BP_QK_K) {
        const float d = load_f16(b + 52);
        for (int e = 0; e < BP_QK_K; e++) {
            int t;
            if (e < 160) t = tq1_trit(b[e % 32], e / 32);
            else if (e < 240) t = tq1_trit(b[32 + (e - 160) % 16], (e - 160) / 16);
            else t = tq1_trit(b[48 + (e - 240) % 4], (e - 240) / 4);
            dst[e] = d * (float)t;
        }
    }
}

/* TQ2_0, 66 bytes: qs[64] | d. Element e: bits 2*((e%128)/32) of qs[(e/128)*32 + e%32], minus 1. */
void bp_dequant_TQ2_0(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_TQ2_0, dst += BP_QK_K) {
        const float d = load_f16(b + 64);
        for (int e = 0; e < BP_QK_K; e++) {
            const int q = (b[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            dst[e] = d * (float)(q - 1);
        }
    }
}

/* MXFP4, 17 bytes: e (E8M0) | qs[16]; element j < 16 is the low nibble of qs[j], j >= 16 the
 * high nibble of qs[j-16]. */
void bp_dequant_MXFP4(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_MXFP4, dst += 32) {
        const float d = e8m0_half(b[0]);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)fp4_doubled[b[1 + j] & 0x0F];
            dst[j + 16] = d * (float)fp4_doubled[b[1 + j] >> 4];
        }
    }
}

/* NVFP4, 36 bytes: d[4] (UE4M3, one per 16 elements) | qs[32]; in sub-block s, element j < 8 is
 * the low nibble of qs[8s + j], j >= 8 the high nibble of qs[8s + j - 8]. */
void bp_dequant_NVFP4(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_NVFP4, dst += 64) {
        for (int s = 0; s < 4; s++) {
            const float d = bp_ue4m3_half(b[s]);
            for (int j = 0; j < 8; j++) {
                const uint8_t q = b[4 + 8 * s + j];
                dst[16 * s + j] = d * (float)fp4_doubled[q & 0x0F];
                dst[16 * s + j + 8] = d * (float)fp4_doubled[q >> 4];
            }
        }
    }
}

/* Q1_0, 18 bytes: d | qs[16]; bit j%8 of qs[j/8] set means +d, clear means -d. */
void bp_dequant_Q1_0(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q1_0, dst += 128) {
        const float d = load_f16(b);
        for (int j = 0; j < 128; j++) dst[j] = ((b[2 + j / 8] >> (j % 8)) & 1) ? d : -d;
    }
}

/* Q2_0, 18 bytes: d | qs[16]; element j is bits 2*(j%4) of qs[j/4]: 0,1,2,3 -> -1,0,1,2 times d.
 * (Consecutive elements share a byte here, unlike TQ2_0.) */
void bp_dequant_Q2_0(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q2_0, dst += 64) {
        const float d = load_f16(b);
        for (int j = 0; j < 64; j++) {
            const int q = (b[2 + j / 4] >> (2 * (j % 4))) & 3;
            dst[j] = (float)(q - 1) * d;
        }
    }
}

/* ---------------------------------------------------------------- quantization */

/* The ternary kinds: d = max |x|, each element rounded (half away from zero) to -1, 0 or 1
 * times d and stored as 0, 1, 2. x * (1/d) in float, as the gguf package does; 1/d can push
 * |x/d| a hair past 1, which still rounds to 1. NaN input stores 1 (zero), never an out-of-range
 * conversion. */
static void ternary_quants(const float *x, uint8_t *t, float *d_out) {
    float amax = 0;
    for (int e = 0; e < BP_QK_K; e++)
        if (fabsf(x[e]) > amax) amax = fabsf(x[e]);
    const float id = amax != 0 ? 1.0f / amax : 0.0f;
    for (int e = 0; e < BP_QK_K; e++) {
        const float r = roundf(x[e] * id);
        t[e] = (uint8_t)(r >= 1.0f ? 2 : r <= -1.0f ? 0 : 1);
    }
    *d_out = amax;
}

void bp_quantize_TQ1_0(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_TQ1_0, src += BP_QK_K) {
        uint8_t t[BP_QK_K];
        float d;
        ternary_quants(src, t, &d);
        /* Five trits per byte, first element most significant, then scaled to ceil(v*256/243)
         * so the dequantizer can read trits with a multiply and a shift. qh holds four trits
         * with a zero fifth (least significant) trit. */
        for (int m = 0; m < 32; m++) {
            unsigned v = 0;
            for (int k = 0; k < 5; k++) v = v * 3 + t[32 * k + m];
            b[m] = (uint8_t)((v * 256 + 242) / 243);
        }
        for (int m = 0; m < 16; m++) {
            unsigned v = 0;
            for (int k = 0; k < 5; k++) v = v * 3 + t[160 + 16 * k + m];
            b[32 + m] = (uint8_t)((v * 256 + 242) / 243);
        }
        for (int m = 0; m < 4; m++) {
            unsigned v = 0;
            for (int k = 0; k < 4; k++) v = v * 3 + t[240 + 4 * k + m];
            v *= 3;
            b[48 + m] = (uint8_t)((v * 256 + 242) / 243);
        }
        store_f16(b + 52, d);
    }
}

void bp_quantize_TQ2_0(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_TQ2_0, src += BP_QK_K) {
        uint8_t t[BP_QK_K];
        float d;
        ternary_quants(src, t, &d);
        for (int c = 0; c < 2; c++)
            for (int m = 0; m < 32; m++) {
                unsigned v = 0;
                for (int k = 0; k < 4; k++) v |= (unsigned)t[128 * c + 32 * k + m] << (2 * k);
                b[32 * c + m] = (uint8_t)v;
            }
        store_f16(b + 64, d);
    }
}

/* The E8M0 exponent for a block whose largest magnitude is amax: floor(log2(amax)) - 2 + 127,
 * so that amax / 2^(e-127) lands in [4, 8), i.e. near the top E2M1 value 6. log2f in float, as
 * the gguf package computes it (its rounding decides e when amax sits just under a power of 2).
 * A result outside 0..255 wraps to 8 bits, as the package's uint8 cast does; 0 for amax = 0. */
static uint8_t mxfp4_exponent(float amax) {
    if (!(amax > 0)) return 0;
    const float l = floorf(log2f(amax));
    if (!(l > -1000.0f && l < 1000.0f)) return 0; /* inf: no finite scale fits */
    return (uint8_t)((int)l - 2 + 127);
}

void bp_quantize_MXFP4(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_MXFP4, src += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++)
            if (fabsf(src[j]) > amax) amax = fabsf(src[j]);
        const uint8_t e = mxfp4_exponent(amax);
        const float d = e8m0_half(e);
        b[0] = e;
        /* Nearest representable value; on a tie the lower code wins (first minimum). */
        uint8_t code[32];
        for (int j = 0; j < 32; j++) {
            int best = 0;
            float best_err = fabsf(d * (float)fp4_doubled[0] - src[j]);
            for (int c = 1; c < 16; c++) {
                const float err = fabsf(d * (float)fp4_doubled[c] - src[j]);
                if (err < best_err) {
                    best = c;
                    best_err = err;
                }
            }
            code[j] = (uint8_t)best;
        }
        for (int j = 0; j < 16; j++) b[1 + j] = (uint8_t)(code[j] | (code[j + 16] << 4));
    }
}
