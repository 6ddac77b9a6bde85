/* Dispatch through the seam: weights, bp_matvec / bp_gemm walking the order with named
 * fallbacks, the forced-backend variants, and the fallback statistics.
 *
 * The bug this file exists to prevent: an op that silently lands on the CPU while every report
 * says GPU. So every BP_LAUNCH_ERROR is counted, its cause logged once with the backend that
 * ran instead, and each weight remembers the path that really ran. */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cpu/cpu.h"
#include "seam/seam_internal.h"

/* ---- weights ---------------------------------------------------------------------------- */

static void set_path(bp_weight *w, const char *fmt, ...) BP_PRINTF(2, 3);

bp_status bp_weight_create(bp_kind k, const void *data, size_t bytes, int64_t rows, int64_t cols,
                           bp_weight **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_weight_create: out is NULL");
    *out = NULL;
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    if (!ki) return BP_E_KIND;
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
    bp_weight *w = calloc(1, sizeof *w);
    if (!w) return bp_fail(BP_E_NOMEM, "bp_weight_create: no memory");
    w->kind = k;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = rb;
    w->data = data;
    set_path(w, "none yet");
    *out = w;
    return BP_OK;
}

void bp_weight_free(bp_weight *w) {
    if (!w) return;
    for (int i = 0; i < BP_BACKEND_COUNT; i++)
        if (w->backend_state[i] && w->backend_free[i]) w->backend_free[i](w->backend_state[i]);
    free(w);
}

/* Several threads may run ops on one weight (batched sequences, MoE experts): the path is
 * written and read under a lock, and readers get a thread-local copy that no writer touches. */
static pthread_mutex_t path_lock = PTHREAD_MUTEX_INITIALIZER;

static void set_path(bp_weight *w, const char *fmt, ...) {
    char buf[sizeof w->last_path];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* A cause may not fit: a truncated path is fine, the full cause is in the log. */
    if (n >= (int)sizeof buf) memcpy(buf + sizeof buf - 4, "...", 4);
    pthread_mutex_lock(&path_lock);
    memcpy(w->last_path, buf, sizeof buf);
    pthread_mutex_unlock(&path_lock);
}

const char *bp_weight_last_path(const bp_weight *w) {
    static _Thread_local char copy[sizeof w->last_path];
    if (!w) return "";
    pthread_mutex_lock(&path_lock);
    memcpy(copy, w->last_path, sizeof copy);
    pthread_mutex_unlock(&path_lock);
    return copy;
}

/* ---- fallback statistics ------------------------------------------------------------------ */

enum { MAX_FALLBACK_ROWS = 256 };
static pthread_mutex_t fb_lock = PTHREAD_MUTEX_INITIALIZER;
static bp_fallback_entry fb_rows[MAX_FALLBACK_ROWS];
static int fb_n;
static unsigned long long fb_total, fb_dropped;
static FILE *fb_log;

void bp_seam_set_log(FILE *f) {
    pthread_mutex_lock(&fb_lock);
    fb_log = f;
    pthread_mutex_unlock(&fb_lock);
}

void bp_seam_logf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&fb_lock);
    FILE *f = fb_log ? fb_log : stderr;
    vfprintf(f, fmt, ap);
    fflush(f);
    pthread_mutex_unlock(&fb_lock);
    va_end(ap);
}

/* Count one fallback; log it when (backend, kind, op, cause) is new. */
static void record_fallback(const char *backend, bp_kind k, const char *op, const char *cause, const char *to) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    const char *kn = ki ? ki->name : "?";
    if (!cause || !*cause) cause = "unspecified error";
    pthread_mutex_lock(&fb_lock);
    fb_total++;
    int i;
    for (i = 0; i < fb_n; i++) {
        bp_fallback_entry *e = &fb_rows[i];
        if (!strcmp(e->backend, backend) && !strcmp(e->kind, kn) && !strcmp(e->op, op) &&
            !strncmp(e->cause, cause, sizeof e->cause - 1))
            break;
    }
    if (i < fb_n) fb_rows[i].count++;
    else if (fb_n == MAX_FALLBACK_ROWS) fb_dropped++;
    else {
        bp_fallback_entry *e = &fb_rows[fb_n++];
        snprintf(e->backend, sizeof e->backend, "%s", backend);
        snprintf(e->kind, sizeof e->kind, "%s", kn);
        snprintf(e->op, sizeof e->op, "%s", op);
        snprintf(e->cause, sizeof e->cause, "%s", cause);
        snprintf(e->to, sizeof e->to, "%s", to);
        e->count = 1;
        fprintf(fb_log ? fb_log : stderr, "backplane: %s %s %s failed: %s; falling back to %s\n", backend, kn, op,
                cause, to);
        fflush(fb_log ? fb_log : stderr);
    }
    pthread_mutex_unlock(&fb_lock);
}

