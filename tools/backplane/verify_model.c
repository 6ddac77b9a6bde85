/* backplane verify MODEL.gguf [-f TEXT] [--backend B ...] [--ctx N] [--kv-kind K] [--max-kl X] [--json]:
 * a model's numerics on each backend, measured against the CPU reference path on a text.
 *
 * The reference is the CPU's scalar kernels (float activations, no 8-bit rounding) in exact mode
 * (portable op kernels) with an F32 KV cache. Each backend asked for (default: cpu, the fast
 * path) runs the same tokens in a context of its own, forced (bp_set_backend_preference FORCE,
 * so nothing falls back unseen), with the KV kind a user gets (--kv-kind, default F16). The
 * contexts advance together, PIECE tokens at a time, so only a piece of logits is held.
 *
 * Per backend, over every position: KL(reference || backend) of the next-token distributions
 * (mean, p99, max, in float64), top-1 agreement, the perplexity of the text's next tokens beside
 * the reference's, the logits' scale against the reference's (the mean over positions of the
 * least-squares slope of a row on the reference row: a neutral path's is 1 within noise, a bias
 * that shrinks or stretches the logits shows here, and moves the perplexity of a peaked model by
 * about that fraction times its mean log-loss), and the positions with a non-finite logit (any is a FAIL). --max-kl X fails a
 * backend whose mean KL is above X. --trace adds, per backend, the first op of a prefill of the
 * text's first TRACE_TOKENS tokens whose output leaves its tolerance (verify_trace.c; a FAIL).
 *
 * --peer FILE: another engine's logits over the same tokens (tests/model/README.md's BPLG format
 * with every vocabulary entry per position, as tests/model/gen_ref/gen_ref.sh --peer makes them
 * with llama.cpp), measured against the same reference in a row of its own: the file's token ids
 * are the text, so both engines score the same positions. It answers "is our fast path as close to
 * the exact forward pass as that engine is?" on any model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backplane_model.h"
#include "backplane_tokenizer.h"
#include "backend/weight.h"
#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"
#include "model_cli.h"
#include "verify_trace.h"

enum { PIECE = 32, MAX_BACKENDS = 8, TRACE_TOKENS = 8 };

/* Used when no -f is given: plain English prose, about 200 tokens for most vocabularies. */
static const char default_text[] =
    "The river rose slowly through the night, and by morning the lower fields were under water. "
    "Farmers who had lived in the valley for generations knew the signs: the birds left early, the "
    "wind turned to the south, and the clouds hung low over the hills for three days before the rain "
    "began. In the village, people carried what they could to the church on the hill, which had "
    "stood above every flood for four hundred years. The school closed, the bridge was shut, and the "
    "only road out of the valley became a shallow brown lake. By the second day the water had reached "
    "the market square. Boats moved between the houses where carts had moved the week before, and "
    "children watched from upper windows as chairs and baskets floated past. When the water finally "
    "fell, it left a line of mud on every wall, a little higher than the line their grandparents had "
    "painted there, and a great deal of work for everyone.";

typedef struct cand {
    const char *name;   /* backend name, "cpu" for the fast path */
    bp_context *c;
    double *kl;         /* per position */
    double nll;
    double slope;       /* sum over positions of the least-squares slope of its logits on the reference's */
    int64_t top1, nonfinite, scored;
    char ran[320];      /* what ran the prefill's weights, from the step's record */
    FILE *peer;         /* --peer: logits read from this file instead of a context */
    float *peer_rows;   /* PIECE rows of n_vocab logits, the piece read from it */
} cand;

/* A peer file's header: "BPLG", n_vocab, n_pos, entries per position, then n_pos token ids. The
 * ids become the text; the rows follow as (id, logit) pairs, every id once per position. */
