/* The seam's internals, for the CLI (probe, verify) and the tests: the dispatch order as slots,
 * the env grammar as a pure function, the claim <=> launch check, fallback statistics, and the
 * hooks that insert a mock backend into the order. */
#ifndef BP_SEAM_INTERNAL_H
#define BP_SEAM_INTERNAL_H

#include <stdio.h>

#include "seam/seam.h"

/* One backend in the dispatch order (the CPU is not a slot: it is always after the last). */
typedef struct bp_seam_slot {
    const bp_backend_caps *caps;
    const bp_backend_dispatch *dispatch; /* NULL: not compiled in */
    char env_name[40];                   /* "BACKPLANE_VULKAN" */
    /* Cached decision (registry.c, under its lock). */
    int state;                           /* 0 undecided, 1 off, 2 on */
    char reason[320];
    long long min_work;                  /* BACKPLANE_<ENUM>_MIN_WORK, or -1 */
    bool forced;                         /* BACKPLANE_<ENUM> forced it on (no probe) */
    int described;                       /* 0: not asked yet, 1: desc valid, -1: no device */
    bp_device_desc desc;                 /* from dispatch->describe, asked once */
    char lost_reason[320];               /* why it is LOST; written once, before state says so */
} bp_seam_slot;

/* Slot states (bp_seam_slot.state). LOST: enabled once, then a launch reported the device
 * unusable for the process (BP_LAUNCH_LOST); the reason names the cause. */
enum { BP_SLOT_UNDECIDED = 0, BP_SLOT_OFF = 1, BP_SLOT_ON = 2, BP_SLOT_LOST = 3 };

/* Slots in precedence order: the backends.def rows, plus a test-installed one. */
int bp_seam_slot_count(void);
bp_seam_slot *bp_seam_slot_at(int i);
/* Index of the slot called name ("vulkan", "mock"); -1 when none. */
int bp_seam_slot_find(const char *name);
/* Compiled and enabled in this process (decided once per slot; reason may be NULL). */
bool bp_seam_slot_enabled(int i, const char **reason);
/* Would the slot take an op of kind k on a rows x cols weight with batch t (>= 1)? In order:
 * BACKPLANE_<ENUM>_MIN_WORK when set (rows*cols*t >= it); a forced CPU implementation takes
 * every shape; the device's cost model against the CPU's (src/seam/cost.c); dispatch->wants;
 * else yes. why (may be NULL) gets the sentence behind a no. */
bool bp_seam_slot_wants_kind(int i, bp_kind k, int64_t rows, int64_t cols, int64_t t, char *why, size_t why_len);
/* The same for callers without a weight kind (costed as 8 bits per weight). */
bool bp_seam_slot_wants(int i, int64_t n_out, int64_t n_in, int64_t t);
/* The slot's device description (describe() asked once; NULL when the backend has no
 * describe member or no device). */
const bp_device_desc *bp_seam_slot_desc(int i);
/* Disable an enabled slot for the rest of the process after a BP_LAUNCH_LOST (first cause
 * wins). */
void bp_seam_slot_mark_lost(int i, const char *cause);

/* The first slot a decode (prefill false) or prefill op of kind k goes to, ignoring shape
 * thresholds: compiled, enabled, claiming k. -1: the CPU. Kept for callers without a shape;
 * `backplane probe` and the walk use bp_seam_route_shape. */
int bp_seam_route(bp_kind k);

/* ---- routes (src/seam/route.c): the one rule the walk and `probe` share ------------------ */
/* The slots an op may try, in order: the preferred backend first (bp_set_backend_preference,
 * BACKPLANE_BACKEND), then the rest of the table; none when the CPU is preferred; only the
 * forced one when one is forced. Returns the count written to order (at most max). */
int bp_seam_order(int *order, int max);
/* Why slot i does or does not take the op (t == 0: a matvec). */
typedef enum bp_seam_take {
    BP_TAKE_YES = 0,
    BP_TAKE_NOT_COMPILED,
    BP_TAKE_DISABLED,
    BP_TAKE_NO_CLAIM,
    BP_TAKE_DECLINED, /* wants / MIN_WORK / cost model */
    BP_TAKE_LOST,     /* disabled after a device loss: the walk counts a fallback */
} bp_seam_take;
bp_seam_take bp_seam_slot_takes(int i, bp_kind k, int64_t rows, int64_t cols, int64_t t, char *why, size_t why_len);
/* The slot an op of kind k, rows x cols, batch t (0: matvec) goes to first; -1: the CPU. why
 * (may be NULL) collects one clause per slot passed over ("vulkan: disabled: ..."). */
