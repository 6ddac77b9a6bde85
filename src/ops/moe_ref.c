/* MoE, the float64 reference: the oracle for the CPU path and every backend (beside the NumPy
 * vectors of tests/vectors/conv_moe). For each expert in turn, its three matrices dequantized
 * whole by the reference dequantizer, then every (token, route) naming it computed in double:
 * g = gate x, u = up x, acc[token] += weight * down (silu(g) * u) -- or, a gpt-oss layer, with
 * its biases and clamped SwiGLU (bp_moe_set_act). y += acc at the end. Extra
 * memory: 3 * h * inter floats + (t * h + inter) doubles. */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "ops/moe_internal.h"

static bp_status dequant_all(const bp_weight *w, float *out) {
    for (int64_t r = 0; r < w->rows; r++) {
        bp_status s = bp_dequantize(w->kind, w->data + (size_t)r * w->row_bytes, w->row_bytes, out + r * w->cols, w->cols);
        if (s) return s;
    }
    return BP_OK;
}

static double dot(const float *w, const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)w[i] * (double)x[i];
    return s;
}

bp_status bp_moe_ref(const bp_moe *m, const float *x, int64_t t, int64_t top_k, const int32_t *ids,
                     const float *route_w, float *y) {
    int64_t h = m->h, inter = m->inter;
    size_t mat = (size_t)(h * inter);
    float *wg = bp_malloc(sizeof(float) * 3 * mat);
    double *acc = bp_calloc((size_t)(t * h) + (size_t)inter, sizeof(double));
    if (!wg || !acc) {
        bp_free(wg);
        bp_free(acc);
        return bp_fail(BP_E_NOMEM, "MoE reference: no memory for one expert (3 x %lld x %lld floats)", (long long)h,
                       (long long)inter);
    }
    float *wu = wg + mat, *wd = wu + mat;
    double *act = acc + t * h;
    bp_status s = BP_OK;
    for (int64_t e = 0; e < m->n_expert && !s; e++) {
        bool loaded = false;
        for (int64_t i = 0; i < t && !s; i++)
            for (int64_t j = 0; j < top_k && !s; j++) {
                if (ids[i * top_k + j] != e) continue;
                if (!loaded) {
                    s = dequant_all(m->gate[e], wg);
                    if (!s) s = dequant_all(m->up[e], wu);
                    if (!s) s = dequant_all(m->down[e], wd);
                    if (s) break;
                    loaded = true;
                }
                const float *xi = x + i * h;
                for (int64_t r = 0; r < inter; r++) {
                    double g = dot(wg + r * h, xi, h), u = dot(wu + r * h, xi, h);
                    if (m->b_gate) g += m->b_gate[e * inter + r];
                    if (m->b_up) u += m->b_up[e * inter + r];
                    if (m->act == BP_MOE_ACT_SWIGLU_OAI) {
                        const double lim = m->limit;
                        g = g < lim ? g : lim;
                        u = u < -lim ? -lim : u > lim ? lim : u;
                        act[r] = g / (1.0 + exp(-(double)m->alpha * g)) * (u + 1.0);
                    } else
                        act[r] = g / (1.0 + exp(-g)) * u;
                }
                double rw = route_w[i * top_k + j];
                for (int64_t r = 0; r < h; r++) {
                    const float *dr = wd + r * inter;
                    double d = m->b_down ? m->b_down[e * h + r] : 0.0;
                    for (int64_t c = 0; c < inter; c++) d += (double)dr[c] * act[c];
                    acc[i * h + r] += rw * d;
                }
            }
    }
    if (!s)
        for (int64_t i = 0; i < t * h; i++) y[i] = (float)((double)y[i] + acc[i]);
    bp_free(wg);
    bp_free(acc);
    return s;
}
