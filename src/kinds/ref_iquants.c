/* CPU reference kernels of the importance-matrix ("IQ") weight kinds: dequantize for IQ2_XXS
 * IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M IQ4_NL IQ4_XS, quantize for IQ4_NL.
 *
 * Block layouts are the published ggml ones (ggml-common.h); the byte offsets are spelled out
 * at each kernel. Dequantization is bit-exact with gguf.quants.dequantize: every value is
 * computed with the same float32 operations in the same order as the package (e.g. IQ2 is
 * (d * (0.5 + s)) * 0.25, then * grid, then the sign), because a reordered product rounds
 * differently in the last bit and the bit-exact test would (rightly) fail.
 *
 * Plain loops on purpose: these are the reference every faster kernel is judged against.
 */
#include <math.h>

#include "kinds/iq_tables.h"
#include "kinds/kinds_internal.h"

/* Byte j of a packed grid row, as a float (IQ2/IQ3 grids hold unsigned magnitudes). */
static float grid_u8(uint64_t row, int j) { return (float)(uint8_t)(row >> (8 * j)); }
/* Byte j of an IQ1 grid row: int8 -1, 0 or +1. */
static float grid_i8(uint64_t row, int j) { return (float)(int8_t)(uint8_t)(row >> (8 * j)); }
/* Apply sign bit j of an 8-bit sign mask; multiplying by -1.0f is exact, so this equals the
 * package's multiply by a +-1 array. */
static float signed_by(float v, unsigned signs, int j) { return (signs >> j) & 1u ? -v : v; }

/* IQ2_XXS, 66 bytes: f16 d; then 8 groups of 8 bytes, one per 32 weights: bytes 0..3 are four
 * 8-bit indices into the 256-row grid (8 weights each), bytes 4..7 a u32 holding four 7-bit
 * sign-table indices (bits 0..27) and a 4-bit scale (bits 28..31). */
void bp_dequant_IQ2_XXS(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ2_XXS) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            const uint32_t aux = bp_load_u32(q + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                const uint64_t row = bp_iq2xxs_grid[q[l]];
                const unsigned signs = bp_ksigns_iq2xs[(aux >> (7 * l)) & 127u];
                for (int j = 0; j < 8; j++) *dst++ = signed_by(db * grid_u8(row, j), signs, j);
            }
        }
    }
}

/* IQ2_XS, 74 bytes: f16 d; 32 u16 at 2 (bits 0..8 index the 512-row grid, bits 9..15 the sign
 * table; 8 weights each); 8 scale bytes at 66, one 4-bit scale per 16 weights, low nibble
 * first. */
void bp_dequant_IQ2_XS(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ2_XS) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        const uint8_t *scales = b + 66;
        for (int g = 0; g < 32; g++) {
            const uint16_t q = bp_load_u16(b + 2 + 2 * g);
            const int s = g / 2;
            const unsigned nib = (scales[s / 2] >> (4 * (s % 2))) & 15u;
            const float db = d * (0.5f + (float)nib) * 0.25f;
            const uint64_t row = bp_iq2xs_grid[q & 511u];
            const unsigned signs = bp_ksigns_iq2xs[q >> 9];
            for (int j = 0; j < 8; j++) *dst++ = signed_by(db * grid_u8(row, j), signs, j);
        }
    }
}

/* IQ2_S, 82 bytes: f16 d; 32 low index bytes at 2; 32 sign bytes at 34 (one explicit sign bit
 * per weight); 8 qh bytes at 66 (2 high index bits per group of 8, lowest bits first -> a
 * 10-bit index into the 1024-row grid); 8 scale bytes at 74, 4 bits per 16 weights. */
void bp_dequant_IQ2_S(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ2_S) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
        for (int g = 0; g < 32; g++) {
            const int s = g / 2;
            const unsigned nib = (scales[s / 2] >> (4 * (s % 2))) & 15u;
            const float db = d * (0.5f + (float)nib) * 0.25f;
            const unsigned idx = qs[g] | (((qh[g / 4] >> (2 * (g % 4))) & 3u) << 8);
            const uint64_t row = bp_iq2s_grid[idx];
            for (int j = 0; j < 8; j++) *dst++ = signed_by(db * grid_u8(row, j), signs[g], j);
        }
    }
}

/* IQ3_XXS, 98 bytes: f16 d; 64 index bytes at 2 into the 256-row grid of 4 weights; 8 u32 at
 * 66, one per 32 weights: four 7-bit sign-table indices (one per 8 weights) and a 4-bit scale
 * in bits 28..31. */
