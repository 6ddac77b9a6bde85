/* Routes: THE rule that decides where a call runs, for every op of the op table, shared by the
 * walk (walk.c), `backplane probe`, the public bp_route()/bp_route_op() and the op layer's jobs
 * split, so a report can never name a backend the call will not run on. Plus the process-wide
 * backend preference (bp_set_backend_preference, BACKPLANE_BACKEND) and the public backend list.
 *
 * A slot takes a call when it is compiled in, claims every kind the call carries, is enabled
 * (env, else probe; a CPU implementation only when forced), and wants its shape
 * (BACKPLANE_<B>_MIN_WORK, else the cost model of src/backend/cost.c, else the backend's own
 * wants), the backend forced by the preference taking every shape. Slots are asked in
 * bp_seam_order(): the preferred backend first, then the table's order. */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cpu/cpu.h"
#include "seam/seam_internal.h"

/* ---- the preference ------------------------------------------------------------------------ */

static pthread_mutex_t pref_lock = PTHREAD_MUTEX_INITIALIZER;
static bool pref_env_read;
static char pref_name[16]; /* "" when none */
static bp_backend_pref pref_mode;

/* The name of what runs when the preferred backend cannot: the first enabled slot of the
 * table's order, else the CPU. */
static const char *default_first(void) {
    int n = bp_seam_slot_count();
    for (int i = 0; i < n; i++)
        if (bp_seam_slot_enabled(i, NULL)) return bp_seam_slot_at(i)->caps->display_name;
    return "CPU";
}

/* The oxinfer-style one-line report: "[CUDA: no device ...; using CPU]". */
static void report_unusable(int i) {
    const char *reason = "";
    const bp_seam_slot *s = bp_seam_slot_at(i);
    if (!s->dispatch) reason = "not compiled into this binary";
    else bp_seam_slot_enabled(i, &reason);
    bp_seam_logf("[%s: %s; using %s]\n", s->caps->display_name, reason, default_first());
}

/* Under pref_lock. A preference naming a backend that cannot run is kept (it may never run,
 * but the order is the table's then) and reported once. */
static void read_env_locked(void) {
    if (pref_env_read) return;
    pref_env_read = true;
    const char *v = getenv("BACKPLANE_BACKEND");
    if (!v || !*v) return;
    if (strcmp(v, "cpu") && bp_seam_slot_find(v) < 0) {
        bp_seam_logf("[BACKPLANE_BACKEND=%s: no such backend (%s); using the default order]\n", v,
                     bp_backend_names_list());
        return;
    }
    snprintf(pref_name, sizeof pref_name, "%s", v);
    pref_mode = BP_PREFER;
    int i = bp_seam_slot_find(v);
    if (i >= 0 && !bp_seam_slot_enabled(i, NULL)) report_unusable(i);
}

bp_status bp_set_backend_preference(const char *name, bp_backend_pref mode) {
    if (mode != BP_PREFER && mode != BP_FORCE) return bp_fail(BP_E_INVAL, "bp_set_backend_preference: bad mode %d", (int)mode);
    pthread_mutex_lock(&pref_lock);
    pref_env_read = true; /* the call overrides the environment */
    pthread_mutex_unlock(&pref_lock);
    int i = name ? bp_seam_slot_find(name) : -1;
    if (name && strcmp(name, "cpu") && i < 0)
        return bp_fail(BP_E_NOT_FOUND, "bp_set_backend_preference: no backend called '%s' (%s)", name,
                       bp_backend_names_list());
    if (i >= 0 && mode == BP_FORCE) {
        const char *reason = "";
        if (!bp_seam_slot_at(i)->dispatch)
            return bp_fail(BP_E_UNSUPPORTED, "cannot force %s: it is not built into this binary", name);
        if (!bp_seam_slot_enabled(i, &reason))
            return bp_fail(BP_E_UNSUPPORTED, "cannot force %s: it is disabled: %s", name, reason);
    }
    pthread_mutex_lock(&pref_lock);
    snprintf(pref_name, sizeof pref_name, "%s", name ? name : "");
    pref_mode = mode;
    pthread_mutex_unlock(&pref_lock);
    if (i >= 0 && mode == BP_PREFER && !bp_seam_slot_enabled(i, NULL)) report_unusable(i);
    return BP_OK;
}

const char *bp_backend_preference(bp_backend_pref *mode) {
    static _Thread_local char copy[sizeof pref_name];
    pthread_mutex_lock(&pref_lock);
    read_env_locked();
    memcpy(copy, pref_name, sizeof copy);
    if (mode) *mode = pref_mode;
    pthread_mutex_unlock(&pref_lock);
    return copy[0] ? copy : NULL;
}

