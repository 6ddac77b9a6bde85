/* A weight as every backend sees it: the GGUF bytes (never modified) plus whatever each backend
 * made of them (a device copy, a repacked CPU layout), created lazily on first use and freed
 * with the weight, and the record of what last ran it. */
#ifndef BP_BACKEND_WEIGHT_H
#define BP_BACKEND_WEIGHT_H

#include "backend/backend_id.h"
#include "backplane.h"
#include "kinds/kinds_internal.h"

struct bp_weight {
    bp_kind kind;
    const bp_kind_traits *traits; /* the kind's row, resolved once by bp_weight_init: the
                                   * kernels never look it up per call */
    int64_t rows, cols;
    size_t row_bytes;
    const uint8_t *data;     /* rows * row_bytes bytes; owned by the caller */
    void *backend_state[BP_BACKEND_COUNT];
    void (*backend_free[BP_BACKEND_COUNT])(void *state);
    /* What last ran a matvec, GEMM or job of this weight: written by the seam where the work
     * ran, under its lock (src/seam/records.c), read through bp_weight_last_record. */
    bp_run_record last;
};

/* Fill *w (any prior contents ignored) for a weight of kind k, rows x cols, over bytes bytes at
 * data: every check bp_weight_create makes (a weight kind, positive shape, no size_t overflow,
 * bytes enough), so a weight on the stack (a test, the route's stand-in call) is as valid as a
 * created one. A weight not made by this function has traits NULL, which the CPU refuses. */
bp_status bp_weight_init(bp_weight *w, bp_kind k, const void *data, size_t bytes, int64_t rows, int64_t cols);

#endif
