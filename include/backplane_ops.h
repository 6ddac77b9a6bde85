/* backplane ops: what a transformer layer calls (the op layer, src/ops).
 *
 * Included at the end of backplane.h: `#include <backplane.h>` gives everything.
 *
 * Conventions, the same for every op:
 *   - Activations are float32, row-major: x[t][n] is t rows (tokens) of n elements.
 *   - Every op returns a bp_status. Bad input (NULL, a shape that does not fit, mismatched
 *     head counts, a KV kind or head dim without a kernel, a cache past capacity, a position
 *     out of range) is an error whose bp_last_error() names the op, the shape and what is
 *     wrong; nothing is written to the outputs then, and nothing already stored (a KV cache)
 *     is corrupted. No op aborts on user input.
 *   - Out-of-place ops accept y == x (in place) unless said otherwise; partially overlapping
 *     buffers are not supported.
 *   - Each op runs on the first backend (src/backend/backends.def order) that is enabled and
 *     claims the (op, kind) pair, else on the CPU, which runs every op. A failed launch is a
 *     named, counted fallback (bp_fallback_report). bp_op_last_path() says what ran.
 *
 * Exact mode (bp_set_exact_mode, BACKPLANE_EXACT=1) per op, on the CPU:
 *   matmul jobs  as bp_matvec/bp_gemm: the CPU quantizes activations to 8 bits for quantized
 *                weight kinds in either mode (that is the kind's dot product, not a reduced-
 *                precision unit); a GPU backend keeps off f16 tensor cores.
 *   attention    both modes: K and V dequantized to f32, f32 dot products and accumulation,
 *                online softmax. Default: exp by a polynomial (relative error < 4e-7, tested);
 *                exact: libm expf.
 *   act, glu, the SiLU fused into a norm, softmax
 *                default: exp (and GELU's tanh through it) by the same polynomial; exact: libm
 *                expf/tanhf. GELU erf uses libm erff in both.
 *   norm, rope   f32 arithmetic with double row sums; RoPE angles formed and reduced to
 *                [-pi, pi] in double, sin/cos of the reduced angle in float; the same in both.
 * A GPU backend must honour the same split when it claims an op.
 */
#ifndef BACKPLANE_OPS_H
#define BACKPLANE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libbackplane.so without marking each declaration (see backplane.h). */
#pragma GCC visibility push(default)

/* ---- batched matmul jobs: several weights, one input, one submission ---------------------- */

/* y[t][w->rows] = x[t][w->cols] W^T. */
typedef struct bp_matmul_job {
    bp_weight *w;
    float *y;
} bp_matmul_job;

/* Every job's y = x W^T, from one x[t][cols]; every weight must have the same cols. Jobs whose
 * kinds use the same CPU activation format share one quantization of x (Q/K/V, gate/up), and
 * the jobs run as one submission over the thread pool; jobs of different kinds are fine. t = 1
 * runs the decode (matvec) kernels, larger t the GEMM. A job's y must not overlap x or another
 * job's y. The jobs one backend takes (by the seam's rule, job by job) go to it as one call: one
 * upload of x, one submission where the backend can. */
bp_status bp_matmul(const float *x, int64_t t, const bp_matmul_job *jobs, int n_jobs);

/* ---- norms ------------------------------------------------------------------------------- */

typedef enum bp_norm_type {
    BP_NORM_RMS = 0,   /* y = x / sqrt(mean(x^2) + eps) * gamma */
    BP_NORM_LAYER = 1, /* y = (x - mean) / sqrt(var + eps) * gamma + beta (var: biased, 1/n) */
    BP_NORM_GROUP = 2, /* LayerNorm over each group of channels; gamma, beta per channel */
} bp_norm_type;

