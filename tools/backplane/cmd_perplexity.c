/* backplane perplexity MODEL.gguf -f TEXT [--ctx 512] [--chunks N]: the text's perplexity as
 * llama-perplexity computes it (bp_context_perplexity: BOS at each chunk's start when the
 * vocabulary adds one, the second half of each chunk scored), printed the same way: the running
 * figure after each chunk, then "Final estimate: PPL = X +/- Y". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"
#include "model_cli.h"
#include "run_report.h"

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: backplane perplexity MODEL.gguf -f TEXT [--ctx N] [--chunks N] [--kv-kind KIND] [--threads N] [--backend NAME]\n"
               "                            [--json] [--profile] [--fallbacks] [--strict] [--no-memory-check]\n"
               "  --ctx N      tokens per chunk (default 512)\n"
               "  --chunks N   at most N chunks (default: every whole chunk of the text)\n");
    return rc;
}

static void on_chunk(int64_t i, double ppl, void *user) {
    if (user) return; /* --json */
    printf("[%lld]%.4f,", (long long)i + 1, ppl);
    fflush(stdout);
}

int bp_cmd_perplexity(int argc, char **argv) {
    bp_cli_take_fallbacks(&argc, argv);
    bp_cli_take_profile(&argc, argv);
    bp_cli_take_strict(&argc, argv);
    if (bp_cli_take_backend(&argc, argv, "perplexity") < 0) return 2;
    bp_cli_take_no_memory_check(&argc, argv);
    const char *model = NULL, *file = NULL;
    int64_t ctx = 512, chunks = 0;
    int threads = 0;
    bool json = false;
    long long x;
    bp_kind kv = BP_KIND_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout, 0);
        if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "-f") && v) file = v, i++;
        else if (!strcmp(a, "--ctx") && v) {
            if (!bp_cli_int("perplexity", a, argv[++i], 4, 1 << 24, &x)) return 2;
            ctx = x;
        } else if (!strcmp(a, "--chunks") && v) {
            if (!bp_cli_int("perplexity", a, argv[++i], 0, INT64_MAX, &x)) return 2;
            chunks = x;
        } else if (!strcmp(a, "--threads") && v) {
            if (!bp_cli_int("perplexity", a, argv[++i], 0, 4096, &x)) return 2;
            threads = (int)x;
        } else if (!strcmp(a, "--kv-kind") && v) {
            const bp_kind_info *ki = bp_kind_by_name(v);
            if (!ki) return fprintf(stderr, "backplane perplexity: unknown kind '%s'\n", v), 2;
            kv = ki->kind, i++;
        } else if (a[0] != '-' && !model) model = a;
        else return fprintf(stderr, "backplane perplexity: unknown or incomplete option '%s'\n", a), usage(stderr, 2);
    }
    if (!model || !file || ctx < 4 || chunks < 0 || threads < 0) return usage(stderr, 2);
    if (threads && bp_cpu_set_threads(threads)) return bp_cli_error("--threads", BP_E_INVAL);
    size_t len = 0;
    char *text = bp_cli_read_text("perplexity", file, &len);
    if (!text) return 1;

    bp_cli_model_session ses;
    int rc = bp_cli_model_open(model, !json, &ses);
    bp_token *ids = NULL;
    size_t n_ids = 0;
    bp_context *c = NULL;
    bp_status s;
    if (rc) goto out;
    /* as llama-perplexity: the whole text with add_special, no special-token parsing */
    if ((s = bp_tokenizer_encode_alloc(ses.tok, text, len, true, false, &ids, &n_ids))) {
        rc = bp_cli_error("tokenize", s);
        goto out;
    }
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = ctx;
    cp.kv_kind = kv;
    if ((s = bp_context_create(ses.model, &cp, &c))) {
        rc = bp_cli_error("context", s);
        goto out;
    }
    bp_token bos = bp_tokenizer_add_bos(ses.tok) ? bp_tokenizer_special(ses.tok, BP_SPECIAL_BOS) : -1;
    if (!json)
        fprintf(stderr, "perplexity: %zu tokens, %lld per chunk, %lld chunks\n", n_ids, (long long)ctx,
                (long long)(chunks && chunks < (int64_t)n_ids / ctx ? chunks : (int64_t)n_ids / ctx));
    bp_perplexity_result r;
    double t0 = bp_bench_now();
    s = bp_context_perplexity(c, ids, (int64_t)n_ids, ctx, chunks, bos, on_chunk, json ? (void *)1 : NULL, &r);
    double dt = bp_bench_now() - t0;
    if (s) {
        rc = bp_cli_error("perplexity", s);
        goto out;
    }
    bp_run_report rr;
    bp_run_report_get(&rr);
    if (json) {
        printf("{\"model\": ");
        bp_cli_json_str(stdout, model);
        printf(", \"text\": ");
        bp_cli_json_str(stdout, file);
        printf(", \"tokens\": %zu, \"ctx\": %lld, \"chunks\": %lld, \"scored\": %lld, \"ppl\": %.6f, \"ppl_err\": %.6f, "
               "\"seconds\": %.3f, \"tps\": %.2f, \"report\": ",
               n_ids, (long long)ctx, (long long)r.chunks, (long long)r.scored, r.ppl, r.ppl_err, dt,
               (double)r.chunks * (double)ctx / dt);
        bp_run_report_json(stdout, &rr);
        printf("}\n");
    } else {
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
        fprintf(stderr, "%lld chunks of %lld tokens in %.2f s, %.1f tokens/s\n", (long long)r.chunks, (long long)ctx,
                dt, (double)r.chunks * (double)ctx / dt);
        bp_run_report_print(stderr, &rr);
    }
out:
    bp_tokens_free(ids);
    bp_context_free(c);
    bp_cli_model_close(&ses);
    free(text);
    bp_cli_print_profile();
    bp_cli_print_fallbacks();
    return rc;
}
