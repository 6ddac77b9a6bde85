/* MoE: uploading a layer's experts (fused gate/up per expert, or the GGUF 3-D stacked tensors),
 * the checks every path shares, the public entry points and the offload switch. Which backend
 * runs a call is the op layer's walk; the CPU path is moe_cpu.c, its oracle moe_ref.c. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/error.h"
#include "seam/seam_internal.h"
#include "ops/moe_internal.h"
#include "ops/ops_internal.h"

/* ---- the offload switch: three states as exact mode (src/seam/switches.c) ------------------- */

/* -1: not decided yet; the environment is read at first use, so a program that calls the
 * setter before any op never sees the env value. */
static atomic_int offload = -1;

static int env_offload(void) {
    const char *e = getenv("BACKPLANE_MOE_OFFLOAD");
    return !(e && (!strcmp(e, "0") || !strcasecmp(e, "false") || !strcasecmp(e, "off")));
}

bool bp_moe_offload(void) {
    int v = atomic_load(&offload);
    if (v < 0) {
        int expected = -1;
        atomic_compare_exchange_strong(&offload, &expected, env_offload());
        v = atomic_load(&offload);
    }
    return v != 0;
}

void bp_set_moe_offload(bool on) { atomic_store(&offload, on ? 1 : 0); }

/* ---- the uploaded layer -------------------------------------------------------------------- */

static pthread_mutex_t path_lock = PTHREAD_MUTEX_INITIALIZER;

void bp_moe_set_path(bp_moe *m, const char *fmt, ...) {
    char buf[sizeof m->last_path];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&path_lock);
    memcpy(m->last_path, buf, sizeof buf);
    pthread_mutex_unlock(&path_lock);
}

const char *bp_moe_last_path(const bp_moe *m) {
    static _Thread_local char copy[sizeof m->last_path];
    if (!m) return "";
    pthread_mutex_lock(&path_lock);
    memcpy(copy, m->last_path, sizeof copy);
    pthread_mutex_unlock(&path_lock);
    return copy;
}

void bp_moe_free(bp_moe *m) {
    if (!m) return;
    for (int64_t e = 0; e < m->n_expert; e++) {
        if (m->gate) bp_weight_free(m->gate[e]);
        if (m->up) bp_weight_free(m->up[e]);
        if (m->down) bp_weight_free(m->down[e]);
    }
    bp_free(m->gate);
    bp_free(m->up);
    bp_free(m->down);
    bp_free(m->b_gate);
    bp_free(m->b_up);
    bp_free(m->b_down);
    bp_free(m);
}

bp_status bp_moe_set_act(bp_moe *m, bp_moe_act act, float alpha, float limit) {
    if (!m) return bp_fail(BP_E_INVAL, "bp_moe_set_act: layer is NULL");
    if (act != BP_MOE_ACT_SILU && act != BP_MOE_ACT_SWIGLU_OAI)
        return bp_fail(BP_E_INVAL, "bp_moe_set_act: unknown activation %d (0 silu, 1 swiglu_oai)", (int)act);
    if (act == BP_MOE_ACT_SWIGLU_OAI && (!isfinite(alpha) || !(limit > 0) || !isfinite(limit)))
        return bp_fail(BP_E_INVAL, "bp_moe_set_act: swiglu_oai alpha %g, limit %g: need finite alpha, limit > 0",
                       (double)alpha, (double)limit);
    m->act = act, m->alpha = alpha, m->limit = limit;
    return BP_OK;
}

/* A copy of n floats, every one finite (what names the bias in the error). */
static bp_status copy_bias(const char *what, const float *src, int64_t n, float **dst) {
    *dst = NULL;
    if (!src) return BP_OK;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(src[i])) return bp_fail(BP_E_INVAL, "bp_moe_set_biases: %s[%lld] is %g, not finite", what, (long long)i, (double)src[i]);
    if (!(*dst = bp_malloc(sizeof(float) * (size_t)n))) return bp_fail(BP_E_NOMEM, "bp_moe_set_biases: no memory for %s", what);
    memcpy(*dst, src, sizeof(float) * (size_t)n);
    return BP_OK;
}

