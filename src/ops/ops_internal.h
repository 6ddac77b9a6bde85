/* Internals of the op layer: the run path every public op goes through, the CPU reference of
 * each op (the oracle the fast paths and any backend are tested against), the CPU fast paths,
 * the KV cache's layout and the stats counters. */
#ifndef BP_OPS_INTERNAL_H
#define BP_OPS_INTERNAL_H

#include "seam/seam_internal.h"

/* Validate nothing (the public entry points did), run c through the seam's one walk
 * (bp_seam_run: claimed backends, then the CPU's bp_op_cpu), which records what ran. */
bp_status bp_op_run(bp_op_call *c);
/* c on one backend only (bp_seam_run_on): "cpu" (no walk), or a seam slot's name; NULL is
 * bp_op_run. A backend that is missing, disabled or does not claim the call is an error; a
 * launch error is returned (BP_E_DEVICE), never covered by another backend. */
bp_status bp_op_run_on(bp_op_call *c, const char *backend);
/* The CPU's implementation of every op: a fast path when there is one, else the reference. */
bp_status bp_op_cpu(const bp_op_call *c, char *label, size_t label_len);
/* The CPU reference for every op (what mock backends compute, what the fast paths are tested
 * against). Only attention can fail (scratch allocation). */
bp_status bp_op_reference(const bp_op_call *c);

/* ---- references (in each op's file): plain loops, double accumulators ------------------------ */
void bp_ref_norm(const bp_norm_desc *d, const float *x, int64_t t, float *y);
void bp_ref_rope(const bp_rope_desc *d, float *x, int64_t t, const int32_t *positions);
/* Pair i's multiplier of pos * base^(-2i/n_rot): freq_scale, or YaRN's mix of it and 1; *mscale
 * gets the factor on cos and sin (1 without YaRN). rope.c, for the reference and the fast path. */
double bp_rope_pair_scale(const bp_rope_desc *d, int i, double *mscale);
void bp_ref_act(bp_activation a, const float *x, int64_t n, float *y);
void bp_ref_glu(bp_activation a, const float *gate, const float *up, int64_t n, float *y);
void bp_ref_softmax(const float *x, int64_t t, int64_t n, float scale, float softcap, const float *mask, float *y);
bp_status bp_ref_attention(const bp_attn_desc *d, const float *q, int64_t t, const int32_t *positions,
                           const bp_kv_cache *cache, int layer, float *out);
/* The activation of one value, as the reference computes it (double). */
double bp_ref_act1(bp_activation a, double x);

/* The scratch the CPU's attention keeps for t query rows over len keys on nth threads (the
 * pool keeps the largest a call asked for; `backplane plan` counts it). */
size_t bp_attention_cpu_scratch_bytes(int n_heads, int n_kv_heads, int dk, int dv, int64_t t, int64_t len, int nth);

/* RoPE with frequency divisors per pair (rope.c; Llama 3.1+ rope_freqs.weight, Phi-3's LongRoPE
 * factors), cos and sin times mscale (LongRoPE's attn_factor; 1: none, 0 reads as 1). */
bp_status bp_rope_with_factors(const bp_rope_desc *d, const float *factors, float mscale, float *x, int64_t t,
                               const int32_t *positions);
/* The host cache kv made to hold positions [0, n) again: a backend whose state holds them
 * hands back what the host lacks (step.c; before the CPU continues or edits a sequence). */
bp_status bp_step_pull_host(bp_kv_cache *kv, bp_step_state *const *state, int64_t n);
/* The op `step` (step.c): run a forward step through the walk; the CPU's node-by-node run. */
bp_status bp_step_run(const bp_step_prog *p, bp_step_io *io);
/* On one backend only ("cpu": node by node), its record in *rec (verify). */
bp_status bp_step_run_on(const bp_step_prog *p, bp_step_io *io, const char *backend, bp_run_record *rec);
bp_status bp_step_cpu(const bp_op_call *c, char *label, size_t label_len);
/* The seam slot the walk would give program p whole to (bp_seam_takes over bp_seam_order, the
 * question bp_step_run's walk asks first); -1: none, the CPU runs it node by node, and why
 * lists each slot's answer. Launches nothing. */
int bp_step_route(const bp_step_prog *p, char *why, size_t why_len);

/* ---- KV cache layout (src/ops/kv_cache.c) -------------------------------------------------- */
typedef struct bp_kv_layer {
    uint8_t *k, *v;     /* [n_kv_heads][cap][row bytes] */
    int64_t cap, len;
} bp_kv_layer;