typedef struct bp_norm_desc {
    bp_norm_type type;
    int64_t n;           /* elements per row (for GROUP: channels * spatial) */
    int64_t channels;    /* GROUP only: a row is [channels][spatial] (CHW, PyTorch's layout) */
    int64_t groups;      /* GROUP only: divides channels */
    float eps;           /* > 0 is usual; >= 0 required */
    const float *gamma;  /* NULL: none. n elements (GROUP: channels) */
    const float *beta;   /* NULL: none. LAYER and GROUP only (n, resp. channels elements) */
    bool silu;           /* apply SiLU to the result (the fused norm + SiLU of conv blocks) */
} bp_norm_desc;

/* y[t][n] = norm(x[t][n]) per d. */
bp_status bp_norm(const bp_norm_desc *d, const float *x, int64_t t, float *y);
/* Shorthands for bp_norm. */
bp_status bp_rms_norm(const float *x, int64_t t, int64_t n, const float *gamma, float eps, float *y);
bp_status bp_layer_norm(const float *x, int64_t t, int64_t n, const float *gamma, const float *beta, float eps,
                        float *y);

/* ---- rotary position embedding ------------------------------------------------------------ */

typedef enum bp_rope_layout {
    BP_ROPE_NORMAL = 0, /* rotate pairs (x[2i], x[2i+1]): GPT-J / llama */
    BP_ROPE_NEOX = 2,   /* rotate (x[i], x[i + n_rot/2]): GPT-NeoX, Gemma, Qwen (ggml's value 2) */
} bp_rope_layout;

typedef struct bp_rope_desc {
    int32_t n_heads;     /* heads per row: a row is [n_heads][head_dim] */
    int32_t head_dim;
    int32_t n_rot;       /* rotated dims per head: even, <= head_dim; the rest pass through */
    bp_rope_layout layout;
    float freq_base;     /* theta_i = pos * freq_scale * base^(-2i/n_rot), i in [0, n_rot/2) */
    float freq_scale;    /* 1 = none; linear position interpolation otherwise */
    /* YaRN (llama.cpp's rope_yarn; gpt-oss): with ext_factor > 0, pair i's angle mixes the
     * interpolated freq_scale * theta_i and the extrapolated theta_i by ramp(i) * ext_factor,
     * the ramp falling from 1 to 0 between the correction dims of beta_fast and beta_slow at
     * n_ctx_orig; cos and sin are scaled by attn_factor * (1 + 0.1 ln(1 / freq_scale)).
     * ext_factor 0: none (the other fields are ignored). */
    float ext_factor, attn_factor, beta_fast, beta_slow;
    int32_t n_ctx_orig;
} bp_rope_desc;

/* In place on x[t][n_heads * head_dim]; token j is at position positions[j] (any int32). */
bp_status bp_rope(const bp_rope_desc *d, float *x, int64_t t, const int32_t *positions);

/* ---- activations ------------------------------------------------------------------------- */

typedef enum bp_activation {
    BP_SILU = 0,      /* x * sigmoid(x) */
    BP_GELU_TANH = 1, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): Gemma's gelu_pytorch_tanh */
    BP_GELU_ERF = 2,  /* 0.5 x (1 + erf(x / sqrt(2))) */
} bp_activation;

/* y[i] = act(x[i]) for n elements (y == x is fine). */
bp_status bp_activate(bp_activation a, const float *x, int64_t n, float *y);
/* Gated forms: y[i] = act(gate[i]) * up[i] for n elements: SwiGLU = BP_SILU, GeGLU =
 * BP_GELU_TANH (or BP_GELU_ERF). y may be gate or up. */
bp_status bp_glu(bp_activation a, const float *gate, const float *up, int64_t n, float *y);

/* ---- softmax ----------------------------------------------------------------------------- */

/* Per row of x[t][n]: z = scale * x; with softcap > 0, z = softcap * tanh(z / softcap) (logit
 * soft-capping, Gemma 2); with mask != NULL, z += mask[row][i] (mask is [t][n], additive,
 * -INFINITY hides); y = exp(z - max) / sum. A row whose entries are all -inf gives zeros. */
bp_status bp_softmax(const float *x, int64_t t, int64_t n, float scale, float softcap, const float *mask, float *y);

/* ---- KV cache ------------------------------------------------------------------------------ */

