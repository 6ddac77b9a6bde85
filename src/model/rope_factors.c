/* RoPE with frequency factors: theta_i = pos * freq_scale * base^(-2i/n_rot) / factors[i], the
 * rotation of bp_rope otherwise (angles in double, as the op computes them). Llama 3.1+ files
 * carry the factors as rope_freqs.weight; only they take this path. */
#include <math.h>

#include "core/error.h"
#include "model/rope_factors.h"

bp_status bp_model_rope_factors(const bp_rope_desc *d, const float *factors, float *x, int64_t t,
                                const int32_t *positions) {
    if (!d || !factors || (t > 0 && (!x || !positions)))
        return bp_fail(BP_E_INVAL, "rope (factors): NULL argument");
    if (d->n_rot <= 0 || d->n_rot % 2 || d->n_rot > d->head_dim || d->n_heads <= 0)
        return bp_fail(BP_E_SHAPE, "rope (factors): n_rot %d, head_dim %d, %d heads", (int)d->n_rot,
                       (int)d->head_dim, (int)d->n_heads);
    const int64_t half = d->n_rot / 2, row = (int64_t)d->n_heads * d->head_dim;
    for (int64_t i = 0; i < t; i++) {
        for (int64_t k = 0; k < half; k++) {
            double theta = (double)positions[i] * d->freq_scale *
                           pow((double)d->freq_base, -2.0 * (double)k / (double)d->n_rot) / factors[k];
            float c = (float)cos(theta), s = (float)sin(theta);
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