struct bp_kv_cache {
    bp_kv_cache_desc desc;    /* layer_capacity points at our own copy (or NULL) */
    int64_t *layer_cap;
    size_t row_k, row_v;      /* bytes of one token of one head */
    bp_kv_layer *layers;
    size_t bytes;
    /* NULL: cell j holds position j. Else capacity entries, the position of each cell held
     * (strictly increasing): a hole in position space (src/ops/kv_cells.c). */
    int32_t *cell_pos;
};

/* Whole sequences (the model's seq_cp and sequence state): dst's cells [0, n) become src's,
 * with their positions (same layout and kinds; dst's length becomes n); the serialized size of positions [0, n),
 * and the serialization itself (per layer, per head: K rows then V rows, raw in the cache's
 * kinds). state_read makes positions [0, n) the cache's contents. */
bp_status bp_kv_cache_copy_prefix(bp_kv_cache *dst, const bp_kv_cache *src, int64_t n);
size_t bp_kv_cache_state_bytes(const bp_kv_cache *c, int64_t n);
bp_status bp_kv_cache_state_write(const bp_kv_cache *c, int64_t n, uint8_t *dst);
bp_status bp_kv_cache_state_read(bp_kv_cache *c, int64_t n, const uint8_t *src);

/* Keys [j0, j1) a query at position p may see in a layer holding len tokens under d. */
void bp_attn_key_range(const bp_attn_desc *d, int64_t p, int64_t len, int64_t *j0, int64_t *j1);

/* ---- cells and their positions (src/ops/kv_cells.c) ----------------------------------------- */
/* Whether some cell holds a position other than its index (then only the CPU attends over the
 * cache: the backends' kernels mask by index, and bp_kv_cache_append refuses it). */
bool bp_kv_has_holes(const bp_kv_cache *c);
int64_t bp_kv_cell_pos(const bp_kv_cache *c, int64_t j);
/* The position after the first n cells (0 for none): where the sequence continues. */
int64_t bp_kv_next_pos(const bp_kv_cache *c, int64_t n);
/* The first of cells [0, n) at a position >= p (n when none is). */
int64_t bp_kv_cell_at(const bp_kv_cache *c, int64_t n, int64_t p);
/* bp_attn_key_range over the cells' positions: the cells [j0, j1) of len a query at position p
 * sees (one run, positions increasing with the cell). */
void bp_attn_cell_range(const bp_attn_desc *d, const bp_kv_cache *c, int64_t p, int64_t len, int64_t *j0, int64_t *j1);
/* n cells at the layer's end at positions pos[n] (above the last cell's, increasing). */
bp_status bp_kv_cache_append_pos(bp_kv_cache *c, int layer, const float *k, const float *v, int64_t n,
                                 const int32_t *pos);
/* Cells [i0, i1) of every layer go; the later cells move down and keep their positions. */
bp_status bp_kv_cache_remove(bp_kv_cache *c, int64_t i0, int64_t i1);
/* Positions pos[n] increasing, in [0, limit): BP_E_FORMAT naming the first that is not. Then
 * make them the positions of cells [0, n) (a restored state), and read them back. */
bp_status bp_kv_cache_check_positions(const bp_kv_cache *c, int64_t n, const int32_t *pos, int64_t limit);
bp_status bp_kv_cache_set_positions(bp_kv_cache *c, int64_t n, const int32_t *pos);
void bp_kv_cache_positions(const bp_kv_cache *c, int64_t n, int32_t *out);
/* The map dropped once every cell is back at its index (after a truncation). */
void bp_kv_cells_normalize(bp_kv_cache *c);

/* ---- CPU fast paths ------------------------------------------------------------------------ */
/* Attention (attention_cpu.c): whether the current ISA's kernels take these head dims, and the
 * call itself. */
bool bp_attention_cpu_fast_ok(const bp_op_call *c);
bp_status bp_attention_cpu(const bp_op_call *c, char *label, size_t label_len);
/* Norm, RoPE, activations, softmax (ops_cpu_rows.c). */
bp_status bp_ops_cpu_rows(const bp_op_call *c, char *label, size_t label_len);

/* What a call of op on kind k at shape s runs here (op_route.c): "Mock attention Q8_0", "CPU
 * avx512 attention (...)". Writes buf, returns it; *rec (may be NULL) gets the route's record. */
const char *bp_op_route_label(bp_op op, bp_kind k, const bp_op_shape *s, char *buf, size_t len, bp_run_record *rec);
/* The CPU's route label for conv2d* and moe (src/ops/moe.c): MoE names where its expert matmuls
 * go (the weight seam's choice with offload on, the CPU kernels off). */
const char *bp_conv_moe_cpu_label(bp_op op, bp_kind k, char *buf, size_t len);

#endif
