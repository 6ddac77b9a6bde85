/* MoE on the CPU: routes grouped by expert, so each used expert's weights are read once per
 * call whatever the number of tokens routed to it (llama.cpp's mul_mat_id groups the same way).
 *
 *   1. count routes per expert, prefix-sum, and list (token, weight) per expert in token order;
 *   2. per used expert e with n routes: gather those tokens' rows of x into X [n][h];
 *      G = X gate_e^T, U = X up_e^T, A = silu(G) * U, D = A down_e^T (gpt-oss: biases and its
 *      clamped SwiGLU, bp_moe_set_act / bp_moe_set_biases);
 *   3. y[token] += weight * D[row], expert by expert (ascending id).
 * Decode (t = 1) skips the grouping: every routed expert's gate and up share the one x.
 *
 * This is the CPU's MoE op: it runs when no backend claims (moe, kind) or MoE offload is off.
 * Where the matmuls run: gate and up of an expert whose kinds no enabled backend takes (or with
 * offload off) are CPU jobs sharing their input (src/cpu/cpu_jobs.c: one quantization of X, one
 * pool submission; at decode, all routed experts' gate and up in one submission); otherwise each
 * is bp_gemm on the expert's bp_weight, so a backend with a GEMM for the kind runs it, with its
 * named fallbacks, and the path says so. Down is bp_gemm (offload on) or bp_gemm_on "cpu".
 *
 * Extra memory per call: n_max * (2h + 3 inter) floats for X, D, G, U, A, where n_max is the
 * largest number of routes to one expert (t * top_k at most), plus (t * top_k) route entries;
 * decode: top_k * (h + 3 inter) floats. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/cpu_jobs.h"
#include "ops/moe_internal.h"
#include "cpu/op_kern.h"
#include "seam/seam_internal.h"

static bp_status gemm(bp_weight *w, bp_moe_matmul how, const float *x, int64_t n, float *y) {
    return how == BP_MOE_MATMUL_CPU ? bp_gemm_on(w, "cpu", x, n, y) : bp_gemm(w, x, n, y);
}

/* Whether expert e's gate and up run on the CPU kernels here (offload off, or no backend in the
 * seam takes their kinds): then they go to the CPU as jobs sharing one input (one quantization
 * of it, one pool submission for both), else each through bp_gemm to the backend. */
static bool cpu_gate_up(const bp_moe *m, bp_moe_matmul how, int64_t e, int64_t n) {
    if (how == BP_MOE_MATMUL_CPU) return true;
    const bp_weight *g = m->gate[e], *u = m->up[e];
    const bp_op_shape sg = {g->rows, g->cols, n}, su = {u->rows, u->cols, n};
    return bp_seam_route(BP_OP_GEMM, g->kind, g->kind, &sg, NULL, NULL, 0) < 0 &&
           bp_seam_route(BP_OP_GEMM, u->kind, u->kind, &su, NULL, NULL, 0) < 0;
}

/* G = X gate_e^T, U = X up_e^T for n rows of X. */
static bp_status gate_up(bp_moe *m, bp_moe_matmul how, int64_t e, const float *X, int64_t n, float *G, float *U,
                         char *label, size_t label_len) {
    if (cpu_gate_up(m, how, e, n)) {
        bp_matmul_job jobs[2] = {{m->gate[e], G}, {m->up[e], U}};
        return bp_cpu_jobs(X, n, jobs, 2, label, label_len);
    }
    bp_status s = bp_gemm(m->gate[e], X, n, G);
    if (!s) s = bp_gemm(m->up[e], X, n, U);
    if (!s) snprintf(label, label_len, "%s", bp_weight_last_path(m->gate[e]));
    return s;
}

/* The SiLU's table: the vector exp, or libm in exact mode (as the op layer's activations). */
static const bp_op_kern *silu_kern(void) { return bp_exact_mode() ? bp_op_kern_portable() : bp_op_kern_current(); }

