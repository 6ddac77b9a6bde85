/* Run records: filled by the walk where the work ran (walk.c), kept where readers find them --
 * each weight's last record, each thread's last record per op, and the tally every distinct
 * record is counted in -- and turned into text only to print (bp_run_record_label). `run`'s
 * summaries, `--profile`, bp_stats_* and bp_route read these; none rebuilds a string. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "cpu/cpu.h"
#include "seam/seam_internal.h"

double bp_seam_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A string into a fixed field, cut to fit (a record is filled on every call: no printf). */
static void copy(char *dst, size_t len, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= len) n = len - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

void bp_seam_record_fill(bp_run_record *r, const bp_op_call *c, int i, const char *cpu_kernel) {
    memset(r, 0, sizeof *r);
    r->op = (int)c->op;
    r->kind = bp_op_call_kind(c, 0);
    r->kind2 = c->op == BP_OP_ATTENTION || c->op == BP_OP_MOE || c->op == BP_OP_STEP ? c->kind2 : r->kind;
    r->batch = bp_op_call_shape(c, 0).t;
    r->part = c->op == BP_OP_STEP && c->u.step.prog && c->u.step.prog->part == 1;
    const bp_seam_slot *s = i >= 0 ? bp_seam_slot_at(i) : NULL;
    if (!s) {
        copy(r->backend, sizeof r->backend, "cpu");
        copy(r->display, sizeof r->display, "CPU");
        copy(r->kernel, sizeof r->kernel, cpu_kernel);
        return;
    }
    copy(r->backend, sizeof r->backend, s->caps->name);
    copy(r->display, sizeof r->display, s->caps->display_name);
    if (c->op == BP_OP_GEMM && bp_seam_slot_per_position(i, r->kind)) {
        r->per_position = true;
        copy(r->kernel, sizeof r->kernel, s->caps->prefill_fallback_name);
    } else
        copy(r->kernel, sizeof r->kernel, s->caps->kernel ? s->caps->kernel(c->op, r->kind) : "?");
}

const char *bp_run_record_label(const bp_run_record *r, char *buf, size_t len) {
    if (!buf || !len) return buf;
    if (!r) {
        buf[0] = '\0';
        return buf;
    }
    int n;
    if (!strcmp(r->backend, "cpu") || r->per_position) n = snprintf(buf, len, "%s", r->kernel);
    else if (r->op == BP_OP_MATVEC || r->op == BP_OP_GEMM)
        n = snprintf(buf, len, "%s %s %s", r->display, r->kernel, bp_op_name(r->op));
    else n = snprintf(buf, len, "%s %s", r->display, r->kernel);
    if (n >= 0 && (size_t)n < len && r->fallback_from[0])
        n += snprintf(buf + n, len - (size_t)n, " (fallback from %s: %s)", r->fallback_from, r->cause);
    /* A cause may not fit: a truncated label is fine, the full cause is in the log. */
    if (n >= (int)len && len > 4) memcpy(buf + len - 4, "...", 4);
    return buf;
}

/* ---- weights' records --------------------------------------------------------------------- */

/* Several threads may run ops on one weight (batched sequences, MoE experts): the record is
 * written and read under a lock. */
static pthread_mutex_t weight_lock = PTHREAD_MUTEX_INITIALIZER;

void bp_seam_set_weight_record(bp_weight *w, const bp_run_record *r) {
    pthread_mutex_lock(&weight_lock);
    w->last = *r;
    pthread_mutex_unlock(&weight_lock);
}

static bool weight_record(const bp_weight *w, bp_run_record *out) {
    pthread_mutex_lock(&weight_lock);
    *out = w->last;
    pthread_mutex_unlock(&weight_lock);
    return out->backend[0] != '\0';
}

bp_status bp_weight_last_record(const bp_weight *w, bp_run_record *out) {
    if (!w || !out) return bp_fail(BP_E_INVAL, "bp_weight_last_record: NULL argument");
    if (!weight_record(w, out)) return bp_fail(BP_E_NOT_FOUND, "bp_weight_last_record: nothing has run this weight yet");
    return BP_OK;
}

const char *bp_weight_last_path(const bp_weight *w) {
    static _Thread_local char label[sizeof ((bp_run_record *)0)->kernel + 260];
    bp_run_record r;
    if (!w) return "";
    if (!weight_record(w, &r)) return "none yet";
    return bp_run_record_label(&r, label, sizeof label);
}

/* ---- each thread's last record per op ----------------------------------------------------- */

