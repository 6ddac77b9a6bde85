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
 *                 or, a layer with routed experts (qwen3moe, Mixtral):
 *               r = h Wrouter (+ bias); per token the top k experts of softmax(r), weights / their
 *                 sum (gpt-oss: the top k of r, softmax over those k; its experts' biases and
 *                 clamped SwiGLU, attention sinks, YaRN: archs.def)
 *               f = sum_j w_j down_j(silu(gate_j h) * up_j h)  the MoE op: each expert's weights
 *                                                          read once for all its tokens
 *               x += f
 *   logits = (rmsnorm(x) * output_norm) Wout; soft-cap (Gemma 2-style final cap, when the file has one)
 *
 * The step is written as a program of op nodes (src/backend/step.h), once per shape (t, n_out),
 * and run through the op `step`: the CPU runs the nodes one by one through the op layer, a
 * device backend that claims the step records them once and replays them per token. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/context_internal.h"
#include "ops/ops_internal.h"

/* ---- writing the program ------------------------------------------------------------------- */

/* Each layer tensor's GGUF name after "blk.<i>." (tensors.def), for the nodes that apply it. */
#define BP_LAYER_TENSOR(field, name, matrix, rows, cols, need) static const char TN_##field[] = name;
#include "model/tensors.def"
#undef BP_LAYER_TENSOR

static bp_step_node *add(bp_step_prog *p, bp_step_kind kind, bp_step_buf dst, bp_step_buf src, int64_t r0,
                         int64_t rows, int64_t n) {
    if (p->n_nodes == p->cap) return NULL; /* sized by program_size: cannot happen */
    bp_step_node *nd = &p->nodes[p->n_nodes++];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind, nd->dst = dst, nd->src = src, nd->r0 = r0, nd->rows = rows, nd->n = n, nd->f = 1.0f;
    nd->layer = -1;
    return nd;
}

static void norm(bp_step_prog *p, bp_step_buf dst, bp_step_buf src, int64_t r0, int64_t rows, int64_t n,
                 const float *gain, const char *tensor, float eps) {
    bp_step_node *nd = add(p, BP_STEP_RMS_NORM, dst, src, r0, rows, n);
    if (nd) nd->vec = gain, nd->f = eps, nd->tensor = tensor;
}

static void bias(bp_step_prog *p, bp_step_buf dst, int64_t r0, int64_t rows, int64_t n, const float *b,
                 const char *tensor) {
    if (!b) return;
    bp_step_node *nd = add(p, BP_STEP_ADD_VEC, dst, dst, r0, rows, n);
    if (nd) nd->vec = b, nd->tensor = tensor;
}

/* One matmul node: the jobs share src's rows [r0, r0 + rows); t0..t2 name their weights. */
static void mm(bp_step_prog *p, bp_step_buf src, int64_t r0, int64_t rows, int n, bp_weight *w0, bp_step_buf d0,
               const char *t0, bp_weight *w1, bp_step_buf d1, const char *t1, bp_weight *w2, bp_step_buf d2,
               const char *t2) {
    bp_step_node *nd = add(p, BP_STEP_MATMUL, d0, src, r0, rows, w0->cols);
    if (!nd) return;
    nd->n_jobs = n, nd->tensor = t0;
    nd->job[0].w = w0, nd->job[0].dst = d0, nd->job[0].tensor = t0;
    nd->job[1].w = w1, nd->job[1].dst = d1, nd->job[1].tensor = t1;
    nd->job[2].w = w2, nd->job[2].dst = d2, nd->job[2].tensor = t2;
}

