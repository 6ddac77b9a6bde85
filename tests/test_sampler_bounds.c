/* The sampler under every setting a caller can pass (issue 36): each step keeps at least one
 * candidate, so bp_sampler_sample returns an id inside the vocabulary (or BP_E_INVAL for a row
 * with nothing finite and no +inf), and bp_sampler_probs sums to 1 over ids that are in range.
 * Before the fix top_p <= 0 kept no candidate: the draw read before the candidate buffer (ASan:
 * heap-buffer-overflow) and the release build returned BP_OK with an id outside the vocabulary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { V = 97 };

/* One sample and one probs call: BP_OK with an id in range and probabilities summing to 1, or
 * BP_E_INVAL; never anything else. */
static void check_row(const bp_sampler_params *p, const float *logits, const char *what) {
    bp_sampler *s = NULL;
    bp_status rc = bp_sampler_create(p, V, &s);
    if (rc != BP_OK) { /* a refused setting must be refused by name, not crash later */
        CHECK(rc == BP_E_INVAL && s == NULL, "%s: create -> %s", what, bp_status_name(rc));
        return;
    }
    for (int i = 0; i < 5; i++) bp_sampler_accept(s, (bp_token)(i * 7 % V));
    bp_token id = -12345;
    rc = bp_sampler_sample(s, logits, &id);
    CHECK(rc == BP_OK || rc == BP_E_INVAL, "%s: sample -> %s", what, bp_status_name(rc));
    if (rc == BP_OK) CHECK(id >= 0 && id < V, "%s: sampled id %d outside 0..%d", what, (int)id, V - 1);
    double probs[V];
    rc = bp_sampler_probs(s, logits, probs);
    if (rc == BP_OK) {
        double sum = 0;
        for (int i = 0; i < V; i++) sum += probs[i];
        CHECK(fabs(sum - 1) < 1e-9, "%s: probabilities sum to %.17g", what, sum);
    }
    bp_sampler_free(s);
}

static void test_top_p_keeps_one(void) {
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = (float)(i % 13) * 0.25f;
    const float tops[] = {0.0f, -0.0f, -1.0f, -INFINITY, 1e-30f, 1e-3f};
    for (size_t k = 0; k < sizeof tops / sizeof tops[0]; k++) {
        bp_sampler_params p = bp_sampler_default_params();
        p.temperature = 1.0f, p.top_k = 0, p.min_p = 0, p.top_p = tops[k];
        bp_sampler *s = NULL;
        CHECK_OK(bp_sampler_create(&p, V, &s));
        if (!s) continue;
        bp_token id = -1;
        CHECK_OK(bp_sampler_sample(s, logits, &id));
        /* one survivor: the best logit (12 * 0.25, lowest id first among ties) */
        CHECK(id == 12, "top_p %g: sampled %d, expected 12 (the single best)", (double)tops[k], (int)id);
        double probs[V];
        CHECK_OK(bp_sampler_probs(s, logits, probs));
        CHECK(probs[12] == 1.0, "top_p %g: p[12] = %g", (double)tops[k], probs[12]);
        bp_sampler_free(s);
    }
}

/* Random settings (extremes included) against random rows with NaN and +/-Inf. */
static void test_random_settings(void) {
    uint64_t rng = 0x5eed36;
    const float odd[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-38f, 1e-45f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, 0.5f};
    const int n_odd = (int)(sizeof odd / sizeof odd[0]);
    float logits[V];
    char what[128];
    int rounds = bp_test_quick() ? 300 : 3000;
    for (int r = 0; r < rounds; r++) {
        bp_sampler_params p = bp_sampler_default_params();
#define PICK() (bp_test_rand(&rng) % 2 ? odd[bp_test_rand(&rng) % (uint64_t)n_odd] : bp_test_randf(&rng) * 2)
        p.temperature = PICK();
        p.top_p = PICK();
        p.min_p = PICK();
        p.repeat_penalty = PICK();
        p.frequency_penalty = PICK();
        p.presence_penalty = PICK();
        p.top_k = (int32_t)(bp_test_rand(&rng) % (V + 10)) - 5;
        p.repeat_last_n = (int32_t)(bp_test_rand(&rng) % 10);
        p.seed = bp_test_rand(&rng);
#undef PICK
        int mode = (int)(bp_test_rand(&rng) % 4);
        for (int i = 0; i < V; i++) {
            float x = bp_test_randf(&rng) * 20;
            if (mode >= 1 && bp_test_rand(&rng) % 5 == 0) x = odd[bp_test_rand(&rng) % (uint64_t)n_odd];
            if (mode == 3) x = bp_test_rand(&rng) % 3 ? -INFINITY : x; /* mostly -inf rows */
            logits[i] = x;
        }
        snprintf(what, sizeof what, "round %d (temp %g top_k %d top_p %g min_p %g rp %g)", r, (double)p.temperature,
                 (int)p.top_k, (double)p.top_p, (double)p.min_p, (double)p.repeat_penalty);
        check_row(&p, logits, what);
    }
}

int main(void) {
    test_top_p_keeps_one();
    test_random_settings();
    return bp_test_finish();
}