void bp_dequant_IQ3_XXS(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ3_XXS) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = b + 2 + 8 * ib;
            const uint32_t aux = bp_load_u32(b + 66 + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++) {
                const unsigned signs = bp_ksigns_iq2xs[(aux >> (7 * l)) & 127u];
                const uint32_t lo = bp_iq3xxs_grid[q[2 * l]], hi = bp_iq3xxs_grid[q[2 * l + 1]];
                for (int j = 0; j < 4; j++) *dst++ = signed_by(db * grid_u8(lo, j), signs, j);
                for (int j = 0; j < 4; j++) *dst++ = signed_by(db * grid_u8(hi, j), signs, j + 4);
            }
        }
    }
}

/* IQ3_S, 110 bytes: f16 d; 64 low index bytes at 2; 8 qh bytes at 66 (bit k = 9th index bit of
 * index k, 512-row grid of 4 weights); 32 sign bytes at 74, one bit per weight; 4 scale bytes
 * at 106, 4 bits per 32 weights, used as d * (1 + 2 s). */
void bp_dequant_IQ3_S(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ3_S) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int k = 0; k < 256; k++) {
            const int g = k / 4, s = k / 32;
            const unsigned nib = (scales[s / 2] >> (4 * (s % 2))) & 15u;
            const float db = d * (float)(1u + 2u * nib);
            const unsigned idx = qs[g] | (((qh[g / 8] >> (g % 8)) & 1u) << 8);
            dst[k] = signed_by(db * grid_u8(bp_iq3s_grid[idx], k % 4), signs[k / 8], k % 8);
        }
        dst += 256;
    }
}

/* IQ1_S, 50 bytes: f16 d; 32 low index bytes at 2; 8 u16 at 34, one per 32 weights: four 3-bit
 * high index parts (bits 0..11, 11-bit index into the 2048-row grid of 8 weights), a 3-bit
 * scale (bits 12..14, used as 2 s + 1) and the sign of the delta shift (bit 15). */
void bp_dequant_IQ1_S(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ1_S) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t qh = bp_load_u16(b + 34 + 2 * ib);
            const float dl = d * (float)(2u * ((qh >> 12) & 7u) + 1u);
            const float delta = (qh & 0x8000u) ? -BP_IQ1S_DELTA : BP_IQ1S_DELTA;
            for (int l = 0; l < 4; l++) {
                const unsigned idx = b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8);
                const uint64_t row = bp_iq1s_grid[idx];
                for (int j = 0; j < 8; j++) *dst++ = dl * (grid_i8(row, j) + delta);
            }
        }
    }
}

/* IQ1_M, 56 bytes, no whole f16 field: 32 low index bytes at 0; 16 qh bytes at 32, one nibble
 * per group of 8 weights (low nibble first: 3 high index bits, then the delta sign); 4 u16 at
 * 48 holding sixteen 3-bit scales (bits 0..11 of each, one per 16 weights, used as 2 s + 1)
 * and, in their top nibbles, the four nibbles of the f16 super-scale d (u16 0 holds the lowest). */
void bp_dequant_IQ1_M(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ1_M) {
        uint16_t sc[4];
        for (int k = 0; k < 4; k++) sc[k] = bp_load_u16(b + 48 + 2 * k);
        const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0u) |
                                          ((sc[2] >> 4) & 0x0f00u) | (sc[3] & 0xf000u));
        const float d = bp_f16_to_f32(dbits);
        for (int g = 0; g < 32; g++) {
            const int s = g / 2;
            const unsigned ls = (sc[s / 4] >> (3 * (s % 4))) & 7u;
            const float dl = d * (float)(2u * ls + 1u);
            const unsigned nib = (b[32 + g / 2] >> (4 * (g % 2))) & 15u;
            const float delta = (nib & 8u) ? -BP_IQ1M_DELTA : BP_IQ1M_DELTA;
            const uint64_t row = bp_iq1s_grid[b[g] | ((nib & 7u) << 8)];
            for (int j = 0; j < 8; j++) *dst++ = dl * (grid_i8(row, j) + delta);
        }
    }
}

/* IQ4_NL, 18 bytes: f16 d; 16 bytes at 2: weight j in the low nibble of byte j, weight j+16 in
 * the high nibble; each nibble indexes the 16 non-uniform values kvalues_iq4nl. */
void bp_dequant_IQ4_NL(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ4_NL) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)bp_kvalues_iq4nl[b[2 + j] & 15];
            dst[j + 16] = d * (float)bp_kvalues_iq4nl[b[2 + j] >> 4];
        }
        dst += 32;
    }
}

/* IQ4_XS, 136 bytes: f16 d; u16 scales_h at 2 (2 high bits per 32 weights); 4 scales_l bytes at
 * 4 (4 low bits per 32 weights, low nibble first); 128 bytes at 8, laid out per 32 weights as
 * IQ4_NL's 16 bytes. The 6-bit scale is signed with bias 32. */
