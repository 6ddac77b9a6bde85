/* The CPU's attention fast path: flash-attention tiling with an online softmax in f32.
 *
 * Work items are (kv head g, block of queries, chunk of keys). An item's rows are its queries
 * times the query heads sharing g (GQA: a K/V tile is read once for all of them). It walks the
 * keys its rows may see in tiles of KT keys: dequantize the K tile to f32 (an F32 cache is read
 * in place), scores for every row, scale, soft-cap and mask, online softmax update (running
 * max m, sum l, accumulator rescaled when m grows), dequantize the V tile, accumulate P V.
 * Memory is per thread (a K and a V tile, R score rows, R accumulators), whatever the context.
 *
 * Decode over a long context has few rows per kv head, so the keys are split into chunks
 * (flash-decoding): each chunk is an item with its own (m, l, acc), combined at the end. The
 * split depends only on the shape, never on the thread count, so results are identical for any
 * number of threads (each item is computed by one thread, in one order).
 *
 * A sink (desc.sinks, gpt-oss) joins only the final normalization: with the row's (m, l, acc),
 * out = acc / (l + exp(sink - m)), the same as a first key of score sink and no value. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/cpu_internal.h"
#include "cpu/op_kern.h"
#include "ops/ops_internal.h"

/* A decode splits its keys into chunks of at least MIN_CHUNK_KEYS until there are about
 * TARGET_ITEMS items: 128 keys keep Gemma 3's 512-token decode (one KV head) at 4 items, so a
 * worker that starts late on a busy machine still finds work. */
enum { TARGET_ITEMS = 16, MIN_CHUNK_KEYS = 128, TILE_FLOATS = 16384 };

typedef struct plan {
    const bp_attn_desc *d;
    const float *q;
    const int32_t *pos;
    const bp_kv_cache *cache;
    const bp_kv_layer *L;
    float *out;
    const bp_op_kern *kn;
    bool exact;
    int dk, dv, group, qb, rmax, kt;
    int64_t t, n_qb, n_kc, n_items, len;
    float *partial; /* n_kc > 1: per item, rmax rows of (m, l, acc[dv]) */
    uint8_t **scratch;
    _Atomic int64_t next;
} plan;

typedef struct rows {
    const float **q;
    float **acc;
    float *m, *l, *s, *ktile, *vtile;
    int64_t *j0, *j1;
} rows;

static size_t scratch_bytes(const plan *p) {
    size_t R = (size_t)p->rmax, kt = (size_t)p->kt;
    return R * (2 * sizeof(void *) + 2 * sizeof(int64_t)) + sizeof(float) * (R * (2 + kt + (size_t)p->dv) +
                                                                              kt * (size_t)(p->dk + p->dv)) + 256;
}

static void carve(const plan *p, uint8_t *buf, rows *w) {
    size_t R = (size_t)p->rmax;
    w->q = (const float **)buf;
    w->acc = (float **)(buf + R * sizeof(void *));
    w->j0 = (int64_t *)(buf + 2 * R * sizeof(void *));
    w->j1 = w->j0 + R;
    float *f = (float *)(((uintptr_t)(w->j1 + R) + 63) & ~(uintptr_t)63);
    w->ktile = f, f += (size_t)p->kt * (size_t)p->dk;
    w->vtile = f, f += (size_t)p->kt * (size_t)p->dv;
    w->s = f, f += R * (size_t)p->kt;
    w->m = f, f += R;
    w->l = f, f += R;
    for (size_t r = 0; r < R; r++) w->acc[r] = f + r * (size_t)p->dv;
}

static float softcap(float s, float cap) { return cap * tanhf(s / cap); }

/* 1 / the softmax denominator of head h's row with running max m and sum l (0: no key seen). */
static float inv_denom(const bp_attn_desc *d, int64_t h, float m, float l) {
    if (!(l > 0)) return 0.0f;
    return 1.0f / (d->sinks ? l + expf(d->sinks[h] - m) : l);
}

