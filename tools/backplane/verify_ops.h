/* The op section of `backplane verify` (verify_ops.c). */
#ifndef BP_VERIFY_OPS_H
#define BP_VERIFY_OPS_H

#include <stdbool.h>

/* Every op of ops.def on the CPU's fast path and on every enabled backend that claims it, for
 * every kind of its domain (only_kind: that kind; only_backend: that backend), against the CPU
 * reference. Text: a table. JSON: an "op_results": [...] member followed by a comma. Returns the
 * number of cases; *failed gets the failures. */
int bp_verify_ops(bool json, const char *only_backend, const char *only_kind, int *failed);

#endif
