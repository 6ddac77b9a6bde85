/* backplane ops: conv2d with a fused input norm, and mixture-of-experts routed experts.
 *
 * Part of the op layer (include/backplane_ops.h); included at the end of backplane.h, so
 * `#include <backplane.h>` gives it. Every function returns a bp_status and names what was wrong
 * through bp_last_error(); no function aborts on user input, and an op that fails its checks
 * writes nothing to its output.
 *
 * Exact mode (bp_set_exact_mode, BACKPLANE_EXACT=1), on the CPU, as the op layer's other ops:
 *   conv2d  norm statistics in double and f32 normalization in both modes; SiLU by the vector
 *           exp polynomial by default, libm expf in exact mode; the GEMM as bp_gemm (8-bit
 *           activations for quantized weight kinds in both modes: that is the kind's dot product).
 *   moe     silu(gate) * up likewise; the expert matmuls as bp_matmul jobs / bp_gemm.
 */
#ifndef BACKPLANE_OPS_CONV_MOE_H
#define BACKPLANE_OPS_CONV_MOE_H

#include "backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libbackplane.so without marking each declaration (see backplane.h). */
#pragma GCC visibility push(default)

/* ---- conv2d ------------------------------------------------------------------------------ */

/* The norm applied to the input as it is loaded, before the convolution (the pre-conv block
 * of diffusion U-Nets, VAEs and vision towers: norm, affine, SiLU, conv). */
typedef enum bp_conv_norm {
    BP_CONV_NORM_NONE = 0,
    BP_CONV_NORM_GROUP = 1, /* GroupNorm: channels split into `groups` runs, each normalized over
                               every pixel's channels of the run */
    BP_CONV_NORM_LAYER = 2, /* LayerNorm over each pixel's cin channels */
} bp_conv_norm;

typedef struct bp_conv2d_params {
    int64_t h, w;        /* input image, pixels */
    int64_t cin, cout;   /* channels */
    int64_t k;           /* kernel k x k; padding is k/2 on every side (zeros, after the norm) */
    int64_t stride;      /* >= 1 */
    bp_conv_norm norm;
    int64_t groups;      /* GroupNorm only: divides cin */
    float eps;           /* inside the square root: 1/sqrt(var + eps); var is the biased variance */
    const float *gamma;  /* cin scales after the norm, or NULL for 1 */
    const float *beta;   /* cin shifts after the norm, or NULL for 0 */
    bool silu;           /* x * sigmoid(x) after norm and affine (also without a norm) */
    const float *bias;   /* cout, added to every output pixel; NULL for none */
} bp_conv2d_params;

/* Output size: oh = (h + 2*(k/2) - k) / stride + 1, likewise ow. BP_E_SHAPE when empty. */
bp_status bp_conv2d_out_size(const bp_conv2d_params *p, int64_t *oh, int64_t *ow);

/* y[oh*ow][cout] = conv(act(norm(x))) + bias, channels-last: x is [h*w][cin] row-major (pixel
 * (iy, ix) at row iy*w + ix). The weight is a bp_weight of cout rows and k*k*cin columns in the
 * unfolded [cout][ky][kx][cin] layout, any of the 28 weight kinds (k*k*cin must be a whole number
 * of the kind's blocks). Runs on the first backend that claims (conv2d, kind, norm variant) and
 * launches, the CPU last; a launch error is a named, counted fallback. */
bp_status bp_conv2d(bp_weight *w, const bp_conv2d_params *p, const float *x, float *y);
/* The same on one backend only: "cpu-ref" (float64 reference), "cpu", or a backends.def name; a
 * backend that cannot run it is an error, never silently another. */
bp_status bp_conv2d_on(bp_weight *w, const char *backend, const bp_conv2d_params *p, const float *x,
                       float *y);

/* ---- mixture of experts ------------------------------------------------------------------- */

/* A layer's routed experts, uploaded once. Expert e computes
 *     down_e(silu(gate_e x) * up_e x)
 * with gate_e, up_e: [inter][h] and down_e: [h][inter] (rows x cols, GGUF order). The weight
 * bytes are the caller's, kept alive and unchanged until bp_moe_free (like bp_weight). */
typedef struct bp_moe bp_moe;

/* Fused per-expert layout: gate_up[e] is [2*inter][h] of kind gu_kind, the inter gate rows then
 * the inter up rows; down[e] is [h][inter] of kind down_kind. gu_bytes[e] / down_bytes[e] are the
 * buffer sizes (checked against the geometry). */
bp_status bp_moe_upload(int64_t n_expert, int64_t h, int64_t inter, bp_kind gu_kind,
                        const void *const *gate_up, const size_t *gu_bytes, bp_kind down_kind,
                        const void *const *down, const size_t *down_bytes, bp_moe **out);

