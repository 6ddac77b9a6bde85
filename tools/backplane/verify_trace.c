/* backplane verify MODEL --trace: which op of the step first leaves its tolerance.
 *
 *   1. the backend runs one prefill of the text's first tokens with a step tap (src/backend/
 *      step.h): after every node, its output -- read where it ran: the CPU's buffers, or a
 *      device step's buffers copied out node by node -- is kept;
 *   2. the reference path (scalar kernels, exact mode, the backend's KV kind) runs the same
 *      program on the CPU with a tap that compares each node's output with the backend's and
 *      then overwrites it with the backend's, so every reference node starts from exactly the
 *      inputs the backend's node had. Each comparison is then that one op's error, held to the
 *      op's own bound: drift carried in from earlier ops is not charged to a later one.
 *
 * A KV append has no float output: its keys and values are compared as the layer's attention
 * output (the reference appends the backend's K and V to its own cache of the same kind). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backplane_model.h"
#include "backplane_tokenizer.h"
#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"
#include "model/context_internal.h"
#include "testing/tolerance.h"
#include "verify_trace.h"

/* Per node kind: its name in the report, and the tolerance row its output is held to. */
static const struct { const char *name, *tol; } kinds[BP_STEP_KIND_COUNT] = {
    [BP_STEP_EMBED] = {"embed", "embed"},         [BP_STEP_RMS_NORM] = {"rms_norm", "norm"},
    [BP_STEP_MATMUL] = {"matmul", "jobs"},        [BP_STEP_ADD_VEC] = {"add_bias", "add"},
    [BP_STEP_ADD] = {"add", "add"},               [BP_STEP_ROPE] = {"rope", "rope"},
    [BP_STEP_KV_APPEND] = {"kv_append", NULL},    [BP_STEP_ATTENTION] = {"attention", "attention"},
    [BP_STEP_GLU] = {"glu", "glu"},               [BP_STEP_SOFTCAP] = {"softcap", "act"},
};
static const char *const buf_names[BP_SB_COUNT] = {"X", "XN", "Q", "K", "V", "ATT", "TMP", "GATE", "UP", "LOGITS"};

/* One output of one node: where it lies in the step's buffers. */
typedef struct out_ref {
    bp_step_buf buf;
    int64_t off, count;   /* floats from the buffer's start */
    float *where;         /* in this io */
    const char *tensor;
    bp_kind kind;         /* the kind its tolerance row is taken for */
} out_ref;

/* The outputs of node i (0, 1, or a matmul's jobs) in io; returns how many. */
static int outputs(const bp_step_prog *p, int i, bp_step_io *io, out_ref *o) {
    const bp_step_node *nd = &p->nodes[i];
    if (nd->kind == BP_STEP_KV_APPEND) return 0;
    if (nd->kind == BP_STEP_MATMUL) {
        for (int j = 0; j < nd->n_jobs; j++) {
            const bp_step_buf d = nd->job[j].dst;
            o[j].buf = d, o[j].off = d == BP_SB_LOGITS ? 0 : nd->r0 * p->width[d], o[j].count = nd->rows * p->width[d];
            o[j].where = (d == BP_SB_LOGITS ? io->logits : io->host[d]) + o[j].off;
            o[j].tensor = nd->job[j].tensor, o[j].kind = nd->job[j].w->kind;
        }
        return nd->n_jobs;
    }
    const bp_step_buf d = nd->dst;
    o->buf = d, o->off = d == BP_SB_LOGITS ? 0 : nd->r0 * nd->n, o->count = nd->rows * nd->n;
    o->where = (d == BP_SB_LOGITS ? io->logits : io->host[d]) + o->off;
    o->tensor = nd->tensor;
    o->kind = nd->kind == BP_STEP_EMBED ? nd->w->kind : nd->kind == BP_STEP_ATTENTION ? p->kv_kind : BP_KIND_F32;
    return 1;
}

typedef struct capture {
    int n, cap;
    struct { int node; int64_t count; float *v; } *o;
    bool nomem;
} capture;

