/* Process-wide switches (DESIGN.md, "The op-level backend"): each has a setter and an
 * environment default read once. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backplane.h"

/* -1: not decided yet (the environment is read on first use, so a program that calls the
 * setter before any op never sees the env value). */
static atomic_int exact_mode = -1;

static int env_true(const char *name) {
    const char *e = getenv(name);
    return e && (!strcmp(e, "1") || !strcasecmp(e, "true") || !strcasecmp(e, "on"));
}

bool bp_exact_mode(void) {
    int v = atomic_load(&exact_mode);
    if (v < 0) {
        int expected = -1;
        atomic_compare_exchange_strong(&exact_mode, &expected, env_true("BACKPLANE_EXACT"));
        v = atomic_load(&exact_mode);
    }
    return v != 0;
}

void bp_set_exact_mode(bool on) { atomic_store(&exact_mode, on ? 1 : 0); }

/* Strict mode (issue 17): every fallback becomes an error (src/seam/dispatch.c). */
static atomic_int strict_mode = -1;

bool bp_strict_mode(void) {
    int v = atomic_load(&strict_mode);
    if (v < 0) {
        int expected = -1;
        atomic_compare_exchange_strong(&strict_mode, &expected, env_true("BACKPLANE_STRICT"));
        v = atomic_load(&strict_mode);
    }
    return v != 0;
}

void bp_set_strict(bool on) { atomic_store(&strict_mode, on ? 1 : 0); }
