/* The forward step on a device (gpu_step.h): placement, the launch list, record and replay.
 *
 *   place     every weight of the program into arenas of at most max_binding bytes (a weight
 *             larger than that in row chunks), the norm gains, biases and RoPE frequencies
 *             into one f32 buffer, the KV cache [layer][kv_head][ctx][head_dim] and the
 *             activations into device buffers, the step input and the logits into host-visible
 *             ones (mapped copies: no queue work to write or read them)
 *   compile   the program into a list of launches with every offset resolved (once per program)
 *   run       write the input, replay the recorded graph (or launch the list where the device
 *             has no graphs), read the logits: one upload, one submission, one download.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "gpu/gpu_step.h"
#include "kinds/kinds_internal.h"

enum { MAX_BUFS = 6, MAX_PIECES = 8, ARGS_BYTES = 64 };

bool bp_gpu_step_kv_kind(bp_kind k) {
    switch (k) {
    case BP_KIND_F32: case BP_KIND_F16: case BP_KIND_BF16: case BP_KIND_Q8_0: case BP_KIND_Q4_0: case BP_KIND_Q4_1:
    case BP_KIND_Q5_0: case BP_KIND_Q5_1: return true;
    default: return false;
    }
}

typedef struct piece { int arena; size_t off; int64_t row0, rows; } piece;
typedef struct placed { const bp_weight *w; int n; bool mm; piece p[MAX_PIECES]; } placed;
typedef struct vecref { const void *host; int64_t n; int kind; uint32_t off; } vecref; /* kind: 0 plain, 1 rope */

typedef struct launch {
    bp_kernel *k;
    bp_launch_dims d;
    void *buf[MAX_BUFS];
    int nbuf;
    unsigned char args[ARGS_BYTES];
    size_t nargs;
} launch;

typedef struct gpu_state {
    bp_step_state base;
    bp_device *dev;
    /* placement */
    void **arenas;
    int n_arenas;
    placed *w;
    int n_w;
    vecref *vecs;
    int n_vecs;
    void *params;             /* the f32 vectors */
    void *act[BP_SB_COUNT];   /* act[BP_SB_LOGITS] unused: the logits live in lg[] */
    void **lg;                /* the logits, lg_rows rows per buffer (a vocabulary row is large) */
    int n_lg;
    int64_t lg_rows;
    void **kv;                /* [layer - layer0][2]: K, V of the layers the program holds */
    int n_layers, layer0;
    int32_t kv_heads, head_dim;
    int64_t cap;
    bp_kind kv_kind;
    size_t kv_row;            /* bytes of one token of one head */
    size_t kv_bytes;          /* one layer's K (or V) cache */
    size_t params_floats;     /* the vectors' table */
    void *io;
    int64_t n_batch;
    size_t io_bytes;
    /* the compiled program and its recording, per prog slot (decode, prefill) */
    struct {
        const bp_step_prog *prog;
        uint64_t gen;
        launch *l;
        int n;
        int *node_end;        /* node i's launches end at node_end[i] (a tapped step runs them so) */
        bp_graph *graph;
        bp_graph *old; /* the graph of the slot's previous program, for the next capture to
                          update in place (a prefill of another length: same kernels) */
    } c[2];
    size_t placed_bytes;
    bp_event *weights_up;     /* recorded on b->upload after the last weight copy; the step's
                                 stream waits on it once, before its first launch */
} gpu_state;

static void state_free(bp_step_state *self) {
    gpu_state *s = (gpu_state *)self;
    if (!s) return;
    for (int i = 0; i < 2; i++) {
        if (s->c[i].graph) bp_dev_graph_destroy(s->dev, s->c[i].graph);
        if (s->c[i].old) bp_dev_graph_destroy(s->dev, s->c[i].old);
        bp_free(s->c[i].l);
        bp_free(s->c[i].node_end);
    }
    for (int i = 0; i < s->n_arenas; i++) bp_dev_free(s->dev, s->arenas[i]);
    for (int i = 0; i < BP_SB_COUNT; i++) bp_dev_free(s->dev, s->act[i]);
    for (int i = 0; i < s->n_lg; i++) bp_dev_free(s->dev, s->lg[i]);
    bp_free(s->lg);
    for (int i = 0; s->kv && i < 2 * s->n_layers; i++) bp_dev_free(s->dev, s->kv[i]);
    bp_dev_free(s->dev, s->params);
    bp_dev_free(s->dev, s->io);
    if (s->weights_up) bp_dev_event_destroy(s->dev, s->weights_up);
    bp_free(s->arenas);
    bp_free(s->w);
    bp_free(s->vecs);
    bp_free(s->kv);
    bp_free(s);
}

/* ---- placement ------------------------------------------------------------------------------ */

static const placed *find_w(const gpu_state *s, const bp_weight *w) {
    for (int i = 0; i < s->n_w; i++)
        if (s->w[i].w == w) return &s->w[i];
    return NULL;
}

static int add_vec(gpu_state *s, int *cap, const void *host, int64_t n, int kind) {
    for (int i = 0; i < s->n_vecs; i++)
        if (s->vecs[i].host == host && s->vecs[i].kind == kind && s->vecs[i].n == n) return i;
    if (s->n_vecs == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        vecref *v = bp_realloc(s->vecs, (size_t)nc * sizeof *v);
        if (!v) return -1;
        s->vecs = v, *cap = nc;
    }
    s->vecs[s->n_vecs] = (vecref){host, n, kind, 0};
    return s->n_vecs++;
}

/* Two RoPE nodes turn by the same frequencies (one table serves both). */
static bool same_rope(const bp_step_node *a, const bp_step_node *b) {
    return a->rope.freq_base == b->rope.freq_base && a->rope.freq_scale == b->rope.freq_scale &&
           a->rope.n_rot == b->rope.n_rot && a->rope_factors == b->rope_factors;
}

/* A RoPE node's frequencies: freq_scale * base^(-2k/n_rot) / factor_k, in double, per pair. */
static void rope_freqs(const bp_step_node *nd, float *out) {
    const int half = nd->rope.n_rot / 2;
    for (int k = 0; k < half; k++) {
        double f = (double)nd->rope.freq_scale * pow((double)nd->rope.freq_base, -2.0 * k / (double)nd->rope.n_rot);
        if (nd->rope_factors) f /= nd->rope_factors[k];
        out[k] = (float)f;
    }
}

