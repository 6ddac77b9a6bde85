/* The engine: one thread, N slots over one context of N sequences (slot i is sequence i).
 * Every step is one bp_context_decode over every active slot: a decoding slot adds its last
 * sampled token, a prefilling slot the next part of its prompt (at most `chunk` prompt tokens
 * per step over all slots, so a long prompt does not stall the slots that are decoding). A
 * request waiting in the queue takes a free slot at the start of a step; a slot keeps the
 * tokens of its last request, and a new prompt that starts with them reuses that prefix. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "serve.h"

typedef struct slot {
    serve_request *r;
    int64_t fed;          /* prompt tokens in the sequence */
    bp_token last;        /* the token to feed next while decoding */
    bool decoding;
    bp_sampler *smp;
    bp_stopper *stop;
    int64_t row;          /* this step: the batch row whose logits are the slot's, or -1 */
} slot;

struct serve_engine {
    bp_model *m;
    const bp_tokenizer *tok;
    bp_context *c;
    serve_config cfg;
    int32_t n_vocab;
    pthread_t th;
    bool running, stopping;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    serve_request **queue; /* FIFO of cfg.queue */
    int q_head, q_n;
    slot *slots;
    int32_t *tok_b, *seq_b;
    int8_t *want_b;
    int64_t cap_b;
    bp_cli_buf piece;
};

serve_request *serve_request_new(void) {
    serve_request *r = calloc(1, sizeof *r);
    if (r) pthread_cond_init(&r->cv, NULL);
    return r;
}

