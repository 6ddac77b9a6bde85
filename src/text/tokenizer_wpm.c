/* WordPiece encoding of one raw fragment (tokenizer.ggml.model = "bert"), as llama.cpp does it
 * (llama-vocab.cpp, commit 0c1e570), which is BERT's basic tokenization then greedy
 * longest-match-first:
 *
 * 1. Normalize and split into words, code point by code point (invalid UTF-8 is U+FFFD):
 *    with strip_accents, each code point becomes the first code point of its NFD (é -> e);
 *    whitespace ends a word; NUL, U+FFFD and control/format characters are dropped; with
 *    strip_accents, marks are dropped; with lowercase, the rest is lower-cased (simple
 *    mapping); punctuation, ASCII symbols and CJK ideographs are words of their own.
 * 2. Each word, with U+2581 in front (the GGUF conversion writes word-initial pieces as
 *    "▁piece" and drops the "##" of continuations), is covered left to right by the longest
 *    token that matches at each position. A position where nothing matches makes the whole
 *    word [UNK].
 *
 * The normalizer flags are tokenizer.ggml.normalizer.lowercase (default true) and
 * .strip_accents (default: as lowercase). */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_internal.h"
#include "text/unicode.h"

/* The CJK ideograph blocks BERT splits one by one (as llama.cpp lists them: the fifth range
 * starts at U+2B920 where Unicode's Extension E starts at U+2B820, following Hugging Face). */
static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Cover "▁" + word[0..n) with tokens, appending them; [UNK] when some position has none. */
static bp_status encode_word(const bp_tokenizer *t, const char *w, size_t n, bp_tok_out *out) {
    size_t start = out->n;
    bp_status rc = BP_OK;
    for (size_t i = 0; i < n && rc == BP_OK;) {
        size_t j = i + t->max_token_len < n ? i + t->max_token_len : n;
        bp_token id = BP_TOKEN_NULL;
        for (; j > i && (id = bp_tok_lookup(t, w + i, j - i)) == BP_TOKEN_NULL; j--) {
        }
        if (id == BP_TOKEN_NULL) {
            out->n = start;
            break;
        }
        rc = bp_tok_out_push(out, id);
        i = j;
    }
    if (rc != BP_OK || out->n > start) return rc;
    if (t->special[BP_SPECIAL_UNK] == BP_TOKEN_NULL)
        return bp_fail(BP_E_FORMAT, "tokenizer: a word has no WordPiece tokens and the vocabulary has no "
                       "unknown token");
    return bp_tok_out_push(out, t->special[BP_SPECIAL_UNK]);
}

bp_status bp_tok_wpm_encode(const bp_tokenizer *t, const char *text, size_t len, bp_tok_out *out) {
    if (len == 0) return BP_OK;
    if (len > UINT32_MAX / 8) return bp_fail(BP_E_INVAL, "tokenizer: text of %zu bytes is too long", len);
    /* A word: U+2581 then code points re-encoded (<= 4 bytes each, from <= 1 byte of input
     * each, as lowercase and NFD keep one code point). */
    char *w = bp_malloc(3 + 4 * len);
    if (!w) return bp_fail(BP_E_NOMEM, "tokenizer: scratch for %zu bytes", len);
    static const char mark[3] = {'\xE2', '\x96', '\x81'};
    memcpy(w, mark, 3);
    size_t wn = 3;
    bp_status rc = BP_OK;
    for (size_t pos = 0; pos < len && rc == BP_OK;) {
        uint32_t c = bp_utf8_decode((const uint8_t *)text, len, &pos);
        if (t->wpm_strip_accents) c = bp_unicode_nfd_first(c);
        unsigned f = bp_unicode_flags(c);
        if (f & BP_UC_WHITESPACE) {
            if (wn > 3) rc = encode_word(t, w, wn, out);
            wn = 3;
            continue;
        }
        if (c == 0 || c == 0xFFFD || (f & BP_UC_CONTROL)) continue;
        if (t->wpm_strip_accents && (f & BP_UC_MARK)) continue;
        uint8_t u[4];
        size_t m = bp_utf8_encode(t->wpm_lowercase ? bp_unicode_tolower(c) : c, u);
        bool alone = (f & BP_UC_PUNCT) || (c < 0x7F && (f & BP_UC_SYMBOL)) || is_cjk(c);
        if (alone && wn > 3) {
            rc = encode_word(t, w, wn, out);
            wn = 3;
        }
        memcpy(w + wn, u, m);
        wn += m;
        if (alone && rc == BP_OK) {
            rc = encode_word(t, w, wn, out);
            wn = 3;
        }
    }
    if (rc == BP_OK && wn > 3) rc = encode_word(t, w, wn, out);
    bp_free(w);
    return rc;
}
