/* Bad input to the model layer gets a clear error naming what and where, never a crash, and
 * nothing already loaded is harmed: a truncated file, a tensor of the wrong shape or kind, a
 * missing tensor, an unknown architecture, bad hyperparameters (missing, out of range, heads that
 * do not divide), a prompt longer than the context, token ids out of range, NULL arguments, and
 * every host allocation of a load + eval failing in turn. The
 * broken files are copies of tiny-llama.gguf with one thing changed, written with our GGUF
 * writer into the build directory. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "harness.h"
#include "model/model_ref.h"

static const char *g_src;
static char g_out[PATH_MAX + 64];
static const char *g_extra; /* when set, write_variant adds a tensor of this name (output_norm's data) */

/* A copy of the source model with: key `drop_key` left out (NULL: none), `set_key` set to the
 * u32 `set_val` or, for general.architecture, the string `set_str`; tensor `tname` left out
 * (drop) or given the shape ne0 (a 1-D tensor keeps its first ne0 values). */
static bool write_variant(const char *drop_key, const char *set_key, uint32_t set_val, const char *set_str,
                          const char *tname, bool drop, int64_t ne0) {
    bp_gguf *f = NULL;
    bp_gguf_writer *w = NULL;
    bool ok = false;
    if (bp_gguf_open(g_src, &f) || bp_gguf_writer_create(&w)) goto out;
    for (int64_t i = 0; i < bp_gguf_kv_count(f); i++) {
        const char *k = bp_gguf_kv_key(f, i);
        bp_gguf_value v;
        if (drop_key && !strcmp(k, drop_key)) continue;
        if (set_key && !strcmp(k, set_key)) continue;
        if (!strcmp(k, "general.alignment")) continue;
        bp_gguf_kv_value(f, i, &v);
        if (bp_gguf_writer_add_value(w, k, &v)) goto out;
    }
    if (set_key && set_str && bp_gguf_writer_add_string(w, set_key, set_str, strlen(set_str))) goto out;
    if (set_key && !set_str && bp_gguf_writer_add_scalar(w, set_key, BP_GGUF_U32, &set_val)) goto out;
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        size_t bytes = t->bytes;
        if (tname && !strcmp(t->name, tname)) {
            if (drop) continue;
            ne[0] = ne0;
            bytes = (size_t)ne0 * 4; /* the test changes F32 vectors only */
        }
        if (bp_gguf_writer_add_tensor(w, t->name, t->kind, t->n_dims, ne, t->data, bytes)) goto out;
        if (g_extra && !strcmp(t->name, "output_norm.weight") &&
            bp_gguf_writer_add_tensor(w, g_extra, t->kind, t->n_dims, ne, t->data, bytes))
            goto out;
    }
    ok = bp_gguf_writer_write_file(w, g_out) == BP_OK;
out:
    if (!ok) bp_test_fail_at(__FILE__, __LINE__, "cannot write the variant: %s", bp_last_error());
    bp_gguf_writer_free(w);
    bp_gguf_close(f);
    return ok;
}

/* Loading g_out fails with status want and a message containing each of the NULL-ended words. */
static void expect_load_error(const char *what, bp_status want, ...) {
    bp_model *m = (bp_model *)1;
    bp_status s = bp_model_load(g_out, NULL, &m);
    const char *msg = bp_last_error();
    CHECK(s == want, "%s: status %s, expected %s (%s)", what, bp_status_name(s), bp_status_name(want), msg);
    CHECK(m == NULL, "%s: *out not NULL after a failure", what);
    va_list ap;
    va_start(ap, want);
    for (const char *word; (word = va_arg(ap, const char *));)
        CHECK(strstr(msg, word) != NULL, "%s: message lacks '%s': %s", what, word, msg);
    va_end(ap);
    if (getenv("BP_TEST_VERBOSE")) fprintf(stderr, "%s: %s\n", what, msg);
    if (s == BP_OK) bp_model_free(m);
}

