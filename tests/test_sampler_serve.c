/* The sampler's additions for serving, against independent expectations:
 * - log-probabilities (bp_sampler_logprobs) against NumPy's float64 log-softmax of the biased
 *   logits (tests/sampler/logprobs_ref.py), 1e-12 apart; the top-n ids in the reference's order;
 * - logit bias: a banned (-inf) token is never drawn, a +50 bias makes greedy pick its token;
 * - stop strings found across token boundaries, the text before them shown and the stop string
 *   not, a partial match held back and then released, UTF-8 never split, max tokens and EOG with
 *   their finish reasons. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

enum { V = 1000, ROWS = 4, TOP = 5 };

static void logprobs_vs_numpy(void) {
    char dir[] = "/tmp/bp_lpXXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    uint64_t rng = 7;
    static float lg[ROWS][V], bias[V];
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < V; i++) lg[r][i] = 8.0f * bp_test_randf(&rng);
    for (int i = 0; i < V; i++) bias[i] = i % 97 == 0 ? 3.5f : 0.0f;
    char path[96];
    snprintf(path, sizeof path, "%s/logits.bin", dir);
    FILE *f = fopen(path, "wb");
    int32_t hdr[2] = {ROWS, V};
    fwrite(hdr, sizeof hdr, 1, f);
    fwrite(lg, sizeof lg, 1, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/bias.bin", dir);
    f = fopen(path, "wb");
    fwrite(bias, sizeof bias, 1, f);
    fclose(f);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "python3 tests/sampler/logprobs_ref.py %s", dir);
    CHECK(system(cmd) == 0, "tests/sampler/logprobs_ref.py failed (python3 with numpy: scripts/install-deps.sh)");
    size_t len = 0;
    snprintf(path, sizeof path, "%s/ref.bin", dir);
    double *ref = bp_test_read_file(path, &len);
    if (ref && len == sizeof(double) * ROWS * V) {
        bp_sampler_params p = bp_sampler_default_params();
        bp_sampler *s = NULL;
        CHECK_OK(bp_sampler_create(&p, V, &s));
        bp_token ids[V];
        float b[V];
        int32_t nb = 0;
        for (int i = 0; i < V; i++)
            if (bias[i] != 0) ids[nb] = i, b[nb++] = bias[i];
        CHECK_OK(bp_sampler_set_logit_bias(s, ids, b, nb));
        double worst = 0;
        for (int r = 0; r < ROWS; r++) {
            const double *want = ref + (size_t)r * V;
            bp_logprob top[TOP];
            double lp;
            bp_token tok = (bp_token)(r * 211 % V);
            CHECK_OK(bp_sampler_logprobs(s, lg[r], tok, TOP, &lp, top));
            worst = fmax(worst, fabs(lp - want[tok]));
            /* the reference's top ids: by value, then lower id */
            int order[V];
            for (int i = 0; i < V; i++) order[i] = i;
            for (int k = 0; k < TOP; k++) {
                int best = k;
                for (int i = k + 1; i < V; i++)
                    if (want[order[i]] > want[order[best]]) best = i;
                int t = order[k];
                order[k] = order[best], order[best] = t;
                CHECK(top[k].id == order[k], "row %d top %d: id %d, NumPy's %d", r, k, top[k].id, order[k]);
                worst = fmax(worst, fabs(top[k].logprob - want[order[k]]));
            }
        }
        CHECK(worst <= 1e-12, "logprobs: worst %.3e from NumPy float64 (bound 1e-12)", worst);
        bp_sampler_free(s);
    } else {
        CHECK(0, "ref.bin: %zu bytes", len);
    }
    free(ref);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static void bias_draws(void) {
    float lg[8] = {5, 1, 1, 1, 1, 1, 1, 1};
    bp_sampler_params p = bp_sampler_default_params();
    p.temperature = 0;
    bp_sampler *s = NULL;
    CHECK_OK(bp_sampler_create(&p, 8, &s));
    bp_token t;
    CHECK_OK(bp_sampler_sample(s, lg, &t));
    CHECK(t == 0, "greedy without bias picked %d", t);
    CHECK_OK(bp_sampler_set_logit_bias(s, (const bp_token[]){3}, (const float[]){50}, 1));
    CHECK_OK(bp_sampler_sample(s, lg, &t));
    CHECK(t == 3, "greedy with +50 on id 3 picked %d", t);
    CHECK(bp_sampler_set_logit_bias(s, (const bp_token[]){8}, (const float[]){1}, 1) == BP_E_INVAL,
          "a bias outside the vocabulary was accepted");
    CHECK(bp_sampler_set_logit_bias(s, (const bp_token[]){1}, (const float[]){NAN}, 1) == BP_E_INVAL,
          "a NaN bias was accepted");
    bp_sampler_free(s);
    p.temperature = 1.0f, p.top_k = 0, p.top_p = 1, p.min_p = 0, p.seed = 3;
    CHECK_OK(bp_sampler_create(&p, 8, &s));
    CHECK_OK(bp_sampler_set_logit_bias(s, (const bp_token[]){0}, (const float[]){-INFINITY}, 1));
    int zero = 0;
    for (int i = 0; i < 2000; i++) {
        CHECK_OK(bp_sampler_sample(s, lg, &t));
        zero += t == 0;
    }
    CHECK(zero == 0, "a banned token was drawn %d times of 2000", zero);
    bp_sampler_free(s);
}

