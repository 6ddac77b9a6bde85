/* Every KV cache kind a context offers (bp_context_kv_kinds) gives logits within its documented
 * NMSE bound of the F16 cache's, on the tiny models (every architecture) and on Gemma 3 270M,
 * over 32 positions evaluated one batch of 24 and then 8 single tokens (prefill and decode
 * attention over the quantized cache). The bounds live in src/model/context.c beside the list. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "model/model_ref.h"

enum { P = 32, SPLIT = 24 };

/* logits[P][n_vocab] of tokens with a cache of kind k; NULL on failure (recorded) */
static float *run(bp_model *m, const int32_t *tokens, bp_kind k, int64_t n_vocab) {
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = P;
    cp.kv_kind = k;
    bp_context *c = NULL;
    float *out = malloc(sizeof(float) * P * (size_t)n_vocab);
    CHECK_OK(bp_context_create(m, &cp, &c));
    bool ok = c && out;
    if (ok) ok = bp_context_eval(c, tokens, SPLIT, SPLIT) == BP_OK;
    for (int p = 0; ok && p < SPLIT; p++) memcpy(out + (size_t)p * n_vocab, bp_context_logits(c, p), 4 * (size_t)n_vocab);
    for (int p = SPLIT; ok && p < P; p++) {
        ok = bp_context_eval(c, tokens + p, 1, 1) == BP_OK;
        if (ok) memcpy(out + (size_t)p * n_vocab, bp_context_logits(c, 0), 4 * (size_t)n_vocab);
    }
    CHECK(ok, "%s cache: %s", bp_kind_lookup((uint32_t)k)->name, bp_last_error());
    bp_context_free(c);
    if (!ok) free(out);
    return ok ? out : NULL;
}

static void run_model(const char *name, const char *path, const char *ref) {
    if (!path) return;
    model_ref_logits r;
    if (!model_ref_load(ref, &r)) return;
    bp_model *m = NULL;
    CHECK_OK(bp_model_load(path, NULL, &m));
    if (!m) goto out;
    bp_model_info info;
    bp_model_get_info(m, &info);
    float *base = run(m, r.tokens, BP_KIND_F16, info.n_vocab);
    bp_kind kinds[32];
    double bound[32];
    int n = bp_context_kv_kinds(kinds, bound, 32);
    CHECK(n >= 2 && kinds[0] == BP_KIND_F16, "kv kinds: %d, first %d", n, n ? (int)kinds[0] : -1);
    for (int i = 1; base && i < n; i++) {
        float *lg = run(m, r.tokens, kinds[i], info.n_vocab);
        if (!lg) continue;
        double worst = 0;
        for (int p = 0; p < P; p++) {
            double e = bp_test_nmse(lg + (size_t)p * info.n_vocab, base + (size_t)p * info.n_vocab, (size_t)info.n_vocab);
            if (!(e <= worst)) worst = e;
        }
        const char *kn = bp_kind_lookup((uint32_t)kinds[i])->name;
        fprintf(stderr, "%s: %s cache against F16: worst NMSE %.2e (bound %.0e)\n", name, kn, worst, bound[i]);
        CHECK(worst <= bound[i], "%s: %s cache: NMSE %.3e against the F16 cache's logits > its bound %.0e", name, kn,
              worst, bound[i]);
        free(lg);
    }
    free(base);
out:
    bp_model_free(m);
    model_ref_free(&r);
}

int main(void) {
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "gemma3"};
    for (int i = 0; i < 4; i++) {
        char ref[128], name[64];
        snprintf(ref, sizeof ref, "tests/model/ref/tiny-%s.logits.bin", archs[i]);
        snprintf(name, sizeof name, "tiny-%s", archs[i]);
        run_model(name, model_tiny_path(archs[i]), ref);
    }
    /* Gemma: 9 caches x 32 positions of a 262,144-entry vocabulary; under a sanitizer (-O0 +
     * ASan) that is minutes, under valgrind (BP_TEST_QUICK) an hour, and the tiny models above
     * cover the same code. */
    if (SANITIZED || bp_test_quick())
        fprintf(stderr, "%s: Gemma 3 270M's KV kinds not run (the tiny models were)\n",
                SANITIZED ? "sanitizer build" : "BP_TEST_QUICK");
    else run_model("gemma3-270m", model_gemma_path(), "tests/model/ref/gemma3-270m.logits.bin");
    return bp_test_finish();
}
