/* The seam's internals, for the op layer, the CLI (probe, verify) and the tests: the dispatch
 * order as slots, the one rule, the one walk, the env grammar as a pure function, the claim <=>
 * launch guard, fallback statistics, and the hooks that insert a mock backend into the order. */
#ifndef BP_SEAM_INTERNAL_H
#define BP_SEAM_INTERNAL_H

#include <stdio.h>

#include "backplane_device.h"
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
    bool registered;                     /* bp_backend_register's, not a row or a test's */
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
/* The slot's device description (describe() asked once; NULL when the backend has no
 * describe member or no device). */
const bp_device_desc *bp_seam_slot_desc(int i);
/* Disable an enabled slot for the rest of the process after a BP_LAUNCH_LOST (first cause
 * wins). */
void bp_seam_slot_mark_lost(int i, const char *cause);

/* ---- the rule (src/seam/route.c): the one the walk, `probe`, bp_route and the model share -- */
/* The slots a call may try, in order: the preferred backend first (bp_set_backend_preference,
 * BACKPLANE_BACKEND), then the rest of the table; none when the CPU is preferred; only the
 * forced one when one is forced. Returns the count written to order (at most max). */
int bp_seam_order(int *order, int max);
/* Why slot i does or does not take a call. */
typedef enum bp_seam_take {
    BP_TAKE_YES = 0,
    BP_TAKE_NOT_COMPILED,
    BP_TAKE_DISABLED,
    BP_TAKE_NO_CLAIM,
    BP_TAKE_DECLINED, /* wants / MIN_WORK / cost model */
    BP_TAKE_LOST,     /* disabled after a device loss: the walk counts a fallback */
} bp_seam_take;
/* THE rule. Slot i takes a call of op whose parts (jobs: one per job; every other op: one) have
 * kinds[j] and shapes[j], j < n, and which also carries kind k2 (attention's V kind, MoE's down
 * kind; else kinds[0]) when it is compiled in, claims (op, k) for every kind (a gemm: or a
 * matvec, run per position), is enabled (env, else probe; a CPU implementation only when
 * forced), and -- unless it is the backend forced by bp_set_backend_preference -- wants every
 * part's shape: BACKPLANE_<B>_MIN_WORK when set (rows x cols x t >= it), else a forced CPU
 * implementation takes every shape, else the device's cost model against the CPU's
 * (src/backend/cost.c), else dispatch->wants, else yes. A slot lost to a device error answers
 * LOST where it would have taken the call. why (may be NULL) gets the sentence behind a no. */
bp_seam_take bp_seam_takes_shape(int i, bp_op op, const bp_kind *kinds, const bp_op_shape *shapes, int n, bp_kind k2,
                                 char *why, size_t why_len);
/* The rule over a real call (its kinds and shapes from src/backend/op_table.c). */
bp_seam_take bp_seam_takes(int i, const bp_op_call *c, char *why, size_t why_len);
/* Append "; <slot's name>: answer" to why[0..*used) (the route's list of each backend's answer,
 * cut to why_len). */
void bp_seam_why_add(char *why, size_t why_len, size_t *used, int slot, const char *answer);
/* Whether slot i claims op on k (a gemm: or k's matvec, run per position): the rule's claim
 * test, and a forced run's. */
bool bp_seam_slot_claims(int i, bp_op op, bp_kind k);
/* Whether slot i runs a gemm of k only as per-position matvecs (claims matvec, no gemm). */
bool bp_seam_slot_per_position(int i, bp_kind k);
/* The slot a call of op on kinds k (and k2: attention's V kind, MoE's down kind; = k otherwise)
 * at shape s goes to first: -1 for the CPU. Fills pred (may be NULL) with what would run there:
 * backend, kernel, per_position; for the CPU the backend, and the kernel for matvec, gemm and
 * jobs (the op layer names its other CPU kernels). why (may be NULL) collects one clause per
 * slot passed over ("vulkan: disabled: ..."). */
int bp_seam_route(bp_op op, bp_kind k, bp_kind k2, const bp_op_shape *s, bp_run_record *pred, char *why,
                  size_t why_len);
/* Whether a forced preference is in effect (that backend then takes every shape). */
bool bp_seam_pref_forced(void);
/* Tests: forget the preference and read BACKPLANE_BACKEND again at the next op. */
void bp_seam_test_reset_preference(void);
/* One line to the seam's log (bp_seam_set_log; stderr by default). */
void bp_seam_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the walk (src/seam/walk.c): one for every op ----------------------------------------- */
/* The CPU's implementation of a call: runs c, writes the kernel that ran to kernel ("CPU avx2
 * Q4_K", "CPU avx512 attention ..."). The seam's own for matvec/gemm; the op layer's for the
 * rest. */