static _Thread_local bp_run_record last_op[BP_OP_COUNT];

static int op_index(const char *op) {
    for (int i = 0; op && i < BP_OP_COUNT; i++)
        if (!strcmp(op, bp_op_name(i))) return i;
    return -1;
}

bp_status bp_op_last_record(const char *op, bp_run_record *out) {
    int i = op_index(op);
    if (!out) return bp_fail(BP_E_INVAL, "bp_op_last_record: out is NULL");
    if (i < 0) return bp_fail(BP_E_NOT_FOUND, "bp_op_last_record: no op called '%s'", op ? op : "(null)");
    if (!last_op[i].backend[0]) return bp_fail(BP_E_NOT_FOUND, "bp_op_last_record: no %s call on this thread yet", op);
    *out = last_op[i];
    return BP_OK;
}

const char *bp_op_last_path(const char *op) {
    static _Thread_local char label[sizeof ((bp_run_record *)0)->kernel + 260];
    int i = op_index(op);
    if (i < 0 || !last_op[i].backend[0]) return "";
    return bp_run_record_label(&last_op[i], label, sizeof label);
}

/* ---- the tally ----------------------------------------------------------------------------- */

enum { MAX_TALLY = 512 };
static pthread_mutex_t tally_lock = PTHREAD_MUTEX_INITIALIZER;
static bp_run_tally tally[MAX_TALLY];
static int n_tally;
static unsigned long long tally_dropped;

static bool same_row(const bp_run_record *a, const bp_run_record *b) {
    return a->op == b->op && a->kind == b->kind && a->kind2 == b->kind2 && (a->batch == 1) == (b->batch == 1) &&
           a->per_position == b->per_position && a->part == b->part && !strcmp(a->backend, b->backend) && !strcmp(a->kernel, b->kernel) &&
           !strcmp(a->fallback_from, b->fallback_from);
}

static void tally_add(const bp_run_record *r, double seconds, const bp_op_work *w, uint64_t h2d, uint64_t d2h) {
    /* A model calls each op with the same few records over and over: try this thread's last row
     * of the op first (a hint only: it is checked like any other row). */
    static _Thread_local int hint[BP_OP_COUNT];
    const int op = (unsigned)r->op < BP_OP_COUNT ? r->op : 0;
    pthread_mutex_lock(&tally_lock);
    int i = hint[op] < n_tally && same_row(&tally[hint[op]].record, r) ? hint[op] : 0;
    while (i < n_tally && !same_row(&tally[i].record, r)) i++;
    hint[op] = i;
    if (i == n_tally) {
        if (n_tally == MAX_TALLY) {
            tally_dropped++;
            pthread_mutex_unlock(&tally_lock);
            return;
        }
        memset(&tally[n_tally], 0, sizeof tally[0]);
        tally[n_tally].record = *r;
        n_tally++;
    }
    bp_run_tally *t = &tally[i];
    if (r->batch > t->record.batch) t->record.batch = r->batch;
    t->calls++;
    t->seconds += seconds;
    t->bytes += w->weight_bytes + w->act_bytes;
    t->flops += w->flops;
    t->tokens += (unsigned long long)(r->batch > 0 ? r->batch : 1);
    t->h2d_bytes += h2d, t->d2h_bytes += d2h;
    pthread_mutex_unlock(&tally_lock);
}

static double job_weight_bytes(const bp_op_call *c, int j) {
    const bp_weight *w = c->u.jobs.jobs[j].w;
    return (double)w->row_bytes * (double)w->rows;
}

