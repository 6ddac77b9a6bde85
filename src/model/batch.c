/* bp_context_decode: one eval over tokens of several sequences. Every check comes first; then
 * steps of up to n_batch tokens in the batch's order, each one forward step in which every
 * weight's matmul runs once over all the step's rows (the seam sees one call per weight),
 * each row's keys go to its own sequence's cache and its query attends over that cache only.
 *
 * Inside a step the rows are reordered so the rows whose logits are wanted come last: the
 * forward pass carries only the last n_out rows past the last layer's attention (forward.c),
 * and attention masks by position, so the order of query rows does not matter. The keys still
 * enter the caches in the batch's order (append_order), which keeps each sequence's positions
 * ascending. A position may jump ahead of where its sequence continues: the cells keep the
 * positions given (a hole, as bp_context_seq_rm of a middle range leaves), and the batch runs
 * on the CPU, whose attention masks by each cell's position. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/context_internal.h"

/* Every token checked against its sequence before any work: id, sequence, position, room.
 * *jump: some position skips ahead of where its sequence continues. */
static bp_status check_batch(bp_context *c, const bp_batch *b, int64_t *n_out, bool *jump) {
    if (!c || !b) return bp_fail(BP_E_INVAL, "bp_context_decode: NULL argument");
    if (b->n <= 0 || !b->tokens)
        return bp_fail(BP_E_INVAL, "bp_context_decode: a batch of %lld tokens%s: need at least one", (long long)b->n,
                       b->tokens ? "" : " (tokens NULL)");
    /* the next position of each sequence, advanced as the batch is read */
    int64_t *next = bp_malloc((size_t)c->n_seq_max * sizeof *next);
    if (!next) return bp_fail(BP_E_NOMEM, "bp_context_decode: no memory");
    for (int32_t s = 0; s < c->n_seq_max; s++) next[s] = bp_context_seq_pos(c, s);
    bp_status st = BP_OK;
    *n_out = 0, *jump = false;
    for (int64_t i = 0; i < b->n && !st; i++) {
        const int32_t seq = b->seq ? b->seq[i] : 0, tok = b->tokens[i];
        const int64_t p = seq < 0 || seq >= c->n_seq_max ? 0 : b->pos ? b->pos[i] : next[seq];
        if (seq < 0 || seq >= c->n_seq_max) {
            st = bp_fail(BP_E_INVAL, "bp_context_decode: token %lld: sequence %d is outside 0..%d (n_seq_max %d)",
                         (long long)i, (int)seq, (int)c->n_seq_max - 1, (int)c->n_seq_max);
        } else if (tok < 0 || tok >= c->m->hp.n_vocab) {
            st = bp_fail(BP_E_INVAL, "bp_context_decode: token %lld is id %d, outside the vocabulary 0..%lld",
                         (long long)i, (int)tok, (long long)c->m->hp.n_vocab - 1);
        } else if (p < next[seq]) {
            st = bp_fail(BP_E_INVAL,
                         "bp_context_decode: token %lld of sequence %d is at position %lld, but the sequence continues "
                         "at %lld (a sequence's positions increase; bp_context_seq_rm to rewrite)",
                         (long long)i, (int)seq, (long long)p, (long long)next[seq]);
        } else if (p >= c->n_ctx) {
            st = bp_fail(BP_E_INVAL,
                         "bp_context_decode: token %lld of sequence %d does not fit: its position %lld is past the "
                         "context's %lld positions (n_ctx; the sequence continued at %lld)",
                         (long long)i, (int)seq, (long long)p, (long long)c->n_ctx, (long long)next[seq]);
        } else {
            *jump = *jump || p > next[seq];
            next[seq] = p + 1;
            *n_out += b->logits ? b->logits[i] != 0 : i == b->n - 1;
        }
    }
    bp_free(next);
    return st;
}

static bool wants(const bp_batch *b, int64_t i) { return b->logits ? b->logits[i] != 0 : i == b->n - 1; }

/* Sequence 0 only, the wanted rows a suffix: the single-sequence eval, which a device may run. */
static bool single_seq(const bp_batch *b, int64_t n_out) {
    for (int64_t i = 0; i < b->n; i++)
        if ((b->seq && b->seq[i] != 0) || wants(b, i) != (i >= b->n - n_out)) return false;
    return true;
}

static bp_status reserve_out(bp_context *c, int64_t n) {
    if (n <= c->batch_cap) return BP_OK;
    int32_t *o = bp_realloc(c->batch_out, (size_t)n * sizeof *o);
    if (!o) return bp_fail(BP_E_NOMEM, "bp_context_decode: no memory for %lld rows", (long long)n);
    c->batch_out = o, c->batch_cap = n;
    return BP_OK;
}

/* Back to the lengths before the decode, for every sequence the batch touched. */
static void undo(bp_context *c, const bp_batch *b, const int64_t *len0) {
    for (int64_t i = 0; i < b->n; i++) {
        const int32_t s = b->seq ? b->seq[i] : 0;
        if (c->seqs[s].kv) bp_kv_cache_truncate(c->seqs[s].kv, -1, len0[s]);
        *bp_seq_len(c, s) = len0[s];
        if (s == 0) bp_context_cut_states(c, len0[0]);
    }
    c->n_out = 0;
    c->batch_n = 0;
}