static void rope(bp_step_prog *p, const bp_model *m, bp_step_buf b, int64_t rows, int32_t heads, float base,
                 float scale) {
    const bp_hparams *hp = &m->hp;
    bp_step_node *nd = add(p, BP_STEP_ROPE, b, b, 0, rows, (int64_t)heads * hp->head_dim_k);
    if (!nd) return;
    nd->rope = (bp_rope_desc){.n_heads = heads, .head_dim = (int32_t)hp->head_dim_k, .n_rot = (int32_t)hp->n_rot,
                              .layout = m->arch->rope, .freq_base = base, .freq_scale = scale,
                              .ext_factor = hp->yarn_ext_factor, .attn_factor = hp->yarn_attn_factor,
                              .beta_fast = hp->yarn_beta_fast, .beta_slow = hp->yarn_beta_slow,
                              .n_ctx_orig = (int32_t)hp->yarn_n_ctx_orig};
    nd->rope_factors = m->rope_freqs;
    if (m->rope_long) {
        nd->rope_factors = bp_longrope_factors(m, p->ctx);
        nd->rope_attn = hp->longrope_attn;
    }
}

/* Phi-3's LongRoPE factor set for a context of n_ctx positions per sequence, chosen as llama.cpp
 * chooses it (get_rope_factors): the long factors when its per-sequence context n_ctx_seq
 * exceeds rope.scaling.original_context_length, else the short ones; once per context (every
 * program of a context is written with the context's n_ctx, which never changes). The n_ctx
 * compared is llama.cpp's, not ours as asked: llama.cpp rounds n_ctx_seq up to a multiple of 256
 * (GGML_PAD) before it chooses, and so does this, so that the same context asked of either picks
 * the same set and gives the same logits (the tests' n_ctx 64 is llama.cpp's 256). With an
 * original context that is a multiple of 256 (Phi-3's 4096) the rounding changes no choice. */
const float *bp_longrope_factors(const bp_model *m, int64_t n_ctx) {
    if (!m->rope_long) return NULL;
    const int64_t seq = (n_ctx + 255) / 256 * 256;
    return seq > m->hp.longrope_n_ctx_orig ? m->rope_long : m->rope_short;
}

/* One layer over t tokens. Only the last `keep` rows go on past the attention: every layer but
 * the last keeps all t; the last keeps the rows whose logits are wanted (none: its K and V are
 * all a later step needs), as llama.cpp's output-row selection does, which spares a prefill the
 * last layer's attention, output projection and FFN for the other rows. */
