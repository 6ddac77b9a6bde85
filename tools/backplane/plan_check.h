/* run --plan-check (plan_check.c): the run's memory measured against bp_plan's figures. */
#ifndef BP_PLAN_CHECK_H
#define BP_PLAN_CHECK_H

#include <stdbool.h>
#include <stdio.h>

#include "backplane.h"

typedef struct bp_plan_check {
    bool on;
    uint64_t heap0, rss0, dev0; /* at the start, before the model is loaded */
} bp_plan_check;

/* Before anything is loaded: the baselines, the peaks reset. */
void bp_plan_check_begin(bp_plan_check *pc);
/* After the run, the context still alive: the peaks against the plan of path with the run's
 * context (n_ctx, kv), printed to f (or one JSON object); 0 when the run stayed within the
 * plan, 1 (with the reason on stderr) when it went above it. The model's tokenizer and a
 * sampler are not the plan's: their bytes are measured by making one more of each. */
int bp_plan_check_end(const bp_plan_check *pc, const char *path, const bp_model *m, int64_t n_ctx, bp_kind kv, uint64_t budget, FILE *f,
                      bool json);

#endif