bool bp_seam_pref_forced(void) {
    bp_backend_pref mode;
    const char *p = bp_backend_preference(&mode);
    return p && mode == BP_FORCE;
}

/* Slot i is the backend forced by bp_set_backend_preference(name, BP_FORCE). */
static bool forced_slot(int i) {
    bp_backend_pref mode;
    const char *p = bp_backend_preference(&mode);
    return p && mode == BP_FORCE && bp_seam_slot_find(p) == i;
}

void bp_seam_test_reset_preference(void) {
    pthread_mutex_lock(&pref_lock);
    pref_env_read = false;
    pref_name[0] = '\0';
    pref_mode = BP_PREFER;
    pthread_mutex_unlock(&pref_lock);
}

int bp_seam_order(int *order, int max) {
    bp_backend_pref mode;
    const char *p = bp_backend_preference(&mode);
    int n = bp_seam_slot_count(), out = 0;
    if (p && !strcmp(p, "cpu")) return 0;
    int pi = p ? bp_seam_slot_find(p) : -1;
    if (pi >= 0 && out < max) order[out++] = pi;
    if (pi >= 0 && mode == BP_FORCE) return out;
    for (int i = 0; i < n && out < max; i++)
        if (i != pi) order[out++] = i;
    return out;
}

/* ---- the rule ---------------------------------------------------------------------------- */

static void put(char *why, size_t len, const char *fmt, ...) BP_PRINTF(3, 4);
static void put(char *why, size_t len, const char *fmt, ...) {
    if (!why || !len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

static const char *kind_name(bp_kind k) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    return ki ? ki->name : "?";
}

static bool claims(const bp_seam_slot *s, bp_op op, bp_kind k) {
    return s->caps->kernel && s->caps->kernel(op, k);
}

bool bp_seam_slot_per_position(int i, bp_kind k) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    return s && !claims(s, BP_OP_GEMM, k) && claims(s, BP_OP_MATVEC, k);
}

bool bp_seam_slot_claims(int i, bp_op op, bp_kind k) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    return s && (claims(s, op, k) || (op == BP_OP_GEMM && claims(s, BP_OP_MATVEC, k)));
}

/* Does slot i want one part of kind k at shape sh? (MIN_WORK, a forced CPU implementation,
 * the cost model, the backend's wants; see bp_seam_takes_shape.) */
static bool wants(int i, bp_op op, bp_kind k, const bp_op_shape *sh, char *why, size_t why_len) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    bp_op_shape one = *sh;
    if (one.t < 1) one.t = 1;
    const bp_op_work w = bp_op_work_of(op, k, &one);
    if (s->min_work >= 0) {
        if (w.units >= (double)s->min_work) return true;
        put(why, why_len, "%s_MIN_WORK=%lld: %lld x %lld x %lld is below it", s->env_name, s->min_work,
            (long long)one.rows, (long long)one.cols, (long long)one.t);
        return false;
    }
    const bp_device_desc *d = bp_seam_slot_desc(i);
    /* Forced on although it is a CPU implementation: the user asked to run there (it can never
     * beat the native CPU backend, so a cost comparison would decline every shape). */
    if (d && d->cls == BP_DEVICE_CPU_IMPL) return true;
    if (d && (d->cost.mem_gbps > 0 || d->cost.gflops > 0)) {
        bp_cost_model cpu;
        bp_cost_cpu(&cpu);
        /* Without a gemm for the kind a prefill is t matvecs: t calls, t overheads. */
        double dev_us;
        if (op == BP_OP_GEMM && one.t > 1 && bp_seam_slot_per_position(i, k)) {
            bp_op_shape m1 = {one.rows, one.cols, 1};
            const bp_op_work w1 = bp_op_work_of(BP_OP_MATVEC, k, &m1);
            dev_us = (double)one.t * bp_cost_us(&d->cost, &w1);
        } else
            dev_us = bp_cost_us(&d->cost, &w);
        const double cpu_us = bp_cost_us(&cpu, &w);
        if (dev_us < cpu_us) return true;
        put(why, why_len, "declines %lld x %lld x %lld: modelled %.3g us on the device vs %.3g us on the CPU",
            (long long)one.rows, (long long)one.cols, (long long)one.t, dev_us, cpu_us);
        return false;
    }
    if (s->dispatch->wants && !s->dispatch->wants(op, k, &one)) {
        put(why, why_len, "declines %lld x %lld x %lld (its own threshold)", (long long)one.rows, (long long)one.cols,
            (long long)one.t);
        return false;
    }
    return true;
}

