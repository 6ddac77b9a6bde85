/* `backplane verify MODEL --trace` (verify_trace.c): per backend, the first op of a step whose
 * output leaves its tolerance (src/testing/tolerance.def) against the CPU reference path. */
#ifndef BP_VERIFY_TRACE_H
#define BP_VERIFY_TRACE_H

#include <stdio.h>

#include "backplane.h"

typedef struct bp_trace_op {
    int node;             /* index in the step's program */
    int layer;            /* -1: the embedding or the head */
    const char *op;       /* the step node: "rms_norm", "matmul", "attention", ... */
    char tensor[96];      /* "blk.1.attn_norm.weight", or what the node writes ("residual X") */
    const char *tol_op;   /* the tolerance row: "norm", "jobs", ... */
    const char *tol_kind; /* the kind the row was taken for: "F32", "Q8_0" */
    double nmse, bound;
    int64_t pos;          /* the position whose row is furthest off */
    int32_t token;        /* the token there */
} bp_trace_op;

typedef struct bp_trace_result {
    int64_t tokens;       /* one prefill of this many tokens (positions 0 ..) */
    int nodes, compared;  /* the program's nodes; outputs compared */
    bool found;           /* first: the first output out of tolerance */
    bp_trace_op first;
    bp_trace_op worst;    /* the largest nmse / bound of all (found or not) */
    char ran[200];        /* what ran the backend's step (its record) */
} bp_trace_result;

/* Trace backend over tok[0..n): one prefill of the n tokens with every node's output captured
 * where it ran (a step tap), then the reference path (scalar kernels, exact mode, the same KV
 * kind kv) over the same program, each node fed the backend's inputs and its output compared
 * with the backend's. 0, or an exit status with the error printed. */
int bp_verify_trace(bp_model *m, const char *backend, bp_kind kv, const int32_t *tok, int64_t n,
                    bp_trace_result *out);
/* One line (text) or one JSON object for r. */
void bp_verify_trace_print(FILE *f, const char *backend, const bp_trace_result *r, const bp_tokenizer *tok, bool json);

#endif