static void tap_capture(void *user, const bp_step_prog *p, int node, bp_step_io *io) {
    capture *c = user;
    out_ref o[3];
    const int n = outputs(p, node, io, o);
    for (int j = 0; j < n && !c->nomem; j++) {
        if (c->n == c->cap) {
            int nc = c->cap ? 2 * c->cap : 256;
            void *g = realloc(c->o, (size_t)nc * sizeof *c->o);
            if (!g) {
                c->nomem = true;
                return;
            }
            c->o = g, c->cap = nc;
        }
        float *v = malloc((size_t)o[j].count * sizeof(float));
        if (!v) {
            c->nomem = true;
            return;
        }
        memcpy(v, o[j].where, (size_t)o[j].count * sizeof(float));
        c->o[c->n].node = node, c->o[c->n].count = o[j].count, c->o[c->n].v = v;
        c->n++;
    }
}

typedef struct compare {
    const capture *cand;
    int next;             /* the candidate's next output */
    const int32_t *tok;
    bp_trace_result *r;
    bool mismatch;        /* the programs differ (cannot happen: the same model and shape) */
} compare;

static void describe(bp_trace_op *t, const bp_step_prog *p, int node, const out_ref *o, double nmse, double bound,
                     int64_t worst_e, const int32_t *tok) {
    const bp_step_node *nd = &p->nodes[node];
    t->node = node, t->layer = nd->layer, t->op = kinds[nd->kind].name, t->tol_op = kinds[nd->kind].tol;
    t->tol_kind = bp_kind_lookup((uint32_t)o->kind)->name;
    if (o->tensor && nd->layer >= 0) snprintf(t->tensor, sizeof t->tensor, "blk.%d.%s", nd->layer, o->tensor);
    else if (o->tensor) snprintf(t->tensor, sizeof t->tensor, "%s", o->tensor);
    else snprintf(t->tensor, sizeof t->tensor, "%s%s", nd->kind == BP_STEP_ADD ? "residual " : "", buf_names[o->buf]);
    t->nmse = nmse, t->bound = bound;
    /* buffer rows are positions; the logits' rows are the last n_out positions */
    t->pos = (o->off + worst_e) / p->width[o->buf] + (o->buf == BP_SB_LOGITS ? p->t - p->n_out : 0);
    t->token = tok[t->pos];
}

static void tap_compare(void *user, const bp_step_prog *p, int node, bp_step_io *io) {
    compare *c = user;
    out_ref o[3];
    const int n = outputs(p, node, io, o);
    for (int j = 0; j < n; j++) {
        if (c->next >= c->cand->n || c->cand->o[c->next].node != node || c->cand->o[c->next].count != o[j].count) {
            c->mismatch = true;
            return;
        }
        const float *got = c->cand->o[c->next++].v;
        const double nmse = bp_nmse(got, o[j].where, (size_t)o[j].count);
        const double bound = bp_tolerance_nmse(o[j].kind, kinds[p->nodes[node].kind].tol);
        int64_t we = 0;
        double wd = -1;
        for (int64_t e = 0; e < o[j].count; e++) {
            const double d = fabs((double)got[e] - (double)o[j].where[e]);
            if (!(d <= wd)) wd = d, we = e; /* a NaN is the worst */
        }
        bp_trace_result *r = c->r;
        r->compared++;
        const double ratio = bound > 0 ? nmse / bound : INFINITY;
        if (!(ratio <= 1) && !r->found) {
            r->found = true;
            describe(&r->first, p, node, &o[j], nmse, bound, we, c->tok);
        }
        if (!(ratio <= (r->worst.bound > 0 ? r->worst.nmse / r->worst.bound : -1)))
            describe(&r->worst, p, node, &o[j], nmse, bound, we, c->tok);
        memcpy(o[j].where, got, (size_t)o[j].count * sizeof(float)); /* the next node starts where the backend's did */
    }
}

static void capture_free(capture *c) {
    for (int i = 0; i < c->n; i++) free(c->o[i].v);
    free(c->o);
}

/* One prefill of tok[0..n) on a fresh context, tapped; reference: the CPU reference path. */
static bp_status eval_tapped(bp_model *m, bp_kind kv, const char *backend, bool reference, const int32_t *tok,
                             int64_t n, bp_step_tap_fn tap, void *user, bp_trace_result *r) {
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = n, cp.n_batch = n, cp.kv_kind = kv;
    bp_context *c = NULL;
    bp_status s = bp_context_create(m, &cp, &c);
    if (s) return s;
    const bp_cpu_isa isa = bp_cpu_isa_current();
    const bool exact = bp_exact_mode();
    s = bp_set_backend_preference(backend, BP_FORCE);
    if (!s && reference) s = bp_cpu_isa_force(BP_CPU_ISA_SCALAR);
    if (reference) bp_set_exact_mode(true);
    bp_context_set_step_tap(c, tap, user);
    if (!s) s = bp_context_eval(c, tok, n, n);
    if (reference) bp_cpu_isa_force(isa), bp_set_exact_mode(exact);
    bp_step_report rep;
    if (!s && !reference && !bp_context_step_report(c, true, &rep)) bp_run_record_label(&rep.record, r->ran, sizeof r->ran);
    bp_context_free(c);
    return s;
}

