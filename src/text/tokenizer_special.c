/* Special tokens in raw text: which tokens are matched, and the partition of a text into raw
 * fragments and matched tokens.
 *
 * The partition is llama.cpp's (tokenizer_st_partition), whose result depends on its order:
 * special tokens are taken longest text first, and each one splits every raw fragment left so
 * far at its leftmost non-overlapping occurrences. So "bcd" wins over "ab" in "abcd" although
 * "ab" starts first. We keep that order exactly (ties in length: lower id first; llama.cpp's
 * sort leaves those unspecified, which matters only for overlapping equal-length specials)
 * but only visit the specials that occur in the text, found in one pass over a byte trie of
 * their texts, so the cost is ~ text length x (1 + number of distinct specials present), not
 * x the 6,400 specials of Gemma's vocabulary. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_internal.h"

/* (text length, id) of a special token: sorting these needs no pointer back to the vocabulary
 * (qsort has no context argument, and a static one would race between threads). */
typedef struct len_id {
    size_t len;
    bp_token id;
} len_id;

static int by_priority(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longer first */
    return (x->id > y->id) - (x->id < y->id);              /* then lower id */
}

static bool is_special(unsigned attr) {
    return attr & (BP_TOKEN_ATTR_CONTROL | BP_TOKEN_ATTR_USER_DEFINED | BP_TOKEN_ATTR_UNKNOWN);
}

/* Child of node (or of the root when node < 0) with label byte, created when absent. */
static int32_t trie_child(bp_tokenizer *t, int32_t node, uint8_t byte) {
    int32_t *link = node < 0 ? &t->trie_root[byte] : &t->trie[node].child;
    while (*link >= 0) {
        if (t->trie[*link].byte == byte) return *link;
        link = &t->trie[*link].sibling;
    }
    int32_t id = t->n_trie++;
    t->trie[id] = (bp_trie_node){-1, -1, -1, -1, byte};
    *link = id;
    return id;
}

bp_status bp_tok_build_specials(bp_tokenizer *t) {
    int32_t n = 0;
    size_t bytes = 0;
    for (bp_token i = 0; i < t->n_vocab; i++) {
        if (!is_special(t->attr[i])) continue;
        n++;
        bytes += t->text_off[i + 1] - t->text_off[i];
    }
    t->specials = bp_malloc(((size_t)n + 1) * sizeof *t->specials);
    t->special_rank = bp_malloc((size_t)t->n_vocab * sizeof *t->special_rank);
    t->trie = bp_malloc((bytes + 1) * sizeof *t->trie);
    if (!t->specials || !t->special_rank || !t->trie)
        return bp_fail(BP_E_NOMEM, "tokenizer: %d special tokens", (int)n);
    len_id *order = bp_malloc(((size_t)n + 1) * sizeof *order);
    if (!order) return bp_fail(BP_E_NOMEM, "tokenizer: %d special tokens", (int)n);
    n = 0;
    for (bp_token i = 0; i < t->n_vocab; i++)
        if (is_special(t->attr[i])) order[n++] = (len_id){t->text_off[i + 1] - t->text_off[i], i};
    qsort(order, (size_t)n, sizeof *order, by_priority);
    for (int32_t r = 0; r < n; r++) t->specials[r] = order[r].id;
    bp_free(order);
    t->n_specials = n;
    for (bp_token i = 0; i < t->n_vocab; i++) t->special_rank[i] = -1;
    for (int32_t r = 0; r < n; r++) t->special_rank[t->specials[r]] = r;
    for (int i = 0; i < 256; i++) t->trie_root[i] = -1;
    t->n_trie = 0;
    /* In priority order, so a node's first-set token is the one llama.cpp would try first. */
    for (int32_t r = 0; r < n; r++) {
        bp_token id = t->specials[r];
        size_t len;
        const char *s = bp_tok_text(t, id, &len);
        if (len == 0) continue;
        int32_t node = -1;
        for (size_t k = 0; k < len; k++) node = trie_child(t, node, (uint8_t)s[k]);
        if (t->trie[node].tok_all < 0) t->trie[node].tok_all = id;
        if ((t->attr[id] & (BP_TOKEN_ATTR_CONTROL | BP_TOKEN_ATTR_UNKNOWN)) == 0 &&
            t->trie[node].tok_user < 0)
            t->trie[node].tok_user = id;
    }
    return BP_OK;
}

static int cmp_rank(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static const char *find(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0 || m > n) return NULL;
    const char *end = hay + n - m;
    for (const char *p = hay; p <= end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p) + 1);
        if (!p) return NULL;
        if (memcmp(p, needle, m) == 0) return p;
    }
    return NULL;
}