typedef bp_status (*bp_seam_cpu_fn)(const bp_op_call *c, char *kernel, size_t kernel_len);
/* Run c: each slot of bp_seam_order() that bp_seam_takes it, until one launches it; the CPU
 * last (cpu). A launch error is logged once per cause, counted, names what ran instead, and in
 * strict mode is the call's error (BP_E_FALLBACK) with nothing run in its place; a lost device
 * disables its slot. c->cpu_only runs the CPU alone. On success the record of what ran is
 * written where readers find it -- the weights' (matvec, gemm, each job), this thread's last
 * record of the op, the tally -- and to rec (may be NULL). */
bp_status bp_seam_run(const bp_op_call *c, bp_seam_cpu_fn cpu, bp_run_record *rec);
/* While on, every walk on this thread runs the CPU alone, as c->cpu_only does: the CPU's part of
 * a step split by a device budget (its ops must not take device memory the budget did not give
 * them). Returns the previous setting, for the caller to restore. */
bool bp_seam_set_cpu_only(bool on);
/* c on one backend only: "cpu" (cpu, no walk), or a slot's name, which must be compiled,
 * enabled and claim every kind of the call; its launch error is the call's error (BP_E_DEVICE,
 * BP_E_DEVICE_LOST), never covered by another backend. Records as bp_seam_run. */
bp_status bp_seam_run_on(const bp_op_call *c, const char *backend, bp_seam_cpu_fn cpu, bp_run_record *rec);
/* The slot a forced run of c on backend (a slot's name) would use: it must exist, be compiled,
 * enabled, and claim every kind of the call; else the error naming which. */
bp_status bp_seam_forced_slot(const bp_op_call *c, const char *backend, int *slot);
/* The CPU's matvec/gemm (src/seam/weight.c): the walk's last stop for those two ops. */
bp_status bp_seam_cpu_mm(const bp_op_call *c, char *kernel, size_t kernel_len);
/* A record of slot i running c (its display name, kernel, per-position), or of the CPU (i < 0)
 * running the kernel named cpu_kernel. */
void bp_seam_record_fill(bp_run_record *r, const bp_op_call *c, int i, const char *cpu_kernel);
/* Whether x[0..n) holds a NaN or an Inf: such an input runs the CPU reference instead (the
 * non-finite policy of bp_matvec in backplane.h; bp_matmul's jobs follow it too). */
bool bp_seam_nonfinite(const float *x, size_t n);
/* Monotonic seconds. */
double bp_seam_now(void);
/* Keep the record r of call c, which slot ran (-1: the CPU), where readers find it: the weights'
 * records (matvec, gemm, each job), this thread's last record of the op, the tally
 * (src/seam/records.c). r names the call's first job; later jobs get their own kernel's name.
 * The walk calls it; so does a call that ran outside it (the CPU reference for a non-finite
 * input, a forced "cpu-ref"). */
/* moved0: this thread's device traffic (bp_dev_thread_traffic) when the call began, so the
 * tally row counts the bytes the call moved; NULL: none moved (a call that stayed on the host). */
void bp_seam_records_add(const bp_op_call *c, const bp_run_record *r, int slot, double seconds,
                         const bp_dev_traffic *moved0);
void bp_seam_set_weight_record(bp_weight *w, const bp_run_record *r);

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

/* ---- the guard ------------------------------------------------------------------------- */
/* For every op and every kind of the kind table: claims (op, k) <=> has_launch(op, k) (when d
 * is not NULL), a claim only for a kind in the op's domain, a claim with the name
 * bp_claim_name gives, a gemm claim only beside a matvec claim, and (when d is not NULL) a
 * launch entry point for any claim. Writes up to max_bad offending pairs to bad_op/bad_kind
 * (either may be NULL), one line per violation to report ("mock: attention Q5_1 claimed but
 * has_launch is false"; NULL: silent); returns the number of violations. */
int bp_seam_check_claims(const bp_backend_caps *caps, const bp_backend_dispatch *d, bp_op *bad_op, bp_kind *bad_kind,
                         int max_bad, FILE *report);

/* ---- fallbacks ------------------------------------------------------------------------- */
typedef struct bp_fallback_entry {
    char backend[24];  /* "vulkan" */
    char kind[16];     /* "Q4_K" */
    char op[16];       /* an ops.def name: "matvec", "gemm", "attention", ... */
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
/* Insert a backend registered by a program (src/seam/register.c) at pos, as the test install
 * does; at most BP_SEAM_MAX_REGISTERED of them. Remove it by name (false when none). */
enum { BP_SEAM_MAX_REGISTERED = 4 };
bp_status bp_seam_slot_insert_registered(const bp_backend_caps *caps, const bp_backend_dispatch *d, int pos);
bool bp_seam_slot_remove_registered(const char *name);
/* Forget every cached enable decision (tests that change the env). */
void bp_seam_test_reset_enabled(void);

#endif
