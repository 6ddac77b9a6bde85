/* Loading a model: open the GGUF (mmap, validated by the reader), find the architecture's row,
 * read and validate the hyperparameters, then bind every tensor the forward pass uses by name,
 * checking its presence, shape and kind. Matrices become bp_weights over the mapped bytes
 * (zero-copy); norm weights and biases (a few KB) are copied to F32. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/model_internal.h"

bp_model_params bp_model_default_params(void) {
    bp_model_params p = {.progress = NULL, .progress_user = NULL, .prefetch = true, .release_originals = true};
    return p;
}

typedef struct binder {
    bp_model *m;
    const char *path;
    int64_t E, H, KV, DK, DV, F, NE;
    uint8_t *bound; /* per file tensor: bound by name (every tensor must be: check_all_bound) */
} binder;

static void mark(binder *b, const bp_gguf_tensor *t) {
    if (t) b->bound[t - bp_gguf_tensor_at(b->m->file, 0)] = 1;
}

static bp_status shape_error(const binder *b, const bp_gguf_tensor *t, int64_t rows, int64_t cols) {
    char got[96];
    int o = 0;
    for (uint32_t d = 0; d < t->n_dims && o < (int)sizeof got; d++)
        o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    if (rows == 1)
        return bp_fail(BP_E_SHAPE, "%s: tensor %s has shape [%s], expected [%lld]", b->path, t->name, got,
                       (long long)cols);
    return bp_fail(BP_E_SHAPE, "%s: tensor %s has shape [%s], expected [%lld, %lld]", b->path, t->name, got,
                   (long long)cols, (long long)rows);
}

/* The tensor `name` checked against rows x cols (rows 1: a vector of cols). *out NULL when it
 * is absent and optional. */
static bp_status find(const binder *b, const char *name, int64_t rows, int64_t cols, bool required,
                      const bp_gguf_tensor **out) {
    *out = NULL;
    const bp_gguf_tensor *t = bp_gguf_find_tensor(b->m->file, name);
    bp_clear_error();
    if (!t) {
        if (required)
            return bp_fail(BP_E_NOT_FOUND, "%s: %s model has no tensor %s", b->path, b->m->arch->name, name);
        return BP_OK;
    }
    bool ok = rows == 1 ? (t->n_dims == 1 && t->ne[0] == cols)
                        : (t->n_dims == 2 && t->ne[0] == cols && t->ne[1] == rows);
    if (!ok) return shape_error(b, t, rows, cols);
    if (t->kind_info->role != BP_ROLE_W)
        return bp_fail(BP_E_KIND, "%s: tensor %s is %s, not a weight kind", b->path, name, t->kind_info->name);
    *out = t;
    mark((binder *)b, t);
    return BP_OK;
}

static bp_status add_matrix(binder *b, const bp_gguf_tensor *t, bp_weight **out) {
    bp_status s = bp_weight_create(t->kind, t->data, t->bytes, t->ne[1], t->ne[0], out);
    if (s) {
        char pre[256];
        snprintf(pre, sizeof pre, "%s: tensor %s", b->path, t->name);
        return bp_model_fail_prefixed(s, pre);
    }
    bp_model *m = b->m;
    m->weights[m->n_weights].name = t->name;
    m->weights[m->n_weights].w = *out;
    m->n_weights++;
    m->n_params += t->n_elems;
    m->weight_bytes += t->bytes;
    return BP_OK;
}