bp_seam_take bp_seam_takes_shape(int i, bp_op op, const bp_kind *kinds, const bp_op_shape *shapes, int n, bp_kind k2,
                                 char *why, size_t why_len) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    if (why && why_len) why[0] = '\0';
    if (!s || !s->dispatch) {
        put(why, why_len, "not compiled into this binary");
        return BP_TAKE_NOT_COMPILED;
    }
    for (int j = 0; j <= n; j++) {
        const bp_kind k = j < n ? kinds[j] : k2;
        if (bp_seam_slot_claims(i, op, k)) continue;
        put(why, why_len, "no %s %s kernel", bp_op_name_of(op), kind_name(k));
        return BP_TAKE_NO_CLAIM;
    }
    const char *reason = "";
    bool on = bp_seam_slot_enabled(i, &reason);
    const bool lost = !on && __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == BP_SLOT_LOST;
    if (!on && !lost) {
        put(why, why_len, "disabled: %s", reason);
        return BP_TAKE_DISABLED;
    }
    /* A forced preference runs every call it claims there: no threshold. */
    if (!(forced_slot(i) && !lost))
        for (int j = 0; j < n; j++)
            if (!wants(i, op, kinds[j], &shapes[j], why, why_len)) return BP_TAKE_DECLINED;
    if (lost) {
        put(why, why_len, "%s", reason);
        return BP_TAKE_LOST;
    }
    return BP_TAKE_YES;
}

bp_seam_take bp_seam_takes(int i, const bp_op_call *c, char *why, size_t why_len) {
    enum { CHUNK = 16 };
    const int n = bp_op_call_parts(c);
    bp_kind kinds[CHUNK];
    bp_op_shape shapes[CHUNK];
    const bool two = c->op == BP_OP_ATTENTION || c->op == BP_OP_MOE || c->op == BP_OP_STEP; /* a second kind */
    bp_seam_take take = BP_TAKE_YES;
    /* A step carries the model's weight kinds too: the slot must claim jobs for every one (the
     * same matmul kernels the step records), whatever its step claim says. */
    if (c->op == BP_OP_STEP) {
        /* No device step records routed experts: such a step runs op by op, and its MoE op is
         * routed on its own (bp_moe_run, with the MoE offload switch). */
        if (bp_step_has_node(c->u.step.prog, BP_STEP_MOE)) {
            put(why, why_len, "the step has routed experts, which only run op by op");
            return bp_seam_slot_at(i) && bp_seam_slot_at(i)->dispatch ? BP_TAKE_NO_CLAIM : BP_TAKE_NOT_COMPILED;
        }
        /* Attention sinks and YaRN RoPE (gpt-oss) and a RoPE magnitude (Phi-3 LongRoPE's
         * attn_factor; its factors alone are only frequencies, which a device step's table
         * holds) are the CPU's alone: no device step kernel implements them, so such a step is
         * declined by name rather than run without them. */
        for (int j = 0; j < c->u.step.prog->n_nodes; j++) {
            const bp_step_node *nd = &c->u.step.prog->nodes[j];
            const char *no = nd->kind == BP_STEP_ATTENTION && nd->attn.sinks ? "attention sinks (attn_sinks)"
                             : nd->kind == BP_STEP_ROPE && nd->rope.ext_factor > 0 ? "YaRN RoPE"
                             : nd->kind == BP_STEP_ROPE && nd->rope_attn != 0 && nd->rope_attn != 1.0f
                                 ? "a LongRoPE magnitude (rope.scaling.attn_factor)"
                                 : NULL;
            if (no) {
                put(why, why_len, "the step has %s, which no device step kernel implements", no);
                return bp_seam_slot_at(i) && bp_seam_slot_at(i)->dispatch ? BP_TAKE_NO_CLAIM : BP_TAKE_NOT_COMPILED;
            }
        }
        bp_kind wk[32];
        const int nw = bp_step_weight_kinds(c->u.step.prog, wk, 32);
        for (int j = 0; j < nw; j++)
            if (!bp_seam_slot_claims(i, BP_OP_JOBS, wk[j])) {
                put(why, why_len, "no jobs %s kernel (a step runs every matmul of the model)", kind_name(wk[j]));
                return bp_seam_slot_at(i) && bp_seam_slot_at(i)->dispatch ? BP_TAKE_NO_CLAIM : BP_TAKE_NOT_COMPILED;
            }
    }
    /* Parts in chunks: every part must be taken, the first refusal is the answer. */
    for (int j0 = 0; j0 < n && take == BP_TAKE_YES; j0 += CHUNK) {
        int m = n - j0 < CHUNK ? n - j0 : CHUNK;
        for (int j = 0; j < m; j++) kinds[j] = bp_op_call_kind(c, j0 + j), shapes[j] = bp_op_call_shape(c, j0 + j);
        take = bp_seam_takes_shape(i, c->op, kinds, shapes, m, two ? c->kind2 : kinds[0], why, why_len);
    }
    return take;
}

