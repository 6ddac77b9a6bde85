/* The registry: backends.def expanded into names, the ungated capability loop, the gated
 * dispatch loop, the env grammar and the once-per-process enable decision. */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "seam/seam_internal.h"

/* Ungated: every row's capabilities, on every build. */
static const bp_backend_caps *const all_caps[] = {
#define BP_BACKEND(ENUM, name, display, ...) &bp_caps_##name,
#include "backend/backends.def"
#undef BP_BACKEND
};

/* Gated: a row's dispatch table, or NULL when the backend is not compiled in. */
static const bp_backend_dispatch *const all_dispatch[] = {
#define BP_BACKEND(ENUM, name, display, ...) BP_DISPATCH_OF(ENUM, name),
#include "backend/backends.def"
#undef BP_BACKEND
};

static const char *const names[] = {
#define BP_BACKEND(ENUM, name, display, ...) #name,
#include "backend/backends.def"
#undef BP_BACKEND
    "cpu",
};

static const char *const displays[] = {
#define BP_BACKEND(ENUM, name, display, ...) display,
#include "backend/backends.def"
#undef BP_BACKEND
    "CPU",
};

/* "cuda, metal, vulkan, opencl, cpu", for errors that list the names. */
static const char names_list[] =
#define BP_BACKEND(ENUM, name, display, ...) #name ", "
#include "backend/backends.def"
#undef BP_BACKEND
    "cpu";

const char *bp_backend_names_list(void) { return names_list; }

_Static_assert(sizeof all_caps / sizeof all_caps[0] == BP_BACKEND_CPU, "one caps row per enum value");
_Static_assert(sizeof names / sizeof names[0] == BP_BACKEND_COUNT, "one name per enum value");

enum { MAX_SLOTS = BP_BACKEND_CPU + 1 + BP_SEAM_MAX_REGISTERED }; /* the rows, a test's, registered ones */
static bp_seam_slot slots[MAX_SLOTS];
static int n_slots;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;
/* Guards the cached decisions. Held across a probe: a second thread asking about the same
 * backend waits for the first probe instead of probing again. */
static pthread_mutex_t decide_lock = PTHREAD_MUTEX_INITIALIZER;

static void env_name_of(const char *name, char *out, size_t len) {
    snprintf(out, len, "BACKPLANE_%s", name);
    for (char *p = out; *p; p++) *p = (char)toupper((unsigned char)*p);
}

static void init_slot(bp_seam_slot *s, const bp_backend_caps *caps, const bp_backend_dispatch *d) {
    memset(s, 0, sizeof *s);
    s->caps = caps;
    s->dispatch = d;
    s->min_work = -1;
    env_name_of(caps->name, s->env_name, sizeof s->env_name);
}

static void build_slots(void) {
    for (int i = 0; i < BP_BACKEND_CPU; i++) init_slot(&slots[i], all_caps[i], all_dispatch[i]);
    n_slots = BP_BACKEND_CPU;
}

int bp_seam_slot_count(void) {
    pthread_once(&slots_once, build_slots);
    return n_slots;
}

bp_seam_slot *bp_seam_slot_at(int i) {
    pthread_once(&slots_once, build_slots);
    return i >= 0 && i < n_slots ? &slots[i] : NULL;
}

int bp_seam_slot_find(const char *name) {
    int n = bp_seam_slot_count();
    for (int i = 0; name && i < n; i++)
        if (!strcmp(slots[i].caps->name, name)) return i;
    return -1;
}

const char *bp_backend_name(bp_backend_id id) {
    return (unsigned)id < BP_BACKEND_COUNT ? names[id] : NULL;
}

const char *bp_backend_display_name(bp_backend_id id) {
    return (unsigned)id < BP_BACKEND_COUNT ? displays[id] : NULL;
}

const bp_backend_caps *bp_backend_caps_of(bp_backend_id id) {
    return (unsigned)id < BP_BACKEND_CPU ? all_caps[id] : NULL;
}

const bp_backend_dispatch *bp_backend_dispatch_of(bp_backend_id id) {
    return (unsigned)id < BP_BACKEND_CPU ? all_dispatch[id] : NULL;
}