/* One 3-D stacked tensor per projection, as GGUF stores them (ffn_gate_exps, ffn_up_exps,
 * ffn_down_exps): ne = {h, inter, n_expert} for gate and up, {inter, h, n_expert} for down;
 * expert e's matrix starts at e * rows * row_bytes. Each may be its own kind. */
typedef struct bp_moe_tensor {
    bp_kind kind;
    int64_t ne[3];
    const void *data;
    size_t bytes;
} bp_moe_tensor;
bp_status bp_moe_upload_stacked(const bp_moe_tensor *gate, const bp_moe_tensor *up, const bp_moe_tensor *down,
                                bp_moe **out);
/* The same from a GGUF file's tensors named <prefix>ffn_gate_exps.weight etc.
 * ("blk.3." as prefix); BP_E_NOT_FOUND / BP_E_SHAPE name the tensor. */
bp_status bp_moe_upload_gguf(const bp_gguf *f, const char *prefix, bp_moe **out);
void bp_moe_free(bp_moe *m);
/* Geometry of an uploaded layer (any pointer may be NULL). */
void bp_moe_shape(const bp_moe *m, int64_t *n_expert, int64_t *h, int64_t *inter);

/* The expert's activation and biases (default: SwiGLU, no biases). gpt-oss's expert is
 *     g = min(gate_e x + bg_e, limit), u = clamp(up_e x + bu_e, -limit, limit),
 *     a = g * sigmoid(alpha g) * (u + 1), out = down_e a + bd_e
 * (llama.cpp's swiglu_oai; gpt-oss uses alpha 1.702, limit 7). Biases are [n_expert][inter]
 * for gate and up, [n_expert][h] for down, copied; each may be NULL (none). Set before the
 * layer runs; a backend that cannot honour them does not take the call (the CPU does). */
typedef enum bp_moe_act {
    BP_MOE_ACT_SILU = 0,       /* silu(g) * u */
    BP_MOE_ACT_SWIGLU_OAI = 1, /* the clamped form above, with alpha and limit */
} bp_moe_act;
bp_status bp_moe_set_act(bp_moe *m, bp_moe_act act, float alpha, float limit);
bp_status bp_moe_set_biases(bp_moe *m, const float *b_gate, const float *b_up, const float *b_down);

/* y[i][h] += sum over j < top_k of route_w[i][j] * expert_{ids[i][j]}(x[i]) for t tokens; x and y
 * are [t][h], ids and route_w [t][top_k]. A token may name one expert twice (each route counts).
 * Tokens are grouped by expert, so each expert's weights are read once per call. Every id is
 * checked before anything is written: one outside [0, n_expert) is BP_E_INVAL naming the token
 * and slot. Runs on a backend that claims (moe, kind) when MoE offload is on, else the CPU. */
bp_status bp_moe_run(bp_moe *m, const float *x, int64_t t, int64_t top_k, const int32_t *ids, const float *route_w,
                     float *y);
/* The same on one backend only ("cpu-ref": float64 loop over tokens and routes, "cpu", ...). */
bp_status bp_moe_run_on(bp_moe *m, const char *backend, const float *x, int64_t t, int64_t top_k,
                        const int32_t *ids, const float *route_w, float *y);
/* What ran the last bp_moe_run on m ("CPU MoE: 6 experts, CPU avx512 Q4_K ..."); thread-local copy. */
const char *bp_moe_last_path(const bp_moe *m);

/* Routing: for each of t tokens, the top_k experts by the gate's float32 value, as llama.cpp's
 * CPU ranks them (equal values, including distinct logits whose float32 values are equal, go to
 * the lower index first; src/ops/moe_route.c),
 * with weights from the gate function over all n_expert logits; renorm divides the top_k weights
 * by their sum (Mixtral, Qwen3 norm_topk_prob), else they are left as the gate gave them. */
typedef enum bp_moe_gate {
    BP_MOE_GATE_SOFTMAX = 0, /* softmax over all logits */
    BP_MOE_GATE_SIGMOID = 1, /* sigmoid per logit (DeepSeek-V3 style) */
    BP_MOE_GATE_SOFTMAX_TOPK = 2, /* the top_k by logit, then softmax over those k (gpt-oss,
                                     llama.cpp's SOFTMAX_WEIGHT; renorm is then a no-op) */
} bp_moe_gate;
bp_status bp_moe_route(const float *logits, int64_t t, int64_t n_expert, int64_t top_k, bp_moe_gate gate,
                       bool renorm, int32_t *ids, float *route_w);

/* MoE offload (seed 002 moe_offload): when off, MoE runs on the CPU even where a device backend
 * claims it. Default on; BACKPLANE_MOE_OFFLOAD=0|false|off turns it off, read once at first
 * use; the setter overrides it for the whole process. */
bool bp_moe_offload(void);
void bp_set_moe_offload(bool on);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_OPS_CONV_MOE_H */