static int peer_open(cand *k, const char *path, int64_t V, int32_t **ids, size_t *n_ids) {
    int32_t hdr[3];
    char magic[4];
    k->peer = fopen(path, "rb");
    if (!k->peer) return fprintf(stderr, "backplane verify: cannot read --peer %s\n", path), 2;
    if (fread(magic, 1, 4, k->peer) != 4 || memcmp(magic, "BPLG", 4) || fread(hdr, 4, 3, k->peer) != 3)
        return fprintf(stderr, "backplane verify: %s is not a BPLG logits file (tests/model/README.md)\n", path), 2;
    if (hdr[0] != V || hdr[2] != hdr[0] || hdr[1] < 2)
        return fprintf(stderr,
                       "backplane verify: %s: %d vocabulary entries of %d per position over %d positions; the model has "
                       "%lld, and every entry of at least 2 positions is needed (gen_ref.sh --peer writes them)\n",
                       path, hdr[2], hdr[0], hdr[1], (long long)V), 2;
    *ids = malloc((size_t)hdr[1] * sizeof **ids);
    k->peer_rows = malloc((size_t)PIECE * (size_t)V * sizeof *k->peer_rows);
    if (!*ids || !k->peer_rows) return bp_cli_error("verify", BP_E_NOMEM);
    if (fread(*ids, sizeof **ids, (size_t)hdr[1], k->peer) != (size_t)hdr[1])
        return fprintf(stderr, "backplane verify: %s is cut short in its token ids\n", path), 2;
    for (int32_t i = 0; i < hdr[1]; i++)
        if ((*ids)[i] < 0 || (*ids)[i] >= V)
            return fprintf(stderr, "backplane verify: %s: token id %d at %d is outside the vocabulary\n", path,
                           (int)(*ids)[i], (int)i), 2;
    *n_ids = (size_t)hdr[1];
    k->name = "peer";
    snprintf(k->ran, sizeof k->ran, "logits read from %s", path);
    return 0;
}

/* The peer's next m rows into peer_rows, placed by id. */
static int peer_read(cand *k, int64_t V, int64_t m) {
    struct { int32_t id; float v; } e[256];
    for (int64_t j = 0; j < m; j++) {
        float *row = k->peer_rows + j * V;
        for (int64_t i = 0; i < V; i++) row[i] = NAN;
        for (int64_t i = 0; i < V;) {
            const size_t want = V - i < 256 ? (size_t)(V - i) : 256;
            if (fread(e, sizeof e[0], want, k->peer) != want)
                return fprintf(stderr, "backplane verify: the peer file is cut short\n"), 1;
            for (size_t q = 0; q < want; q++)
                if (e[q].id >= 0 && e[q].id < V) row[e[q].id] = e[q].v;
            i += (int64_t)want;
        }
    }
    return 0;
}

/* log-sum-exp of n logits, float64; NAN when one is not finite. */
static double lse(const float *lg, int64_t n) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(lg[i])) return NAN;
        if (lg[i] > mx) mx = lg[i];
    }
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)lg[i] - mx);
    return mx + log(s);
}

static int64_t argmax(const float *lg, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (lg[i] > lg[b]) b = i;
    return b;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: backplane verify MODEL.gguf [-f TEXT | --peer FILE] [--backend B ...] [--ctx N] [--kv-kind K] [--max-kl X]\n"
               "                        [--trace] [--json]\n"
               "  each backend (default: cpu, the fast path; repeat --backend for more, forced on) runs the text\n"
               "  against the CPU reference path (scalar kernels, exact mode, F32 KV cache): KL divergence of\n"
               "  the next-token distributions (mean, p99, max), top-1 agreement, perplexity, non-finite logits\n"
               "  -f TEXT     the text (default: a built-in paragraph of about 200 tokens)\n"
               "  --ctx N     at most N tokens of it (default 512)\n"
               "  --kv-kind K the backends' KV cache kind (default F16; the reference's is F32)\n"
               "  --max-kl X  FAIL a backend whose mean KL is above X (default: only non-finite logits fail)\n"
               "  --peer FILE another engine's logits (BPLG, every vocabulary entry; tests/model/gen_ref/gen_ref.sh --peer\n"
               "              makes llama.cpp's): its token ids are the text, its row is measured against the same reference\n"
               "  --trace     per backend, the first op (layer, op, tensor) of a prefill of the text's first %d tokens\n"
               "              whose output leaves its tolerance (src/testing/tolerance.def), each op fed the backend's\n"
               "              inputs on the reference path; one out of tolerance is a FAIL\n", TRACE_TOKENS);
    return rc;
}

/* Evaluate tokens [p0, p0 + n) in c with every row's logits, on the given backend and CPU mode. */
static bp_status eval_piece(bp_context *c, const char *backend, bool reference, const int32_t *tok, int64_t n) {
    const bp_cpu_isa isa = bp_cpu_isa_current();
    const bool exact = bp_exact_mode();
    bp_status s = bp_set_backend_preference(backend, BP_FORCE);
    if (!s && reference) s = bp_cpu_isa_force(BP_CPU_ISA_SCALAR);
    if (reference) bp_set_exact_mode(true);
    if (!s) s = bp_context_eval(c, tok, n, n);
    if (reference) bp_cpu_isa_force(isa), bp_set_exact_mode(exact);
    return s;
}