unsigned long long bp_fallback_total(void) {
    pthread_mutex_lock(&fb_lock);
    unsigned long long n = fb_total;
    pthread_mutex_unlock(&fb_lock);
    return n;
}

int bp_fallback_list(bp_fallback_entry *out, int max) {
    pthread_mutex_lock(&fb_lock);
    for (int i = 0; out && i < fb_n && i < max; i++) out[i] = fb_rows[i];
    int n = fb_n;
    pthread_mutex_unlock(&fb_lock);
    return n;
}

void bp_fallback_reset(void) {
    pthread_mutex_lock(&fb_lock);
    fb_n = 0;
    fb_total = fb_dropped = 0;
    pthread_mutex_unlock(&fb_lock);
}

void bp_fallback_report(FILE *out) {
    if (!out) return;
    pthread_mutex_lock(&fb_lock);
    if (!fb_total) fprintf(out, "fallbacks: none\n");
    else {
        fprintf(out, "fallbacks: %llu op%s fell back\n", fb_total, fb_total == 1 ? "" : "s");
        for (int i = 0; i < fb_n; i++)
            fprintf(out, "  %6llu  %s %s %s -> %s: %s\n", fb_rows[i].count, fb_rows[i].backend, fb_rows[i].kind,
                    fb_rows[i].op, fb_rows[i].to, fb_rows[i].cause);
        if (fb_dropped) fprintf(out, "  %6llu  (further distinct causes not itemized)\n", fb_dropped);
    }
    pthread_mutex_unlock(&fb_lock);
}

/* ---- one backend's attempt -------------------------------------------------------------------- */

/* Failures of one op, logged once the op has run so the line can name who ran it instead. */
typedef struct pending {
    int n;
    struct { const char *backend; char cause[200]; } f[BP_BACKEND_COUNT + 1];
} pending;

static void add_pending(pending *p, const char *backend, const char *err) {
    if (p->n >= (int)(sizeof p->f / sizeof p->f[0])) return;
    p->f[p->n].backend = backend;
    snprintf(p->f[p->n].cause, sizeof p->f[p->n].cause, "%s", err[0] ? err : "unspecified error");
    p->n++;
}

static void flush_pending(pending *p, bp_kind k, const char *op, const char *to) {
    for (int i = 0; i < p->n; i++) record_fallback(p->f[i].backend, k, op, p->f[i].cause, to);
}

/* t matvecs, for a backend with a matvec but no GEMM. */
static bp_launch per_position(const bp_backend_dispatch *d, bp_weight *w, const float *x, int64_t t, float *y,
                              char *err, size_t err_len) {
    for (int64_t j = 0; j < t; j++) {
        bp_launch r = d->matvec(w, x + j * w->cols, y + j * w->rows, err, err_len);
        if (r == BP_LAUNCH_NO_KERNEL && j > 0) {
            snprintf(err, err_len, "matvec kernel vanished after %lld of %lld positions", (long long)j, (long long)t);
            return BP_LAUNCH_ERROR;
        }
        if (r != BP_LAUNCH_OK) return r;
    }
    return BP_LAUNCH_OK;
}

