/* Gemma 3 270M Q4_K_M perplexity against llama-perplexity (tests/model/ref/gemma3-270m.ppl.txt,
 * made by tests/model/gen_ref/gen_ref.sh on tests/model/gpl-3.txt).
 *
 * Perplexity of tests/model/gpl-3.txt at ctx 512 over 8 chunks (4096 tokens), computed by
 * bp_context_perplexity as llama-perplexity does (BOS at each chunk's start, the second half of
 * each chunk scored), within 0.5% of llama-perplexity's figure. The token ids are llama.cpp's
 * (the reference file), so this does not depend on our tokenizer; `backplane perplexity` on the
 * text itself is tests/cli_model.sh. Under a sanitizer (-O0 + ASan, ~20x slower) it scores the
 * first chunk only, against llama-perplexity's figure after its first chunk, within 2%: one
 * chunk scores 255 tokens, and two correct implementations differ more there (measured: 0.87%
 * after 1 chunk, 0.34% after 2, 0.21% after 4, 0.08% after 8). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/model_ref.h"

static void test_perplexity(bp_model *m) {
    size_t len;
    char *text = bp_test_read_file("tests/model/ref/gemma3-270m.ppl_ids.txt", &len);
    char *ppl = bp_test_read_file("tests/model/ref/gemma3-270m.ppl.txt", &len);
    int32_t *ids = malloc(sizeof(int32_t) * 8192);
    bp_context *c = NULL;
    if (!text || !ppl || !ids) goto out;
    int n = 0;
    char *p = text;
    while (*p == '#') p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p);
    for (char *end; n < 8192; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
    }
    const int ctx = 512, chunks = SANITIZED ? 1 : 8;
    double want = 0;
    char key[32];
    snprintf(key, sizeof key, "chunk %d ", chunks);
    const char *k = strstr(ppl, key);
    if (k) want = strtod(k + strlen(key), NULL);
    CHECK(n >= ctx * chunks && want > 0, "perplexity reference: %d ids, figure %g", n, want);
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = ctx;
    CHECK_OK(bp_context_create(m, &cp, &c));
    bp_perplexity_result r = {0};
    /* the reference ids begin with BOS, as llama-perplexity tokenizes */
    if (c) CHECK_OK(bp_context_perplexity(c, ids, n, ctx, chunks, ids[0], NULL, NULL, &r));
    double rel = want > 0 ? fabs(r.ppl - want) / want : 1;
    fprintf(stderr, "gemma3-270m perplexity over %lld chunks of %d: %.4f, llama-perplexity %.4f (%.3f%% apart)\n",
            (long long)r.chunks, ctx, r.ppl, want, 100 * rel);
    CHECK(r.chunks == chunks && r.scored == chunks * (ctx / 2 - 1), "%lld chunks, %lld scored", (long long)r.chunks,
          (long long)r.scored);
    const double bound = SANITIZED ? 0.02 : 0.005;
    CHECK(rel <= bound, "perplexity %.4f is %.3f%% from llama-perplexity's %.4f (bound %.1f%%)", r.ppl, 100 * rel, want,
          100 * bound);
out:
    bp_context_free(c);
    free(ids);
    free(text);
    free(ppl);
}

int main(void) {
    const char *path = model_gemma_path();
    if (!path) return bp_test_finish();
    bp_model *m = NULL;
    CHECK_OK(bp_model_load(path, NULL, &m));
    if (m) test_perplexity(m);
    bp_model_free(m);
    return bp_test_finish();
}
