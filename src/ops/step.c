/* The op `step`: a whole forward step (src/backend/step.h) through the seam's one walk. A
 * backend that claims the step for the cache's kind (and jobs for every weight kind) runs all
 * of it on its device; otherwise the CPU runs the nodes one by one here, each through the op
 * layer's public ops, so every op of the step is routed and recorded on its own as before. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "ops/ops_internal.h"
#include "backend/backend_id.h"

/* ---- host access to the KV cache, for a backend taking over or handing back a sequence ---- */

static bp_status kv_raw(bp_kv_cache *c, int layer, bool values, int head, int64_t first, int64_t rows, uint8_t **p,
                        size_t *n) {
    if (!c || layer < 0 || layer >= c->desc.n_layers || head < 0 || head >= c->desc.n_kv_heads || first < 0 ||
        rows < 0 || first + rows > c->layers[layer].cap)
        return bp_fail(BP_E_INVAL, "kv_cache: layer %d head %d rows [%lld, %lld) out of range", layer, head,
                       (long long)first, (long long)(first + rows));
    const bp_kv_layer *L = &c->layers[layer];
    const size_t row = values ? c->row_v : c->row_k;
    *p = (values ? L->v : L->k) + ((size_t)head * (size_t)L->cap + (size_t)first) * row;
    *n = (size_t)rows * row;
    return BP_OK;
}

static bp_status kv_read_raw(void *cache, int layer, bool values, int head, int64_t first, int64_t rows, void *dst) {
    uint8_t *p = NULL;
    size_t n = 0;
    bp_status s = kv_raw(cache, layer, values, head, first, rows, &p, &n);
    if (!s) memcpy(dst, p, n);
    return s;
}

/* Writing rows makes them the layer's contents: its length becomes at least first + rows. */
static bp_status kv_write_raw(void *cache, int layer, bool values, int head, int64_t first, int64_t rows,
                              const void *src) {
    uint8_t *p = NULL;
    size_t n = 0;
    bp_kv_cache *c = cache;
    bp_status s = kv_raw(c, layer, values, head, first, rows, &p, &n);
    if (s) return s;
    memcpy(p, src, n);
    if (c->layers[layer].len < first + rows) c->layers[layer].len = first + rows;
    return BP_OK;
}

static int64_t kv_length(void *cache, int layer) { return bp_kv_cache_length(cache, layer); }

/* The fewest positions the host holds over layers [l0, l1). */
static int64_t host_length(bp_kv_cache *kv, int l0, int l1) {
    int64_t have = INT64_MAX;
    for (int l = l0; l < l1; l++)
        if (kv_length(kv, l) < have) have = kv_length(kv, l);
    return have;
}

/* Positions [have, n) of layers [l0, l1) back from the state that holds them: a split step's
 * device holds only its layers, so the shortest of the range is what the host lacks. */
static bp_status pull_layers(bp_kv_cache *kv, bp_step_state *const *state, int l0, int l1, int64_t n) {
    const bp_step_kv_host host = {kv, kv_read_raw, kv_write_raw, kv_length};
    const int64_t have = host_length(kv, l0, l1);
    for (int b = 0; state && b < BP_STEP_STATES && have < n; b++) {
        bp_step_state *st = state[b];
        if (st && st->kv_len >= n) return st->hand_back(st, &host, have, n);
    }
    return BP_OK;
}

bp_status bp_step_pull_host(bp_kv_cache *kv, bp_step_state *const *state, int64_t n) {
    return pull_layers(kv, state, 0, bp_kv_cache_info(kv)->n_layers, n);
}

/* ---- the CPU: node by node ---------------------------------------------------------------- */

/* A step over several sequences: the keys of each run of consecutive rows that go to one cache
 * are appended in one call, in append_order, at the cache's end with the rows' positions (which
 * may jump: a hole in position space). */
static bp_status append_seqs(const bp_step_prog *p, const bp_step_node *nd, bp_step_io *io) {
    const int64_t wk = p->width[BP_SB_K], wv = p->width[BP_SB_V];
    for (int64_t a = 0; a < nd->rows;) {
        const int32_t r = io->append_order[a];
        int64_t n = 1;
        while (a + n < nd->rows && io->append_order[a + n] == r + n && io->row_seq[r + n] == io->row_seq[r]) n++;
        bp_status s = bp_kv_cache_append_pos(io->seq_kv[io->row_seq[r]], nd->layer, io->host[BP_SB_K] + r * wk,
                                             io->host[BP_SB_V] + r * wv, n, io->positions + r);
        if (s) return s;
        a += n;
    }
    return BP_OK;
}

/* Attention of rows [r0, r0 + rows), each over its own sequence's cache (the causal mask and
 * the window come from the rows' positions): one call per run of rows of one sequence. */
