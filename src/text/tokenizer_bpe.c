/* Byte-level BPE encoding of one raw fragment (tokenizer.ggml.model = "gpt2"): decode the
 * fragment to code points (invalid UTF-8 becomes U+FFFD, as llama.cpp does), split it into
 * words with the vocabulary's pre-tokenizer, map each word's UTF-8 bytes to the byte-level
 * alphabet (GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other
 * 68 bytes for U+0100 onwards), then merge adjacent symbols by lowest merge rank (ties:
 * leftmost) until no pair has a rank. A final symbol that is not a token falls back to its
 * single-byte tokens where they exist. O(n log n) per word.
 *
 * Gemma 4 (tokenizer.ggml.model = "gemma4", t->raw_utf8) is BPE the SentencePiece way: spaces
 * become U+2581, the words (runs of newlines and of everything else) are merged as raw UTF-8,
 * and the byte fallback is <0xNN> tokens. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_internal.h"
#include "text/unicode.h"

void bp_tok_bpe_init_bytes(bp_tokenizer *t) {
    int extra = 0;
    for (int c = 0; c < BP_BYTE_ALPHABET_END; c++) t->byte_of_cpt[c] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cpt = printable ? (uint32_t)b : 256u + (uint32_t)extra++;
        uint8_t u[4];
        size_t n = bp_utf8_encode(cpt, u);
        t->byte_utf8_len[b] = (uint8_t)n;
        memcpy(t->byte_utf8[b], u, n);
        t->byte_of_cpt[cpt] = (int16_t)b;
    }
}

typedef struct bpe_state {
    const bp_tokenizer *t;
    const char *w; /* the byte-level word */
    bp_tok_sym *sym;
    bp_tok_heap heap;
} bpe_state;

static bp_status try_pair(void *ctx, int32_t l, int32_t r) {
    bpe_state *st = ctx;
    const bp_tok_sym *a = &st->sym[l], *b = &st->sym[r];
    int32_t rank = bp_tok_merge_rank(st->t, st->w + a->off, a->n, st->w + b->off, b->n);
    if (rank < 0) return BP_OK;
    bp_tok_bigram g = {-(double)rank, l, r, a->n + b->n};
    return bp_tok_heap_push(&st->heap, g);
}

/* Merge one byte-level word w[0..n) and append its tokens. sym has room for n symbols. */
static bp_status encode_word(bpe_state *st, const char *w, size_t n, bp_tok_out *out) {
    const bp_tokenizer *t = st->t;
    /* A word that is a token as a whole skips merging: with ignore_merges, and for a run of
     * newlines on Gemma 4 (whose merges would not rebuild the run's token). */
    size_t nl = 0;
    while (nl < n && w[nl] == '\n') nl++;
    if (t->ignore_merges || (t->pretok == BP_PRETOK_GEMMA4 && n && nl == n)) {
        bp_token id = bp_tok_lookup(t, w, n);
        if (id != BP_TOKEN_NULL) return bp_tok_out_push(out, id);
    }
    bp_tok_sym *sym = st->sym;
    int32_t ns = bp_tok_split_chars(w, n, sym);
    st->w = w;
    bp_status rc = bp_tok_merge(sym, ns, &st->heap, try_pair, st);
    for (int32_t i = 0; rc == BP_OK && i != -1; i = sym[i].next) {
        bp_token id = bp_tok_lookup(t, w + sym[i].off, sym[i].n);
        if (id != BP_TOKEN_NULL) {
            rc = bp_tok_out_push(out, id);
            continue;
        }
        /* llama.cpp's fallback: each byte of the symbol as a 1-byte token (raw UTF-8: its
         * <0xNN> token), skipped when the vocabulary has none. */
        for (uint32_t k = 0; k < sym[i].n && rc == BP_OK; k++) {
            bp_token b = t->raw_utf8 ? t->byte_token[(uint8_t)w[sym[i].off + k]] : bp_tok_lookup(t, w + sym[i].off + k, 1);
            if (b != BP_TOKEN_NULL) rc = bp_tok_out_push(out, b);
        }
    }
    return rc;
}

bp_status bp_tok_bpe_encode(const bp_tokenizer *t, const char *text, size_t len, bp_tok_out *out) {
    if (len == 0) return BP_OK;
    if (len > UINT32_MAX / 8) return bp_fail(BP_E_INVAL, "tokenizer: text of %zu bytes is too long", len);
    bp_status rc = BP_OK;
    bpe_state st = {t, NULL, NULL, {0}};
    uint32_t *cpts = bp_malloc(len * sizeof *cpts);
    uint16_t *flags = bp_malloc(len * sizeof *flags);
    uint32_t *ends = bp_malloc(len * sizeof *ends), *scratch = bp_malloc(len * sizeof *scratch);
    char *word = NULL;
    if (!cpts || !flags || !ends || !scratch) {
        rc = bp_fail(BP_E_NOMEM, "tokenizer: scratch for %zu bytes", len);
        goto done;
    }
    size_t nc = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t c = bp_utf8_decode((const uint8_t *)text, len, &pos);
        if (c == ' ' && t->escape_spaces) c = 0x2581;
        cpts[nc] = c;
        flags[nc] = (uint16_t)bp_unicode_flags(c);
        nc++;
    }
    size_t nw = bp_pretok_split(t->pretok, cpts, flags, nc, ends, scratch);
    /* Scratch for the longest word: a code point re-encodes to <= 4 UTF-8 bytes, each of which
     * becomes <= 2 bytes (one symbol) of the byte-level alphabet. */
    size_t longest = 0, start = 0;
    for (size_t k = 0; k < nw; k++) {
        if (ends[k] - start > longest) longest = ends[k] - start;
        start = ends[k];
    }
    word = bp_malloc(longest * 8);
    st.sym = bp_malloc(longest * 4 * sizeof *st.sym);
    if (!word || !st.sym) {
        rc = bp_fail(BP_E_NOMEM, "tokenizer: scratch for a word of %zu code points", longest);
        goto done;
    }
    start = 0;
    for (size_t k = 0; k < nw && rc == BP_OK; k++) {
        size_t wn = 0;
        for (size_t i = start; i < ends[k]; i++) {
            uint8_t u[4];
            size_t m = bp_utf8_encode(cpts[i], u);
            if (t->raw_utf8) {
                memcpy(word + wn, u, m);
                wn += m;
                continue;
            }
            for (size_t j = 0; j < m; j++) {
                memcpy(word + wn, t->byte_utf8[u[j]], t->byte_utf8_len[u[j]]);
                wn += t->byte_utf8_len[u[j]];
            }
        }
        rc = encode_word(&st, word, wn, out);
        start = ends[k];
    }
done:
    bp_free(st.heap.v);
    bp_free(st.sym);
    bp_free(word);
    bp_free(scratch);
    bp_free(ends);
    bp_free(flags);
    bp_free(cpts);
    return rc;
}
