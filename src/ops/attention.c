/* Attention: validation of every argument against the cache, the mask rule, and the entry
 * point that runs through the seam (claims keyed on the cache's K and V kinds). */
#include <math.h>

#include "core/error.h"
#include "kinds_internal.h"
#include "ops/ops_internal.h"

void bp_attn_key_range(const bp_attn_desc *d, int64_t p, int64_t len, int64_t *j0, int64_t *j1) {
    int64_t lo = 0, hi = len;
    if (d->causal && p + 1 < hi) hi = p + 1;
    if (d->window > 0) {
        if (p - d->window + 1 > lo) lo = p - d->window + 1;
        if (!d->causal && p + d->window < hi) hi = p + d->window;
    }
    if (lo > hi) lo = hi;
    *j0 = lo, *j1 = hi;
}

bp_status bp_attention(const bp_attn_desc *d, const float *q, int64_t t, const int32_t *positions,
                       const bp_kv_cache *cache, int layer, float *out) {
    if (!d) return bp_fail(BP_E_INVAL, "attention: desc is NULL");
    if (!cache) return bp_fail(BP_E_INVAL, "attention: cache is NULL");
    const bp_kv_cache_desc *cd = &cache->desc;
    if (layer < 0 || layer >= cd->n_layers)
        return bp_fail(BP_E_INVAL, "attention: layer %d out of range [0, %d)", layer, (int)cd->n_layers);
    if (d->n_heads <= 0 || d->n_kv_heads <= 0 || d->n_heads % d->n_kv_heads)
        return bp_fail(BP_E_SHAPE, "attention: %d heads, %d kv heads: kv heads must be positive and divide heads",
                       (int)d->n_heads, (int)d->n_kv_heads);
    if (d->n_kv_heads != cd->n_kv_heads)
        return bp_fail(BP_E_SHAPE, "attention: %d kv heads given, but the cache holds %d", (int)d->n_kv_heads,
                       (int)cd->n_kv_heads);
    if (!isfinite(d->scale)) return bp_fail(BP_E_INVAL, "attention: scale %g is not finite", d->scale);
    if (!(d->softcap >= 0) || !isfinite(d->softcap))
        return bp_fail(BP_E_INVAL, "attention: softcap %g must be finite and >= 0 (0: none)", d->softcap);
    if (d->window < 0) return bp_fail(BP_E_INVAL, "attention: window %lld must be >= 0 (0: none)", (long long)d->window);
    for (int32_t h = 0; d->sinks && h < d->n_heads; h++)
        if (!isfinite(d->sinks[h])) return bp_fail(BP_E_INVAL, "attention: sink of head %d is %g, not finite", (int)h, d->sinks[h]);
    if (t < 0) return bp_fail(BP_E_SHAPE, "attention: negative query count %lld", (long long)t);
    if (t == 0) return BP_OK;
    if (!q || !out || !positions)
        return bp_fail(BP_E_INVAL, "attention: [%lld queries x %d heads x %d]: q, positions or out is NULL",
                       (long long)t, (int)d->n_heads, (int)cd->head_dim_k);
    int64_t len = cache->layers[layer].len, end = bp_kv_next_pos(cache, len);
    for (int64_t i = 0; i < t; i++)
        if (positions[i] < 0 || positions[i] >= end)
            return bp_fail(BP_E_SHAPE,
                           "attention: query %lld at position %d, but layer %d holds positions [0, %lld)%s: append "
                           "its key first",
                           (long long)i, (int)positions[i], layer, (long long)end,
                           bp_kv_has_holes(cache) ? " (with a hole)" : "");
    bp_op_call c = {.op = BP_OP_ATTENTION, .kind = cd->kind_k, .kind2 = cd->kind_v};
    c.u.attn.d = d, c.u.attn.q = q, c.u.attn.t = t, c.u.attn.positions = positions;
    c.u.attn.cache = cache, c.u.attn.layer = layer, c.u.attn.out = out;
    /* Shape: heads x (head dim x the keys the queries see, on average), t queries. */
    double keys = 0;
    for (int64_t i = 0; i < t; i++) {
        int64_t j0, j1;
        bp_attn_cell_range(d, cache, positions[i], len, &j0, &j1);
        keys += (double)(j1 - j0);
    }
    c.shape = (bp_op_shape){d->n_heads, (int64_t)(cd->head_dim_k * (keys / (double)t)) + 1, t};
    /* Cells away from their positions: the backends' kernels mask by cell index, the CPU's by
     * each cell's position. */
    return bp_kv_has_holes(cache) ? bp_op_run_on(&c, "cpu") : bp_op_run(&c);
}