static void run_item(const plan *p, int64_t it, rows *w) {
    int64_t g = it / (p->n_qb * p->n_kc), rem = it % (p->n_qb * p->n_kc), qb = rem / p->n_kc, kc = rem % p->n_kc;
    int64_t i0 = qb * p->qb, i1 = i0 + p->qb < p->t ? i0 + p->qb : p->t;
    int64_t c0 = kc * p->len / p->n_kc, c1 = (kc + 1) * p->len / p->n_kc;
    int R = (int)(i1 - i0) * p->group, dk = p->dk, dv = p->dv, nh = p->d->n_heads;
    int64_t lo = INT64_MAX, hi = 0;
    for (int r = 0; r < R; r++) {
        int64_t i = i0 + r / p->group, h = g * p->group + r % p->group;
        w->q[r] = p->q + ((size_t)i * (size_t)nh + (size_t)h) * (size_t)dk;
        bp_attn_cell_range(p->d, p->cache, p->pos[i], p->len, &w->j0[r], &w->j1[r]);
        if (w->j0[r] < c0) w->j0[r] = c0;
        if (w->j1[r] > c1) w->j1[r] = c1;
        if (w->j0[r] < w->j1[r]) {
            if (w->j0[r] < lo) lo = w->j0[r];
            if (w->j1[r] > hi) hi = w->j1[r];
        }
        w->m[r] = -INFINITY, w->l[r] = 0;
        memset(w->acc[r], 0, sizeof(float) * (size_t)dv);
    }
    const bp_kv_cache *c = p->cache;
    const uint8_t *kbase = p->L->k + (size_t)g * (size_t)p->L->cap * c->row_k;
    const uint8_t *vbase = p->L->v + (size_t)g * (size_t)p->L->cap * c->row_v;
    bool kf32 = c->desc.kind_k == BP_KIND_F32, vf32 = c->desc.kind_v == BP_KIND_F32;
    /* An F16 cache is read in place by kernels that convert as they load. */
    bool kf16 = c->desc.kind_k == BP_KIND_F16 && p->kn->scores_f16, vf16 = c->desc.kind_v == BP_KIND_F16 && p->kn->pv_f16;
    float scale = p->d->scale, cap = p->d->softcap;
    for (int64_t j = lo; j < hi; j += p->kt) {
        int kt = (int)(hi - j < p->kt ? hi - j : p->kt);
        if (kf16)
            p->kn->scores_f16(w->q, R, (const uint16_t *)(const void *)(kbase + (size_t)j * c->row_k), (size_t)dk, kt, dk,
                              w->s);
        else {
            const float *kp = kf32 ? (const float *)(const void *)(kbase + (size_t)j * c->row_k) : w->ktile;
            if (!kf32) p->kn->dequant(c->desc.kind_k, kbase + (size_t)j * c->row_k, c->row_k, w->ktile, dk, kt);
            p->kn->scores(w->q, R, kp, (size_t)dk, kt, dk, w->s);
        }
        for (int r = 0; r < R; r++) {
            float *s = w->s + (size_t)r * kt;
            int a = (int)(w->j0[r] > j ? w->j0[r] - j : 0), b = (int)(w->j1[r] < j + kt ? w->j1[r] - j : kt);
            if (a >= b) {
                memset(s, 0, sizeof(float) * (size_t)kt);
                continue;
            }
            float mt;
            if (cap > 0) {
                mt = -INFINITY;
                for (int u = a; u < b; u++) {
                    float v = softcap(s[u] * scale, cap);
                    s[u] = v;
                    if (v > mt) mt = v;
                }
            } else
                mt = p->kn->scale_max(s + a, b - a, scale);
            for (int u = 0; u < a; u++) s[u] = -INFINITY;
            for (int u = b; u < kt; u++) s[u] = -INFINITY;
            if (mt > w->m[r]) {
                if (w->l[r] > 0) {
                    float corr = expf(w->m[r] - mt);
                    w->l[r] *= corr;
                    p->kn->scale(w->acc[r], dv, corr);
                }
                w->m[r] = mt;
            }
            if (p->exact) {
                float sum = 0;
                for (int u = 0; u < kt; u++) sum += s[u] = expf(s[u] - w->m[r]);
                w->l[r] += sum;
            } else
                w->l[r] += p->kn->exp_sum(s, kt, w->m[r]);
        }
        if (vf16)
            p->kn->pv_f16(w->acc, w->s, R, (const uint16_t *)(const void *)(vbase + (size_t)j * c->row_v), (size_t)dv, kt, dv);
        else {
            const float *vp = vf32 ? (const float *)(const void *)(vbase + (size_t)j * c->row_v) : w->vtile;
            if (!vf32) p->kn->dequant(c->desc.kind_v, vbase + (size_t)j * c->row_v, c->row_v, w->vtile, dv, kt);
            p->kn->pv(w->acc, w->s, R, vp, (size_t)dv, kt, dv);
        }
    }
    for (int r = 0; r < R; r++) {
        if (p->n_kc > 1) {
            float *pr = p->partial + ((size_t)it * (size_t)p->rmax + (size_t)r) * (size_t)(dv + 2);
            pr[0] = w->m[r], pr[1] = w->l[r];
            memcpy(pr + 2, w->acc[r], sizeof(float) * (size_t)dv);
            continue;
        }
        int64_t i = i0 + r / p->group, h = g * p->group + r % p->group;
        float *o = p->out + ((size_t)i * (size_t)nh + (size_t)h) * (size_t)dv;
        float inv = inv_denom(p->d, h, w->m[r], w->l[r]);
        for (int e = 0; e < dv; e++) o[e] = w->acc[r][e] * inv;
    }
}