void serve_request_free(serve_request *r) {
    if (!r) return;
    free(r->prompt);
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    for (int64_t i = 0; i < r->n_lp; i++) {
        free(r->lp[i].text);
        for (int k = 0; k < r->lp[i].n_top; k++) free(r->lp[i].top[k].text);
    }
    free(r->lp);
    free(r->text.p);
    free(r->bias_ids);
    free(r->bias);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* Under the mutex: one reference fewer; the last frees. */
static void unref(serve_request *r) {
    if (--r->refs == 0) serve_request_free(r);
}

pthread_mutex_t *serve_engine_mutex(serve_engine *e) { return &e->mu; }
int64_t serve_engine_ctx(const serve_engine *e) { return e->cfg.ctx; }

void serve_engine_counts(serve_engine *e, int *idle, int *busy, int *queued) {
    pthread_mutex_lock(&e->mu);
    int b = 0;
    for (int i = 0; i < e->cfg.parallel; i++) b += e->slots[i].r != NULL;
    *idle = e->cfg.parallel - b, *busy = b, *queued = e->q_n;
    pthread_mutex_unlock(&e->mu);
}

bool serve_engine_submit(serve_engine *e, serve_request *r) {
    pthread_mutex_lock(&e->mu);
    bool ok = !e->stopping && e->q_n < e->cfg.queue;
    if (ok) {
        r->refs = 2;
        e->queue[(e->q_head + e->q_n++) % e->cfg.queue] = r;
        pthread_cond_signal(&e->wake);
    }
    pthread_mutex_unlock(&e->mu);
    return ok;
}

void serve_engine_release(serve_engine *e, serve_request *r) {
    pthread_mutex_lock(&e->mu);
    if (!r->done) r->cancelled = true;
    pthread_cond_signal(&e->wake);
    unref(r);
    pthread_mutex_unlock(&e->mu);
}

/* Under the mutex: r ends (finish NULL with error set: a failure); waiters woken. */
static void finish(serve_request *r, const char *finish, const char *error) {
    r->done = true;
    r->finish = finish;
    if (error) snprintf(r->error, sizeof r->error, "%s", error);
    pthread_cond_broadcast(&r->cv);
}

static void slot_clear(serve_engine *e, slot *s) {
    bp_sampler_free(s->smp);
    bp_stopper_free(s->stop);
    s->smp = NULL, s->stop = NULL;
    if (s->r) unref(s->r);
    s->r = NULL;
    (void)e;
}

/* Under the mutex: give r slot s; the longest prefix of its prompt the slot's sequence already
 * holds is kept (at least one prompt token is fed, for its logits). */
static const char *slot_take(serve_engine *e, slot *s, serve_request *r, int32_t seq) {
    if (bp_sampler_create(&r->sp, e->n_vocab, &s->smp) ||
        (r->n_bias && bp_sampler_set_logit_bias(s->smp, r->bias_ids, r->bias, r->n_bias)) ||
        bp_stopper_create((const char *const *)r->stops, r->n_stops, r->max_tokens, &s->stop)) {
        bp_sampler_free(s->smp);
        s->smp = NULL;
        return bp_last_error();
    }
    int64_t held = 0, keep = 0;
    const int32_t *have = bp_context_seq_tokens(e->c, seq, &held);
    while (keep < held && keep < r->n_prompt - 1 && have[keep] == r->prompt[keep]) keep++;
    /* the tokens after the kept ones go (the position of the first of them: a sequence with a
     * hole has its tokens at other positions than their indices) */
    if (keep < held) bp_context_seq_rm(e->c, seq, bp_context_seq_token_pos(e->c, seq, keep), -1);
    s->r = r, s->fed = keep, s->decoding = false;
    r->started = true;
    return NULL;
}

static bool grow_batch(serve_engine *e, int64_t n) {
    if (n <= e->cap_b) return true;
    int32_t *t = realloc(e->tok_b, (size_t)n * sizeof *t), *q = t ? realloc(e->seq_b, (size_t)n * sizeof *q) : NULL;
    if (t) e->tok_b = t;
    if (q) e->seq_b = q;
    int8_t *w = q ? realloc(e->want_b, (size_t)n) : NULL;
    if (w) e->want_b = w;
    if (!t || !q || !w) return false;
    e->cap_b = n;
    return true;
}

/* The log-probabilities of token tok under logits (text[0..len) its piece; outside the mutex:
 * they scan the vocabulary). False when they could not be made. */
static bool make_logprob(serve_engine *e, const serve_request *r, bp_sampler *smp, const float *lg, bp_token tok,
                         const char *text, size_t len, serve_logprob *l) {
    memset(l, 0, sizeof *l);
    bp_logprob top[SERVE_MAX_TOP_LOGPROBS];
    if (bp_sampler_logprobs(smp, lg, tok, r->top_logprobs, &l->logprob, top)) return false;
    if (!(l->text = malloc(len + 1))) return false;
    memcpy(l->text, text, len);
    l->text[len] = 0, l->len = len;
    for (int k = 0; k < r->top_logprobs; k++) {
        size_t n = 0;
        if (bp_cli_piece(e->tok, top[k].id, false, &e->piece, &n)) break;
        if (!(l->top[k].text = malloc(n + 1))) break;
        memcpy(l->top[k].text, e->piece.p, n);
        l->top[k].text[n] = 0, l->top[k].len = n, l->top[k].logprob = top[k].logprob;
        l->n_top = k + 1;
    }
    return true;
}

/* Under the mutex: l appended to r's log-probabilities (freed when there is no room). */
static void add_logprob(serve_request *r, serve_logprob *l) {
    if (r->n_lp == r->lp_cap) {
        int64_t cap = r->lp_cap ? 2 * r->lp_cap : 64;
        serve_logprob *p = realloc(r->lp, (size_t)cap * sizeof *p);
        if (!p) {
            free(l->text);
            for (int k = 0; k < l->n_top; k++) free(l->top[k].text);
            return;
        }
        r->lp = p, r->lp_cap = cap;
    }
    r->lp[r->n_lp++] = *l;
}

/* After a step: sample a slot that got logits, show its text, end it when it stops. */
static void after_step(serve_engine *e, int32_t seq, slot *s) {
    serve_request *r = s->r;
    const float *lg = bp_context_batch_logits(e->c, s->row);
    bp_token tok = 0;
    char err[256] = "";
    if (!lg || bp_sampler_sample(s->smp, lg, &tok) || bp_sampler_accept(s->smp, tok))
        snprintf(err, sizeof err, "sampling: %s", bp_last_error());
    const bool eog = !err[0] && !r->ignore_eos && bp_tokenizer_is_eog(e->tok, tok);
    serve_logprob lp;
    bool have_lp = false;
    size_t n = 0;
    if (!err[0] && r->logprobs && !eog) {
        if (bp_cli_piece(e->tok, tok, false, &e->piece, &n) == BP_OK) {
            char *copy = malloc(n + 1);
            if (copy) {
                memcpy(copy, e->piece.p, n);
                have_lp = make_logprob(e, r, s->smp, lg, tok, copy, n, &lp);
                free(copy);
            }
        }
    }
    if (!err[0] && bp_cli_piece(e->tok, tok, false, &e->piece, &n))
        snprintf(err, sizeof err, "detokenizing: %s", bp_last_error());
    pthread_mutex_lock(&e->mu);
    if (have_lp) add_logprob(r, &lp);
    if (err[0]) {
        finish(r, NULL, err);
    } else {
        const char *show;
        size_t show_n;
        bp_stop_reason why = bp_stopper_push(s->stop, e->piece.p, n, eog, &show, &show_n);
        if (show_n) bp_cli_buf_add(&r->text, show, show_n);
        r->n_gen = bp_stopper_count(s->stop) - (why == BP_STOP_EOG);
        /* room for the next token: a full sequence ends with "length" */
        if (!why && bp_context_seq_pos(e->c, seq) >= e->cfg.ctx) {
            bp_stopper_push(s->stop, "", 0, true, &show, &show_n); /* shows what was held */
            if (show_n) bp_cli_buf_add(&r->text, show, show_n);
            why = BP_STOP_LENGTH;
        }
        pthread_cond_broadcast(&r->cv);
        if (why) finish(r, bp_stop_reason_name(why), NULL);
        s->last = tok, s->decoding = true;
    }
    if (r->done) slot_clear(e, s);
    pthread_mutex_unlock(&e->mu);
}

/* One step over every active slot; false when there was nothing to do. */
static bool step(serve_engine *e) {
    const int P = e->cfg.parallel;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < P; i++) { /* the cancelled go first: their slots take the queue */
        slot *s = &e->slots[i];
        if (s->r && (s->r->cancelled || e->stopping)) {
            finish(s->r, NULL, e->stopping ? "the server is shutting down" : "cancelled");
            slot_clear(e, s);
        }
    }
    for (int i = 0; i < P && e->q_n; i++) {
        if (e->slots[i].r) continue;
        serve_request *r = e->queue[e->q_head];
        e->q_head = (e->q_head + 1) % e->cfg.queue, e->q_n--;
        if (r->cancelled) {
            finish(r, NULL, "cancelled");
            unref(r);
            i--;
            continue;
        }
        const char *err = slot_take(e, &e->slots[i], r, i);
        if (err) {
            finish(r, NULL, err);
            unref(r);
        }
    }
    pthread_mutex_unlock(&e->mu);
    int64_t n = 0, budget = e->cfg.chunk;
    if (!grow_batch(e, P + budget)) return false;
    for (int i = 0; i < P; i++) {
        slot *s = &e->slots[i];
        s->row = -1;
        if (!s->r) continue;
        if (s->decoding) {
            e->tok_b[n] = s->last, e->seq_b[n] = i, e->want_b[n] = 1;
            s->row = n++;
            continue;
        }
        for (; budget > 0 && s->fed < s->r->n_prompt; budget--, s->fed++) {
            e->tok_b[n] = s->r->prompt[s->fed], e->seq_b[n] = i;
            e->want_b[n] = s->fed == s->r->n_prompt - 1;
            if (e->want_b[n]) s->row = n;
            n++;
        }
    }
    if (n == 0) return false;
    bp_batch b = {.n = n, .tokens = e->tok_b, .seq = e->seq_b, .logits = e->want_b};
    bp_status st = bp_context_decode(e->c, &b);
    if (st) {
        char msg[256];
        snprintf(msg, sizeof msg, "the forward pass failed: %s", bp_last_error());
        pthread_mutex_lock(&e->mu);
        for (int i = 0; i < P; i++)
            if (e->slots[i].r) {
                finish(e->slots[i].r, NULL, msg);
                bp_context_seq_rm(e->c, i, 0, -1);
                slot_clear(e, &e->slots[i]);
            }
        pthread_mutex_unlock(&e->mu);
        return true;
    }
    for (int i = 0; i < P; i++)
        if (e->slots[i].r && e->slots[i].row >= 0) after_step(e, i, &e->slots[i]);
    return true;
}

