/* The step section of `backplane verify` (verify_ops.c calls it): a synthetic two-layer model
 * (Q8_0 matmuls, an F16 embedding, GQA, a sliding layer, a bias, the soft-cap) as a step
 * program, a 5-token prefill then a decode token, on each enabled backend that claims the step
 * for the KV kind, against the CPU running the same program node by node on its exact (scalar)
 * kernels; every logit of both steps is compared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/weight.h"
#include "kinds/kinds_internal.h"
#include "cpu/cpu.h"
#include "ops/ops_internal.h"
#include "testing/testdata.h"
#include "verify_step.h"

enum { E = 64, H = 4, KVH = 2, D = 64, F = 128, V = 96, L = 2, T = 5, NB = 8, CTX = 16 };

typedef struct model {
    bp_weight w[L * 7 + 1], embed;
    uint8_t *data[L * 7 + 2];
    float *norm[2 * L + 1], *bias;
    bp_step_node nodes[64];
} model;

static uint64_t rng = 0x5DEECE66Dull;

static float *vec(int64_t n, float amp, float base) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; v && i < n; i++) v[i] = base + amp * bp_rng_float(&rng);
    return v;
}

static bool weight(bp_weight *w, uint8_t **data, bp_kind k, int64_t rows, int64_t cols) {
    const bp_kind_traits *kt = bp_kind_traits_of(k);
    float *f = vec(rows * cols, 0.3f, 0);
    const size_t rb = (size_t)(cols / kt->info.block_elems) * kt->info.block_bytes;
    *data = malloc(rb * (size_t)rows);
    if (!f || !*data) return free(f), false;
    for (int64_t r = 0; r < rows; r++) kt->quantize(f + r * cols, *data + (size_t)r * rb, cols / kt->info.block_elems);
    if (bp_weight_init(w, k, *data, rb * (size_t)rows, rows, cols)) return free(f), false;
    free(f);
    return true;
}

static bp_step_node *node(bp_step_prog *p, bp_step_kind k, bp_step_buf dst, bp_step_buf src, int64_t r0, int64_t rows,
                          int64_t n) {
    bp_step_node *nd = &p->nodes[p->n_nodes++];
    memset(nd, 0, sizeof *nd);
    nd->kind = k, nd->dst = dst, nd->src = src, nd->r0 = r0, nd->rows = rows, nd->n = n, nd->f = 1.0f;
    return nd;
}

/* The program for t tokens (all rows' logits). */
static void program(model *m, bp_step_prog *p, int64_t t, bp_kind kv) {
    memset(p, 0, sizeof *p);
    p->nodes = m->nodes, p->cap = 64, p->t = t, p->n_out = t, p->n_batch = NB, p->n_layers = L, p->n_kv_heads = KVH;
    p->head_dim = D, p->ctx = CTX, p->kv_kind = kv, p->embed = &m->embed, p->gen = (uint64_t)t;
    const int64_t w[BP_SB_COUNT] = {E, E, H * D, KVH * D, KVH * D, H * D, E, F, F, V};
    memcpy(p->width, w, sizeof w);
    bp_step_node *nd = node(p, BP_STEP_EMBED, BP_SB_X, BP_SB_X, 0, t, E);
    nd->w = &m->embed, nd->f = 2.0f;
    for (int l = 0; l < L; l++) {
        bp_weight *lw = &m->w[l * 7];
        nd = node(p, BP_STEP_RMS_NORM, BP_SB_XN, BP_SB_X, 0, t, E), nd->vec = m->norm[2 * l], nd->f = 1e-6f;
        nd = node(p, BP_STEP_MATMUL, BP_SB_Q, BP_SB_XN, 0, t, E), nd->n_jobs = 3;
        nd->job[0].w = &lw[0], nd->job[0].dst = BP_SB_Q, nd->job[1].w = &lw[1], nd->job[1].dst = BP_SB_K;
        nd->job[2].w = &lw[2], nd->job[2].dst = BP_SB_V;
        if (l == 0) node(p, BP_STEP_ADD_VEC, BP_SB_Q, BP_SB_Q, 0, t, H * D)->vec = m->bias;
        for (int qk = 0; qk < 2; qk++) {
            nd = node(p, BP_STEP_ROPE, qk ? BP_SB_K : BP_SB_Q, qk ? BP_SB_K : BP_SB_Q, 0, t, (qk ? KVH : H) * D);
            nd->rope = (bp_rope_desc){.n_heads = qk ? KVH : H, .head_dim = D, .n_rot = D, .layout = l ? BP_ROPE_NEOX : BP_ROPE_NORMAL,
                                      .freq_base = 10000.0f, .freq_scale = 1.0f};
        }
        node(p, BP_STEP_KV_APPEND, BP_SB_K, BP_SB_K, 0, t, KVH * D)->layer = l;
        nd = node(p, BP_STEP_ATTENTION, BP_SB_ATT, BP_SB_Q, 0, t, H * D), nd->layer = l;
        nd->attn = (bp_attn_desc){.n_heads = H, .n_kv_heads = KVH, .scale = 0.125f, .causal = true, .window = l ? 3 : 0,
                                  .softcap = l ? 20.0f : 0};
        nd = node(p, BP_STEP_MATMUL, BP_SB_TMP, BP_SB_ATT, 0, t, H * D), nd->n_jobs = 1, nd->job[0].w = &lw[3];
        nd->job[0].dst = BP_SB_TMP;
        node(p, BP_STEP_ADD, BP_SB_X, BP_SB_TMP, 0, t, E);
        nd = node(p, BP_STEP_RMS_NORM, BP_SB_XN, BP_SB_X, 0, t, E), nd->vec = m->norm[2 * l + 1], nd->f = 1e-6f;
        nd = node(p, BP_STEP_MATMUL, BP_SB_GATE, BP_SB_XN, 0, t, E), nd->n_jobs = 2;
        nd->job[0].w = &lw[4], nd->job[0].dst = BP_SB_GATE, nd->job[1].w = &lw[5], nd->job[1].dst = BP_SB_UP;
        node(p, BP_STEP_GLU, BP_SB_GATE, BP_SB_GATE, 0, t, F)->act = l ? BP_GELU_TANH : BP_SILU;
        nd = node(p, BP_STEP_MATMUL, BP_SB_TMP, BP_SB_GATE, 0, t, F), nd->n_jobs = 1, nd->job[0].w = &lw[6];
        nd->job[0].dst = BP_SB_TMP;
        node(p, BP_STEP_ADD, BP_SB_X, BP_SB_TMP, 0, t, E);
    }
    nd = node(p, BP_STEP_RMS_NORM, BP_SB_XN, BP_SB_X, 0, t, E), nd->vec = m->norm[2 * L], nd->f = 1e-6f;
    nd = node(p, BP_STEP_MATMUL, BP_SB_LOGITS, BP_SB_XN, 0, t, E), nd->n_jobs = 1, nd->job[0].w = &m->w[L * 7];
    nd->job[0].dst = BP_SB_LOGITS;
    node(p, BP_STEP_SOFTCAP, BP_SB_LOGITS, BP_SB_LOGITS, 0, t, V)->f = 15.0f;
}

