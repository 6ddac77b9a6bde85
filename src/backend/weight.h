/* A weight as every backend sees it: the GGUF bytes (never modified) plus whatever each backend
 * made of them (a device copy, a repacked CPU layout), created lazily on first use and freed
 * with the weight, and the record of what last ran it. */
#ifndef BP_BACKEND_WEIGHT_H
#define BP_BACKEND_WEIGHT_H

#include "backend/backend_id.h"
#include "backplane.h"

struct bp_weight {
    bp_kind kind;
    int64_t rows, cols;
    size_t row_bytes;
    const uint8_t *data;     /* rows * row_bytes bytes; owned by the caller */
    void *backend_state[BP_BACKEND_COUNT];
    void (*backend_free[BP_BACKEND_COUNT])(void *state);
    /* What last ran a matvec, GEMM or job of this weight: written by the seam where the work
     * ran, under its lock (src/seam/records.c), read through bp_weight_last_record. */
    bp_run_record last;
};

#endif
