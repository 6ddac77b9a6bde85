/* SentencePiece-style encoding of one raw fragment (tokenizer.ggml.model = "llama"): spaces
 * become U+2581, the text is split into UTF-8 characters, and the adjacent pair whose
 * concatenation is the highest-scoring token is merged, repeatedly (ties: leftmost first),
 * until no pair forms a token. A symbol that is not a token at the end falls back to one
 * <0xNN> token per byte. O(n log n) in the fragment length: one heap of candidate pairs, stale
 * entries recognised by their byte count. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_internal.h"
#include "text/unicode.h"

typedef struct spm_state {
    const bp_tokenizer *t;
    const char *s;
    bp_tok_sym *sym;
    bp_tok_heap heap;
} spm_state;

static bp_status try_pair(void *ctx, int32_t l, int32_t r) {
    spm_state *st = ctx;
    uint32_t size = st->sym[l].n + st->sym[r].n;
    bp_token id = bp_tok_lookup(st->t, st->s + st->sym[l].off, size);
    if (id == BP_TOKEN_NULL) return BP_OK;
    bp_tok_bigram b = {st->t->scores[id], l, r, size};
    return bp_tok_heap_push(&st->heap, b);
}

bp_status bp_tok_spm_encode(const bp_tokenizer *t, const char *text, size_t len, bool prefix_space,
                            bp_tok_out *out) {
    /* Escaped text: every ' ' becomes the 3 bytes of U+2581. */
    size_t spaces = prefix_space ? 1 : 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t n = len + (prefix_space ? 1 : 0) + 2 * spaces;
    if (n > UINT32_MAX / 2) return bp_fail(BP_E_INVAL, "tokenizer: text of %zu bytes is too long", len);
    if (n == 0) return BP_OK;
    bp_status rc = BP_OK;
    spm_state st = {t, NULL, NULL, {0}};
    char *s = bp_malloc(n);
    bp_tok_sym *sym = bp_malloc(n * sizeof *sym);
    if (!s || !sym) {
        rc = bp_fail(BP_E_NOMEM, "tokenizer: scratch for %zu bytes", n);
        goto done;
    }
    size_t w = 0;
    static const char mark[3] = {'\xE2', '\x96', '\x81'};
    if (prefix_space) { memcpy(s, mark, 3); w = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(s + w, mark, 3); w += 3; }
        else s[w++] = text[i];
    }
    int32_t ns = bp_tok_split_chars(s, n, sym);
    st.s = s;
    st.sym = sym;
    rc = bp_tok_merge(sym, ns, &st.heap, try_pair, &st);
    for (int32_t i = 0; rc == BP_OK && i != -1; i = sym[i].next) {
        bp_token id = bp_tok_lookup(t, s + sym[i].off, sym[i].n);
        if (id != BP_TOKEN_NULL) {
            rc = bp_tok_out_push(out, id);
            continue;
        }
        for (uint32_t k = 0; k < sym[i].n && rc == BP_OK; k++) {
            uint8_t byte = (uint8_t)s[sym[i].off + k];
            if (t->byte_token[byte] == BP_TOKEN_NULL)
                rc = bp_fail(BP_E_FORMAT, "tokenizer: byte 0x%02X has no token (<0x%02X>) and the "
                             "vocabulary has no unknown token", byte, byte);
            else
                rc = bp_tok_out_push(out, t->byte_token[byte]);
        }
    }
done:
    bp_free(st.heap.v);
    bp_free(sym);
    bp_free(s);
    return rc;
}
