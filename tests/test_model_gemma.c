/* Gemma 3 270M Q4_K_M end to end against llama.cpp (tests/model/ref/gemma3-270m.*, made by
 * tests/model/gen_ref/gen_ref.sh). Token ids come from the reference files, so this test does
 * not depend on our tokenizer (tests/test_tokenizer*.c check that against llama.cpp's ids).
 *
 * 1. Logits of the first 32 positions of a fixed sentence, in one batch and one token at a time.
 *    The references store, per position, 512 fixed random vocabulary ids plus llama.cpp's top 64
 *    (the full 262,144 x 32 logits would be 33 MB); every NMSE here is over those 576 entries.
 *    Two references: llama.cpp's logits, and the exact float64 NumPy forward pass
 *    (tests/model/np_forward.py) at the same entries. Measured on the dev machine:
 *
 *        against float64          worst position   median
 *        llama.cpp (FA, F16 KV)   6.6e-3           9.7e-4    (no llama.cpp setting does better:
 *        llama.cpp (no FA, F32)   6.1e-3           1.1e-3     its 8-bit activations dominate)
 *        ours, one batch          1.4e-3 - 2.8e-3  4.2e-4    (as the op layer's kernels changed
 *        ours, one token at once  2.9e-3 - 5.2e-3  6.1e-4     during the day; 8-bit activations)
 *        ours, reference kernels  1.0e-12                    (BACKPLANE_CPU_ISA=scalar, F32 KV)
 *
 *    So the "NMSE <= 1e-3 per position against llama.cpp" is below llama.cpp's own error
 *    on this model (its flash-attention and plain paths differ from each other by up to 1.7e-2),
 *    and cannot be met by a correct implementation except by copying llama.cpp's roundings. What
 *    is checked instead: against llama.cpp, the median position <= 2e-3 and every position
 *    <= 1e-2; against float64 the same bounds with median <= 1e-3 (and llama.cpp's own figures,
 *    computed here from the two committed references, printed beside ours); the reference-kernel
 *    path <= 1e-9 on the first 4 positions (a wrong formula anywhere is orders above that).
 * 2. Greedy continuations of 64 tokens for the 3 committed prompts equal llama.cpp's. Where they
 *    part, the test accepts it only as a near-tie: llama.cpp's own margin between its best and
 *    second-best logit at that step must be under TIE_MARGIN, and our choice must be its second;
 *    it prints the step and both margins either way.
 * Under a sanitizer (-O0 + ASan) the logits check covers 8 positions and the greedy check 16
 * tokens per prompt: the point there is memory safety, and the full test takes minutes.
 * 3. Perplexity: tests/test_model_gemma_ppl.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"
#include "model/model_ref.h"


static const double NMSE_MEDIAN_LCPP = 2e-3, NMSE_MAX_LCPP = 1e-2, NMSE_MEDIAN_F64 = 1e-3, NMSE_EXACT = 1e-9;
/* Logit margins under this (in logit units) are near-ties: llama.cpp's logits are NMSE ~1e-3
 * (median) from the exact ones on logits of rms ~7, an error of ~0.2 per logit, so a margin under
 * 0.5 is within llama.cpp's own precision. */
static const double TIE_MARGIN = 0.5;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Our per-position NMSE against ref and f64; checks the bounds above. */
static void check_route(const char *route, int n_pos, const double *e_lcpp, const double *e_f64,
                        double lcpp_worst_f64) {
    double a[64], b[64], wa = 0, wb = 0;
    for (int p = 0; p < n_pos; p++) {
        a[p] = e_lcpp[p], b[p] = e_f64[p];
        if (!(a[p] <= wa)) wa = a[p];
        if (!(b[p] <= wb)) wb = b[p];
        CHECK(e_lcpp[p] <= NMSE_MAX_LCPP, "%s: position %d NMSE %.3e against llama.cpp > %.0e", route, p, e_lcpp[p],
              NMSE_MAX_LCPP);
    }
    double ma = median(a, n_pos), mb = median(b, n_pos);
    fprintf(stderr,
            "gemma3-270m logits, %s: against llama.cpp worst %.2e median %.2e; against float64 worst %.2e median %.2e "
            "(llama.cpp's worst against float64: %.2e)\n",
            route, wa, ma, wb, mb, lcpp_worst_f64);
    CHECK(ma <= NMSE_MEDIAN_LCPP, "%s: median NMSE %.3e against llama.cpp > %.0e", route, ma, NMSE_MEDIAN_LCPP);
    CHECK(wb <= NMSE_MAX_LCPP, "%s: worst NMSE %.3e against float64 > %.0e (llama.cpp's own: %.3e)", route, wb,
          NMSE_MAX_LCPP, lcpp_worst_f64);
    CHECK(mb <= NMSE_MEDIAN_F64, "%s: median NMSE %.3e against float64 > %.0e", route, mb, NMSE_MEDIAN_F64);
}

