/* Internals of the model layer: architectures, hyperparameters, the bound weights. */
#ifndef BP_MODEL_INTERNAL_H
#define BP_MODEL_INTERNAL_H

#include "backplane.h"
#include "backplane_model.h"
#include "seam/seam.h"

typedef enum bp_chat_kind { BP_CHAT_LLAMA = 0, BP_CHAT_CHATML = 1, BP_CHAT_GEMMA = 2, BP_CHAT_PHI3 = 3, BP_CHAT_HARMONY = 4 } bp_chat_kind;

typedef enum bp_moe_mode { BP_MOE_NONE = 0, BP_MOE_OPTIONAL = 1, BP_MOE_ALWAYS = 2 } bp_moe_mode;

typedef enum bp_arch_id {
#define BP_ARCH(ENUM, name, rope, qkn, post, swa, emb, act, chat, moe, gate_up) BP_ARCH_##ENUM,
#include "model/archs.def"
#undef BP_ARCH
    BP_ARCH_COUNT
} bp_arch_id;

typedef struct bp_arch {
    bp_arch_id id;
    const char *name;
    bp_rope_layout rope;
    bool qk_norm, post_norms;
    int swa_pattern;
    bool emb_scale;
    bp_activation ffn_act;
    bp_chat_kind chat;
    bp_moe_mode moe;
    bool gate_up;
} bp_arch;

/* The row for general.architecture `name`; NULL when unsupported. */
const bp_arch *bp_arch_lookup(const char *name);
const bp_arch *bp_arch_at(int i); /* NULL out of range */

/* tensors.def's `need` column. */
typedef enum bp_need {
    BP_NEED_ALWAYS, BP_NEED_OPTIONAL, BP_NEED_QK_NORM, BP_NEED_POST_NORMS, BP_NEED_DENSE, BP_NEED_DENSE_OPT,
    BP_NEED_MOE, BP_NEED_GPTOSS
} bp_need;

/* Hyperparameters, all from `<arch>.*` metadata (model_hparams.c), validated. */
typedef struct bp_hparams {
    int64_t n_vocab, n_embd, n_layer, n_ff, n_head, n_head_kv;
    int64_t head_dim_k, head_dim_v; /* key_length / value_length, default n_embd / n_head */
    int64_t n_rot;                  /* rope.dimension_count, default head_dim_k */
    int64_t n_ctx_train;
    float rms_eps;
    float rope_base, rope_base_swa; /* global and sliding-window layers' RoPE bases */
    float rope_freq_scale;          /* 1 / rope.scaling.factor for linear or YaRN scaling, else 1 */
    float rope_freq_scale_swa;      /* the sliding layers' (Gemma 3: 1; gpt-oss: rope_freq_scale) */
    /* YaRN (gpt-oss with rope.scaling.type "yarn"; ext_factor 0: none): as llama.cpp's context
     * computes them (llama-context.cpp): ext_factor 1, attn_factor (the cos/sin magnitude
     * before rope_yarn's own 1 + 0.1 ln factor), beta_fast 32 / beta_slow 1, and
     * rope.scaling.original_context_length (default context_length) */
    float yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
    int64_t yarn_n_ctx_orig;
    /* LongRoPE (Phi-3 with rope_factors_long / rope_factors_short): the context the short
     * factors were trained for (rope.scaling.original_context_length, default context_length),
     * and the cos/sin magnitude rope.scaling.attn_factor (default 1) that llama.cpp's context
     * multiplies into every RoPE's attn_factor */
    int64_t longrope_n_ctx_orig;
    float longrope_attn;
    float attn_scale;               /* applied to q.k */
    float final_softcap;            /* 0: none */
    float emb_scale;                /* 1, or sqrt(n_embd) */
    int64_t swa_window;             /* 0: no sliding window */
    bool *is_swa;                   /* n_layer flags */
    /* Routed experts (0 experts: a dense FFN): `<arch>.expert_count`, `.expert_used_count`,
     * `.expert_feed_forward_length` (qwen3moe; default n_ff / n_expert_used as llama.cpp's;
     * llama's experts are n_ff wide), whether the top-k weights are divided by their sum. */
    int64_t n_expert, n_expert_used, n_ff_exp;
    bool expert_norm;
    bp_moe_gate expert_gate;        /* softmax over all (default); gpt-oss: softmax of the top k */
} bp_hparams;

typedef struct bp_layer {
#define BP_LAYER_TENSOR(field, name, matrix, rows, cols, need) BP_LT_FIELD_##matrix(field)
#define BP_LT_FIELD_1(field) bp_weight *field;
#define BP_LT_FIELD_0(field) float *field;
#include "model/tensors.def"
#undef BP_LAYER_TENSOR
    bp_moe *experts; /* ffn_{gate,up,down}_exps, zero-copy views (NULL: dense FFN) */
} bp_layer;

typedef struct bp_named_weight {
    const char *name; /* the tensor's name inside the mapping's name table */
    bp_weight *w;
} bp_named_weight;

struct bp_model {
    bp_gguf *file;
    const bp_arch *arch;
    bp_hparams hp;
    char name[128];       /* general.name, truncated */
    bp_weight *tok_embd;  /* also the output projection when tied */
    bp_weight *output;    /* == tok_embd when tied */
    float *output_norm;
    float *rope_freqs;    /* rope_freqs.weight (Llama 3 frequency factors), n_rot / 2, or NULL */
    float *rope_long, *rope_short; /* Phi-3 LongRoPE: rope_factors_long / _short.weight, n_rot / 2, or NULL */
    bp_layer *layers;
    bp_named_weight *weights; /* every matrix once, for reports */
    int64_t n_weights;
    int64_t n_params;
    uint64_t weight_bytes;
    uint64_t vector_bytes;    /* the F32 copies of the norm weights and biases */
    bool release_originals;   /* bp_model_params.release_originals (memory.c) */
    bool shell;               /* bp_model_open_shell: metadata only, never run */
    unsigned char *released;  /* per weight: its original's pages are dropped */
};

/* After an eval (memory.c): drop the original pages of weights that have a repacked CPU copy.
 * prefill: a step of several tokens ran (the GEMM read the layer weights' originals);
 * output_gemm: several positions' logits were computed (the output's original was read). */
void bp_model_memory_after_eval(bp_model *m, bool prefill, bool output_gemm);

/* memory.c: the whole pages inside a weight's bytes, the ones released after an eval (from *lo;
 * 0 bytes when it spans no whole page). plan.c counts them. */
size_t bp_model_release_span(const bp_weight *w, uintptr_t *lo);

/* Re-fail with "prefix: <the current message>" (copied first: bp_fail formats into the buffer
 * bp_last_error returns). */
bp_status bp_model_fail_prefixed(bp_status s, const char *prefix);

/* A model bound from f's metadata alone (f is taken over, closed with the model): every tensor
 * checked as bp_model_load checks it, no tensor data read; its vectors point at a placeholder,
 * so it is planned (plan.c), never evaluated. */
bp_status bp_model_open_shell(bp_gguf *f, const char *path, bp_model **out);

bp_status bp_model_read_hparams(const bp_gguf *f, const bp_arch *arch, bp_hparams *hp);

/* Phi-3 LongRoPE: the factor set a context of n_ctx positions per sequence uses (forward.c),
 * or NULL for a model without LongRoPE. */
const float *bp_longrope_factors(const bp_model *m, int64_t n_ctx);

#endif
