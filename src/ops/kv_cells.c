/* The KV cache's cells and their positions. Cell j of every layer holds position j until a range
 * is removed from the middle of a sequence (bp_context_seq_rm) or a batch jumps positions
 * forward: then the cache keeps a map, cell -> position (strictly increasing), the remaining
 * cells keep the positions their K was rotated at, and attention masks by those positions. The
 * map exists only while some cell is away from its index, so a cache without holes costs
 * nothing and a device (whose kernels mask by index) can hold it. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "ops/ops_internal.h"

/* Cells any layer holds (the map covers them). */
static int64_t n_cells(const bp_kv_cache *c) {
    int64_t n = 0;
    for (int l = 0; l < c->desc.n_layers; l++)
        if (c->layers[l].len > n) n = c->layers[l].len;
    return n;
}

/* The map, made (identity over the cells held) when missing. */
static bp_status ensure_map(bp_kv_cache *c) {
    if (c->cell_pos) return BP_OK;
    c->cell_pos = bp_malloc((size_t)c->desc.capacity * sizeof *c->cell_pos);
    if (!c->cell_pos)
        return bp_fail(BP_E_NOMEM, "kv_cache: no memory for the positions of %lld cells", (long long)c->desc.capacity);
    for (int64_t j = 0; j < c->desc.capacity; j++) c->cell_pos[j] = (int32_t)j;
    return BP_OK;
}

void bp_kv_cells_normalize(bp_kv_cache *c) {
    if (!c || !c->cell_pos) return;
    const int64_t n = n_cells(c);
    if (n == 0 || c->cell_pos[n - 1] == n - 1) { /* strictly increasing from >= 0: identity */
        bp_free(c->cell_pos);
        c->cell_pos = NULL;
    }
}

bool bp_kv_has_holes(const bp_kv_cache *c) { return c && c->cell_pos; }

int64_t bp_kv_cell_pos(const bp_kv_cache *c, int64_t j) { return c->cell_pos ? c->cell_pos[j] : j; }

int64_t bp_kv_next_pos(const bp_kv_cache *c, int64_t n) { return n <= 0 ? 0 : bp_kv_cell_pos(c, n - 1) + 1; }