static void test_logits(bp_model *m) {
    model_ref_logits r, f;
    bool ok_r = model_ref_load("tests/model/ref/gemma3-270m.logits.bin", &r);
    bool ok_f = model_ref_load("tests/model/ref/gemma3-270m.f64.logits.bin", &f);
    bp_context *c = NULL;
    if (!ok_r || !ok_f) goto out;
    CHECK(r.n_pos == f.n_pos && r.n_ent == f.n_ent && r.n_pos <= 64 && !memcmp(r.ids, f.ids, 4 * (size_t)r.n_pos * r.n_ent),
          "the float64 reference is not at llama.cpp's positions and entries");
    /* llama.cpp's own distance from float64: the float64 file read as logits at llama.cpp's ids */
    double lcpp_worst = 0;
    for (int p = 0; p < r.n_pos; p++) {
        double num = 0, den = 0;
        for (int i = 0; i < r.n_ent; i++) {
            double d = r.vals[(size_t)p * r.n_ent + i] - f.vals[(size_t)p * r.n_ent + i];
            num += d * d;
            den += (double)f.vals[(size_t)p * r.n_ent + i] * f.vals[(size_t)p * r.n_ent + i];
        }
        if (num / den > lcpp_worst) lcpp_worst = num / den;
    }
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = 64;
    CHECK_OK(bp_context_create(m, &cp, &c));
    if (!c) goto out;
    double e_lcpp[64], e_f64[64];
    /* under a sanitizer: the first 8 positions */
    const int P = SANITIZED ? 8 : r.n_pos;
    CHECK_OK(bp_context_eval(c, r.tokens, P, P));
    for (int p = 0; p < P; p++) {
        const float *lg = bp_context_logits(c, p);
        e_lcpp[p] = lg ? model_ref_nmse(&r, p, lg) : INFINITY;
        e_f64[p] = lg ? model_ref_nmse(&f, p, lg) : INFINITY;
    }
    check_route("one batch", P, e_lcpp, e_f64, lcpp_worst);
    CHECK_OK(bp_context_truncate(c, 0));
    for (int p = 0; p < P; p++) {
        CHECK_OK(bp_context_eval(c, r.tokens + p, 1, 1));
        const float *lg = bp_context_logits(c, 0);
        e_lcpp[p] = lg ? model_ref_nmse(&r, p, lg) : INFINITY;
        e_f64[p] = lg ? model_ref_nmse(&f, p, lg) : INFINITY;
    }
    check_route("one token at a time", P, e_lcpp, e_f64, lcpp_worst);
    bp_context_free(c);
    c = NULL;

    /* the reference kernels with an F32 cache, first 4 positions, against float64 */
    bp_cpu_isa prev = bp_cpu_isa_current();
    CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
    cp.kv_kind = BP_KIND_F32;
    CHECK_OK(bp_context_create(m, &cp, &c));
    if (c) {
        const int PX = SANITIZED ? 2 : 4;
        CHECK_OK(bp_context_eval(c, r.tokens, PX, PX));
        double worst = 0;
        for (int p = 0; p < PX && bp_context_logits(c, p); p++) {
            double e = model_ref_nmse(&f, p, bp_context_logits(c, p));
            if (!(e <= worst)) worst = e;
        }
        fprintf(stderr, "gemma3-270m logits, reference kernels and F32 cache: worst NMSE %.2e against float64\n", worst);
        CHECK(worst <= NMSE_EXACT, "reference kernels: NMSE %.3e against float64 > %.0e", worst, NMSE_EXACT);
    }
    CHECK_OK(bp_cpu_isa_force(prev));
out:
    bp_context_free(c);
    if (ok_r) model_ref_free(&r);
    if (ok_f) model_ref_free(&f);
}

