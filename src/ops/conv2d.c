/* conv2d: the checks every path shares, the op row per norm variant, and the public entry
 * points. Which backend runs it is the op layer's walk (claims per (conv2d row, kind)); the CPU
 * is last and always able: conv2d_cpu.c, with conv2d_ref.c as its oracle. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "cpu/cpu.h"
#include "ops/conv2d_internal.h"
#include "ops/ops_internal.h"

bp_op bp_conv2d_op_of(const bp_conv2d_params *p) {
    return p->norm == BP_CONV_NORM_GROUP ? BP_OP_CONV2D_GN : p->norm == BP_CONV_NORM_LAYER ? BP_OP_CONV2D_LN : BP_OP_CONV2D;
}

static bool out_dim(int64_t in, int64_t k, int64_t s, int64_t *out) {
    int64_t span = in + 2 * (k / 2) - k;
    if (span < 0) return false;
    *out = span / s + 1;
    return true;
}

bp_status bp_conv2d_out_size(const bp_conv2d_params *p, int64_t *oh, int64_t *ow) {
    if (!p || !oh || !ow) return bp_fail(BP_E_INVAL, "bp_conv2d_out_size: NULL argument");
    if (p->h < 1 || p->w < 1 || p->k < 1 || p->stride < 1 || p->h > INT32_MAX || p->w > INT32_MAX ||
        p->k > INT32_MAX || p->stride > INT32_MAX)
        return bp_fail(BP_E_SHAPE, "conv2d: image %lld x %lld, kernel %lld, stride %lld: each must be in 1..2^31",
                       (long long)p->h, (long long)p->w, (long long)p->k, (long long)p->stride);
    if (!out_dim(p->h, p->k, p->stride, oh) || !out_dim(p->w, p->k, p->stride, ow))
        return bp_fail(BP_E_SHAPE, "conv2d: a %lld x %lld image is smaller than the %lld x %lld kernel with padding %lld",
                       (long long)p->h, (long long)p->w, (long long)p->k, (long long)p->k, (long long)(p->k / 2));
    return BP_OK;
}

/* a * b * c elements of `size` bytes fit in size_t (and int64). */
static bool fits(int64_t a, int64_t b, int64_t c, size_t size) {
    size_t n;
    return bp_mul_size((size_t)a, (size_t)b, &n) && bp_mul_size(n, (size_t)c, &n) && bp_mul_size(n, size, &n) &&
           n <= (size_t)INT64_MAX;
}

bp_status bp_conv2d_check(const char *who, const bp_weight *w, const bp_conv2d_params *p, const float *x,
                          const float *y, int64_t *oh, int64_t *ow) {
    if (!w || !p || !x || !y) return bp_fail(BP_E_INVAL, "%s: weight, params, input or output is NULL", who);
    if (p->cin < 1 || p->cout < 1 || p->cin > INT32_MAX || p->cout > INT32_MAX)
        return bp_fail(BP_E_SHAPE, "%s: cin %lld, cout %lld: each must be in 1..2^31", who, (long long)p->cin,
                       (long long)p->cout);
    bp_status s = bp_conv2d_out_size(p, oh, ow);
    if (s) return s;
    if (!fits(p->h, p->w, p->cin, sizeof(double)) || !fits(*oh, *ow, p->cout, sizeof(float)) ||
        !fits(p->k, p->k, p->cin, sizeof(float)))
        return bp_fail(BP_E_SHAPE, "%s: a %lld x %lld x %lld image with kernel %lld overflows", who, (long long)p->h,
                       (long long)p->w, (long long)p->cin, (long long)p->k);
    int64_t cols = p->k * p->k * p->cin;
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)w->kind);
    if (w->rows != p->cout || w->cols != cols)
        return bp_fail(BP_E_SHAPE,
                       "%s: the %s weight is %lld x %lld, but cout %lld and a %lld x %lld kernel over %lld channels "
                       "need %lld x %lld ([cout][ky][kx][cin])",
                       who, ki ? ki->name : "?", (long long)w->rows, (long long)w->cols, (long long)p->cout,
                       (long long)p->k, (long long)p->k, (long long)p->cin, (long long)p->cout, (long long)cols);
    if (p->norm != BP_CONV_NORM_NONE && p->norm != BP_CONV_NORM_GROUP && p->norm != BP_CONV_NORM_LAYER)
        return bp_fail(BP_E_INVAL, "%s: unknown norm %d (0 none, 1 group, 2 layer)", who, (int)p->norm);
    if (p->norm == BP_CONV_NORM_NONE && (p->gamma || p->beta))
        return bp_fail(BP_E_INVAL, "%s: gamma/beta given without a norm (they scale the norm's output)", who);
    if (p->norm == BP_CONV_NORM_GROUP && (p->groups < 1 || p->cin % p->groups))
        return bp_fail(BP_E_SHAPE, "%s: GroupNorm groups %lld does not divide cin %lld", who, (long long)p->groups,
                       (long long)p->cin);
    if (p->norm != BP_CONV_NORM_NONE && (!(p->eps >= 0.0f) || !isfinite(p->eps)))
        return bp_fail(BP_E_INVAL, "%s: norm eps %g must be finite and >= 0", who, (double)p->eps);
    return BP_OK;
}

/* The op call for a checked conv2d, with the bytes it moves and its FLOPs for the stats. */
static bp_op_call conv_call(bp_weight *w, const bp_conv2d_params *p, const float *x, float *y, int64_t oh, int64_t ow) {
    bp_op_call c = {.op = bp_conv2d_op_of(p), .kind = w->kind, .kind2 = w->kind};
    c.u.conv.w = w, c.u.conv.p = p, c.u.conv.x = x, c.u.conv.y = y;
    c.shape = (bp_op_shape){w->rows, w->cols, oh * ow};
    return c;
}

bp_status bp_conv2d_on(bp_weight *w, const char *backend, const bp_conv2d_params *p, const float *x, float *y) {
    int64_t oh, ow;
    bp_status s = bp_conv2d_check("bp_conv2d", w, p, x, y, &oh, &ow);
    if (s) return s;
    if (backend && !strcmp(backend, "cpu-ref")) return bp_conv2d_ref(w, p, x, y);
    bp_op_call c = conv_call(w, p, x, y, oh, ow);
    return bp_op_run_on(&c, backend);
}

bp_status bp_conv2d(bp_weight *w, const bp_conv2d_params *p, const float *x, float *y) {
    return bp_conv2d_on(w, NULL, p, x, y);
}

bp_status bp_conv2d_cpu_op(const bp_op_call *c, char *label, size_t label_len) {
    const bp_weight *w = c->u.conv.w;
    int64_t tile = bp_conv2d_cpu_tile_pixels(c->u.conv.p);
    snprintf(label, label_len, "CPU %s %s (tiles of %lld px: %s)", bp_op_name(c->op),
             bp_kind_lookup((uint32_t)w->kind)->name, (long long)tile, bp_cpu_kernel_name(w->kind, tile));
    return bp_conv2d_cpu(c->u.conv.w, c->u.conv.p, c->u.conv.x, c->u.conv.y);
}