/* Sort ranks and drop repeats; returns the new count. */
static size_t unique_ranks(int32_t *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_rank);
    size_t u = 0;
    for (size_t k = 0; k < n; k++)
        if (u == 0 || v[u - 1] != v[k]) v[u++] = v[k];
    return u;
}

/* Ranks (priority positions) of the specials that occur in text, unique and ascending;
 * *out allocated. One trie walk per starting byte. */
static bp_status specials_present(const bp_tokenizer *t, const char *text, size_t len,
                                  bool parse_special, int32_t **out, size_t *count) {
    size_t n = 0, cap = 0;
    int32_t *v = NULL;
    bp_status rc = bp_tok_grow((void **)&v, &cap, sizeof *v, "special-token scan");
    if (rc != BP_OK) return rc;
    for (size_t i = 0; i < len; i++) {
        int32_t node = t->trie_root[(uint8_t)text[i]];
        for (size_t k = i; node >= 0;) {
            int32_t tok = parse_special ? t->trie[node].tok_all : t->trie[node].tok_user;
            if (tok >= 0) {
                /* Dedupe before growing: a text made of specials repeats the same few. */
                if (n == cap && (n = unique_ranks(v, n)) > cap / 2 &&
                    (rc = bp_tok_grow((void **)&v, &cap, sizeof *v, "special-token scan")) != BP_OK) {
                    bp_free(v);
                    return rc;
                }
                v[n++] = t->special_rank[tok];
            }
            if (++k >= len) break;
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != (uint8_t)text[k]) c = t->trie[c].sibling;
            node = c;
        }
    }
    *out = v;
    *count = unique_ranks(v, n);
    return BP_OK;
}

bp_status bp_tok_partition(const bp_tokenizer *t, const char *text, size_t len, bool parse_special,
                           bp_tok_frag **frags_out, int32_t *first) {
    *frags_out = NULL;
    *first = -1;
    if (len == 0) return BP_OK;
    int32_t *found = NULL;
    size_t n_found = 0;
    bp_status rc = specials_present(t, text, len, parse_special, &found, &n_found);
    if (rc != BP_OK) return rc;
    size_t cap = 0;
    bp_tok_frag *fr = NULL;
    if ((rc = bp_tok_grow((void **)&fr, &cap, sizeof *fr, "fragments")) != BP_OK) {
        bp_free(found);
        return rc;
    }
    int32_t nf = 1;
    fr[0] = (bp_tok_frag){0, len, BP_TOKEN_NULL, -1};
    for (size_t k = 0; k < n_found; k++) {
        bp_token tok = t->specials[found[k]];
        size_t m;
        const char *s = bp_tok_text(t, tok, &m);
        unsigned attr = t->attr[tok];
        for (int32_t f = 0; f >= 0; f = fr[f].next) {
            /* Split raw fragment f at each occurrence, left to right: f keeps the left side,
             * then the token, then the right side, which is searched next. */
            while (fr[f].tok == BP_TOKEN_NULL) {
                const char *hit = find(text + fr[f].off, fr[f].len, s, m);
                if (!hit) break;
                if ((size_t)nf + 2 > cap && (rc = bp_tok_grow((void **)&fr, &cap, sizeof *fr, "fragments")) != BP_OK) {
                    bp_free(fr);
                    bp_free(found);
                    return rc;
                }
                size_t at = (size_t)(hit - text), end = fr[f].off + fr[f].len;
                size_t left_len = at - fr[f].off, right_off = at + m, right_len = end - right_off;
                if (attr & BP_TOKEN_ATTR_LSTRIP)
                    while (left_len && isspace((unsigned char)text[fr[f].off + left_len - 1])) left_len--;
                if (attr & BP_TOKEN_ATTR_RSTRIP)
                    while (right_len && isspace((unsigned char)text[right_off])) {
                        right_off++;
                        right_len--;
                    }
                int32_t after = fr[f].next, tk = f, rt = -1;
                if (right_len) {
                    rt = nf++;
                    fr[rt] = (bp_tok_frag){right_off, right_len, BP_TOKEN_NULL, after};
                    after = rt;
                }
                if (left_len) { /* f stays the left side; the token is a new fragment */
                    tk = nf++;
                    fr[f].len = left_len;
                    fr[f].next = tk;
                }
                fr[tk] = (bp_tok_frag){at, m, tok, after};
                if (rt < 0) {
                    f = tk;
                    break;
                }
                f = rt;
            }
        }
    }
    bp_free(found);
    *frags_out = fr;
    *first = 0;
    return BP_OK;
}
