/* The op routes section of `backplane probe` (probe_ops.c). */
#ifndef BP_PROBE_OPS_H
#define BP_PROBE_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* Text: a table after the kinds table. JSON: the last member, "ops": [...] (the caller closes
 * the object). Each op is routed at a decode step of the probe's shape: a weight op on a
 * rows x cols weight, an activation op over one row of cols, attention over rows / 128 heads
 * of 128 dims and 1024 keys. */
void bp_probe_ops(bool json, bool all, int64_t rows, int64_t cols);

#endif
