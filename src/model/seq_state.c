/* A sequence's state in memory or a file (prompt caching): a header naming the model, the KV
 * kind and the lengths, the token ids and positions of its cells, the K/V rows (bp_kv_cache_state_write's layout), and a
 * checksum over both. Restoring reads and checks all of it before the target sequence is
 * touched, so a state of another model or kind, a longer one than the context holds, or a
 * truncated or damaged file is a clear error and the sequence stays as it was. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/context_internal.h"
#include "ops/ops_internal.h"

enum { STATE_VERSION = 2 }; /* 2: the cells' positions (holes) after the token ids */

typedef struct state_header {
    char magic[4]; /* "BPSQ" */
    uint32_t version;
    uint32_t kv_kind;
    uint32_t reserved;
    int64_t n_layer, n_head_kv, head_dim_k, head_dim_v, n_vocab, n_embd, n_params;
    uint64_t weight_bytes;
    char arch[32], name[128];
    int64_t n_pos;          /* cells (token ids, positions) held */
    uint64_t kv_bytes;      /* bytes of K/V after the token ids and positions */
    uint64_t checksum;      /* FNV-1a 64 of the ids, the positions and the K/V bytes */
} state_header;

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

static void fill_header(const bp_context *c, state_header *h, int64_t n_pos, size_t kv_bytes) {
    const bp_model *m = c->m;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, "BPSQ", 4);
    h->version = STATE_VERSION;
    h->kv_kind = (uint32_t)c->kv_kind;
    h->n_layer = m->hp.n_layer, h->n_head_kv = m->hp.n_head_kv, h->head_dim_k = m->hp.head_dim_k;
    h->head_dim_v = m->hp.head_dim_v, h->n_vocab = m->hp.n_vocab, h->n_embd = m->hp.n_embd;
    h->n_params = m->n_params, h->weight_bytes = m->weight_bytes;
    snprintf(h->arch, sizeof h->arch, "%s", m->arch->name);
    memcpy(h->name, m->name, sizeof h->name < sizeof m->name ? sizeof h->name : sizeof m->name);
    h->name[sizeof h->name - 1] = 0;
    h->n_pos = n_pos, h->kv_bytes = kv_bytes;
}

/* The cells of seq; -1 for an unknown one. */
static int64_t cells(const bp_context *c, int32_t seq) {
    if (!c || seq < 0 || seq >= c->n_seq_max) return -1;
    return bp_seq_cells(c, seq);
}

size_t bp_context_seq_state_size(const bp_context *c, int32_t seq) {
    int64_t n = cells(c, seq);
    if (n < 0) return 0;
    const bp_kv_cache *kv = c->seqs[seq].kv ? c->seqs[seq].kv : c->kv;
    return sizeof(state_header) + 2 * (size_t)n * sizeof(int32_t) + bp_kv_cache_state_bytes(kv, n);
}

