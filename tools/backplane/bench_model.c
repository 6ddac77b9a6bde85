/* backplane bench MODEL.gguf (or --model MODEL.gguf): prompt processing and generation speed of a
 * whole model, in llama-bench's table shape so the two print side by side:
 *
 *   pp<N>  one eval of N prompt tokens (the GEMM path), only the last position's logits, as
 *          llama-bench's prompt test does; t/s = N / time
 *   tg<N>  N tokens generated one at a time from an empty context (the matvec path), each step
 *          one eval of the token the last step produced; t/s = N / time
 *
 * Tokens are random ids (fixed seed), as llama-bench's. Each test runs once untimed (warm-up:
 * pages, repacked weights, the pool), then -r times; the table gives mean +- sample standard
 * deviation, like llama-bench, and --json each repetition's seconds too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_model.h"
#include "run_report.h"
#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"

typedef struct mopts {
    const char *model;
    int pp, tg, reps, threads;
    bp_kind kv_kind;
    bool json;
} mopts;

static int usage(FILE *f, int rc) {
    fprintf(f,
            "usage: backplane bench MODEL.gguf [-p N] [-n N] [-r N] [--threads N] [--kv-kind KIND] [--json]\n"
            "       backplane bench --model MODEL.gguf ...\n"
            "  -p N        prompt tokens of the pp test (default 512; 0 skips it)\n"
            "  -n N        generated tokens of the tg test (default 128; 0 skips it)\n"
            "  -r N        timed repetitions of each test (default 5)\n"
            "  --threads N CPU threads (default: BACKPLANE_THREADS or every CPU)\n"
            "  --kv-kind K KV cache kind (default F16)\n"
            "  --json      one JSON object instead of the markdown table\n");
    return rc;
}

bool bp_bench_model_requested(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model")) return true;
        size_t n = strlen(argv[i]);
        if (argv[i][0] != '-' && n > 5 && !strcmp(argv[i] + n - 5, ".gguf")) return true;
    }
    return false;
}

static int parse(int argc, char **argv, mopts *o) {
    *o = (mopts){.pp = 512, .tg = 128, .reps = 5, .kv_kind = BP_KIND_F16};
    long long x;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--json")) o->json = true;
        else if ((!strcmp(a, "--model") || !strcmp(a, "-m")) && v) o->model = v, i++;
        else if (!strcmp(a, "-p") && v) {
            if (!bp_cli_int("bench", a, argv[++i], 0, 1 << 24, &x)) return -1;
            o->pp = (int)x;
        } else if (!strcmp(a, "-n") && v) {
            if (!bp_cli_int("bench", a, argv[++i], 0, 1 << 24, &x)) return -1;
            o->tg = (int)x;
        } else if (!strcmp(a, "-r") && v) {
            if (!bp_cli_int("bench", a, argv[++i], 1, 1000000, &x)) return -1;
            o->reps = (int)x;
        } else if ((!strcmp(a, "--threads") || !strcmp(a, "-t")) && v) {
            if (!bp_cli_int("bench", a, argv[++i], 0, 4096, &x)) return -1;
            o->threads = (int)x;
        } else if (!strcmp(a, "--kv-kind") && v) {
            const bp_kind_info *ki = bp_kind_by_name(v);
            if (!ki) {
                fprintf(stderr, "backplane bench: unknown kind '%s'\n", v);
                return -1;
            }
            o->kv_kind = ki->kind, i++;
        } else if (a[0] != '-' && !o->model) o->model = a;
        else {
            fprintf(stderr, "backplane bench: unknown or incomplete option '%s'\n", a);
            return -1;
        }
    }
    if (!o->model || o->pp < 0 || o->tg < 0 || o->reps < 1 || o->threads < 0) return -1;
    return 0;
}

typedef struct test_result {
    char name[16];
    int n;
    double *secs; /* reps */
    double mean_tps, sd_tps;
} test_result;

static void stats(test_result *r, int reps) {
    double sum = 0, sq = 0;
    for (int i = 0; i < reps; i++) sum += r->n / r->secs[i];
    r->mean_tps = sum / reps;
    for (int i = 0; i < reps; i++) sq += (r->n / r->secs[i] - r->mean_tps) * (r->n / r->secs[i] - r->mean_tps);
    r->sd_tps = reps > 1 ? sqrt(sq / (reps - 1)) : 0;
}

/* One timed run of a test; < 0 on failure (message printed). */
static double run_pp(bp_context *c, const int32_t *tok, int n) {
    if (bp_context_truncate(c, 0)) return -1;
    double t0 = bp_bench_now();
    if (bp_context_eval(c, tok, n, 1)) return -1;
    return bp_bench_now() - t0;
}

static double run_tg(bp_context *c, const int32_t *tok, int n, int64_t n_vocab) {
    if (bp_context_truncate(c, 0)) return -1;
    int32_t t = tok[0];
    double t0 = bp_bench_now();
    for (int i = 0; i < n; i++) {
        if (bp_context_eval(c, &t, 1, 1)) return -1;
        /* the next token depends on this step's logits, as generation does */
        const float *lg = bp_context_logits(c, 0);
        int64_t best = 0;
        for (int64_t v = 1; v < n_vocab; v++)
            if (lg[v] > lg[best]) best = v;
        t = (int32_t)best;
    }
    return bp_bench_now() - t0;
}

