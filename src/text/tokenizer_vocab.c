/* The tokenizer's lookup structures: text -> id and merge -> rank hashes, the id buffer and the
 * merge-candidate heap shared by the SPM and BPE merge loops. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_internal.h"
#include "text/unicode.h"

/* FNV-1a, 64-bit: token texts are short (a few bytes), where it is as fast as anything and
 * has no alignment or tail handling to get wrong. */
uint64_t bp_tok_hash_bytes(uint64_t h, const void *p, size_t n) {
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* FNV's low bits depend only on the low bits of the input bytes (multiplication carries
 * upward only), and the table index is the low bits: mix the high bits down first, or Gemma's
 * 262k tokens probe long runs of slots (measured: 130 ms of a 250 ms load). */
static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* A slot holds (32 bits of the hash << 32) | (id + 1): probes compare the stored hash bits
 * and touch a token's text only on a match, so an insert or lookup costs ~one cache miss
 * instead of two per probe (half the load time of a 262k vocabulary). */
#define SLOT(hash, v) (((hash) >> 32 << 32) | (uint64_t)(v))
#define SLOT_ID(s) ((uint32_t)(s) - 1)

bp_status bp_tok_hash_init(bp_tok_hash *h, size_t n_items) {
    size_t slots = 16;
    while (slots < n_items * 2) slots *= 2; /* load factor <= 1/2 keeps probes short */
    h->slots = bp_calloc(slots, sizeof *h->slots);
    if (!h->slots) return bp_fail(BP_E_NOMEM, "tokenizer: hash of %zu entries", n_items);
    h->mask = slots - 1;
    return BP_OK;
}

void bp_tok_hash_free(bp_tok_hash *h) {
    bp_free(h->slots);
    h->slots = NULL;
}

static bool text_is(const bp_tokenizer *t, uint32_t id, const char *s, size_t n) {
    size_t m;
    const char *o = bp_tok_text(t, (bp_token)id, &m);
    return m == n && memcmp(o, s, n) == 0;
}

void bp_tok_hash_put_token(const bp_tokenizer *t, bp_tok_hash *h, bp_token id) {
    size_t n;
    const char *s = bp_tok_text(t, id, &n);
    uint64_t hash = mix(bp_tok_hash_bytes(BP_TOK_HASH_SEED, s, n));
    size_t i = hash & h->mask;
    for (;; i = (i + 1) & h->mask) {
        uint64_t v = h->slots[i];
        if (v == 0) break;
        /* duplicate text: the later id wins, as llama.cpp's map assignment does */
        if (v >> 32 == hash >> 32 && text_is(t, SLOT_ID(v), s, n)) break;
    }
    h->slots[i] = SLOT(hash, (uint32_t)id + 1);
}

bp_token bp_tok_lookup(const bp_tokenizer *t, const char *s, size_t n) {
    const bp_tok_hash *h = &t->tok_hash;
    uint64_t hash = mix(bp_tok_hash_bytes(BP_TOK_HASH_SEED, s, n));
    for (size_t i = hash & h->mask;; i = (i + 1) & h->mask) {
        uint64_t v = h->slots[i];
        if (v == 0) return BP_TOKEN_NULL;
        if (v >> 32 == hash >> 32 && text_is(t, SLOT_ID(v), s, n)) return (bp_token)SLOT_ID(v);
    }
}

static uint64_t merge_hash(const char *a, size_t na, const char *b, size_t nb) {
    uint64_t h = bp_tok_hash_bytes(BP_TOK_HASH_SEED, a, na);
    h = bp_tok_hash_bytes(h, " ", 1);
    return mix(bp_tok_hash_bytes(h, b, nb));
}

static bool merge_is(const bp_tokenizer *t, uint32_t r, const char *a, size_t na, const char *b,
                     size_t nb) {
    const char *m = t->merge_blob + t->merge_off[r];
    size_t split = t->merge_split[r], len = t->merge_off[r + 1] - t->merge_off[r];
    return split == na && len == na + 1 + nb && memcmp(m, a, na) == 0 && memcmp(m + na + 1, b, nb) == 0;
}