static bp_status add_vector(binder *b, const bp_gguf_tensor *t, float **out) {
    if (t->kind != BP_KIND_F32 && t->kind != BP_KIND_F16 && t->kind != BP_KIND_BF16)
        return bp_fail(BP_E_KIND, "%s: tensor %s is %s; norm weights and biases must be F32, F16 or BF16", b->path,
                       t->name, t->kind_info->name);
    if (b->m->shell) {
        /* the tensor's bytes in the file, never read (a shell is planned, not run): a distinct
         * address per vector, as a loaded model's copies have, for whoever keys on them */
        *out = (float *)(uintptr_t)t->data;
        b->m->n_params += t->n_elems;
        b->m->weight_bytes += t->bytes;
        b->m->vector_bytes += (uint64_t)t->ne[0] * sizeof(float);
        return BP_OK;
    }
    *out = bp_malloc((size_t)t->ne[0] * sizeof(float));
    if (!*out) return bp_fail(BP_E_NOMEM, "%s: no memory for tensor %s", b->path, t->name);
    bp_status s = bp_dequantize(t->kind, t->data, t->bytes, *out, t->ne[0]);
    if (s) return s;
    for (int64_t i = 0; i < t->ne[0]; i++)
        if (!isfinite((*out)[i]))
            return bp_fail(BP_E_FORMAT, "%s: tensor %s[%lld] is not finite", b->path, t->name, (long long)i);
    b->m->n_params += t->n_elems;
    b->m->weight_bytes += t->bytes;
    b->m->vector_bytes += (uint64_t)t->ne[0] * sizeof(float);
    return BP_OK;
}

/* One stacked expert tensor blk.<il>.<what>.weight: ne {cols, rows, NE}. */
static bp_status find_experts(binder *b, int64_t il, const char *what, int64_t rows, int64_t cols,
                              bp_moe_tensor *out) {
    char name[96];
    snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)il, what);
    const bp_gguf_tensor *t = bp_gguf_find_tensor(b->m->file, name);
    bp_clear_error();
    if (!t) return bp_fail(BP_E_NOT_FOUND, "%s: %s model with experts has no tensor %s", b->path, b->m->arch->name, name);
    if (t->n_dims != 3 || t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != b->NE)
        return bp_fail(BP_E_SHAPE, "%s: tensor %s has %u dimensions [%lld, %lld, %lld], expected [%lld, %lld, %lld] "
                       "(%lld experts)", b->path, name, t->n_dims, (long long)t->ne[0], (long long)t->ne[1],
                       (long long)(t->n_dims > 2 ? t->ne[2] : 1), (long long)cols, (long long)rows, (long long)b->NE,
                       (long long)b->NE);
    if (t->kind_info->role != BP_ROLE_W)
        return bp_fail(BP_E_KIND, "%s: tensor %s is %s, not a weight kind", b->path, name, t->kind_info->name);
    *out = (bp_moe_tensor){.kind = t->kind, .ne = {t->ne[0], t->ne[1], t->ne[2]}, .data = t->data, .bytes = t->bytes};
    mark(b, t);
    b->m->n_params += t->n_elems;
    b->m->weight_bytes += t->bytes;
    return BP_OK;
}

/* One expert bias blk.<il>.<what>.bias: ne {n, NE}, F32/F16/BF16, as [NE][n] floats in *out
 * (NULL in a shell, which never runs). */
static bp_status find_expert_bias(binder *b, int64_t il, const char *what, int64_t n, float **out) {
    char name[96];
    snprintf(name, sizeof name, "blk.%lld.%s.bias", (long long)il, what);
    *out = NULL;
    const bp_gguf_tensor *t = bp_gguf_find_tensor(b->m->file, name);
    bp_clear_error();
    if (!t) return bp_fail(BP_E_NOT_FOUND, "%s: %s model has no tensor %s", b->path, b->m->arch->name, name);
    if (t->n_dims != 2 || t->ne[0] != n || t->ne[1] != b->NE)
        return bp_fail(BP_E_SHAPE, "%s: tensor %s has %u dimensions [%lld, %lld], expected [%lld, %lld]", b->path, name,
                       t->n_dims, (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1), (long long)n,
                       (long long)b->NE);
    if (t->kind != BP_KIND_F32 && t->kind != BP_KIND_F16 && t->kind != BP_KIND_BF16)
        return bp_fail(BP_E_KIND, "%s: tensor %s is %s; biases must be F32, F16 or BF16", b->path, name,
                       t->kind_info->name);
    mark(b, t);
    b->m->n_params += t->n_elems;
    b->m->weight_bytes += t->bytes;
    if (b->m->shell) return BP_OK;
    const size_t count = (size_t)(n * b->NE);
    if (!(*out = bp_malloc(count * sizeof(float)))) return bp_fail(BP_E_NOMEM, "%s: no memory for tensor %s", b->path, name);
    bp_status s = bp_dequantize(t->kind, t->data, t->bytes, *out, (int64_t)count);
    if (s) return bp_model_fail_prefixed(s, name);
    b->m->vector_bytes += count * sizeof(float);
    return BP_OK;
}