/* Items from a shared counter (bp_pool_run: the caller alone must be able to finish). */
static void worker(void *ctx, int ith, int nth) {
    (void)nth;
    plan *p = ctx;
    rows w;
    carve(p, p->scratch[ith], &w);
    for (;;) {
        int64_t it = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (it >= p->n_items) return;
        run_item(p, it, &w);
    }
}

/* Chunks of one row combined: out = sum_c e^(m_c - m) acc_c / sum_c e^(m_c - m) l_c. */
static void combine(const plan *p) {
    int dv = p->dv, nh = p->d->n_heads;
    for (int64_t base = 0; base < p->n_items; base += p->n_kc) {
        int64_t g = base / (p->n_qb * p->n_kc), qb = (base % (p->n_qb * p->n_kc)) / p->n_kc;
        int64_t i0 = qb * p->qb, i1 = i0 + p->qb < p->t ? i0 + p->qb : p->t;
        int R = (int)(i1 - i0) * p->group;
        for (int r = 0; r < R; r++) {
            float m = -INFINITY, l = 0;
            for (int64_t c = 0; c < p->n_kc; c++) {
                const float *pr = p->partial + ((size_t)(base + c) * (size_t)p->rmax + (size_t)r) * (size_t)(dv + 2);
                if (pr[1] > 0 && pr[0] > m) m = pr[0];
            }
            int64_t i = i0 + r / p->group, h = g * p->group + r % p->group;
            float *o = p->out + ((size_t)i * (size_t)nh + (size_t)h) * (size_t)dv;
            memset(o, 0, sizeof(float) * (size_t)dv);
            for (int64_t c = 0; c < p->n_kc; c++) {
                const float *pr = p->partial + ((size_t)(base + c) * (size_t)p->rmax + (size_t)r) * (size_t)(dv + 2);
                if (!(pr[1] > 0)) continue;
                float f = expf(pr[0] - m);
                l += f * pr[1];
                for (int e = 0; e < dv; e++) o[e] += f * pr[2 + e];
            }
            float inv = inv_denom(p->d, h, m, l);
            for (int e = 0; e < dv; e++) o[e] *= inv;
        }
    }
}

/* Scratch kept between calls while the pool is held (one holder at a time): a decode step
 * calls attention once per layer, and a fresh allocation of this size each time cost ~10% of a
 * short decode in page faults (perf, 512-token context). A caller that does not hold the pool
 * allocates its own. The buffer stays reachable from here until exit. */
static uint8_t *g_scratch;
static size_t g_scratch_bytes;

static uint8_t *scratch_get(bool held, size_t bytes, bool *own) {
    *own = !held;
    if (!held) return bp_aligned_alloc(64, bytes);
    if (bytes > g_scratch_bytes) {
        /* the old buffer goes first: nothing in it is kept, and holding both would make the
         * peak the two together (more than `backplane plan` counts) */
        bp_free(g_scratch);
        g_scratch = NULL, g_scratch_bytes = 0;
        uint8_t *n = bp_aligned_alloc(64, bytes);
        if (!n) return NULL;
        g_scratch = n, g_scratch_bytes = bytes;
    }
    return g_scratch;
}