static void *engine_main(void *arg) {
    serve_engine *e = arg;
    for (;;) {
        if (step(e)) continue;
        pthread_mutex_lock(&e->mu);
        bool busy = e->q_n > 0;
        for (int i = 0; i < e->cfg.parallel; i++) busy |= e->slots[i].r != NULL;
        if (e->stopping && !busy) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        if (!busy) pthread_cond_wait(&e->wake, &e->mu);
        pthread_mutex_unlock(&e->mu);
    }
    return NULL;
}

bp_status serve_engine_start(bp_model *m, const bp_tokenizer *tok, const serve_config *cfg, serve_engine **out) {
    *out = NULL;
    serve_engine *e = calloc(1, sizeof *e);
    if (!e) return bp_fail(BP_E_NOMEM, "serve: no memory");
    e->m = m, e->tok = tok, e->cfg = *cfg;
    bp_model_info info;
    bp_model_get_info(m, &info);
    e->n_vocab = (int32_t)info.n_vocab;
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = cfg->ctx, cp.kv_kind = cfg->kv_kind, cp.n_seq_max = cfg->parallel;
    cp.n_batch = cfg->chunk + cfg->parallel;
    bp_status s = bp_context_create(m, &cp, &e->c);
    e->slots = calloc((size_t)cfg->parallel, sizeof *e->slots);
    e->queue = calloc((size_t)cfg->queue, sizeof *e->queue);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    if (!s && (!e->slots || !e->queue)) s = bp_fail(BP_E_NOMEM, "serve: no memory");
    if (!s && pthread_create(&e->th, NULL, engine_main, e)) s = bp_fail(BP_E_NOMEM, "serve: cannot start the engine");
    if (s) {
        serve_engine_free(e);
        return s;
    }
    e->running = true;
    *out = e;
    return BP_OK;
}

void serve_engine_stop(serve_engine *e) {
    if (!e || !e->running) return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    while (e->q_n) { /* the queued end now; the running end at the next step */
        serve_request *r = e->queue[e->q_head];
        e->q_head = (e->q_head + 1) % e->cfg.queue, e->q_n--;
        finish(r, NULL, "the server is shutting down");
        unref(r);
    }
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->th, NULL);
    e->running = false;
}

void serve_engine_free(serve_engine *e) {
    if (!e) return;
    serve_engine_stop(e);
    for (int i = 0; e->slots && i < e->cfg.parallel; i++) slot_clear(e, &e->slots[i]);
    bp_context_free(e->c);
    free(e->slots);
    free(e->queue);
    free(e->tok_b);
    free(e->seq_b);
    free(e->want_b);
    free(e->piece.p);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->wake);
    free(e);
}
