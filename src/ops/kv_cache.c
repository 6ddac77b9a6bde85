/* The KV cache: per layer, K and V of n_kv_heads heads, stored per head token after token in a
 * kind chosen by the user and quantized on append (src/kinds quantizers, the same ones the
 * weight tests check against the gguf package). Every argument is checked before anything is
 * written, so a bad append leaves the cache as it was. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "kinds_internal.h"
#include "cpu/op_kern.h"
#include "ops/ops_internal.h"

static bp_status row_bytes_for(bp_kind k, int32_t head_dim, const char *which, size_t *out) {
    const bp_kind_traits *kt = bp_kind_traits_of(k);
    if (!kt || !bp_kv_kind_in_table(k))
        return bp_fail(BP_E_KIND,
                       "kv_cache: %s kind %s (id %d) is not a KV cache kind (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 "
                       "IQ4_NL)",
                       which, kt ? kt->info.name : "?", (int)k);
    if (!kt->quantize) return bp_fail(BP_E_KIND, "kv_cache: %s kind %s has no quantizer in this build", which, kt->info.name);
    if (head_dim % (int32_t)kt->info.block_elems)
        return bp_fail(BP_E_SHAPE, "kv_cache: %s head_dim %d is not a multiple of %s's block of %u", which,
                       (int)head_dim, kt->info.name, kt->info.block_elems);
    *out = (size_t)(head_dim / (int32_t)kt->info.block_elems) * kt->info.block_bytes;
    return BP_OK;
}

bp_status bp_kv_cache_plan_bytes(const bp_kv_cache_desc *d, size_t *bytes) {
    *bytes = 0;
    if (!d) return bp_fail(BP_E_INVAL, "bp_kv_cache_create: desc is NULL");
    if (d->n_layers <= 0 || d->n_kv_heads <= 0 || d->head_dim_k <= 0 || d->head_dim_v <= 0 || d->capacity <= 0)
        return bp_fail(BP_E_SHAPE,
                       "kv_cache: %d layers, %d kv heads, head dims %d/%d, capacity %lld: all must be positive",
                       (int)d->n_layers, (int)d->n_kv_heads, (int)d->head_dim_k, (int)d->head_dim_v,
                       (long long)d->capacity);
    size_t rk, rv;
    bp_status s = row_bytes_for(d->kind_k, d->head_dim_k, "K", &rk);
    if (!s) s = row_bytes_for(d->kind_v, d->head_dim_v, "V", &rv);
    if (s) return s;
    for (int l = 0; d->layer_capacity && l < d->n_layers; l++)
        if (d->layer_capacity[l] <= 0 || d->layer_capacity[l] > d->capacity)
            return bp_fail(BP_E_SHAPE, "kv_cache: layer %d capacity %lld must be in [1, %lld]", l,
                           (long long)d->layer_capacity[l], (long long)d->capacity);
    for (int l = 0; l < d->n_layers; l++) {
        const int64_t cap = d->layer_capacity ? d->layer_capacity[l] : d->capacity;
        size_t kb, vb;
        if (!bp_mul_size(rk * (size_t)d->n_kv_heads, (size_t)cap, &kb) ||
            !bp_mul_size(rv * (size_t)d->n_kv_heads, (size_t)cap, &vb) || !bp_add_size(*bytes, kb, bytes) ||
            !bp_add_size(*bytes, vb, bytes))
            return bp_fail(BP_E_SHAPE, "kv_cache: layer %d of %lld tokens overflows size_t", l, (long long)cap);
    }
    return BP_OK;
}

bp_status bp_kv_cache_create(const bp_kv_cache_desc *d, bp_kv_cache **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_kv_cache_create: out is NULL");
    *out = NULL;
    size_t total, rk, rv;
    bp_status s = bp_kv_cache_plan_bytes(d, &total); /* every check of d, and the layers' sizes fit */
    if (!s) s = row_bytes_for(d->kind_k, d->head_dim_k, "K", &rk);
    if (!s) s = row_bytes_for(d->kind_v, d->head_dim_v, "V", &rv);
    if (s) return s;
    bp_kv_cache *c = bp_calloc(1, sizeof *c);
    if (!c) return bp_fail(BP_E_NOMEM, "kv_cache: no memory");
    c->desc = *d;
    c->row_k = rk, c->row_v = rv;
    c->layers = bp_calloc((size_t)d->n_layers, sizeof *c->layers);
    if (!c->layers) goto nomem;
    if (d->layer_capacity) {
        c->layer_cap = bp_malloc((size_t)d->n_layers * sizeof *c->layer_cap);
        if (!c->layer_cap) goto nomem;
        memcpy(c->layer_cap, d->layer_capacity, (size_t)d->n_layers * sizeof *c->layer_cap);
    }
    c->desc.layer_capacity = c->layer_cap;
    for (int l = 0; l < d->n_layers; l++) {
        bp_kv_layer *L = &c->layers[l];
        L->cap = c->layer_cap ? c->layer_cap[l] : d->capacity;
        size_t kb, vb;
        if (!bp_mul_size(rk * (size_t)d->n_kv_heads, (size_t)L->cap, &kb) ||
            !bp_mul_size(rv * (size_t)d->n_kv_heads, (size_t)L->cap, &vb) || !bp_add_size(c->bytes, kb, &c->bytes) ||
            !bp_add_size(c->bytes, vb, &c->bytes)) {
            bp_kv_cache_free(c);
            return bp_fail(BP_E_SHAPE, "kv_cache: layer %d of %lld tokens overflows size_t", l, (long long)L->cap);
        }
        L->k = bp_aligned_alloc(64, kb);
        L->v = bp_aligned_alloc(64, vb);
        if (!L->k || !L->v) {
            bp_kv_cache_free(c);
            return bp_fail(BP_E_NOMEM, "kv_cache: no memory for layer %d (%zu + %zu bytes)", l, kb, vb);
        }
    }
    *out = c;
    return BP_OK;