bp_status bp_moe_set_biases(bp_moe *m, const float *b_gate, const float *b_up, const float *b_down) {
    if (!m) return bp_fail(BP_E_INVAL, "bp_moe_set_biases: layer is NULL");
    float *g = NULL, *u = NULL, *d = NULL;
    bp_status s = copy_bias("gate bias", b_gate, m->n_expert * m->inter, &g);
    if (!s) s = copy_bias("up bias", b_up, m->n_expert * m->inter, &u);
    if (!s) s = copy_bias("down bias", b_down, m->n_expert * m->h, &d);
    if (s) { /* nothing replaced */
        bp_free(g), bp_free(u), bp_free(d);
        return s;
    }
    bp_free(m->b_gate), bp_free(m->b_up), bp_free(m->b_down);
    m->b_gate = g, m->b_up = u, m->b_down = d;
    return BP_OK;
}

void bp_moe_activate(const bp_moe *m, int64_t e, float *G, const float *U, int64_t n) {
    const int64_t I = m->inter;
    const float *bg = m->b_gate ? m->b_gate + e * I : NULL, *bu = m->b_up ? m->b_up + e * I : NULL;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < I; c++) {
            float g = G[r * I + c] + (bg ? bg[c] : 0.0f), u = U[r * I + c] + (bu ? bu[c] : 0.0f);
            if (m->act == BP_MOE_ACT_SWIGLU_OAI) {
                g = fminf(g, m->limit);
                u = fminf(fmaxf(u, -m->limit), m->limit);
                G[r * I + c] = g / (1.0f + expf(-m->alpha * g)) * (u + 1.0f);
            } else
                G[r * I + c] = g / (1.0f + expf(-g)) * u;
        }
}

void bp_moe_add_down_bias(const bp_moe *m, int64_t e, float w, float *y) {
    if (!m->b_down) return;
    const float *b = m->b_down + e * m->h;
    for (int64_t c = 0; c < m->h; c++) y[c] += w * b[c];
}

void bp_moe_shape(const bp_moe *m, int64_t *n_expert, int64_t *h, int64_t *inter) {
    if (n_expert) *n_expert = m ? m->n_expert : 0;
    if (h) *h = m ? m->h : 0;
    if (inter) *inter = m ? m->inter : 0;
}

static const char *kind_name(bp_kind k) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    return ki ? ki->name : "?";
}

/* Bytes of a rows x cols matrix of kind k; a clear error naming `what` when cols is not a whole
 * number of blocks or the kind is not a weight kind. */
static bp_status matrix_bytes(const char *what, bp_kind k, int64_t rows, int64_t cols, size_t *out) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    if (!ki || ki->role != BP_ROLE_W)
        return bp_fail(BP_E_KIND, "MoE %s: kind %d is not a weight kind", what, (int)k);
    size_t rb;
    if (bp_kind_row_bytes(k, cols, &rb) || !bp_mul_size(rb, (size_t)rows, out))
        return bp_fail(BP_E_SHAPE, "MoE %s: a %s row of %lld is not a whole number of %u-element blocks", what, ki->name,
                       (long long)cols, ki->block_elems);
    return BP_OK;
}

static bp_status new_layer(int64_t n_expert, int64_t h, int64_t inter, bp_moe **out) {
    if (n_expert < 1 || h < 1 || inter < 1 || n_expert > INT32_MAX)
        return bp_fail(BP_E_SHAPE, "MoE upload: %lld experts of h %lld, inter %lld: each must be positive (experts < 2^31)",
                       (long long)n_expert, (long long)h, (long long)inter);
    bp_moe *m = bp_calloc(1, sizeof *m);
    if (m) {
        m->gate = bp_calloc((size_t)n_expert, sizeof *m->gate);
        m->up = bp_calloc((size_t)n_expert, sizeof *m->up);
        m->down = bp_calloc((size_t)n_expert, sizeof *m->down);
    }
    if (!m || !m->gate || !m->up || !m->down) {
        if (m) m->n_expert = n_expert;
        bp_moe_free(m);
        return bp_fail(BP_E_NOMEM, "MoE upload: no memory for %lld experts", (long long)n_expert);
    }
    m->n_expert = n_expert;
    m->h = h;
    m->inter = inter;
    snprintf(m->last_path, sizeof m->last_path, "none yet");
    *out = m;
    return BP_OK;
}

