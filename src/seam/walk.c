/* The walk: every call of every op -- matvec and GEMM included -- goes through bp_seam_run,
 * which asks each slot of the order the one rule (route.c), launches on the first that takes
 * it, and ends on the CPU. One fallback recorder, one strict-mode refusal, one forced run.
 *
 * The bug this file exists to prevent: a call that silently lands on the CPU while every report
 * says GPU. So every BP_LAUNCH_ERROR is counted, its cause logged once with the backend that ran
 * instead, and the record of what ran is filled here, where the work ran (records.c). */
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "core/error.h"
#include "seam/seam_internal.h"

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

/* ---- one slot's attempt ------------------------------------------------------------------- */

static const char *kind_name(bp_kind k) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    return ki ? ki->name : "?";
}

/* The call's first kind, for the fallback table and the messages. */
static bp_kind call_kind(const bp_op_call *c) { return bp_op_call_kind(c, 0); }

/* A gemm on a slot that claims only the kind's matvec: t matvecs, named per-position. */
static bp_launch per_position(const bp_backend_dispatch *d, const bp_op_call *c, char *err, size_t err_len) {
    const bp_weight *w = c->u.mm.w;
    for (int64_t j = 0; j < c->u.mm.t; j++) {
        bp_op_call one = *c;
        one.op = BP_OP_MATVEC;
        one.u.mm.x = c->u.mm.x + j * w->cols, one.u.mm.y = c->u.mm.y + j * w->rows, one.u.mm.t = 1;
        bp_launch r = d->launch(&one, err, err_len);
        if (r == BP_LAUNCH_NO_KERNEL && j > 0) {
            snprintf(err, err_len, "matvec kernel vanished after %lld of %lld positions", (long long)j,
                     (long long)c->u.mm.t);
            return BP_LAUNCH_ERROR;
        }
        if (r != BP_LAUNCH_OK) return r;
    }
    return BP_LAUNCH_OK;
}

static bp_launch launch_on(int i, const bp_op_call *c, char *err, size_t err_len) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    err[0] = '\0';
    if (!s->dispatch->launch) return BP_LAUNCH_NO_KERNEL;
    if (c->op == BP_OP_GEMM && bp_seam_slot_per_position(i, c->u.mm.w->kind))
        return per_position(s->dispatch, c, err, err_len);
    return s->dispatch->launch(c, err, err_len);
}

/* Strict mode (bp_strict_mode): what would have been a fallback is the call's error instead,
 * and nothing runs in its place. */
static bp_status strict_refuse(const bp_op_call *c, const bp_seam_slot *s, const char *cause) {
    const bp_op_shape sh = bp_op_call_shape(c, 0);
    return bp_fail(BP_E_FALLBACK,
                   "strict mode: %s of %s %lld x %lld (batch %lld) on %s failed: %s; not falling back "
                   "(BACKPLANE_STRICT / bp_set_strict)",
                   bp_op_name_of(c->op), kind_name(call_kind(c)), (long long)sh.rows, (long long)sh.cols,
                   (long long)(sh.t ? sh.t : 1), s->caps->display_name, cause && *cause ? cause : "unspecified error");
}

/* Failures of one call, logged once it has run so each line names who ran it instead. */
typedef struct pending {
    int n;
    struct { const char *backend, *display; char cause[200]; } f[BP_BACKEND_COUNT + 1];
} pending;

static void add_pending(pending *p, const bp_seam_slot *s, const char *err) {
    if (p->n >= (int)(sizeof p->f / sizeof p->f[0])) return;
    p->f[p->n].backend = s->caps->name;
    p->f[p->n].display = s->caps->display_name;
    snprintf(p->f[p->n].cause, sizeof p->f[p->n].cause, "%s", err && err[0] ? err : "unspecified error");
    p->n++;
}

/* The record of what ran, the fallbacks logged against it, and the readers' copies. */
static void finish(const bp_op_call *c, int slot, const char *cpu_kernel, const pending *p, double t0,
                   const bp_dev_traffic *moved0, bp_run_record *out) {
    bp_run_record r;
    bp_seam_record_fill(&r, c, slot, cpu_kernel);
    if (p->n) {
        snprintf(r.fallback_from, sizeof r.fallback_from, "%s", p->f[0].display);
        snprintf(r.cause, sizeof r.cause, "%s", p->f[0].cause);
    }
    for (int i = 0; i < p->n; i++)
        record_fallback(p->f[i].backend, call_kind(c), bp_op_name_of(c->op), p->f[i].cause, slot < 0 ? "CPU" : r.display);
    bp_seam_records_add(c, &r, slot, bp_seam_now() - t0, moved0);
    if (out) *out = r;
}

static _Thread_local bool cpu_pinned;

bool bp_seam_set_cpu_only(bool on) {
    const bool was = cpu_pinned;
    cpu_pinned = on;
    return was;
}

