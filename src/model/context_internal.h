/* A context: one sequence's KV cache and the activation buffers of a forward step. */
#ifndef BP_MODEL_CONTEXT_INTERNAL_H
#define BP_MODEL_CONTEXT_INTERNAL_H

#include "model/model_internal.h"

enum { BP_MODEL_MAX_KIND = 64 };

struct bp_context {
    bp_model *m;
    int64_t n_ctx, n_batch;
    bp_kind kv_kind;
    int64_t pos;          /* tokens in the cache */
    bp_kv_cache *kv;      /* the op layer's cache: every layer n_ctx tokens */
    /* activations of up to n_batch tokens */
    float *x, *xn, *q, *kc, *vc, *att, *tmp, *gate, *up;
    int32_t *positions;   /* n_batch */
    float *logits;        /* n_out x n_vocab of the last eval */
    int64_t n_out, logits_cap;
    size_t buf_bytes;
    /* what last ran each weight kind's matmuls: [0] decode (t = 1), [1] prefill (t > 1) */
    bp_run_record kind_rec[2][BP_MODEL_MAX_KIND];
};

/* One forward step over tokens[0..t) at positions c->pos..; writes the logits of the last n_out
 * of them to c->logits. The caller checked ids and room. */
bp_status bp_forward(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out);

#endif