/* gpt-oss's experts: a bias after each projection and the clamped SwiGLU (alpha 1.702, limit 7,
 * llama.cpp's LLM_FFN_SWIGLU_OAI_MOE constants). */
static bp_status bind_expert_extras(binder *b, int64_t il) {
    const int64_t E = b->E, FE = b->m->hp.n_ff_exp;
    bp_moe *m = b->m->layers[il].experts;
    float *bg = NULL, *bu = NULL, *bd = NULL;
    bp_status s = find_expert_bias(b, il, "ffn_gate_exps", FE, &bg);
    if (!s) s = find_expert_bias(b, il, "ffn_up_exps", FE, &bu);
    if (!s) s = find_expert_bias(b, il, "ffn_down_exps", E, &bd);
    if (!s && !b->m->shell) s = bp_moe_set_biases(m, bg, bu, bd);
    if (!s) s = bp_moe_set_act(m, BP_MOE_ACT_SWIGLU_OAI, 1.702f, 7.0f);
    bp_free(bg), bp_free(bu), bp_free(bd);
    if (s && !strstr(bp_last_error(), b->path)) {
        char pre[160];
        snprintf(pre, sizeof pre, "%s: layer %lld's experts", b->path, (long long)il);
        return bp_model_fail_prefixed(s, pre);
    }
    return s;
}

static bp_status bind_experts(binder *b, int64_t il) {
    const int64_t E = b->E, FE = b->m->hp.n_ff_exp;
    bp_moe_tensor g, u, d;
    bp_status s;
    if ((s = find_experts(b, il, "ffn_gate_exps", FE, E, &g)) || (s = find_experts(b, il, "ffn_up_exps", FE, E, &u)) ||
        (s = find_experts(b, il, "ffn_down_exps", E, FE, &d)))
        return s;
    if ((s = bp_moe_upload_stacked(&g, &u, &d, &b->m->layers[il].experts))) {
        char pre[160];
        snprintf(pre, sizeof pre, "%s: layer %lld's experts", b->path, (long long)il);
        return bp_model_fail_prefixed(s, pre);
    }
    return b->m->arch->id == BP_ARCH_GPTOSS ? bind_expert_extras(b, il) : BP_OK;
}

/* Rows [row0, row0 + rows) of matrix t as a zero-copy weight (a fused tensor's part). */
static bp_status add_view(binder *b, const bp_gguf_tensor *t, int64_t row0, int64_t rows, bp_weight **out) {
    size_t rb;
    bp_status s = bp_kind_row_bytes(t->kind, t->ne[0], &rb);
    if (!s) s = bp_weight_create(t->kind, (const uint8_t *)t->data + (size_t)row0 * rb, (size_t)rows * rb, rows, t->ne[0], out);
    if (s) {
        char pre[256];
        snprintf(pre, sizeof pre, "%s: tensor %s rows %lld..%lld", b->path, t->name, (long long)row0,
                 (long long)(row0 + rows));
        return bp_model_fail_prefixed(s, pre);
    }
    bp_model *m = b->m;
    m->weights[m->n_weights].name = t->name;
    m->weights[m->n_weights].w = *out;
    m->n_weights++;
    m->n_params += rows * t->ne[0];
    m->weight_bytes += (size_t)rows * rb;
    return BP_OK;
}

/* Fused tensors as views before the table's separate ones (bind_layer skips a field already
 * bound): attn_qkv.weight (+ .bias) for any family, ffn_up.weight of 2 x n_ff rows where the
 * row says gate_up (gate rows first, as llama.cpp's swiglu splits it). */