nomem:
    bp_kv_cache_free(c);
    return bp_fail(BP_E_NOMEM, "kv_cache: no memory");
}

void bp_kv_cache_free(bp_kv_cache *c) {
    if (!c) return;
    for (int l = 0; c->layers && l < c->desc.n_layers; l++) {
        bp_free(c->layers[l].k);
        bp_free(c->layers[l].v);
    }
    bp_free(c->layers);
    bp_free(c->layer_cap);
    bp_free(c->cell_pos);
    bp_free(c);
}

const bp_kv_cache_desc *bp_kv_cache_info(const bp_kv_cache *c) { return c ? &c->desc : NULL; }

static bp_status check_layer(const bp_kv_cache *c, int layer, const char *what) {
    if (!c) return bp_fail(BP_E_INVAL, "%s: cache is NULL", what);
    if (layer < 0 || layer >= c->desc.n_layers)
        return bp_fail(BP_E_INVAL, "%s: layer %d out of range [0, %d)", what, layer, (int)c->desc.n_layers);
    return BP_OK;
}

/* n rows of head_dim floats (src_stride apart) into rows of row_bytes (dst_stride apart). F16,
 * the usual cache kind, converts with the ISA's F16C instructions: the scalar quantizer cost
 * 2.5% of a Gemma 3 270M prefill (perf); same rounding, tested bit for bit. */
static void store(bp_kind k, const float *src, size_t src_stride, int32_t head_dim, uint8_t *dst, size_t dst_stride,
                  int64_t n) {
    const bp_kind_traits *kt = bp_kind_traits_of(k);
    int64_t nb = head_dim / (int64_t)kt->info.block_elems;
    const bp_op_kern *kn = k == BP_KIND_F16 ? bp_op_kern_current() : NULL;
    for (int64_t j = 0; j < n; j++) {
        uint8_t *d = dst + (size_t)j * dst_stride;
        if (kn && ((uintptr_t)d & 1) == 0) kn->to_f16(src + (size_t)j * src_stride, (uint16_t *)(void *)d, head_dim);
        else kt->quantize(src + (size_t)j * src_stride, d, nb);
    }
}

bp_status bp_kv_cache_append(bp_kv_cache *c, int layer, const float *k, const float *v, int64_t n_tokens,
                             int64_t first_pos) {
    bp_status s = check_layer(c, layer, "kv_cache_append");
    if (s) return s;
    bp_kv_layer *L = &c->layers[layer];
    if (c->cell_pos)
        return bp_fail(BP_E_INVAL, "kv_cache_append: layer %d: the cache's cells hold positions with a hole "
                       "(a range removed): append with positions (bp_kv_cache_append_pos)", layer);
    if (n_tokens < 0 || first_pos < 0)
        return bp_fail(BP_E_SHAPE, "kv_cache_append: layer %d: %lld tokens at position %lld: both must be >= 0", layer,
                       (long long)n_tokens, (long long)first_pos);
    if (first_pos > L->len)
        return bp_fail(BP_E_SHAPE,
                       "kv_cache_append: layer %d holds %lld tokens: appending at position %lld would leave a gap",
                       layer, (long long)L->len, (long long)first_pos);
    if (n_tokens > L->cap - first_pos)
        return bp_fail(BP_E_SHAPE,
                       "kv_cache_append: layer %d: %lld tokens at position %lld go past its capacity of %lld tokens",
                       layer, (long long)n_tokens, (long long)first_pos, (long long)L->cap);
    if (n_tokens == 0) return BP_OK;
    if (!k || !v) return bp_fail(BP_E_INVAL, "kv_cache_append: layer %d: k or v is NULL", layer);
    const bp_kv_cache_desc *d = &c->desc;
    size_t ks = (size_t)d->n_kv_heads * (size_t)d->head_dim_k, vs = (size_t)d->n_kv_heads * (size_t)d->head_dim_v;
    for (int32_t h = 0; h < d->n_kv_heads; h++) {
        uint8_t *kd = L->k + ((size_t)h * (size_t)L->cap + (size_t)first_pos) * c->row_k;
        uint8_t *vd = L->v + ((size_t)h * (size_t)L->cap + (size_t)first_pos) * c->row_v;
        store(d->kind_k, k + (size_t)h * (size_t)d->head_dim_k, ks, d->head_dim_k, kd, c->row_k, n_tokens);
        store(d->kind_v, v + (size_t)h * (size_t)d->head_dim_v, vs, d->head_dim_v, vd, c->row_v, n_tokens);
    }
    L->len = first_pos + n_tokens;
    return BP_OK;
}