static void layer(bp_step_prog *p, const bp_model *m, int il, int64_t t, int64_t keep) {
    const bp_hparams *hp = &m->hp;
    const bp_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, D = hp->head_dim_k, H = hp->n_head, KV = hp->n_head_kv, F = hp->n_ff;
    const bool swa = hp->swa_window > 0 && hp->is_swa[il];
    const float eps = hp->rms_eps;
    const int first = p->n_nodes;
    /* attention block */
    norm(p, BP_SB_XN, BP_SB_X, 0, t, E, L->attn_norm, TN_attn_norm, eps);
    mm(p, BP_SB_XN, 0, t, 3, L->wq, BP_SB_Q, TN_wq, L->wk, BP_SB_K, TN_wk, L->wv, BP_SB_V, TN_wv);
    bias(p, BP_SB_Q, 0, t, H * D, L->bq, TN_bq);
    bias(p, BP_SB_K, 0, t, KV * D, L->bk, TN_bk);
    bias(p, BP_SB_V, 0, t, KV * D, L->bv, TN_bv);
    if (L->q_norm) norm(p, BP_SB_Q, BP_SB_Q, 0, t * H, D, L->q_norm, TN_q_norm, eps);
    if (L->k_norm) norm(p, BP_SB_K, BP_SB_K, 0, t * KV, D, L->k_norm, TN_k_norm, eps);
    /* Sliding layers use the local base and their own scaling (Gemma 3: none, linear scaling is
     * a property of the global layers' long-context extension; gpt-oss: the global YaRN). */
    float base = swa ? hp->rope_base_swa : hp->rope_base, scale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale;
    rope(p, m, BP_SB_Q, t, (int32_t)H, base, scale);
    rope(p, m, BP_SB_K, t, (int32_t)KV, base, scale);
    bp_step_node *nd = add(p, BP_STEP_KV_APPEND, BP_SB_K, BP_SB_K, 0, t, KV * D);
    if (keep == 0) goto done;
    const int64_t r0 = t - keep; /* first row carried on */
    if ((nd = add(p, BP_STEP_ATTENTION, BP_SB_ATT, BP_SB_Q, r0, keep, H * D))) {
        nd->attn = (bp_attn_desc){.n_heads = (int32_t)H, .n_kv_heads = (int32_t)KV, .scale = hp->attn_scale,
                                  .causal = true, .window = swa ? hp->swa_window : 0, .softcap = 0,
                                  .sinks = L->sinks};
    }
    mm(p, BP_SB_ATT, r0, keep, 1, L->wo, BP_SB_TMP, TN_wo, NULL, 0, NULL, NULL, 0, NULL);
    bias(p, BP_SB_TMP, r0, keep, E, L->bo, TN_bo);
    if (L->attn_post_norm) norm(p, BP_SB_TMP, BP_SB_TMP, r0, keep, E, L->attn_post_norm, TN_attn_post_norm, eps);
    add(p, BP_STEP_ADD, BP_SB_X, BP_SB_TMP, r0, keep, E);
    /* feed-forward block */
    norm(p, BP_SB_XN, BP_SB_X, r0, keep, E, L->ffn_norm, TN_ffn_norm, eps);
    if (L->experts) {
        mm(p, BP_SB_XN, r0, keep, 1, L->w_router, BP_SB_GATE, TN_w_router, NULL, 0, NULL, NULL, 0, NULL);
        bias(p, BP_SB_GATE, r0, keep, hp->n_expert, L->b_router, TN_b_router);
        if ((nd = add(p, BP_STEP_MOE, BP_SB_TMP, BP_SB_XN, r0, keep, E))) {
            nd->moe.m = L->experts, nd->moe.top_k = (int32_t)hp->n_expert_used, nd->moe.renorm = hp->expert_norm;
            nd->moe.gate = hp->expert_gate;
            nd->tensor = "ffn_*_exps";
        }
        add(p, BP_STEP_ADD, BP_SB_X, BP_SB_TMP, r0, keep, E);
        goto done;
    }
    mm(p, BP_SB_XN, r0, keep, 2, L->w_gate, BP_SB_GATE, TN_w_gate, L->w_up, BP_SB_UP, TN_w_up, NULL, 0, NULL);
    bias(p, BP_SB_GATE, r0, keep, F, L->b_gate, TN_b_gate);
    bias(p, BP_SB_UP, r0, keep, F, L->b_up, TN_b_up);
    if ((nd = add(p, BP_STEP_GLU, BP_SB_GATE, BP_SB_GATE, r0, keep, F))) nd->act = m->arch->ffn_act;
    mm(p, BP_SB_GATE, r0, keep, 1, L->w_down, BP_SB_TMP, TN_w_down, NULL, 0, NULL, NULL, 0, NULL);
    bias(p, BP_SB_TMP, r0, keep, E, L->b_down, TN_b_down);
    if (L->ffn_post_norm) norm(p, BP_SB_TMP, BP_SB_TMP, r0, keep, E, L->ffn_post_norm, TN_ffn_post_norm, eps);
    add(p, BP_STEP_ADD, BP_SB_X, BP_SB_TMP, r0, keep, E);
done:
    for (int i = first; i < p->n_nodes; i++) p->nodes[i].layer = il;
}

/* At most this many nodes per layer (norm, qkv, 3 biases, 2 q/k norms, 2 ropes, append,
 * attention, o, bias, post-norm, add, norm, gate/up, 2 biases, glu, down, bias, post-norm,
 * add), plus embedding, final norm, output, cap. */
enum { NODES_PER_LAYER = 26, NODES_FIXED = 4 };

/* The program for (t, n_out) over a context of n_batch rows, n_ctx positions and a kv cache,
 * written into p (its node array kept between shapes). */
