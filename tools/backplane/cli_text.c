/* Bytes the CLI prints: JSON string literals that are valid JSON for any bytes, and token
 * pieces of any length (see cli_common.h).
 *
 * The JSON policy, the same in every --json output: a string is its bytes as UTF-8 where they
 * are well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF);
 * each maximal ill-formed subpart becomes one U+FFFD (Unicode's recommended practice, what
 * Python's errors="replace" gives); control characters, including NUL, are
 * \u escapes. Where the bytes matter (run's text, tokenize's pieces) a `*_hex` field beside the
 * string carries them exactly. Before, the writer stopped at the first NUL, and passed bytes
 * >= 0x80 through unchecked: a Gemma continuation that split a 4-byte character across tokens
 * made `run --json` print invalid JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

/* The sequence at s[0..n): its length when well-formed (*ok true), else the length of its
 * maximal ill-formed subpart, at least 1 (*ok false): the unit one U+FFFD replaces, as Unicode
 * recommends and as Python's errors="replace" and every browser decode. */
static size_t utf8_scan(const unsigned char *s, size_t n, bool *ok) {
    unsigned c = s[0];
    *ok = c < 0x80;
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;      /* overlong below U+0800 */
        else if (c == 0xed) hi = 0x9f; /* U+D800..U+DFFF, surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;      /* overlong below U+10000 */
        else if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
    } else return 1;                   /* a continuation byte or C0, C1, F5..FF: never a lead */
    if (n < 2 || s[1] < lo || s[1] > hi) return 1;
    size_t k = 2;
    while (k < len && k < n && (s[k] & 0xc0) == 0x80) k++;
    *ok = k == len;
    return k;
}

size_t bp_cli_utf8_seq(const unsigned char *s, size_t n) {
    bool ok;
    size_t k = utf8_scan(s, n, &ok);
    return ok ? k : 0;
}

bool bp_cli_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = bp_cli_utf8_seq(p + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

void bp_cli_json_bytes(FILE *f, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else if (c < 0x80) fputc(c, f);
        else {
            bool ok;
            size_t k = utf8_scan(p + i, n - i, &ok);
            if (ok) fwrite(p + i, 1, k, f);
            else fputs("\\ufffd", f);
            i += k;
            continue;
        }
        i++;
    }
    fputc('"', f);
}

void bp_cli_json_hex(FILE *f, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        fputc(hex[c >> 4], f);
        fputc(hex[c & 15], f);
    }
    fputc('"', f);
}

void bp_cli_json_str(FILE *f, const char *s) {
    if (!s) fputs("null", f);
    else bp_cli_json_bytes(f, s, strlen(s));
}

bp_status bp_cli_piece(const bp_tokenizer *tok, bp_token id, bool special, bp_cli_buf *b, size_t *len) {
    for (;;) {
        bp_status s = bp_tokenizer_token_to_piece(tok, id, special, b->p, b->cap, len);
        if (s == BP_OK) return BP_OK;
        if (*len <= b->cap) return s; /* not a short buffer: a bad id */
        /* a piece longer than the buffer is fetched whole, never dropped */
        char *q = realloc(b->p, *len);
        if (!q) return BP_E_NOMEM;
        b->p = q;
        b->cap = *len;
    }
}

bool bp_cli_buf_add(bp_cli_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) return false;
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}
