/* Hyperparameters from `<arch>.*` metadata, each validated: present when required, of a numeric
 * type, in a range that keeps every size computed from it far from overflow. The error names the
 * key, its value and the accepted range. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/model_internal.h"

static const bp_arch g_archs[] = {
#define BP_ARCH(ENUM, name, rope, qkn, post, swa, emb, act, chat, moe, gate_up) \
    {BP_ARCH_##ENUM, name, rope, qkn, post, swa, emb, act, chat, moe, gate_up},
#include "model/archs.def"
#undef BP_ARCH
};

const bp_arch *bp_arch_lookup(const char *name) {
    for (size_t i = 0; name && i < sizeof g_archs / sizeof g_archs[0]; i++)
        if (!strcmp(g_archs[i].name, name)) return &g_archs[i];
    return NULL;
}

const bp_arch *bp_arch_at(int i) {
    return i >= 0 && i < (int)(sizeof g_archs / sizeof g_archs[0]) ? &g_archs[i] : NULL;
}

/* Limits far above any real model and far below overflow: n_embd * n_vocab and
 * n_ctx * n_head * head_dim must fit comfortably in size_t. */
enum { MAX_DIM = 1 << 20, MAX_LAYERS = 4096, MAX_HEADS = 4096, MAX_CTX = 1 << 24 };

/* `<arch>.<suffix>` into key and *v. 1: absent and not required (the caller uses its default);
 * 0: found; otherwise the error. */
static int lookup(const bp_gguf *f, const char *arch, const char *suffix, bool required, char *key, size_t key_len,
                  bp_gguf_value *v) {
    snprintf(key, key_len, "%s.%s", arch, suffix);
    if (bp_gguf_find_key(f, key) < 0)
        return required ? (int)bp_fail(BP_E_FORMAT, "model: metadata key %s is missing", key) : 1;
    bp_gguf_get(f, key, v);
    return 0;
}

static bp_status get_int(const bp_gguf *f, const char *arch, const char *suffix, bool required, int64_t dflt,
                         int64_t lo, int64_t hi, int64_t *out) {
    char key[160];
    bp_gguf_value v;
    int r = lookup(f, arch, suffix, required, key, sizeof key, &v);
    if (r) {
        *out = dflt;
        return r == 1 ? BP_OK : (bp_status)r;
    }
    if (v.type == BP_GGUF_ARRAY)
        return bp_fail(BP_E_UNSUPPORTED, "model: %s is a per-layer array; only one value for every layer is supported",
                       key);
    int64_t x;
    if (bp_gguf_value_i64(&v, &x))
        return bp_fail(BP_E_FORMAT, "model: %s is a %s, not an integer", key, bp_gguf_type_name(v.type));
    if (x < lo || x > hi)
        return bp_fail(BP_E_FORMAT, "model: %s = %lld is outside %lld..%lld", key, (long long)x, (long long)lo,
                       (long long)hi);
    *out = x;
    return BP_OK;
}

static bp_status get_float(const bp_gguf *f, const char *arch, const char *suffix, bool required, double dflt,
                           double lo, double hi, float *out) {
    char key[160];
    bp_gguf_value v;
    int r = lookup(f, arch, suffix, required, key, sizeof key, &v);
    if (r) {
        *out = (float)dflt;
        return r == 1 ? BP_OK : (bp_status)r;
    }
    double x;
    if (bp_gguf_value_f64(&v, &x))
        return bp_fail(BP_E_FORMAT, "model: %s is a %s, not a number", key, bp_gguf_type_name(v.type));
    if (!isfinite(x) || x < lo || x > hi)
        return bp_fail(BP_E_FORMAT, "model: %s = %g is outside %g..%g", key, x, lo, hi);
    *out = (float)x;
    return BP_OK;
}

/* The sliding-window layers: `<arch>.attention.sliding_window_pattern` as a bool array (one per
 * layer) or a u32 period n (layer il slides unless il % n == n - 1), else the architecture's
 * default period; no window at all without `<arch>.attention.sliding_window`. */