/* Run one op (t == 0: matvec) on slot i. *label gets what ran on OK. */
static bp_launch run_on_slot(int i, bp_weight *w, const float *x, int64_t t, float *y, char *err, size_t err_len,
                             char *label, size_t label_len) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    const char *kn = s->caps->matvec_kernel(w->kind);
    bp_launch r;
    err[0] = '\0';
    if (!kn) return BP_LAUNCH_NO_KERNEL;
    if (t == 0) {
        r = s->dispatch->matvec(w, x, y, err, err_len);
        if (r == BP_LAUNCH_OK) snprintf(label, label_len, "%s %s matvec", s->caps->display_name, kn);
        return r;
    }
    if (s->caps->has_gemm(w->kind) && s->dispatch->gemm) {
        r = s->dispatch->gemm(w, x, t, y, err, err_len);
        if (r == BP_LAUNCH_OK) snprintf(label, label_len, "%s %s gemm", s->caps->display_name, kn);
        if (r != BP_LAUNCH_NO_KERNEL) return r;
    }
    r = per_position(s->dispatch, w, x, t, y, err, err_len);
    if (r == BP_LAUNCH_OK) snprintf(label, label_len, "%s", s->caps->prefill_fallback_name);
    return r;
}

static bp_status check_op(const bp_weight *w, const float *x, int64_t t, const float *y, const char *what) {
    if (!w) return bp_fail(BP_E_INVAL, "%s: weight is NULL", what);
    if (t < 0) return bp_fail(BP_E_SHAPE, "%s: negative batch %lld", what, (long long)t);
    if (t > 0 && (!x || !y)) return bp_fail(BP_E_INVAL, "%s: input or output is NULL", what);
    if (t > 0 && (size_t)t > SIZE_MAX / sizeof(float) / (size_t)(w->cols > w->rows ? w->cols : w->rows))
        return bp_fail(BP_E_SHAPE, "%s: batch %lld overflows", what, (long long)t);
    return BP_OK;
}

static const char *op_name(int64_t t) { return t ? "gemm" : "matvec"; }

static bool slot_takes(int i, bp_kind k) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    return s->dispatch && s->caps->matvec_kernel(k) && bp_seam_slot_enabled(i, NULL);
}

int bp_seam_route(bp_kind k) {
    int n = bp_seam_slot_count();
    for (int i = 0; i < n; i++)
        if (slot_takes(i, k)) return i;
    return -1;
}

/* Strict mode (bp_strict_mode): what would have been a fallback is the op's error instead, and
 * nothing runs in its place. */
static bp_status strict_refuse(const bp_weight *w, int64_t t, const bp_seam_slot *s, const char *cause) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)w->kind);
    return bp_fail(BP_E_FALLBACK,
                   "strict mode: %s of %s %lld x %lld (batch %lld) on %s failed: %s; not falling back "
                   "(BACKPLANE_STRICT / bp_set_strict)",
                   op_name(t), ki ? ki->name : "?", (long long)w->rows, (long long)w->cols, (long long)(t ? t : 1),
                   s->caps->display_name, cause && *cause ? cause : "unspecified error");
}

/* The walk: t == 0 is a matvec. Slots are asked in bp_seam_order() with the rule of
 * bp_seam_slot_takes (src/seam/route.c), the one `probe` and bp_route report. */
static bp_status walk(bp_weight *w, const float *x, int64_t t, float *y) {
    pending p = {0};
    char err[200], label[96];
    const char *first_failed = NULL;
    int order[BP_BACKEND_COUNT + 1];
    int n = bp_seam_order(order, BP_BACKEND_COUNT + 1);
    for (int j = 0; j < n; j++) {
        const int i = order[j];
        const bp_seam_slot *s = bp_seam_slot_at(i);
        bp_seam_take take = bp_seam_slot_takes(i, w->kind, w->rows, w->cols, t, err, sizeof err);
        if (take == BP_TAKE_LOST) {
            /* Disabled after a device loss: every op it would have taken is a counted fallback
             * naming that cause, not a silent change of route. */
            if (bp_strict_mode()) return strict_refuse(w, t, s, err);
            add_pending(&p, s->caps->name, err);
            if (!first_failed) first_failed = s->caps->display_name;
            continue;
        }
        if (take != BP_TAKE_YES) continue;
        bp_launch r = run_on_slot(i, w, x, t, y, err, sizeof err, label, sizeof label);
        if (r == BP_LAUNCH_OK) {
            flush_pending(&p, w->kind, op_name(t), s->caps->display_name);
            if (first_failed)
                set_path(w, "%s (fallback from %s)", label, first_failed);
            else
                set_path(w, "%s", label);
            return BP_OK;
        }
        if (r == BP_LAUNCH_LOST) bp_seam_slot_mark_lost(i, err);
        if (r == BP_LAUNCH_ERROR || r == BP_LAUNCH_LOST) {
            if (bp_strict_mode()) return strict_refuse(w, t, s, err);
            add_pending(&p, s->caps->name, err);
            if (!first_failed) first_failed = s->caps->display_name;
        }
    }
    bp_status st = t ? bp_cpu_gemm(w, x, t, y) : bp_cpu_matvec(w, x, y);
    flush_pending(&p, w->kind, op_name(t), "CPU");
    if (st) return st;
    const char *cpu = bp_cpu_kernel_name(w->kind, t ? t : 1);
    if (first_failed) {
        set_path(w, "%s (fallback from %s: %s)", cpu, first_failed, p.f[0].cause);
    } else
        set_path(w, "%s", cpu);
    return BP_OK;
}