bp_status bp_moe_upload(int64_t n_expert, int64_t h, int64_t inter, bp_kind gu_kind, const void *const *gate_up,
                        const size_t *gu_bytes, bp_kind down_kind, const void *const *down, const size_t *down_bytes,
                        bp_moe **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_moe_upload: out is NULL");
    *out = NULL;
    if (!gate_up || !gu_bytes || !down || !down_bytes)
        return bp_fail(BP_E_INVAL, "bp_moe_upload: expert pointer or size arrays are NULL");
    size_t half = 0, dn = 0;
    bp_status s = matrix_bytes("gate/up", gu_kind, inter, h, &half);
    if (!s) s = matrix_bytes("down", down_kind, h, inter, &dn);
    if (s) return s;
    for (int64_t e = 0; e < n_expert; e++) {
        if (!gate_up[e] || !down[e]) return bp_fail(BP_E_INVAL, "bp_moe_upload: expert %lld has a NULL weight", (long long)e);
        if (gu_bytes[e] != 2 * half)
            return bp_fail(BP_E_SHAPE, "bp_moe_upload: expert %lld gate/up is %zu bytes; a %s [2*%lld][%lld] is %zu",
                           (long long)e, gu_bytes[e], kind_name(gu_kind), (long long)inter, (long long)h, 2 * half);
        if (down_bytes[e] != dn)
            return bp_fail(BP_E_SHAPE, "bp_moe_upload: expert %lld down is %zu bytes; a %s [%lld][%lld] is %zu",
                           (long long)e, down_bytes[e], kind_name(down_kind), (long long)h, (long long)inter, dn);
    }
    bp_moe *m;
    if ((s = new_layer(n_expert, h, inter, &m))) return s;
    for (int64_t e = 0; e < n_expert && !s; e++) {
        const uint8_t *gu = gate_up[e];
        s = bp_weight_create(gu_kind, gu, half, inter, h, &m->gate[e]);
        if (!s) s = bp_weight_create(gu_kind, gu + half, half, inter, h, &m->up[e]);
        if (!s) s = bp_weight_create(down_kind, down[e], dn, h, inter, &m->down[e]);
    }
    if (s) {
        bp_moe_free(m);
        return s;
    }
    *out = m;
    return BP_OK;
}

/* One stacked tensor: ne must be {cols, rows, n_expert}, bytes exactly n_expert matrices. */
static bp_status check_stacked(const char *name, const bp_moe_tensor *t, int64_t cols, int64_t rows, int64_t n,
                               size_t *mat_bytes) {
    if (!t->data) return bp_fail(BP_E_INVAL, "MoE upload: %s data is NULL", name);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n)
        return bp_fail(BP_E_SHAPE, "MoE upload: %s is %lld x %lld x %lld; ffn_gate_exps says it must be %lld x %lld x %lld",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)cols,
                       (long long)rows, (long long)n);
    bp_status s = matrix_bytes(name, t->kind, rows, cols, mat_bytes);
    if (s) return s;
    size_t all;
    if (!bp_mul_size(*mat_bytes, (size_t)n, &all) || t->bytes != all)
        return bp_fail(BP_E_SHAPE, "MoE upload: %s is %zu bytes; %lld %s [%lld][%lld] experts are %zu", name, t->bytes,
                       (long long)n, kind_name(t->kind), (long long)rows, (long long)cols, all);
    return BP_OK;
}

