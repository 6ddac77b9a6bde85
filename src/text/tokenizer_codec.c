/* Encode and decode: the special-token partition, then SPM, BPE or WordPiece per raw fragment;
 * pieces of tokens and their concatenation. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_internal.h"
#include "text/unicode.h"

static bp_status encode(const bp_tokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, bp_tok_out *out) {
    bp_tok_frag *fr = NULL;
    int32_t first;
    bp_status rc = bp_tok_partition(t, text, len, parse_special, &fr, &first);
    if (rc != BP_OK) return rc;
    if (add_special && t->add_bos) rc = bp_tok_out_push(out, t->special[BP_SPECIAL_BOS]);
    /* SPM puts a space before the first raw fragment and before each one after a special
     * token (llama.cpp's "is_prev_special"), when the vocabulary asks for a space prefix. */
    bool prev_special = true;
    for (int32_t f = first; f >= 0 && rc == BP_OK; f = fr[f].next) {
        if (fr[f].tok != BP_TOKEN_NULL) {
            rc = bp_tok_out_push(out, fr[f].tok);
            prev_special = true;
        } else if (t->type == BP_TOKENIZER_SPM) {
            rc = bp_tok_spm_encode(t, text + fr[f].off, fr[f].len, t->add_space_prefix && prev_special, out);
            prev_special = false;
        } else if (t->type == BP_TOKENIZER_WPM) {
            rc = bp_tok_wpm_encode(t, text + fr[f].off, fr[f].len, out);
        } else {
            rc = bp_tok_bpe_encode(t, text + fr[f].off, fr[f].len, out);
        }
    }
    if (rc == BP_OK && add_special && t->add_eos) rc = bp_tok_out_push(out, t->special[BP_SPECIAL_EOS]);
    /* WordPiece closes with [SEP] (llama.cpp: always, with add_special). */
    if (rc == BP_OK && add_special && t->type == BP_TOKENIZER_WPM) rc = bp_tok_out_push(out, t->special[BP_SPECIAL_SEP]);
    bp_free(fr);
    return rc;
}

bp_status bp_tokenizer_encode_alloc(const bp_tokenizer *t, const char *text, size_t len,
                                    bool add_special, bool parse_special, bp_token **ids, size_t *n) {
    if (!ids || !n) return bp_fail(BP_E_INVAL, "bp_tokenizer_encode_alloc: ids or n is NULL");
    *ids = NULL;
    *n = 0;
    if (!t || (!text && len)) return bp_fail(BP_E_INVAL, "bp_tokenizer_encode_alloc: tokenizer or text is NULL");
    bp_tok_out out = {0};
    bp_status rc = encode(t, text ? text : "", len, add_special, parse_special, &out);
    if (rc != BP_OK) {
        bp_free(out.ids);
        return rc;
    }
    if (!out.ids) { /* empty result: still a valid pointer to free */
        out.ids = bp_malloc(sizeof *out.ids);
        if (!out.ids) return bp_fail(BP_E_NOMEM, "tokenizer: empty output");
    }
    *ids = out.ids;
    *n = out.n;
    return BP_OK;
}

void bp_tokens_free(bp_token *ids) { bp_free(ids); }

bp_status bp_tokenizer_encode(const bp_tokenizer *t, const char *text, size_t len, bool add_special,
                              bool parse_special, bp_token *out, size_t cap, size_t *n) {
    if (!n) return bp_fail(BP_E_INVAL, "bp_tokenizer_encode: n is NULL");
    *n = 0;
    if (!out && cap) return bp_fail(BP_E_INVAL, "bp_tokenizer_encode: out is NULL with cap %zu", cap);
    bp_token *ids;
    size_t count;
    bp_status rc = bp_tokenizer_encode_alloc(t, text, len, add_special, parse_special, &ids, &count);
    if (rc != BP_OK) return rc;
    *n = count;
    memcpy(out ? out : ids, ids, (count < cap ? count : cap) * sizeof *ids);
    bp_free(ids);
    if (count > cap)
        return bp_fail(BP_E_INVAL, "bp_tokenizer_encode: %zu tokens do not fit in %zu", count, cap);
    return BP_OK;
}

/* ---- decode ----------------------------------------------------------------------------- */

/* A growable byte sink that also counts what did not fit. */
typedef struct sink {
    char *buf;
    size_t cap, len;
} sink;

static void put(sink *s, const void *p, size_t n) {
    if (s->len < s->cap) {
        size_t room = s->cap - s->len;
        memcpy(s->buf + s->len, p, n < room ? n : room);
    }
    s->len += n;
}

/* Byte of a byte-level BPE code point, or -1 when the code point is not in GPT-2's alphabet. */
static int byte_of_cpt(const bp_tokenizer *t, uint32_t c) {
    return c < BP_BYTE_ALPHABET_END ? t->byte_of_cpt[c] : -1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return 0;
}