int64_t bp_kv_cache_length(const bp_kv_cache *c, int layer) {
    if (!c || layer < 0 || layer >= c->desc.n_layers) return -1;
    return c->layers[layer].len;
}

bp_status bp_kv_cache_truncate(bp_kv_cache *c, int layer, int64_t n_tokens) {
    if (!c) return bp_fail(BP_E_INVAL, "kv_cache_truncate: cache is NULL");
    if (n_tokens < 0) return bp_fail(BP_E_SHAPE, "kv_cache_truncate: cannot keep %lld tokens", (long long)n_tokens);
    if (layer == -1) {
        /* Every layer: the longer ones are cut, the shorter ones (a windowed layer's smaller
         * capacity, layers not yet run this step) are left as they are. */
        for (int l = 0; l < c->desc.n_layers; l++)
            if (c->layers[l].len > n_tokens) c->layers[l].len = n_tokens;
        bp_kv_cells_normalize(c);
        return BP_OK;
    }
    bp_status s = check_layer(c, layer, "kv_cache_truncate");
    if (s) return s;
    if (n_tokens > c->layers[layer].len)
        return bp_fail(BP_E_SHAPE, "kv_cache_truncate: layer %d holds %lld tokens, cannot keep %lld", layer,
                       (long long)c->layers[layer].len, (long long)n_tokens);
    c->layers[layer].len = n_tokens;
    bp_kv_cells_normalize(c);
    return BP_OK;
}

void bp_kv_cache_clear(bp_kv_cache *c) {
    for (int l = 0; c && l < c->desc.n_layers; l++) c->layers[l].len = 0;
    bp_kv_cells_normalize(c);
}

size_t bp_kv_cache_bytes(const bp_kv_cache *c) { return c ? c->bytes : 0; }

bp_status bp_kv_cache_view(const bp_kv_cache *c, int layer, bool values, bp_kv_view *out) {
    bp_status s = check_layer(c, layer, "kv_cache_view");
    if (s) return s;
    if (!out) return bp_fail(BP_E_INVAL, "kv_cache_view: out is NULL");
    const bp_kv_layer *L = &c->layers[layer];
    out->kind = values ? c->desc.kind_v : c->desc.kind_k;
    out->n_kv_heads = c->desc.n_kv_heads;
    out->head_dim = values ? c->desc.head_dim_v : c->desc.head_dim_k;
    out->length = L->len;
    out->row_bytes = values ? c->row_v : c->row_k;
    out->head_stride = out->row_bytes * (size_t)L->cap;
    out->data = values ? L->v : L->k;
    return BP_OK;
}

bp_status bp_kv_cache_read(const bp_kv_cache *c, int layer, bool values, int64_t first, int64_t n, float *out) {
    bp_kv_view v;
    bp_status s = bp_kv_cache_view(c, layer, values, &v);
    if (s) return s;
    if (first < 0 || n < 0 || n > v.length - first)
        return bp_fail(BP_E_SHAPE, "kv_cache_read: layer %d holds %lld tokens: [%lld, %lld) is out of range", layer,
                       (long long)v.length, (long long)first, (long long)(first + n));
    if (n && !out) return bp_fail(BP_E_INVAL, "kv_cache_read: out is NULL");
    const bp_kind_traits *kt = bp_kind_traits_of(v.kind);
    int64_t nb = v.head_dim / (int64_t)kt->info.block_elems;
    for (int64_t j = 0; j < n; j++)
        for (int32_t h = 0; h < v.n_kv_heads; h++)
            kt->dequant(v.data + (size_t)h * v.head_stride + (size_t)(first + j) * v.row_bytes,
                        out + ((size_t)j * (size_t)v.n_kv_heads + (size_t)h) * (size_t)v.head_dim, nb);
    return BP_OK;
}

/* ---- whole-sequence moves: copy a prefix, serialize (the model's seq_cp and state files) ---- */

