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

/* A switch's value: the setter's, else the environment's, read once. */
static bool switch_get(atomic_int *sw, const char *env) {
    int v = atomic_load(sw);
    if (v < 0) {
        int expected = -1;
        atomic_compare_exchange_strong(sw, &expected, env_true(env));
        v = atomic_load(sw);
    }
    return v != 0;
}

bool bp_exact_mode(void) { return switch_get(&exact_mode, "BACKPLANE_EXACT"); }

void bp_set_exact_mode(bool on) { atomic_store(&exact_mode, on ? 1 : 0); }

/* Strict mode (issue 17): every fallback becomes an error (src/seam/walk.c). */
static atomic_int strict_mode = -1;

bool bp_strict_mode(void) { return switch_get(&strict_mode, "BACKPLANE_STRICT"); }

void bp_set_strict(bool on) { atomic_store(&strict_mode, on ? 1 : 0); }