static bp_status read_swa(const bp_gguf *f, const bp_arch *a, bp_hparams *hp) {
    hp->is_swa = bp_calloc((size_t)hp->n_layer, sizeof *hp->is_swa);
    if (!hp->is_swa) return bp_fail(BP_E_NOMEM, "model: no memory for %lld layer flags", (long long)hp->n_layer);
    /* Only a family with sliding-window layers reads the window keys (llama.cpp's rule): a
     * llama.attention.sliding_window used to make every layer of a llama model slide (its
     * pattern is 0: "every layer"), changing its logits silently. */
    if (a->swa_pattern == 0) return BP_OK;
    bp_status s = get_int(f, a->name, "attention.sliding_window", false, 0, 0, MAX_CTX, &hp->swa_window);
    if (s || hp->swa_window == 0) return s;
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a->name);
    bp_gguf_value v;
    int64_t period = a->swa_pattern;
    if (bp_gguf_find_key(f, key) >= 0) {
        bp_gguf_get(f, key, &v);
        if (v.type == BP_GGUF_ARRAY) {
            if (v.len != (uint64_t)hp->n_layer)
                return bp_fail(BP_E_FORMAT, "model: %s has %llu entries for %lld layers", key,
                               (unsigned long long)v.len, (long long)hp->n_layer);
            for (int64_t il = 0; il < hp->n_layer; il++) {
                bp_gguf_value e;
                bool b;
                if (bp_gguf_array_at(&v, (uint64_t)il, &e) || bp_gguf_value_bool(&e, &b))
                    return bp_fail(BP_E_FORMAT, "model: %s[%lld] is not a bool", key, (long long)il);
                hp->is_swa[il] = b;
            }
            return BP_OK;
        }
        s = get_int(f, a->name, "attention.sliding_window_pattern", true, 0, 0, MAX_LAYERS, &period);
        if (s) return s;
    }
    for (int64_t il = 0; il < hp->n_layer; il++) hp->is_swa[il] = period == 0 || il % period < period - 1;
    return BP_OK;
}

/* Routed experts (archs.def's moe column). The keys llama.cpp's loader reads for these families
 * and nothing else: a key that would change the routing in a way not implemented here (shared
 * experts, expert groups, a gating function other than softmax) is refused by name. */
static bp_status read_moe(const bp_gguf *f, const bp_arch *a, bp_hparams *hp) {
    const char *n = a->name;
    bp_status s;
    if (a->moe == BP_MOE_NONE) return BP_OK;
    if ((s = get_int(f, n, "expert_count", a->moe == BP_MOE_ALWAYS, 0, a->moe == BP_MOE_ALWAYS, MAX_HEADS,
                     &hp->n_expert)))
        return s;
    if (hp->n_expert == 0) return BP_OK;
    if ((s = get_int(f, n, "expert_used_count", true, 0, 1, hp->n_expert, &hp->n_expert_used))) return s;
    /* qwen3moe's experts have their own width (default llama.cpp's n_ff / n_expert_used);
     * llama's (Mixtral) are n_ff wide */
    hp->n_ff_exp = hp->n_ff;
    if (a->moe == BP_MOE_ALWAYS &&
        (s = get_int(f, n, "expert_feed_forward_length", false, hp->n_ff / hp->n_expert_used, 1, MAX_DIM,
                     &hp->n_ff_exp)))
        return s;
    if (hp->n_ff_exp < 1)
        return bp_fail(BP_E_FORMAT, "model: %s.feed_forward_length %lld over %lld experts used is no expert width", n,
                       (long long)hp->n_ff, (long long)hp->n_expert_used);
    static const char *const refused[] = {"expert_shared_count", "expert_group_count", "expert_group_used_count"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int64_t v;
        if ((s = get_int(f, n, refused[i], false, 0, 0, INT32_MAX, &v))) return s;
        if (v > 0)
            return bp_fail(BP_E_UNSUPPORTED, "model: %s.%s = %lld is not supported (routed experts only)", n, refused[i],
                           (long long)v);
    }
    if (a->id == BP_ARCH_GPTOSS) {
        /* llama.cpp's openai_moe fixes its routing whatever the file says: the top k biased
         * logits, softmax over those k, no further normalization or scale */
        hp->expert_gate = BP_MOE_GATE_SOFTMAX_TOPK, hp->expert_norm = false;
        bp_clear_error();
        return BP_OK;
    }
    int64_t gating;
    if ((s = get_int(f, n, "expert_gating_func", false, 1, 0, 16, &gating))) return s;
    if (gating > 1) /* llama.cpp's numbering: 0 unset, 1 softmax, 2 sigmoid, 3 softmax over the top k */
        return bp_fail(BP_E_UNSUPPORTED, "model: %s.expert_gating_func = %lld is not supported (1, softmax, is)", n,
                       (long long)gating);
    /* llama.cpp divides the top-k weights by their sum for both families whatever the file says;
     * a file that says false (Qwen3's norm_topk_prob off) gets what it says. */
    hp->expert_norm = true;
    char key[160];
    snprintf(key, sizeof key, "%s.expert_weights_norm", n);
    bp_gguf_value v;
    if (bp_gguf_find_key(f, key) >= 0) {
        bp_gguf_get(f, key, &v);
        if (bp_gguf_value_bool(&v, &hp->expert_norm))
            return bp_fail(BP_E_FORMAT, "model: %s is a %s, not a bool", key, bp_gguf_type_name(v.type));
    }
    bp_clear_error();
    return BP_OK;
}