static void test_files(void) {
    /* truncated: the first half of the file */
    size_t len;
    uint8_t *b = bp_test_read_file(g_src, &len);
    if (!b) return;
    FILE *fp = fopen(g_out, "wb");
    if (fp) fwrite(b, 1, len / 2, fp), fclose(fp);
    free(b);
    expect_load_error("truncated", BP_E_FORMAT, g_out, (char *)NULL);
    fp = fopen(g_out, "wb");
    if (fp) fclose(fp);
    expect_load_error("empty file", BP_E_FORMAT, g_out, (char *)NULL);
    remove(g_out);
    expect_load_error("missing file", BP_E_IO, g_out, (char *)NULL);

    if (write_variant(NULL, "general.architecture", 0, "mamba", NULL, false, 0))
        expect_load_error("unknown architecture", BP_E_UNSUPPORTED, "'mamba'", "llama, qwen2, qwen3, qwen3moe, gemma3",
                          (char *)NULL);
    if (write_variant("general.architecture", NULL, 0, NULL, NULL, false, 0))
        expect_load_error("no architecture", BP_E_FORMAT, "general.architecture", (char *)NULL);
    if (write_variant(NULL, NULL, 0, NULL, "blk.1.attn_norm.weight", false, 128))
        expect_load_error("wrong shape", BP_E_SHAPE, "blk.1.attn_norm.weight", "[128]", "[256]", (char *)NULL);
    if (write_variant(NULL, NULL, 0, NULL, "blk.2.ffn_up.weight", true, 0))
        expect_load_error("missing tensor", BP_E_NOT_FOUND, "blk.2.ffn_up.weight", (char *)NULL);
    if (write_variant(NULL, NULL, 0, NULL, "output_norm.weight", true, 0))
        expect_load_error("missing output norm", BP_E_NOT_FOUND, "output_norm.weight", (char *)NULL);
    if (write_variant("llama.embedding_length", NULL, 0, NULL, NULL, false, 0))
        expect_load_error("missing hyperparameter", BP_E_FORMAT, "llama.embedding_length", "missing", (char *)NULL);
    if (write_variant(NULL, "llama.attention.head_count_kv", 3, NULL, NULL, false, 0))
        expect_load_error("heads not divisible", BP_E_FORMAT, "head_count_kv", (char *)NULL);
    if (write_variant(NULL, "llama.block_count", 0, NULL, NULL, false, 0))
        expect_load_error("zero layers", BP_E_FORMAT, "llama.block_count", "= 0", (char *)NULL);
    if (write_variant(NULL, "llama.block_count", 4, NULL, NULL, false, 0))
        expect_load_error("more layers than tensors", BP_E_NOT_FOUND, "blk.3.", (char *)NULL);
    if (write_variant(NULL, "llama.embedding_length", 512, NULL, NULL, false, 0))
        expect_load_error("n_embd disagrees with the tensors", BP_E_SHAPE, "token_embd.weight", (char *)NULL);
    if (write_variant(NULL, "llama.attention.head_count", 0x7fffffff, NULL, NULL, false, 0))
        expect_load_error("absurd head count", BP_E_FORMAT, "llama.attention.head_count", (char *)NULL);
}