void bp_dequant_IQ4_XS(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ4_XS) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        const uint16_t scales_h = bp_load_u16(b + 2);
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (int)(((b[4 + ib / 2] >> (4 * (ib % 2))) & 15u) |
                                 (((scales_h >> (2 * ib)) & 3u) << 4));
            const float dl = d * (float)(ls - 32);
            const uint8_t *q = b + 8 + 16 * ib;
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * (float)bp_kvalues_iq4nl[q[j] & 15];
                dst[j + 16] = dl * (float)bp_kvalues_iq4nl[q[j] >> 4];
            }
            dst += 32;
        }
    }
}

/* ---- IQ4_NL quantization --------------------------------------------------------------
 *
 * The gguf package has no IQ4_NL quantizer, so ours is judged by its round trip (see
 * tests/test_kinds_iq_tables.c). Method, chosen to be easy to verify rather than fast:
 * candidate scales map the block's largest-magnitude weight to one of the grid ends (-127 or
 * +113) shifted by -7..7; each candidate is tried as is and after a least-squares refit of the
 * scale to the chosen levels; every trial rounds the scale to f16 FIRST and then picks each
 * weight's nearest level under that stored scale, so the error compared is exactly the error
 * dequantization will show. The trial with the smallest squared error wins. (Choosing levels
 * before rounding the scale, as a float-scale search would, lets the stored block decode to
 * something other than what was optimised.)
 */

/* f16 scale as stored, saturated to the largest finite half so a huge block cannot store inf. */
static uint16_t iq4nl_scale_bits(float d) {
    if (!(fabsf(d) <= 65504.0f)) d = d < 0 ? -65504.0f : 65504.0f; /* also maps NaN to +max */
    return bp_f32_to_f16(d);
}

/* Nearest level for each weight under scale d; returns the squared error. Ties keep the lower
 * index, so the result is deterministic. The levels d * kvalues[k] are monotone in k (either
 * sign of d; float rounding is monotone), so |x - level| falls and then rises along k: the
 * scan may stop at the first rise without missing the minimum. */
static double iq4nl_assign(const float *x, float d, uint8_t *idx) {
    double err = 0;
    for (int j = 0; j < 32; j++) {
        int best = 0;
        float best_e = fabsf(x[j] - d * (float)bp_kvalues_iq4nl[0]);
        for (int k = 1; k < 16; k++) {
            const float e = fabsf(x[j] - d * (float)bp_kvalues_iq4nl[k]);
            if (e > best_e) break;
            if (e < best_e) best_e = e, best = k;
        }
        idx[j] = (uint8_t)best;
        err += (double)best_e * best_e;
    }
    return err;
}

static void iq4nl_quantize_block(const float *x, uint8_t *out) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    }
    /* Start from the all-zero block: d = 0 with level +1 (not -127, which would decode to -0). */
    uint16_t best_bits = 0;
    uint8_t best_idx[32], idx[32];
    double best_err = 0;
    for (int j = 0; j < 32; j++) best_idx[j] = 8, best_err += (double)x[j] * x[j];
    if (amax > 0) {
        const int ends[2] = {bp_kvalues_iq4nl[0], bp_kvalues_iq4nl[15]};
        for (int e = 0; e < 2; e++) {
            for (int t = -7; t <= 7; t++) {
                uint16_t bits = iq4nl_scale_bits(max / (float)(ends[e] + t));
                for (int refit = 0; refit < 2; refit++) {
                    const double err = iq4nl_assign(x, bp_f16_to_f32(bits), idx);
                    if (err < best_err) {
                        best_err = err, best_bits = bits;
                        for (int j = 0; j < 32; j++) best_idx[j] = idx[j];
                    }
                    if (refit) break;
                    double sqx = 0, sqq = 0; /* least-squares scale for these levels */
                    for (int j = 0; j < 32; j++) {
                        const double q = bp_kvalues_iq4nl[idx[j]];
                        sqx += q * x[j], sqq += q * q;
                    }
                    bits = iq4nl_scale_bits((float)(sqx / sqq)); /* sqq >= 32: never zero */
                }
            }
        }
    }
    bp_store_u16(out, best_bits);
    for (int j = 0; j < 16; j++) out[2 + j] = (uint8_t)(best_idx[j] | (best_idx[j + 16] << 4));
}

void bp_quantize_IQ4_NL(const float *src, void *dst, int64_t nblocks) {
    uint8_t *out = dst;
    for (int64_t i = 0; i < nblocks; i++) iq4nl_quantize_block(src + 32 * i, out + 18 * i);
}
