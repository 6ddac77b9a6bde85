/* The attention reference: one query head at a time, keys in order, online softmax (running
 * max, rescaled sum and accumulator) in double, K and V rows dequantized with the kind's
 * reference dequantizer. A sink (desc.sinks) is a first key of score sinks[h] and no value: the
 * running max starts at it with sum 1. The oracle for every fast path and backend; its memory is one K row,
 * one V row and one accumulator, whatever the context. */
#include <math.h>

#include "core/alloc.h"
#include "core/error.h"
#include "kinds_internal.h"
#include "ops/ops_internal.h"

bp_status bp_ref_attention(const bp_attn_desc *d, const float *q, int64_t t, const int32_t *positions,
                           const bp_kv_cache *cache, int layer, float *out) {
    const bp_kv_cache_desc *cd = &cache->desc;
    const bp_kv_layer *L = &cache->layers[layer];
    const bp_kind_traits *kk = bp_kind_traits_of(cd->kind_k), *kv = bp_kind_traits_of(cd->kind_v);
    int dk = cd->head_dim_k, dv = cd->head_dim_v, group = d->n_heads / d->n_kv_heads;
    int64_t nbk = dk / (int64_t)kk->info.block_elems, nbv = dv / (int64_t)kv->info.block_elems;
    float *krow = bp_malloc(sizeof(float) * (size_t)(dk + dv));
    double *acc = bp_malloc(sizeof(double) * (size_t)dv);
    if (!krow || !acc) {
        bp_free(krow), bp_free(acc);
        return bp_fail(BP_E_NOMEM, "attention reference: no memory for %d + %d floats", dk, dv);
    }
    float *vrow = krow + dk;
    for (int64_t i = 0; i < t; i++) {
        int64_t j0, j1;
        bp_attn_cell_range(d, cache, positions[i], L->len, &j0, &j1);
        for (int h = 0; h < d->n_heads; h++) {
            int g = h / group;
            const float *qh = q + ((size_t)i * (size_t)d->n_heads + (size_t)h) * (size_t)dk;
            const uint8_t *kbase = L->k + (size_t)g * (size_t)L->cap * cache->row_k;
            const uint8_t *vbase = L->v + (size_t)g * (size_t)L->cap * cache->row_v;
            double m = d->sinks ? d->sinks[h] : -INFINITY, l = d->sinks ? 1.0 : 0.0;
            for (int e = 0; e < dv; e++) acc[e] = 0;
            for (int64_t j = j0; j < j1; j++) {
                kk->dequant(kbase + (size_t)j * cache->row_k, krow, nbk);
                double s = 0;
                for (int e = 0; e < dk; e++) s += (double)qh[e] * krow[e];
                s *= d->scale;
                if (d->softcap > 0) s = d->softcap * tanh(s / d->softcap);
                if (s > m) {
                    double corr = exp(m - s); /* m = -inf the first time: corr = 0 */
                    l *= corr;
                    for (int e = 0; e < dv; e++) acc[e] *= corr;
                    m = s;
                }
                double w = exp(s - m);
                l += w;
                kv->dequant(vbase + (size_t)j * cache->row_v, vrow, nbv);
                for (int e = 0; e < dv; e++) acc[e] += w * vrow[e];
            }
            float *o = out + ((size_t)i * (size_t)d->n_heads + (size_t)h) * (size_t)dv;
            for (int e = 0; e < dv; e++) o[e] = l > 0 ? (float)(acc[e] / l) : 0.0f;
        }
    }
    bp_free(krow);
    bp_free(acc);
    return BP_OK;
}