bp_status bp_context_seq_state_get(const bp_context *c, int32_t seq, void *buf, size_t cap, size_t *len) {
    if (!c || !len) return bp_fail(BP_E_INVAL, "bp_context_seq_state_get: NULL argument");
    const int64_t n = cells(c, seq);
    if (n < 0)
        return bp_fail(BP_E_INVAL, "bp_context_seq_state_get: sequence %d is outside 0..%d", (int)seq,
                       (int)c->n_seq_max - 1);
    *len = bp_context_seq_state_size(c, seq);
    if (!buf || cap < *len)
        return bp_fail(BP_E_INVAL, "bp_context_seq_state_get: the state of sequence %d is %zu bytes, the buffer %zu",
                       (int)seq, *len, cap);
    const bp_kv_cache *kv = c->seqs[seq].kv ? c->seqs[seq].kv : c->kv;
    state_header h;
    const size_t kv_bytes = bp_kv_cache_state_bytes(kv, n), tok_bytes = 2 * (size_t)n * sizeof(int32_t);
    fill_header(c, &h, n, kv_bytes);
    uint8_t *p = (uint8_t *)buf + sizeof h;
    if (n) memcpy(p, c->seqs[seq].toks, (size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) {
        const int32_t pos = (int32_t)bp_kv_cell_pos(kv, i);
        memcpy(p + (size_t)(n + i) * sizeof pos, &pos, sizeof pos);
    }
    bp_status s = bp_kv_cache_state_write(kv, n, p + tok_bytes);
    if (s) return bp_model_fail_prefixed(s, "bp_context_seq_state_get");
    h.checksum = fnv1a(0xCBF29CE484222325ull, p, tok_bytes + kv_bytes);
    memcpy(buf, &h, sizeof h);
    return BP_OK;
}

/* The first field of the header that differs from this context's, as a sentence; NULL if none. */
static const char *mismatch(const state_header *h, const state_header *mine, char *buf, size_t n) {
#define FIELD(f, what)                                                                                  \
    if (h->f != mine->f) {                                                                              \
        snprintf(buf, n, "its model has %s %lld, this context's %lld (a file of the same name that "    \
                 "differs)", what, (long long)h->f, (long long)mine->f);                                 \
        return buf;                                                                                     \
    }
    if (strncmp(h->arch, mine->arch, sizeof h->arch) || strncmp(h->name, mine->name, sizeof h->name)) {
        snprintf(buf, n, "it is of model '%s' (%s), this context's model is '%s' (%s)", h->name, h->arch, mine->name,
                 mine->arch);
        return buf;
    }
    FIELD(n_layer, "layers") FIELD(n_head_kv, "KV heads") FIELD(head_dim_k, "key head size")
    FIELD(head_dim_v, "value head size") FIELD(n_vocab, "vocabulary") FIELD(n_embd, "embedding size")
    FIELD(n_params, "parameters") FIELD(weight_bytes, "weight bytes")
#undef FIELD
    if (h->kv_kind != mine->kv_kind) {
        const bp_kind_info *a = bp_kind_lookup(h->kv_kind), *b = bp_kind_lookup(mine->kv_kind);
        snprintf(buf, n, "its KV cache is of kind %s, this context's of %s", a ? a->name : "?", b ? b->name : "?");
        return buf;
    }
    return NULL;
}

bp_status bp_context_seq_state_set(bp_context *c, int32_t seq, const void *buf, size_t len) {
    static const char *fn = "bp_context_seq_state_set";
    if (!c || (!buf && len)) return bp_fail(BP_E_INVAL, "%s: NULL argument", fn);
    if (seq < 0 || seq >= c->n_seq_max)
        return bp_fail(BP_E_INVAL, "%s: sequence %d is outside 0..%d", fn, (int)seq, (int)c->n_seq_max - 1);
    state_header h, mine;
    if (len < sizeof h) return bp_fail(BP_E_FORMAT, "%s: %zu bytes, shorter than the %zu-byte header", fn, len, sizeof h);
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, "BPSQ", 4) || h.version != STATE_VERSION)
        return bp_fail(BP_E_FORMAT, "%s: not a backplane sequence state (magic BPSQ, version %d)", fn, STATE_VERSION);
    fill_header(c, &mine, 0, 0);
    char why[400];
    if (mismatch(&h, &mine, why, sizeof why))
        return bp_fail(BP_E_FORMAT, "%s: the state does not fit this context: %s", fn, why);
    if (h.n_pos < 0 || h.n_pos > c->n_ctx)
        return bp_fail(BP_E_INVAL, "%s: the state holds %lld positions, a sequence of this context %lld (n_ctx)", fn,
                       (long long)h.n_pos, (long long)c->n_ctx);
    const size_t tok_bytes = 2 * (size_t)h.n_pos * sizeof(int32_t), kv_bytes = bp_kv_cache_state_bytes(c->kv, h.n_pos);
    if (h.kv_bytes != kv_bytes)
        return bp_fail(BP_E_FORMAT, "%s: the state's K/V is %llu bytes, %lld positions of this cache are %zu", fn,
                       (unsigned long long)h.kv_bytes, (long long)h.n_pos, kv_bytes);
    if (len != sizeof h + tok_bytes + kv_bytes)
        return bp_fail(BP_E_FORMAT, "%s: the state is %zu bytes, its header says %zu (truncated or padded)", fn, len,
                       sizeof h + tok_bytes + kv_bytes);
    const uint8_t *p = (const uint8_t *)buf + sizeof h;
    if (fnv1a(0xCBF29CE484222325ull, p, tok_bytes + kv_bytes) != h.checksum)
        return bp_fail(BP_E_FORMAT, "%s: the state's checksum does not match its contents (damaged)", fn);
    for (int64_t i = 0; i < h.n_pos; i++) {
        int32_t t;
        memcpy(&t, p + (size_t)i * sizeof t, sizeof t);
        if (t < 0 || t >= c->m->hp.n_vocab)
            return bp_fail(BP_E_FORMAT, "%s: token %lld of the state is id %d, outside the vocabulary", fn, (long long)i,
                           (int)t);
    }
    int32_t *pos = bp_malloc((size_t)(h.n_pos ? h.n_pos : 1) * sizeof *pos);
    if (!pos) return bp_fail(BP_E_NOMEM, "%s: no memory for %lld positions", fn, (long long)h.n_pos);
    if (h.n_pos) memcpy(pos, p + (size_t)h.n_pos * sizeof *pos, (size_t)h.n_pos * sizeof *pos);
    bp_kv_cache *kv = NULL;
    bp_status s = bp_kv_cache_check_positions(c->kv, h.n_pos, pos, c->n_ctx);
    if (s) s = bp_fail(s, "%s: %s", fn, bp_last_error());
    if (!s) s = bp_seq_cache(c, seq, &kv);
    if (!s) s = bp_kv_cache_set_positions(kv, h.n_pos, pos); /* the one step that can fail, before any row */
    bp_free(pos);
    if (s) return s;
    if (seq == 0) {
        bp_context_cut_states(c, 0); /* the device's copy of seq 0 is replaced */
        c->n_out = 0;
    }
    if ((s = bp_kv_cache_state_read(kv, h.n_pos, p + tok_bytes))) return bp_model_fail_prefixed(s, fn);
    if (h.n_pos) memcpy(c->seqs[seq].toks, p, (size_t)h.n_pos * sizeof(int32_t));
    *bp_seq_len(c, seq) = h.n_pos;
    return BP_OK;
}

