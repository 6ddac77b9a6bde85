/* The sampler against NumPy float64 (tests/sampler/gen_sampler_ref.py -> sampler_ref.txt):
 *   - the distribution each config draws from (bp_sampler_probs), every row x config, to 1e-12:
 *     greedy, temperature, top-k, top-p, min-p, penalties, and combinations, on rows with ties,
 *     -inf and NaN logits and a 1000-token row;
 *   - 10,000 seeded draws per (row, config) against those probabilities by chi-square, bound
 *     at p = 1e-6 (computed by the generator);
 *   - greedy = argmax, ties to the lowest id; the same seed gives the same draws, reset
 *     restarts them, another seed differs; bad parameters and rows are errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { MAX_ROWS = 8, MAX_CFG = 32, MAX_N = 1024 };

typedef struct row { char name[32]; int n; float v[MAX_N]; } row;
typedef struct cfg { char name[32]; bp_sampler_params p; int hist[16], n_hist; } cfg;

static row rows[MAX_ROWS];
static cfg cfgs[MAX_CFG];
static int n_rows, n_cfgs;

static row *find_row(const char *name) {
    for (int i = 0; i < n_rows; i++) if (!strcmp(rows[i].name, name)) return &rows[i];
    return NULL;
}
static cfg *find_cfg(const char *name) {
    for (int i = 0; i < n_cfgs; i++) if (!strcmp(cfgs[i].name, name)) return &cfgs[i];
    return NULL;
}

/* A sampler for c over r's vocabulary, with c's history accepted. */
static bp_sampler *make(const cfg *c, const row *r, uint64_t seed) {
    bp_sampler_params p = c->p;
    p.seed = seed;
    bp_sampler *s = NULL;
    CHECK_OK(bp_sampler_create(&p, r->n, &s));
    for (int i = 0; s && i < c->n_hist; i++) CHECK_OK(bp_sampler_accept(s, c->hist[i]));
    return s;
}

static void check_expect(char *rest) {
    char *save, *rn = strtok_r(rest, " ", &save), *cn = strtok_r(NULL, " ", &save);
    row *r = find_row(rn);
    cfg *c = find_cfg(cn);
    CHECK(r && c, "expect line for unknown %s/%s", rn, cn);
    if (!r || !c) return;
    static double want[MAX_N], got[MAX_N];
    for (int i = 0; i < r->n; i++) want[i] = strtod(strtok_r(NULL, " ", &save), NULL);
    bp_sampler *s = make(c, r, 1);
    if (!s) return;
    CHECK_OK(bp_sampler_probs(s, r->v, got));
    double worst = 0;
    for (int i = 0; i < r->n; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    CHECK(worst <= 1e-12, "%s/%s: probabilities differ from NumPy's by %.3g", rn, cn, worst);
    bp_sampler_free(s);
}

static void check_chi2(char *rest) {
    char *save, *rn = strtok_r(rest, " ", &save), *cn = strtok_r(NULL, " ", &save);
    int draws = atoi(strtok_r(NULL, " ", &save));
    double crit = strtod(strtok_r(NULL, " ", &save), NULL);
    row *r = find_row(rn);
    cfg *c = find_cfg(cn);
    if (!r || !c) {
        CHECK(false, "chi2 line for unknown %s/%s", rn, cn);
        return;
    }
    static int bin_of[MAX_N];
    double p[MAX_N];
    int n_bins = 0;
    for (int i = 0; i < r->n; i++) bin_of[i] = -1;
    for (char *b = strtok_r(NULL, " ", &save); b; b = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(b, ':');
        p[n_bins] = strtod(colon + 1, NULL);
        *colon = 0;
        for (char *id = b, *e; *id; id = *e ? e + 1 : e) bin_of[strtol(id, &e, 10)] = n_bins;
        n_bins++;
    }
    long count[MAX_N] = {0}, outside = 0;
    bp_sampler *s = make(c, r, 12345);
    if (!s) return;
    for (int k = 0; k < draws; k++) {
        bp_token t = -1;
        CHECK_OK(bp_sampler_sample(s, r->v, &t));
        if (t >= 0 && t < r->n && bin_of[t] >= 0) count[bin_of[t]]++;
        else outside++;
    }
    double chi2 = 0;
    for (int b = 0; b < n_bins; b++) {
        double e = p[b] * draws;
        chi2 += (count[b] - e) * (count[b] - e) / e;
    }
    CHECK(outside == 0, "%s/%s: %ld draws of tokens with probability 0", rn, cn, outside);
    CHECK(chi2 <= crit, "%s/%s: chi-square %.2f over %d bins exceeds %.2f", rn, cn, chi2, n_bins, crit);
    bp_sampler_free(s);
}

static void load_reference(void) {
    size_t len;
    char *txt = bp_test_read_file("tests/sampler/sampler_ref.txt", &len);
    CHECK(txt != NULL, "tests/sampler/sampler_ref.txt");
    if (!txt) return;
    int n_expect = 0, n_chi2 = 0;
    char *save;
    for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *ls;
        if (!strncmp(line, "row ", 4) && n_rows < MAX_ROWS) {
            row *r = &rows[n_rows++];
            strtok_r(line, " ", &ls);
            snprintf(r->name, sizeof r->name, "%s", strtok_r(NULL, " ", &ls));
            r->n = atoi(strtok_r(NULL, " ", &ls));
            for (int i = 0; i < r->n; i++) r->v[i] = strtof(strtok_r(NULL, " ", &ls), NULL);
        } else if (!strncmp(line, "config ", 7) && n_cfgs < MAX_CFG) {
            cfg *c = &cfgs[n_cfgs++];
            char hist[128];
            sscanf(line, "config %31s %f %d %f %f %f %f %f %d %127s", c->name, &c->p.temperature, &c->p.top_k,
                   &c->p.top_p, &c->p.min_p, &c->p.repeat_penalty, &c->p.frequency_penalty,
                   &c->p.presence_penalty, &c->p.repeat_last_n, hist);
            c->n_hist = 0;
            for (char *h = hist, *e; *h && *h != '-'; h = *e ? e + 1 : e) c->hist[c->n_hist++] = (int)strtol(h, &e, 10);
        } else if (!strncmp(line, "expect ", 7)) {
            check_expect(line + 7);
            n_expect++;
        } else if (!strncmp(line, "chi2 ", 5)) {
            check_chi2(line + 5);
            n_chi2++;
        }
    }
    fprintf(stderr, "sampler: %d distributions against NumPy, %d chi-square tests\n", n_expect, n_chi2);
    CHECK(n_expect >= 40 && n_chi2 >= 10, "reference read: %d expect, %d chi2 lines", n_expect, n_chi2);
    free(txt);
}

