/* What a model file says is checked where it used to be believed (issue 36), on copies of
 * tiny-llama.gguf with one thing changed:
 *   - a string key with a NUL inside (general.architecture "llama\0...", general.name,
 *     tokenizer.ggml.model) is refused, not read as its prefix;
 *   - llama.vocab_size that disagrees with token_embd.weight, and a tokenizer.ggml.scores longer
 *     than the token list, are refused;
 *   - keys a llama model does not use (attention.sliding_window, final_logit_softcapping,
 *     rope.freq_base_swa) leave its logits bit for bit the same (the window made every layer
 *     slide, the soft-cap capped the logits);
 *   - RoPE frequency factors <= 0 or infinite are refused at load, naming the element;
 *   - an infinite embedding row is an eval error naming token_embd.weight and the row, the cache
 *     unchanged, and perplexity over it an error (was PPL = -nan, BP_OK);
 *   - a context larger than the memory available is refused before allocation, naming the bytes
 *     asked and available (BACKPLANE_MEMORY_LIMIT stands in for a small machine), and allocated
 *     when the check is off. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "harness.h"
#include "model/model_ref.h"

static const char *g_src;
static char g_out[PATH_MAX + 64];

/* One change to the copy. */
typedef struct change {
    const char *key;         /* a key to set (replacing the file's, if any) */
    const char *str;         /* as a string of str_len bytes, or ... */
    size_t str_len;
    bp_gguf_type type;       /* ... a scalar of this type (U32 or F32), or ... */
    size_t f32_array_len;    /* ... an F32 array of this many zeros */
    uint32_t u32;
    float f32;
    const char *tensor;      /* an F32 tensor whose element elem becomes value, or a Q4_0 one */
    int64_t elem;            /* whose block elem's f16 scale becomes f16 (token_embd rows) */
    float value;
    uint16_t f16;
} change;

static bool write_variant(const change *ch) {
    bp_gguf *f = NULL;
    bp_gguf_writer *w = NULL;
    bool ok = false;
    uint8_t *copy = NULL;
    if (bp_gguf_open(g_src, &f) || bp_gguf_writer_create(&w)) goto out;
    for (int64_t i = 0; i < bp_gguf_kv_count(f); i++) {
        const char *k = bp_gguf_kv_key(f, i);
        bp_gguf_value v;
        if ((ch->key && !strcmp(k, ch->key)) || !strcmp(k, "general.alignment")) continue;
        bp_gguf_kv_value(f, i, &v);
        if (bp_gguf_writer_add_value(w, k, &v)) goto out;
    }
    if (ch->key && ch->str && bp_gguf_writer_add_string(w, ch->key, ch->str, ch->str_len)) goto out;
    if (ch->key && ch->f32_array_len) {
        float *zeros = calloc(ch->f32_array_len, sizeof *zeros);
        bool bad = !zeros || bp_gguf_writer_add_array(w, ch->key, BP_GGUF_F32, zeros, ch->f32_array_len);
        free(zeros);
        if (bad) goto out;
    } else if (ch->key && !ch->str)
        if (bp_gguf_writer_add_scalar(w, ch->key, ch->type, ch->type == BP_GGUF_F32 ? (const void *)&ch->f32
                                                                                    : (const void *)&ch->u32))
            goto out;
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        const void *data = t->data;
        if (ch->tensor && !strcmp(t->name, ch->tensor)) {
            free(copy);
            copy = malloc(t->bytes);
            if (!copy) goto out;
            memcpy(copy, t->data, t->bytes);
            if (t->kind == BP_KIND_F32) memcpy(copy + 4 * ch->elem, &ch->value, 4);
            else memcpy(copy + (size_t)ch->elem * t->kind_info->block_bytes, &ch->f16, 2); /* a block's d */
            data = copy;
        }
        if (bp_gguf_writer_add_tensor(w, t->name, t->kind, t->n_dims, t->ne, data, t->bytes)) goto out;
    }
    ok = bp_gguf_writer_write_file(w, g_out) == BP_OK;
out:
    if (!ok) bp_test_fail_at(__FILE__, __LINE__, "cannot write the variant: %s", bp_last_error());
    free(copy);
    bp_gguf_writer_free(w);
    bp_gguf_close(f);
    return ok;
}

