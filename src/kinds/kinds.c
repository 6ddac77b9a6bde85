/* The kind table and the reference operations that are the same for every kind. */
#include "core/alloc.h"
#include "kinds/kinds_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define BP_QUANT_FN_1(NAME) bp_quantize_##NAME
#define BP_QUANT_FN_0(NAME) NULL

static const bp_kind_traits kind_table[] = {
#define BP_KIND(NAME, ID, BE, BB, ROLE, Q)                                                    \
    {{BP_KIND_##NAME, ID, #NAME, BE, BB, BP_ROLE_##ROLE, Q, 8.0 * (BB) / (BE)},               \
     bp_dequant_##NAME, BP_QUANT_FN_##Q(NAME)},
#include "kinds.def"
#undef BP_KIND
};

enum { KIND_TABLE_SIZE = (int)(sizeof kind_table / sizeof kind_table[0]) };

/* GGUF ids are small and dense enough for a direct index; ids past this bound are unknown. */
enum { MAX_GGUF_ID = 64 };
static const bp_kind_traits *by_id[MAX_GGUF_ID];
static int by_id_ready;

static void build_index(void) {
    /* Racing threads write identical pointers; the flag is set last. */
    if (__atomic_load_n(&by_id_ready, __ATOMIC_ACQUIRE)) return;
    for (int i = 0; i < KIND_TABLE_SIZE; i++) by_id[kind_table[i].info.gguf_id] = &kind_table[i];
    __atomic_store_n(&by_id_ready, 1, __ATOMIC_RELEASE);
}

int bp_kind_table_size(void) { return KIND_TABLE_SIZE; }

const bp_kind_info *bp_kind_at(int i) {
    if (i < 0 || i >= KIND_TABLE_SIZE) return NULL;
    return &kind_table[i].info;
}

const bp_kind_traits *bp_kind_traits_of(bp_kind k) {
    build_index();
    if ((unsigned)k >= MAX_GGUF_ID) return NULL;
    return by_id[(unsigned)k];
}

const bp_kind_info *bp_kind_lookup(uint32_t gguf_id) {
    const bp_kind_traits *t = bp_kind_traits_of((bp_kind)gguf_id);
    if (!t) {
        bp_fail(BP_E_KIND, "unknown kind id %u", gguf_id);
        return NULL;
    }
    return &t->info;
}

const bp_kind_info *bp_kind_by_name(const char *name) {
    if (!name) {
        bp_fail(BP_E_INVAL, "kind name is NULL");
        return NULL;
    }
    for (int i = 0; i < KIND_TABLE_SIZE; i++)
        if (strcmp(kind_table[i].info.name, name) == 0) return &kind_table[i].info;
    bp_fail(BP_E_KIND, "unknown kind name '%s'", name);
    return NULL;
}

static bp_status traits_for(bp_kind k, const bp_kind_traits **out) {
    *out = bp_kind_traits_of(k);
    if (!*out) return bp_fail(BP_E_KIND, "unknown kind id %d", (int)k);
    return BP_OK;
}

static bp_status row_bytes(const bp_kind_traits *t, int64_t n, size_t *bytes) {
    if (n < 0) return bp_fail(BP_E_SHAPE, "%s: negative row length %lld", t->info.name, (long long)n);
    if (n % t->info.block_elems)
        return bp_fail(BP_E_SHAPE, "%s: row of %lld elements is not a whole number of %u-element blocks",
                       t->info.name, (long long)n, t->info.block_elems);
    if (!bp_mul_size((size_t)(n / t->info.block_elems), t->info.block_bytes, bytes))
        return bp_fail(BP_E_SHAPE, "%s: row of %lld elements overflows size_t", t->info.name, (long long)n);
    return BP_OK;
}

bp_status bp_kind_row_bytes(bp_kind k, int64_t n, size_t *bytes) {
    const bp_kind_traits *t;
    bp_status s = traits_for(k, &t);
    if (s) return s;
    if (!bytes) return bp_fail(BP_E_INVAL, "bp_kind_row_bytes: bytes is NULL");
    return row_bytes(t, n, bytes);
}

/* Shared argument check: known kind, whole blocks, non-NULL buffers, buffer long enough. */
static bp_status check_row(bp_kind k, const void *buf, size_t buf_bytes, int64_t n,
                           const bp_kind_traits **t, size_t *need) {
    bp_status s = traits_for(k, t);
    if (s) return s;
    if ((s = row_bytes(*t, n, need))) return s;
    if (!buf) return bp_fail(BP_E_INVAL, "%s: block buffer is NULL", (*t)->info.name);
    if (buf_bytes < *need)
        return bp_fail(BP_E_INVAL, "%s: buffer of %zu bytes is shorter than the %zu a row of %lld needs",
                       (*t)->info.name, buf_bytes, *need, (long long)n);
    return BP_OK;
}

bp_status bp_dequantize(bp_kind k, const void *src, size_t src_bytes, float *dst, int64_t n) {
    const bp_kind_traits *t;
    size_t need;
    bp_status s = check_row(k, src, src_bytes, n, &t, &need);
    if (s) return s;
    if (!dst) return bp_fail(BP_E_INVAL, "%s: output is NULL", t->info.name);
    t->dequant(src, dst, n / t->info.block_elems);
    return BP_OK;
}

bp_status bp_quantize(bp_kind k, const float *src, int64_t n, void *dst, size_t dst_bytes) {
    const bp_kind_traits *t;
    size_t need;
    bp_status s = check_row(k, dst, dst_bytes, n, &t, &need);
    if (s) return s;
    if (!t->quantize) return bp_fail(BP_E_KIND, "%s: no quantizer in this build", t->info.name);
    if (!src) return bp_fail(BP_E_INVAL, "%s: input is NULL", t->info.name);
    t->quantize(src, dst, n / t->info.block_elems);
    return BP_OK;
}

/* The reference dot: dequantize one block at a time, accumulate in double. Plain on purpose:
 * it is what every optimized kernel is judged against. */
static float ref_dot(const bp_kind_traits *t, const uint8_t *row, const float *x, int64_t n) {
    float buf[BP_QK_K];
    double acc = 0.0;
    const int64_t be = t->info.block_elems;
    for (int64_t b = 0; b < n / be; b++) {
        t->dequant(row + (size_t)b * t->info.block_bytes, buf, 1);
        for (int64_t i = 0; i < be; i++) acc += (double)buf[i] * (double)x[b * be + i];
    }
    return (float)acc;
}

bp_status bp_ref_dot(bp_kind k, const void *row, size_t row_bytes_avail, const float *x, int64_t n,
                     float *out) {
    const bp_kind_traits *t;
    size_t need;
    bp_status s = check_row(k, row, row_bytes_avail, n, &t, &need);
    if (s) return s;
    if (!x || !out) return bp_fail(BP_E_INVAL, "%s: dot input or output is NULL", t->info.name);
    *out = ref_dot(t, row, x, n);
    return BP_OK;
}

static bp_status check_matrix(bp_kind k, const void *w, size_t w_bytes, int64_t rows, int64_t cols,
                              const bp_kind_traits **t, size_t *rb) {
    bp_status s = traits_for(k, t);
    if (s) return s;
    if (rows < 0) return bp_fail(BP_E_SHAPE, "%s: negative row count %lld", (*t)->info.name, (long long)rows);
    if ((s = row_bytes(*t, cols, rb))) return s;
    size_t need;
    if (!bp_mul_size(*rb, (size_t)rows, &need))
        return bp_fail(BP_E_SHAPE, "%s: %lld x %lld matrix overflows size_t", (*t)->info.name,
                       (long long)rows, (long long)cols);
    if (!w) return bp_fail(BP_E_INVAL, "%s: weight buffer is NULL", (*t)->info.name);
    if (w_bytes < need)
        return bp_fail(BP_E_INVAL, "%s: weight buffer of %zu bytes is shorter than the %zu a %lld x %lld matrix needs",
                       (*t)->info.name, w_bytes, need, (long long)rows, (long long)cols);
    return BP_OK;
}

bp_status bp_ref_matvec(bp_kind k, const void *w, size_t w_bytes, int64_t rows, int64_t cols,
                        const float *x, float *y) {
    return bp_ref_gemm(k, w, w_bytes, rows, cols, x, 1, y);
}

bp_status bp_ref_gemm(bp_kind k, const void *w, size_t w_bytes, int64_t rows, int64_t cols,
                      const float *x, int64_t t_batch, float *y) {
    const bp_kind_traits *t;
    size_t rb;
    bp_status s = check_matrix(k, w, w_bytes, rows, cols, &t, &rb);
    if (s) return s;
    if (t_batch < 0) return bp_fail(BP_E_SHAPE, "%s: negative batch %lld", t->info.name, (long long)t_batch);
    if ((!x || !y) && rows && t_batch) return bp_fail(BP_E_INVAL, "%s: input or output is NULL", t->info.name);
    if (rows == 0 || t_batch == 0) return BP_OK;
    /* Dequantize each row once and reuse it for every input; the sum runs in the same order
     * as ref_dot's, so matvec, gemm and dot agree bit for bit. */
    float *wrow = bp_malloc((size_t)(cols ? cols : 1) * sizeof *wrow);
    if (!wrow) return bp_fail(BP_E_NOMEM, "%s: no memory for a row of %lld floats", t->info.name, (long long)cols);
    for (int64_t r = 0; r < rows; r++) {
        t->dequant((const uint8_t *)w + (size_t)r * rb, wrow, cols / t->info.block_elems);
        for (int64_t j = 0; j < t_batch; j++) {
            const float *xj = x + j * cols;
            double acc = 0.0;
            for (int64_t i = 0; i < cols; i++) acc += (double)wrow[i] * (double)xj[i];
            y[j * rows + r] = (float)acc;
        }
    }
    bp_free(wrow);
    return BP_OK;
}