static bp_status bind_fused(binder *b, int64_t il) {
    bp_layer *L = &b->m->layers[il];
    const int64_t QD = b->H * b->DK, KVD = b->KV * b->DK;
    char name[96];
    const bp_gguf_tensor *t;
    bp_status s;
    snprintf(name, sizeof name, "blk.%lld.attn_qkv.weight", (long long)il);
    if ((s = find(b, name, QD + 2 * KVD, b->E, false, &t))) return s;
    if (t && ((s = add_view(b, t, 0, QD, &L->wq)) || (s = add_view(b, t, QD, KVD, &L->wk)) ||
              (s = add_view(b, t, QD + KVD, KVD, &L->wv))))
        return s;
    snprintf(name, sizeof name, "blk.%lld.attn_qkv.bias", (long long)il);
    if ((s = find(b, name, 1, QD + 2 * KVD, false, &t))) return s;
    if (t) {
        float *all = NULL;
        if ((s = add_vector(b, t, &all))) return s;
        L->bq = bp_malloc(sizeof(float) * (size_t)QD);
        L->bk = bp_malloc(sizeof(float) * (size_t)KVD);
        L->bv = bp_malloc(sizeof(float) * (size_t)KVD);
        if (L->bq && L->bk && L->bv) {
            memcpy(L->bq, all, sizeof(float) * (size_t)QD);
            memcpy(L->bk, all + QD, sizeof(float) * (size_t)KVD);
            memcpy(L->bv, all + QD + KVD, sizeof(float) * (size_t)KVD);
        }
        bp_free(all);
        if (!L->bq || !L->bk || !L->bv) return bp_fail(BP_E_NOMEM, "%s: no memory for tensor %s", b->path, name);
    }
    if (!b->m->arch->gate_up || b->NE > 0) return BP_OK;
    snprintf(name, sizeof name, "blk.%lld.ffn_up.weight", (long long)il);
    if ((s = find(b, name, 2 * b->F, b->E, true, &t))) return s;
    if ((s = add_view(b, t, 0, b->F, &L->w_gate)) || (s = add_view(b, t, b->F, b->F, &L->w_up))) return s;
    return BP_OK;
}