static void test_context(void) {
    bp_model *m = NULL;
    CHECK_OK(bp_model_load(g_src, NULL, &m));
    if (!m) return;
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = 16;
    bp_context *c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    if (!c) goto out;
    int32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = 5 + i;
    /* a prompt longer than the context */
    bp_status s = bp_context_eval(c, ids, 17, 1);
    CHECK(s == BP_E_INVAL && strstr(bp_last_error(), "do not fit") && strstr(bp_last_error(), "16"),
          "17 tokens in a 16-token context: %s (%s)", bp_status_name(s), bp_last_error());
    CHECK(bp_context_pos(c) == 0, "the failed eval moved pos to %lld", (long long)bp_context_pos(c));
    /* after some tokens, the rest must fit too */
    CHECK_OK(bp_context_eval(c, ids, 10, 1));
    s = bp_context_eval(c, ids, 7, 1);
    CHECK(s == BP_E_INVAL && bp_context_pos(c) == 10, "7 more after 10 of 16: %s, pos %lld", bp_status_name(s),
          (long long)bp_context_pos(c));
    /* ids out of range: nothing appended, logits of the last good eval intact */
    float keep = bp_context_logits(c, 0) ? bp_context_logits(c, 0)[7] : 0;
    int32_t bad[3] = {5, 320, 6};
    s = bp_context_eval(c, bad, 3, 1);
    CHECK(s == BP_E_INVAL && strstr(bp_last_error(), "320") && strstr(bp_last_error(), "0..319"),
          "id 320 in a 320-token vocabulary: %s (%s)", bp_status_name(s), bp_last_error());
    bad[1] = -1;
    s = bp_context_eval(c, bad, 3, 1);
    CHECK(s == BP_E_INVAL && strstr(bp_last_error(), "-1"), "id -1: %s (%s)", bp_status_name(s), bp_last_error());
    CHECK(bp_context_pos(c) == 10, "bad ids moved pos to %lld", (long long)bp_context_pos(c));
    CHECK(bp_context_logits(c, 0) && bp_context_logits(c, 0)[7] == keep, "bad ids changed the last logits");
    /* n_out out of range, NULL tokens */
    CHECK(bp_context_eval(c, ids, 2, 3) == BP_E_INVAL, "n_out > n accepted");
    CHECK(bp_context_eval(c, NULL, 2, 1) == BP_E_INVAL, "NULL tokens accepted");
    CHECK(bp_context_eval(NULL, ids, 2, 1) == BP_E_INVAL, "NULL context accepted");
    CHECK(bp_context_truncate(c, 11) == BP_E_INVAL, "truncate past pos accepted");
    CHECK(bp_context_logits(c, 1) == NULL && bp_context_logits(c, -1) == NULL, "logits out of range not NULL");
    /* the context still works: the remaining 6 tokens fit */
    CHECK_OK(bp_context_eval(c, ids + 10, 6, 6));
    CHECK(bp_context_pos(c) == 16, "pos %lld after filling", (long long)bp_context_pos(c));
    /* bad context parameters */
    bp_context *c2 = (bp_context *)1;
    cp.kv_kind = BP_KIND_Q4_K;
    CHECK(bp_context_create(m, &cp, &c2) == BP_E_KIND && c2 == NULL && strstr(bp_last_error(), "Q4_K"),
          "a Q4_K KV cache: %s", bp_last_error());
    cp.kv_kind = BP_KIND_F16;
    cp.n_ctx = -1;
    CHECK(bp_context_create(m, &cp, &c2) == BP_E_INVAL, "n_ctx -1 accepted");
    CHECK(bp_context_create(NULL, NULL, &c2) == BP_E_INVAL, "NULL model accepted");
out:
    bp_context_free(c);
    bp_model_free(m);
    CHECK(bp_model_load(NULL, NULL, &m) == BP_E_INVAL && m == NULL, "NULL path accepted");
    CHECK(bp_model_load(g_src, NULL, NULL) == BP_E_INVAL, "NULL out accepted");
    bp_model_info info;
    CHECK(bp_model_get_info(NULL, &info) == BP_E_INVAL, "info of NULL accepted");
    bp_model_free(NULL);
    bp_context_free(NULL);
}

/* Load, context and two evals with the Nth host allocation failing, for every N the workload
 * makes: each run either succeeds (the failure was absorbed, e.g. a scratch buffer's counted
 * fallback) or returns an error with a message; nothing crashes or leaks (the sanitizer build
 * checks), and afterwards a clean run gives exactly the logits of a run before the campaign. */
