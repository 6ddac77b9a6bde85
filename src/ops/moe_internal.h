/* MoE inside the op layer: the uploaded layer, the checks every path shares, the float64
 * reference and the CPU path (include/backplane_ops_conv_moe.h has the public side). */
#ifndef BP_OPS_MOE_INTERNAL_H
#define BP_OPS_MOE_INTERNAL_H

#include "backend/op_call.h"
#include "seam/seam.h"

struct bp_moe {
    int64_t n_expert, h, inter;
    /* Per expert, zero-copy views of the caller's bytes: gate and up ([inter][h]; in the fused
     * layout the first and second half of one buffer), down ([h][inter]). Each is a bp_weight,
     * so every backend caches its own copy or repacked layout inside it, as for any matmul. */
    bp_weight **gate, **up, **down;
    bp_moe_act act;                 /* bp_moe_set_act */
    float alpha, limit;             /* BP_MOE_ACT_SWIGLU_OAI */
    float *b_gate, *b_up, *b_down;  /* owned copies ([n_expert][inter] / [n_expert][h]) or NULL */
    char last_path[600];
};

/* Record what ran the last call on m (read back by bp_moe_last_path), under a lock: several
 * threads may run one layer. */
void bp_moe_set_path(bp_moe *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Every check of a run, named by `who`: pointers, t >= 0, top_k >= 1, and each id in
 * [0, n_expert) (the first bad one named by token and slot). Nothing is written on failure. */
bp_status bp_moe_check_run(const char *who, const bp_moe *m, const float *x, int64_t t, int64_t top_k,
                           const int32_t *ids, const float *route_w, const float *y);

/* The expert activation in place over n rows of inter: G = act(G + bg_e, U + bu_e) (biases
 * added first when the layer has them), in double for the reference (moe_ref.c) and float here. */
void bp_moe_activate(const bp_moe *m, int64_t e, float *G, const float *U, int64_t n);
/* y += the down bias of expert e times w (nothing without one). */
void bp_moe_add_down_bias(const bp_moe *m, int64_t e, float w, float *y);

/* How the CPU path runs each expert's matmuls. */
typedef enum bp_moe_matmul {
    BP_MOE_MATMUL_SEAM = 0, /* bp_gemm: the seam's choice per expert weight (offload on) */
    BP_MOE_MATMUL_CPU = 1,  /* the CPU kernels only (offload off, or the "cpu" backend forced) */
} bp_moe_matmul;

/* The CPU path (moe_cpu.c): routes grouped by expert, each used expert's gate, up and down
 * run once over all its tokens; label (may be NULL) gets what ran. Arguments already checked. */
bp_status bp_moe_cpu(bp_moe *m, bp_moe_matmul how, const float *x, int64_t t, int64_t top_k, const int32_t *ids,
                     const float *route_w, float *y, char *label, size_t label_len);
/* The CPU's MoE for the op layer (bp_op_cpu): expert matmuls through the seam, or on the CPU
 * kernels when the call is cpu_only (offload off, or "cpu" forced). */
bp_status bp_moe_cpu_op(const bp_op_call *c, char *label, size_t label_len);
/* The float64 reference (moe_ref.c): one expert dequantized at a time by the reference
 * dequantizer, every (token, route) of it computed in double. Arguments already checked. */
bp_status bp_moe_ref(const bp_moe *m, const float *x, int64_t t, int64_t top_k, const int32_t *ids,
                     const float *route_w, float *y);

#endif
