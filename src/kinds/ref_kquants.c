/* CPU reference kernels for the K-quants: Q2_K Q3_K Q4_K Q5_K Q6_K (weights) and Q8_K (the
 * activation kind their dot products use). Plain, obviously-correct code; speed lives elsewhere.
 *
 * Block layouts are facts of ggml's ggml-common.h (byte offsets are written out below).
 *
 * Dequantization is bit-exact with gguf.quants.dequantize (gguf 0.19). That package works in
 * float32 one NumPy operation at a time, so we do the same operations in the same order, each
 * rounded to float: the sub-block scale d*sc and min dmin*m first, then (d*sc)*q - (dmin*m).
 * A fused multiply-add would change the last bit, so contraction is turned off for this file
 * below (a gnu11 build with -march=native made GCC fuse the Q4_K/Q5_K dequantizers).
 * Q8_K is not in the gguf package; its dequantization is d*q as in ggml.
 *
 * Quantizers: the gguf package has none for these kinds, so they follow the algorithm of
 * ggml's reference quantizers (quantize_row_qN_K_ref: make_qkx2_quants for the kinds with a
 * min, make_q3_quants / make_qx_quants for the symmetric ones); tests judge them by a
 * round-trip error bound (tests/test_kinds_kq_roundtrip.c).
 */
#include <math.h>
#include <string.h>

#include "kinds/kinds_internal.h"

/* ---------------------------------------------------------------- shared helpers */

static float load_f16(const uint8_t *p) { return bp_f16_to_f32(bp_load_u16(p)); }
static void store_f16(uint8_t *p, float v) { bp_store_u16(p, bp_f32_to_f16(v)); }