static bp_status alloc_zero(bp_device *dev, size_t bytes, bool host, void **out) {
    bp_status st = host ? bp_dev_alloc_managed(dev, bytes, out) : bp_dev_alloc(dev, bytes, out);
    if (!st) st = bp_dev_memset(dev, *out, 0, 0, bytes);
    return st;
}

/* The logits buffers for `want` rows (at least one): only the rows that want logits, not
 * n_batch (Gemma 3 270M at n_batch 512: 512 MiB of a 262144-entry vocabulary for one row used);
 * a later program wanting more rows grows them (grow_logits). lg_rows per buffer, at most
 * one binding's. */
static bp_status logits_layout(const bp_gpu_backend *b, gpu_state *s, const bp_step_prog *p, int64_t want) {
    if (want < 1) want = 1;
    const size_t lrow = (size_t)p->width[BP_SB_LOGITS] * sizeof(float);
    const int64_t fit = (int64_t)((b->max_binding - 4) / lrow);
    s->lg_rows = fit < want ? fit : want;
    if (b->logits_rows > 0 && b->logits_rows < s->lg_rows) s->lg_rows = b->logits_rows;
    if (s->lg_rows < 1) return bp_fail(BP_E_SHAPE, "%s step: one row of logits exceeds a binding", b->display);
    s->n_lg = (int)((want + s->lg_rows - 1) / s->lg_rows);
    return BP_OK;
}

/* Where p's weights, vectors, KV cache and buffers go, host-side only (no device call): the
 * pieces of every weight in arenas of at most max_binding bytes, *fill per arena (bp_calloc'd,
 * the caller frees it), the vector table, the cache and logits geometry. place() allocates
 * exactly this; bp_gpu_step_bytes sums it, so the plan and the placement cannot differ. */
static bp_status layout(const bp_gpu_backend *b, gpu_state *s, const bp_step_prog *p, size_t **fill_out) {
    bp_status st = BP_OK;
    *fill_out = NULL;
    /* weights: each node's, once; arenas filled front to back */
    const bp_weight *ws[1024];
    int nws = 0, it = 0;
    for (const bp_weight *w; nws < 1024 && (w = bp_step_next_weight(p, &it));) {
        int k = 0;
        while (k < nws && ws[k] != w) k++;
        if (k == nws) ws[nws++] = w;
    }
    if (nws == 1024) return bp_fail(BP_E_SHAPE, "%s step: more than 1024 weights", b->display);
    s->w = bp_calloc((size_t)nws, sizeof *s->w);
    size_t *fill = bp_calloc((size_t)nws * MAX_PIECES + 1, sizeof *fill); /* bytes used per arena */
    s->arenas = bp_calloc((size_t)nws * MAX_PIECES + 1, sizeof *s->arenas);
    if (!s->w || !fill || !s->arenas) {
        bp_free(fill);
        return bp_fail(BP_E_NOMEM, "%s step: out of host memory", b->display);
    }
    *fill_out = fill;
    const size_t range = b->max_binding;
    /* arena i gets pieces until the next would pass range */
    int cur = -1;
    for (int i = 0; i < nws && !st; i++) {
        const bp_weight *w = ws[i];
        placed *pw = &s->w[s->n_w++];
        pw->w = w;
        if (w->row_bytes + 260 > range)
            st = bp_fail(BP_E_SHAPE, "%s step: one row (%zu bytes) exceeds a binding's %zu bytes", b->display,
                         w->row_bytes, range);
        int64_t per = st ? 1 : (int64_t)((range - 260) / w->row_bytes);
        for (int64_t r0 = 0; r0 < w->rows && !st; r0 += per) {
            int64_t rows = w->rows - r0 < per ? w->rows - r0 : per;
            size_t bytes = (size_t)rows * w->row_bytes;
            if (pw->n == MAX_PIECES) {
                st = bp_fail(BP_E_SHAPE, "%s step: a weight needs more than %d bindings", b->display, MAX_PIECES);
                break;
            }
            if (cur < 0 || fill[cur] + bytes + 4 > range) cur = s->n_arenas++;
            pw->p[pw->n++] = (piece){cur, fill[cur], r0, rows};
            fill[cur] = (fill[cur] + bytes + 4 + 255) & ~(size_t)255;
        }
    }
    if (st) return st;
    /* vectors: gains, biases, RoPE frequencies */
    int vcap = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const bp_step_node *nd = &p->nodes[i];
        int r = 0;
        if ((nd->kind == BP_STEP_RMS_NORM || nd->kind == BP_STEP_ADD_VEC) && nd->vec) r = add_vec(s, &vcap, nd->vec, nd->n, 0);
        if (nd->kind == BP_STEP_ROPE) {
            /* one table per (base, scale, factors): keyed by the node's own desc */
            r = -2;
            for (int v = 0; v < s->n_vecs; v++)
                if (s->vecs[v].kind == 1 && same_rope(s->vecs[v].host, nd)) r = v;
            if (r == -2) r = add_vec(s, &vcap, nd, nd->rope.n_rot / 2, 1);
        }
        if (r == -1) return bp_fail(BP_E_NOMEM, "%s step: out of host memory", b->display);
    }
    size_t total = 0;
    for (int v = 0; v < s->n_vecs; v++) s->vecs[v].off = (uint32_t)total, total += (size_t)s->vecs[v].n;
    s->params_floats = total;
    /* KV cache */
    const bp_kind_traits *kt = bp_kind_traits_of(p->kv_kind);
    s->n_layers = p->n_layers, s->layer0 = p->layer0, s->kv_heads = p->n_kv_heads, s->head_dim = p->head_dim, s->cap = p->ctx;
    s->kv_kind = p->kv_kind;
    s->kv_row = (size_t)p->head_dim / kt->info.block_elems * kt->info.block_bytes;
    s->kv_bytes = s->kv_row * (size_t)p->n_kv_heads * (size_t)p->ctx;
    if (s->kv_bytes + 4 > range)
        return bp_fail(BP_E_SHAPE, "%s step: one layer's K cache (%zu bytes) exceeds a binding's %zu bytes", b->display,
                       s->kv_bytes, range);
    /* activations, input, logits (logits and input host-visible where the device has it) */
    s->n_batch = p->n_batch;
    st = logits_layout(b, s, p, p->n_out);
    if (st) return st;
    s->io_bytes = (size_t)(2 + 2 * p->n_batch) * sizeof(int32_t);
    return BP_OK;
}