/* Parse a "key v v v" line of the greedy file into out (ids are exact in a double); -1 when the
 * line is not key's. */
static int parse_nums(const char *line, const char *key, double *out, int cap) {
    size_t kl = strlen(key);
    if (strncmp(line, key, kl) || line[kl] != ' ') return -1;
    int n = 0;
    char *end;
    for (const char *p = line + kl; n < cap;) {
        double v = strtod(p, &end);
        if (end == p) break;
        out[n++] = v;
        p = end;
    }
    return n;
}

static void second_best(const float *lg, int64_t n, int32_t *best, int32_t *second) {
    *best = 0, *second = 1;
    if (lg[1] > lg[0]) *best = 1, *second = 0;
    for (int64_t v = 2; v < n; v++) {
        if (lg[v] > lg[*best]) *second = *best, *best = (int32_t)v;
        else if (lg[v] > lg[*second]) *second = (int32_t)v;
    }
}

static void test_greedy(bp_model *m) {
    size_t len;
    char *text = bp_test_read_file("tests/model/ref/gemma3-270m.greedy.txt", &len);
    if (!text) return;
    bp_model_info info;
    bp_model_get_info(m, &info);
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = 256;
    bp_context *c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    int32_t ids[256], gen[128];
    double num[256], margin[128];
    int n_ids = -1, n_gen = -1, prompts = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && c; line = strtok_r(NULL, "\n", &save)) {
        int k;
        if ((k = parse_nums(line, "ids", num, 256)) >= 0)
            for (n_ids = k; k-- > 0;) ids[k] = (int32_t)num[k];
        if ((k = parse_nums(line, "gen", num, 128)) >= 0)
            for (n_gen = k; k-- > 0;) gen[k] = (int32_t)num[k];
        if (parse_nums(line, "margin", margin, 128) < 0) continue;
        /* a whole record: prompt ids, generated ids, margins */
        prompts++;
        CHECK(n_ids > 0 && n_gen == 64, "greedy record %d: %d prompt ids, %d generated", prompts, n_ids, n_gen);
        if (SANITIZED) n_gen = 16; /* under a sanitizer: the first 16 tokens */
        CHECK_OK(bp_context_truncate(c, 0));
        CHECK_OK(bp_context_eval(c, ids, n_ids, 1));
        int same = 0;
        for (int s = 0; s < n_gen; s++) {
            const float *lg = bp_context_logits(c, 0);
            if (!lg) break;
            int32_t best, second;
            second_best(lg, info.n_vocab, &best, &second);
            if (best != gen[s]) {
                bool tie = margin[s] < TIE_MARGIN && second == gen[s];
                fprintf(stderr,
                        "prompt %d: step %d: we chose %d (margin %.4f over %d), llama.cpp chose %d (its margin "
                        "%.4f)%s\n",
                        prompts, s, best, lg[best] - lg[second], second, gen[s], margin[s],
                        tie ? ": a near-tie, the rest of the continuation is not compared" : "");
                CHECK(tie, "prompt %d: greedy continuation departs from llama.cpp's at step %d without a near-tie",
                      prompts, s);
                break;
            }
            same++;
            int32_t t = best;
            CHECK_OK(bp_context_eval(c, &t, 1, 1));
        }
        fprintf(stderr, "gemma3-270m greedy, prompt %d: %d of %d tokens equal llama.cpp's\n", prompts, same, n_gen);
        n_ids = n_gen = -1;
    }
    CHECK(prompts == 3, "%d greedy records, expected 3", prompts);
    bp_context_free(c);
    free(text);
}

int main(void) {
    const char *path = model_gemma_path();
    if (!path) return bp_test_finish();
    bp_model *m = NULL;
    CHECK_OK(bp_model_load(path, NULL, &m));
    if (m) {
        test_logits(m);
        test_greedy(m);
    }
    bp_model_free(m);
    return bp_test_finish();
}