static bp_status bind_layer(binder *b, int64_t il) {
    bp_layer *L = &b->m->layers[il];
    const bp_arch *a = b->m->arch;
    const bool moe = b->NE > 0;
    const int64_t E = b->E, H = b->H, KV = b->KV, DK = b->DK, DV = b->DV, F = b->F, NE = b->NE;
    (void)E, (void)H, (void)KV, (void)DK, (void)DV, (void)F, (void)NE;
    char name[96];
    const bp_gguf_tensor *t;
    bp_status s;
    bp_status fs = bind_fused(b, il);
    if (fs) return fs;
    /* gpt-oss: the tensor named post_attention_norm is the FFN's input norm (llama.cpp's
     * openai_moe normalizes x + attention with it before the experts); it has no ffn_norm */
    snprintf(name, sizeof name, "blk.%lld.post_attention_norm.weight", (long long)il);
    if (a->id == BP_ARCH_GPTOSS &&
        ((s = find(b, name, 1, E, true, &t)) || (s = add_vector(b, t, &L->ffn_norm))))
        return s;
    /* A tensor the layer does not use is left unbound, and check_all_bound names it; a field a
     * fused tensor filled is not looked for again. */
#define BP_LAYER_TENSOR(field, tname, matrix, rows, cols, need)                                             \
    {                                                                                                      \
        bool used = need == BP_NEED_ALWAYS || need == BP_NEED_OPTIONAL ||                                  \
                    (need == BP_NEED_QK_NORM && a->qk_norm) || (need == BP_NEED_POST_NORMS && a->post_norms) || \
                    ((need == BP_NEED_DENSE || need == BP_NEED_DENSE_OPT) && !moe) || (need == BP_NEED_MOE && moe) || \
                    (need == BP_NEED_GPTOSS && a->id == BP_ARCH_GPTOSS);                                   \
        bool required = need != BP_NEED_OPTIONAL && need != BP_NEED_DENSE_OPT;                             \
        snprintf(name, sizeof name, "blk.%lld.%s", (long long)il, tname);                                 \
        if (used && !L->field) {                                                                           \
            if ((s = find(b, name, rows, cols, required, &t))) return s;                                   \
            if (t && (s = BP_LT_ADD_##matrix(b, t, &L->field))) return s;                                  \
        }                                                                                                  \
    }
#define BP_LT_ADD_1 add_matrix
#define BP_LT_ADD_0 add_vector
#include "model/tensors.def"
#undef BP_LAYER_TENSOR
    return moe ? bind_experts(b, il) : BP_OK;
}

/* Every tensor of the file is one the forward pass reads: llama.cpp's loader refuses a file with
 * tensors it did not create, and so does this one, naming the first, so that a feature not
 * implemented here (shared experts, LongRoPE factors, attention sinks, biases...) is an
 * error, never a tensor silently left out of the sum. */
static bp_status check_all_bound(const binder *b) {
    const int64_t nt = bp_gguf_tensor_count(b->m->file);
    for (int64_t i = 0; i < nt; i++) {
        const char *tn = bp_gguf_tensor_at(b->m->file, i)->name;
        if (!b->bound[i] && !strncmp(tn, "rope_factors_", 13))
            return bp_fail(BP_E_UNSUPPORTED, "%s: tensor %s: LongRoPE frequency factors (rope_factors_long / "
                           "rope_factors_short) are not supported in a %s file (Phi-3's only)", b->path, tn,
                           b->m->arch->name);
        if (!b->bound[i])
            return bp_fail(BP_E_UNSUPPORTED, "%s: tensor %s is not used by backplane's %s forward pass (%s); the file "
                           "has a feature not supported here", b->path, bp_gguf_tensor_at(b->m->file, i)->name,
                           b->m->arch->name, b->NE > 0 ? "with routed experts" : "dense FFN");
    }
    return BP_OK;
}

/* Phi-3's LongRoPE factors (the 128k models): rope_factors_long and rope_factors_short, one
 * divisor per rotated pair, shared by every layer (llama.cpp's phi3 loader makes them once and
 * duplicates them); forward.c picks one pair per context. Half a pair, rope_freqs beside them, or
 * a LongRoPE magnitude without them is refused by name: llama.cpp would run such a file with
 * other factors than its author meant (none, or rope_freqs first). */
static bp_status bind_longrope(binder *b, const char *path) {
    bp_model *m = b->m;
    const bp_hparams *hp = &m->hp;
    const bp_gguf_tensor *tl = bp_gguf_find_tensor(m->file, "rope_factors_long.weight"),
                         *ts = bp_gguf_find_tensor(m->file, "rope_factors_short.weight");
    bp_status s;
    bp_clear_error();
    if (!tl && !ts) {
        if (hp->longrope_attn != 1.0f)
            return bp_fail(BP_E_UNSUPPORTED, "%s: phi3.rope.scaling.attn_factor = %g without rope_factors_long / "
                           "rope_factors_short.weight is not supported", path, (double)hp->longrope_attn);
        return BP_OK;
    }
    if (!tl || !ts)
        return bp_fail(BP_E_UNSUPPORTED, "%s: tensor %s without %s: LongRoPE needs both factor sets", path,
                       tl ? "rope_factors_long.weight" : "rope_factors_short.weight",
                       tl ? "rope_factors_short.weight" : "rope_factors_long.weight");
    if (m->rope_freqs || bp_gguf_find_tensor(m->file, "rope_freqs.weight"))
        return bp_fail(BP_E_UNSUPPORTED, "%s: tensor rope_freqs.weight beside LongRoPE's rope_factors_long / "
                       "rope_factors_short.weight is not supported", path);
    if ((s = find(b, "rope_factors_long.weight", 1, hp->n_rot / 2, true, &tl)) ||
        (s = find(b, "rope_factors_short.weight", 1, hp->n_rot / 2, true, &ts)) ||
        (s = add_vector(b, tl, &m->rope_long)) || (s = add_vector(b, ts, &m->rope_short)))
        return s;
    for (int64_t i = 0; !m->shell && i < hp->n_rot / 2; i++)
        for (int k = 0; k < 2; k++) {
            const float v = (k ? m->rope_short : m->rope_long)[i];
            if (!(v > 0))
                return bp_fail(BP_E_FORMAT, "%s: tensor %s[%lld] = %g; RoPE frequency factors must be > 0", path,
                               k ? "rope_factors_short.weight" : "rope_factors_long.weight", (long long)i, (double)v);
        }
    return BP_OK;
}

static void free_layers(bp_model *m) {
    if (!m->layers) return;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        bp_layer *L = &m->layers[il];
        bp_moe_free(L->experts);
#define BP_LAYER_TENSOR(field, tname, matrix, rows, cols, need) BP_LT_FREE_##matrix(L->field);
#define BP_LT_FREE_1(x) (void)0 /* matrices are freed from m->weights */
#define BP_LT_FREE_0(x) bp_free(m->shell ? NULL : x)
#include "model/tensors.def"
#undef BP_LAYER_TENSOR
    }
    bp_free(m->layers);
}

void bp_model_free(bp_model *m) {
    if (!m) return;
    for (int64_t i = 0; i < m->n_weights; i++) bp_weight_free(m->weights[i].w);
    bp_free(m->weights);
    bp_free(m->released);
    free_layers(m);
    if (!m->shell) bp_free(m->output_norm), bp_free(m->rope_freqs), bp_free(m->rope_long), bp_free(m->rope_short);
    bp_free(m->hp.is_swa);
    bp_gguf_close(m->file);
    bp_free(m);
}

/* Read one byte per page of every tensor, after telling the kernel the whole range will be
 * needed: the load then costs what reading the file costs, once, with progress. */
static bp_status prefetch(bp_model *m, const char *path, const bp_model_params *p) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) pg = 4096;
    uint64_t total = 0, done = 0;
    int64_t nt = bp_gguf_tensor_count(m->file);
    for (int64_t i = 0; i < nt; i++) total += bp_gguf_tensor_at(m->file, i)->bytes;
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < nt; i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(m->file, i);
        uintptr_t lo = (uintptr_t)t->data & ~(uintptr_t)(pg - 1);
        if (p->prefetch && t->bytes) madvise((void *)lo, t->bytes + ((uintptr_t)t->data - lo), MADV_WILLNEED);
        for (size_t o = 0; p->prefetch && o < t->bytes; o += (size_t)pg) sink ^= ((const uint8_t *)t->data)[o];
        done += t->bytes;
        if (p->progress && !p->progress(total ? (double)done / (double)total : 1.0, p->progress_user))
            return bp_fail(BP_E_INVAL, "%s: loading cancelled", path);
    }
    (void)sink;
    return BP_OK;
}

