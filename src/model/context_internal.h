/* A context: one sequence's KV cache and the activation buffers of a forward step. */
#ifndef BP_MODEL_CONTEXT_INTERNAL_H
#define BP_MODEL_CONTEXT_INTERNAL_H

#include "model/model_internal.h"
#include "backend/backend_id.h"
#include "backend/step.h"

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
    /* The step programs (forward.c): [0] decode, [1] the last prefill shape; what ran the last
     * step of each; each backend's state for this context (placed model, device KV cache). */
    bp_step_prog prog[2];
    bp_run_record step_rec[2];
    bp_step_state *step_state[BP_STEP_STATES];
    bp_step_traffic last_traffic[2];
};

/* One forward step over tokens[0..t) at positions c->pos..; writes the logits of the last n_out
 * of them to c->logits. The caller checked ids and room. */
bp_status bp_forward(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out);

/* Every backend's hold on the sequence cut to its first n positions (truncate, a failed eval). */
void bp_context_cut_states(bp_context *c, int64_t n);

/* context_limits.c: the memory a context needs (KV cache of kv_kind for n_ctx tokens, buffers
 * of n_batch) against what is available, BP_E_NOMEM naming both when it does not fit and the
 * check is on; the embedding rows of tokens[0..n) finite (before the forward pass; uses c->tmp)
 * and every logit of the last eval finite (after), BP_E_FORMAT naming where otherwise. */
bp_status bp_context_check_memory(const bp_model *m, int64_t n_ctx, int64_t n_batch, bp_kind kv_kind,
                                  const char *fn);
bp_status bp_context_check_rows(bp_context *c, const int32_t *tokens, int64_t n, int64_t pos0);
bp_status bp_context_check_logits(const bp_context *c, int64_t n, int64_t n_out, int64_t pos0);

#endif