/* A prefill of T tokens then one decode token; logits of both into out[(T + 1) * V]. backend:
 * NULL runs the CPU (every op on the CPU), else that backend only. */
static bp_status run(model *m, bp_kind kv, const char *backend, float *out, char *path, size_t path_len) {
    bp_kv_cache_desc cd = {.n_layers = L, .n_kv_heads = KVH, .head_dim_k = D, .head_dim_v = D, .capacity = CTX,
                           .kind_k = kv, .kind_v = kv};
    bp_kv_cache *cache = NULL;
    bp_status s = bp_kv_cache_create(&cd, &cache);
    if (s) return s;
    bp_step_state *state[BP_STEP_STATES] = {0};
    float *host[BP_SB_COUNT] = {0};
    const int64_t w[BP_SB_COUNT] = {E, E, H * D, KVH * D, KVH * D, H * D, E, F, F, V};
    for (int i = 0; i < BP_SB_COUNT - 1; i++) host[i] = calloc((size_t)(NB * w[i]), sizeof(float));
    int32_t tok[T + 1] = {3, 17, 95, 0, 42, 64}, pos[T + 1];
    for (int i = 0; i <= T; i++) pos[i] = i;
    const char *prev = bp_backend_preference(NULL);
    char keep[16];
    snprintf(keep, sizeof keep, "%s", prev ? prev : "");
    bp_set_backend_preference("cpu", BP_FORCE); /* the nodes' own ops stay on the CPU */
    /* the reference: the CPU's exact kernels (the fast ones round activations to 8 bits) */
    const bp_cpu_isa isa = bp_cpu_isa_current();
    if (!backend) bp_cpu_isa_force(BP_CPU_ISA_SCALAR);
    for (int step = 0; step < 2 && !s; step++) {
        bp_step_prog p;
        const int64_t t = step ? 1 : T;
        program(m, &p, t, kv);
        bp_step_io io = {.tokens = tok + (step ? T : 0), .positions = pos + (step ? T : 0), .pos0 = step ? T : 0,
                         .logits = out + (step ? T * V : 0), .kv = cache, .state = state};
        memcpy(io.host, host, sizeof host);
        io.host[BP_SB_LOGITS] = io.logits;
        bp_run_record rec;
        s = bp_step_run_on(&p, &io, backend ? backend : "cpu", &rec);
        if (!s) bp_run_record_label(&rec, path, path_len);
    }
    bp_set_backend_preference(keep[0] ? keep : NULL, BP_PREFER);
    if (!backend) bp_cpu_isa_force(isa);
    for (int i = 0; i < BP_STEP_STATES; i++)
        if (state[i]) state[i]->free(state[i]);
    for (int i = 0; i < BP_SB_COUNT; i++) free(host[i]);
    bp_kv_cache_free(cache);
    return s;
}