/* Bytes of activation buffer i (not the logits) and of one logits buffer. */
static size_t act_bytes(const bp_step_prog *p, int i) { return (size_t)p->n_batch * (size_t)p->width[i] * sizeof(float) + 4; }
static size_t lg_bytes(const gpu_state *s, const bp_step_prog *p) {
    return (size_t)s->lg_rows * (size_t)p->width[BP_SB_LOGITS] * sizeof(float) + 4;
}


static bp_status alloc_logits(const bp_gpu_backend *b, gpu_state *s, const bp_step_prog *p);

/* The weights, vectors, KV cache and buffers of p on the device, as layout() says. */
static bp_status place(const bp_gpu_backend *b, gpu_state *s, const bp_step_prog *p) {
    bp_device *dev = s->dev;
    size_t *fill = NULL;
    bp_status st = layout(b, s, p, &fill);
    for (int a = 0; a < s->n_arenas && !st; a++) {
        st = bp_dev_alloc(dev, fill[a], &s->arenas[a]);
        if (!st) s->placed_bytes += fill[a];
    }
    bp_free(fill);
    /* With an upload stream the copies are queued there (the sources are the model's mapping,
     * alive as long as the model) and the host goes on placing the rest while they run; the
     * step's stream waits for them on an event, not the host. */
    bp_stream *up = b->upload;
    for (int i = 0; i < s->n_w && !st; i++) {
        const placed *pw = &s->w[i];
        for (int j = 0; j < pw->n && !st; j++) {
            const piece *pc = &pw->p[j];
            size_t bytes = (size_t)pc->rows * pw->w->row_bytes;
            const uint8_t *src = pw->w->data + (size_t)pc->row0 * pw->w->row_bytes;
            st = up ? bp_dev_h2d_on(dev, up, s->arenas[pc->arena], pc->off, src, bytes)
                    : bp_dev_h2d(dev, s->arenas[pc->arena], pc->off, src, bytes);
            if (!st) st = up ? bp_dev_memset_on(dev, up, s->arenas[pc->arena], pc->off + bytes, 0, 4)
                             : bp_dev_memset(dev, s->arenas[pc->arena], pc->off + bytes, 0, 4);
        }
    }
    if (!st && up) st = bp_dev_event_create(dev, &s->weights_up);
    if (!st && up) st = bp_dev_event_record(dev, s->weights_up, up);
    if (st) return st;
    const size_t total = s->params_floats;
    float *host = bp_malloc((total ? total : 1) * sizeof(float));
    if (!host) return bp_fail(BP_E_NOMEM, "%s step: out of host memory", b->display);
    for (int v = 0; v < s->n_vecs; v++) {
        if (s->vecs[v].kind == 1) rope_freqs(s->vecs[v].host, host + s->vecs[v].off);
        else memcpy(host + s->vecs[v].off, s->vecs[v].host, (size_t)s->vecs[v].n * sizeof(float));
    }
    st = bp_dev_alloc(dev, (total ? total : 1) * sizeof(float), &s->params);
    if (!st) st = bp_dev_h2d(dev, s->params, 0, host, total * sizeof(float));
    bp_free(host);
    if (st) return st;
    s->kv = bp_calloc((size_t)p->n_layers * 2, sizeof *s->kv);
    if (!s->kv) return bp_fail(BP_E_NOMEM, "%s step: out of host memory", b->display);
    for (int i = 0; i < 2 * p->n_layers && !st; i++) st = alloc_zero(dev, s->kv_bytes + 4, false, &s->kv[i]);
    s->placed_bytes += 2 * (size_t)p->n_layers * s->kv_bytes;
    for (int i = 0; i < BP_SB_COUNT && !st; i++)
        if (i != BP_SB_LOGITS) st = alloc_zero(dev, act_bytes(p, i), false, &s->act[i]);
    if (!st) st = alloc_logits(b, s, p);
    if (!st) st = alloc_zero(dev, s->io_bytes, true, &s->io);
    return st;
}

/* The logits buffers as logits_layout said (host-visible). */
static bp_status alloc_logits(const bp_gpu_backend *b, gpu_state *s, const bp_step_prog *p) {
    if (!(s->lg = bp_calloc((size_t)s->n_lg, sizeof *s->lg))) return bp_fail(BP_E_NOMEM, "%s step: out of host memory", b->display);
    bp_status st = BP_OK;
    for (int i = 0; i < s->n_lg && !st; i++) st = alloc_zero(s->dev, lg_bytes(s, p), true, &s->lg[i]);
    return st;
}

/* A program wanting more logit rows than the placement holds (a perplexity eval after a
 * generation's placement): new logits buffers, and every recording made over the old ones
 * dropped, so both slots compile again. */
static bp_status grow_logits(const bp_gpu_backend *b, gpu_state *s, const bp_step_prog *p) {
    for (int i = 0; i < s->n_lg; i++) bp_dev_free(s->dev, s->lg[i]);
    bp_free(s->lg);
    s->lg = NULL, s->n_lg = 0;
    for (int i = 0; i < 2; i++) {
        if (s->c[i].graph) bp_dev_graph_destroy(s->dev, s->c[i].graph);
        if (s->c[i].old) bp_dev_graph_destroy(s->dev, s->c[i].old);
        s->c[i].graph = s->c[i].old = NULL, s->c[i].prog = NULL;
    }
    bp_status st = logits_layout(b, s, p, p->n_out);
    return st ? st : alloc_logits(b, s, p);
}

/* ---- compile: the program as launches -------------------------------------------------------- */

typedef struct builder {
    const bp_gpu_backend *b;
    gpu_state *s;
    launch *l;
    int n, cap;
    bool dry; /* count the launches only (bp_gpu_step_bytes: no device, nothing placed) */
} builder;