bp_status bp_model_read_hparams(const bp_gguf *f, const bp_arch *a, bp_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    const char *n = a->name;
    bp_status s;
    if ((s = get_int(f, n, "embedding_length", true, 0, 1, MAX_DIM, &hp->n_embd)) ||
        (s = get_int(f, n, "block_count", true, 0, 1, MAX_LAYERS, &hp->n_layer)) ||
        (s = get_int(f, n, "feed_forward_length", true, 0, 1, MAX_DIM, &hp->n_ff)) ||
        (s = get_int(f, n, "attention.head_count", true, 0, 1, MAX_HEADS, &hp->n_head)) ||
        (s = get_int(f, n, "attention.head_count_kv", false, hp->n_head, 1, MAX_HEADS, &hp->n_head_kv)) ||
        (s = get_int(f, n, "context_length", false, 2048, 1, MAX_CTX, &hp->n_ctx_train)))
        return s;
    if (hp->n_head % hp->n_head_kv)
        return bp_fail(BP_E_FORMAT, "model: %s.attention.head_count %lld is not a multiple of head_count_kv %lld", n,
                       (long long)hp->n_head, (long long)hp->n_head_kv);
    int64_t dflt = hp->n_embd % hp->n_head ? 0 : hp->n_embd / hp->n_head;
    if ((s = get_int(f, n, "attention.key_length", dflt == 0, dflt, 1, MAX_DIM, &hp->head_dim_k)) ||
        (s = get_int(f, n, "attention.value_length", false, hp->head_dim_k, 1, MAX_DIM, &hp->head_dim_v)) ||
        (s = get_int(f, n, "rope.dimension_count", false, hp->head_dim_k, 2, hp->head_dim_k, &hp->n_rot)))
        return s;
    if (hp->head_dim_v != hp->head_dim_k)
        return bp_fail(BP_E_UNSUPPORTED, "model: %s key head size %lld != value head size %lld is not supported", n,
                       (long long)hp->head_dim_k, (long long)hp->head_dim_v);
    if (hp->n_rot % 2) return bp_fail(BP_E_FORMAT, "model: %s.rope.dimension_count %lld is odd", n, (long long)hp->n_rot);
    if ((size_t)hp->n_head * (size_t)hp->head_dim_k > (size_t)MAX_DIM)
        return bp_fail(BP_E_FORMAT, "model: %s: %lld heads of %lld is too wide", n, (long long)hp->n_head,
                       (long long)hp->head_dim_k);
    if ((s = get_float(f, n, "attention.layer_norm_rms_epsilon", true, 0, 1e-12, 1.0, &hp->rms_eps)) ||
        (s = get_float(f, n, "rope.freq_base", false, 10000.0, 1e-3, 1e12, &hp->rope_base)) ||
        (s = get_float(f, n, "rope.freq_base_swa", false, 10000.0, 1e-3, 1e12, &hp->rope_base_swa)))
        return s;
    /* The final soft-cap is Gemma's: the other families ignore the key, as llama.cpp does, rather
     * than let it change their logits. */
    if (a->id == BP_ARCH_GEMMA3 &&
        (s = get_float(f, n, "final_logit_softcapping", false, 0.0, 0.0, 1e6, &hp->final_softcap)))
        return s;

    /* gpt-oss's sliding layers take the global base unless the file names theirs (llama.cpp) */
    if (a->id == BP_ARCH_GPTOSS &&
        (s = get_float(f, n, "rope.freq_base_swa", false, hp->rope_base, 1e-3, 1e12, &hp->rope_base_swa)))
        return s;

    /* RoPE scaling: none, or linear (positions divided by the factor); YaRN for gpt-oss;
     * "longrope" for Phi-3 (its factors are tensors, model_load.c; as llama.cpp, the type only
     * names them and any rope.scaling.factor still divides the positions). YaRN elsewhere and
     * LongRoPE elsewhere are refused by name rather than run wrong. */
    hp->rope_freq_scale = 1.0f;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", n);
    const char *st;
    size_t stlen;
    if (bp_gguf_find_key(f, key) >= 0 && !bp_gguf_get_str(f, key, &st, &stlen) &&
        !(stlen == 4 && !memcmp(st, "none", 4))) {
        const bool yarn = stlen == 4 && !memcmp(st, "yarn", 4) && a->id == BP_ARCH_GPTOSS;
        const bool longrope = stlen == 8 && !memcmp(st, "longrope", 8) && a->id == BP_ARCH_PHI3;
        if (!(stlen == 6 && !memcmp(st, "linear", 6)) && !yarn && !longrope)
            return bp_fail(BP_E_UNSUPPORTED, "model: %s = \"%.*s\" is not supported (none and linear are%s)", key,
                           (int)stlen, st,
                           a->id == BP_ARCH_GPTOSS ? ", and yarn" : a->id == BP_ARCH_PHI3 ? ", and longrope" : "");
        float factor;
        if ((s = get_float(f, n, "rope.scaling.factor", false, 1.0, 1e-3, 1e6, &factor))) return s;
        hp->rope_freq_scale = 1.0f / factor;
        if (yarn) {
            float rope_attn;
            if ((s = get_int(f, n, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, MAX_CTX,
                             &hp->yarn_n_ctx_orig)) ||
                (s = get_float(f, n, "rope.scaling.attn_factor", false, 1.0, 1e-6, 1e6, &rope_attn)))
                return s;
            /* llama.cpp's context: the magnitude 0.1 ln(factor) + 1 (1 for factor <= 1), divided by
             * the 1 + 0.1 ln(factor) that rope_yarn multiplies in again, times the file's factor;
             * all in float as there */
            const float fs = 1.0f / hp->rope_freq_scale;
            float att = fs <= 1.0f ? 1.0f : 0.1f * logf(fs) + 1.0f;
            att *= 1.0f / (1.0f + 0.1f * logf(fs));
            hp->yarn_ext_factor = 1.0f, hp->yarn_attn_factor = att * rope_attn;
            hp->yarn_beta_fast = 32.0f, hp->yarn_beta_slow = 1.0f;
        }
    }
    hp->rope_freq_scale_swa = a->id == BP_ARCH_GPTOSS ? hp->rope_freq_scale : 1.0f;
    /* llama.cpp multiplies rope.scaling.attn_factor into every RoPE's magnitude (its context's
     * yarn_attn_factor *= rope_attn_factor, whatever the scaling). Here it is read for YaRN above
     * and for Phi-3's LongRoPE, whose step carries it beside the factors (model_load.c refuses
     * it in a Phi-3 file without them); in any other file a magnitude other than 1 is refused. */
    hp->longrope_attn = 1.0f;
    if (a->id == BP_ARCH_PHI3) {
        if ((s = get_int(f, n, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, MAX_CTX,
                         &hp->longrope_n_ctx_orig)) ||
            (s = get_float(f, n, "rope.scaling.attn_factor", false, 1.0, 1e-6, 1e6, &hp->longrope_attn)))
            return s;
    } else if (!(hp->yarn_ext_factor > 0)) {
        float rope_attn;
        if ((s = get_float(f, n, "rope.scaling.attn_factor", false, 1.0, 1e-6, 1e6, &rope_attn))) return s;
        if (rope_attn != 1.0f)
            return bp_fail(BP_E_UNSUPPORTED, "model: %s.rope.scaling.attn_factor = %g (a RoPE magnitude) is not "
                           "supported without YaRN outside Phi-3's LongRoPE", n, (double)rope_attn);
    }

    /* Attention scale: `<arch>.attention.scale` when the file has one; Gemma 3 27B (62 layers)
     * scales by 1/sqrt(n_embd / n_head) (its query_pre_attn_scalar), every other model here by
     * 1/sqrt(head size). */
    float scale, temp;
    if ((s = get_float(f, n, "attention.scale", false, 0.0, 0.0, 1e6, &scale))) return s;
    /* Llama 4 / Mistral 3 attention temperature: q scaled per position, not implemented */
    if ((s = get_float(f, n, "attention.temperature_scale", false, 0.0, -1e6, 1e6, &temp))) return s;
    if (temp != 0)
        return bp_fail(BP_E_UNSUPPORTED, "model: %s.attention.temperature_scale = %g (per-position query scaling) is "
                       "not supported", n, (double)temp);
    if (scale > 0) hp->attn_scale = scale;
    else if (a->id == BP_ARCH_GEMMA3 && hp->n_layer == 62)
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    else hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    hp->emb_scale = a->emb_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    if ((s = read_moe(f, a, hp))) return s;
    return read_swa(f, a, hp);
}