bp_status bp_context_seq_state_save(const bp_context *c, int32_t seq, const char *path) {
    if (!c || !path) return bp_fail(BP_E_INVAL, "bp_context_seq_state_save: NULL argument");
    size_t n = bp_context_seq_state_size(c, seq), len = 0;
    if (!n) return bp_fail(BP_E_INVAL, "bp_context_seq_state_save: sequence %d is outside 0..%d", (int)seq,
                           (int)c->n_seq_max - 1);
    void *buf = bp_malloc(n);
    if (!buf) return bp_fail(BP_E_NOMEM, "bp_context_seq_state_save: no memory for %zu bytes", n);
    bp_status s = bp_context_seq_state_get(c, seq, buf, n, &len);
    FILE *f = s ? NULL : fopen(path, "wb");
    if (!s && !f) s = bp_fail(BP_E_IO, "bp_context_seq_state_save: %s: %s", path, strerror(errno));
    if (f) {
        bool ok = fwrite(buf, 1, len, f) == len;
        ok = (fclose(f) == 0) && ok;
        if (!ok) s = bp_fail(BP_E_IO, "bp_context_seq_state_save: %s: writing %zu bytes failed", path, len);
    }
    bp_free(buf);
    return s;
}

bp_status bp_context_seq_state_load(bp_context *c, int32_t seq, const char *path) {
    if (!c || !path) return bp_fail(BP_E_INVAL, "bp_context_seq_state_load: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return bp_fail(BP_E_IO, "bp_context_seq_state_load: %s: %s", path, strerror(errno));
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return bp_fail(BP_E_IO, "bp_context_seq_state_load: %s: cannot find its size", path);
    }
    void *buf = bp_malloc(n ? (size_t)n : 1);
    if (!buf) {
        fclose(f);
        return bp_fail(BP_E_NOMEM, "bp_context_seq_state_load: no memory for %ld bytes", n);
    }
    bool ok = fread(buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    bp_status s = ok ? bp_context_seq_state_set(c, seq, buf, (size_t)n)
                     : bp_fail(BP_E_IO, "bp_context_seq_state_load: %s: reading %ld bytes failed", path, n);
    bp_free(buf);
    if (s && ok) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", bp_last_error());
        s = bp_fail(s, "%s: %s", path, msg);
    }
    return s;
}
