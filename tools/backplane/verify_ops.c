/* `backplane verify` for ops: each (op, kind, backend) on a few shapes against the CPU reference
 * (bp_op_reference, double accumulation). The CPU runs its fast path (bp_op_cpu); a backend that
 * claims the pair runs its own op_launch, forced: no fallback can cover for it. Thresholds: the
 * tolerance table (src/testing/tolerance.def): as for matvec, 5e-4 NMSE for jobs on quantized weight
 * kinds (8-bit activations), 1e-6 otherwise (the fast paths compute in f32 over the same
 * dequantized values). */
#include "verify_ops.h"
#include "verify_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "testing/testdata.h"
#include "testing/tolerance.h"
#include "ops/ops_internal.h"
#include "seam/seam_internal.h"

static uint64_t rng = 0x13198A2E03707344ull;
static float randf(void) { return bp_rng_float(&rng); } /* the one generator (src/testing/testdata.c) */
static float *rnd(size_t n, float amp) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; v && i < n; i++) v[i] = randf() * amp;
    return v;
}

/* The one NMSE (src/testing/tolerance.c); a non-finite output never passes. */
static double nmse(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return INFINITY;
    return bp_nmse(a, b, n);
}

/* The bound for op on kind k: THE tolerance table (src/testing/tolerance.def). */
static double tol(bp_kind k, const char *op) { return bp_tolerance_nmse(k, op); }

typedef struct vctx {
    bool json, first;
    int cases, failed;
} vctx;

static void emit(vctx *v, const char *op, const char *kind, const char *shape, const char *backend, double e, double thr,
                 const char *path) {
    bool pass = e <= thr;
    v->cases++, v->failed += !pass;
    if (v->json) {
        printf("%s    {\"op\": \"%s\", \"kind\": \"%s\", \"shape\": \"%s\", \"backend\": \"%s\", \"nmse\": ", v->first ? "" : ",\n",
               op, kind, shape, backend);
        if (isfinite(e)) printf("%.3e", e);
        else printf("null");
        printf(", \"threshold\": %.0e, \"pass\": %s, \"path\": ", thr, pass ? "true" : "false");
        bp_cli_json_str(stdout, path);
        printf("}");
        v->first = false;
    } else
        printf("| %s | %s | %s | %s | %.3e | %s | %s |\n", backend, op, kind, shape, e, pass ? "PASS" : "FAIL", path);
}

/* Outputs of a call (where it writes, how many floats): the one output of every op but jobs. */
static float *out_of(bp_op_call *c, size_t *n) {
    switch (c->op) {
    case BP_OP_ATTENTION:
        *n = (size_t)c->u.attn.t * (size_t)c->u.attn.d->n_heads * (size_t)bp_kv_cache_info(c->u.attn.cache)->head_dim_v;
        return c->u.attn.out;
    case BP_OP_NORM: *n = (size_t)(c->u.norm.t * c->u.norm.d->n); return c->u.norm.y;
    case BP_OP_ROPE: *n = (size_t)c->u.rope.t * (size_t)(c->u.rope.d->n_heads * c->u.rope.d->head_dim); return c->u.rope.x;
    case BP_OP_ACT:
    case BP_OP_GLU: *n = (size_t)c->u.act.n; return c->u.act.y;
    case BP_OP_SOFTMAX: *n = (size_t)(c->u.softmax.t * c->u.softmax.n); return c->u.softmax.y;
    default: *n = 0; return NULL;
    }
}

/* Run c on one backend (slot -1: the CPU fast path) and on the reference; in-place ops (rope)
 * start each run from the same input copy. */
static void check(vctx *v, bp_op_call *c, int slot, const char *kind, const char *shape, double thr, float *in_copy) {
    size_t n;
    float *out = out_of(c, &n);
    float *ref = malloc(n * sizeof *ref);
    char label[400] = "";
    const char *backend = slot < 0 ? "cpu" : bp_seam_slot_at(slot)->caps->name;
    if (c->op == BP_OP_ROPE) memcpy(out, in_copy, n * sizeof *out);
    bp_status s = bp_op_reference(c);
    memcpy(ref, out, n * sizeof *ref);
    if (c->op == BP_OP_ROPE) memcpy(out, in_copy, n * sizeof *out);
    else for (size_t i = 0; i < n; i++) out[i] = NAN;
    if (!s && slot < 0) s = bp_op_cpu(c, label, sizeof label);
    else if (!s) {
        /* The seam's one forced run: that backend only, its launch error the result. */
        bp_run_record rec;
        if (bp_seam_run_on(c, backend, bp_op_cpu, &rec) == BP_OK) bp_run_record_label(&rec, label, sizeof label);
        else s = BP_E_DEVICE, snprintf(label, sizeof label, "launch failed: %s", bp_last_error());
    }
    emit(v, bp_op_name(c->op), kind, shape, backend, s ? INFINITY : nmse(out, ref, n), thr, s && !label[0] ? bp_last_error() : label);
    free(ref);
}

