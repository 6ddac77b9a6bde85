/* The op routes section of `backplane probe` (probe_ops.c). */
#ifndef BP_PROBE_OPS_H
#define BP_PROBE_OPS_H

#include <stdbool.h>

/* Text: a table after the kinds table. JSON: the last member, "ops": [...] (the caller closes the object). */
void bp_probe_ops(bool json, bool all);

#endif