static bp_status emit(builder *B, const char *kname, uint32_t gx, uint32_t gy, void *const *bufs, int nbuf,
                      const void *args, size_t nargs) {
    if (B->dry) return B->n++, BP_OK;
    if (B->n == B->cap) {
        int nc = B->cap ? 2 * B->cap : 256;
        launch *l = bp_realloc(B->l, (size_t)nc * sizeof *l);
        if (!l) return bp_fail(BP_E_NOMEM, "%s step: out of host memory", B->b->display);
        B->l = l, B->cap = nc;
    }
    launch *L = &B->l[B->n];
    memset(L, 0, sizeof *L);
    char full[64];
    snprintf(full, sizeof full, "%s%s", B->b->kprefix ? B->b->kprefix : "", kname);
    bp_status st = bp_dev_kernel(B->s->dev, full, &L->k);
    if (st) return bp_fail(st, "%s step: kernel %s: %s", B->b->display, full, bp_last_error());
    /* a grid wider than 65535 workgroups folds into y */
    if (gx > 65535) gy = (gx + 65534) / 65535 * (gy ? gy : 1), gx = 65535;
    L->d = (bp_launch_dims){{gx ? gx : 1, gy ? gy : 1, 1}, {64, 1, 1}, 0};
    for (int i = 0; i < nbuf; i++) L->buf[i] = bufs[i];
    L->nbuf = nbuf;
    memcpy(L->args, args, nargs);
    L->nargs = nargs;
    B->n++;
    return BP_OK;
}

static const char *kind_name(bp_kind k) { return bp_kind_traits_of(k)->info.name; }
/* A logits or KV buffer; NULL in a dry run (nothing placed) */
static void *lg_at(const gpu_state *s, int64_t i) { return s->lg ? s->lg[i] : NULL; }
static void *kv_at(const gpu_state *s, int i) { return s->kv ? s->kv[i] : NULL; }

static uint32_t off_of(const gpu_state *s, const void *host, int kind) {
    for (int v = 0; v < s->n_vecs; v++)
        if (s->vecs[v].host == host && s->vecs[v].kind == kind) return s->vecs[v].off;
    return 0xFFFFFFFFu;
}

static uint32_t rope_off(const gpu_state *s, const bp_step_node *nd) {
    for (int v = 0; v < s->n_vecs; v++)
        if (s->vecs[v].kind == 1 && same_rope(s->vecs[v].host, nd)) return s->vecs[v].off;
    return 0;
}

/* W (pieces) times src rows [r0, r0 + rows) into dst's rows (logits: from row 0). */
static bp_status emit_mm(builder *B, const bp_step_prog *p, const bp_step_node *nd, int j) {
    gpu_state *s = B->s;
    const bp_weight *w = nd->job[j].w;
    const bp_step_buf d = nd->job[j].dst;
    const placed *pw = find_w(s, w);
    const bp_kind_traits *tr = w->traits;
    const uint32_t spb = tr->info.block_elems == 1 ? 1 : tr->info.block_elems / 32;
    /* The logits start at row 0 of their buffers, lg_rows a buffer: one launch per buffer. */
    const bool lg = d == BP_SB_LOGITS;
    const int64_t per = lg ? s->lg_rows : nd->rows;
    for (int64_t t0 = 0; t0 < nd->rows; t0 += per) {
        const int64_t tn = nd->rows - t0 < per ? nd->rows - t0 : per;
        const int64_t dr0 = lg ? 0 : nd->r0;
        for (int i = 0; i < pw->n; i++) {
            const piece *pc = &pw->p[i];
            bp_gpu_mm_args a = {.rows = (uint32_t)pc->rows, .cols = (uint32_t)w->cols, .row_bytes = (uint32_t)w->row_bytes,
                                .nsub = (uint32_t)(w->cols / tr->info.block_elems) * spb, .t = (uint32_t)tn,
                                .y_row0 = (uint32_t)(dr0 * p->width[d] + pc->row0), .y_stride = (uint32_t)p->width[d],
                                .x_off = (uint32_t)((nd->r0 + t0) * p->width[nd->src]), .w_off = (uint32_t)pc->off};
            void *bufs[4] = {s->arenas[pc->arena], s->act[nd->src], lg ? lg_at(s, t0 / per) : s->act[d], B->b->extra};
            const bool g = tn > 1;
            char kn[48];
            snprintf(kn, sizeof kn, "%s_%s", g ? "gemm" : "matvec", kind_name(w->kind));
            const uint32_t mv = B->b->mv_rows ? B->b->mv_rows : 1;
            const uint32_t tile = B->b->mm_tile;
            uint32_t gx = (uint32_t)(g ? (pc->rows + tile - 1) / tile : (pc->rows + mv - 1) / mv);
            uint32_t gy = g ? (uint32_t)((tn + B->b->mm_tile - 1) / B->b->mm_tile) : 1;
            bp_status st = emit(B, kn, gx, gy, bufs, B->b->extra ? 4 : 3, &a, sizeof a);
            if (st) return st;
        }
    }
    return BP_OK;
}