bp_status bp_matvec(bp_weight *w, const float *x, float *y) {
    bp_status s = check_op(w, x, 1, y, "bp_matvec");
    return s ? s : walk(w, x, 0, y);
}

bp_status bp_gemm(bp_weight *w, const float *x, int64_t t, float *y) {
    bp_status s = check_op(w, x, t, y, "bp_gemm");
    if (s || t == 0) return s;
    return walk(w, x, t, y);
}

/* ---- forced backend ------------------------------------------------------------------------- */

static bp_status run_forced(bp_weight *w, const char *backend, const float *x, int64_t t, float *y) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)w->kind);
    const char *kn = ki ? ki->name : "?";
    if (!strcmp(backend, "cpu-ref")) {
        size_t bytes = w->row_bytes * (size_t)w->rows;
        bp_status s = t ? bp_ref_gemm(w->kind, w->data, bytes, w->rows, w->cols, x, t, y)
                        : bp_ref_matvec(w->kind, w->data, bytes, w->rows, w->cols, x, y);
        if (!s) set_path(w, "CPU reference %s %s", kn, op_name(t));
        return s;
    }
    if (!strcmp(backend, "cpu")) {
        bp_status s = t ? bp_cpu_gemm(w, x, t, y) : bp_cpu_matvec(w, x, y);
        if (!s) set_path(w, "%s", bp_cpu_kernel_name(w->kind, t ? t : 1));
        return s;
    }
    int i = bp_seam_slot_find(backend);
    if (i < 0) return bp_fail(BP_E_NOT_FOUND, "no backend called '%s'", backend);
    const bp_seam_slot *s = bp_seam_slot_at(i);
    const char *reason;
    if (!s->dispatch) return bp_fail(BP_E_UNSUPPORTED, "%s is not built into this binary", backend);
    if (!bp_seam_slot_enabled(i, &reason)) return bp_fail(BP_E_UNSUPPORTED, "%s is disabled: %s", backend, reason);
    if (!s->caps->matvec_kernel(w->kind)) return bp_fail(BP_E_UNSUPPORTED, "%s has no %s kernel", backend, kn);
    char err[200], label[96];
    bp_launch r = run_on_slot(i, w, x, t, y, err, sizeof err, label, sizeof label);
    if (r == BP_LAUNCH_NO_KERNEL)
        return bp_fail(BP_E_UNSUPPORTED, "%s declined the %s %s of %lld x %lld", backend, kn, op_name(t),
                       (long long)w->rows, (long long)w->cols);
    if (r == BP_LAUNCH_LOST) {
        bp_seam_slot_mark_lost(i, err);
        return bp_fail(BP_E_DEVICE_LOST, "%s %s %s failed, device lost: %s", backend, kn, op_name(t),
                       err[0] ? err : "unspecified error");
    }
    if (r == BP_LAUNCH_ERROR)
        return bp_fail(BP_E_DEVICE, "%s %s %s failed: %s", backend, kn, op_name(t), err[0] ? err : "unspecified error");
    set_path(w, "%s", label);
    return BP_OK;
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

/* ---- ops share the fallback table (seam/op_dispatch.c) ---------------------------------------- */

void bp_seam_record_fallback(const char *backend, bp_kind k, const char *op, const char *cause, const char *to) {
    record_fallback(backend, k, op, cause, to);
}