/* Every backend that should run (op, k): the CPU, and each enabled slot claiming it. */
static void each_backend(vctx *v, bp_op_call *c, const char *only, const char *kind, const char *shape, double thr,
                         float *in_copy) {
    if (!only || !strcmp(only, "cpu")) check(v, c, -1, kind, shape, thr, in_copy);
    for (int i = 0; i < bp_seam_slot_count(); i++) {
        const bp_seam_slot *sl = bp_seam_slot_at(i);
        if (only && strcmp(only, sl->caps->name)) continue;
        if (!sl->dispatch || !sl->dispatch->launch || !bp_seam_slot_enabled(i, NULL)) continue;
        if (!sl->caps->kernel(c->op, c->kind) || !sl->caps->kernel(c->op, c->kind2)) continue;
        check(v, c, i, kind, shape, thr, in_copy);
    }
}

static void verify_attention(vctx *v, bp_kind k, const char *only) {
    static const struct { int64_t t, len; int nh, nkv, d; int64_t window; float cap; const char *name; } sh[] = {
        {3, 70, 4, 2, 64, 0, 0, "prefill t=3 ctx 70 h4/2 d64"},
        {1, 700, 8, 1, 128, 300, 0, "decode ctx 700 h8/1 d128 window 300"},
        {5, 40, 4, 1, 256, 0, 30, "prefill t=5 ctx 40 h4/1 d256 softcap 30"},
    };
    const char *kn = bp_kind_lookup(k)->name;
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        bp_kv_cache_desc cd = {.n_layers = 1, .n_kv_heads = sh[s].nkv, .head_dim_k = sh[s].d, .head_dim_v = sh[s].d,
                               .capacity = sh[s].len, .kind_k = k, .kind_v = k};
        bp_kv_cache *c = NULL;
        size_t nkv = (size_t)(sh[s].len * sh[s].nkv * sh[s].d), nq = (size_t)(sh[s].t * sh[s].nh * sh[s].d);
        float *kv = rnd(nkv, 1), *q = rnd(nq, 1), *out = malloc(nq * sizeof *out);
        int32_t pos[8];
        for (int64_t i = 0; i < sh[s].t; i++) pos[i] = (int32_t)(sh[s].len - sh[s].t + i);
        if (!bp_kv_cache_create(&cd, &c) && !bp_kv_cache_append(c, 0, kv, kv, sh[s].len, 0)) {
            bp_attn_desc d = {.n_heads = sh[s].nh, .n_kv_heads = sh[s].nkv, .scale = 1.0f / sqrtf((float)sh[s].d),
                              .causal = true, .window = sh[s].window, .softcap = sh[s].cap};
            bp_op_call call = {.op = BP_OP_ATTENTION, .kind = k, .kind2 = k};
            call.u.attn.d = &d, call.u.attn.q = q, call.u.attn.t = sh[s].t, call.u.attn.positions = pos;
            call.u.attn.cache = c, call.u.attn.out = out;
            each_backend(v, &call, only, kn, sh[s].name, tol(k, "attention"), NULL);
        } else
            emit(v, "attention", kn, sh[s].name, "cpu", INFINITY, tol(k, "attention"), bp_last_error());
        bp_kv_cache_free(c);
        free(kv), free(q), free(out);
    }
}

