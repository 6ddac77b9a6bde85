/* Perplexity as llama-perplexity computes it (tools/perplexity/perplexity.cpp, read for the
 * method): the token stream is cut into chunks of `chunk` tokens; each chunk is evaluated from an
 * empty cache with its first token replaced by BOS (when the vocabulary adds one); the logits of
 * positions chunk/2 .. chunk-2 score the token that follows each; the figure is
 * exp(mean negative log-likelihood) over every scored token, with the standard error
 * ppl * sqrt(var(nll) / (count - 1)). Only the scored half's logits are computed. */
#include <math.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/context_internal.h"

static double nll(const float *lg, int64_t n, int32_t target) {
    double mx = lg[0];
    for (int64_t i = 1; i < n; i++)
        if (lg[i] > mx) mx = lg[i];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)lg[i] - mx);
    return -((double)lg[target] - mx - log(sum));
}

bp_status bp_context_perplexity(bp_context *c, const int32_t *tokens, int64_t n, int64_t chunk, int64_t max_chunks,
                                int32_t bos, bp_perplexity_fn on_chunk, void *user, bp_perplexity_result *out) {
    if (!c || !tokens || !out) return bp_fail(BP_E_INVAL, "perplexity: NULL argument");
    if (chunk < 4 || chunk > c->n_ctx)
        return bp_fail(BP_E_INVAL, "perplexity: chunk of %lld tokens; it must be 4..%lld (the context)", (long long)chunk,
                       (long long)c->n_ctx);
    int64_t n_chunks = n / chunk;
    if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
    if (n < 2 * chunk)
        return bp_fail(BP_E_INVAL, "perplexity: %lld tokens; at least 2 x %lld are needed (llama-perplexity's rule)",
                       (long long)n, (long long)chunk);
    const int64_t V = c->m->hp.n_vocab, first = chunk / 2;
    if (bos >= V) return bp_fail(BP_E_INVAL, "perplexity: BOS id %d outside the vocabulary", bos);
    int32_t *buf = bp_malloc((size_t)chunk * sizeof *buf);
    if (!buf) return bp_fail(BP_E_NOMEM, "perplexity: no memory");
    double sum = 0, sum2 = 0;
    int64_t count = 0;
    bp_status s = BP_OK;
    for (int64_t ch = 0; ch < n_chunks && !s; ch++) {
        for (int64_t i = 0; i < chunk; i++) buf[i] = tokens[ch * chunk + i];
        if (bos >= 0) buf[0] = bos;
        if ((s = bp_context_truncate(c, 0)) || (s = bp_context_eval(c, buf, chunk, chunk - first))) break;
        for (int64_t j = 0; j < chunk - first - 1; j++) {
            double v = nll(bp_context_logits(c, j), V, tokens[ch * chunk + first + j + 1]);
            sum += v;
            sum2 += v * v;
            count++;
        }
        if (on_chunk) on_chunk(ch, exp(sum / (double)count), user);
    }
    bp_free(buf);
    if (s) return s;
    double mean = sum / (double)count, var = sum2 / (double)count - mean * mean;
    if (count == 0 || !isfinite(mean) || !isfinite(exp(mean)))
        return bp_fail(BP_E_FORMAT, "perplexity: the mean negative log-likelihood of %lld scored tokens is %g "
                                    "(exp: %g), not a finite figure", (long long)count, mean, exp(mean));
    out->ppl = exp(mean);
    out->ppl_err = var > 0 && count > 1 ? sqrt(var / (double)(count - 1)) * out->ppl : 0;
    out->chunks = n_chunks;
    out->scored = count;
    return BP_OK;
}