bp_status bp_backend_by_name(const char *name, bp_backend_id *id) {
    if (!name || !id) return bp_fail(BP_E_INVAL, "bp_backend_by_name: NULL argument");
    for (int i = 0; i < BP_BACKEND_COUNT; i++)
        if (!strcmp(names[i], name)) {
            *id = (bp_backend_id)i;
            return BP_OK;
        }
    return bp_fail(BP_E_NOT_FOUND, "no backend called '%s' (%s)", name, names_list);
}

/* ---- env grammar and the enable decision --------------------------------------------------- */

bp_env_decision bp_seam_env_parse(const char *v, const char *own_name) {
    if (!v) return BP_ENV_DEFER;
    if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcasecmp(v, "cpu"))
        return BP_ENV_OFF;
    if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "on") ||
        (own_name && !strcasecmp(v, own_name)))
        return BP_ENV_ON;
    return BP_ENV_DEFER;
}

bool bp_seam_decide(const char *env_name, const char *own_name, bool (*probe)(char *, size_t), char *reason,
                    size_t reason_len) {
    const char *v = getenv(env_name);
    switch (bp_seam_env_parse(v, own_name)) {
    case BP_ENV_OFF:
        snprintf(reason, reason_len, "%s=%s forces it off", env_name, v);
        return false;
    case BP_ENV_ON:
        snprintf(reason, reason_len, "%s=%s forces it on (no probe)", env_name, v);
        return true;
    case BP_ENV_DEFER: break;
    }
    char why[160] = "";
    bool ok = probe && probe(why, sizeof why);
    const char *pre = v ? env_name : NULL;
    if (ok)
        snprintf(reason, reason_len, "%s%s%s%sprobe found %s", pre ? pre : "", pre ? "=" : "", pre ? v : "",
                 pre ? " defers; " : "", why[0] ? why : "a device");
    else
        snprintf(reason, reason_len, "%s%s%s%sprobe: %s", pre ? pre : "", pre ? "=" : "", pre ? v : "",
                 pre ? " defers; " : "", !probe ? "no probe" : why[0] ? why : "no usable device");
    return ok;
}

/* The device description, asked once (under decide_lock). */
static const bp_device_desc *desc_locked(bp_seam_slot *s) {
    if (!s->described) {
        int got = -1;
        if (s->dispatch && s->dispatch->describe) {
            bp_device_desc d;
            memset(&d, 0, sizeof d);
            if (s->dispatch->describe(&d)) {
                s->desc = d;
                got = 1;
            }
        }
        /* Published after desc is written: bp_seam_slot_desc reads it without the lock. */
        __atomic_store_n(&s->described, got, __ATOMIC_RELEASE);
    }
    return s->described == 1 ? &s->desc : NULL;
}

static bool slot_enabled_locked(bp_seam_slot *s) {
    if (!s->dispatch) {
        if (!s->state) {
            /* Why it is absent is the build's business (option off, SDK missing, no macOS);
             * the configure log says which. */
            snprintf(s->reason, sizeof s->reason, "not compiled into this binary");
            __atomic_store_n(&s->state, BP_SLOT_OFF, __ATOMIC_RELEASE);
        }
        return false;
    }
    if (!s->state) {
        s->forced = bp_seam_env_parse(getenv(s->env_name), s->caps->name) == BP_ENV_ON;
        int st = bp_seam_decide(s->env_name, s->caps->name, s->dispatch->probe, s->reason, sizeof s->reason)
                     ? BP_SLOT_ON : BP_SLOT_OFF;
        /* A probe that found only a CPU implementation of the API (lavapipe, PoCL's CPU device)
         * does not enable the backend: it computes on the same cores as the native CPU backend,
         * 10-100x slower. The env still forces it (tests, verify, driver work). */
        const bp_device_desc *d = st == BP_SLOT_ON && !s->forced ? desc_locked(s) : NULL;
        if (d && d->cls == BP_DEVICE_CPU_IMPL) {
            char msg[sizeof s->reason];
            snprintf(msg, sizeof msg,
                     "%s is a CPU implementation of %s; the native CPU backend is faster; %s=1 uses it anyway",
                     d->name[0] ? d->name : "the only device", s->caps->display_name, s->env_name);
            memcpy(s->reason, msg, sizeof msg);
            st = BP_SLOT_OFF;
        }
        /* The threshold is read with the decision: once, not per op. */
        char key[64];
        snprintf(key, sizeof key, "%s_MIN_WORK", s->env_name);
        const char *mw = getenv(key);
        char *end;
        long long v = mw && *mw ? strtoll(mw, &end, 10) : -1;
        s->min_work = mw && *mw && !*end && v >= 0 ? v : -1;
        __atomic_store_n(&s->state, st, __ATOMIC_RELEASE);
    }
    return s->state == BP_SLOT_ON;
}