static void test_alloc_failures(void) {
    int32_t ids[8] = {1, 5, 9, 13, 17, 21, 25, 29};
    float before[320], after[320];
    for (int pass = 0; pass < 2; pass++) {
        bp_alloc_count_reset();
        bp_model *m = NULL;
        bp_context *c = NULL;
        bp_context_params cp = bp_context_default_params();
        cp.n_ctx = 16;
        CHECK_OK(bp_model_load(g_src, NULL, &m));
        if (m) CHECK_OK(bp_context_create(m, &cp, &c));
        if (c) CHECK_OK(bp_context_eval(c, ids, 8, 2));
        if (c) CHECK_OK(bp_context_eval(c, ids, 1, 1));
        const float *lg = c ? bp_context_logits(c, 0) : NULL;
        if (lg) memcpy(pass ? after : before, lg, sizeof before);
        long long total = bp_alloc_count();
        bp_context_free(c);
        bp_model_free(m);
        if (pass == 1) break;
        int failed = 0;
        for (long long n = 1; n <= total; n++) {
            bp_alloc_fail_after(n, false);
            m = NULL, c = NULL;
            bp_status s = bp_model_load(g_src, NULL, &m);
            if (!s) s = bp_context_create(m, &cp, &c);
            if (!s) s = bp_context_eval(c, ids, 8, 2);
            if (!s) s = bp_context_eval(c, ids, 1, 1);
            bp_alloc_fail_after(0, false);
            if (s) {
                failed++;
                CHECK(bp_last_error()[0] != 0, "allocation %lld failing: %s with no message", n, bp_status_name(s));
            }
            bp_context_free(c);
            bp_model_free(m);
        }
        if (getenv("BP_TEST_VERBOSE"))
            fprintf(stderr, "allocation failures: %lld allocations, %d runs failed cleanly\n", total, failed);
        CHECK(total > 0 && failed > 0, "the campaign failed nothing (%lld allocations)", total);
    }
    CHECK(!memcmp(before, after, sizeof before), "logits after the allocation-failure campaign differ");
}

/* Files of a known family with a feature not implemented: an error naming the key or the tensor,
 * never a model that loads and computes something else (issue 33). */