void bp_tok_hash_put_merge(const bp_tokenizer *t, bp_tok_hash *h, uint32_t rank) {
    const char *m = t->merge_blob + t->merge_off[rank];
    size_t split = t->merge_split[rank], len = t->merge_off[rank + 1] - t->merge_off[rank];
    const char *a = m, *b = m + split + 1;
    size_t na = split, nb = len - split - 1;
    uint64_t hash = merge_hash(a, na, b, nb);
    size_t i = hash & h->mask;
    for (;; i = (i + 1) & h->mask) {
        uint64_t v = h->slots[i];
        if (v == 0) break;
        if (v >> 32 == hash >> 32 && merge_is(t, SLOT_ID(v), a, na, b, nb)) return; /* first rank stays */
    }
    h->slots[i] = SLOT(hash, rank + 1);
}

int32_t bp_tok_merge_rank(const bp_tokenizer *t, const char *a, size_t na, const char *b, size_t nb) {
    const bp_tok_hash *h = &t->merge_hash;
    if (!h->slots) return -1;
    uint64_t hash = merge_hash(a, na, b, nb);
    for (size_t i = hash & h->mask;; i = (i + 1) & h->mask) {
        uint64_t v = h->slots[i];
        if (v == 0) return -1;
        if (v >> 32 == hash >> 32 && merge_is(t, SLOT_ID(v), a, na, b, nb)) return (int32_t)SLOT_ID(v);
    }
}

bp_status bp_tok_grow(void **v, size_t *cap, size_t elem, const char *what) {
    size_t n = *cap ? *cap * 2 : 64;
    void *g = bp_realloc(*v, n * elem);
    if (!g) return bp_fail(BP_E_NOMEM, "tokenizer: %s of %zu", what, n);
    *v = g;
    *cap = n;
    return BP_OK;
}

bp_status bp_tok_out_push(bp_tok_out *o, bp_token id) {
    if (o->n == o->cap && bp_tok_grow((void **)&o->ids, &o->cap, sizeof *o->ids, "output") != BP_OK)
        return BP_E_NOMEM;
    o->ids[o->n++] = id;
    return BP_OK;
}

/* a pops before b: larger key, then lower left index (llama.cpp's queue order). */
static inline bool before(const bp_tok_bigram *a, const bp_tok_bigram *b) {
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

bp_status bp_tok_heap_push(bp_tok_heap *h, bp_tok_bigram b) {
    if (h->n == h->cap && bp_tok_grow((void **)&h->v, &h->cap, sizeof *h->v, "merge queue") != BP_OK)
        return BP_E_NOMEM;
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return BP_OK;
}

bp_tok_bigram bp_tok_heap_pop(bp_tok_heap *h) {
    bp_tok_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n) h->v[i] = last;
    return top;
}

int32_t bp_tok_split_chars(const char *s, size_t n, bp_tok_sym *sym) {
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t cl = bp_utf8_len((uint8_t)s[i]);
        if (cl > n - i) cl = n - i;
        sym[ns] = (bp_tok_sym){(uint32_t)i, (uint32_t)cl, ns - 1, i + cl == n ? -1 : ns + 1};
        ns++;
        i += cl;
    }
    return ns;
}

bp_status bp_tok_merge(bp_tok_sym *sym, int32_t n_sym, bp_tok_heap *heap, bp_tok_pair_fn pair, void *ctx) {
    bp_status rc = BP_OK;
    heap->n = 0;
    for (int32_t i = 1; i < n_sym && rc == BP_OK; i++) rc = pair(ctx, i - 1, i);
    while (rc == BP_OK && heap->n) {
        bp_tok_bigram b = bp_tok_heap_pop(heap);
        bp_tok_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (l->prev >= 0) rc = pair(ctx, l->prev, b.left);
        if (rc == BP_OK && l->next >= 0) rc = pair(ctx, b.left, l->next);
    }
    return rc;
}