bool bp_seam_slot_enabled(int i, const char **reason) {
    bp_seam_slot *s = bp_seam_slot_at(i);
    if (!s) return false;
    /* Every op asks this for every slot: once decided, answer without the lock (the state is
     * published with release order after the reason and threshold are written). */
    int st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    if (st) {
        if (reason) *reason = st == BP_SLOT_LOST ? s->lost_reason : s->reason;
        return st == BP_SLOT_ON;
    }
    pthread_mutex_lock(&decide_lock);
    bool on = slot_enabled_locked(s);
    const bool lost = s->state == BP_SLOT_LOST;
    pthread_mutex_unlock(&decide_lock);
    if (reason) *reason = lost ? s->lost_reason : s->reason;
    return on;
}

bool bp_backend_enabled(bp_backend_id id, const char **reason) {
    if (id == BP_BACKEND_CPU) {
        if (reason) *reason = "always: the seam's last stop";
        return true;
    }
    int n = bp_seam_slot_count();
    for (int i = 0; i < n; i++)
        if (slots[i].caps == bp_backend_caps_of(id)) return bp_seam_slot_enabled(i, reason);
    if (reason) *reason = "unknown backend";
    return false;
}

const bp_device_desc *bp_seam_slot_desc(int i) {
    bp_seam_slot *s = bp_seam_slot_at(i);
    if (!s || !s->dispatch) return NULL;
    if (__atomic_load_n(&s->described, __ATOMIC_ACQUIRE)) return s->described == 1 ? &s->desc : NULL;
    pthread_mutex_lock(&decide_lock);
    const bp_device_desc *d = desc_locked(s);
    pthread_mutex_unlock(&decide_lock);
    return d;
}

void bp_seam_slot_mark_lost(int i, const char *cause) {
    bp_seam_slot *s = bp_seam_slot_at(i);
    if (!s) return;
    pthread_mutex_lock(&decide_lock);
    if (s->state == BP_SLOT_ON) {
        /* Its own buffer: other threads may be reading `reason` without the lock right now. */
        snprintf(s->lost_reason, sizeof s->lost_reason, "disabled for this process after a device error: %s",
                 cause && *cause ? cause : "device lost");
        __atomic_store_n(&s->state, BP_SLOT_LOST, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&decide_lock);
}

/* ---- the claim <=> launch guard ------------------------------------------------------------ */

int bp_seam_check_claims(const bp_backend_caps *caps, const bp_backend_dispatch *d, bp_op *bad_op, bp_kind *bad_kind,
                         int max_bad, FILE *report) {
    int nbad = 0;
    for (int op = 0; op < BP_OP_COUNT; op++) {
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind_info *ki = bp_kind_at(i);
            const char *kn = caps->kernel ? caps->kernel((bp_op)op, ki->kind) : NULL;
            const bool launch = d && d->has_launch && d->has_launch((bp_op)op, ki->kind);
            char want[64];
            bp_claim_name((bp_op)op, ki->kind, want, sizeof want);
            const char *why = NULL;
            if (d && !!kn != launch)
                why = kn ? "claimed but has_launch is false" : "launchable but not claimed";
            else if (kn && !bp_op_kind_in_domain((bp_op)op, ki->kind))
                why = "claimed for a kind outside the op's domain (ops.def)";
            else if (kn && strcmp(kn, want))
                why = op <= BP_OP_GEMM ? "claimed with a kernel name that is not the kind's name"
                                       : "claimed with a kernel name that is not \"<op> <KIND>\"";
            else if (kn && op == BP_OP_GEMM && !caps->kernel(BP_OP_MATVEC, ki->kind))
                why = "claims a gemm without a matvec";
            else if (kn && d && !d->launch)
                why = "claimed but the dispatch table has no launch entry";
            if (!why) continue;
            if (report)
                fprintf(report, "%s: %s %s %s%s%s%s\n", caps->name, bp_op_name_of((bp_op)op), ki->name, why,
                        kn ? " (\"" : "", kn ? kn : "", kn ? "\")" : "");
            if (nbad < max_bad) {
                if (bad_op) bad_op[nbad] = (bp_op)op;
                if (bad_kind) bad_kind[nbad] = ki->kind;
            }
            nbad++;
        }
    }
    return nbad;
}