static void test_unsupported(void) {
    /* model_tiny_path's answer is one static buffer: each path is copied before the next */
    static char llama[PATH_MAX + 64], moe[PATH_MAX + 64], lmoe[PATH_MAX + 64], qwen3[PATH_MAX + 64],
        phi3[PATH_MAX + 64], mistral3[PATH_MAX + 64], gptoss[PATH_MAX + 64], longrope[PATH_MAX + 64];
    static const char *const names[] = {"qwen3moe", "llama-moe", "qwen3",  "phi3",
                                        "mistral3", "gpt-oss",   "phi3-longrope"};
    char *bufs[] = {moe, lmoe, qwen3, phi3, mistral3, gptoss, longrope};
    snprintf(llama, sizeof llama, "%s", g_src);
    for (int i = 0; i < 7; i++) {
        const char *p = model_tiny_path(names[i]);
        if (!p) return;
        snprintf(bufs[i], PATH_MAX + 64, "%s", p);
    }
    g_src = moe;
    if (write_variant("qwen3moe.expert_used_count", NULL, 0, NULL, NULL, false, 0))
        expect_load_error("no expert_used_count", BP_E_FORMAT, "qwen3moe.expert_used_count", "missing", (char *)NULL);
    if (write_variant("qwen3moe.expert_count", NULL, 0, NULL, NULL, false, 0))
        expect_load_error("no expert_count", BP_E_FORMAT, "qwen3moe.expert_count", "missing", (char *)NULL);
    if (write_variant(NULL, "qwen3moe.expert_used_count", 9, NULL, NULL, false, 0))
        expect_load_error("more experts used than there are", BP_E_FORMAT, "qwen3moe.expert_used_count", "= 9",
                          (char *)NULL);
    if (write_variant(NULL, "qwen3moe.expert_count", 7, NULL, NULL, false, 0))
        expect_load_error("expert count disagrees with the tensors", BP_E_SHAPE, "blk.0.ffn_gate_inp.weight",
                          (char *)NULL);
    if (write_variant(NULL, NULL, 0, NULL, "blk.1.ffn_down_exps.weight", true, 0))
        expect_load_error("missing expert tensor", BP_E_NOT_FOUND, "blk.1.ffn_down_exps.weight", (char *)NULL);
    if (write_variant(NULL, NULL, 0, NULL, "blk.2.ffn_gate_inp.weight", true, 0))
        expect_load_error("missing router", BP_E_NOT_FOUND, "blk.2.ffn_gate_inp.weight", (char *)NULL);
    if (write_variant(NULL, "qwen3moe.expert_shared_count", 1, NULL, NULL, false, 0))
        expect_load_error("shared experts", BP_E_UNSUPPORTED, "qwen3moe.expert_shared_count", (char *)NULL);
    if (write_variant(NULL, "qwen3moe.expert_gating_func", 2, NULL, NULL, false, 0))
        expect_load_error("sigmoid gating", BP_E_UNSUPPORTED, "qwen3moe.expert_gating_func", (char *)NULL);
    /* tensors of features not implemented: shared experts, LongRoPE factors */
    g_extra = "blk.1.ffn_up_shexp.weight";
    if (write_variant(NULL, NULL, 0, NULL, NULL, false, 0))
        expect_load_error("shared-expert tensor", BP_E_UNSUPPORTED, "blk.1.ffn_up_shexp.weight", "not used", (char *)NULL);
    g_extra = "rope_factors_long.weight";
    if (write_variant(NULL, NULL, 0, NULL, NULL, false, 0))
        expect_load_error("LongRoPE factors", BP_E_UNSUPPORTED, "rope_factors_long.weight", "LongRoPE", (char *)NULL);
    g_extra = NULL;
    if (write_variant(NULL, "general.architecture", 0, "gpt-oss", NULL, false, 0))
        expect_load_error("gpt-oss keys missing", BP_E_FORMAT, "gpt-oss.embedding_length", (char *)NULL);
    g_src = lmoe;
    if (write_variant(NULL, "llama.expert_count", 0, NULL, NULL, false, 0))
        expect_load_error("llama experts with expert_count 0", BP_E_NOT_FOUND, "blk.0.ffn_gate.weight", (char *)NULL);
    if (write_variant(NULL, NULL, 0, NULL, "blk.0.ffn_gate_exps.weight", true, 0))
        expect_load_error("llama experts without gate", BP_E_NOT_FOUND, "blk.0.ffn_gate_exps.weight", (char *)NULL);
    /* a dense file with a router: ffn_gate_inp in a family without experts */
    g_src = qwen3;
    g_extra = "blk.0.ffn_gate_inp.weight";
    if (write_variant(NULL, NULL, 0, NULL, NULL, false, 0))
        expect_load_error("router in a dense family", BP_E_UNSUPPORTED, "blk.0.ffn_gate_inp.weight", "not used",
                          (char *)NULL);
    g_extra = NULL;
    /* a RoPE magnitude outside YaRN and Phi-3's LongRoPE (llama.cpp would scale cos and sin) */
    g_src = llama;
    if (write_variant(NULL, "llama.rope.scaling.attn_factor", 2, NULL, NULL, false, 0))
        expect_load_error("llama RoPE attn_factor", BP_E_UNSUPPORTED, "llama.rope.scaling.attn_factor", (char *)NULL);
    /* Phi-3: half a LongRoPE factor set, factors of the wrong length, a LongRoPE magnitude
     * without factors, YaRN; the "longrope" scaling type is read (the factors are the tensors);
     * a fused gate-up of the wrong height */
    g_src = phi3;
    g_extra = "rope_factors_short.weight";
    if (write_variant(NULL, NULL, 0, NULL, NULL, false, 0))
        expect_load_error("phi3 short factors alone", BP_E_UNSUPPORTED, "rope_factors_short.weight",
                          "rope_factors_long.weight", "LongRoPE", (char *)NULL);
    g_extra = NULL;
    if (write_variant(NULL, "phi3.rope.scaling.attn_factor", 2, NULL, NULL, false, 0))
        expect_load_error("phi3 attn_factor without factors", BP_E_UNSUPPORTED, "phi3.rope.scaling.attn_factor",
                          "rope_factors_long", (char *)NULL);
    if (write_variant(NULL, "phi3.rope.scaling.type", 0, "yarn", NULL, false, 0))
        expect_load_error("phi3 YaRN", BP_E_UNSUPPORTED, "phi3.rope.scaling.type", "yarn", (char *)NULL);
    g_src = longrope;
    if (write_variant(NULL, NULL, 0, NULL, "rope_factors_long.weight", true, 0))
        expect_load_error("phi3 long factors missing", BP_E_UNSUPPORTED, "rope_factors_long.weight", "LongRoPE",
                          (char *)NULL);
    if (write_variant(NULL, NULL, 0, NULL, "rope_factors_short.weight", false, 16))
        expect_load_error("phi3 short factors of 16", BP_E_SHAPE, "rope_factors_short.weight", (char *)NULL);
    if (write_variant(NULL, "phi3.rope.scaling.type", 0, "longrope", NULL, false, 0)) {
        bp_model *m = NULL;
        CHECK_OK(bp_model_load(g_out, NULL, &m));
        bp_model_free(m);
    }
    g_src = phi3;
    if (write_variant(NULL, "phi3.feed_forward_length", 256, NULL, NULL, false, 0))
        expect_load_error("phi3 gate-up height", BP_E_SHAPE, "blk.0.ffn_up.weight", "[256, 512]", (char *)NULL);
    /* Mistral 3: YaRN scaling and the attention temperature, by key */
    g_src = mistral3;
    if (write_variant(NULL, "mistral3.rope.scaling.type", 0, "yarn", NULL, false, 0))
        expect_load_error("mistral3 YaRN", BP_E_UNSUPPORTED, "mistral3.rope.scaling.type", "yarn", (char *)NULL);
    if (write_variant(NULL, "mistral3.attention.temperature_scale", 1, NULL, NULL, false, 0))
        expect_load_error("mistral3 temperature", BP_E_UNSUPPORTED, "mistral3.attention.temperature_scale",
                          (char *)NULL);
    /* gpt-oss: each of its own tensors required by name, keys it does not implement refused */
    g_src = gptoss;
    static const char *const need[] = {"blk.1.attn_sinks.weight", "blk.0.ffn_gate_inp.bias", "blk.2.ffn_up_exps.bias",
                                       "blk.3.ffn_down_exps.bias", "blk.1.post_attention_norm.weight"};
    for (int i = 0; i < 5; i++)
        if (write_variant(NULL, NULL, 0, NULL, need[i], true, 0))
            expect_load_error("gpt-oss without one of its tensors", BP_E_NOT_FOUND, need[i], (char *)NULL);
    if (write_variant(NULL, "gpt-oss.expert_shared_count", 1, NULL, NULL, false, 0))
        expect_load_error("gpt-oss shared experts", BP_E_UNSUPPORTED, "gpt-oss.expert_shared_count", (char *)NULL);
    if (write_variant(NULL, "gpt-oss.rope.scaling.type", 0, "longrope", NULL, false, 0))
        expect_load_error("gpt-oss LongRoPE", BP_E_UNSUPPORTED, "gpt-oss.rope.scaling.type", "longrope", (char *)NULL);
    g_extra = "rope_freqs.weight";
    if (write_variant(NULL, NULL, 0, NULL, NULL, false, 0))
        expect_load_error("gpt-oss YaRN with frequency factors", BP_E_UNSUPPORTED, "rope_freqs.weight", "YaRN",
                          (char *)NULL);
    g_extra = NULL;
    /* its sinks in another family: a tensor that family does not read, named */
    g_src = qwen3;
    g_extra = "blk.0.attn_sinks.weight";
    if (write_variant(NULL, NULL, 0, NULL, NULL, false, 0))
        expect_load_error("sinks in a qwen3 file", BP_E_UNSUPPORTED, "blk.0.attn_sinks.weight", "not used", (char *)NULL);
    g_extra = NULL;
    g_src = llama;
}

int main(void) {
    g_src = model_tiny_path("llama");
    if (!g_src) return bp_test_finish();
    snprintf(g_out, sizeof g_out, "%s.broken.%d.gguf", g_src, (int)getpid());
    test_files();
    test_unsupported();
    test_context();
    test_alloc_failures();
    remove(g_out);
    return bp_test_finish();
}
