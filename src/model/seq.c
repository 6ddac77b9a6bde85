/* Sequences of a context: one KV cache each (seq 0's is the context's own, the others' are made
 * on first use), their cells (token ids, and positions in the cache); remove any range of
 * positions, copy a prefix into another sequence, keep one. A range removed from the middle
 * leaves a hole in position space: the later cells keep their positions (K was rotated at
 * them), the sequence continues after its last. A device step holds sequence 0 only, without
 * holes: whatever changes seq 0's cache lowers the device's hold (bp_context_cut_states), so
 * the device uploads what it lacks, and a seq 0 with a hole is evaluated on the CPU. */
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
int64_t bp_seq_cells(const bp_context *c, int32_t seq) { return seq == 0 ? c->pos : c->seqs[seq].len; }

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

int64_t bp_seq_next(const bp_context *c, int32_t seq) {
    const int64_t len = bp_seq_cells(c, seq);
    return c->seqs[seq].kv ? bp_kv_next_pos(c->seqs[seq].kv, len) : len;
}

bool bp_seq_holed(const bp_context *c, int32_t seq) { return bp_kv_has_holes(c->seqs[seq].kv); }

int64_t bp_context_seq_pos(const bp_context *c, int32_t seq) {
    if (!c || seq < 0 || seq >= c->n_seq_max) return -1;
    return bp_seq_next(c, seq);
}

const int32_t *bp_context_seq_tokens(const bp_context *c, int32_t seq, int64_t *n) {
    if (n) *n = 0;
    if (!c || seq < 0 || seq >= c->n_seq_max) return NULL;
    if (n) *n = bp_seq_cells(c, seq);
    return c->seqs[seq].toks;
}

int64_t bp_context_seq_token_pos(const bp_context *c, int32_t seq, int64_t i) {
    if (!c || seq < 0 || seq >= c->n_seq_max || i < 0 || i >= bp_seq_cells(c, seq)) return -1;
    return c->seqs[seq].kv ? bp_kv_cell_pos(c->seqs[seq].kv, i) : i;
}

/* Cut seq to its first n cells (n <= the cells it holds). */
static void cut(bp_context *c, int32_t seq, int64_t n) {
    if (c->seqs[seq].kv) bp_kv_cache_truncate(c->seqs[seq].kv, -1, n);
    if (seq == 0) {
        bp_context_cut_states(c, n);
        c->pos = n;
        c->n_out = 0;
    } else {
        c->seqs[seq].len = n;
    }
}

bp_status bp_seq_cut_positions(bp_context *c, int32_t seq, int64_t p) {
    const int64_t len = bp_seq_cells(c, seq);
    cut(c, seq, c->seqs[seq].kv ? bp_kv_cell_at(c->seqs[seq].kv, len, p) : p);
    return BP_OK;
}

bp_status bp_context_seq_rm(bp_context *c, int32_t seq, int64_t p0, int64_t p1) {
    bp_status s = check_seq(c, seq, "bp_context_seq_rm");
    if (s) return s;
    const int64_t end = bp_seq_next(c, seq), len = bp_seq_cells(c, seq);
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = end;
    if (p0 > p1 || p1 > end)
        return bp_fail(BP_E_INVAL,
                       "bp_context_seq_rm: sequence %d continues at position %lld: [%lld, %lld) is %s (need 0 <= p0 "
                       "<= p1 <= %lld, or p1 < 0 for the end)",
                       (int)seq, (long long)end, (long long)p0, (long long)p1,
                       p0 > p1 ? "an empty range backwards" : "past its end", (long long)end);
    bp_kv_cache *kv = c->seqs[seq].kv;
    if (!kv || p0 == p1) return BP_OK;
    const int64_t i0 = bp_kv_cell_at(kv, len, p0), i1 = bp_kv_cell_at(kv, len, p1);
    if (i1 == len) { /* a tail */
        cut(c, seq, i0);
        return BP_OK;
    }
    if (i0 == i1) return BP_OK; /* inside a hole: no cell there */
    /* A range in the middle: the host holds every cell first (what a device holds of seq 0 comes
     * back), then the later cells move down keeping their positions. */
    if (seq == 0 && (s = bp_step_pull_host(c->kv, c->step_state, c->pos)))
        return bp_fail(s, "bp_context_seq_rm: the device's copy of sequence 0 cannot come back: %s", bp_last_error());
    if ((s = bp_kv_cache_remove(kv, i0, i1))) return bp_model_fail_prefixed(s, "bp_context_seq_rm");
    int32_t *t = c->seqs[seq].toks;
    memmove(t + i0, t + i1, (size_t)(len - i1) * sizeof *t);
    if (seq == 0) {
        c->pos = len - (i1 - i0);
        bp_context_cut_states(c, i0); /* a device's cells past i0 are not the host's any more */
        c->n_out = 0;
    } else {
        c->seqs[seq].len = len - (i1 - i0);
    }
    return BP_OK;
}

bp_status bp_context_seq_cp(bp_context *c, int32_t src, int32_t dst, int64_t n) {
    bp_status s = check_seq(c, src, "bp_context_seq_cp");
    if (!s) s = check_seq(c, dst, "bp_context_seq_cp");
    if (s) return s;
    const int64_t end = bp_seq_next(c, src), len = bp_seq_cells(c, src);
    if (n < 0) n = end;
    if (n > end)
        return bp_fail(BP_E_INVAL, "bp_context_seq_cp: sequence %d holds positions up to %lld, %lld asked", (int)src,
                       (long long)end, (long long)n);
    if (src == dst) return bp_context_seq_rm(c, src, n, -1);
    n = c->seqs[src].kv ? bp_kv_cell_at(c->seqs[src].kv, len, n) : 0; /* the cells below position n */
    bp_kv_cache *to;
    if ((s = bp_seq_cache(c, dst, &to))) return s;
    if (src == 0 && (s = bp_step_pull_host(c->kv, c->step_state, c->pos)))
        return bp_fail(s, "bp_context_seq_cp: the device's copy of sequence 0 cannot come back: %s", bp_last_error());
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