/* Push pieces; the shown text concatenated, and the reason. */
static bp_stop_reason run_stop(const char *const *stops, int ns, int64_t max, const char *const *pieces, int np,
                               int eog_at, char *shown, size_t cap) {
    bp_stopper *s = NULL;
    CHECK_OK(bp_stopper_create(stops, ns, max, &s));
    size_t n = 0;
    bp_stop_reason r = BP_STOP_NONE;
    shown[0] = 0;
    for (int i = 0; i < np && !r; i++) {
        const char *e;
        size_t el;
        r = bp_stopper_push(s, pieces[i], strlen(pieces[i]), i == eog_at, &e, &el);
        for (size_t k = 0; k < el && n + 1 < cap; k++) {
            /* UTF-8 never split: a shown chunk never ends inside a sequence */
            shown[n++] = e[k];
        }
        if (el) {
            unsigned char last = (unsigned char)e[el - 1];
            CHECK(last < 0x80 || (last & 0xC0) == 0x80, "shown text ends with a UTF-8 lead byte 0x%02x", last);
        }
        shown[n] = 0;
    }
    bp_stopper_free(s);
    return r;
}

static void stops(void) {
    char out[256];
    const char *st[] = {"</end>", "STOP"};
    /* across three tokens, with text before it in the same token */
    const char *p1[] = {"Hello wor", "ld</e", "nd> never"};
    bp_stop_reason r = run_stop(st, 2, 0, p1, 3, -1, out, sizeof out);
    CHECK(r == BP_STOP_STRING && !strcmp(out, "Hello world"), "stop across tokens: %d '%s'", (int)r, out);
    /* a partial match released when it does not complete */
    const char *p2[] = {"a</e", "x b", "c"};
    r = run_stop(st, 2, 3, p2, 3, -1, out, sizeof out);
    CHECK(r == BP_STOP_LENGTH && !strcmp(out, "a</ex bc"), "released partial match: %d '%s'", (int)r, out);
    CHECK(!strcmp(bp_stop_reason_name(r), "length"), "finish reason %s", bp_stop_reason_name(r));
    /* max tokens */
    const char *p3[] = {"1", "2", "3", "4"};
    r = run_stop(NULL, 0, 2, p3, 4, -1, out, sizeof out);
    CHECK(r == BP_STOP_LENGTH && !strcmp(out, "12"), "max tokens: %d '%s'", (int)r, out);
    /* EOG: its own text not shown, the held tail is */
    const char *p4[] = {"x ST", "<eos>"};
    r = run_stop(st, 2, 0, p4, 2, 1, out, sizeof out);
    CHECK(r == BP_STOP_EOG && !strcmp(out, "x ST") && !strcmp(bp_stop_reason_name(r), "stop"), "eog: %d '%s'", (int)r,
          out);
    /* a UTF-8 character split over two tokens is shown whole */
    const char *p5[] = {"caf\xC3", "\xA9!", "\xE2\x82", "\xAC"};
    r = run_stop(NULL, 0, 4, p5, 4, -1, out, sizeof out);
    CHECK(r == BP_STOP_LENGTH && !strcmp(out, "caf\xC3\xA9!\xE2\x82\xAC"), "utf-8: '%s'", out);
    /* a stop string that is the whole first token */
    const char *p6[] = {"STOP", "x"};
    r = run_stop(st, 2, 0, p6, 2, -1, out, sizeof out);
    CHECK(r == BP_STOP_STRING && !out[0], "stop as first token: '%s'", out);
    bp_stopper *s = NULL;
    CHECK(bp_stopper_create((const char *const[]){""}, 1, 0, &s) == BP_E_INVAL && !s, "an empty stop was accepted");
}

int main(void) {
    logprobs_vs_numpy();
    bias_draws();
    stops();
    return bp_test_finish();
}