static bp_status attend_seqs(const bp_step_prog *p, const bp_step_node *nd, bp_step_io *io, float *dst) {
    const int64_t wq = p->width[BP_SB_Q];
    for (int64_t r = nd->r0; r < nd->r0 + nd->rows;) {
        int64_t n = 1;
        while (r + n < nd->r0 + nd->rows && io->row_seq[r + n] == io->row_seq[r]) n++;
        bp_status s = bp_attention(&nd->attn, io->host[BP_SB_Q] + r * wq, n, io->positions + r,
                                   io->seq_kv[io->row_seq[r]], nd->layer, dst + (r - nd->r0) * nd->n);
        if (s) return s;
        r += n;
    }
    return BP_OK;
}

/* Routed experts of rows [r0, r0 + rows): route by the router logits in GATE, then the experts,
 * their sum written over dst. */
static bp_status moe_node(const bp_step_prog *p, const bp_step_node *nd, bp_step_io *io, const float *src, float *dst) {
    int64_t ne = 0;
    bp_moe_shape(nd->moe.m, &ne, NULL, NULL);
    const int64_t k = nd->moe.top_k, rows = nd->rows;
    const float *logits = io->host[BP_SB_GATE] + nd->r0 * p->width[BP_SB_GATE]; /* [rows][ne], as the matmul wrote */
    int32_t *ids = bp_malloc(sizeof *ids * (size_t)(rows * k));
    float *w = bp_malloc(sizeof *w * (size_t)(rows * k));
    bp_status s = ids && w ? BP_OK : bp_fail(BP_E_NOMEM, "step: no memory to route %lld rows", (long long)rows);
    if (!s) s = bp_moe_route(logits, rows, ne, k, nd->moe.gate, nd->moe.renorm, ids, w);
    if (!s) {
        memset(dst, 0, sizeof *dst * (size_t)(rows * nd->n));
        s = bp_moe_run(nd->moe.m, src, rows, k, ids, w, dst);
    }
    bp_free(ids);
    bp_free(w);
    return s;
}

static bp_status node_cpu(const bp_step_prog *p, const bp_step_node *nd, bp_step_io *io) {
    const int64_t n = nd->n;
    float *dst = io->host[nd->dst] + nd->r0 * n, *src = io->host[nd->src] + nd->r0 * n;
    switch (nd->kind) {
    case BP_STEP_EMBED: {
        const bp_weight *e = nd->w;
        for (int64_t i = 0; i < nd->rows; i++) {
            float *x = dst + i * n;
            bp_status s = bp_dequantize(e->kind, e->data + (size_t)io->tokens[i] * e->row_bytes, e->row_bytes, x, n);
            if (s) return s;
            if (nd->f != 1.0f)
                for (int64_t j = 0; j < n; j++) x[j] *= nd->f;
        }
        return BP_OK;
    }
    case BP_STEP_RMS_NORM: return bp_rms_norm(src, nd->rows, n, nd->vec, nd->f, dst);
    case BP_STEP_MATMUL: {
        bp_matmul_job jobs[3];
        for (int j = 0; j < nd->n_jobs; j++)
            jobs[j].w = nd->job[j].w, jobs[j].y = nd->job[j].dst == BP_SB_LOGITS
                                                      ? io->logits
                                                      : io->host[nd->job[j].dst] + nd->r0 * p->width[nd->job[j].dst];
        return bp_matmul(src, nd->rows, jobs, nd->n_jobs);
    }
    case BP_STEP_ADD_VEC:
        for (int64_t i = 0; i < nd->rows; i++)
            for (int64_t j = 0; j < n; j++) dst[i * n + j] += nd->vec[j];
        return BP_OK;
    case BP_STEP_ADD:
        for (int64_t i = 0; i < nd->rows * n; i++) dst[i] += src[i];
        return BP_OK;
    case BP_STEP_ROPE: {
        const int32_t *pos = io->positions + nd->r0;
        if (nd->rope_factors)
            return bp_rope_with_factors(&nd->rope, nd->rope_factors, nd->rope_attn, dst, nd->rows, pos);
        return bp_rope(&nd->rope, dst, nd->rows, pos);
    }
    case BP_STEP_KV_APPEND:
        if (io->row_seq) return append_seqs(p, nd, io);
        return bp_kv_cache_append(io->kv, nd->layer, io->host[BP_SB_K] + nd->r0 * p->width[BP_SB_K],
                                  io->host[BP_SB_V] + nd->r0 * p->width[BP_SB_V], nd->rows, io->pos0 + nd->r0);
    case BP_STEP_ATTENTION:
        if (io->row_seq) return attend_seqs(p, nd, io, dst);
        return bp_attention(&nd->attn, io->host[BP_SB_Q] + nd->r0 * p->width[BP_SB_Q], nd->rows,
                            io->positions + nd->r0, io->kv, nd->layer, dst);
    case BP_STEP_GLU: return bp_glu(nd->act, dst, io->host[BP_SB_UP] + nd->r0 * n, nd->rows * n, dst);
    case BP_STEP_SOFTCAP:
        for (int64_t i = 0; i < nd->rows * n; i++) dst[i] = nd->f * tanhf(dst[i] / nd->f);
        return BP_OK;
    case BP_STEP_MOE: return moe_node(p, nd, io, src, dst);
    case BP_STEP_KIND_COUNT: break;
    }
    return bp_fail(BP_E_INVAL, "step: node kind %d unknown", (int)nd->kind);
}

