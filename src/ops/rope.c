/* Rotary position embedding, in place: NORMAL (adjacent pairs) and NEOX (half-split pairs),
 * partial rotation (n_rot < head_dim passes the rest through), frequency base and linear
 * scale, a position per token. theta_i = pos * freq_scale * base^(-2i / n_rot) for pair i (the
 * published RoPE formula, and ggml's), or YaRN's per-pair mix (bp_rope_pair_scale). The
 * reference computes angles in double. */
#include <math.h>

#include "core/error.h"
#include "ops/ops_internal.h"

/* ggml's correction dim: the pair index whose wavelength fits n_rot_turns turns in n_ctx_orig. */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot_turns, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot_turns * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(base));
}

double bp_rope_pair_scale(const bp_rope_desc *d, int i, double *mscale) {
    *mscale = 1.0;
    if (!(d->ext_factor > 0)) return d->freq_scale;
    /* the correction dims in float, floored and ceiled as ggml's (they pick whole pairs) */
    float lo = floorf(yarn_corr_dim(d->n_rot, d->n_ctx_orig, d->beta_fast, d->freq_base));
    float hi = ceilf(yarn_corr_dim(d->n_rot, d->n_ctx_orig, d->beta_slow, d->freq_base));
    lo = lo > 0 ? lo : 0, hi = hi < (float)(d->n_rot - 1) ? hi : (float)(d->n_rot - 1);
    double y = ((double)i - lo) / (hi - lo > 0.001f ? hi - lo : 0.001f);
    double ramp = (1.0 - (y < 0 ? 0 : y > 1 ? 1 : y)) * d->ext_factor;
    *mscale = (double)d->attn_factor * (1.0 + 0.1 * log(1.0 / (double)d->freq_scale));
    return (double)d->freq_scale * (1.0 - ramp) + ramp;
}

void bp_ref_rope(const bp_rope_desc *d, float *x, int64_t t, const int32_t *positions) {
    int64_t row = (int64_t)d->n_heads * d->head_dim;
    int half = d->n_rot / 2;
    for (int64_t j = 0; j < t; j++) {
        for (int h = 0; h < d->n_heads; h++) {
            float *v = x + j * row + (int64_t)h * d->head_dim;
            for (int i = 0; i < half; i++) {
                double ms, theta = (double)positions[j] * bp_rope_pair_scale(d, i, &ms) *
                                   pow((double)d->freq_base, -2.0 * i / (double)d->n_rot);
                double c = cos(theta) * ms, s = sin(theta) * ms;
                int a = d->layout == BP_ROPE_NEOX ? i : 2 * i, b = d->layout == BP_ROPE_NEOX ? i + half : 2 * i + 1;
                double x0 = v[a], x1 = v[b];
                v[a] = (float)(x0 * c - x1 * s);
                v[b] = (float)(x0 * s + x1 * c);
            }
        }
    }
}

/* With frequency factors (Llama 3.1+ files carry them as rope_freqs.weight, Phi-3 128k files as
 * rope_factors_long / _short): theta_i = pos * freq_scale * base^(-2i/n_rot) / factors[i], the
 * rotation of bp_ref_rope otherwise, cos and sin times mscale (ggml's rope without YaRN:
 * cosf(theta) * attn_factor). */
bp_status bp_rope_with_factors(const bp_rope_desc *d, const float *factors, float mscale, float *x, int64_t t,
                               const int32_t *positions) {
    if (!d || !factors || (t > 0 && (!x || !positions))) return bp_fail(BP_E_INVAL, "rope (factors): NULL argument");
    if (d->ext_factor > 0) return bp_fail(BP_E_UNSUPPORTED, "rope (factors): frequency factors with YaRN are not supported");
    if (d->n_rot <= 0 || d->n_rot % 2 || d->n_rot > d->head_dim || d->n_heads <= 0)
        return bp_fail(BP_E_SHAPE, "rope (factors): n_rot %d, head_dim %d, %d heads", (int)d->n_rot,
                       (int)d->head_dim, (int)d->n_heads);
    if (!isfinite(mscale) || mscale < 0)
        return bp_fail(BP_E_INVAL, "rope (factors): magnitude %g must be finite and >= 0", (double)mscale);
    const float ms = mscale == 0 ? 1.0f : mscale;
    const int64_t half = d->n_rot / 2, row = (int64_t)d->n_heads * d->head_dim;
    for (int64_t i = 0; i < t; i++) {
        for (int64_t k = 0; k < half; k++) {
            double theta = (double)positions[i] * d->freq_scale *
                           pow((double)d->freq_base, -2.0 * (double)k / (double)d->n_rot) / factors[k];
            float c = (float)cos(theta) * ms, s = (float)sin(theta) * ms;
            int64_t a = d->layout == BP_ROPE_NEOX ? k : 2 * k, b = d->layout == BP_ROPE_NEOX ? k + half : 2 * k + 1;
            for (int64_t h = 0; h < d->n_heads; h++) {
                float *v = x + i * row + h * d->head_dim;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            }
        }
    }
    return BP_OK;
}

bp_status bp_rope(const bp_rope_desc *d, float *x, int64_t t, const int32_t *positions) {
    if (!d) return bp_fail(BP_E_INVAL, "bp_rope: desc is NULL");
    if (d->n_heads <= 0 || d->head_dim <= 0 || t < 0)
        return bp_fail(BP_E_SHAPE, "rope: [%lld][%d heads x %d]: heads and head_dim must be positive", (long long)t,
                       (int)d->n_heads, (int)d->head_dim);
    if (d->n_rot <= 0 || d->n_rot % 2 || d->n_rot > d->head_dim)
        return bp_fail(BP_E_SHAPE, "rope: n_rot %d must be even, positive and at most head_dim %d", (int)d->n_rot,
                       (int)d->head_dim);
    if (d->layout != BP_ROPE_NORMAL && d->layout != BP_ROPE_NEOX)
        return bp_fail(BP_E_INVAL, "rope: unknown layout %d (BP_ROPE_NORMAL 0, BP_ROPE_NEOX 2)", (int)d->layout);
    if (!(d->freq_base > 0) || !isfinite(d->freq_base) || !(d->freq_scale > 0) || !isfinite(d->freq_scale))
        return bp_fail(BP_E_INVAL, "rope: freq_base %g and freq_scale %g must be finite and positive", d->freq_base,
                       d->freq_scale);
    if (d->ext_factor > 0 && (!isfinite(d->ext_factor) || !isfinite(d->attn_factor) || !isfinite(d->beta_fast) ||
                              !isfinite(d->beta_slow) || !(d->beta_fast > 0) || !(d->beta_slow > 0) || d->n_ctx_orig < 1))
        return bp_fail(BP_E_INVAL, "rope: YaRN ext_factor %g, attn_factor %g, beta_fast %g, beta_slow %g, n_ctx_orig %d: "
                       "need finite values, positive betas and context", d->ext_factor, d->attn_factor, d->beta_fast,
                       d->beta_slow, (int)d->n_ctx_orig);
    if (t == 0) return BP_OK;
    if (!x || !positions) return bp_fail(BP_E_INVAL, "rope: [%lld][%d x %d]: x or positions is NULL", (long long)t,
                                         (int)d->n_heads, (int)d->head_dim);
    bp_op_call c = {.op = BP_OP_ROPE, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
    c.u.rope.d = d, c.u.rope.x = x, c.u.rope.t = t, c.u.rope.positions = positions;
    c.shape = (bp_op_shape){1, (int64_t)d->n_heads * d->head_dim, t};
    return bp_op_run(&c);
}