static float load_f32(const uint8_t *p) {
    const uint32_t u = bp_load_u32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void store_f32(uint8_t *p, float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(u >> (8 * k));
}

/* Round to nearest, ties to even (what ggml's nearest_int does for |v| < 2^22). Values out of
 * that range (or NaN from non-finite input) are clamped first: converting an out-of-range
 * float to int is undefined behaviour, and every caller clamps the result to a few bits. */
static int nearest_int(float v) {
    if (!(v > -4194303.0f)) return v != v ? 0 : -4194303;
    if (v > 4194303.0f) return 4194303;
    return (int)rintf(v);
}

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The 6-bit scale and min of sub-block j of a Q4_K / Q5_K block (12 packed bytes): sub-blocks
 * 0-3 keep both in the low 6 bits of bytes j and j+4; sub-blocks 4-7 keep the low 4 bits in
 * byte j+4 (scale low nibble, min high nibble) and the top 2 bits in the spare top bits of
 * bytes j-4 (scale) and j (min). */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void k4_pack_scale_min(uint8_t *s, int j, int sc, int m) {
    if (j < 4) {
        s[j] = (uint8_t)((s[j] & 0xC0) | sc);
        s[j + 4] = (uint8_t)((s[j + 4] & 0xC0) | m);
    } else {
        s[j + 4] = (uint8_t)((sc & 0x0F) | ((m & 0x0F) << 4));
        s[j - 4] = (uint8_t)(s[j - 4] | ((sc >> 4) << 6));
        s[j] = (uint8_t)(s[j] | ((m >> 4) << 6));
    }
}

/* The signed 6-bit scale of group g (0..15) of a Q3_K block: low 4 bits in a nibble of bytes
 * 0-7 (groups 8-15 in the high nibbles), the top 2 bits in bytes 8-11, two bits per group. */
static int q3k_scale(const uint8_t *s, int g) {
    const int lo = g < 8 ? (s[g] & 0x0F) : (s[g - 8] >> 4);
    const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* ---------------------------------------------------------------- dequantization */

/* Q2_K, 84 bytes: scales[16] (low nibble scale, high nibble min) | qs[64] | d | dmin.
 * Element e sits in qs[(e/128)*32 + e%32] at bit 2*((e%128)/32); group e/16. */
void bp_dequant_Q2_K(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q2_K, dst += BP_QK_K) {
        const float d = load_f16(b + 80), dmin = load_f16(b + 82);
        for (int e = 0; e < BP_QK_K; e++) {
            const uint8_t sc = b[e / 16];
            const float dl = d * (float)(sc & 0x0F);
            const float ml = dmin * (float)(sc >> 4);
            const int q = (b[16 + (e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const float t = dl * (float)q;
            dst[e] = t - ml;
        }
    }
}

/* Q3_K, 110 bytes: hmask[32] | qs[64] | scales[12] | d. The low 2 bits of element e are laid
 * out as in Q2_K; its high bit is bit e/32 of hmask[e%32], and a CLEAR bit means "minus 4". */
void bp_dequant_Q3_K(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q3_K, dst += BP_QK_K) {
        const float d = load_f16(b + 108);
        for (int e = 0; e < BP_QK_K; e++) {
            const float dl = d * (float)q3k_scale(b + 96, e / 16);
            const int lo = (b[32 + (e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int hbit = (b[e % 32] >> (e / 32)) & 1;
            dst[e] = dl * (float)(lo - (hbit ? 0 : 4));
        }
    }
}

/* Q4_K, 144 bytes: d | dmin | scales[12] | qs[128]. Sub-block s = e/32 (32 elements) uses
 * qs[(s/2)*32 + e%32], low nibble for even s, high nibble for odd s. */
void bp_dequant_Q4_K(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q4_K, dst += BP_QK_K) {
        const float d = load_f16(b), dmin = load_f16(b + 2);
        for (int s = 0; s < 8; s++) {
            int sc, m;
            k4_scale_min(b + 4, s, &sc, &m);
            const float dl = d * (float)sc;
            const float ml = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                const int q = (b[16 + (s / 2) * 32 + l] >> (4 * (s % 2))) & 0x0F;
                const float t = dl * (float)q;
                dst[32 * s + l] = t - ml;
            }
        }
    }
}

/* Q5_K, 176 bytes: d | dmin | scales[12] | qh[32] | qs[128]. Low 4 bits as Q4_K; the fifth
 * bit of element 32*s + l is bit s of qh[l]. */
void bp_dequant_Q5_K(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q5_K, dst += BP_QK_K) {
        const float d = load_f16(b), dmin = load_f16(b + 2);
        for (int s = 0; s < 8; s++) {
            int sc, m;
            k4_scale_min(b + 4, s, &sc, &m);
            const float dl = d * (float)sc;
            const float ml = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                const int lo = (b[48 + (s / 2) * 32 + l] >> (4 * (s % 2))) & 0x0F;
                const int hi = (b[16 + l] >> s) & 1;
                const float t = dl * (float)(lo | (hi << 4));
                dst[32 * s + l] = t - ml;
            }
        }
    }
}

/* Q6_K, 210 bytes: ql[128] | qh[64] | scales[16] (int8) | d. In each 128-element half c, element
 * r takes its low nibble from ql[c*64 + r%64] (high nibble when r >= 64) and its top 2 bits from
 * qh[c*32 + r%32] at bit 2*(r/32); the value is that 6-bit number minus 32. */
void bp_dequant_Q6_K(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q6_K, dst += BP_QK_K) {
        const float d = load_f16(b + 208);
        for (int e = 0; e < BP_QK_K; e++) {
            const int c = e / 128, r = e % 128;
            const int lo = (b[c * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
            const int hi = (b[128 + c * 32 + r % 32] >> (2 * (r / 32))) & 3;
            const float dl = d * (float)(int8_t)b[192 + e / 16];
            dst[e] = dl * (float)((lo | (hi << 4)) - 32);
        }
    }
}

/* Q8_K, 292 bytes: d (float32) | qs[256] (int8) | bsums[16] (int16, unused here). */
void bp_dequant_Q8_K(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q8_K, dst += BP_QK_K) {
        const float d = load_f32(b);
        for (int e = 0; e < BP_QK_K; e++) dst[e] = d * (float)(int8_t)b[4 + e];
    }
}

/* ---------------------------------------------------------------- quantization helpers */

/* Fit x[i] ~= scale * L[i] - the_min with L in [0, nmax] and the_min >= 0, minimising the
 * weighted error (absolute when use_mad, else squared). Starts from the min/max grid, then
 * tries nstep+1 grid spacings around it, solving the weighted least-squares scale and min for
 * each rounding. The algorithm of ggml's make_qkx2_quants. Returns the scale. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *the_min, float rmin, float rdelta, int nstep, int use_mad) {
    uint8_t Laux[32];
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    /* The min is stored as a non-negative offset, so a row that is all positive starts at 0. */
    if (lo > 0) lo = 0;
    if (hi == lo) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -lo;
        return 0.0f;
    }
    float iscale = (float)nmax / (hi - lo);
    float scale = 1.0f / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_err += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)(l * l);
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * Laux[i] + this_min - x[i];
            diff = use_mad ? fabsf(diff) : diff * diff;
            err += w[i] * diff;
        }
        if (err < best_err) {
            memcpy(L, Laux, (size_t)n);
            best_err = err;
            scale = this_scale;
            lo = this_min;
        }
    }
    *the_min = -lo;
    return scale;
}

/* The element of largest magnitude, with its sign (the first one on ties), and that magnitude
 * in *amax: what every symmetric fit and the super-block scale step start from. */
static float largest_magnitude(const float *x, int n, float *amax) {
    float best = 0;
    *amax = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > *amax) {
            *amax = fabsf(x[i]);
            best = x[i];
        }
    }
    return best;
}

