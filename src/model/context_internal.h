/* A context: the KV caches of its sequences (seq 0 is the single-sequence API's) and the
 * activation buffers of a forward step. */
#ifndef BP_MODEL_CONTEXT_INTERNAL_H
#define BP_MODEL_CONTEXT_INTERNAL_H

#include "model/model_internal.h"
#include "backend/backend_id.h"
#include "backend/step.h"

enum { BP_MODEL_MAX_KIND = 64, BP_CTX_BUFS = 9 /* x xn q kc vc att tmp gate up */ };

/* One sequence: its own KV cache of n_ctx cells (seq 0's is c->kv, its length c->pos; the
 * others' caches are made on first use) and the token id of each cell, for prompt-cache
 * matching and state files (the cells' positions are the cache's). */
typedef struct bp_seq {
    bp_kv_cache *kv;
    int64_t len;
    int32_t *toks;
} bp_seq;

/* Which part of the step a device takes under a byte budget (offload.c): the seam slot that
 * takes it (-1: none, the CPU runs every layer), its last n_dev layers and the head (whole: the
 * step whole, the embedding included, as without a budget), what it places there (the
 * backend's step_bytes of that part, `total` their sum), and a line saying so. */
typedef struct bp_offload {
    int slot, n_dev;
    bool whole;
    bp_step_bytes bytes;
    uint64_t total;
    char note[256];
    char why[1024]; /* slot -1 with no budget reason: each backend's answer (bp_step_route) */
} bp_offload;
/* Decided from the decode program p (t 1, n_out 1): budget 0 is no limit. */
bp_status bp_forward_offload(const bp_step_prog *p, uint64_t budget, bp_offload *out);

struct bp_context {
    bp_model *m;
    int64_t n_ctx, n_batch;
    bp_kind kv_kind;
    int64_t pos;          /* seq 0's cells in the cache (its next position without a hole) */
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
    /* a device budget (bp_context_params.device_budget): decided at the first step; a split
     * step's two parts per shape ([t > 1][0] the CPU's, [1] the device's, views of prog[]) and
     * the record of the CPU's part */
    uint64_t device_budget;
    bool offload_decided;
    bp_offload offload;
    bp_step_prog part[2][2];
    bp_run_record part_rec[2];
    /* called after every node of every step (bp_step_tap_fn); NULL: none */
    bp_step_tap_fn tap;
    void *tap_user;
    /* sequences (seq.c, batch.c): n_seq_max of them; per row of the last bp_context_decode its
     * output index or -1; per row of a step, its sequence and the append order */
    int32_t n_seq_max;
    bp_seq *seqs;
    int32_t *batch_out;
    int64_t batch_n, batch_cap;
    int32_t *row_seq, *row_order, *row_tok, *row_pos;
    bp_kv_cache **seq_kv;
};

/* The rows of a step over several sequences (bp_step_io's seq_kv, row_seq, append_order). */
typedef struct bp_forward_rows {
    const int32_t *positions;
    void *const *seq_kv;
    const int32_t *row_seq, *append_order;
} bp_forward_rows;

/* context.c: p's defaults filled in and its values checked, as bp_context_create does; and the
 * host bytes such a context holds once made: its KV cache (seq 0's; every sequence has one of
 * these once used) and its buffers (positions and activations, not the logits). */
bp_status bp_context_params_resolve(const bp_model *m, bp_context_params *p);
bp_status bp_context_plan_bytes(const bp_model *m, const bp_context_params *p, size_t *kv, size_t *bufs);

/* Room in c->logits for n_out rows (context.c). */
bp_status bp_context_reserve_logits(bp_context *c, int64_t n_out);

/* seq.c: a sequence's length in cells (seq 0: c->pos; bp_seq_len to write it, bp_seq_cells to
 * read it) and cache (seq 0: c->kv), its cache made when missing. The position its next token
 * takes (the cells held, or more after a hole); whether its cells have a hole (then only the CPU
 * evaluates it); its cells at positions >= p dropped. */
int64_t *bp_seq_len(bp_context *c, int32_t seq);
int64_t bp_seq_cells(const bp_context *c, int32_t seq);
bp_status bp_seq_cache(bp_context *c, int32_t seq, bp_kv_cache **out);
int64_t bp_seq_next(const bp_context *c, int32_t seq);
bool bp_seq_holed(const bp_context *c, int32_t seq);
bp_status bp_seq_cut_positions(bp_context *c, int32_t seq, int64_t p);
/* batch.c: n tokens of seq 0 continuing it, the last n_out wanted, as a bp_context_decode batch
 * on the CPU (bp_context_eval of a sequence with a hole). */
bp_status bp_seq_eval_cpu(bp_context *c, const int32_t *tokens, int64_t n, int64_t n_out);
/* seq.c: the per-sequence arrays of a new context, and their release. */
bp_status bp_seqs_create(bp_context *c, int32_t n_seq_max);
void bp_seqs_free(bp_context *c);

/* forward.c: the step program for (t, n_out) of a context of n_batch rows, n_ctx positions and
 * a kv cache, into p (p->nodes grown as needed; free with bp_free). */
bp_status bp_forward_program(const bp_model *m, int64_t n_batch, int64_t n_ctx, bp_kind kv, bp_step_prog *p, int64_t t,
                             int64_t n_out);

/* One forward step over tokens[0..t) at positions c->pos..; writes the logits of the last n_out
 * of them to c->logits. The caller checked ids and room. */
bp_status bp_forward(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out);

/* The same over several sequences: rows->positions per token; only the CPU runs it. */
bp_status bp_forward_seqs(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out, const bp_forward_rows *rows);

/* Tap every step of c from now on (NULL: stop): `backplane verify --trace` reads each node's
 * output where it ran. A device step with a tap runs node by node (src/backend/step.h). */
void bp_context_set_step_tap(bp_context *c, bp_step_tap_fn tap, void *user);

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
