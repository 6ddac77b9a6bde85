/* The sampler: penalties, greedy, top-k, top-p, min-p, temperature and a seeded draw, in the
 * order include/backplane_tokenizer.h documents. Every step works on a candidate list
 * (id, logit in double); probabilities are computed in double so a test can hold them to a
 * NumPy float64 reference at 1e-12. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "backplane.h"

typedef struct cand {
    double l;
    bp_token id;
} cand;

struct bp_sampler {
    bp_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];
    bp_token *hist; /* ring of the last repeat_last_n accepted tokens */
    int32_t hist_n, hist_head;
    int32_t *count; /* occurrences of each id in the ring */
    cand *c;        /* n_vocab scratch: candidates */
    double *w;      /* n_vocab scratch: their weights */
    float *bias;    /* n_vocab logit biases (bp_sampler_set_logit_bias), or NULL */
};

bp_sampler_params bp_sampler_default_params(void) {
    bp_sampler_params p = {
        .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .frequency_penalty = 0.0f, .presence_penalty = 0.0f,
        .repeat_last_n = 64, .seed = 0,
    };
    return p;
}

/* ---- RNG: splitmix64 to seed xoshiro256** (both public-domain algorithms by Vigna) ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(uint64_t s[4]) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

void bp_sampler_reset(bp_sampler *s) {
    if (!s) return;
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->hist_n = s->hist_head = 0;
    if (s->count) memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
}

void bp_sampler_free(bp_sampler *s) {
    if (!s) return;
    bp_free(s->hist);
    bp_free(s->count);
    bp_free(s->c);
    bp_free(s->w);
    bp_free(s->bias);
    bp_free(s);
}

bp_status bp_sampler_create(const bp_sampler_params *p, int32_t n_vocab, bp_sampler **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_sampler_create: out is NULL");
    *out = NULL;
    if (!p) return bp_fail(BP_E_INVAL, "bp_sampler_create: params is NULL");
    if (n_vocab <= 0) return bp_fail(BP_E_INVAL, "bp_sampler_create: n_vocab %d", (int)n_vocab);
    if (isnan(p->temperature) || isinf(p->temperature))
        return bp_fail(BP_E_INVAL, "bp_sampler_create: temperature %g", (double)p->temperature);
    if (isnan(p->top_p)) return bp_fail(BP_E_INVAL, "bp_sampler_create: top_p is NaN");
    if (isnan(p->min_p) || p->min_p > 1)
        return bp_fail(BP_E_INVAL, "bp_sampler_create: min_p %g (must be <= 1)", (double)p->min_p);
    if (!(p->repeat_penalty > 0) || isinf(p->repeat_penalty))
        return bp_fail(BP_E_INVAL, "bp_sampler_create: repeat_penalty %g (must be > 0)",
                       (double)p->repeat_penalty);
    if (!isfinite(p->frequency_penalty) || !isfinite(p->presence_penalty))
        return bp_fail(BP_E_INVAL, "bp_sampler_create: frequency/presence penalty not finite");
    if (p->repeat_last_n < 0)
        return bp_fail(BP_E_INVAL, "bp_sampler_create: repeat_last_n %d (0 turns it off)",
                       (int)p->repeat_last_n);
    bp_sampler *s = bp_calloc(1, sizeof *s);
    if (!s) return bp_fail(BP_E_NOMEM, "bp_sampler_create");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->c = bp_malloc((size_t)n_vocab * sizeof *s->c);
    s->w = bp_malloc((size_t)n_vocab * sizeof *s->w);
    s->count = bp_calloc((size_t)n_vocab, sizeof *s->count);
    s->hist = p->repeat_last_n ? bp_malloc((size_t)p->repeat_last_n * sizeof *s->hist) : NULL;
    if (!s->c || !s->w || !s->count || (p->repeat_last_n && !s->hist)) {
        bp_sampler_free(s);
        return bp_fail(BP_E_NOMEM, "bp_sampler_create: scratch for %d tokens", (int)n_vocab);
    }
    bp_sampler_reset(s);
    *out = s;
    return BP_OK;
}

bp_status bp_sampler_accept(bp_sampler *s, bp_token tok) {
    if (!s) return bp_fail(BP_E_INVAL, "bp_sampler_accept: sampler is NULL");
    if (tok < 0 || tok >= s->n_vocab)
        return bp_fail(BP_E_INVAL, "bp_sampler_accept: token %d outside the vocabulary of %d",
                       (int)tok, (int)s->n_vocab);
    int32_t w = s->p.repeat_last_n;
    if (w == 0) return BP_OK;
    if (s->hist_n == w) { /* drop the oldest */
        s->count[s->hist[s->hist_head]]--;
        s->hist_n--;
        s->hist_head = (s->hist_head + 1) % w;
    }
    s->hist[(s->hist_head + s->hist_n) % w] = tok;
    s->hist_n++;
    s->count[tok]++;
    return BP_OK;
}

