/* What a context may ask for and what its evals may return (issue 36):
 *   - before allocating, the KV cache and buffers a context needs against the memory available
 *     (core/meminfo.c): a 16M-token Gemma 3 270M context asked for 294,912 MiB on a 24 GiB
 *     machine and was accepted; now it is refused naming both numbers, unless the check is off
 *     (bp_set_memory_check(false), BACKPLANE_MEMORY_CHECK=0);
 *   - an eval's tokens' embedding rows finite before the forward pass (an infinite row used to
 *     come out as finite, wrong logits: the quantized matmuls turned its NaNs into numbers), and
 *     every logit finite after it: an error naming the row, or the output and its position,
 *     never BP_OK (perplexity printed PPL = -nan and exited 0). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/meminfo.h"
#include "model/context_internal.h"

/* -1: not decided yet (the environment decides at first use); 0 off; 1 on */
static atomic_int g_check = -1;

void bp_set_memory_check(bool on) { atomic_store(&g_check, on ? 1 : 0); }

bool bp_memory_check(void) {
    int v = atomic_load(&g_check);
    if (v < 0) {
        const char *e = getenv("BACKPLANE_MEMORY_CHECK");
        v = !(e && (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "false")));
        int expected = -1;
        atomic_compare_exchange_strong(&g_check, &expected, v);
        v = atomic_load(&g_check);
    }
    return v == 1;
}

/* Bytes of one K or V row of head_dim elements of kind k (the KV cache checks the kind). */
static double row_bytes(bp_kind k, int64_t head_dim) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    return ki && ki->block_elems ? (double)head_dim / ki->block_elems * ki->block_bytes : 4.0 * (double)head_dim;
}

bp_status bp_context_check_memory(const bp_model *m, int64_t n_ctx, int64_t n_batch, bp_kind kv_kind,
                                  const char *fn) {
    if (!bp_memory_check()) return BP_OK;
    const bp_hparams *hp = &m->hp;
    /* in double: a hostile n_ctx x layers x heads cannot wrap */
    double kv = (double)hp->n_layer * (double)hp->n_head_kv * (double)n_ctx *
                (row_bytes(kv_kind, hp->head_dim_k) + row_bytes(kv_kind, hp->head_dim_v));
    double bufs = 4.0 * (double)n_batch *
                  (3.0 * (double)hp->n_embd + 2.0 * (double)hp->n_head * (double)hp->head_dim_k +
                   2.0 * (double)hp->n_head_kv * (double)hp->head_dim_k + 2.0 * (double)hp->n_ff + 1);
    const char *src;
    uint64_t avail = bp_mem_available(&src);
    if (avail == UINT64_MAX || kv + bufs <= (double)avail) return BP_OK;
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)kv_kind);
    return bp_fail(BP_E_NOMEM,
                   "%s: a %lld-token context needs %.0f bytes (KV cache %.0f bytes of %s, buffers %.0f), more than "
                   "the %llu bytes available (%s); ask for a smaller n_ctx or KV kind, or turn the check off "
                   "(BACKPLANE_MEMORY_CHECK=0 or bp_set_memory_check(false); the CLI's --no-memory-check)",
                   fn, (long long)n_ctx, kv + bufs, kv, ki ? ki->name : "?", bufs, (unsigned long long)avail, src);
}

bp_status bp_context_check_rows(bp_context *c, const int32_t *tokens, int64_t n, int64_t pos0) {
    const bp_weight *e = c->m->tok_embd;
    const int64_t E = c->m->hp.n_embd;
    float *row = c->tmp; /* n_batch x n_embd of scratch the forward step overwrites anyway */
    for (int64_t t = 0; t < n; t++) {
        bp_status s = bp_dequantize(e->kind, e->data + (size_t)tokens[t] * e->row_bytes, e->row_bytes, row, E);
        if (s) return s;
        for (int64_t k = 0; k < E; k++)
            if (!isfinite(row[k]))
                return bp_fail(BP_E_FORMAT,
                               "bp_context_eval: tensor token_embd.weight row %d (token %lld of the eval, position "
                               "%lld) holds %g at column %lld",
                               tokens[t], (long long)t, (long long)(pos0 + t), (double)row[k], (long long)k);
    }
    return BP_OK;
}

bp_status bp_context_check_logits(const bp_context *c, int64_t n, int64_t n_out, int64_t pos0) {
    const int64_t V = c->m->hp.n_vocab;
    for (int64_t j = 0; j < n_out; j++) {
        const float *l = c->logits + (size_t)j * (size_t)V;
        for (int64_t i = 0; i < V; i++)
            if (!isfinite(l[i]))
                return bp_fail(BP_E_FORMAT,
                               "bp_context_eval: logit %lld of output %lld (position %lld) is %g: the forward pass "
                               "overflowed (the embedding rows of the eval's tokens are finite)",
                               (long long)i, (long long)j, (long long)(pos0 + n - n_out + j), (double)l[i]);
    }
    return BP_OK;
}