static bp_status bind_all(bp_model *m, binder *b, const bp_model_params *p);

/* Everything of loading but opening the file: m->file is open. A shell (m->shell) binds and
 * checks every tensor by its metadata and reads no tensor data: vectors are not copied, pages
 * not prefetched. */
static bp_status load(bp_model *m, const char *path, const bp_model_params *p) {
    bp_status s;
    const char *an;
    size_t alen;
    if (bp_gguf_get_str(m->file, "general.architecture", &an, &alen))
        return bp_fail(BP_E_FORMAT, "%s: no general.architecture string; not a model file", path);
    /* A GGUF string carries its length; one with a NUL inside would be read as its prefix
     * ("llama\0anything" as llama) by every C-string use after this. */
    if (memchr(an, 0, alen))
        return bp_fail(BP_E_FORMAT, "%s: general.architecture holds a NUL byte at offset %zu of its %zu", path,
                       (size_t)((const char *)memchr(an, 0, alen) - an), alen);
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(alen < 63 ? alen : 63), an);
    m->arch = bp_arch_lookup(arch);
    if (!m->arch || alen >= 63) {
        char list[160] = "";
        for (int i = 0; bp_arch_at(i); i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", bp_arch_at(i)->name);
        return bp_fail(BP_E_UNSUPPORTED, "%s: architecture '%.*s' is not supported (supported: %s)", path, (int)alen,
                       an, list);
    }
    const char *nm;
    size_t nlen;
    if (!bp_gguf_get_str(m->file, "general.name", &nm, &nlen)) {
        if (memchr(nm, 0, nlen))
            return bp_fail(BP_E_FORMAT, "%s: general.name holds a NUL byte at offset %zu of its %zu", path,
                           (size_t)((const char *)memchr(nm, 0, nlen) - nm), nlen);
        snprintf(m->name, sizeof m->name, "%.*s", (int)(nlen < sizeof m->name ? nlen : sizeof m->name - 1), nm);
    }
    bp_clear_error();
    bp_hparams *hp = &m->hp;
    if ((s = bp_model_read_hparams(m->file, m->arch, hp))) return bp_model_fail_prefixed(s, path);

    binder b = {.m = m, .path = path, .E = hp->n_embd, .H = hp->n_head, .KV = hp->n_head_kv,
                .DK = hp->head_dim_k, .DV = hp->head_dim_v, .F = hp->n_ff, .NE = hp->n_expert};
    b.bound = bp_calloc((size_t)bp_gguf_tensor_count(m->file) + 1, 1);
    if (!b.bound) return bp_fail(BP_E_NOMEM, "%s: no memory for the tensor list", path);
    s = bind_all(m, &b, p);
    bp_free(b.bound);
    return s;
}