static bp_status emit_node(builder *B, const bp_step_prog *p, const bp_step_node *nd) {
    gpu_state *s = B->s;
    const uint32_t n = (uint32_t)nd->n, rows = (uint32_t)nd->rows, base = (uint32_t)(nd->r0 * nd->n);
    const uint32_t pos_idx = 2 + 2 * (uint32_t)nd->r0;
    bp_status st = BP_OK;
    switch (nd->kind) {
    case BP_STEP_EMBED: {
        const placed *pw = find_w(s, nd->w);
        const bp_kind_traits *tr = nd->w->traits;
        const uint32_t spb = tr->info.block_elems == 1 ? 1 : tr->info.block_elems / 32;
        char kname[48];
        snprintf(kname, sizeof kname, "embed_%s", kind_name(nd->w->kind));
        for (int i = 0; i < pw->n && !st; i++) {
            const piece *pc = &pw->p[i];
            bp_gpu_mm_args a = {.rows = (uint32_t)pc->rows, .cols = n, .row_bytes = (uint32_t)nd->w->row_bytes,
                                .nsub = (uint32_t)(nd->w->cols / tr->info.block_elems) * spb, .t = rows,
                                .y_row0 = (uint32_t)pc->row0, .y_stride = base,
                                  .x_off = 3, .w_off = (uint32_t)pc->off, .fscale = nd->f};
            void *bufs[4] = {s->arenas[pc->arena], s->io, s->act[nd->dst], B->b->extra};
            st = emit(B, kname, rows, 1, bufs, B->b->extra ? 4 : 3, &a, sizeof a);
        }
        return st;
    }
    case BP_STEP_RMS_NORM: {
        bp_gpu_norm_args a = {rows, n, base, base, nd->vec ? off_of(s, nd->vec, 0) : 0xFFFFFFFFu, nd->f};
        void *bufs[3] = {s->act[nd->src], s->params, s->act[nd->dst]};
        return emit(B, "rms_norm", rows, 1, bufs, 3, &a, sizeof a);
    }
    case BP_STEP_MATMUL:
        for (int j = 0; j < nd->n_jobs && !st; j++) st = emit_mm(B, p, nd, j);
        return st;
    case BP_STEP_SOFTCAP:
        if (nd->dst == BP_SB_LOGITS) { /* per logits buffer */
            for (int64_t t0 = 0; t0 < nd->rows && !st; t0 += s->lg_rows) {
                const uint32_t count = (uint32_t)((nd->rows - t0 < s->lg_rows ? nd->rows - t0 : s->lg_rows) * nd->n);
                bp_gpu_elt_args a = {count, 2u, 0, 0, n, nd->f};
                void *bufs[2] = {lg_at(s, t0 / s->lg_rows), s->params};
                st = emit(B, "eltwise", (count + 255) / 256, 1, bufs, 2, &a, sizeof a);
            }
            return st;
        }
        /* fall through */
    case BP_STEP_ADD_VEC:
    case BP_STEP_ADD: {
        const uint32_t count = rows * n;
        bp_gpu_elt_args a = {count, nd->kind == BP_STEP_ADD ? 0u : nd->kind == BP_STEP_ADD_VEC ? 1u : 2u,
                             nd->dst == BP_SB_LOGITS ? 0 : base,
                             nd->kind == BP_STEP_ADD ? base : nd->kind == BP_STEP_ADD_VEC ? off_of(s, nd->vec, 0) : 0, n,
                             nd->f};
        void *bufs[2] = {s->act[nd->dst], nd->kind == BP_STEP_ADD ? s->act[nd->src] : s->params};
        return emit(B, "eltwise", (count + 255) / 256, 1, bufs, 2, &a, sizeof a);
    }
    case BP_STEP_GLU: {
        const uint32_t count = rows * n;
        bp_gpu_glu_args a = {count, (uint32_t)nd->act, base, base};
        void *bufs[2] = {s->act[BP_SB_GATE], s->act[BP_SB_UP]};
        return emit(B, "glu", (count + 255) / 256, 1, bufs, 2, &a, sizeof a);
    }
    case BP_STEP_ROPE: {
        const uint32_t total = rows * (uint32_t)nd->rope.n_heads * (uint32_t)(nd->rope.n_rot / 2);
        bp_gpu_rope_args a = {rows, (uint32_t)nd->rope.n_heads, (uint32_t)nd->rope.head_dim, (uint32_t)nd->rope.n_rot,
                              nd->rope.layout == BP_ROPE_NEOX, base, pos_idx, rope_off(s, nd)};
        void *bufs[3] = {s->act[nd->dst], s->io, s->params};
        return emit(B, "rope", (total + 63) / 64, 1, bufs, 3, &a, sizeof a);
    }
    case BP_STEP_KV_APPEND: {
        char kname[48];
        snprintf(kname, sizeof kname, "kv_append_%s", kind_name(s->kv_kind));
        const bool blocks = bp_kind_traits_of(s->kv_kind)->info.block_elems > 1; /* a thread per row */
        const uint32_t total = rows * (uint32_t)s->kv_heads * (uint32_t)(blocks ? 1 : s->head_dim / 2);
        for (int v = 0; v < 2 && !st; v++) {
            bp_gpu_kv_args a = {rows, (uint32_t)s->kv_heads, (uint32_t)s->head_dim, (uint32_t)s->cap,
                                (uint32_t)(nd->r0 * p->width[v ? BP_SB_V : BP_SB_K]), (uint32_t)s->kv_row};
            void *bufs[3] = {s->act[v ? BP_SB_V : BP_SB_K], kv_at(s, 2 * (nd->layer - s->layer0) + v), s->io};
            st = emit(B, kname, (total + 63) / 64, 1, bufs, 3, &a, sizeof a);
        }
        return st;
    }
    case BP_STEP_ATTENTION: {
        char kname[48];
        snprintf(kname, sizeof kname, "attention_%s", kind_name(s->kv_kind));
        bp_gpu_attn_args a = {rows, (uint32_t)nd->attn.n_heads, (uint32_t)nd->attn.n_kv_heads, (uint32_t)s->head_dim,
                              (uint32_t)s->cap, (uint32_t)(nd->r0 * p->width[BP_SB_Q]), base, pos_idx, nd->attn.scale,
                              nd->attn.softcap, (uint32_t)nd->attn.window, (uint32_t)s->kv_row};
        const int kl = 2 * (nd->layer - s->layer0);
        void *bufs[5] = {s->act[BP_SB_Q], kv_at(s, kl), kv_at(s, kl + 1), s->act[nd->dst], s->io};
        return emit(B, kname, (uint32_t)nd->attn.n_heads, rows, bufs, 5, &a, sizeof a);
    }
    case BP_STEP_MOE: /* the seam never gives a device a step with experts (src/seam/route.c) */
        return bp_fail(BP_E_UNSUPPORTED, "%s step: routed experts are not recorded into a device step", B->b->display);
    case BP_STEP_KIND_COUNT: break;
    }
    return bp_fail(BP_E_INVAL, "%s step: node kind %d unknown", B->b->display, (int)nd->kind);
}

/* The host tables a placement and its two recordings take (bp_malloc'd, so `plan` can add them
 * to the heap), an upper bound: the state, the placement records, the arenas' fill table, the
 * vector table and its staging copy, the launch lists (grown by doubling from 256) and their
 * node ends of both slots, the step input's staging. */