static void expect_refused(const char *what, const change *ch, bp_status want, const char *w1, const char *w2) {
    if (!write_variant(ch)) return;
    bp_model *m = (bp_model *)1;
    bp_status s = bp_model_load(g_out, NULL, &m);
    const char *msg = bp_last_error();
    CHECK(s == want && m == NULL, "%s: status %s, expected %s (%s)", what, bp_status_name(s), bp_status_name(want),
          msg);
    CHECK(strstr(msg, w1) && (!w2 || strstr(msg, w2)), "%s: message lacks '%s'/'%s': %s", what, w1, w2 ? w2 : "",
          msg);
    if (s == BP_OK) bp_model_free(m);
}

/* The logits of a short prompt, every position. */
enum { NT = 6 };
static const int32_t prompt[NT] = {1, 40, 77, 123, 200, 7};

static bool logits_of(const char *path, float **out, int64_t *V) {
    bp_model *m = NULL;
    bp_context *c = NULL;
    bool ok = false;
    if (bp_model_load(path, NULL, &m) || bp_context_create(m, NULL, &c) || bp_context_eval(c, prompt, NT, NT)) {
        bp_test_fail_at(__FILE__, __LINE__, "%s: %s", path, bp_last_error());
        goto out;
    }
    bp_model_info info;
    bp_model_get_info(m, &info);
    *V = info.n_vocab;
    *out = malloc((size_t)NT * (size_t)*V * sizeof(float));
    for (int64_t j = 0; *out && j < NT; j++) memcpy(*out + j * *V, bp_context_logits(c, j), (size_t)*V * sizeof(float));
    ok = *out != NULL;
out:
    bp_context_free(c);
    bp_model_free(m);
    return ok;
}

static void test_strings_and_counts(void) {
    static const char arch[] = "llama\0mamba", name[] = "tiny\0llama", tokm[] = "llama\0x";
    expect_refused("NUL in general.architecture", &(change){.key = "general.architecture", .str = arch, .str_len = 11},
                   BP_E_FORMAT, "general.architecture", "NUL");
    expect_refused("NUL in general.name", &(change){.key = "general.name", .str = name, .str_len = 10}, BP_E_FORMAT,
                   "general.name", "NUL");
    if (write_variant(&(change){.key = "tokenizer.ggml.model", .str = tokm, .str_len = 7})) {
        bp_gguf *f = NULL;
        bp_tokenizer *t = NULL;
        CHECK_OK(bp_gguf_open(g_out, &f));
        bp_status s = f ? bp_tokenizer_create(f, &t) : BP_E_IO;
        CHECK(s == BP_E_FORMAT && strstr(bp_last_error(), "tokenizer.ggml.model"),
              "NUL in tokenizer.ggml.model: %s (%s)", bp_status_name(s), bp_last_error());
        bp_tokenizer_free(t);
        bp_gguf_close(f);
    }
    /* a per-token array longer than the token list (320 tokens) was accepted */
    if (write_variant(&(change){.key = "tokenizer.ggml.scores", .f32_array_len = 321})) {
        bp_gguf *f = NULL;
        bp_tokenizer *t = NULL;
        CHECK_OK(bp_gguf_open(g_out, &f));
        bp_status s = f ? bp_tokenizer_create(f, &t) : BP_E_IO;
        CHECK(s == BP_E_FORMAT && strstr(bp_last_error(), "321 entries for 320 tokens"),
              "321 scores for 320 tokens: %s (%s)", bp_status_name(s), bp_last_error());
        bp_tokenizer_free(t);
        bp_gguf_close(f);
    }
    expect_refused("llama.vocab_size disagrees",
                   &(change){.key = "llama.vocab_size", .type = BP_GGUF_U32, .u32 = 321}, BP_E_FORMAT,
                   "llama.vocab_size", "token_embd.weight");
    /* the right count loads */
    if (write_variant(&(change){.key = "llama.vocab_size", .type = BP_GGUF_U32, .u32 = 320})) {
        bp_model *m = NULL;
        CHECK_OK(bp_model_load(g_out, NULL, &m));
        bp_model_free(m);
    }
}

static void test_unused_keys(void) {
    float *ref = NULL;
    int64_t V = 0;
    if (!logits_of(g_src, &ref, &V)) return;
    const change unused[] = {
        {.key = "llama.attention.sliding_window", .type = BP_GGUF_U32, .u32 = 2},
        {.key = "llama.final_logit_softcapping", .type = BP_GGUF_F32, .f32 = 1.0f},
        {.key = "llama.rope.freq_base_swa", .type = BP_GGUF_F32, .f32 = 3.0f},
    };
    for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++) {
        float *got = NULL;
        if (!write_variant(&unused[i]) || !logits_of(g_out, &got, &V)) continue;
        size_t diff = 0;
        for (int64_t k = 0; k < NT * V; k++) diff += got[k] != ref[k];
        CHECK(diff == 0, "%s (unused by llama) changed %zu of %lld logits", unused[i].key, diff, (long long)(NT * V));
        free(got);
    }
    free(ref);
}