/* Symmetric fit x[i] ~= scale * (L[i] - nmax) with L - nmax in [-nmax, nmax-1], weighted by
 * x^2, refined by moving one quant at a time while the weighted fit improves (ggml's
 * make_q3_quants with do_rmse). Returns the scale (its sign follows the largest element). */
static float fit_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float vmax = largest_magnitude(x, n, &amax);
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = -(float)nmax / vmax;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)(l * l);
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * (float)(L[i] * L[i]);
            const int nl = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)(nl * nl);
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

/* Symmetric fit with weights x^2 trying 19 grid spacings around nmax (ggml's make_qx_quants with
 * rmse_type 1 and no importance weights). L[i] - nmax in [-nmax, nmax-1]. Returns the scale. */
static float fit_qx(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float vmax = largest_magnitude(x, n, &amax);
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -(float)nmax / vmax;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)(l * l);
    }
    float scale = suml2 > 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / vmax;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)(l * l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Pack 2-bit values L[0..255] the way Q2_K / Q3_K store them: byte (e/128)*32 + e%32, bit
 * 2*((e%128)/32). */
static void pack_2bit(uint8_t *qs, const uint8_t *L) {
    for (int c = 0; c < 2; c++)
        for (int l = 0; l < 32; l++)
            qs[c * 32 + l] = (uint8_t)(L[c * 128 + l] | (L[c * 128 + l + 32] << 2) |
                                       (L[c * 128 + l + 64] << 4) | (L[c * 128 + l + 96] << 6));
}

/* ---------------------------------------------------------------- quantization */

void bp_quantize_Q2_K(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q2_K, src += BP_QK_K) {
        uint8_t L[BP_QK_K];
        float scales[16], mins[16], w[16], max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(src[16 * j + l]);
            /* Mean-absolute error with |x| weights, as ggml's reference does at 2 bits. */
            scales[j] = fit_scale_min(16, 3, src + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        memset(b, 0, BP_BLOCK_BYTES_Q2_K);
        /* 4-bit scales and mins relative to the block's largest; d = max/15 so the largest is 15. */
        if (max_scale > 0) {
            const float is = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) b[j] = (uint8_t)clamp_int(nearest_int(is * scales[j]), 0, 15);
            store_f16(b + 80, max_scale / 15.0f);
        }
        if (max_min > 0) {
            const float im = 15.0f / max_min;
            for (int j = 0; j < 16; j++)
                b[j] = (uint8_t)(b[j] | (clamp_int(nearest_int(im * mins[j]), 0, 15) << 4));
            store_f16(b + 82, max_min / 15.0f);
        }
        /* Requantize against the scales as stored, so rounding of the scales is not added twice. */
        const float d = load_f16(b + 80), dmin = load_f16(b + 82);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)(b[j] & 0x0F);
            if (dl == 0) continue;
            const float ml = dmin * (float)(b[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)clamp_int(nearest_int((src[16 * j + l] + ml) / dl), 0, 3);
        }
        pack_2bit(b + 16, L);
    }
}

void bp_quantize_Q3_K(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q3_K, src += BP_QK_K) {
        int8_t L[BP_QK_K];
        float scales[16], amax;
        for (int j = 0; j < 16; j++) scales[j] = fit_q3(16, 4, src + 16 * j, L + 16 * j);
        const float max_scale = largest_magnitude(scales, 16, &amax);
        memset(b, 0, BP_BLOCK_BYTES_Q3_K);
        uint8_t *sc = b + 96;
        if (max_scale != 0) {
            /* Signed 6-bit scales; the largest maps to -32 (the end with more room). */
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                const int l = clamp_int(nearest_int(iscale * scales[j]), -32, 31) + 32;
                if (j < 8) sc[j] = (uint8_t)(l & 0x0F);
                else sc[j - 8] = (uint8_t)(sc[j - 8] | ((l & 0x0F) << 4));
                sc[8 + j % 4] = (uint8_t)(sc[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
            }
            store_f16(b + 108, 1.0f / iscale);
        }
        const float d = load_f16(b + 108);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)q3k_scale(sc, j);
            if (dl == 0) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(nearest_int(src[16 * j + l] / dl), -4, 3) + 4);
        }
        /* High bit of element e -> bit e/32 of hmask[e%32]; the low 2 bits packed as in Q2_K. */
        uint8_t lo[BP_QK_K];
        for (int e = 0; e < BP_QK_K; e++) {
            if (L[e] > 3) b[e % 32] = (uint8_t)(b[e % 32] | (1u << (e / 32)));
            lo[e] = (uint8_t)(L[e] & 3);
        }
        pack_2bit(b + 32, lo);
    }
}