static size_t host_tables(const gpu_state *s, const bp_step_prog *p, int n_launch) {
    size_t cap = 256, vcap = 64;
    while ((int)cap < n_launch) cap *= 2;
    while ((int)vcap < s->n_vecs) vcap *= 2;
    const size_t arenas = (size_t)s->n_w * MAX_PIECES + 1;
    return sizeof(gpu_state) + (size_t)s->n_w * sizeof(placed) + arenas * (sizeof(size_t) + sizeof(void *)) +
           vcap * sizeof(vecref) + (s->params_floats + 1) * sizeof(float) + 2 * (size_t)p->n_layers * sizeof(void *) +
           (size_t)s->n_lg * sizeof(void *) + 2 * (cap * sizeof(launch) + (size_t)p->n_nodes * sizeof(int)) +
           s->io_bytes + 16 * 32; /* the C library's per-block rounding, 32 bytes for each of them */
}

bp_status bp_gpu_step_bytes(const bp_gpu_backend *b, const bp_step_prog *p, bp_step_bytes *out) {
    memset(out, 0, sizeof *out);
    gpu_state tmp = {0};
    size_t *fill = NULL;
    bp_status st = layout(b, &tmp, p, &fill);
    if (!st) {
        for (int a = 0; a < tmp.n_arenas; a++) out->weights += fill[a];
        out->params = (tmp.params_floats ? tmp.params_floats : 1) * sizeof(float);
        out->kv = 2 * (size_t)p->n_layers * (tmp.kv_bytes + 4);
        for (int i = 0; i < BP_SB_COUNT; i++)
            if (i != BP_SB_LOGITS) out->activations += act_bytes(p, i);
        out->logits = (size_t)tmp.n_lg * lg_bytes(&tmp, p);
        out->io = tmp.io_bytes;
        out->n_arenas = tmp.n_arenas;
        /* the launches, counted by the compiler itself run dry (no kernel looked up) */
        builder B = {b, &tmp, NULL, 0, 0, true};
        for (int i = 0; i < p->n_nodes && !st; i++) st = emit_node(&B, p, &p->nodes[i]);
        out->host = host_tables(&tmp, p, B.n);
    }
    bp_free(fill);
    bp_free(tmp.w);
    bp_free(tmp.arenas);
    bp_free(tmp.vecs);
    return st;
}
bool bp_gpu_step_has_kernels(bp_kind kv, const char *prefix, bool (*has)(const char *name)) {
    if (!bp_gpu_step_kv_kind(kv)) return false;
    static const char *const fixed[] = {"kv_append_", "attention_", "rms_norm", "rope", "glu", "eltwise"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s%s", prefix ? prefix : "", fixed[i], i < 2 ? kind_name(kv) : "");
        if (!has(name)) return false;
    }
    return true;
}

bp_status bp_gpu_step_check_weights(const bp_gpu_backend *b, const bp_step_prog *p, bool (*has)(bp_kind)) {
    bp_kind wk[32];
    const int nw = bp_step_weight_kinds(p, wk, 32);
    for (int i = 0; i < nw; i++)
        if (!has(wk[i])) return bp_fail(BP_E_UNSUPPORTED, "%s step: no kernels for %s weights", b->display, kind_name(wk[i]));
    return BP_OK;
}

/* Shapes the kernels take: checked before anything is placed. */
static bp_status check(const bp_gpu_backend *b, const bp_step_prog *p) {
    if (!bp_gpu_step_kv_kind(p->kv_kind))
        return bp_fail(BP_E_KIND, "%s step: no kernels for a %s KV cache (F32, F16)", b->display, kind_name(p->kv_kind));
    if (p->head_dim > 256 || p->head_dim % 2)
        return bp_fail(BP_E_SHAPE, "%s step: head_dim %d (the attention kernel takes even head dims up to 256)",
                       b->display, (int)p->head_dim);
    const bp_kind_traits *kt = bp_kind_traits_of(p->kv_kind);
    if (kt->info.block_elems > 1 && ((size_t)p->head_dim / kt->info.block_elems * kt->info.block_bytes) % 4)
        return bp_fail(BP_E_SHAPE, "%s step: a %s cache row of head_dim %d is not whole 32-bit words", b->display,
                       kind_name(p->kv_kind), (int)p->head_dim);
    for (int i = 0; i < BP_SB_COUNT; i++)
        if (i != BP_SB_LOGITS && p->t * p->width[i] * 4 > (int64_t)b->max_binding)
            return bp_fail(BP_E_SHAPE, "%s step: %lld rows of buffer %d exceed a binding", b->display, (long long)p->t, i);
    return BP_OK;
}

static bp_status compile(const bp_gpu_backend *b, gpu_state *s, const bp_step_prog *p, int slot) {
    bp_graph *old = s->c[slot].graph ? s->c[slot].graph : s->c[slot].old;
    if (s->c[slot].old && s->c[slot].graph) bp_dev_graph_destroy(s->dev, s->c[slot].old);
    bp_free(s->c[slot].l);
    bp_free(s->c[slot].node_end);
    memset(&s->c[slot], 0, sizeof s->c[slot]);
    s->c[slot].old = old;
    builder B = {b, s, NULL, 0, 0, false};
    int *node_end = bp_malloc((size_t)(p->n_nodes ? p->n_nodes : 1) * sizeof *node_end);
    bp_status st = node_end ? BP_OK : bp_fail(BP_E_NOMEM, "%s step: out of host memory", b->display);
    for (int i = 0; i < p->n_nodes && !st; i++) {
        st = emit_node(&B, p, &p->nodes[i]);
        node_end[i] = B.n;
        for (int j = 0; p->nodes[i].kind == BP_STEP_MATMUL && j < p->nodes[i].n_jobs; j++)
            ((placed *)find_w(s, p->nodes[i].job[j].w))->mm = true;
    }
    if (st) {
        bp_free(B.l);
        bp_free(node_end);
        return st;
    }
    s->c[slot].l = B.l, s->c[slot].n = B.n, s->c[slot].prog = p, s->c[slot].gen = p->gen;
    s->c[slot].node_end = node_end;
    return BP_OK;
}