/* A = act(G, U) for n rows of expert e: the vector SwiGLU for a plain layer, else the layer's
 * biases and activation (bp_moe_activate, in place in G, copied to A). */
static void activate(const bp_moe *m, int64_t e, float *G, const float *U, float *A, int64_t n) {
    if (m->act == BP_MOE_ACT_SILU && !m->b_gate && !m->b_up) {
        silu_kern()->act(BP_SILU, G, U, A, n * m->inter); /* A = silu(G) * U */
        return;
    }
    bp_moe_activate(m, e, G, U, n);
    memcpy(A, G, sizeof(float) * (size_t)(n * m->inter));
}

/* y += w * D for one row. */
static void add_scaled(float *y, const float *d, float w, int64_t h) {
    for (int64_t c = 0; c < h; c++) y[c] += w * d[c];
}

/* Decode (one token): every routed expert's gate and up from the same x, so when they all run
 * on the CPU they are one jobs submission together (2 x top_k weights, one quantization of x)
 * instead of one per weight; a repeated expert runs once with its route weights summed. */
static bp_status decode(bp_moe *m, bp_moe_matmul how, const float *x, int64_t top_k, const int32_t *ids,
                        const float *route_w, float *y, float *buf, char *label, size_t label_len, int64_t *used_out) {
    int64_t h = m->h, inter = m->inter, used = 0, ex[64];
    float ws[64];
    for (int64_t j = 0; j < top_k; j++) {
        int64_t u = 0;
        while (u < used && ex[u] != ids[j]) u++;
        if (u == used) ex[used] = ids[j], ws[used++] = 0.0f;
        ws[u] += route_w[j];
    }
    *used_out = used;
    float *G = buf, *U = G + used * inter, *A = U + used * inter, *D = A + used * inter;
    bp_matmul_job jobs[128] = {{0}}; /* (gcc 12 cannot see that 2 * used are written) */
    for (int64_t u = 0; u < used; u++) {
        jobs[2 * u] = (bp_matmul_job){m->gate[ex[u]], G + u * inter};
        jobs[2 * u + 1] = (bp_matmul_job){m->up[ex[u]], U + u * inter};
    }
    char gu[96] = "";
    bp_status s = bp_cpu_jobs(x, 1, jobs, (int)(2 * used), gu, sizeof gu);
    if (s) return s;
    for (int64_t u = 0; u < used; u++) activate(m, ex[u], G + u * inter, U + u * inter, A + u * inter, 1);
    for (int64_t u = 0; u < used && !s; u++) s = gemm(m->down[ex[u]], how, A + u * inter, 1, D + u * h);
    if (s) return s;
    for (int64_t u = 0; u < used; u++) {
        add_scaled(y, D + u * h, ws[u], h);
        bp_moe_add_down_bias(m, ex[u], ws[u], y);
    }
    snprintf(label, label_len, "gate/up %s; down %s", gu, bp_weight_last_path(m->down[ex[0]]));
    return BP_OK;
}