/* zr[j]: the reference row's log-sum-exp, made once per piece for every backend. */
static void compare_rows(cand *k, const bp_context *ref, const double *zr_, int64_t V, const int32_t *tok, int64_t p0,
                         int64_t n, int64_t n_tok) {
    for (int64_t j = 0; j < n; j++) {
        const float *lr = bp_context_logits(ref, j), *lc = k->peer ? k->peer_rows + j * V : bp_context_logits(k->c, j);
        const double zr = zr_[j], zc = lse(lc, V);
        const int64_t pos = p0 + j;
        if (!isfinite(zc)) {
            k->nonfinite++;
            k->kl[pos] = INFINITY;
            continue;
        }
        double kl = 0, mr = 0, mc = 0, rr = 0, rc = 0;
        for (int64_t i = 0; i < V; i++) {
            const double a = (double)lr[i] - zr;
            kl += exp(a) * (a - ((double)lc[i] - zc));
            mr += lr[i], mc += lc[i];
        }
        mr /= (double)V, mc /= (double)V;
        for (int64_t i = 0; i < V; i++) rr += (lr[i] - mr) * (lr[i] - mr), rc += (lr[i] - mr) * (lc[i] - mc);
        k->slope += rr > 0 ? rc / rr : 1;
        k->kl[pos] = kl > 0 ? kl : 0; /* rounding can make a zero divergence -1e-17 */
        k->top1 += argmax(lr, V) == argmax(lc, V);
        if (pos + 1 < n_tok) k->nll += zc - (double)lc[tok[pos + 1]], k->scored++;
    }
}

/* What ran the first piece: the step's record, and where the CPU walked the program op by op,
 * the backend of each weight kind's matmuls (the op layer may have sent them elsewhere). */
static void what_ran(cand *k, const bp_model *m) {
    bp_step_report rep;
    if (bp_context_step_report(k->c, true, &rep)) {
        snprintf(k->ran, sizeof k->ran, "%s", bp_last_error());
        return;
    }
    bp_run_record_label(&rep.record, k->ran, sizeof k->ran);
    if (strcmp(rep.record.backend, "cpu")) return;
    bool seen[256] = {false};
    bp_kind kinds[256];
    char where[256][16];
    int n = 0;
    bool same = true;
    for (int64_t i = 0; i < bp_model_weight_count(m); i++) {
        const bp_weight *w = bp_model_weight_at(m, i, NULL);
        bp_run_record r;
        if (!w || (unsigned)w->kind >= 256 || seen[w->kind] || bp_context_kind_record(k->c, w->kind, true, &r)) continue;
        seen[w->kind] = true;
        kinds[n] = w->kind;
        snprintf(where[n], sizeof where[n], "%s", r.display);
        same &= !strcmp(where[n], where[0]);
        n++;
    }
    size_t used = strlen(k->ran);
    if (n && same) {
        snprintf(k->ran + used, sizeof k->ran - used, "; the matmuls of %d kind%s on %s", n, n > 1 ? "s" : "", where[0]);
        return;
    }
    for (int i = 0; i < n; i++) {
        int len = snprintf(k->ran + used, sizeof k->ran - used, "%s %s on %s", i ? "," : "; matmuls:",
                           bp_kind_lookup((uint32_t)kinds[i])->name, where[i]);
        if (len < 0 || (size_t)len >= sizeof k->ran - used) break;
        used += (size_t)len;
    }
}