int64_t bp_kv_cell_at(const bp_kv_cache *c, int64_t n, int64_t p) {
    if (!c->cell_pos) return p < 0 ? 0 : p > n ? n : p;
    int64_t lo = 0, hi = n; /* first cell in [0, n) at a position >= p */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (c->cell_pos[mid] < p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void bp_attn_cell_range(const bp_attn_desc *d, const bp_kv_cache *c, int64_t p, int64_t len, int64_t *j0, int64_t *j1) {
    if (!c->cell_pos) {
        bp_attn_key_range(d, p, len, j0, j1);
        return;
    }
    /* The rule over positions, then the cells at them: positions increase with the cell, so the
     * cells a query sees are one run [j0, j1). */
    int64_t p0, p1;
    bp_attn_key_range(d, p, INT64_MAX / 2, &p0, &p1);
    *j0 = bp_kv_cell_at(c, len, p0), *j1 = bp_kv_cell_at(c, len, p1);
    if (*j0 > *j1) *j0 = *j1;
}

bp_status bp_kv_cache_append_pos(bp_kv_cache *c, int layer, const float *k, const float *v, int64_t n,
                                 const int32_t *pos) {
    if (!c || layer < 0 || layer >= c->desc.n_layers || n < 0 || (n && !pos))
        return bp_fail(BP_E_INVAL, "kv_cache_append: bad cache, layer %d, %lld cells or positions NULL", layer,
                       (long long)n);
    const int64_t first = c->layers[layer].len;
    bool identity = !c->cell_pos;
    for (int64_t i = 0; i < n; i++) {
        const int64_t prev = i ? pos[i - 1] : first ? bp_kv_cell_pos(c, first - 1) : -1;
        if (pos[i] <= prev)
            return bp_fail(BP_E_SHAPE, "kv_cache_append: layer %d: position %d after position %lld: positions of a "
                           "sequence increase", layer, (int)pos[i], (long long)prev);
        identity = identity && pos[i] == first + i;
    }
    if (n > c->layers[layer].cap - first)
        return bp_fail(BP_E_SHAPE, "kv_cache_append: layer %d holds %lld cells: %lld more go past its capacity of %lld",
                       layer, (long long)first, (long long)n, (long long)c->layers[layer].cap);
    if (!identity) {
        bp_status s = ensure_map(c);
        if (s) return s;
    }
    /* The map is written before the rows: the plain append refuses a cache with holes. */
    int32_t *map = c->cell_pos;
    c->cell_pos = NULL;
    bp_status s = bp_kv_cache_append(c, layer, k, v, n, first);
    c->cell_pos = map;
    if (s) return s;
    for (int64_t i = 0; map && i < n; i++) map[first + i] = pos[i];
    return BP_OK;
}

bp_status bp_kv_cache_remove(bp_kv_cache *c, int64_t i0, int64_t i1) {
    if (!c) return bp_fail(BP_E_INVAL, "kv_cache_remove: cache is NULL");
    const int64_t n = n_cells(c);
    if (i0 < 0 || i1 < i0 || i1 > n)
        return bp_fail(BP_E_SHAPE, "kv_cache_remove: cells [%lld, %lld) of %lld held", (long long)i0, (long long)i1,
                       (long long)n);
    if (i0 == i1) return BP_OK;
    bp_status s = ensure_map(c); /* the later cells keep their positions */
    if (s) return s;
    for (int l = 0; l < c->desc.n_layers; l++) {
        bp_kv_layer *L = &c->layers[l];
        const int64_t a = i0 < L->len ? i0 : L->len, b = i1 < L->len ? i1 : L->len;
        for (int32_t h = 0; h < c->desc.n_kv_heads && b > a; h++) {
            uint8_t *k = L->k + (size_t)h * (size_t)L->cap * c->row_k, *v = L->v + (size_t)h * (size_t)L->cap * c->row_v;
            memmove(k + (size_t)a * c->row_k, k + (size_t)b * c->row_k, (size_t)(L->len - b) * c->row_k);
            memmove(v + (size_t)a * c->row_v, v + (size_t)b * c->row_v, (size_t)(L->len - b) * c->row_v);
        }
        L->len -= b - a;
    }
    memmove(c->cell_pos + i0, c->cell_pos + i1, (size_t)(n - i1) * sizeof *c->cell_pos);
    bp_kv_cells_normalize(c);
    return BP_OK;
}

bp_status bp_kv_cache_check_positions(const bp_kv_cache *c, int64_t n, const int32_t *pos, int64_t limit) {
    for (int64_t i = 0; i < n; i++)
        if (pos[i] < 0 || pos[i] >= limit || (i && pos[i] <= pos[i - 1]))
            return bp_fail(BP_E_FORMAT, "kv_cache: cell %lld at position %d: positions must increase and lie in [0, "
                           "%lld)", (long long)i, (int)pos[i], (long long)limit);
    return c ? BP_OK : bp_fail(BP_E_INVAL, "kv_cache: cache is NULL");
}

bp_status bp_kv_cache_set_positions(bp_kv_cache *c, int64_t n, const int32_t *pos) {
    bp_status s = bp_kv_cache_check_positions(c, n, pos, c ? c->desc.capacity : 0);
    if (s) return s;
    if (n == 0 || pos[n - 1] == n - 1) { /* identity */
        bp_free(c->cell_pos);
        c->cell_pos = NULL;
        return BP_OK;
    }
    if ((s = ensure_map(c))) return s;
    memcpy(c->cell_pos, pos, (size_t)n * sizeof *pos);
    return BP_OK;
}

void bp_kv_cache_positions(const bp_kv_cache *c, int64_t n, int32_t *out) {
    for (int64_t j = 0; j < n; j++) out[j] = (int32_t)bp_kv_cell_pos(c, j);
}
