/* The weight API through the seam: weights, and bp_matvec / bp_gemm (and the forced-backend
 * variants) as calls of the matvec and gemm ops through the one walk (walk.c). */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/cpu.h"
#include "seam/seam_internal.h"

/* ---- weights ---------------------------------------------------------------------------- */

bp_status bp_weight_create(bp_kind k, const void *data, size_t bytes, int64_t rows, int64_t cols,
                           bp_weight **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_weight_create: out is NULL");
    *out = NULL;
    bp_weight tmp;
    bp_status s = bp_weight_init(&tmp, k, data, bytes, rows, cols);
    if (s) return s;
    bp_weight *w = bp_calloc(1, sizeof *w);
    if (!w) return bp_fail(BP_E_NOMEM, "bp_weight_create: no memory");
    *w = tmp;
    *out = w;
    return BP_OK;
}

void bp_weight_free(bp_weight *w) {
    if (!w) return;
    for (int i = 0; i < BP_BACKEND_COUNT; i++)
        if (w->backend_state[i] && w->backend_free[i]) w->backend_free[i](w->backend_state[i]);
    bp_free(w);
}

/* ---- non-finite activations (the policy is documented at bp_matvec in backplane.h) ---------
 * A kernel that quantizes x to 8 bits turns one NaN into a wrong-but-finite scale (the optimized
 * CPU path returned 33 finite numbers for an x holding one NaN; +Inf gave NaN where the
 * reference gives +/-Inf). Rather than teach every kernel of every backend IEEE special cases,
 * the seam scans x on entry (O(t * cols), next to the O(t * cols * rows) product) and runs the
 * CPU reference for that call, so every path and backend gives the reference's NaN/Inf pattern
 * and bp_weight_last_path says so. One place, before any backend sees x. */
bool bp_seam_nonfinite(const float *x, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u; /* exponent all ones: Inf or NaN */
    }
    return bad != 0;
}

/* A matvec (t = 0) or gemm call over w. */
static bp_op_call mm_call(bp_weight *w, const float *x, int64_t t, float *y) {
    bp_op_call c = {.op = t ? BP_OP_GEMM : BP_OP_MATVEC, .kind = w->kind, .kind2 = w->kind};
    c.u.mm.w = w, c.u.mm.x = x, c.u.mm.t = t ? t : 1, c.u.mm.y = y;
    return c;
}

/* True when x held a NaN/Inf and the reference ran (its status in *st), recorded as such. */
static bool nonfinite_to_reference(bp_weight *w, const float *x, int64_t t, float *y, bp_status *st) {
    if (!bp_seam_nonfinite(x, (size_t)(t ? t : 1) * (size_t)w->cols)) return false;
    const double t0 = bp_seam_now();
    size_t bytes = w->row_bytes * (size_t)w->rows;
    *st = t ? bp_ref_gemm(w->kind, w->data, bytes, w->rows, w->cols, x, t, y)
            : bp_ref_matvec(w->kind, w->data, bytes, w->rows, w->cols, x, y);
    if (!*st) {
        const bp_op_call c = mm_call(w, x, t, y);
        bp_run_record r;
        bp_seam_record_fill(&r, &c, -1, "CPU reference (non-finite input)");
        bp_seam_records_add(&c, &r, -1, bp_seam_now() - t0, NULL);
    }
    return true;
}

bp_status bp_seam_cpu_mm(const bp_op_call *c, char *kernel, size_t len) {
    bp_weight *w = c->u.mm.w;
    bp_status s = c->op == BP_OP_GEMM ? bp_cpu_gemm(w, c->u.mm.x, c->u.mm.t, c->u.mm.y)
                                      : bp_cpu_matvec(w, c->u.mm.x, c->u.mm.y);
    if (!s) snprintf(kernel, len, "%s", bp_cpu_kernel_name(w->kind, c->u.mm.t));
    return s;
}

static bp_status check_op(const bp_weight *w, const float *x, int64_t t, const float *y, const char *what) {
    if (!w) return bp_fail(BP_E_INVAL, "%s: weight is NULL", what);
    if (t < 0) return bp_fail(BP_E_SHAPE, "%s: negative batch %lld", what, (long long)t);
    if (t > 0 && (!x || !y)) return bp_fail(BP_E_INVAL, "%s: input or output is NULL", what);
    if (t > 0 && (size_t)t > SIZE_MAX / sizeof(float) / (size_t)(w->cols > w->rows ? w->cols : w->rows))
        return bp_fail(BP_E_SHAPE, "%s: batch %lld overflows", what, (long long)t);
    return BP_OK;
}

bp_status bp_matvec(bp_weight *w, const float *x, float *y) {
    bp_status s = check_op(w, x, 1, y, "bp_matvec");
    if (s || nonfinite_to_reference(w, x, 0, y, &s)) return s;
    const bp_op_call c = mm_call(w, x, 0, y);
    return bp_seam_run(&c, bp_seam_cpu_mm, NULL);
}

bp_status bp_gemm(bp_weight *w, const float *x, int64_t t, float *y) {
    bp_status s = check_op(w, x, t, y, "bp_gemm");
    if (s || t == 0 || nonfinite_to_reference(w, x, t, y, &s)) return s;
    const bp_op_call c = mm_call(w, x, t, y);
    return bp_seam_run(&c, bp_seam_cpu_mm, NULL);
}

/* ---- forced backend ------------------------------------------------------------------------- */

static bp_status run_forced(bp_weight *w, const char *backend, const float *x, int64_t t, float *y) {
    const bp_op_call c = mm_call(w, x, t, y);
    if (!strcmp(backend, "cpu-ref")) {
        const double t0 = bp_seam_now();
        size_t bytes = w->row_bytes * (size_t)w->rows;
        bp_status s = t ? bp_ref_gemm(w->kind, w->data, bytes, w->rows, w->cols, x, t, y)
                        : bp_ref_matvec(w->kind, w->data, bytes, w->rows, w->cols, x, y);
        if (!s) {
            char kn[64];
            const bp_kind_info *ki = bp_kind_lookup((uint32_t)w->kind);
            snprintf(kn, sizeof kn, "CPU reference %s %s", ki ? ki->name : "?", t ? "gemm" : "matvec");
            bp_run_record r;
            bp_seam_record_fill(&r, &c, -1, kn);
            bp_seam_records_add(&c, &r, -1, bp_seam_now() - t0, NULL);
        }
        return s;
    }
    /* The backend must be usable before the non-finite policy can stand in for it. */
    int slot;
    bp_status st = strcmp(backend, "cpu") ? bp_seam_forced_slot(&c, backend, &slot) : BP_OK;
    if (st) return st;
    bp_status nf;
    if (nonfinite_to_reference(w, x, t, y, &nf)) return nf; /* the non-finite policy */
    return bp_seam_run_on(&c, backend, bp_seam_cpu_mm, NULL);
}

bp_status bp_matvec_on(bp_weight *w, const char *backend, const float *x, float *y) {
    if (!backend) return bp_matvec(w, x, y);
    bp_status s = check_op(w, x, 1, y, "bp_matvec_on");
    return s ? s : run_forced(w, backend, x, 0, y);
}

bp_status bp_gemm_on(bp_weight *w, const char *backend, const float *x, int64_t t, float *y) {
    if (!backend) return bp_gemm(w, x, t, y);
    bp_status s = check_op(w, x, t, y, "bp_gemm_on");
    if (s || t == 0) return s;
    return run_forced(w, backend, x, t, y);
}