static void model_free(model *m) {
    for (size_t i = 0; i < sizeof m->data / sizeof m->data[0]; i++) free(m->data[i]);
    for (size_t i = 0; i < sizeof m->norm / sizeof m->norm[0]; i++) free(m->norm[i]);
    free(m->bias);
}

static bool model_make(model *m) {
    memset(m, 0, sizeof *m);
    bool ok = weight(&m->embed, &m->data[L * 7 + 1], BP_KIND_F16, V, E);
    for (int l = 0; ok && l < L; l++) {
        const int64_t shape[7][2] = {{H * D, E}, {KVH * D, E}, {KVH * D, E}, {E, H * D}, {F, E}, {F, E}, {E, F}};
        for (int j = 0; ok && j < 7; j++)
            ok = weight(&m->w[l * 7 + j], &m->data[l * 7 + j], BP_KIND_Q8_0, shape[j][0], shape[j][1]);
    }
    ok = ok && weight(&m->w[L * 7], &m->data[L * 7], BP_KIND_Q8_0, V, E);
    for (int i = 0; ok && i < 2 * L + 1; i++) ok = (m->norm[i] = vec(E, 0.2f, 1.0f)) != NULL;
    return ok && (m->bias = vec(H * D, 0.1f, 0)) != NULL;
}

int bp_verify_step(bp_verify_step_emit emit, void *ctx, const char *only_backend, const char *only_kind) {
    model m;
    int cases = 0;
    if (!model_make(&m)) {
        model_free(&m);
        return 0;
    }
    float *ref = malloc((T + 1) * V * sizeof(float)), *got = malloc((T + 1) * V * sizeof(float));
    for (int b = 0; ref && got && b < bp_seam_slot_count(); b++) {
        const bp_seam_slot *sl = bp_seam_slot_at(b);
        if (only_backend && strcmp(only_backend, sl->caps->name)) continue;
        if (!sl->dispatch || !bp_seam_slot_enabled(b, NULL)) continue;
#define BP_KV_KIND(NAME)                                                                                              \
        if ((!only_kind || !strcmp(only_kind, #NAME)) && sl->caps->kernel(BP_OP_STEP, BP_KIND_##NAME)) {              \
            char path[400] = "";                                                                                      \
            bp_status s = run(&m, BP_KIND_##NAME, NULL, ref, path, sizeof path);                                      \
            if (!s) s = run(&m, BP_KIND_##NAME, sl->caps->name, got, path, sizeof path);                             \
            double num = 0, den = 0;                                                                                  \
            for (int i = 0; !s && i < (T + 1) * V; i++)                                                               \
                num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]), den += (double)ref[i] * ref[i];         \
            emit(ctx, #NAME, sl->caps->name, s ? INFINITY : num / den, s ? bp_last_error() : path);                   \
            cases++;                                                                                                  \
        }
#include "backend/kv_kinds.def"
#undef BP_KV_KIND
    }
    free(ref), free(got);
    for (size_t i = 0; i < sizeof m.w / sizeof m.w[0]; i++)
        for (int j = 0; j < BP_BACKEND_COUNT; j++)
            if (m.w[i].backend_free[j] && m.w[i].backend_state[j]) m.w[i].backend_free[j](m.w[i].backend_state[j]);
    model_free(&m);
    return cases;
}