int bp_cmd_verify_model(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *peer = NULL, *names[MAX_BACKENDS];
    int nb = 0;
    int64_t ctx = 512;
    double max_kl = -1;
    bool json = false, trace = false;
    bp_kind kv = BP_KIND_F16;
    long long x;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout, 0);
        if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--trace")) trace = true;
        else if (!strcmp(a, "-f") && v) file = v, i++;
        else if (!strcmp(a, "--peer") && v) peer = v, i++;
        else if (!strcmp(a, "--backend") && v) {
            if (nb == MAX_BACKENDS) return fprintf(stderr, "backplane verify: at most %d --backend\n", MAX_BACKENDS), 2;
            names[nb++] = v, i++;
        } else if (!strcmp(a, "--ctx") && v) {
            if (!bp_cli_int("verify", a, argv[++i], 2, 1 << 20, &x)) return 2;
            ctx = x;
        } else if (!strcmp(a, "--kv-kind") && v) {
            const bp_kind_info *ki = bp_kind_by_name(v);
            if (!ki) return fprintf(stderr, "backplane verify: unknown kind '%s'\n", v), 2;
            kv = ki->kind, i++;
        } else if (!strcmp(a, "--max-kl") && v) {
            char *end = NULL;
            max_kl = strtod(argv[++i], &end);
            if (!end || *end || !(max_kl >= 0) || !isfinite(max_kl))
                return fprintf(stderr, "backplane verify: --max-kl needs a number >= 0\n"), 2;
        } else if (a[0] != '-' && !model) model = a;
        else return fprintf(stderr, "backplane verify: unknown or incomplete option '%s'\n", a), usage(stderr, 2);
    }
    if (!model) return usage(stderr, 2);
    if (peer && file) return fprintf(stderr, "backplane verify: --peer brings its own tokens; drop -f\n"), 2;
    if (!nb) names[nb++] = "cpu";
    for (int b = 0; b < nb; b++) bp_cli_backend_on(names[b]);

    size_t len = sizeof default_text - 1;
    char *text = file ? bp_cli_read_text("verify", file, &len) : NULL;
    if (file && !text) return 1;
    bp_cli_model_session ses;
    int rc = bp_cli_model_open(model, !json, &ses);
    bp_token *ids = NULL;
    size_t n_ids = 0;
    bp_context *ref = NULL;
    int32_t *peer_ids = NULL;
    cand k[MAX_BACKENDS + 1]; /* the backends, then the peer */
    memset(k, 0, sizeof k);
    const int nk = nb + (peer != NULL);
    bp_status s;
    bp_backend_pref pmode;
    const char *pname = bp_backend_preference(&pmode);
    char saved_pref[32];
    snprintf(saved_pref, sizeof saved_pref, "%s", pname ? pname : "");
    if (rc) goto out;
    if (peer) {
        if ((rc = peer_open(&k[nb], peer, ses.info.n_vocab, &peer_ids, &n_ids))) goto out;
        ids = (bp_token *)peer_ids;
    } else if ((s = bp_tokenizer_encode_alloc(ses.tok, text ? text : default_text, len, true, false, &ids, &n_ids))) {
        rc = bp_cli_error("tokenize", s);
        goto out;
    }
    const int64_t n = (int64_t)n_ids < ctx ? (int64_t)n_ids : ctx, V = ses.info.n_vocab;
    if (n < 2) {
        fprintf(stderr, "backplane verify: the text is %lld token(s); at least 2 are needed\n", (long long)n);
        rc = 2;
        goto out;
    }
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = n;
    cp.n_batch = PIECE;
    cp.kv_kind = BP_KIND_F32;
    if ((s = bp_context_create(ses.model, &cp, &ref))) {
        rc = bp_cli_error("reference context", s);
        goto out;
    }
    cp.kv_kind = kv;
    for (int b = 0; b < nk; b++) {
        if (b < nb) k[b].name = names[b];
        k[b].kl = malloc((size_t)n * sizeof *k[b].kl);
        if (!k[b].kl) {
            rc = bp_cli_error("verify", BP_E_NOMEM);
            goto out;
        }
        if (b < nb && (s = bp_context_create(ses.model, &cp, &k[b].c))) {
            rc = bp_cli_error(names[b], s);
            goto out;
        }
    }
    const bool progress = !json && isatty(2);
    if (!json)
        fprintf(stderr, "verify: %lld tokens of %s against the CPU reference path (scalar kernels, exact mode, F32 KV)\n",
                (long long)n, file ? file : peer ? peer : "the built-in text");
    double ref_nll = 0, zr[PIECE];
    int64_t ref_scored = 0;
    for (int64_t p0 = 0; p0 < n; p0 += PIECE) {
        const int64_t m = n - p0 < PIECE ? n - p0 : PIECE;
        if ((s = eval_piece(ref, "cpu", true, ids + p0, m))) {
            rc = bp_cli_error("reference", s);
            goto out;
        }
        for (int64_t j = 0; j < m; j++) {
            const float *lr = bp_context_logits(ref, j);
            zr[j] = lse(lr, V);
            if (p0 + j + 1 < n) ref_nll += zr[j] - (double)lr[ids[p0 + j + 1]], ref_scored++;
        }
        for (int b = 0; b < nb; b++) {
            if ((s = eval_piece(k[b].c, names[b], false, ids + p0, m))) {
                fprintf(stderr, "backplane verify: %s: %s\n", names[b], bp_last_error());
                rc = 1;
                goto out;
            }
            if (p0 == 0) what_ran(&k[b], ses.model);
            compare_rows(&k[b], ref, zr, V, (const int32_t *)ids, p0, m, n);
        }
        if (peer) {
            if ((rc = peer_read(&k[nb], V, m))) goto out;
            compare_rows(&k[nb], ref, zr, V, (const int32_t *)ids, p0, m, n);
        }
        if (progress) fprintf(stderr, "\rverify: %lld / %lld tokens", (long long)(p0 + m), (long long)n);
    }
    if (progress) fprintf(stderr, "\n");
    const double ref_ppl = exp(ref_nll / (double)ref_scored);
    if (json) {
        printf("{\"model\": ");
        bp_cli_json_str(stdout, model);
        printf(", \"tokens\": %lld, \"reference_ppl\": %.6f, \"backends\": [", (long long)n, ref_ppl);
    } else {
        printf("reference (CPU scalar, exact, F32 KV): perplexity %.4f over %lld tokens\n", ref_ppl, (long long)ref_scored);
        printf("| backend | KV | mean KL | p99 KL | max KL | top-1 agree | perplexity | vs reference | logit scale - 1 | non-finite | result | what ran (prefill) |\n"
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
    }
    for (int b = 0; b < nk; b++) {
        cand *c = &k[b];
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += isfinite(c->kl[i]) ? c->kl[i] : 0;
        const int64_t fin = n - c->nonfinite;
        const double mean = fin ? sum / (double)fin : NAN;
        qsort(c->kl, (size_t)n, sizeof *c->kl, cmp_dbl);
        const double p99 = c->kl[(size_t)((double)(n - 1) * 0.99)], mx = c->kl[n - 1];
        const double ppl = c->scored ? exp(c->nll / (double)c->scored) : NAN;
        const double scale = fin ? c->slope / (double)fin - 1 : NAN;
        const bool fail = c->nonfinite > 0 || (max_kl >= 0 && !(mean <= max_kl));
        if (fail) rc = 1;
        const char *kvn = c->peer ? "-" : bp_kind_lookup((uint32_t)kv)->name;
        if (json) {
            printf("%s{\"backend\": ", b ? ", " : "");
            bp_cli_json_str(stdout, c->name);
            printf(", \"kv_kind\": \"%s\", \"mean_kl\": %.9g, \"p99_kl\": %.9g, \"max_kl\": %.9g, \"top1\": %.6f, "
                   "\"ppl\": %.6f, \"ppl_vs_ref\": %.6f, \"logit_scale\": %.9g, \"nonfinite\": %lld, \"pass\": %s, \"ran\": ",
                   kvn, mean, isfinite(p99) ? p99 : -1, isfinite(mx) ? mx : -1, (double)c->top1 / (double)n, ppl,
                   ppl / ref_ppl - 1, 1 + scale, (long long)c->nonfinite, fail ? "false" : "true");
            bp_cli_json_str(stdout, c->ran);
            printf("}");
        } else
            printf("| %s | %s | %.3g | %.3g | %.3g | %.2f%% | %.4f | %+.3f%% | %+.1e | %lld | %s | %s |\n", c->name, kvn, mean, p99,
                   mx, 100.0 * (double)c->top1 / (double)n, ppl, 100.0 * (ppl / ref_ppl - 1), scale, (long long)c->nonfinite,
                   fail ? "FAIL" : "PASS", c->ran);
    }
    if (json) printf("]");
    if (trace && json) printf(", \"trace\": [");
    for (int b = 0; trace && b < nb; b++) {
        bp_trace_result tr;
        const int64_t tn = n < TRACE_TOKENS ? n : TRACE_TOKENS;
        if (bp_verify_trace(ses.model, names[b], kv, (const int32_t *)ids, tn, &tr)) {
            rc = 1;
            break;
        }
        if (tr.found) rc = 1;
        if (json && b) printf(", ");
        bp_verify_trace_print(stdout, names[b], &tr, ses.tok, json);
    }
    if (trace && json) printf("]");
    if (json) printf("}\n");
out:
    bp_set_backend_preference(saved_pref[0] ? saved_pref : NULL, pmode);
    for (int b = 0; b < nk; b++) {
        free(k[b].kl), free(k[b].peer_rows), bp_context_free(k[b].c);
        if (k[b].peer) fclose(k[b].peer);
    }
    bp_context_free(ref);
    if (peer_ids) free(peer_ids);
    else bp_tokens_free(ids);
    bp_cli_model_close(&ses);
    free(text);
    return rc;
}