/* Append the piece of id to s (llama_token_to_piece's rules); lstrip: drop one leading space. */
static void piece(const bp_tokenizer *t, bp_token id, bool special, bool lstrip, sink *s) {
    unsigned attr = t->attr[id];
    size_t n;
    const char *text = bp_tok_text(t, id, &n);
    if ((attr & (BP_TOKEN_ATTR_UNKNOWN | BP_TOKEN_ATTR_CONTROL)) && !special) return;
    if (attr & (BP_TOKEN_ATTR_UNKNOWN | BP_TOKEN_ATTR_CONTROL | BP_TOKEN_ATTR_USER_DEFINED)) {
        if (lstrip && n && text[0] == ' ') text++, n--;
        put(s, text, n);
    } else if (attr & BP_TOKEN_ATTR_NORMAL) {
        if (t->escape_spaces) {
            for (size_t i = 0; i < n;) {
                if (n - i >= 3 && memcmp(text + i, "\xE2\x96\x81", 3) == 0) {
                    if (!lstrip) put(s, " ", 1);
                    i += 3;
                } else {
                    if (!(lstrip && text[i] == ' ')) put(s, text + i, 1);
                    i++;
                }
                lstrip = false;
            }
        } else {
            for (size_t i = 0; i < n;) {
                uint32_t c = bp_utf8_decode((const uint8_t *)text, n, &i);
                int b = byte_of_cpt(t, c);
                if (b >= 0) {
                    char ch = (char)b;
                    if (!(lstrip && ch == ' ')) put(s, &ch, 1);
                } else {
                    /* What llama.cpp writes for a character outside the byte alphabet. */
                    static const char hex[] = "0123456789abcdef";
                    put(s, "[UNK_BYTE_0x", 12);
                    uint8_t u[4];
                    size_t m = bp_utf8_encode(c, u);
                    for (size_t k = 0; k < m; k++) {
                        char h[2] = {hex[u[k] >> 4], hex[u[k] & 15]};
                        put(s, h, 2);
                    }
                    put(s, text, n);
                    put(s, "]", 1);
                }
                lstrip = false;
            }
        }
    } else if (attr & BP_TOKEN_ATTR_BYTE) {
        char ch = n >= 5 ? (char)(hexval(text[3]) * 16 + hexval(text[4])) : 0;
        if (!(lstrip && ch == ' ')) put(s, &ch, 1);
    }
    /* UNUSED / UNDEFINED tokens decode to nothing, as in llama.cpp. */
}

bp_status bp_tokenizer_token_to_piece(const bp_tokenizer *t, bp_token id, bool special, char *buf,
                                      size_t cap, size_t *n) {
    if (!n) return bp_fail(BP_E_INVAL, "bp_tokenizer_token_to_piece: n is NULL");
    *n = 0;
    if (!t) return bp_fail(BP_E_INVAL, "bp_tokenizer_token_to_piece: tokenizer is NULL");
    if (!buf && cap) return bp_fail(BP_E_INVAL, "bp_tokenizer_token_to_piece: buf is NULL with cap %zu", cap);
    if (id < 0 || id >= t->n_vocab)
        return bp_fail(BP_E_INVAL, "bp_tokenizer_token_to_piece: token %d is outside the vocabulary "
                       "of %d", (int)id, (int)t->n_vocab);
    sink s = {buf, cap, 0};
    piece(t, id, special, false, &s);
    *n = s.len;
    if (s.len > cap)
        return bp_fail(BP_E_INVAL, "bp_tokenizer_token_to_piece: %zu bytes do not fit in %zu", s.len, cap);
    return BP_OK;
}

bp_status bp_tokenizer_decode(const bp_tokenizer *t, const bp_token *ids, size_t n_ids,
                              unsigned flags, char *buf, size_t cap, size_t *len) {
    if (!len) return bp_fail(BP_E_INVAL, "bp_tokenizer_decode: len is NULL");
    *len = 0;
    if (!t || (!ids && n_ids)) return bp_fail(BP_E_INVAL, "bp_tokenizer_decode: tokenizer or ids is NULL");
    if (!buf && cap) return bp_fail(BP_E_INVAL, "bp_tokenizer_decode: buf is NULL with cap %zu", cap);
    sink s = {buf, cap, 0};
    bool special = flags & BP_DECODE_SPECIAL;
    /* The space encode put before the first word, and after each special token. */
    bool strip = t->add_space_prefix && !(flags & BP_DECODE_KEEP_PREFIX_SPACE);
    bool after_special = true;
    for (size_t i = 0; i < n_ids; i++) {
        bp_token id = ids[i];
        if (id < 0 || id >= t->n_vocab)
            return bp_fail(BP_E_INVAL, "bp_tokenizer_decode: ids[%zu] = %d is outside the vocabulary "
                           "of %d", i, (int)id, (int)t->n_vocab);
        bool is_special = t->attr[id] & (BP_TOKEN_ATTR_UNKNOWN | BP_TOKEN_ATTR_CONTROL |
                                         BP_TOKEN_ATTR_USER_DEFINED);
        piece(t, id, special, strip && after_special && !is_special, &s);
        after_special = is_special;
    }
    *len = s.len;
    if (s.len > cap)
        return bp_fail(BP_E_INVAL, "bp_tokenizer_decode: %zu bytes do not fit in %zu", s.len, cap);
    return BP_OK;
}