/* Launches [from, to) of the slot's list. */
static bp_status launch_range(gpu_state *s, int slot, bp_stream *stream, int from, int to) {
    bp_status st = BP_OK;
    for (int i = from; i < to && !st; i++) {
        const launch *L = &s->c[slot].l[i];
        bp_kernel_arg a[MAX_BUFS + 1];
        for (int j = 0; j < L->nbuf; j++) a[j] = bp_arg_buf(L->buf[j], 0);
        a[L->nbuf] = bp_arg_bytes(L->args, L->nargs);
        st = bp_dev_launch(s->dev, stream, L->k, &L->d, a, L->nbuf + 1);
    }
    return st;
}

static bp_status launch_all(gpu_state *s, int slot, bp_stream *stream) { return launch_range(s, slot, stream, 0, s->c[slot].n); }

/* Rows [r0, r0 + rows) of buffer d (rows of width floats) into the host's copy of it; the
 * logits from their buffers, row 0 first. */
static bp_status read_rows(gpu_state *s, const bp_step_prog *p, bp_step_io *io, bp_step_buf d, int64_t r0, int64_t rows,
                           int64_t width) {
    if (d != BP_SB_LOGITS)
        return bp_dev_d2h(s->dev, io->host[d] + r0 * width, s->act[d], (size_t)(r0 * width) * sizeof(float),
                          (size_t)(rows * width) * sizeof(float));
    const size_t lrow = (size_t)p->width[BP_SB_LOGITS] * sizeof(float);
    bp_status st = BP_OK;
    for (int64_t q = 0; q < rows && !st; q += s->lg_rows) {
        const int64_t n = rows - q < s->lg_rows ? rows - q : s->lg_rows;
        st = bp_dev_d2h(s->dev, (char *)io->logits + (size_t)q * lrow, s->lg[q / s->lg_rows], 0, (size_t)n * lrow);
    }
    return st;
}

/* The step node by node for a tap (bp_step_tap_fn): each node's launches, a wait, its output
 * copied into io->host, the tap. Slow on purpose; a step without a tap never comes here. */
static bp_status run_tapped(gpu_state *s, int slot, bp_stream *q, const bp_step_prog *p, bp_step_io *io) {
    bp_status st = BP_OK;
    for (int i = 0, from = 0; i < p->n_nodes && !st; from = s->c[slot].node_end[i++]) {
        const bp_step_node *nd = &p->nodes[i];
        st = launch_range(s, slot, q, from, s->c[slot].node_end[i]);
        if (!st) st = q ? bp_dev_stream_sync(s->dev, q) : bp_dev_stream_sync(s->dev, NULL);
        if (nd->kind == BP_STEP_MATMUL)
            for (int j = 0; j < nd->n_jobs && !st; j++) {
                const bp_step_buf d = nd->job[j].dst;
                st = read_rows(s, p, io, d, d == BP_SB_LOGITS ? 0 : nd->r0, nd->rows, p->width[d]);
            }
        else if (nd->kind != BP_STEP_KV_APPEND && !st)
            st = read_rows(s, p, io, nd->dst, nd->dst == BP_SB_LOGITS ? 0 : nd->r0, nd->rows, nd->n);
        if (!st) io->tap(io->tap_user, p, i, io);
    }
    return st;
}

/* ---- taking over and handing back the KV cache ------------------------------------------------ */

static bp_status kv_move(gpu_state *s, const bp_step_kv_host *kv, int64_t from, int64_t to, bool up) {
    if (to <= from) return BP_OK;
    const size_t n = (size_t)(to - from) * s->kv_row;
    void *tmp = bp_malloc(n);
    if (!tmp) return bp_fail(BP_E_NOMEM, "step: no host memory to move the KV cache");
    bp_status st = BP_OK;
    for (int l = 0; l < s->n_layers && !st; l++)
        for (int v = 0; v < 2 && !st; v++)
            for (int h = 0; h < s->kv_heads && !st; h++) {
                const size_t off = ((size_t)h * (size_t)s->cap + (size_t)from) * s->kv_row;
                if (up) {
                    st = kv->read_raw(kv->cache, s->layer0 + l, v, h, from, to - from, tmp);
                    if (!st) st = bp_dev_h2d(s->dev, s->kv[2 * l + v], off, tmp, n);
                } else {
                    st = bp_dev_d2h(s->dev, tmp, s->kv[2 * l + v], off, n);
                    if (!st) st = kv->write_raw(kv->cache, s->layer0 + l, v, h, from, to - from, tmp);
                }
            }
    bp_free(tmp);
    return st;
}

static bp_status hand_back(bp_step_state *self, const bp_step_kv_host *kv, int64_t from, int64_t to) {
    gpu_state *s = (gpu_state *)self;
    if (to > s->base.kv_len) return bp_fail(BP_E_INVAL, "step: the device holds %lld positions, not %lld",
                                            (long long)s->base.kv_len, (long long)to);
    return kv_move(s, kv, from, to, false);
}

/* ---- the step ---------------------------------------------------------------------------------- */