bp_status bp_seam_run(const bp_op_call *c, bp_seam_cpu_fn cpu, bp_run_record *rec) {
    const double t0 = bp_seam_now();
    bp_dev_traffic moved0;
    bp_dev_thread_traffic(&moved0);
    pending p = {0};
    char err[200];
    int order[BP_BACKEND_COUNT + 1];
    const int n = c->cpu_only || cpu_pinned ? 0 : bp_seam_order(order, BP_BACKEND_COUNT + 1);
    for (int j = 0; j < n; j++) {
        const int i = order[j];
        const bp_seam_slot *s = bp_seam_slot_at(i);
        const bp_seam_take take = bp_seam_takes(i, c, err, sizeof err);
        if (take == BP_TAKE_LOST) {
            /* Disabled after a device loss: every call it would have taken is a counted
             * fallback naming that cause, not a silent change of route. */
            if (bp_strict_mode()) return strict_refuse(c, s, err);
            add_pending(&p, s, err);
            continue;
        }
        if (take != BP_TAKE_YES) continue;
        const bp_launch r = launch_on(i, c, err, sizeof err);
        if (r == BP_LAUNCH_OK) {
            finish(c, i, NULL, &p, t0, &moved0, rec);
            return BP_OK;
        }
        if (r == BP_LAUNCH_LOST) bp_seam_slot_mark_lost(i, err);
        if (r == BP_LAUNCH_ERROR || r == BP_LAUNCH_LOST) {
            if (bp_strict_mode()) return strict_refuse(c, s, err);
            add_pending(&p, s, err);
        }
    }
    char kernel[sizeof ((bp_run_record *)0)->kernel] = "";
    const bp_status st = cpu(c, kernel, sizeof kernel);
    if (st) {
        for (int i = 0; i < p.n; i++) record_fallback(p.f[i].backend, call_kind(c), bp_op_name_of(c->op), p.f[i].cause, "CPU");
        return st;
    }
    finish(c, -1, kernel, &p, t0, &moved0, rec);
    return BP_OK;
}

bp_status bp_seam_forced_slot(const bp_op_call *c, const char *backend, int *slot) {
    const char *op = bp_op_name_of(c->op);
    const int i = bp_seam_slot_find(backend);
    if (i < 0) return bp_fail(BP_E_NOT_FOUND, "%s: no backend called '%s'", op, backend);
    const bp_seam_slot *s = bp_seam_slot_at(i);
    const char *reason = "";
    if (!s->dispatch) return bp_fail(BP_E_UNSUPPORTED, "%s: %s is not built into this binary", op, backend);
    if (!bp_seam_slot_enabled(i, &reason)) return bp_fail(BP_E_UNSUPPORTED, "%s: %s is disabled: %s", op, backend, reason);
    /* The claims of the rule, without its shape test: a forced backend takes every shape. */
    bp_kind kinds[16];
    const int nk = bp_op_call_kinds(c, kinds, 16);
    for (int j = 0; j < nk; j++)
        if (!bp_seam_slot_claims(i, c->op, kinds[j]))
            return bp_fail(BP_E_UNSUPPORTED, "%s has no %s %s kernel", backend, kind_name(kinds[j]), op);
    *slot = i;
    return BP_OK;
}

bp_status bp_seam_run_on(const bp_op_call *c, const char *backend, bp_seam_cpu_fn cpu, bp_run_record *rec) {
    const char *op = bp_op_name_of(c->op);
    const pending none = {0};
    if (!backend) return bp_seam_run(c, cpu, rec);
    const double t0 = bp_seam_now();
    bp_dev_traffic moved0;
    bp_dev_thread_traffic(&moved0);
    if (!strcmp(backend, "cpu")) {
        char kernel[sizeof ((bp_run_record *)0)->kernel] = "";
        bp_status st = cpu(c, kernel, sizeof kernel);
        if (!st) finish(c, -1, kernel, &none, t0, &moved0, rec);
        return st;
    }
    int i;
    bp_status st = bp_seam_forced_slot(c, backend, &i);
    if (st) return st;
    char why[200];
    char err[200];
    const bp_launch r = launch_on(i, c, err, sizeof err);
    snprintf(why, sizeof why, "%s", err[0] ? err : "unspecified error");
    if (r == BP_LAUNCH_NO_KERNEL)
        return bp_fail(BP_E_UNSUPPORTED, "%s declined the %s %s call", backend, op, kind_name(call_kind(c)));
    if (r == BP_LAUNCH_LOST) {
        bp_seam_slot_mark_lost(i, why);
        return bp_fail(BP_E_DEVICE_LOST, "%s %s %s failed, device lost: %s", backend, kind_name(call_kind(c)), op, why);
    }
    if (r == BP_LAUNCH_ERROR) return bp_fail(BP_E_DEVICE, "%s %s %s failed: %s", backend, kind_name(call_kind(c)), op, why);
    finish(c, i, NULL, &none, t0, &moved0, rec);
    return BP_OK;
}