static bp_status bind_all(bp_model *m, binder *bp, const bp_model_params *p) {
    binder b = *bp;
    const char *path = b.path;
    bp_hparams *hp = &m->hp;
    bp_status s;
    /* The vocabulary size is token_embd's row count; `<arch>.vocab_size` and the tokenizer's
     * list, when present, must agree with it (a mismatch would index past one of them). */
    const bp_gguf_tensor *te = bp_gguf_find_tensor(m->file, "token_embd.weight");
    bp_clear_error();
    if (!te) return bp_fail(BP_E_NOT_FOUND, "%s: %s model has no tensor token_embd.weight", path, m->arch->name);
    hp->n_vocab = te->n_dims == 2 ? te->ne[1] : 0;
    if (hp->n_vocab < 1 || hp->n_vocab > (1 << 24)) return shape_error(&b, te, 0, hp->n_embd);
    bp_gguf_value tv;
    if (!bp_gguf_get(m->file, "tokenizer.ggml.tokens", &tv) && tv.type == BP_GGUF_ARRAY &&
        tv.len != (uint64_t)hp->n_vocab)
        return bp_fail(BP_E_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries but token_embd.weight has %lld rows",
                       path, (unsigned long long)tv.len, (long long)hp->n_vocab);
    bp_clear_error();
    char vkey[96];
    snprintf(vkey, sizeof vkey, "%s.vocab_size", m->arch->name);
    if (!bp_gguf_get(m->file, vkey, &tv)) { /* the comment above promised this check; it was missing */
        int64_t nv;
        if (bp_gguf_value_i64(&tv, &nv) || nv != hp->n_vocab)
            return bp_fail(BP_E_FORMAT, "%s: %s (%s) disagrees with token_embd.weight's %lld rows", path, vkey,
                           bp_gguf_type_name(tv.type), (long long)hp->n_vocab);
    }
    bp_clear_error();

    /* Every matrix: 7 per layer at most, plus token_embd and output. */
    m->weights = bp_calloc((size_t)hp->n_layer * 8 + 2, sizeof *m->weights);
    m->layers = bp_calloc((size_t)hp->n_layer, sizeof *m->layers);
    m->released = bp_calloc((size_t)hp->n_layer * 8 + 2, 1);
    m->release_originals = p->release_originals;
    if (!m->weights || !m->layers || !m->released) return bp_fail(BP_E_NOMEM, "%s: no memory for %lld layers", path, (long long)hp->n_layer);

    const bp_gguf_tensor *t;
    if ((s = find(&b, "token_embd.weight", hp->n_vocab, hp->n_embd, true, &t)) ||
        (s = add_matrix(&b, t, &m->tok_embd)))
        return s;
    if ((s = find(&b, "output_norm.weight", 1, hp->n_embd, true, &t)) || (s = add_vector(&b, t, &m->output_norm)))
        return s;
    if ((s = find(&b, "output.weight", hp->n_vocab, hp->n_embd, false, &t))) return s;
    if (t) {
        if ((s = add_matrix(&b, t, &m->output))) return s;
    } else {
        m->output = m->tok_embd; /* tied */
    }
    if (hp->yarn_ext_factor > 0 && bp_gguf_find_tensor(m->file, "rope_freqs.weight"))
        return bp_fail(BP_E_UNSUPPORTED, "%s: tensor rope_freqs.weight: RoPE frequency factors with YaRN scaling are not "
                       "supported", path);
    bp_clear_error();
    if ((s = find(&b, "rope_freqs.weight", 1, hp->n_rot / 2, false, &t))) return s;
    if (t && (s = add_vector(&b, t, &m->rope_freqs))) return s;
    /* theta / factor: a factor <= 0 turns or flips every angle (0: an infinite one, NaN
     * logits); add_vector refused the non-finite ones */
    for (int64_t i = 0; !m->shell && m->rope_freqs && i < hp->n_rot / 2; i++)
        if (!(m->rope_freqs[i] > 0))
            return bp_fail(BP_E_FORMAT, "%s: tensor rope_freqs.weight[%lld] = %g; RoPE frequency factors must be > 0",
                           path, (long long)i, (double)m->rope_freqs[i]);
    if (m->arch->id == BP_ARCH_PHI3 && (s = bind_longrope(&b, path))) return s;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if ((s = bind_layer(&b, il))) return s;
    if ((s = check_all_bound(&b))) return s;
    return m->shell ? BP_OK : prefetch(m, path, p);
}