static bool same_layout(const bp_kv_cache *a, const bp_kv_cache *b) {
    const bp_kv_cache_desc *x = &a->desc, *y = &b->desc;
    if (x->n_layers != y->n_layers || x->n_kv_heads != y->n_kv_heads || x->head_dim_k != y->head_dim_k ||
        x->head_dim_v != y->head_dim_v || x->kind_k != y->kind_k || x->kind_v != y->kind_v)
        return false;
    for (int l = 0; l < x->n_layers; l++)
        if (a->layers[l].cap != b->layers[l].cap) return false;
    return true;
}

/* Positions [0, n) of every layer: n must be held by every layer of src. */
static bp_status check_prefix(const bp_kv_cache *c, int64_t n, bool need_len, const char *what) {
    for (int l = 0; l < c->desc.n_layers; l++) {
        int64_t have = need_len ? c->layers[l].len : c->layers[l].cap;
        if (n < 0 || n > have)
            return bp_fail(BP_E_SHAPE, "%s: layer %d %s %lld tokens, %lld asked", what, l,
                           need_len ? "holds" : "has room for", (long long)have, (long long)n);
    }
    return BP_OK;
}

bp_status bp_kv_cache_copy_prefix(bp_kv_cache *dst, const bp_kv_cache *src, int64_t n) {
    if (!dst || !src) return bp_fail(BP_E_INVAL, "kv_cache_copy: cache is NULL");
    if (!same_layout(dst, src)) return bp_fail(BP_E_SHAPE, "kv_cache_copy: the two caches differ in layout or kind");
    bp_status s = check_prefix(src, n, true, "kv_cache_copy");
    if (!s && src->cell_pos) s = bp_kv_cache_set_positions(dst, n, src->cell_pos); /* before any row moves */
    if (s) return s;
    if (!src->cell_pos) {
        bp_free(dst->cell_pos);
        dst->cell_pos = NULL;
    }
    for (int l = 0; l < src->desc.n_layers; l++) {
        const bp_kv_layer *S = &src->layers[l];
        bp_kv_layer *D = &dst->layers[l];
        for (int32_t h = 0; h < src->desc.n_kv_heads; h++) {
            memcpy(D->k + (size_t)h * (size_t)D->cap * src->row_k, S->k + (size_t)h * (size_t)S->cap * src->row_k,
                   (size_t)n * src->row_k);
            memcpy(D->v + (size_t)h * (size_t)D->cap * src->row_v, S->v + (size_t)h * (size_t)S->cap * src->row_v,
                   (size_t)n * src->row_v);
        }
        D->len = n;
    }
    return BP_OK;
}

size_t bp_kv_cache_state_bytes(const bp_kv_cache *c, int64_t n) {
    if (!c || n <= 0) return 0;
    return (size_t)c->desc.n_layers * (size_t)c->desc.n_kv_heads * (size_t)n * (c->row_k + c->row_v);
}

/* Layout: per layer, per head, K rows [0, n) then V rows [0, n), in the cache's kinds. */
bp_status bp_kv_cache_state_write(const bp_kv_cache *c, int64_t n, uint8_t *dst) {
    if (!c || (!dst && n > 0)) return bp_fail(BP_E_INVAL, "kv_cache_state: NULL argument");
    bp_status s = check_prefix(c, n, true, "kv_cache_state");
    if (s) return s;
    for (int l = 0; l < c->desc.n_layers; l++)
        for (int32_t h = 0; h < c->desc.n_kv_heads; h++) {
            const bp_kv_layer *L = &c->layers[l];
            memcpy(dst, L->k + (size_t)h * (size_t)L->cap * c->row_k, (size_t)n * c->row_k);
            dst += (size_t)n * c->row_k;
            memcpy(dst, L->v + (size_t)h * (size_t)L->cap * c->row_v, (size_t)n * c->row_v);
            dst += (size_t)n * c->row_v;
        }
    return BP_OK;
}

bp_status bp_kv_cache_state_read(bp_kv_cache *c, int64_t n, const uint8_t *src) {
    if (!c || (!src && n > 0)) return bp_fail(BP_E_INVAL, "kv_cache_state: NULL argument");
    bp_status s = check_prefix(c, n, false, "kv_cache_state");
    if (s) return s;
    for (int l = 0; l < c->desc.n_layers; l++) {
        bp_kv_layer *L = &c->layers[l];
        for (int32_t h = 0; h < c->desc.n_kv_heads; h++) {
            memcpy(L->k + (size_t)h * (size_t)L->cap * c->row_k, src, (size_t)n * c->row_k);
            src += (size_t)n * c->row_k;
            memcpy(L->v + (size_t)h * (size_t)L->cap * c->row_v, src, (size_t)n * c->row_v);
            src += (size_t)n * c->row_v;
        }
        L->len = n;
    }
    return BP_OK;
}