int bp_seam_route_shape(bp_kind k, int64_t rows, int64_t cols, int64_t t, char *why, size_t why_len);
/* Whether a forced preference is in effect (that backend then takes every shape). */
bool bp_seam_pref_forced(void);
/* Tests: forget the preference and read BACKPLANE_BACKEND again at the next op. */
void bp_seam_test_reset_preference(void);
/* One line to the seam's log (bp_seam_set_log; stderr by default). */
void bp_seam_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- cost model (src/seam/cost.c) --------------------------------------------------------- */
/* Modelled microseconds of one op (t >= 1) of kind k on a device with model m; the link term
 * only where m->link_gbps > 0. */
double bp_cost_us(const bp_cost_model *m, bp_kind k, int64_t rows, int64_t cols, int64_t t);
/* The CPU backend's own estimate: per-thread rates times bp_cpu_threads() (or the test
 * override). */
void bp_cost_cpu(bp_cost_model *out);
/* The default model for a backend's device ("vulkan", "opencl", "cuda") of class cls; integrated
 * (shares the host's memory) or not. Fills out; false when the table has no row. */
bool bp_cost_default(const char *backend, bp_device_class cls, bool integrated, bp_cost_model *out);
/* Tests: replace the CPU estimate (NULL restores it). */
void bp_cost_test_set_cpu(const bp_cost_model *m);

/* ---- env grammar ----------------------------------------------------------------------- */
typedef enum bp_env_decision {
    BP_ENV_DEFER = 0, /* unset or anything else: ask the probe */
    BP_ENV_OFF = 1,   /* 0 | false | off | cpu */
    BP_ENV_ON = 2,    /* 1 | true | on | <own name> */
} bp_env_decision;
/* Case-insensitive. own_name is the backend's name ("vulkan"): another backend's name defers. */
bp_env_decision bp_seam_env_parse(const char *value, const char *own_name);
/* The whole decision for one backend: env first, the probe only when the env defers. Writes
 * a sentence to reason. Exposed so tests can count probe calls. */
bool bp_seam_decide(const char *env_name, const char *own_name, bool (*probe)(char *, size_t),
                    char *reason, size_t reason_len);

/* ---- the rule of the seam -------------------------------------------------------------- */
/* For every kind in the kind table: claims matvec <=> has_launch (when d is not NULL), a
 * claimed kernel name equals the kind's name, a claimed GEMM implies a claimed matvec and (when
 * d is not NULL) a gemm entry point. Writes up to max_bad offending kinds to bad (each kind at
 * most once), one line per violation to report (NULL: silent); returns the number of kinds. */
int bp_seam_check_claims(const bp_backend_caps *caps, const bp_backend_dispatch *d, bp_kind *bad,
                         int max_bad, FILE *report);

/* ---- fallbacks ------------------------------------------------------------------------- */
typedef struct bp_fallback_entry {
    char backend[24];  /* "vulkan" */
    char kind[16];     /* "Q4_K" */
    char op[16];       /* "matvec" | "gemm" */
    char cause[200];
    char to[48];       /* what ran instead: "CPU", "OpenCL" */
    unsigned long long count;
} bp_fallback_entry;
/* Every fallback since start (or the last reset). */
unsigned long long bp_fallback_total(void);
/* Distinct (backend, kind, op, cause) rows, first seen first; returns the number of rows. */
int bp_fallback_list(bp_fallback_entry *out, int max);
void bp_fallback_reset(void);
/* Where the one-per-cause fallback lines go (NULL: stderr). Tests capture them. */
void bp_seam_set_log(FILE *f);

/* ---- tests ----------------------------------------------------------------------------- */
/* Insert a backend (a mock) at position pos of the order (0 = before CUDA; past the end = just
 * before the CPU). Its env switch is BACKPLANE_<upper(caps->name)>. One at a time; not thread
 * safe against running ops. */
bp_status bp_seam_test_install(const bp_backend_caps *caps, const bp_backend_dispatch *d, int pos);
void bp_seam_test_uninstall(void);
/* Forget every cached enable decision (tests that change the env). */
void bp_seam_test_reset_enabled(void);

#endif