bp_status bp_model_fail_prefixed(bp_status s, const char *prefix) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", bp_last_error());
    return bp_fail(s, "%s: %s", prefix, msg);
}

bp_status bp_model_load(const char *path, const bp_model_params *params, bp_model **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_model_load: out is NULL");
    *out = NULL;
    if (!path) return bp_fail(BP_E_INVAL, "bp_model_load: path is NULL");
    bp_model_params p = params ? *params : bp_model_default_params();
    bp_model *m = bp_calloc(1, sizeof *m);
    if (!m) return bp_fail(BP_E_NOMEM, "bp_model_load: no memory");
    bp_status s = bp_gguf_open(path, &m->file); /* its message names the file and the offset */
    if (!s) s = load(m, path, &p);
    if (s) {
        /* the message names the failure; freeing must not replace it */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", bp_last_error());
        bp_model_free(m);
        return bp_fail(s, "%s", msg);
    }
    *out = m;
    return BP_OK;
}

bp_status bp_model_open_shell(bp_gguf *f, const char *path, bp_model **out) {
    *out = NULL;
    bp_model *m = bp_calloc(1, sizeof *m);
    if (!m) {
        bp_gguf_close(f);
        return bp_fail(BP_E_NOMEM, "%s: no memory", path);
    }
    m->file = f;
    m->shell = true;
    bp_model_params p = bp_model_default_params();
    p.prefetch = false;
    bp_status s = load(m, path, &p);
    if (s) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", bp_last_error());
        bp_model_free(m);
        return bp_fail(s, "%s", msg);
    }
    *out = m;
    return BP_OK;
}

bp_status bp_model_get_info(const bp_model *m, bp_model_info *o) {
    if (!m || !o) return bp_fail(BP_E_INVAL, "bp_model_get_info: NULL argument");
    const bp_hparams *hp = &m->hp;
    int64_t nswa = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) nswa += hp->swa_window > 0 && hp->is_swa[il];
    *o = (bp_model_info){.arch = m->arch->name, .name = m->name, .n_vocab = hp->n_vocab, .n_embd = hp->n_embd,
                         .n_layer = hp->n_layer, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
                         .head_dim = hp->head_dim_k, .n_ff = hp->n_ff, .n_ctx_train = hp->n_ctx_train,
                         .sliding_window = nswa ? hp->swa_window : 0, .n_swa_layers = nswa,
                         .n_params = m->n_params, .weight_bytes = m->weight_bytes,
                         .file_bytes = bp_gguf_file_size(m->file), .tied_output = m->output == m->tok_embd};
    return BP_OK;
}

const bp_gguf *bp_model_gguf(const bp_model *m) { return m ? m->file : NULL; }
int64_t bp_model_weight_count(const bp_model *m) { return m ? m->n_weights : 0; }

const bp_weight *bp_model_weight_at(const bp_model *m, int64_t i, const char **name) {
    if (!m || i < 0 || i >= m->n_weights) return NULL;
    if (name) *name = m->weights[i].name;
    return m->weights[i].w;
}