/* Per layer: K and V for n_kv_heads heads of head_dim_k (head_dim_v) elements per token, up to
 * capacity tokens, stored in kind_k / kind_v (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL),
 * quantized on append. One sequence; a token's slot is its position (0 .. capacity-1). Storage
 * is per head, token after token ([layer][kv_head][token][head_dim]), so a decode step reads
 * each head's keys in one contiguous stream. A quantized kind needs head_dim to be a multiple
 * of its block (32). Host memory today; a device-resident cache later keeps this interface. */
typedef struct bp_kv_cache bp_kv_cache;

typedef struct bp_kv_cache_desc {
    int32_t n_layers;
    int32_t n_kv_heads;
    int32_t head_dim_k, head_dim_v;
    int64_t capacity;              /* tokens per layer */
    /* NULL: every layer holds `capacity` tokens. Otherwise n_layers capacities (each >= 1, at
     * most `capacity`): e.g. a smaller one for a sliding-window layer. */
    const int64_t *layer_capacity;
    bp_kind kind_k, kind_v;
} bp_kv_cache_desc;

/* Whether the cache can store kind k (one of the nine above); false for anything else. */
bool bp_kv_kind_supported(bp_kind k);
bp_status bp_kv_cache_create(const bp_kv_cache_desc *d, bp_kv_cache **out);
void bp_kv_cache_free(bp_kv_cache *c); /* NULL is fine */
/* The desc the cache was made with (layer_capacity NULL when it was). */
const bp_kv_cache_desc *bp_kv_cache_info(const bp_kv_cache *c);
/* Store k[n_tokens][n_kv_heads * head_dim_k] and v[n_tokens][n_kv_heads * head_dim_v] at
 * positions first_pos .. first_pos + n_tokens - 1 of layer, quantizing to the cache's kinds.
 * first_pos may be at most the layer's current length (append, or rewrite from an earlier
 * position); the layer's length becomes first_pos + n_tokens. Past the layer's capacity, or a
 * gap, is an error and nothing is stored. */
bp_status bp_kv_cache_append(bp_kv_cache *c, int layer, const float *k, const float *v, int64_t n_tokens,
                             int64_t first_pos);
/* Tokens stored in layer (0 .. capacity); -1 for a bad cache or layer. */
int64_t bp_kv_cache_length(const bp_kv_cache *c, int layer);
/* Keep only the first n_tokens of layer (n_tokens <= its length). layer -1: every layer longer
 * than n_tokens is cut to it (shorter ones are left as they are). */
bp_status bp_kv_cache_truncate(bp_kv_cache *c, int layer, int64_t n_tokens);
void bp_kv_cache_clear(bp_kv_cache *c); /* every layer's length becomes 0 */
/* Bytes of K and V storage over all layers. */
size_t bp_kv_cache_bytes(const bp_kv_cache *c);
/* The bytes bp_kv_cache_create(d) would hold (the same as bp_kv_cache_bytes of it), with its
 * checks of d, allocating nothing. */
bp_status bp_kv_cache_plan_bytes(const bp_kv_cache_desc *d, size_t *bytes);

/* A read view of one layer's K (or V): head h, token j is row_bytes bytes at
 * data + (h * head_stride + j * row_bytes); valid until the cache is freed. */
typedef struct bp_kv_view {
    bp_kind kind;
    int32_t n_kv_heads, head_dim;
    int64_t length;       /* tokens stored */
    size_t row_bytes;     /* one token of one head */
    size_t head_stride;   /* bytes from head h to head h + 1 */
    const uint8_t *data;
} bp_kv_view;
bp_status bp_kv_cache_view(const bp_kv_cache *c, int layer, bool values, bp_kv_view *out);
/* Dequantized copy of tokens [first, first + n) of layer's K (or V), as
 * out[n][n_kv_heads * head_dim] (the layout append takes). */
bp_status bp_kv_cache_read(const bp_kv_cache *c, int layer, bool values, int64_t first, int64_t n, float *out);

/* ---- attention ------------------------------------------------------------------------------ */