void bp_seam_why_add(char *why, size_t why_len, size_t *used, int slot, const char *answer) {
    if (!why || *used + 1 >= why_len) return;
    int m = snprintf(why + *used, why_len - *used, "%s%s: %s", *used ? "; " : "", bp_seam_slot_at(slot)->caps->name,
                     answer);
    *used = m < 0 ? *used : *used + (size_t)m < why_len ? *used + (size_t)m : why_len - 1;
}

int bp_seam_route(bp_op op, bp_kind k, bp_kind k2, const bp_op_shape *s, bp_run_record *pred, char *why,
                  size_t why_len) {
    int order[BP_BACKEND_COUNT + 1];
    int n = bp_seam_order(order, BP_BACKEND_COUNT + 1);
    size_t used = 0;
    if (why && why_len) why[0] = '\0';
    int hit = -1;
    for (int j = 0; j < n && hit < 0; j++) {
        char one[400];
        bp_seam_take tk = bp_seam_takes_shape(order[j], op, &k, s, 1, k2, one, sizeof one);
        if (tk == BP_TAKE_YES) {
            hit = order[j];
            break;
        }
        bp_seam_why_add(why, why_len, &used, order[j], one);
    }
    if (pred) {
        /* A stand-in call carrying only what a record reads: op, kinds, shape. */
        bp_weight w = {.kind = k, .rows = s->rows, .cols = s->cols};
        bp_matmul_job job = {&w, NULL};
        bp_op_call c = {.op = op, .kind = k, .kind2 = k2, .shape = *s};
        if (op <= BP_OP_GEMM) c.u.mm.w = &w, c.u.mm.t = s->t;
        if (op == BP_OP_JOBS) c.u.jobs.jobs = &job, c.u.jobs.n_jobs = 1, c.u.jobs.t = s->t;
        const bool mm = op <= BP_OP_JOBS;
        bp_seam_record_fill(pred, &c, hit, hit < 0 && mm ? bp_cpu_kernel_name(k, s->t < 1 ? 1 : s->t) : "");
    }
    return hit;
}

/* ---- public queries ---------------------------------------------------------------------- */

int bp_backend_count(void) { return bp_seam_slot_count() + 1; }

bp_status bp_backend_info_at(int i, bp_backend_info *out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_backend_info_at: out is NULL");
    memset(out, 0, sizeof *out);
    int n = bp_seam_slot_count();
    if (i < 0 || i > n) return bp_fail(BP_E_INVAL, "bp_backend_info_at: index %d out of 0..%d", i, n);
    if (i == n) {
        out->name = "cpu";
        out->display = "CPU";
        out->compiled = out->enabled = true;
        bp_backend_enabled(BP_BACKEND_CPU, &out->reason);
        out->device = bp_cpu_isa_name(bp_cpu_isa_current());
        return BP_OK;
    }
    const bp_seam_slot *s = bp_seam_slot_at(i);
    out->name = s->caps->name;
    out->display = s->caps->display_name;
    out->compiled = s->dispatch != NULL;
    out->enabled = bp_seam_slot_enabled(i, &out->reason);
    out->unverified = s->caps->unverified;
    /* Ask the device only where the probe or the env already opened (or may open) it. */
    const bp_device_desc *d = out->compiled && (out->enabled || s->described) ? bp_seam_slot_desc(i) : NULL;
    out->device = d ? d->name : "";
    out->cpu_implementation = d && d->cls == BP_DEVICE_CPU_IMPL;
    return BP_OK;
}

bp_status bp_route(bp_kind k, int64_t rows, int64_t cols, int64_t batch, bp_route_info *out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_route: out is NULL");
    memset(out, 0, sizeof *out);
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    if (!ki || ki->role != BP_ROLE_W) return bp_fail(BP_E_KIND, "bp_route: %d is not a weight kind", (int)k);
    if (rows <= 0 || cols <= 0 || batch <= 0)
        return bp_fail(BP_E_SHAPE, "bp_route: %lld x %lld, batch %lld: all must be positive", (long long)rows,
                       (long long)cols, (long long)batch);
    /* A batch of one is bp_matvec's call, more bp_gemm's (and a decode step's jobs). */
    const bp_op op = batch == 1 ? BP_OP_MATVEC : BP_OP_GEMM;
    const bp_op_shape sh = {rows, cols, batch};
    bp_run_record r;
    bp_seam_route(op, k, k, &sh, &r, out->why, sizeof out->why);
    snprintf(out->backend, sizeof out->backend, "%s", r.backend);
    snprintf(out->display, sizeof out->display, "%s", r.display);
    bp_run_record_label(&r, out->path, sizeof out->path);
    out->per_position = r.per_position;
    return BP_OK;
}