static void test_greedy_and_determinism(void) {
    float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, NAN, 1.0f};
    bp_sampler_params p = bp_sampler_default_params();
    p.temperature = 0;
    bp_sampler *s = NULL;
    bp_token t = -1;
    CHECK_OK(bp_sampler_create(&p, 6, &s));
    CHECK_OK(bp_sampler_sample(s, l, &t));
    CHECK(t == 1, "greedy: argmax with ties to the lowest id (got %d)", (int)t);
    bp_sampler_free(s);

    p = bp_sampler_default_params();
    p.top_k = 0, p.top_p = 1, p.min_p = 0, p.temperature = 1.5f, p.seed = 77;
    bp_token a[64], b[64], c[64];
    CHECK_OK(bp_sampler_create(&p, 6, &s));
    for (int i = 0; i < 64; i++) CHECK_OK(bp_sampler_sample(s, l, &a[i]));
    bp_sampler_reset(s);
    for (int i = 0; i < 64; i++) CHECK_OK(bp_sampler_sample(s, l, &b[i]));
    bp_sampler_free(s);
    CHECK(!memcmp(a, b, sizeof a), "reset restarts the same sequence");
    p.seed = 78;
    CHECK_OK(bp_sampler_create(&p, 6, &s));
    for (int i = 0; i < 64; i++) CHECK_OK(bp_sampler_sample(s, l, &c[i]));
    CHECK(memcmp(a, c, sizeof a) != 0, "another seed gives other draws");
    bool nan_drawn = false;
    for (int i = 0; i < 64; i++) nan_drawn |= a[i] == 4;
    CHECK(!nan_drawn, "a NaN logit is never drawn");

    float bad[6] = {-INFINITY, NAN, -INFINITY, NAN, -INFINITY, -INFINITY};
    CHECK(bp_sampler_sample(s, bad, &t) == BP_E_INVAL, "a row of -inf/NaN is BP_E_INVAL");
    CHECK(bp_sampler_accept(s, 6) == BP_E_INVAL && bp_sampler_accept(s, -1) == BP_E_INVAL,
          "accepting an id outside the vocabulary is BP_E_INVAL");
    float inf_row[6] = {1, INFINITY, 2, INFINITY, 3, 0};
    double pr[6];
    CHECK_OK(bp_sampler_probs(s, inf_row, pr));
    CHECK(pr[1] == 0.5 && pr[3] == 0.5 && pr[4] == 0, "+inf logits share the mass");
    bp_sampler_free(s);

    bp_sampler_params q = bp_sampler_default_params();
    q.temperature = NAN;
    CHECK(bp_sampler_create(&q, 6, &s) == BP_E_INVAL && strstr(bp_last_error(), "temperature"),
          "NaN temperature named: %s", bp_last_error());
    q = bp_sampler_default_params();
    q.repeat_penalty = 0;
    CHECK(bp_sampler_create(&q, 6, &s) == BP_E_INVAL && strstr(bp_last_error(), "repeat_penalty"),
          "repeat_penalty 0 named");
    q = bp_sampler_default_params();
    CHECK(bp_sampler_create(&q, 0, &s) == BP_E_INVAL, "n_vocab 0");
}

int main(void) {
    load_reference();
    test_greedy_and_determinism();
    return bp_test_finish();
}