int bp_verify_trace(bp_model *m, const char *backend, bp_kind kv, const int32_t *tok, int64_t n,
                    bp_trace_result *out) {
    memset(out, 0, sizeof *out);
    out->tokens = n;
    capture cand = {0};
    compare cmp = {.cand = &cand, .tok = tok, .r = out};
    int rc = 0;
    bp_status s = eval_tapped(m, kv, backend, false, tok, n, tap_capture, &cand, out);
    if (s) {
        fprintf(stderr, "backplane verify --trace: %s: %s\n", backend, bp_last_error());
        rc = 1;
    } else if (cand.nomem)
        rc = bp_cli_error("verify --trace", BP_E_NOMEM);
    else if ((s = eval_tapped(m, kv, "cpu", true, tok, n, tap_compare, &cmp, out))) {
        fprintf(stderr, "backplane verify --trace: the reference: %s\n", bp_last_error());
        rc = 1;
    } else if (cmp.mismatch || cmp.next != cand.n) {
        fprintf(stderr, "backplane verify --trace: %s: the backend's step and the reference's differ in shape\n", backend);
        rc = 1;
    }
    capture_free(&cand);
    return rc;
}

void bp_verify_trace_print(FILE *f, const char *backend, const bp_trace_result *r, const bp_tokenizer *tk, bool json) {
    const bp_trace_op *t = r->found ? &r->first : &r->worst;
    char piece[64] = "";
    if (r->compared) {
        size_t len = 0;
        const char *txt = tk ? bp_tokenizer_token_text(tk, t->token, &len) : NULL;
        if (txt) snprintf(piece, sizeof piece, "%.*s", (int)(len < 40 ? len : 40), txt);
    }
    if (json) {
        fprintf(f, "{\"backend\": ");
        bp_cli_json_str(f, backend);
        fprintf(f, ", \"tokens\": %lld, \"outputs_compared\": %d, \"out_of_tolerance\": %s, \"ran\": ", (long long)r->tokens,
                r->compared, r->found ? "true" : "false");
        bp_cli_json_str(f, r->ran);
        fprintf(f, ", \"%s\": ", r->found ? "first" : "worst");
        if (!r->compared) {
            fprintf(f, "null}");
            return;
        }
        fprintf(f, "{\"node\": %d, \"layer\": %d, \"op\": \"%s\", \"tensor\": ", t->node, t->layer, t->op);
        bp_cli_json_str(f, t->tensor);
        fprintf(f, ", \"nmse\": %.6g, \"bound\": %.6g, \"tolerance\": \"%s %s\", \"position\": %lld, \"token\": %d, "
                   "\"piece\": ",
                t->nmse, t->bound, t->tol_op, t->tol_kind, (long long)t->pos, (int)t->token);
        bp_cli_json_str(f, piece);
        fprintf(f, "}}");
        return;
    }
    char where[64];
    if (t->layer >= 0) snprintf(where, sizeof where, "layer %d", t->layer);
    else snprintf(where, sizeof where, "%s", t->node == 0 ? "input" : "head");
    if (r->found)
        fprintf(f, "trace %s: first op out of tolerance: %s %s %s: NMSE %.3g > %.3g (%s %s), worst at position %lld "
                   "(token %d '%s'); %d outputs of %lld tokens compared; ran: %s\n",
                backend, where, t->op, t->tensor, t->nmse, t->bound, t->tol_op, t->tol_kind, (long long)t->pos,
                (int)t->token, piece, r->compared, (long long)r->tokens, r->ran);
    else
        fprintf(f, "trace %s: no op out of tolerance (%d outputs of %lld tokens compared; closest to its bound: %s %s "
                   "%s, NMSE %.3g against %.3g); ran: %s\n",
                backend, r->compared, (long long)r->tokens, where, t->op, t->tensor, t->nmse, t->bound, r->ran);
}
