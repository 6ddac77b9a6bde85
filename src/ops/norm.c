/* Norms: RMSNorm, LayerNorm, GroupNorm, each with optional gamma/beta and a fused SiLU. The
 * reference accumulates in double; the public entry validates and runs through the seam. */
#include <math.h>

#include "core/error.h"
#include "ops/ops_internal.h"

static const char *norm_name(bp_norm_type t) {
    return t == BP_NORM_RMS ? "rms_norm" : t == BP_NORM_LAYER ? "layer_norm" : t == BP_NORM_GROUP ? "group_norm" : "norm";
}

/* Normalize n values at x (stride 1) with mean/rstd, then per-element gamma/beta indexed by
 * i / per (so GroupNorm's per-channel affine reuses it). */
static void apply(const float *x, float *y, int64_t n, double mean, double rstd, const float *gamma,
                  const float *beta, int64_t per, int64_t g0, bool silu) {
    for (int64_t i = 0; i < n; i++) {
        double v = ((double)x[i] - mean) * rstd;
        int64_t c = g0 + i / per;
        if (gamma) v *= gamma[c];
        if (beta) v += beta[c];
        if (silu) v = v / (1.0 + exp(-v));
        y[i] = (float)v;
    }
}

void bp_ref_norm(const bp_norm_desc *d, const float *x, int64_t t, float *y) {
    int64_t n = d->n;
    for (int64_t r = 0; r < t; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        if (d->type == BP_NORM_GROUP) {
            int64_t per_group = n / d->groups, spatial = n / d->channels, ch_per_group = d->channels / d->groups;
            for (int64_t g = 0; g < d->groups; g++) {
                const float *xg = xr + g * per_group;
                double s = 0, ss = 0;
                for (int64_t i = 0; i < per_group; i++) s += xg[i];
                double mean = s / (double)per_group;
                for (int64_t i = 0; i < per_group; i++) ss += ((double)xg[i] - mean) * ((double)xg[i] - mean);
                double rstd = 1.0 / sqrt(ss / (double)per_group + (double)d->eps);
                apply(xg, yr + g * per_group, per_group, mean, rstd, d->gamma, d->beta, spatial, g * ch_per_group, d->silu);
            }
            continue;
        }
        double mean = 0, ss = 0;
        if (d->type == BP_NORM_LAYER) {
            for (int64_t i = 0; i < n; i++) mean += xr[i];
            mean /= (double)n;
        }
        for (int64_t i = 0; i < n; i++) ss += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        double rstd = 1.0 / sqrt(ss / (double)n + (double)d->eps);
        apply(xr, yr, n, mean, rstd, d->gamma, d->type == BP_NORM_LAYER ? d->beta : NULL, 1, 0, d->silu);
    }
}

bp_status bp_norm(const bp_norm_desc *d, const float *x, int64_t t, float *y) {
    if (!d) return bp_fail(BP_E_INVAL, "bp_norm: desc is NULL");
    const char *nm = norm_name(d->type);
    if (d->type != BP_NORM_RMS && d->type != BP_NORM_LAYER && d->type != BP_NORM_GROUP)
        return bp_fail(BP_E_INVAL, "bp_norm: unknown norm type %d", (int)d->type);
    if (t < 0 || d->n <= 0)
        return bp_fail(BP_E_SHAPE, "%s: [%lld][%lld]: rows must be >= 0 and n > 0", nm, (long long)t, (long long)d->n);
    if (!(d->eps >= 0) || !isfinite(d->eps)) return bp_fail(BP_E_INVAL, "%s: eps %g must be finite and >= 0", nm, d->eps);
    if (d->type == BP_NORM_RMS && d->beta)
        return bp_fail(BP_E_INVAL, "rms_norm: beta given, but RMSNorm has no shift (pass NULL)");
    if (d->type == BP_NORM_GROUP) {
        if (d->channels <= 0 || d->groups <= 0 || d->channels % d->groups || d->n % d->channels)
            return bp_fail(BP_E_SHAPE,
                           "group_norm: n %lld, %lld channels, %lld groups: groups must divide channels and "
                           "channels must divide n",
                           (long long)d->n, (long long)d->channels, (long long)d->groups);
    }
    if (t == 0) return BP_OK;
    if (!x || !y) return bp_fail(BP_E_INVAL, "%s: [%lld][%lld]: x or y is NULL", nm, (long long)t, (long long)d->n);
    if ((uint64_t)t > (uint64_t)INT64_MAX / (uint64_t)d->n)
        return bp_fail(BP_E_SHAPE, "%s: [%lld][%lld] overflows", nm, (long long)t, (long long)d->n);
    bp_op_call c = {.op = BP_OP_NORM, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
    c.u.norm.d = d, c.u.norm.x = x, c.u.norm.t = t, c.u.norm.y = y;
    c.shape = (bp_op_shape){1, d->n, t};
    return bp_op_run(&c);
}

bp_status bp_rms_norm(const float *x, int64_t t, int64_t n, const float *gamma, float eps, float *y) {
    bp_norm_desc d = {.type = BP_NORM_RMS, .n = n, .eps = eps, .gamma = gamma};
    return bp_norm(&d, x, t, y);
}

bp_status bp_layer_norm(const float *x, int64_t t, int64_t n, const float *gamma, const float *beta, float eps,
                        float *y) {
    bp_norm_desc d = {.type = BP_NORM_LAYER, .n = n, .eps = eps, .gamma = gamma, .beta = beta};
    return bp_norm(&d, x, t, y);
}