/* ---- test hooks ---------------------------------------------------------------------------- */

static int count_where(bool registered) {
    int k = 0;
    for (int i = 0; i < n_slots; i++) {
        bool in_table = false;
        for (int j = 0; j < BP_BACKEND_CPU; j++) in_table = in_table || slots[i].caps == all_caps[j];
        k += !in_table && slots[i].registered == registered;
    }
    return k;
}

static bp_status insert_slot(const bp_backend_caps *caps, const bp_backend_dispatch *d, int pos, bool registered) {
    int n = bp_seam_slot_count();
    const char *who = registered ? "bp_backend_register" : "bp_seam_test_install";
    if (!caps || !d) return bp_fail(BP_E_INVAL, "%s: caps or dispatch is NULL", who);
    pthread_mutex_lock(&decide_lock);
    if (count_where(registered) >= (registered ? BP_SEAM_MAX_REGISTERED : 1)) {
        pthread_mutex_unlock(&decide_lock);
        return registered ? bp_fail(BP_E_INVAL, "bp_backend_register: %d backends are registered already (the most)",
                                    BP_SEAM_MAX_REGISTERED)
                          : bp_fail(BP_E_INVAL, "bp_seam_test_install: a test backend is installed already");
    }
    if (pos < 0) pos = 0;
    if (pos > n) pos = n;
    memmove(&slots[pos + 1], &slots[pos], (size_t)(n - pos) * sizeof slots[0]);
    init_slot(&slots[pos], caps, d);
    slots[pos].registered = registered;
    n_slots = n + 1;
    pthread_mutex_unlock(&decide_lock);
    return BP_OK;
}

bp_status bp_seam_test_install(const bp_backend_caps *caps, const bp_backend_dispatch *d, int pos) {
    return insert_slot(caps, d, pos, false);
}

bp_status bp_seam_slot_insert_registered(const bp_backend_caps *caps, const bp_backend_dispatch *d, int pos) {
    return insert_slot(caps, d, pos, true);
}

bool bp_seam_slot_remove_registered(const char *name) {
    int n = bp_seam_slot_count();
    bool found = false;
    pthread_mutex_lock(&decide_lock);
    for (int i = 0; i < n && !found; i++) {
        if (!slots[i].registered || strcmp(slots[i].caps->name, name)) continue;
        memmove(&slots[i], &slots[i + 1], (size_t)(n - i - 1) * sizeof slots[0]);
        n_slots = n - 1;
        found = true;
    }
    pthread_mutex_unlock(&decide_lock);
    return found;
}

void bp_seam_test_uninstall(void) {
    int n = bp_seam_slot_count();
    pthread_mutex_lock(&decide_lock);
    for (int i = 0; i < n; i++) {
        bool in_table = false;
        for (int j = 0; j < BP_BACKEND_CPU; j++) in_table = in_table || slots[i].caps == all_caps[j];
        if (in_table || slots[i].registered) continue;
        memmove(&slots[i], &slots[i + 1], (size_t)(n - i - 1) * sizeof slots[0]);
        n_slots = n - 1;
        break;
    }
    pthread_mutex_unlock(&decide_lock);
}

void bp_seam_test_reset_enabled(void) {
    int n = bp_seam_slot_count();
    pthread_mutex_lock(&decide_lock);
    for (int i = 0; i < n; i++) {
        __atomic_store_n(&slots[i].state, 0, __ATOMIC_RELAXED);
        slots[i].reason[0] = '\0';
        slots[i].min_work = -1;
        slots[i].forced = false;
        __atomic_store_n(&slots[i].described, 0, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&decide_lock);
}