bp_status bp_moe_cpu(bp_moe *m, bp_moe_matmul how, const float *x, int64_t t, int64_t top_k, const int32_t *ids,
                     const float *route_w, float *y, char *label, size_t label_len) {
    int64_t nr = t * top_k, E = m->n_expert, h = m->h, inter = m->inter;
    if (nr == 0) return BP_OK;
    char mm[128] = "";
    bp_status s = BP_OK;
    if (t == 1 && top_k <= 64) {
        bool all_cpu = true;
        for (int64_t j = 0; j < top_k; j++) all_cpu &= cpu_gate_up(m, how, ids[j], 1);
        if (all_cpu) {
            int64_t used = 0;
            float *buf = bp_aligned_alloc(64, sizeof(float) * (size_t)(top_k * (h + 3 * inter)));
            s = buf ? decode(m, how, x, top_k, ids, route_w, y, buf, mm, sizeof mm, &used)
                    : bp_fail(BP_E_NOMEM, "MoE: no memory for %lld experts' activations", (long long)top_k);
            bp_free(buf);
            if (!s && label)
                snprintf(label, label_len, "CPU MoE, %lld of %lld experts; expert matmuls: %s", (long long)used,
                         (long long)E, mm);
            return s;
        }
    }
    int64_t *start = bp_calloc((size_t)E + 1, sizeof(int64_t));
    int64_t *tok = bp_malloc(sizeof(int64_t) * (size_t)nr);
    float *wt = bp_malloc(sizeof(float) * (size_t)nr);
    if (!start || !tok || !wt) {
        bp_free(start);
        bp_free(tok);
        bp_free(wt);
        return bp_fail(BP_E_NOMEM, "MoE: no memory to group %lld routes by expert", (long long)nr);
    }
    for (int64_t r = 0; r < nr; r++) start[ids[r] + 1]++;
    int64_t n_max = 0, used = 0;
    for (int64_t e = 0; e < E; e++) {
        if (start[e + 1] > n_max) n_max = start[e + 1];
        used += start[e + 1] > 0;
        start[e + 1] += start[e];
    }
    /* Fill in token order: a stable counting sort (start[e] is e's next free place). */
    for (int64_t r = 0; r < nr; r++) {
        int64_t at = start[ids[r]]++;
        tok[at] = r / top_k;
        wt[at] = route_w[r];
    }
    for (int64_t e = E; e > 0; e--) start[e] = start[e - 1]; /* back to the first place of each */
    start[0] = 0;

    float *X = bp_aligned_alloc(64, sizeof(float) * (size_t)(n_max * (2 * h + 3 * inter)));
    if (!X) {
        s = bp_fail(BP_E_NOMEM, "MoE: no memory for %lld routes to one expert (h %lld, inter %lld)", (long long)n_max,
                    (long long)h, (long long)inter);
        goto out;
    }
    float *D = X + n_max * h, *G = D + n_max * h, *U = G + n_max * inter, *A = U + n_max * inter;
    int64_t last = -1;
    for (int64_t e = 0; e < E && !s; e++) {
        int64_t r0 = start[e], n = start[e + 1] - r0;
        if (!n) continue;
        for (int64_t r = 0; r < n; r++) memcpy(X + r * h, x + tok[r0 + r] * h, sizeof(float) * (size_t)h);
        s = gate_up(m, how, e, X, n, G, U, mm, sizeof mm);
        if (s) break;
        activate(m, e, G, U, A, n);
        s = gemm(m->down[e], how, A, n, D);
        if (s) break;
        for (int64_t r = 0; r < n; r++) {
            add_scaled(y + tok[r0 + r] * h, D + r * h, wt[r0 + r], h);
            bp_moe_add_down_bias(m, e, wt[r0 + r], y + tok[r0 + r] * h);
        }
        last = e;
    }
    if (!s && last >= 0 && label)
        snprintf(label, label_len, "CPU MoE, %lld of %lld experts; expert matmuls: gate/up %s; down %s", (long long)used,
                 (long long)E, mm, bp_weight_last_path(m->down[last]));
out:
    bp_free(X);
    bp_free(start);
    bp_free(tok);
    bp_free(wt);
    return s;
}

bp_status bp_moe_cpu_op(const bp_op_call *c, char *label, size_t label_len) {
    bp_status s = bp_moe_cpu(c->u.moe.m, c->cpu_only ? BP_MOE_MATMUL_CPU : BP_MOE_MATMUL_SEAM, c->u.moe.x, c->u.moe.t,
                             c->u.moe.top_k, c->u.moe.ids, c->u.moe.route_w, c->u.moe.y, label, label_len);
    /* the run summary reads this record: it says why the experts stayed on the CPU */
    size_t n = label ? strlen(label) : 0;
    if (!s && c->cpu_only && label && n + 1 < label_len)
        snprintf(label + n, label_len - n, " (MoE offload off)");
    return s;
}