bp_status bp_moe_upload_stacked(const bp_moe_tensor *gate, const bp_moe_tensor *up, const bp_moe_tensor *down,
                                bp_moe **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_moe_upload_stacked: out is NULL");
    *out = NULL;
    if (!gate || !up || !down) return bp_fail(BP_E_INVAL, "bp_moe_upload_stacked: a tensor is NULL");
    int64_t h = gate->ne[0], inter = gate->ne[1], n = gate->ne[2];
    size_t gb = 0, ub = 0, db = 0;
    bp_status s = check_stacked("ffn_gate_exps", gate, h, inter, n, &gb);
    if (!s) s = check_stacked("ffn_up_exps", up, h, inter, n, &ub);
    if (!s) s = check_stacked("ffn_down_exps", down, inter, h, n, &db);
    bp_moe *m = NULL;
    if (!s) s = new_layer(n, h, inter, &m);
    if (s) return s;
    for (int64_t e = 0; e < n && !s; e++) {
        s = bp_weight_create(gate->kind, (const uint8_t *)gate->data + (size_t)e * gb, gb, inter, h, &m->gate[e]);
        if (!s) s = bp_weight_create(up->kind, (const uint8_t *)up->data + (size_t)e * ub, ub, inter, h, &m->up[e]);
        if (!s) s = bp_weight_create(down->kind, (const uint8_t *)down->data + (size_t)e * db, db, h, inter, &m->down[e]);
    }
    if (s) {
        bp_moe_free(m);
        return s;
    }
    *out = m;
    return BP_OK;
}

static bp_status gguf_tensor(const bp_gguf *f, const char *prefix, const char *name, bp_moe_tensor *t) {
    char full[256];
    if (snprintf(full, sizeof full, "%s%s.weight", prefix, name) >= (int)sizeof full)
        return bp_fail(BP_E_INVAL, "bp_moe_upload_gguf: prefix '%s' is too long", prefix);
    const bp_gguf_tensor *gt = bp_gguf_find_tensor(f, full);
    if (!gt) return bp_fail(BP_E_NOT_FOUND, "bp_moe_upload_gguf: no tensor '%s'", full);
    if (gt->n_dims != 3)
        return bp_fail(BP_E_SHAPE, "bp_moe_upload_gguf: '%s' has %u dimensions; stacked experts have 3", full, gt->n_dims);
    if (gt->ne[3] != 1) return bp_fail(BP_E_SHAPE, "bp_moe_upload_gguf: '%s' has a 4th dimension", full);
    t->kind = gt->kind;
    memcpy(t->ne, gt->ne, sizeof t->ne);
    t->data = gt->data;
    t->bytes = gt->bytes;
    return BP_OK;
}

bp_status bp_moe_upload_gguf(const bp_gguf *f, const char *prefix, bp_moe **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_moe_upload_gguf: out is NULL");
    *out = NULL;
    if (!f) return bp_fail(BP_E_INVAL, "bp_moe_upload_gguf: file is NULL");
    if (!prefix) prefix = "";
    bp_moe_tensor g, u, d;
    bp_status s = gguf_tensor(f, prefix, "ffn_gate_exps", &g);
    if (!s) s = gguf_tensor(f, prefix, "ffn_up_exps", &u);
    if (!s) s = gguf_tensor(f, prefix, "ffn_down_exps", &d);
    return s ? s : bp_moe_upload_stacked(&g, &u, &d, out);
}

/* ---- running ------------------------------------------------------------------------------- */

bp_status bp_moe_check_run(const char *who, const bp_moe *m, const float *x, int64_t t, int64_t top_k,
                           const int32_t *ids, const float *route_w, const float *y) {
    if (!m) return bp_fail(BP_E_INVAL, "%s: layer is NULL", who);
    if (t < 0 || top_k < 1)
        return bp_fail(BP_E_SHAPE, "%s: %lld tokens, top_k %lld: need t >= 0 and top_k >= 1", who, (long long)t,
                       (long long)top_k);
    if (t == 0) return BP_OK;
    if (!x || !ids || !route_w || !y) return bp_fail(BP_E_INVAL, "%s: input, ids, route weights or output is NULL", who);
    size_t n;
    if (!bp_mul_size((size_t)t, (size_t)top_k, &n) || !bp_mul_size((size_t)t, (size_t)m->h * sizeof(float), &n))
        return bp_fail(BP_E_SHAPE, "%s: %lld tokens x top_k %lld overflows", who, (long long)t, (long long)top_k);
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < top_k; j++) {
            int32_t e = ids[i * top_k + j];
            if (e < 0 || e >= m->n_expert)
                return bp_fail(BP_E_INVAL, "%s: token %lld route %lld names expert %d; the layer has experts 0..%lld", who,
                               (long long)i, (long long)j, (int)e, (long long)(m->n_expert - 1));
        }
    return BP_OK;
}

