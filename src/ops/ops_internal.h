/* Internals of the op layer: the run path every public op goes through, the CPU reference of
 * each op (the oracle the fast paths and any backend are tested against), the CPU fast paths,
 * the KV cache's layout and the stats counters. */
#ifndef BP_OPS_INTERNAL_H
#define BP_OPS_INTERNAL_H

#include "ops/op_call.h"

/* Validate nothing (the public entry points did), run c through the seam (claimed backends,
 * then the CPU), record stats and the last path. */
bp_status bp_op_run(bp_op_call *c);
/* The CPU's implementation of every op: a fast path when there is one, else the reference. */
bp_status bp_op_cpu(const bp_op_call *c, char *label, size_t label_len);
/* The CPU reference for every op (what mock backends compute, what the fast paths are tested
 * against). Only attention can fail (scratch allocation). */
bp_status bp_op_reference(const bp_op_call *c);

/* ---- references (in each op's file): plain loops, double accumulators ------------------------ */
void bp_ref_norm(const bp_norm_desc *d, const float *x, int64_t t, float *y);
void bp_ref_rope(const bp_rope_desc *d, float *x, int64_t t, const int32_t *positions);
void bp_ref_act(bp_activation a, const float *x, int64_t n, float *y);
void bp_ref_glu(bp_activation a, const float *gate, const float *up, int64_t n, float *y);
void bp_ref_softmax(const float *x, int64_t t, int64_t n, float scale, float softcap, const float *mask, float *y);
bp_status bp_ref_attention(const bp_attn_desc *d, const float *q, int64_t t, const int32_t *positions,
                           const bp_kv_cache *cache, int layer, float *out);
/* The activation of one value, as the reference computes it (double). */
double bp_ref_act1(bp_activation a, double x);

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
};

/* Keys [j0, j1) a query at position p may see in a layer holding len tokens under d. */
void bp_attn_key_range(const bp_attn_desc *d, int64_t p, int64_t len, int64_t *j0, int64_t *j1);

/* ---- CPU fast paths ------------------------------------------------------------------------ */
/* Attention (attention_cpu.c): whether the current ISA's kernels take these head dims, and the
 * call itself. */
bool bp_attention_cpu_fast_ok(const bp_op_call *c);
bp_status bp_attention_cpu(const bp_op_call *c, char *label, size_t label_len);
/* Norm, RoPE, activations, softmax (ops_cpu_rows.c). */
bp_status bp_ops_cpu_rows(const bp_op_call *c, char *label, size_t label_len);

/* What a call of op on kind k runs here (op_route.c): "MockOps attention Q8_0", "CPU avx512
 * attention (...)". Writes buf, returns it. */
const char *bp_op_route_label(bp_op op, bp_kind k, char *buf, size_t len);

/* ---- stats (src/ops/op_stats.c) ------------------------------------------------------------- */
void bp_stats_add(bp_op op, const char *backend, double seconds, double bytes, double flops);
double bp_ops_now(void); /* monotonic seconds */

#endif