/* Q4_K and Q5_K share everything but the quant width and the search constants. */
static void quantize_k4(const float *src, uint8_t *b, int nmax, float rmin, int nstep, uint8_t *L) {
    float scales[8], mins[8], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *x = src + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[l] * x[l];
        const float av_x = sqrtf(sum_x2 / 32);
        /* Weights favour large elements but keep small ones in play (ggml's choice). */
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[l]);
        scales[j] = fit_scale_min(32, nmax, x, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float is = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float im = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++)
        k4_pack_scale_min(b + 4, j, clamp_int(nearest_int(is * scales[j]), 0, 63),
                          clamp_int(nearest_int(im * mins[j]), 0, 63));
    store_f16(b, max_scale / 63.0f);
    store_f16(b + 2, max_min / 63.0f);
    const float d = load_f16(b), dmin = load_f16(b + 2);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale_min(b + 4, j, &sc, &m);
        const float dl = d * (float)sc;
        if (dl == 0) continue;
        const float ml = dmin * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clamp_int(nearest_int((src[32 * j + l] + ml) / dl), 0, nmax);
    }
}

void bp_quantize_Q4_K(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q4_K, src += BP_QK_K) {
        uint8_t L[BP_QK_K];
        memset(b, 0, BP_BLOCK_BYTES_Q4_K);
        quantize_k4(src, b, 15, -1.0f, 20, L);
        for (int s = 0; s < 8; s++)
            for (int l = 0; l < 32; l++)
                b[16 + (s / 2) * 32 + l] = (uint8_t)(b[16 + (s / 2) * 32 + l] | (L[32 * s + l] << (4 * (s % 2))));
    }
}

void bp_quantize_Q5_K(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q5_K, src += BP_QK_K) {
        uint8_t L[BP_QK_K];
        memset(b, 0, BP_BLOCK_BYTES_Q5_K);
        quantize_k4(src, b, 31, -0.5f, 15, L);
        for (int s = 0; s < 8; s++)
            for (int l = 0; l < 32; l++) {
                const int q = L[32 * s + l];
                b[48 + (s / 2) * 32 + l] = (uint8_t)(b[48 + (s / 2) * 32 + l] | ((q & 0x0F) << (4 * (s % 2))));
                b[16 + l] = (uint8_t)(b[16 + l] | ((q >> 4) << s));
            }
    }
}

void bp_quantize_Q6_K(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q6_K, src += BP_QK_K) {
        int8_t L[BP_QK_K];
        float scales[16], amax;
        for (int j = 0; j < 16; j++) scales[j] = fit_qx(16, 32, src + 16 * j, L + 16 * j);
        const float max_scale = largest_magnitude(scales, 16, &amax);
        memset(b, 0, BP_BLOCK_BYTES_Q6_K);
        if (amax < 1e-15f) continue; /* all-zero block: d = 0, every byte 0 */
        /* Signed 8-bit scales; the largest maps to -128. */
        const float iscale = -128.0f / max_scale;
        store_f16(b + 208, 1.0f / iscale);
        for (int j = 0; j < 16; j++) b[192 + j] = (uint8_t)(int8_t)clamp_int(nearest_int(iscale * scales[j]), -128, 127);
        const float d = load_f16(b + 208);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)(int8_t)b[192 + j];
            if (dl == 0) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(nearest_int(src[16 * j + l] / dl), -32, 31) + 32);
        }
        for (int e = 0; e < BP_QK_K; e++) {
            const int c = e / 128, r = e % 128, q = L[e];
            b[c * 64 + r % 64] = (uint8_t)(b[c * 64 + r % 64] | ((q & 0x0F) << (4 * (r / 64))));
            b[128 + c * 32 + r % 32] = (uint8_t)(b[128 + c * 32 + r % 32] | ((q >> 4) << (2 * (r / 32))));
        }
    }
}

/* Q8_K: d = max/-127 so the largest-magnitude element becomes exactly -127 (ggml uses 127, not
 * 128, so that |q| <= 127 and SIMD dot products never see -128), plus per-16 sums of the quants
 * that the K-quant dot products use to apply the mins. */
void bp_quantize_Q8_K(const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_Q8_K, src += BP_QK_K) {
        float amax;
        const float vmax = largest_magnitude(src, BP_QK_K, &amax);
        memset(b, 0, BP_BLOCK_BYTES_Q8_K); /* all-zero block: d = 0, quants and sums 0 */
        if (amax == 0) continue;
        const float iscale = -127.0f / vmax;
        for (int e = 0; e < BP_QK_K; e++)
            b[4 + e] = (uint8_t)(int8_t)clamp_int(nearest_int(iscale * src[e]), -128, 127);
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += (int8_t)b[4 + 16 * g + l];
            bp_store_u16(b + 260 + 2 * g, (uint16_t)(int16_t)sum);
        }
        store_f32(b, 1.0f / iscale);
    }
}
