/* Sequences of a context: one KV cache each (seq 0's is the context's own, the others' are made
 * on first use), their lengths and token ids; remove a tail, copy a prefix into another
 * sequence, keep one. A device step holds sequence 0 only: whatever changes seq 0's cache
 * lowers the device's hold (bp_context_cut_states), so the device uploads what it lacks. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/context_internal.h"
#include "ops/ops_internal.h"

bp_status bp_seqs_create(bp_context *c, int32_t n_seq_max) {
    const int64_t B = c->n_batch;
    c->n_seq_max = n_seq_max;
    c->seqs = bp_calloc((size_t)n_seq_max, sizeof *c->seqs);
    c->seq_kv = bp_calloc((size_t)n_seq_max, sizeof *c->seq_kv);
    c->row_seq = bp_malloc((size_t)B * sizeof(int32_t));
    c->row_order = bp_malloc((size_t)B * sizeof(int32_t));
    c->row_tok = bp_malloc((size_t)B * sizeof(int32_t));
    c->row_pos = bp_malloc((size_t)B * sizeof(int32_t));
    if (!c->seqs || !c->seq_kv || !c->row_seq || !c->row_order || !c->row_tok || !c->row_pos)
        return bp_fail(BP_E_NOMEM, "bp_context_create: no memory for %d sequences", (int)n_seq_max);
    c->seqs[0].kv = c->kv;
    c->seqs[0].toks = bp_malloc((size_t)c->n_ctx * sizeof(int32_t));
    if (!c->seqs[0].toks) return bp_fail(BP_E_NOMEM, "bp_context_create: no memory for %lld token ids", (long long)c->n_ctx);
    c->buf_bytes += (size_t)c->n_ctx * sizeof(int32_t);
    return BP_OK;
}

void bp_seqs_free(bp_context *c) {
    for (int32_t i = 0; c->seqs && i < c->n_seq_max; i++) {
        if (i > 0) bp_kv_cache_free(c->seqs[i].kv);
        bp_free(c->seqs[i].toks);
    }
    bp_free(c->seqs);
    bp_free(c->seq_kv);
    bp_free(c->row_seq);
    bp_free(c->row_order);
    bp_free(c->row_tok);
    bp_free(c->row_pos);
    bp_free(c->batch_out);
}

int64_t *bp_seq_len(bp_context *c, int32_t seq) { return seq == 0 ? &c->pos : &c->seqs[seq].len; }

bp_status bp_seq_cache(bp_context *c, int32_t seq, bp_kv_cache **out) {
    bp_seq *q = &c->seqs[seq];
    if (!q->kv) {
        bp_kv_cache_desc d = *bp_kv_cache_info(c->kv);
        bp_status s = bp_kv_cache_create(&d, &q->kv);
        if (s) return bp_model_fail_prefixed(s, "sequence cache");
        q->toks = bp_malloc((size_t)c->n_ctx * sizeof(int32_t));
        if (!q->toks) {
            bp_kv_cache_free(q->kv);
            q->kv = NULL;
            return bp_fail(BP_E_NOMEM, "sequence %d: no memory for %lld token ids", (int)seq, (long long)c->n_ctx);
        }
    }
    *out = q->kv;
    return BP_OK;
}

static bp_status check_seq(const bp_context *c, int32_t seq, const char *fn) {
    if (!c) return bp_fail(BP_E_INVAL, "%s: context is NULL", fn);
    if (seq < 0 || seq >= c->n_seq_max)
        return bp_fail(BP_E_INVAL, "%s: sequence %d is outside 0..%d (the context was made with n_seq_max %d)", fn,
                       (int)seq, (int)c->n_seq_max - 1, (int)c->n_seq_max);
    return BP_OK;
}

int32_t bp_context_n_seq_max(const bp_context *c) { return c ? c->n_seq_max : 0; }

int64_t bp_context_seq_pos(const bp_context *c, int32_t seq) {
    if (!c || seq < 0 || seq >= c->n_seq_max) return -1;
    return seq == 0 ? c->pos : c->seqs[seq].len;
}

const int32_t *bp_context_seq_tokens(const bp_context *c, int32_t seq, int64_t *n) {
    if (n) *n = 0;
    if (!c || seq < 0 || seq >= c->n_seq_max) return NULL;
    if (n) *n = bp_context_seq_pos(c, seq);
    return c->seqs[seq].toks;
}

/* Cut seq to its first n positions (n <= its length). */
static void cut(bp_context *c, int32_t seq, int64_t n) {
    if (seq == 0) {
        bp_context_truncate(c, n);
        return;
    }
    if (c->seqs[seq].kv) bp_kv_cache_truncate(c->seqs[seq].kv, -1, n);
    c->seqs[seq].len = n;
}

bp_status bp_context_seq_rm(bp_context *c, int32_t seq, int64_t p0, int64_t p1) {
    bp_status s = check_seq(c, seq, "bp_context_seq_rm");
    if (s) return s;
    const int64_t len = bp_context_seq_pos(c, seq);
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = len;
    if (p1 > len)
        return bp_fail(BP_E_INVAL, "bp_context_seq_rm: sequence %d holds %lld positions, [%lld, %lld) goes past them",
                       (int)seq, (long long)len, (long long)p0, (long long)p1);
    if (p0 >= p1) return BP_OK;
    if (p1 != len)
        return bp_fail(BP_E_UNSUPPORTED,
                       "bp_context_seq_rm: sequence %d: [%lld, %lld) is not its tail (it holds %lld): positions stay "
                       "contiguous, so only a tail can be removed",
                       (int)seq, (long long)p0, (long long)p1, (long long)len);
    cut(c, seq, p0);
    return BP_OK;
}

bp_status bp_context_seq_cp(bp_context *c, int32_t src, int32_t dst, int64_t n) {
    bp_status s = check_seq(c, src, "bp_context_seq_cp");
    if (!s) s = check_seq(c, dst, "bp_context_seq_cp");
    if (s) return s;
    const int64_t len = bp_context_seq_pos(c, src);
    if (n < 0) n = len;
    if (n > len)
        return bp_fail(BP_E_INVAL, "bp_context_seq_cp: sequence %d holds %lld positions, %lld asked", (int)src,
                       (long long)len, (long long)n);
    if (src == dst) return bp_context_seq_rm(c, src, n, -1);
    bp_kv_cache *to;
    if ((s = bp_seq_cache(c, dst, &to))) return s;
    if (dst == 0) bp_context_cut_states(c, 0); /* the device's copy of seq 0 is replaced */
    if (n > 0) {
        if ((s = bp_kv_cache_copy_prefix(to, c->seqs[src].kv, n))) return bp_model_fail_prefixed(s, "bp_context_seq_cp");
        memcpy(c->seqs[dst].toks, c->seqs[src].toks, (size_t)n * sizeof(int32_t));
    } else {
        bp_kv_cache_clear(to);
    }
    *bp_seq_len(c, dst) = n;
    if (dst == 0) c->n_out = 0;
    return BP_OK;
}

bp_status bp_context_seq_keep(bp_context *c, int32_t seq) {
    bp_status s = check_seq(c, seq, "bp_context_seq_keep");
    if (s) return s;
    for (int32_t i = 0; i < c->n_seq_max; i++)
        if (i != seq) cut(c, i, 0);
    return BP_OK;
}