/* The call's split: query rows per item, key tiles, key chunks, for t rows over len keys. */
static void geometry(plan *p, int n_heads, int n_kv_heads, int dk, int dv, int64_t len) {
    p->len = len;
    p->dk = dk, p->dv = dv;
    p->group = n_heads / n_kv_heads;
    /* About 16 rows per item: each K/V tile is dequantized once for 16 dot products per key. */
    p->qb = p->group >= 16 ? 1 : 16 / p->group;
    if (p->qb > p->t) p->qb = (int)p->t;
    p->rmax = p->qb * p->group;
    p->n_qb = (p->t + p->qb - 1) / p->qb;
    /* Tiles of K and V together about 32 KiB of f32 (L1-sized on the machines measured). */
    p->kt = TILE_FLOATS / (p->dk + p->dv);
    if (p->kt < 4) p->kt = 4;
    if (p->kt > 128) p->kt = 128;
    int64_t base = (int64_t)n_kv_heads * p->n_qb;
    p->n_kc = 1;
    if (base < TARGET_ITEMS && p->len >= 2 * MIN_CHUNK_KEYS) {
        p->n_kc = (TARGET_ITEMS + base - 1) / base;
        if (p->n_kc > p->len / MIN_CHUNK_KEYS) p->n_kc = p->len / MIN_CHUNK_KEYS;
    }
    p->n_items = base * p->n_kc;
}

static size_t partial_bytes(const plan *p) {
    return p->n_kc > 1 ? sizeof(float) * (size_t)p->n_items * (size_t)p->rmax * (size_t)(p->dv + 2) : 0;
}

/* The scratch one call over nth threads asks for. */
static size_t call_bytes(const plan *p, int nth) {
    const size_t sb = (scratch_bytes(p) + 63) & ~(size_t)63;
    return sb * (size_t)nth + partial_bytes(p) + sizeof(void *) * (size_t)nth;
}

size_t bp_attention_cpu_scratch_bytes(int n_heads, int n_kv_heads, int dk, int dv, int64_t t, int64_t len, int nth) {
    plan p = {.t = t};
    if (n_kv_heads < 1 || n_heads < n_kv_heads || t < 1) return 0;
    geometry(&p, n_heads, n_kv_heads, dk, dv, len);
    return call_bytes(&p, nth);
}

bool bp_attention_cpu_fast_ok(const bp_op_call *c) {
    const bp_op_kern *kn = bp_op_kern_current();
    const bp_kv_cache_desc *cd = &c->u.attn.cache->desc;
    return cd->head_dim_k % kn->vl == 0 && cd->head_dim_v % kn->vl == 0;
}

bp_status bp_attention_cpu(const bp_op_call *c, char *label, size_t label_len) {
    plan p = {.d = c->u.attn.d, .q = c->u.attn.q, .pos = c->u.attn.positions, .cache = c->u.attn.cache,
              .out = c->u.attn.out, .t = c->u.attn.t, .kn = bp_op_kern_current(), .exact = bp_exact_mode()};
    p.L = &p.cache->layers[c->u.attn.layer];
    geometry(&p, p.d->n_heads, p.d->n_kv_heads, p.cache->desc.head_dim_k, p.cache->desc.head_dim_v, p.L->len);
    atomic_init(&p.next, 0);

    bool held = bp_pool_acquire();
    int nth = held ? bp_pool_size() : 1;
    if (bp_op_work_of(c->op, c->kind, &c->shape).flops < 2e5 || p.n_items < 2) nth = 1;
    if (nth > p.n_items) nth = (int)p.n_items;
    bp_status s = BP_OK;
    size_t sb = (scratch_bytes(&p) + 63) & ~(size_t)63;
    size_t pb = partial_bytes(&p);
    bool own;
    uint8_t *mem = scratch_get(held, call_bytes(&p, nth), &own);
    if (mem && pb) p.partial = (float *)(mem + sb * (size_t)nth);
    if (!mem) {
        s = bp_fail(BP_E_NOMEM, "attention: no memory for %d threads' tiles", nth);
        goto out;
    }
    p.scratch = (uint8_t **)(mem + sb * (size_t)nth + pb);
    for (int i = 0; i < nth; i++) p.scratch[i] = mem + sb * (size_t)i;
    if (nth > 1) bp_pool_run(worker, &p, nth);
    else worker(&p, 0, 1);
    if (p.n_kc > 1) combine(&p);
    if (label)
        snprintf(label, label_len, "CPU %s attention K %s V %s%s%s", p.kn->isa, bp_kind_lookup(p.cache->desc.kind_k)->name,
                 bp_kind_lookup(p.cache->desc.kind_v)->name, p.d->sinks ? ", sinks" : "", p.exact ? " (exact)" : "");
out:
    if (held) bp_pool_release();
    if (own) bp_free(mem);
    return s;
}