/* a sorts before b: larger logit, then lower id. */
static inline bool above(const cand *a, const cand *b) {
    return a->l > b->l || (a->l == b->l && a->id < b->id);
}

static int by_logit(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return above(x, y) ? -1 : above(y, x) ? 1 : 0;
}

/* Put the k best of c[0..n) in c[0..k), sorted: a min-heap of size k, O(n log k). c stays a
 * permutation of its entries (an evicted candidate takes the newcomer's old place), so the
 * whole array can still be sorted afterwards. */
static void top_k(cand *c, size_t n, size_t k) {
    /* heap[0] is the worst kept candidate */
    for (size_t i = 0; i < n; i++) {
        cand x = c[i];
        size_t j;
        if (i < k) {
            j = i;
            while (j > 0 && above(&c[(j - 1) / 2], &x)) {
                c[j] = c[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            c[j] = x;
        } else if (above(&x, &c[0])) {
            cand out = c[0];
            j = 0;
            for (;;) {
                size_t m = 2 * j + 1;
                if (m >= k) break;
                if (m + 1 < k && above(&c[m], &c[m + 1])) m++;
                if (!above(&x, &c[m])) break;
                c[j] = c[m];
                j = m;
            }
            c[j] = x;
            c[i] = out;
        }
    }
    qsort(c, k, sizeof *c, by_logit);
}

/* Softmax weights of c[0..n) at temperature t, into w (unnormalised, max 1); returns the sum. */
static double weights(const cand *c, size_t n, double t, double *w) {
    double mx = -INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++) mx = c[i].l > mx ? c[i].l : mx;
    for (size_t i = 0; i < n; i++) sum += (w[i] = exp((c[i].l - mx) / t));
    return sum;
}

/* Run steps 1-6; c[0..*n) are the survivors, w[i] their unnormalised weights, *sum the total. */
static bp_status filter(bp_sampler *s, const float *logits, size_t *n_out, double *w, double *sum) {
    const bp_sampler_params *p = &s->p;
    cand *c = s->c;
    size_t n = 0;
    bool any_pos_inf = false;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        double l = isnan(logits[i]) ? -INFINITY : (double)logits[i];
        if (s->bias) l += s->bias[i];
        if (s->count[i] > 0) { /* the penalties see what the window holds */
            l = l <= 0 ? l * p->repeat_penalty : l / p->repeat_penalty;
            l -= s->count[i] * (double)p->frequency_penalty + (double)p->presence_penalty;
        }
        if (l == -INFINITY) continue; /* probability 0 whatever the filters do */
        any_pos_inf |= l == INFINITY;
        c[n++] = (cand){l, i};
    }
    if (n == 0) return bp_fail(BP_E_INVAL, "bp_sampler: every logit is -inf or NaN");
    if (any_pos_inf) { /* the limit of softmax: +inf tokens share the mass equally */
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].l == INFINITY) c[m++] = (cand){0.0, c[i].id};
        n = m;
    }
    if (p->temperature <= 0) { /* greedy */
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (c[i].l > c[best].l) best = i;
        c[0] = c[best];
        w[0] = 1;
        *n_out = 1;
        *sum = 1;
        return BP_OK;
    }
    bool sorted = false;
    if (p->top_k > 0 && (size_t)p->top_k < n) {
        top_k(c, n, (size_t)p->top_k);
        n = (size_t)p->top_k;
        sorted = true;
    }
    if (p->top_p < 1) {
        double mx = -INFINITY, total = 0;
        for (size_t i = 0; i < n; i++) mx = c[i].l > mx ? c[i].l : mx;
        for (size_t i = 0; i < n; i++) total += exp(c[i].l - mx);
        /* The mass is usually in a few hundred tokens: sort only the best 256, then 4096
         * (O(n log k) each), and the whole row only when they do not reach top_p (llama.cpp
         * starts the same way; measured on a 262k-entry row: ~0.5 ms for the best 256, ~40 ms
         * for a full sort). */
        static const size_t steps[] = {256, 4096};
        size_t head = n, step = 0;
        for (;;) {
            if (!sorted) {
                if (step < 2 && 2 * steps[step] < n) {
                    top_k(c, n, steps[step]);
                    head = steps[step++];
                } else {
                    qsort(c, n, sizeof *c, by_logit);
                    head = n;
                    sorted = true;
                }
            }
            double cum = 0;
            size_t i = 0;
            /* i == 0 keeps the best candidate whatever top_p is: top_p <= 0 (or one below
             * the first probability) used to keep none, and the draw read before c[0]. */
            for (; i < head && (i == 0 || cum < p->top_p); i++) cum += exp(c[i].l - mx) / total;
            if (cum >= p->top_p || head == n) {
                n = i;
                break;
            }
        }
    }
    if (p->min_p > 0) {
        double mx = -INFINITY;
        for (size_t i = 0; i < n; i++) mx = c[i].l > mx ? c[i].l : mx;
        double cut = mx + log((double)p->min_p);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].l >= cut) c[m++] = c[i];
        n = m; /* the largest always passes */
    }
    *sum = weights(c, n, p->temperature, w);
    *n_out = n;
    return BP_OK;
}

