/* bp_weight_init: the one place a weight's kind, shape and bytes are checked and its kind traits
 * resolved (bp_weight_create allocates and calls it). */
#include <string.h>

#include "backend/weight.h"
#include "core/alloc.h"
#include "core/error.h"

bp_status bp_weight_init(bp_weight *w, bp_kind k, const void *data, size_t bytes, int64_t rows, int64_t cols) {
    if (!w) return bp_fail(BP_E_INVAL, "bp_weight_create: out is NULL");
    memset(w, 0, sizeof *w);
    const bp_kind_traits *kt = bp_kind_traits_of(k);
    if (!kt) return bp_fail(BP_E_KIND, "unknown kind id %d", (int)k);
    const bp_kind_info *ki = &kt->info;
    if (ki->role == BP_ROLE_D)
        return bp_fail(BP_E_KIND, "bp_weight_create: %s is a plain data kind, not a weight kind", ki->name);
    if (rows <= 0 || cols <= 0)
        return bp_fail(BP_E_SHAPE, "bp_weight_create: %s weight of %lld x %lld: rows and cols must be positive",
                       ki->name, (long long)rows, (long long)cols);
    size_t rb, need;
    bp_status s = bp_kind_row_bytes(k, cols, &rb);
    if (s) return s;
    if (!bp_mul_size(rb, (size_t)rows, &need))
        return bp_fail(BP_E_SHAPE, "bp_weight_create: %s %lld x %lld overflows size_t", ki->name, (long long)rows,
                       (long long)cols);
    if (!data) return bp_fail(BP_E_INVAL, "bp_weight_create: data is NULL");
    if (bytes < need)
        return bp_fail(BP_E_SHAPE, "bp_weight_create: %zu bytes is less than the %zu a %s %lld x %lld weight needs",
                       bytes, need, ki->name, (long long)rows, (long long)cols);
    w->kind = k;
    w->traits = kt;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = rb;
    w->data = data;
    return BP_OK;
}