/* The op call for a checked run, with its shape: the used experts' three matrices as rows
 * (3 x inter each) of h columns, the routes per used expert as the batch. */
static bp_status moe_call(bp_moe *m, const float *x, int64_t t, int64_t top_k, const int32_t *ids,
                          const float *route_w, float *y, bp_op_call *c) {
    memset(c, 0, sizeof *c);
    c->op = BP_OP_MOE;
    c->kind = m->gate[0]->kind;
    c->kind2 = m->down[0]->kind;
    c->u.moe.m = m, c->u.moe.x = x, c->u.moe.t = t, c->u.moe.top_k = top_k;
    c->u.moe.ids = ids, c->u.moe.route_w = route_w, c->u.moe.y = y;
    uint8_t *seen = bp_calloc((size_t)m->n_expert, 1);
    if (!seen) return bp_fail(BP_E_NOMEM, "MoE: no memory for %lld expert flags", (long long)m->n_expert);
    int64_t used = 0;
    for (int64_t r = 0; r < t * top_k; r++) {
        int32_t e = ids[r];
        if (seen[e]) continue;
        seen[e] = 1;
        used++;
    }
    bp_free(seen);
    if (used < 1) used = 1;
    c->shape = (bp_op_shape){3 * m->inter * used, m->h, (t * top_k + used - 1) / used};
    return BP_OK;
}

bp_status bp_moe_run_on(bp_moe *m, const char *backend, const float *x, int64_t t, int64_t top_k, const int32_t *ids,
                        const float *route_w, float *y) {
    bp_status s = bp_moe_check_run("bp_moe_run", m, x, t, top_k, ids, route_w, y);
    if (s || t == 0) return s;
    if (backend && !strcmp(backend, "cpu-ref")) {
        s = bp_moe_ref(m, x, t, top_k, ids, route_w, y);
        if (!s) bp_moe_set_path(m, "CPU reference MoE (float64)");
        return s;
    }
    bp_op_call c;
    if ((s = moe_call(m, x, t, top_k, ids, route_w, y, &c))) return s;
    /* Offload off: the CPU, whoever claims the pair, and its expert matmuls on the CPU too. */
    c.cpu_only = !backend && !bp_moe_offload();
    s = bp_op_run_on(&c, backend);
    if (!s) bp_moe_set_path(m, "%s", bp_op_last_path("moe"));
    return s;
}

bp_status bp_moe_run(bp_moe *m, const float *x, int64_t t, int64_t top_k, const int32_t *ids, const float *route_w,
                     float *y) {
    return bp_moe_run_on(m, NULL, x, t, top_k, ids, route_w, y);
}

const char *bp_conv_moe_cpu_label(bp_op op, bp_kind k, char *buf, size_t len) {
    const char *kn = bp_kind_lookup((uint32_t)k) ? bp_kind_lookup((uint32_t)k)->name : "?";
    if (op != BP_OP_MOE) {
        snprintf(buf, len, "CPU %s, blockwise: normalized rows gathered into tiles, one CPU GEMM per tile", bp_op_name(op));
        return buf;
    }
    if (!bp_moe_offload())
        snprintf(buf, len, "CPU MoE grouped by expert, expert matmuls on the CPU kernels (MoE offload off)");
    else
        snprintf(buf, len, "CPU MoE grouped by expert, %s expert matmuls through the seam's gemm (routed per expert "
                 "shape; the run's record names what ran)", kn);
    return buf;
}