static void verify_rows(vctx *v, const char *only) {
    enum { T = 5, N = 768 };
    float *x = rnd(T * N, 3), *up = rnd(T * N, 1), *g = rnd(N, 1), *b = rnd(N, 1), *y = malloc(T * N * sizeof *y);
    int32_t pos[T] = {0, 7, 100, 4095, 60000};
    bp_norm_desc nd[3] = {{.type = BP_NORM_RMS, .n = N, .eps = 1e-6f, .gamma = g},
                          {.type = BP_NORM_LAYER, .n = N, .eps = 1e-5f, .gamma = g, .beta = b},
                          {.type = BP_NORM_GROUP, .n = N, .channels = 32, .groups = 8, .eps = 1e-5f, .gamma = g, .beta = b,
                           .silu = true}};
    const char *nn[3] = {"rms t=5 n=768", "layer +affine t=5 n=768", "group 32ch/8g +affine +silu"};
    for (int i = 0; i < 3; i++) {
        bp_op_call c = {.op = BP_OP_NORM, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
        c.u.norm.d = &nd[i], c.u.norm.x = x, c.u.norm.t = T, c.u.norm.y = y;
        each_backend(v, &c, only, "F32", nn[i], tol(BP_KIND_F32, "norm"), NULL);
    }
    bp_rope_desc rd[2] = {{.n_heads = 3, .head_dim = 256, .n_rot = 256, .layout = BP_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 1},
                          {.n_heads = 6, .head_dim = 128, .n_rot = 64, .layout = BP_ROPE_NORMAL, .freq_base = 1e4f, .freq_scale = 0.5f}};
    const char *rn[2] = {"neox 3x256", "normal 6x128 n_rot 64 scale 0.5"};
    for (int i = 0; i < 2; i++) {
        bp_op_call c = {.op = BP_OP_ROPE, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
        c.u.rope.d = &rd[i], c.u.rope.x = y, c.u.rope.t = T, c.u.rope.positions = pos;
        each_backend(v, &c, only, "F32", rn[i], tol(BP_KIND_F32, "rope"), x);
    }
    const char *an[3] = {"silu", "gelu_tanh", "gelu_erf"};
    for (int a = 0; a < 3; a++)
        for (int gl = 0; gl < 2; gl++) {
            bp_op_call c = {.op = gl ? BP_OP_GLU : BP_OP_ACT, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
            c.u.act.a = (bp_activation)a, c.u.act.x = x, c.u.act.up = gl ? up : NULL, c.u.act.n = T * N, c.u.act.y = y;
            each_backend(v, &c, only, "F32", an[a], tol(BP_KIND_F32, gl ? "glu" : "act"), NULL);
        }
    bp_op_call c = {.op = BP_OP_SOFTMAX, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
    c.u.softmax.x = x, c.u.softmax.t = T, c.u.softmax.n = N, c.u.softmax.scale = 2.0f, c.u.softmax.softcap = 5.0f;
    c.u.softmax.mask = up, c.u.softmax.y = y;
    each_backend(v, &c, only, "F32", "t=5 n=768 scale 2 softcap 5 mask", tol(BP_KIND_F32, "softmax"), NULL);
    free(x), free(up), free(g), free(b), free(y);
}

static void step_emit(void *ctx, const char *kind, const char *backend, double e, const char *path) {
    const bp_kind_info *ki = bp_kind_by_name(kind);
    emit(ctx, "step", kind, "2 layers: prefill 5 + decode 1", backend, e, tol(ki ? ki->kind : BP_KIND_F32, "step"), path);
}

int bp_verify_ops(bool json, const char *only_backend, const char *only_kind, int *failed) {
    vctx v = {.json = json, .first = true};
    if (json) printf("  \"op_results\": [\n");
    else printf("\n| backend | op | kind | shape | nmse | result | path |\n|---|---|---|---|---:|---|---|\n");
    /* Jobs are the weight seam's matvec/GEMM per kind, verified above; the op layer adds the
     * attention over every KV kind and the F32 row ops. */
#define BP_KV_KIND(NAME) \
    if (!only_kind || !strcmp(only_kind, #NAME)) verify_attention(&v, BP_KIND_##NAME, only_backend);
#include "backend/kv_kinds.def"
#undef BP_KV_KIND
    if (!only_kind || !strcmp(only_kind, "F32")) verify_rows(&v, only_backend);
    /* The whole step, per KV kind, on each backend that claims it (the CPU runs it op by op). */
    bp_verify_step(step_emit, &v, only_backend, only_kind);
    if (json) printf("\n  ],\n");
    *failed = v.failed;
    return v.cases;
}