typedef struct bp_attn_desc {
    int32_t n_heads;     /* query heads */
    int32_t n_kv_heads;  /* must equal the cache's and divide n_heads (GQA; 1 = MQA) */
    float scale;         /* logits = scale * q.k (1/sqrt(head_dim) usually; Gemma 3: its own) */
    bool causal;         /* a query at position p sees keys at positions <= p */
    int64_t window;      /* > 0: sees only keys at positions j with |p - j| < window (Gemma 3's
                            sliding layers: 512); 0: none */
    float softcap;       /* > 0: logits = softcap * tanh(logits / softcap); 0: none */
    const float *sinks;  /* n_heads learned logits, or NULL: head h's softmax denominator gains
                            exp(sinks[h]) (a "sink" key with no value; gpt-oss's attn_sinks) */
} bp_attn_desc;

/* out[t][n_heads * head_dim_v] = softmax(scale q K^T (capped, masked)) V over layer's keys
 * 0 .. length-1 in cache, for the t queries q[t][n_heads * head_dim_k] at positions[t]. Each
 * position must be in [0, length) (a query's own key is appended before it attends). Computed
 * streaming over the keys (online softmax): memory does not grow with the context. A query
 * that sees no key (cannot happen with causal and its own key stored) gets zeros. out must
 * not overlap q. t = 1 is decode, more is prefill. */
bp_status bp_attention(const bp_attn_desc *d, const float *q, int64_t t, const int32_t *positions,
                       const bp_kv_cache *cache, int layer, float *out);

/* ---- what ran, and stats -------------------------------------------------------------------- */

/* Names of the ops (src/backend/ops.def), as capability tables, `probe`, `verify` and the stats
 * spell them: "matvec", "gemm", "jobs", "attention", "norm", "rope", "act", "glu", ... */
int bp_op_count(void);
const char *bp_op_name(int op); /* NULL out of range */
/* What ran the last call of the named op on this thread: "CPU avx512 attention (F16 KV)",
 * "Mock attention Q8_0 (fallback from ...)". "" before any call. The label of: */
const char *bp_op_last_path(const char *op);
/* The record of the last call of the named op on this thread (a jobs call: its first job's);
 * BP_E_NOT_FOUND before any call, or for an unknown name. */
bp_status bp_op_last_record(const char *op, bp_run_record *out);

/* Every distinct record since start (or the last reset) with its calls, time, bytes and FLOPs:
 * one row per (op, kinds, backend, kernel, decode or batch, fallback); a jobs call counts once
 * per job, its time shared by the jobs' weight bytes. `--profile` and `run`'s per-op summary
 * read these rows. Writes up to max rows (max may be 0), returns the number there are. */
typedef struct bp_run_tally {
    bp_run_record record; /* batch: 1 for decode rows, else the largest batch seen */
    unsigned long long calls;
    double seconds, bytes, flops;
    /* Tokens of the calls (the sum of their batches), and the bytes their calls copied from host
     * to device and back (counted by the device layer on the calling thread while each ran: a
     * CPU step run op by op includes what its ops on a device moved). */
    unsigned long long tokens, h2d_bytes, d2h_bytes;
} bp_run_tally;
int bp_run_tally_get(bp_run_tally *out, int max);

/* Per op and backend since start (or the last reset): calls, total time, bytes moved (inputs
 * read + outputs written, weights and KV included) and FLOPs (a multiply-add is 2). */
typedef struct bp_op_stat {
    const char *op;       /* "attention" */
    const char *backend;  /* "cpu", "vulkan", "mock" */
    unsigned long long calls;
    double seconds;
    double bytes;
    double flops;
} bp_op_stat;
/* Writes up to max rows (max may be 0) and returns the number of rows there are. */
int bp_stats_get(bp_op_stat *out, int max);
void bp_stats_reset(void);
/* A table of the tally (op, kind, what ran, calls, ms, ms/call, GB/s, GFLOP/s) and the
 * fallbacks. bp_stats_get/bp_stats_reset cover the tally too. */
void bp_stats_report(FILE *out);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_OPS_H */