bp_status bp_step_cpu(const bp_op_call *c, char *label, size_t label_len) {
    const bp_step_prog *p = c->u.step.prog;
    bp_step_io *io = c->u.step.io;
    /* Positions a device holds and the host does not come back first (see bp_step_state). */
    const int l0 = p->layer0, l1 = p->layer0 + p->n_layers;
    bp_status s0 = pull_layers(io->kv, io->state, l0, l1, io->pos0);
    if (s0) return bp_fail(s0, "step: the CPU cannot continue the sequence: %s", bp_last_error());
    const int64_t have = host_length(io->kv, l0, l1);
    if (have < io->pos0)
        return bp_fail(BP_E_INVAL, "step: the host KV cache holds %lld positions, the step starts at %lld",
                       (long long)have, (long long)io->pos0);
    for (int i = 0; i < p->n_nodes; i++) {
        bp_status s = node_cpu(p, &p->nodes[i], io);
        if (s) return s;
        if (io->tap) io->tap(io->tap_user, p, i, io);
    }
    if (p->part == 1 && !p->n_layers) snprintf(label, label_len, "CPU, the embedding of a split step");
    else if (p->part == 1) /* a split step's first part: the embedding and layers [0, n_layers) */
        snprintf(label, label_len, "CPU, op by op (%d ops: the embedding and layers 0-%d of a split step)", p->n_nodes,
                 p->n_layers - 1);
    else snprintf(label, label_len, "CPU, op by op (%d ops)", p->n_nodes);
    return BP_OK;
}

/* The op call of program p (io may be NULL: a question about it, not a run). */
static bp_op_call step_op_call(const bp_step_prog *p, bp_step_io *io) {
    bp_op_call c = {.op = BP_OP_STEP, .kind = p->kv_kind, .kind2 = p->kv_kind};
    c.u.step.prog = p, c.u.step.io = io;
    /* The work the cost model sees: every weight read once per step, t tokens. */
    int64_t wbytes = 0;
    for (int i = 0; i < p->n_nodes; i++)
        for (int j = 0; p->nodes[i].kind == BP_STEP_MATMUL && j < p->nodes[i].n_jobs; j++)
            wbytes += p->nodes[i].job[j].w->rows * (int64_t)p->nodes[i].job[j].w->row_bytes;
    c.shape = (bp_op_shape){1, wbytes / 2 > 0 ? wbytes / 2 : 1, p->t};
    return c;
}

int bp_step_route(const bp_step_prog *p, char *why, size_t why_len) {
    const bp_op_call c = step_op_call(p, NULL);
    int order[BP_BACKEND_COUNT + 1];
    const int n = bp_seam_order(order, BP_BACKEND_COUNT + 1);
    size_t used = 0;
    if (why && why_len) why[0] = '\0';
    for (int j = 0; j < n; j++) {
        char one[300];
        if (bp_seam_takes(order[j], &c, one, sizeof one) == BP_TAKE_YES) return order[j];
        bp_seam_why_add(why, why_len, &used, order[j], one);
    }
    return -1;
}

/* The call for p, io prepared; backend NULL: the walk, else that backend only (verify). */
static bp_status step_call(const bp_step_prog *p, bp_step_io *io, const char *backend, bp_run_record *rec) {
    if (!p || !io || p->t <= 0 || p->n_out < 0 || p->n_out > p->t)
        return bp_fail(BP_E_INVAL, "step: bad program or io (t %lld, n_out %lld)", p ? (long long)p->t : 0LL,
                       p ? (long long)p->n_out : 0LL);
    io->kv_host = (bp_step_kv_host){io->kv, kv_read_raw, kv_write_raw, kv_length};
    memset(&io->traffic, 0, sizeof io->traffic);
    bp_op_call c = step_op_call(p, io);
    return backend ? bp_seam_run_on(&c, backend, bp_op_cpu, rec) : bp_op_run(&c);
}

bp_status bp_step_run(const bp_step_prog *p, bp_step_io *io) { return step_call(p, io, NULL, NULL); }

bp_status bp_step_run_on(const bp_step_prog *p, bp_step_io *io, const char *backend, bp_run_record *rec) {
    return step_call(p, io, backend ? backend : "cpu", rec);
}