/* Arguments checked, then steps 1-6: the survivors in s->c[0..*n), weights in s->w. */
static bp_status prepare(bp_sampler *s, const float *logits, const void *out, const char *fn, size_t *n,
                         double *sum) {
    if (!s || !logits || !out) return bp_fail(BP_E_INVAL, "%s: sampler, logits or output is NULL", fn);
    return filter(s, logits, n, s->w, sum);
}

bp_status bp_sampler_probs(bp_sampler *s, const float *logits, double *probs) {
    size_t n;
    double sum;
    bp_status rc = prepare(s, logits, probs, "bp_sampler_probs", &n, &sum);
    if (rc != BP_OK) return rc;
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    for (size_t i = 0; i < n; i++) probs[s->c[i].id] = s->w[i] / sum;
    return BP_OK;
}

bp_status bp_sampler_sample(bp_sampler *s, const float *logits, bp_token *out) {
    size_t n;
    double sum;
    bp_status rc = prepare(s, logits, out, "bp_sampler_sample", &n, &sum);
    if (rc != BP_OK) return rc;
    if (n == 0 || n > (size_t)s->n_vocab) /* each step keeps >= 1: a bug here, never a wild read */
        return bp_fail(BP_E_INVAL, "bp_sampler_sample: %zu candidates survived the filters", n);
    bp_token pick = s->c[n - 1].id;
    if (n > 1) { /* greedy (one survivor) draws nothing: the RNG stays where it was */
        double u = next_unit(s->rng) * sum, cum = 0;
        for (size_t i = 0; i < n; i++) {
            cum += s->w[i];
            if (u < cum) {
                pick = s->c[i].id;
                break;
            }
        }
    }
    *out = pick;
    return BP_OK;
}

/* ---- what a server needs: logit bias, log-probabilities -------------------------------------- */

bp_status bp_sampler_set_logit_bias(bp_sampler *s, const bp_token *ids, const float *bias, int32_t n) {
    if (!s || (n > 0 && (!ids || !bias))) return bp_fail(BP_E_INVAL, "bp_sampler_set_logit_bias: NULL argument");
    if (n < 0) return bp_fail(BP_E_INVAL, "bp_sampler_set_logit_bias: %d entries", (int)n);
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return bp_fail(BP_E_INVAL, "bp_sampler_set_logit_bias: entry %d is id %d, outside the vocabulary of %d",
                           (int)i, (int)ids[i], (int)s->n_vocab);
        if (isnan(bias[i]) || bias[i] == INFINITY)
            return bp_fail(BP_E_INVAL, "bp_sampler_set_logit_bias: entry %d (id %d) is %g (finite or -inf)", (int)i,
                           (int)ids[i], (double)bias[i]);
    }
    if (n == 0) {
        bp_free(s->bias);
        s->bias = NULL;
        return BP_OK;
    }
    float *b = s->bias ? s->bias : bp_malloc((size_t)s->n_vocab * sizeof *b);
    if (!b) return bp_fail(BP_E_NOMEM, "bp_sampler_set_logit_bias: %d floats", (int)s->n_vocab);
    memset(b, 0, (size_t)s->n_vocab * sizeof *b);
    for (int32_t i = 0; i < n; i++) b[ids[i]] += bias[i];
    s->bias = b;
    return BP_OK;
}

bp_status bp_sampler_logprobs(bp_sampler *s, const float *logits, bp_token tok, int32_t top_n, double *tok_logprob,
                              bp_logprob *top) {
    if (!s || !logits || !tok_logprob || (top_n > 0 && !top))
        return bp_fail(BP_E_INVAL, "bp_sampler_logprobs: NULL argument");
    if (tok < 0 || tok >= s->n_vocab || top_n < 0 || top_n > s->n_vocab)
        return bp_fail(BP_E_INVAL, "bp_sampler_logprobs: token %d, top_n %d (vocabulary of %d)", (int)tok, (int)top_n,
                       (int)s->n_vocab);
    cand *c = s->c;
    double mx = -INFINITY;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        double l = isnan(logits[i]) ? -INFINITY : (double)logits[i];
        if (s->bias) l += s->bias[i];
        c[i] = (cand){l, i};
        mx = l > mx ? l : mx;
    }
    if (mx == -INFINITY || mx == INFINITY)
        return bp_fail(BP_E_INVAL, "bp_sampler_logprobs: the largest logit is %g", mx);
    double sum = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) sum += exp(c[i].l - mx);
    const double lse = mx + log(sum);
    *tok_logprob = c[tok].l - lse;
    if (top_n > 0) {
        top_k(c, (size_t)s->n_vocab, (size_t)top_n);
        for (int32_t i = 0; i < top_n; i++) top[i] = (bp_logprob){c[i].id, c[i].l - lse};
    }
    return BP_OK;
}
