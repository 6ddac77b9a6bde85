/* The forward pass: one step over t tokens, every architecture in archs.def driven by its row.
 *
 *   x = embed(tokens) * emb_scale
 *   per layer:  h = rmsnorm(x) * attn_norm
 *               q, k, v = h Wq, h Wk, h Wv (+ biases)        one matmul submission
 *               q, k = rmsnorm per head (q/k norm archs); RoPE (layer's base)
 *               a = attention(q, cache + k, v) Wo (+ bo); post-norm (Gemma)
 *               x += a
 *               h = rmsnorm(x) * ffn_norm
 *               g, u = h Wgate, h Wup                      one matmul submission
 *               f = (act(g) * u) Wdown; post-norm (Gemma)
 *               x += f
 *   logits = (rmsnorm(x) * output_norm) Wout; soft-cap (Gemma 2-style final cap, when the file has one) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/context_internal.h"
#include "model/rope_factors.h"

/* Elementwise pieces too small to be ops: bias and residual adds, the final soft-cap. */
static void add_rows(float *y, const float *b, int64_t t, int64_t n) {
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < n; j++) y[i * n + j] += b[j];
}

static void add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

/* ---- the step ------------------------------------------------------------------------------- */

static bp_status embed(bp_context *c, const int32_t *tokens, int64_t t) {
    const bp_model *m = c->m;
    const bp_weight *e = m->tok_embd;
    const int64_t E = m->hp.n_embd;
    for (int64_t i = 0; i < t; i++) {
        float *x = c->x + i * E;
        bp_status s = bp_dequantize(e->kind, e->data + (size_t)tokens[i] * e->row_bytes, e->row_bytes, x, E);
        if (s) return s;
        if (m->hp.emb_scale != 1.0f)
            for (int64_t j = 0; j < E; j++) x[j] *= m->hp.emb_scale;
    }
    return BP_OK;
}

/* One matmul submission; keeps, per weight kind, the record of what ran its last job (the seam
 * writes each job's record into its weight where the job ran). */
static bp_status mm(bp_context *c, const float *x, int64_t t, bp_matmul_job *jobs, int n) {
    bp_status s = bp_matmul(x, t, jobs, n);
    if (s) return s;
    for (int i = 0; i < n; i++) {
        unsigned k = (unsigned)jobs[i].w->kind;
        if (k < BP_MODEL_MAX_KIND) bp_weight_last_record(jobs[i].w, &c->kind_rec[t > 1][k]);
    }
    return BP_OK;
}

/* RoPE of Q and K: the op, or the model's own with Llama 3 frequency factors (rope_factors.c). */
static bp_status rope(const bp_context *c, float *x, int64_t t, int32_t heads, float base, float scale) {
    const bp_hparams *hp = &c->m->hp;
    bp_rope_desc d = {.n_heads = heads, .head_dim = (int32_t)hp->head_dim_k, .n_rot = (int32_t)hp->n_rot,
                      .layout = c->m->arch->rope, .freq_base = base, .freq_scale = scale};
    if (c->m->rope_freqs) return bp_model_rope_factors(&d, c->m->rope_freqs, x, t, c->positions);
    return bp_rope(&d, x, t, c->positions);
}

/* One layer over t tokens. Only the last `keep` rows go on past the attention: every layer but
 * the last keeps all t; the last keeps the rows whose logits are wanted (none: its K and V are
 * all a later step needs), as llama.cpp's output-row selection does, which spares a prefill the
 * last layer's attention, output projection and FFN for the other rows. */