int bp_bench_model(int argc, char **argv) {
    mopts o;
    int p = parse(argc, argv, &o);
    if (p) return usage(p > 0 ? stdout : stderr, p > 0 ? 0 : 2);
    if (o.threads && bp_cpu_set_threads(o.threads)) return bp_cli_error("--threads", BP_E_INVAL);
    bp_model *m = NULL;
    bp_status s = bp_model_load(o.model, NULL, &m);
    if (s) return bp_cli_error("bench", s);
    bp_model_info info;
    bp_model_get_info(m, &info);
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = o.pp + o.tg > 0 ? o.pp + o.tg : 1;
    cp.kv_kind = o.kv_kind;
    cp.n_batch = o.pp > 0 ? o.pp : 1;
    bp_context *c = NULL;
    if ((s = bp_context_create(m, &cp, &c))) {
        bp_model_free(m);
        return bp_cli_error("bench", s);
    }
    int ntok = o.pp > 1 ? o.pp : 1;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)ntok);
    test_result res[2];
    memset(res, 0, sizeof res);
    int nres = 0, rc = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; tok && i < ntok; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        tok[i] = (int32_t)(rng % (uint64_t)info.n_vocab);
    }
    for (int test = 0; tok && test < 2 && !rc; test++) {
        int n = test == 0 ? o.pp : o.tg;
        if (n == 0) continue;
        test_result *r = &res[nres++];
        snprintf(r->name, sizeof r->name, "%s%d", test == 0 ? "pp" : "tg", n);
        r->n = n;
        r->secs = calloc((size_t)o.reps, sizeof(double));
        for (int rep = -1; rep < o.reps && r->secs; rep++) {
            double t = test == 0 ? run_pp(c, tok, n) : run_tg(c, tok, n, info.n_vocab);
            if (t < 0) {
                rc = bp_cli_error(r->name, BP_E_INVAL);
                break;
            }
            if (rep >= 0) r->secs[rep] = t;
        }
        if (!rc) stats(r, o.reps);
    }
    const char *kvn = bp_kind_lookup((uint32_t)o.kv_kind)->name;
    char desc[160], size[32], params[32];
    snprintf(desc, sizeof desc, "%s %s", info.arch, info.name);
    snprintf(size, sizeof size, "%.2f MiB", (double)info.file_bytes / (1 << 20));
    snprintf(params, sizeof params, "%.2f M", (double)info.n_params / 1e6);
    int threads = bp_cpu_threads();
    bp_run_report rr;
    bp_run_report_get(&rr);
    if (!rc && o.json) {
        printf("{\"model\": ");
        bp_cli_json_str(stdout, o.model);
        printf(", \"arch\": ");
        bp_cli_json_str(stdout, info.arch);
        /* weight_bytes: what one decode step reads (the tied output once), for GB/s per token */
        printf(", \"file_bytes\": %llu, \"weight_bytes\": %llu, \"params\": %lld, \"threads\": %d, \"kv_kind\": \"%s\", "
               "\"tests\": [",
               (unsigned long long)info.file_bytes, (unsigned long long)info.weight_bytes, (long long)info.n_params, threads,
               kvn);
        for (int i = 0; i < nres; i++) {
            printf("%s{\"test\": \"%s\", \"tokens\": %d, \"tps_mean\": %.3f, \"tps_sd\": %.3f, \"seconds\": [", i ? ", " : "",
                   res[i].name, res[i].n, res[i].mean_tps, res[i].sd_tps);
            for (int j = 0; j < o.reps; j++) printf("%s%.6f", j ? ", " : "", res[i].secs[j]);
            printf("]}");
        }
        printf("], \"report\": ");
        bp_run_report_json(stdout, &rr);
        printf("}\n");
    } else if (!rc) {
        printf("| model                          |       size |     params | backend    | threads |            test |"
               "                  t/s |\n");
        printf("| ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: |"
               " -------------------: |\n");
        for (int i = 0; i < nres; i++) {
            char tps[48];
            snprintf(tps, sizeof tps, "%.2f ± %.2f", res[i].mean_tps, res[i].sd_tps);
            printf("| %-30s | %10s | %10s | %-10s | %7d | %15s | %20s |\n", desc, size, params, "backplane", threads,
                   res[i].name, tps);
        }
        /* per weight kind, what ran its matmuls in the tests above */
        printf("\nKV cache %s; paths per weight kind:\n", kvn);
        bool seen[64] = {false};
        for (int64_t i = 0; i < bp_model_weight_count(m); i++) {
            bp_kind k = bp_model_weight_at(m, i, NULL)->kind;
            if ((unsigned)k >= 64 || seen[k]) continue;
            seen[k] = true;
            const char *d = bp_context_kind_path(c, k, false), *pf = bp_context_kind_path(c, k, true);
            printf("  %-6s decode: %s\n", bp_kind_lookup((uint32_t)k)->name, *d ? d : "(not run)");
            if (*pf) printf("  %-6s prefill: %s\n", "", pf);
        }
        bp_run_report_print(stdout, &rr);
    }
    for (int i = 0; i < nres; i++) free(res[i].secs);
    free(tok);
    bp_context_free(c);
    bp_model_free(m);
    return rc;
}