bp_status bp_gpu_step_run(const bp_gpu_backend *b, bp_device *dev, const bp_op_call *c, char *label, size_t len) {
    const bp_step_prog *p = c->u.step.prog;
    bp_step_io *io = c->u.step.io;
    /* a device holds one sequence: a step over several is the CPU's (the model sends it there) */
    if (io->row_seq)
        return bp_fail(BP_E_UNSUPPORTED, "%s step: a step over several sequences runs on the CPU", b->display);
    bp_status st = check(b, p);
    if (st) return st;
    gpu_state *s = (gpu_state *)io->state[b->id];
    if (s && (s->dev != dev || s->n_batch != p->n_batch || s->cap != p->ctx || s->kv_kind != p->kv_kind ||
              s->layer0 != p->layer0 || s->n_layers != p->n_layers)) {
        state_free(&s->base); /* the device was reopened, or the context changed shape */
        io->state[b->id] = NULL;
        s = NULL;
    }
    bp_dev_traffic t0;
    bp_dev_traffic_get(dev, &t0);
    bool placed_now = false;
    if (!s) {
        if (!(s = bp_calloc(1, sizeof *s))) return bp_fail(BP_E_NOMEM, "%s step: out of host memory", b->display);
        s->base.free = state_free, s->base.hand_back = hand_back, s->dev = dev;
        if ((st = place(b, s, p))) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s", bp_last_error());
            state_free(&s->base);
            return bp_fail(st, "%s step: placing the model: %s", b->display, msg);
        }
        io->state[b->id] = &s->base;
        placed_now = true;
    }
    const int slot = p->t > 1;
    /* the positions before this step: on the device, or brought up from the host */
    if (s->base.kv_len < io->pos0 && (st = kv_move(s, &io->kv_host, s->base.kv_len, io->pos0, true))) return st;
    if (s->base.kv_len > io->pos0) s->base.kv_len = io->pos0;
    if (p->n_out > (int64_t)s->n_lg * s->lg_rows && (st = grow_logits(b, s, p))) return st;
    if (s->c[slot].prog != p || s->c[slot].gen != p->gen) {
        if ((st = compile(b, s, p, slot))) return st;
    }
    /* the input: pos0, n_kv, positions, ids in one write */
    const size_t in_bytes = (size_t)(2 + 2 * p->t) * sizeof(int32_t);
    int32_t *in = bp_malloc(in_bytes);
    if (!in) return bp_fail(BP_E_NOMEM, "%s step: out of host memory", b->display);
    in[0] = (int32_t)io->pos0, in[1] = (int32_t)(io->pos0 + p->t);
    for (int64_t i = 0; i < p->t; i++) in[2 + 2 * i] = io->positions[i], in[3 + 2 * i] = io->tokens[i];
    st = bp_dev_h2d(dev, s->io, 0, in, in_bytes);
    bp_free(in);
    /* a split step's second part: the residual stream the host's layers left (the one crossing) */
    if (!st && p->part == 2)
        st = bp_dev_h2d(dev, s->act[BP_SB_X], 0, io->host[BP_SB_X], (size_t)(p->t * p->width[BP_SB_X]) * sizeof(float));
    if (st) return st;
    bool recorded = false, ran = false, updated = false;
    bp_stream *q = b->stream;
    /* the first step waits for the weights' upload stream: queued before the capture, so
     * the graph itself holds no cross-stream wait and every replay is ordered after it */
    if (s->weights_up) {
        if ((st = bp_dev_event_wait(dev, q, s->weights_up))) return st;
        bp_dev_event_destroy(dev, s->weights_up);
        s->weights_up = NULL;
    }
    if (io->tap) {
        if ((st = run_tapped(s, slot, q, p, io))) return st;
        ran = true;
    } else if (!s->c[slot].graph) {
        /* A device without graphs runs the launches during the "capture" and gives no graph
         * (include/backplane_device.h, graph_begin): then they ran, and run so every step. */
        if ((st = bp_dev_graph_begin(dev, q))) return st;
        if ((st = launch_all(s, slot, q))) {
            bp_dev_graph_abort(dev, q);
            return st;
        }
        /* the slot's previous graph is updated in place where the topology allows */
        bp_graph *g = s->c[slot].old;
        s->c[slot].old = NULL;
        if ((st = bp_dev_graph_update(dev, q, &g, &updated))) {
            bp_dev_graph_destroy(dev, g);
            return st;
        }
        s->c[slot].graph = g;
        recorded = g != NULL;
        ran = !recorded;
    }
    if (!ran) st = bp_dev_graph_replay(dev, s->c[slot].graph, q);
    /* the blocking read-back is ordered after the default stream only */
    if (!st && q) st = bp_dev_stream_sync(dev, q);
    if (st) return st;
    const size_t lrow = (size_t)p->width[BP_SB_LOGITS] * sizeof(float);
    for (int64_t r0 = 0; r0 < p->n_out && !st; r0 += s->lg_rows) {
        const int64_t rn = p->n_out - r0 < s->lg_rows ? p->n_out - r0 : s->lg_rows;
        st = bp_dev_d2h(dev, (char *)io->logits + (size_t)r0 * lrow, s->lg[r0 / s->lg_rows], 0, (size_t)rn * lrow);
    }
    if (!st && p->n_out == 0) st = bp_dev_stream_sync(dev, NULL);
    if (st) return st;
    s->base.kv_len = io->pos0 + p->t;
    bp_dev_traffic t1;
    bp_dev_traffic_get(dev, &t1);
    io->traffic.h2d = t1.h2d - t0.h2d, io->traffic.d2h = t1.d2h - t0.d2h;
    io->traffic.h2d_bytes = t1.h2d_bytes - t0.h2d_bytes, io->traffic.d2h_bytes = t1.d2h_bytes - t0.d2h_bytes;
    io->traffic.submits = t1.submits - t0.submits;
    io->traffic.launches = (uint64_t)s->c[slot].n; /* the kernels the step ran, replayed or launched */
    io->traffic.recorded = recorded;
    io->traffic.updated = updated;
    /* what ran each weight kind: the kernel the launches named */
    for (int i = 0; io->kind_rec && i < s->n_w; i++) {
        const bp_kind k = s->w[i].w->kind;
        if ((int)k >= io->kind_rec_n || !s->w[i].mm) continue;
        bp_run_record *r = &io->kind_rec[k];
        memset(r, 0, sizeof *r);
        r->op = p->t > 1 ? BP_OP_GEMM : BP_OP_MATVEC, r->kind = r->kind2 = k, r->batch = p->t;
        snprintf(r->backend, sizeof r->backend, "%s", b->name);
        snprintf(r->display, sizeof r->display, "%s", b->display);
        snprintf(r->kernel, sizeof r->kernel, "%s (in the step)", kind_name(k));
    }
    char part[64] = "";
    if (p->part == 2) snprintf(part, sizeof part, " (layers %d-%d and the output)", p->layer0, p->layer0 + p->n_layers - 1);
    snprintf(label, len, "%s step%s: %d kernels in %s%s", b->display, part, s->c[slot].n,
             io->tap ? "node by node (tapped)" : s->c[slot].graph ? "one recorded submission" : "one queue",
             placed_now ? " (model placed now)" : "");
    return BP_OK;
}
