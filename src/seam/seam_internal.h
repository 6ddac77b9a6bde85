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
    char reason[200];
    long long min_work;                  /* BACKPLANE_<ENUM>_MIN_WORK, or -1 */
} bp_seam_slot;

/* Slots in precedence order: the backends.def rows, plus a test-installed one. */
int bp_seam_slot_count(void);
bp_seam_slot *bp_seam_slot_at(int i);
/* Index of the slot called name ("vulkan", "mock"); -1 when none. */
int bp_seam_slot_find(const char *name);
/* Compiled and enabled in this process (decided once per slot; reason may be NULL). */
bool bp_seam_slot_enabled(int i, const char **reason);
/* Would the slot take a (n_out x n_in, batch t) op? The env threshold, else dispatch->wants. */
bool bp_seam_slot_wants(int i, int64_t n_out, int64_t n_in, int64_t t);

/* The first slot a decode (prefill false) or prefill op of kind k goes to, ignoring shape
 * thresholds: compiled, enabled, claiming k. -1: the CPU. The walk in dispatch.c uses the
 * same rule, so `backplane probe` reports the path that really runs. */
int bp_seam_route(bp_kind k);

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