/* One step over rows [i0, i1) of the batch: wanted rows last, keys in batch order; next[s]:
 * the position sequence s continues at. */
static bp_status step(bp_context *c, const bp_batch *b, int64_t i0, int64_t i1, int64_t *next) {
    const int64_t t = i1 - i0;
    int64_t n_out = 0, k = 0;
    /* positions and cells in the batch's order (c->positions, unused by a step over rows, holds
     * each row's position), then the rows reordered */
    for (int64_t i = i0; i < i1; i++) {
        const int32_t s = b->seq ? b->seq[i] : 0;
        int64_t *len = bp_seq_len(c, s);
        c->positions[i - i0] = (int32_t)(b->pos ? b->pos[i] : next[s]);
        next[s] = c->positions[i - i0] + 1;
        c->seqs[s].toks[(*len)++] = b->tokens[i];
        n_out += wants(b, i);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = i0; i < i1; i++) {
            if (wants(b, i) != (pass == 1)) continue;
            c->row_tok[k] = b->tokens[i];
            c->row_seq[k] = b->seq ? b->seq[i] : 0;
            c->row_pos[k] = c->positions[i - i0];
            c->row_order[i - i0] = (int32_t)k++;
        }
    /* the lengths advanced above are the positions the step writes; bp_forward reads c->pos as
     * where seq 0's host cache ends, so it goes back until the step has run */
    int64_t pos_after = c->pos;
    for (int64_t i = i0; i < i1; i++)
        if ((b->seq ? b->seq[i] : 0) == 0) c->pos--;
    const bp_forward_rows rows = {.positions = c->row_pos, .seq_kv = (void *const *)c->seq_kv,
                                  .row_seq = c->row_seq, .append_order = c->row_order};
    bp_status s = bp_forward_seqs(c, c->row_tok, t, n_out, &rows);
    c->pos = pos_after;
    return s;
}

/* The batch on the CPU, step after step (every check done). */
static bp_status decode_cpu(bp_context *c, const bp_batch *b, int64_t n_out) {
    bp_status s = bp_context_check_rows(c, b->tokens, b->n, 0);
    if (!s) s = bp_context_reserve_logits(c, n_out);
    if (s) return s;
    int64_t *len0 = bp_malloc((size_t)c->n_seq_max * 2 * sizeof *len0), *next = len0 + c->n_seq_max;
    if (!len0) return bp_fail(BP_E_NOMEM, "bp_context_decode: no memory");
    for (int32_t q = 0; q < c->n_seq_max; q++) len0[q] = *bp_seq_len(c, q), next[q] = bp_seq_next(c, q);
    for (int64_t i = 0; i < b->n && !s; i++) {
        const int32_t q = b->seq ? b->seq[i] : 0;
        s = bp_seq_cache(c, q, &c->seq_kv[q]);
    }
    c->n_out = 0;
    for (int64_t i = 0; i < b->n && !s; i += c->n_batch)
        s = step(c, b, i, i + c->n_batch < b->n ? i + c->n_batch : b->n, next);
    if (!s) s = bp_context_check_logits(c, n_out, n_out, 0); /* "position" j: output j */
    if (s) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", bp_last_error());
        undo(c, b, len0);
        bp_free(len0);
        return bp_fail(s, "bp_context_decode: %s", msg);
    }
    bp_free(len0);
    bp_model_memory_after_eval(c->m, b->n > 1, n_out > 1);
    return BP_OK;
}

bp_status bp_context_decode(bp_context *c, const bp_batch *b) {
    int64_t n_out = 0;
    bool jump = false;
    bp_status s = check_batch(c, b, &n_out, &jump);
    if (s) return s;
    if ((s = reserve_out(c, b->n))) return s;
    /* seq 0 continuing without a jump and the wanted rows a suffix: the single-sequence eval */
    if (single_seq(b, n_out) && !jump) s = bp_context_eval(c, b->tokens, b->n, n_out);
    else s = decode_cpu(c, b, n_out);
    if (s) return s;
    int64_t j = 0;
    for (int64_t i = 0; i < b->n; i++) c->batch_out[i] = wants(b, i) ? (int32_t)j++ : -1;
    c->batch_n = b->n;
    return BP_OK;
}

bp_status bp_seq_eval_cpu(bp_context *c, const int32_t *tokens, int64_t n, int64_t n_out) {
    if (n == 0) {
        c->n_out = 0, c->batch_n = 0;
        return BP_OK;
    }
    int8_t *want = bp_malloc((size_t)n);
    if (!want) return bp_fail(BP_E_NOMEM, "bp_context_eval: no memory");
    for (int64_t i = 0; i < n; i++) want[i] = i >= n - n_out;
    const bp_batch b = {.n = n, .tokens = tokens, .logits = want};
    bp_status s = decode_cpu(c, &b, n_out);
    bp_free(want);
    c->batch_n = 0; /* no bp_context_batch_logits rows: this was not a bp_context_decode */
    return s;
}

const float *bp_context_batch_logits(const bp_context *c, int64_t i) {
    if (!c || i < 0 || i >= c->batch_n || c->batch_out[i] < 0) return NULL;
    return bp_context_logits(c, c->batch_out[i]);
}