bp_status bp_forward_program(const bp_model *m, int64_t n_batch, int64_t n_ctx, bp_kind kv, bp_step_prog *p, int64_t t,
                             int64_t n_out) {
    const bp_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    const int need = NODES_FIXED + NODES_PER_LAYER * (int)hp->n_layer;
    if (p->cap < need) {
        bp_step_node *nodes = bp_realloc(p->nodes, (size_t)need * sizeof *nodes);
        if (!nodes) return bp_fail(BP_E_NOMEM, "forward: no memory for a %d-node step", need);
        p->nodes = nodes, p->cap = need;
    }
    p->n_nodes = 0, p->t = t, p->n_out = n_out, p->n_batch = n_batch;
    p->n_layers = (int)hp->n_layer, p->n_kv_heads = (int32_t)hp->n_head_kv, p->head_dim = (int32_t)hp->head_dim_k;
    p->ctx = n_ctx, p->kv_kind = kv, p->embed = m->tok_embd;
    const int64_t QD = hp->n_head * hp->head_dim_k, KVD = hp->n_head_kv * hp->head_dim_k;
    const int64_t FG = hp->n_ff > hp->n_expert ? hp->n_ff : hp->n_expert; /* the router logits go to GATE */
    const int64_t width[BP_SB_COUNT] = {E, E, QD, KVD, KVD, QD, E, FG, hp->n_ff, V};
    memcpy(p->width, width, sizeof width);
    p->gen++;
    bp_step_node *nd = add(p, BP_STEP_EMBED, BP_SB_X, BP_SB_X, 0, t, E);
    if (nd) nd->w = m->tok_embd, nd->f = hp->emb_scale, nd->tensor = "token_embd.weight";
    for (int il = 0; il < (int)hp->n_layer; il++) layer(p, m, il, t, il == (int)hp->n_layer - 1 ? n_out : t);
    if (n_out == 0) return BP_OK;
    norm(p, BP_SB_XN, BP_SB_X, t - n_out, n_out, E, m->output_norm, "output_norm.weight", hp->rms_eps);
    mm(p, BP_SB_XN, t - n_out, n_out, 1, m->output, BP_SB_LOGITS, m->output == m->tok_embd ? "token_embd.weight" : "output.weight",
       NULL, 0, NULL, NULL, 0, NULL);
    if (hp->final_softcap > 0 && (nd = add(p, BP_STEP_SOFTCAP, BP_SB_LOGITS, BP_SB_LOGITS, 0, n_out, V)))
        nd->f = hp->final_softcap;
    return BP_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

/* One step over tokens[0..t) at positions[0..t); rows NULL: one sequence (seq 0, positions
 * c->pos..) through the seam's walk, which may give the step whole to a device; else several
 * sequences, which only the CPU runs: the step is sent to it by name and its record says so. */
static bp_status run(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out, const bp_forward_rows *rows) {
    const int64_t V = c->m->hp.n_vocab;
    /* [0] decode (t = 1), [1] the last other shape: a decode step reuses its program as is */
    bp_step_prog *p = &c->prog[t > 1];
    bp_status s;
    if ((p->t != t || p->n_out != n_out || !p->n_nodes) &&
        (s = bp_forward_program(c->m, c->n_batch, c->n_ctx, c->kv_kind, p, t, n_out)))
        return s;
    if (!rows)
        for (int64_t i = 0; i < t; i++) c->positions[i] = (int32_t)(c->pos + i);
    bp_step_io io = {.tokens = tokens, .positions = rows ? rows->positions : c->positions, .pos0 = c->pos,
                     .kv = c->kv, .state = c->step_state, .kind_rec = c->kind_rec[t > 1],
                     .kind_rec_n = BP_MODEL_MAX_KIND, .tap = c->tap, .tap_user = c->tap_user};
    if (rows) io.seq_kv = rows->seq_kv, io.row_seq = rows->row_seq, io.append_order = rows->append_order;
    io.logits = c->logits + (size_t)c->n_out * (size_t)V;
    float *host[BP_SB_COUNT] = {c->x, c->xn, c->q, c->kc, c->vc, c->att, c->tmp, c->gate, c->up, io.logits};
    memcpy(io.host, host, sizeof host);
    /* a device budget: decided once, from the decode program (as bp_plan decides it) */
    if (!rows && c->device_budget && !c->offload_decided) {
        bp_step_prog *d = &c->prog[0];
        if ((d->t != 1 || d->n_out != 1 || !d->n_nodes) &&
            (s = bp_forward_program(c->m, c->n_batch, c->n_ctx, c->kv_kind, d, 1, 1)))
            return s;
        if ((s = bp_forward_offload(d, c->device_budget, &c->offload))) return s;
        c->offload_decided = true;
    }
    const bool budget = !rows && c->offload_decided;
    const bool split = budget && c->offload.n_dev > 0 && !c->offload.whole;
    const bp_step_prog *cpu_part = NULL; /* the nodes the CPU ran, for the weight records */
    memset(&c->part_rec[t > 1], 0, sizeof c->part_rec[t > 1]);
    if (rows || (budget && c->offload.n_dev == 0)) {
        /* several sequences, or a budget too small for one layer: the CPU, by name (under a
         * budget its ops too: a device was given no memory) */
        const bool was = bp_seam_set_cpu_only(budget);
        s = bp_step_run_on(p, &io, "cpu", &c->step_rec[t > 1]);
        bp_seam_set_cpu_only(was);
        if (s) return s;
        cpu_part = p;
    } else if (split) {
        /* the CPU's layers, every op of them on the CPU; then the device's in one submission:
         * the residual crosses once */
        bp_step_prog *a = &c->part[t > 1][0], *b = &c->part[t > 1][1];
        bp_step_split(p, c->offload.n_dev, a, b);
        const bool was = bp_seam_set_cpu_only(true);
        s = bp_step_run_on(a, &io, "cpu", &c->part_rec[t > 1]);
        bp_seam_set_cpu_only(was);
        if (s) return s;
        if ((s = bp_step_run(b, &io))) return s;
        bp_op_last_record("step", &c->step_rec[t > 1]);
        cpu_part = strcmp(c->step_rec[t > 1].backend, "cpu") ? a : p;
    } else {
        if ((s = bp_step_run(p, &io))) return s;
        bp_op_last_record("step", &c->step_rec[t > 1]);
        if (!strcmp(c->step_rec[t > 1].backend, "cpu")) cpu_part = p;
    }
    c->last_traffic[t > 1] = io.traffic;
    /* per weight kind, the record of what ran its last job: the device's (written by the step),
     * or for the nodes the CPU ran the one the seam wrote into the weight; a kind both parts of
     * a split step run keeps the device's */
    bp_kind dev_kinds[32];
    const int n_dev_kinds = split && cpu_part != p ? bp_step_weight_kinds(&c->part[t > 1][1], dev_kinds, 32) : 0;
    for (int i = 0; cpu_part && i < cpu_part->n_nodes; i++)
        for (int j = 0; cpu_part->nodes[i].kind == BP_STEP_MATMUL && j < cpu_part->nodes[i].n_jobs; j++) {
            const bp_weight *w = cpu_part->nodes[i].job[j].w;
            bool dev = false;
            for (int k = 0; k < n_dev_kinds; k++) dev |= dev_kinds[k] == w->kind;
            if (!dev && (unsigned)w->kind < BP_MODEL_MAX_KIND) bp_weight_last_record(w, &c->kind_rec[t > 1][w->kind]);
        }
    c->n_out += n_out;
    return BP_OK;
}

bp_status bp_forward(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out) {
    return run(c, tokens, t, n_out, NULL);
}

bp_status bp_forward_seqs(bp_context *c, const int32_t *tokens, int64_t t, int64_t n_out, const bp_forward_rows *rows) {
    return run(c, tokens, t, n_out, rows);
}
