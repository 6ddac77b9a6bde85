/* Routes (issue 17): the one rule that decides where an op runs, shared by the dispatch walk
 * (dispatch.c), `backplane probe --rows/--cols/--batch` and the public bp_route(), so a report
 * can never name a backend the op will not run on. Plus the process-wide backend preference
 * (bp_set_backend_preference, BACKPLANE_BACKEND) and the public backend list.
 *
 * For one op of kind k on a rows x cols weight with batch t, a slot takes it when it is
 * compiled in, claims k, is enabled (env, else probe; a CPU implementation only when forced),
 * and wants the shape (BACKPLANE_<B>_MIN_WORK, else the cost model of src/seam/cost.c). Slots
 * are asked in bp_seam_order(): the preferred backend first, then the table's order. */
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
        bp_seam_logf("[BACKPLANE_BACKEND=%s: no such backend (cuda, metal, vulkan, opencl, cpu); using the default "
                     "order]\n", v);
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
        return bp_fail(BP_E_NOT_FOUND, "bp_set_backend_preference: no backend called '%s' (cuda, metal, vulkan, opencl, cpu)",
                       name);
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

bp_seam_take bp_seam_slot_takes(int i, bp_kind k, int64_t rows, int64_t cols, int64_t t, char *why, size_t why_len) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    put(why, why_len, "%s", "");
    if (!s || !s->dispatch) {
        put(why, why_len, "not compiled into this binary");
        return BP_TAKE_NOT_COMPILED;
    }
    if (!s->caps->matvec_kernel(k)) {
        const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
        put(why, why_len, "no %s kernel", ki ? ki->name : "?");
        return BP_TAKE_NO_CLAIM;
    }
    const char *reason = "";
    bool on = bp_seam_slot_enabled(i, &reason);
    const bool lost = !on && __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == BP_SLOT_LOST;
    if (!on && !lost) {
        put(why, why_len, "disabled: %s", reason);
        return BP_TAKE_DISABLED;
    }
    /* A forced preference runs every op of a claimed kind there: no threshold. */
    if (!(forced_slot(i) && !lost) && !bp_seam_slot_wants_kind(i, k, rows, cols, t ? t : 1, why, why_len))
        return BP_TAKE_DECLINED;
    if (lost) {
        put(why, why_len, "%s", reason);
        return BP_TAKE_LOST;
    }
    return BP_TAKE_YES;
}

int bp_seam_route_shape(bp_kind k, int64_t rows, int64_t cols, int64_t t, char *why, size_t why_len) {
    int order[BP_BACKEND_COUNT + 1];
    int n = bp_seam_order(order, BP_BACKEND_COUNT + 1);
    size_t used = 0;
    if (why && why_len) why[0] = '\0';
    for (int j = 0; j < n; j++) {
        char one[400];
        bp_seam_take tk = bp_seam_slot_takes(order[j], k, rows, cols, t, one, sizeof one);
        if (tk == BP_TAKE_YES) return order[j];
        if (why && used + 1 < why_len) {
            int m = snprintf(why + used, why_len - used, "%s%s: %s", used ? "; " : "", bp_seam_slot_at(order[j])->caps->name,
                             one);
            used = m < 0 ? used : used + (size_t)m < why_len ? used + (size_t)m : why_len - 1;
        }
    }
    return -1;
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
    const int64_t t = batch == 1 ? 0 : batch;
    int i = bp_seam_route_shape(k, rows, cols, t, out->why, sizeof out->why);
    if (i < 0) {
        snprintf(out->backend, sizeof out->backend, "cpu");
        snprintf(out->display, sizeof out->display, "CPU");
        snprintf(out->path, sizeof out->path, "%s", bp_cpu_kernel_name(k, batch));
        return BP_OK;
    }
    const bp_seam_slot *s = bp_seam_slot_at(i);
    snprintf(out->backend, sizeof out->backend, "%s", s->caps->name);
    snprintf(out->display, sizeof out->display, "%s", s->caps->display_name);
    const char *kn = s->caps->matvec_kernel(k);
    if (!t) snprintf(out->path, sizeof out->path, "%s %s matvec", s->caps->display_name, kn);
    else if (s->caps->has_gemm(k) && s->dispatch->gemm)
        snprintf(out->path, sizeof out->path, "%s %s gemm", s->caps->display_name, kn);
    else {
        out->per_position = true;
        snprintf(out->path, sizeof out->path, "%s", s->caps->prefill_fallback_name);
    }
    return BP_OK;
}