static void test_rope_factors(void) {
    const float bad[] = {0.0f, -1.0f, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "rope_freqs.weight[5] = %g", (double)bad[i]);
        expect_refused(what, &(change){.tensor = "rope_freqs.weight", .elem = 5, .value = bad[i]}, BP_E_FORMAT,
                       "rope_freqs.weight[5]", NULL);
    }
}

static void test_nonfinite_embedding(void) {
    /* token 77's row: 256 columns of Q4_0 = 8 blocks per row; block 77 * 8 + 3 gets d = +inf */
    if (!write_variant(&(change){.tensor = "token_embd.weight", .elem = 77 * 8 + 3, .f16 = 0x7c00})) return;
    bp_model *m = NULL;
    bp_context *c = NULL;
    CHECK_OK(bp_model_load(g_out, NULL, &m));
    if (!m) return;
    CHECK_OK(bp_context_create(m, NULL, &c));
    if (!c) goto out;
    const int32_t ok_ids[2] = {1, 40};
    CHECK_OK(bp_context_eval(c, ok_ids, 2, 1));
    bp_status s = bp_context_eval(c, prompt, NT, 1);
    const char *msg = bp_last_error();
    CHECK(s == BP_E_FORMAT, "eval over an infinite embedding row: %s (%s)", bp_status_name(s), msg);
    CHECK(strstr(msg, "token_embd.weight") && strstr(msg, "row 77"), "the error does not name the row: %s", msg);
    /* found before any work, as a bad id is: nothing appended, the previous logits readable */
    CHECK(bp_context_pos(c) == 2 && bp_context_logits(c, 0) != NULL, "after the failure: pos %lld",
          (long long)bp_context_pos(c));
    /* perplexity over a stream that holds the token: an error, not PPL = nan */
    int32_t stream[64];
    for (int i = 0; i < 64; i++) stream[i] = 3 + (i * 37) % 300;
    stream[40] = 77;
    bp_perplexity_result r;
    s = bp_context_perplexity(c, stream, 64, 16, 0, 1, NULL, NULL, &r);
    CHECK(s != BP_OK, "perplexity over an infinite embedding row returned BP_OK (ppl %g)", s ? 0.0 : r.ppl);
out:
    bp_context_free(c);
    bp_model_free(m);
}

static void test_memory_limit(void) {
    bp_model *m = NULL;
    CHECK_OK(bp_model_load(g_src, NULL, &m));
    if (!m) return;
    setenv("BACKPLANE_MEMORY_LIMIT", "1000000", 1); /* 1 MB: a 4096-token tiny context needs ~6 MB */
    bp_context_params p = bp_context_default_params();
    p.n_ctx = 4096;
    bp_context *c = (bp_context *)1;
    long long live = bp_alloc_live();
    bp_status s = bp_context_create(m, &p, &c);
    const char *msg = bp_last_error();
    CHECK(s == BP_E_NOMEM && c == NULL, "a context over the limit: %s (%s)", bp_status_name(s), msg);
    CHECK(strstr(msg, "1000000 bytes available") && strstr(msg, "BACKPLANE_MEMORY_LIMIT") && strstr(msg, "needs"),
          "the error does not name the bytes: %s", msg);
    CHECK(bp_alloc_live() == live, "the refused context allocated (%lld blocks live, %lld before)", bp_alloc_live(), live);
    bp_set_memory_check(false);
    CHECK_OK(bp_context_create(m, &p, &c));
    bp_context_free(c);
    bp_set_memory_check(true);
    p.n_ctx = 16; /* a small one fits */
    CHECK_OK(bp_context_create(m, &p, &c));
    bp_context_free(c);
    unsetenv("BACKPLANE_MEMORY_LIMIT");
    bp_model_free(m);
}

int main(void) {
    g_src = model_tiny_path("llama");
    if (!g_src) return bp_test_finish();
    snprintf(g_out, sizeof g_out, "%s.checks.%d.gguf", g_src, (int)getpid());
    test_strings_and_counts();
    test_unused_keys();
    test_rope_factors();
    test_nonfinite_embedding();
    test_memory_limit();
    if (!getenv("BP_KEEP")) remove(g_out);
    return bp_test_finish();
}