void bp_seam_records_add(const bp_op_call *c, const bp_run_record *r, int slot, double seconds,
                         const bp_dev_traffic *moved0) {
    if ((unsigned)c->op >= BP_OP_COUNT) return;
    bp_dev_traffic moved = {0};
    if (moved0) {
        bp_dev_thread_traffic(&moved);
        moved.h2d_bytes -= moved0->h2d_bytes, moved.d2h_bytes -= moved0->d2h_bytes;
    }
    const int n = bp_op_call_parts(c);
    const bp_seam_slot *s = slot >= 0 ? bp_seam_slot_at(slot) : NULL;
    double total = 0;
    for (int j = 0; j < n && n > 1; j++) total += job_weight_bytes(c, j);
    /* One record per part: r names the call's first job; every later job gets its own kind and
     * the kernel that ran it there, and a share of the call's time and bytes moved by weight
     * bytes (the bytes cut at cumulative shares, so the parts add up to the call's exactly). */
    double cum = 0;
    uint64_t given_h = 0, given_d = 0;
    for (int j = 0; j < n; j++) {
        bp_run_record rj = *r;
        if (j > 0) {
            rj.kind = rj.kind2 = bp_op_call_kind(c, j);
            copy(rj.kernel, sizeof rj.kernel,
                 s ? s->caps->kernel(BP_OP_JOBS, rj.kind) : bp_cpu_kernel_name(rj.kind, c->u.jobs.t));
        }
        const bp_op_shape sh = bp_op_call_shape(c, j);
        const bp_op_work w = bp_op_work_of(c->op, rj.kind, &sh);
        if (j == 0) last_op[c->op] = rj;
        if (c->op <= BP_OP_JOBS) bp_seam_set_weight_record(c->op == BP_OP_JOBS ? c->u.jobs.jobs[j].w : c->u.mm.w, &rj);
        const double share = n > 1 && total > 0 ? job_weight_bytes(c, j) / total : 1.0 / n;
        cum = j == n - 1 ? 1.0 : cum + share;
        const uint64_t h = (uint64_t)((double)moved.h2d_bytes * cum + 0.5) - given_h;
        const uint64_t d = (uint64_t)((double)moved.d2h_bytes * cum + 0.5) - given_d;
        given_h += h, given_d += d;
        tally_add(&rj, seconds * share, &w, h, d);
    }
}

int bp_run_tally_get(bp_run_tally *out, int max) {
    pthread_mutex_lock(&tally_lock);
    for (int i = 0; out && i < n_tally && i < max; i++) out[i] = tally[i];
    int n = n_tally;
    pthread_mutex_unlock(&tally_lock);
    return n;
}

/* ---- the stats: the tally by (op, backend) --------------------------------------------------- */

int bp_stats_get(bp_op_stat *out, int max) {
    int n = 0;
    pthread_mutex_lock(&tally_lock);
    for (int op = 0; op < BP_OP_COUNT; op++) {
        for (int i = 0; i < n_tally; i++) {
            const bp_run_tally *t = &tally[i];
            if (t->record.op != op) continue;
            bool seen = false; /* one row per (op, backend): only the backend's first tally row opens it */
            for (int j = 0; j < i && !seen; j++)
                seen = tally[j].record.op == op && !strcmp(tally[j].record.backend, t->record.backend);
            if (seen) continue;
            bp_op_stat st = {bp_op_name(op), t->record.backend, 0, 0, 0, 0};
            for (int j = i; j < n_tally; j++) {
                if (tally[j].record.op != op || strcmp(tally[j].record.backend, t->record.backend)) continue;
                st.calls += tally[j].calls, st.seconds += tally[j].seconds;
                st.bytes += tally[j].bytes, st.flops += tally[j].flops;
            }
            if (out && n < max) out[n] = st;
            n++;
        }
    }
    pthread_mutex_unlock(&tally_lock);
    return n;
}

void bp_stats_reset(void) {
    pthread_mutex_lock(&tally_lock);
    memset(tally, 0, sizeof tally);
    n_tally = 0;
    tally_dropped = 0;
    pthread_mutex_unlock(&tally_lock);
}

void bp_stats_report(FILE *out) {
    if (!out) return;
    static bp_run_tally rows[MAX_TALLY];
    static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&report_lock);
    int n = bp_run_tally_get(rows, MAX_TALLY);
    if (n > MAX_TALLY) n = MAX_TALLY;
    fprintf(out, "| op | kind | t | what ran | calls | ms | ms/call | GB/s | GFLOP/s |\n"
                 "|---|---|---|---|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++) {
        const bp_run_tally *t = &rows[i];
        char label[sizeof t->record.kernel + 260];
        const bp_kind_info *ki = bp_kind_lookup((uint32_t)t->record.kind);
        double s = t->seconds > 0 ? t->seconds : 1e-12;
        fprintf(out, "| %s | %s | %s | %s | %llu | %.3f | %.4f | %.2f | %.2f |\n", bp_op_name(t->record.op),
                ki ? ki->name : "?", t->record.batch == 1 ? "1" : "> 1", bp_run_record_label(&t->record, label, sizeof label),
                t->calls, 1e3 * t->seconds, 1e3 * t->seconds / (double)t->calls, t->bytes / s * 1e-9, t->flops / s * 1e-9);
    }
    if (!n) fprintf(out, "| (no ops ran) | | | | | | | | |\n");
    pthread_mutex_unlock(&report_lock);
    bp_fallback_report(out);
}