static bp_status layer(bp_context *c, int il, int64_t t, int64_t keep) {
    const bp_model *m = c->m;
    const bp_hparams *hp = &m->hp;
    const bp_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, D = hp->head_dim_k, H = hp->n_head, KV = hp->n_head_kv, F = hp->n_ff;
    const bool swa = hp->swa_window > 0 && hp->is_swa[il];
    const float eps = hp->rms_eps;
    bp_status s;
    /* attention block */
    if ((s = bp_rms_norm(c->x, t, E, L->attn_norm, eps, c->xn))) return s;
    bp_matmul_job qkv[3] = {{L->wq, c->q}, {L->wk, c->kc}, {L->wv, c->vc}};
    if ((s = mm(c, c->xn, t, qkv, 3))) return s;
    if (L->bq) add_rows(c->q, L->bq, t, H * D);
    if (L->bk) add_rows(c->kc, L->bk, t, KV * D);
    if (L->bv) add_rows(c->vc, L->bv, t, KV * D);
    if (L->q_norm && (s = bp_rms_norm(c->q, t * H, D, L->q_norm, eps, c->q))) return s;
    if (L->k_norm && (s = bp_rms_norm(c->kc, t * KV, D, L->k_norm, eps, c->kc))) return s;
    /* Sliding layers use the local base and no position scaling (Gemma 3: linear scaling is a
     * property of the global layers' long-context extension). */
    float base = swa ? hp->rope_base_swa : hp->rope_base, scale = swa ? 1.0f : hp->rope_freq_scale;
    if ((s = rope(c, c->q, t, (int32_t)H, base, scale)) || (s = rope(c, c->kc, t, (int32_t)KV, base, scale))) return s;
    if ((s = bp_kv_cache_append(c->kv, il, c->kc, c->vc, t, c->pos))) return s;
    if (keep == 0) return BP_OK;
    const int64_t r0 = t - keep; /* first row carried on */
    float *x = c->x + r0 * E;
    bp_attn_desc ad = {.n_heads = (int32_t)H, .n_kv_heads = (int32_t)KV, .scale = hp->attn_scale, .causal = true,
                       .window = swa ? hp->swa_window : 0, .softcap = 0};
    if ((s = bp_attention(&ad, c->q + r0 * H * D, keep, c->positions + r0, c->kv, il, c->att))) return s;
    bp_matmul_job o = {L->wo, c->tmp};
    if ((s = mm(c, c->att, keep, &o, 1))) return s;
    if (L->bo) add_rows(c->tmp, L->bo, keep, E);
    if (L->attn_post_norm && (s = bp_rms_norm(c->tmp, keep, E, L->attn_post_norm, eps, c->tmp))) return s;
    add(x, c->tmp, keep * E);
    /* feed-forward block */
    if ((s = bp_rms_norm(x, keep, E, L->ffn_norm, eps, c->xn))) return s;
    bp_matmul_job gu[2] = {{L->w_gate, c->gate}, {L->w_up, c->up}};
    if ((s = mm(c, c->xn, keep, gu, 2))) return s;
    if (L->b_gate) add_rows(c->gate, L->b_gate, keep, F);
    if (L->b_up) add_rows(c->up, L->b_up, keep, F);
    if ((s = bp_glu(m->arch->ffn_act, c->gate, c->up, keep * F, c->gate))) return s;
    bp_matmul_job down = {L->w_down, c->tmp};
    if ((s = mm(c, c->gate, keep, &down, 1))) return s;
    if (L->b_down) add_rows(c->tmp, L->b_down, keep, E);
    if (L->ffn_post_norm && (s = bp_rms_norm(c->tmp, keep, E, L->ffn_post_norm, eps, c->tmp))) return s;
    add(x, c->tmp, keep * E);
    return BP_OK;
}

bp_status bp_forward(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out) {
    const bp_model *m = c->m;
    const bp_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    bp_status s = embed(c, tokens, t);
    if (s) return s;
    for (int64_t i = 0; i < t; i++) c->positions[i] = (int32_t)(c->pos + i);
    for (int il = 0; il < (int)hp->n_layer; il++)
        if ((s = layer(c, il, t, il == (int)hp->n_layer - 1 ? n_out : t))) return s;
    if (n_out == 0) return BP_OK;
    if ((s = bp_rms_norm(c->x + (t - n_out) * E, n_out, E, m->output_norm, hp->rms_eps, c->xn))) return s;
    float *out = c->logits + (size_t)c->n_out * (size_t)V;
    bp_matmul_job job = {m->output, out};
    if ((s = mm(c, c->xn, n_out, &job, 1))) return s;
    if (hp->final_softcap > 0)
        for (int64_t i = 0; i < n_out * V; i++) out[i] = hp->final_softcap * tanhf(out[i] / hp->final_softcap);
    c->n_out += n_out;
    return BP_OK;
}
