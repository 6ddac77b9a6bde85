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
#include <string.h>

#include "core/error.h"
#include "model/context_internal.h"

/* ---- local ops (until the op layer lands) ---------------------------------------------------- */

static void rmsnorm(const float *x, const float *w, float *y, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static void rope(float *x, int64_t n_rot, int64_t pos, float base, float scale, const float *factors,
                 bp_rope_layout layout) {
    int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; i++) {
        double theta = (double)pos * scale * pow((double)base, -2.0 * (double)i / (double)n_rot);
        if (factors) theta /= factors[i];
        float c = (float)cos(theta), s = (float)sin(theta);
        int64_t a = layout == BP_ROPE_NORM ? 2 * i : i, b = layout == BP_ROPE_NORM ? 2 * i + 1 : i + half;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

static float gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

static float round_kv(bp_kind kind, float v) {
    return kind == BP_KIND_F16 ? bp_f16_to_f32(bp_f32_to_f16(v)) : v;
}

static bp_status matmul(bp_weight *w, const float *x, int64_t t, float *y, const float *bias) {
    bp_status s = t == 1 ? bp_matvec(w, x, y) : bp_gemm(w, x, t, y);
    if (s) return s;
    if (bias)
        for (int64_t i = 0; i < t; i++)
            for (int64_t r = 0; r < w->rows; r++) y[i * w->rows + r] += bias[r];
    return BP_OK;
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

static void attention(bp_context *c, int64_t il, int64_t t) {
    const bp_hparams *hp = &c->m->hp;
    const int64_t D = hp->head_dim_k, H = hp->n_head, KV = hp->n_head_kv, KVD = KV * D, QD = H * D;
    const int64_t window = hp->swa_window > 0 && hp->is_swa[il] ? hp->swa_window : 0;
    float scores[1]; (void)scores;
    for (int64_t i = 0; i < t; i++) {
        int64_t p = c->pos + i;
        int64_t lo = window ? (p - window + 1 > 0 ? p - window + 1 : 0) : 0;
        for (int64_t h = 0; h < H; h++) {
            const float *q = c->q + i * QD + h * D;
            int64_t g = h / (H / KV);
            float *o = c->att + i * QD + h * D;
            double mx = -INFINITY, sum = 0;
            double acc[1024];
            for (int64_t d = 0; d < D; d++) acc[d] = 0;
            for (int64_t j = lo; j <= p; j++) {
                const float *k = c->k[il] + j * KVD + g * D;
                double sc = 0;
                for (int64_t d = 0; d < D; d++) sc += (double)q[d] * k[d];
                sc *= hp->attn_scale;
                const float *v = c->v[il] + j * KVD + g * D;
                if (sc > mx) {
                    double r = exp(mx - sc);
                    sum *= r;
                    for (int64_t d = 0; d < D; d++) acc[d] *= r;
                    mx = sc;
                }
                double w = exp(sc - mx);
                sum += w;
                for (int64_t d = 0; d < D; d++) acc[d] += w * v[d];
            }
            for (int64_t d = 0; d < D; d++) o[d] = (float)(acc[d] / sum);
        }
    }
}

static bp_status layer(bp_context *c, int64_t il, int64_t t) {
    const bp_model *m = c->m;
    const bp_hparams *hp = &m->hp;
    const bp_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, D = hp->head_dim_k, H = hp->n_head, KV = hp->n_head_kv, F = hp->n_ff;
    const int64_t QD = H * D, KVD = KV * D;
    const bool swa = hp->swa_window > 0 && hp->is_swa[il];
    const float base = swa ? hp->rope_base_swa : hp->rope_base;
    bp_status s;
    for (int64_t i = 0; i < t; i++) rmsnorm(c->x + i * E, L->attn_norm, c->xn + i * E, E, hp->rms_eps);
    if ((s = matmul(L->wq, c->xn, t, c->q, L->bq)) || (s = matmul(L->wk, c->xn, t, c->kc, L->bk)) ||
        (s = matmul(L->wv, c->xn, t, c->vc, L->bv)))
        return s;
    for (int64_t i = 0; i < t; i++) {
        int64_t p = c->pos + i;
        for (int64_t h = 0; h < H; h++) {
            float *q = c->q + i * QD + h * D;
            if (L->q_norm) rmsnorm(q, L->q_norm, q, D, hp->rms_eps);
            rope(q, hp->n_rot, p, base, swa ? 1.0f : hp->rope_freq_scale, m->rope_freqs, m->arch->rope);
        }
        for (int64_t h = 0; h < KV; h++) {
            float *k = c->kc + i * KVD + h * D;
            if (L->k_norm) rmsnorm(k, L->k_norm, k, D, hp->rms_eps);
            rope(k, hp->n_rot, p, base, swa ? 1.0f : hp->rope_freq_scale, m->rope_freqs, m->arch->rope);
        }
        for (int64_t j = 0; j < KVD; j++) {
            c->k[il][p * KVD + j] = round_kv(c->kv_kind, c->kc[i * KVD + j]);
            c->v[il][p * KVD + j] = round_kv(c->kv_kind, c->vc[i * KVD + j]);
        }
    }
    attention(c, il, t);
    if ((s = matmul(L->wo, c->att, t, c->tmp, L->bo))) return s;
    for (int64_t i = 0; i < t; i++) {
        float *o = c->tmp + i * E, *x = c->x + i * E;
        if (L->attn_post_norm) rmsnorm(o, L->attn_post_norm, o, E, hp->rms_eps);
        for (int64_t j = 0; j < E; j++) x[j] += o[j];
        rmsnorm(x, L->ffn_norm, c->xn + i * E, E, hp->rms_eps);
    }
    if ((s = matmul(L->w_gate, c->xn, t, c->gate, L->b_gate)) || (s = matmul(L->w_up, c->xn, t, c->up, L->b_up)))
        return s;
    for (int64_t i = 0; i < t * F; i++)
        c->gate[i] = (m->arch->ffn_act == BP_FFN_GELU ? gelu_tanh(c->gate[i]) : silu(c->gate[i])) * c->up[i];
    if ((s = matmul(L->w_down, c->gate, t, c->tmp, L->b_down))) return s;
    for (int64_t i = 0; i < t; i++) {
        float *o = c->tmp + i * E, *x = c->x + i * E;
        if (L->ffn_post_norm) rmsnorm(o, L->ffn_post_norm, o, E, hp->rms_eps);
        for (int64_t j = 0; j < E; j++) x[j] += o[j];
    }
    return BP_OK;
}

bp_status bp_forward(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out) {
    const bp_model *m = c->m;
    const bp_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    bp_status s = embed(c, tokens, t);
    if (s) return s;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if ((s = layer(c, il, t))) return s;
    if (n_out == 0) return BP_OK;
    const float *xl = c->x + (t - n_out) * E;
    for (int64_t i = 0; i < n_out; i++) rmsnorm(xl + i * E, m->output_norm, c->xn + i * E, E, hp->rms_eps);
    float *out = c->logits + (size_t)c->n_out * (size_t)V;
    if ((s = matmul(m->output, c->xn, n_out, out, NULL))) return s;
    if (hp->final_softcap > 0)
        for (int64_t i = 0; i < n_out * V; i++) out[i] = hp->final_softcap * tanhf(out[i] / hp->final_softcap);
    c->n_out += n_out;
    return BP_OK;
}
