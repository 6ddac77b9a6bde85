/* backplane bench --op: the op layer's benchmarks, tables in markdown (or --json).
 *
 *   attention  decode (t = 1, or --t) over a KV cache of --ctx tokens, GQA --gqa (query heads per
 *              KV head; --heads query heads), head dim --dim, each --kv-kind: tokens/s and GB/s
 *              of KV read (the visible keys' K and V bytes), beside the machine's read bandwidth.
 *              The cache has enough layers to exceed --cold-mib and calls rotate through them,
 *              so every call reads its K/V from DRAM, as a model's layers do. With --ggml PATH
 *              (tools/sidebyside/ggml_attn), ggml's CPU flash attention runs on the same shape
 *              right after ours (order alternating per row) and its figures sit beside ours.
 *   norm, rope, act  row ops on model shapes: GB/s of activations read + written.
 *   jobs       Gemma 3 270M's Q/K/V (640 -> 1024/256/256, Q5_0/Q5_0/Q8_0) and gate/up (640 ->
 *              2048 x2, Q5_0) at t = 1 and 512: bp_matmul (one activation quantization, one
 *              submission) against the same weights one bp_gemm_on("cpu") at a time.
 * Every figure is the median of repeated calls. --profile (cmd_bench.c) prints bp_stats_report. */
#include "bench_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"
#include "ops/ops_internal.h"

enum { MAX_LIST = 32 };

typedef struct bopts {
    const char *op;
    const char *kinds[MAX_LIST];
    int nkinds;
    int64_t ctx[MAX_LIST], gqa[MAX_LIST], dim[MAX_LIST], ts[MAX_LIST];
    int nctx, ngqa, ndim, nts;
    int heads, threads, json, nts_given;
    double cold_mib, min_ms;
    const char *ggml;
} bopts;

bool bp_bench_op_requested(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--op")) return true;
    return false;
}

static int usage(FILE *f, int rc) {
    fprintf(f,
            "usage: backplane bench --op attention|norm|rope|act|jobs [options]\n"
            "  attention: [--kv-kind K,..] [--ctx 512,4096,16384] [--gqa 8,4] [--dim 64,128,256] [--heads 32]\n"
            "             [--t 1] [--cold-mib 256] [--ggml PATH/ggml_attn]\n"
            "  jobs:      [--t 1,512]\n"
            "  all ops:   [--threads N] [--min-ms 300] [--json] [--profile] [--fallbacks]\n"
            "Defaults run every KV kind on every listed shape. BACKPLANE_CPU_ISA forces the kernels' ISA.\n");
    return rc;
}

static int add_nums(int64_t *list, int *n, char *arg) {
    for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
        long long v;
        if (*n >= MAX_LIST || !bp_cli_int("bench", "list entry", tok, 1, 1LL << 31, &v)) return -1;
        list[(*n)++] = v;
    }
    return 0;
}

static int parse(int argc, char **argv, bopts *o) {
    memset(o, 0, sizeof *o);
    o->heads = 32, o->cold_mib = 256, o->min_ms = 300;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        else if (!v) return fprintf(stderr, "backplane bench: %s needs a value\n", a), -1;
        else {
            i++;
            char *arg = argv[i];
            int bad = 0;
            long long x;
            if (!strcmp(a, "--op")) o->op = arg;
            else if (!strcmp(a, "--kv-kind"))
                for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ","))
                    bad |= o->nkinds >= MAX_LIST, o->kinds[o->nkinds < MAX_LIST ? o->nkinds++ : 0] = tok;
            else if (!strcmp(a, "--ctx")) bad = add_nums(o->ctx, &o->nctx, arg);
            else if (!strcmp(a, "--gqa")) bad = add_nums(o->gqa, &o->ngqa, arg);
            else if (!strcmp(a, "--dim")) bad = add_nums(o->dim, &o->ndim, arg);
            else if (!strcmp(a, "--t")) bad = add_nums(o->ts, &o->nts, arg);
            else if (!strcmp(a, "--heads")) {
                if (!bp_cli_int("bench", a, arg, 1, 4096, &x)) return -1;
                o->heads = (int)x;
            } else if (!strcmp(a, "--threads")) {
                if (!bp_cli_int("bench", a, arg, 1, 256, &x)) return -1;
                o->threads = (int)x;
            } else if (!strcmp(a, "--cold-mib") || !strcmp(a, "--min-ms")) {
                float f;
                if (!bp_cli_float("bench", a, arg, 1e-6, 1e9, &f)) return -1;
                *(a[2] == 'c' ? &o->cold_mib : &o->min_ms) = f;
            }
            else if (!strcmp(a, "--ggml")) o->ggml = arg;
            else bad = 1;
            if (bad) return fprintf(stderr, "backplane bench: bad option or value: %s %s\n", a, arg), -1;
        }
    }
    if (!o->nctx) o->ctx[o->nctx++] = 512, o->ctx[o->nctx++] = 4096, o->ctx[o->nctx++] = 16384;
    if (!o->ngqa) o->gqa[o->ngqa++] = 8, o->gqa[o->ngqa++] = 4;
    if (!o->ndim) o->dim[o->ndim++] = 64, o->dim[o->ndim++] = 128, o->dim[o->ndim++] = 256;
    o->nts_given = o->nts > 0;
    if (!o->nts) o->ts[o->nts++] = 1;
    return o->op ? 0 : -1;
}

/* Process CPU time: with the wall time of the timed calls it says what share of the CPUs a
 * figure got -- on a shared machine the figures mean little without it. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float randf(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (2.0 / 16777216.0) - 1.0);
}

static void cpu_name(char *buf, size_t len) {
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(buf, len, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
}

static double loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &l) != 1) l = -1;
    if (f) fclose(f);
    return l;
}

/* ---- attention ----------------------------------------------------------------------------- */

typedef struct attn_res {
    const char *kind;
    int64_t ctx, heads, kvh, dim, t;
    double us, gbps, tok_s;
    double g_us, g_gbps; /* ggml; < 0 when not run, 0 when unsupported */
    double share, g_share; /* CPU time / (wall x threads) over the timed calls; < 0 unknown */
    char path[96];
} attn_res;

/* ggml's figure for the same shape: one run of the timing program, its JSON line parsed. */
static void run_ggml(const bopts *o, attn_res *r) {
    r->g_us = r->g_gbps = -1;
    if (!o->ggml) return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --kind %s --ctx %lld --heads %lld --kv-heads %lld --dim %lld --t %lld --threads %d "
                              "--cold-mib %g --min-ms %g",
             o->ggml, r->kind, (long long)r->ctx, (long long)r->heads, (long long)r->kvh, (long long)r->dim,
             (long long)r->t, bp_cpu_threads(), r->t > 1 ? 0.0 : o->cold_mib, o->min_ms);
    FILE *p = popen(cmd, "r");
    char line[1024];
    while (p && fgets(line, sizeof line, p)) {
        if (strstr(line, "\"supported\": false")) r->g_us = r->g_gbps = 0;
        char *m = strstr(line, "\"median_us\": "), *g = strstr(line, "\"gbps\": "), *sh = strstr(line, "\"cpu_share\": ");
        if (m && g) r->g_us = atof(m + 13), r->g_gbps = atof(g + 8);
        r->g_share = sh ? atof(sh + 13) : -1;
    }
    if (p) pclose(p);
}

static int bench_attention_one(const bopts *o, bp_kind kind, int64_t ctx, int64_t gqa, int64_t dim, int64_t t,
                               attn_res *r) {
    int64_t heads = o->heads, kvh = heads / gqa;
    if (kvh < 1 || heads % gqa) return fprintf(stderr, "bench: %lld heads not divisible by GQA %lld\n", (long long)heads, (long long)gqa), 1;
    size_t rb;
    if (bp_kind_row_bytes(kind, dim, &rb)) return fprintf(stderr, "bench: %s\n", bp_last_error()), 1;
    size_t layer_bytes = 2 * rb * (size_t)kvh * (size_t)ctx;
    /* Decode reads K/V cold (layers rotate through --cold-mib); a prefill (t > 1) is compute-
     * bound and reuses one layer, as `backplane bench` keeps a GEMM's weights hot. */
    int layers = t > 1 ? 1 : (int)(o->cold_mib * 1048576.0 / (double)layer_bytes) + 1;
    bp_kv_cache_desc d = {.n_layers = layers, .n_kv_heads = (int32_t)kvh, .head_dim_k = (int32_t)dim,
                          .head_dim_v = (int32_t)dim, .capacity = ctx, .kind_k = kind, .kind_v = kind};
    bp_kv_cache *c = NULL;
    float *kv = NULL, *q = NULL, *out = NULL;
    int32_t *pos = NULL;
    double *tm = NULL;
    int rc = 1;
    if (bp_kv_cache_create(&d, &c)) {
        fprintf(stderr, "bench: %s\n", bp_last_error());
        goto out;
    }
    /* Layer 0 from random values (quantized by append), copied into every other layer. */
    int64_t tile = ctx < 256 ? ctx : 256;
    kv = malloc(sizeof(float) * (size_t)(tile * kvh * dim));
    q = malloc(sizeof(float) * (size_t)(t * heads * dim));
    out = malloc(sizeof(float) * (size_t)(t * heads * dim));
    pos = malloc(sizeof(int32_t) * (size_t)t);
    if (!kv || !q || !out || !pos) goto out;
    for (int64_t i = 0; i < tile * kvh * dim; i++) kv[i] = randf();
    for (int64_t i = 0; i < t * heads * dim; i++) q[i] = randf();
    for (int64_t i = 0; i < t; i++) pos[i] = (int32_t)(ctx - t + i);
    for (int64_t p0 = 0; p0 < ctx; p0 += tile) {
        int64_t n = ctx - p0 < tile ? ctx - p0 : tile;
        if (bp_kv_cache_append(c, 0, kv, kv, n, p0)) goto out;
    }
    size_t kb = rb * (size_t)kvh * (size_t)ctx;
    for (int l = 1; l < layers; l++) {
        memcpy(c->layers[l].k, c->layers[0].k, kb);
        memcpy(c->layers[l].v, c->layers[0].v, kb);
        c->layers[l].len = ctx;
    }
    bp_attn_desc ad = {.n_heads = (int32_t)heads, .n_kv_heads = (int32_t)kvh, .scale = 1.0f / sqrtf((float)dim),
                       .causal = true};
    for (int l = 0; l < layers; l++)
        if (bp_attention(&ad, q, t, pos, c, l, out)) {
            fprintf(stderr, "bench: %s\n", bp_last_error());
            goto out;
        }
    int cap = 4096, n = 0;
    tm = malloc(sizeof(double) * (size_t)cap);
    if (!tm) goto out;
    double start = bp_bench_now(), cpu0 = cpu_s();
    while (n < cap && (n < 5 || bp_bench_now() - start < o->min_ms / 1000.0)) {
        double t0 = bp_bench_now();
        bp_attention(&ad, q, t, pos, c, n % layers, out);
        tm[n++] = bp_bench_now() - t0;
    }
    double wall = bp_bench_now() - start, share = wall >= 0.05 ? (cpu_s() - cpu0) / wall / bp_cpu_threads() : -1;
    double med = bp_bench_median(tm, n);
    *r = (attn_res){.kind = bp_kind_lookup(kind)->name, .ctx = ctx, .heads = heads, .kvh = kvh, .dim = dim, .t = t,
                    .us = med * 1e6, .gbps = (double)layer_bytes / med / 1e9, .tok_s = (double)t / med};
    r->share = share;
    snprintf(r->path, sizeof r->path, "%s", bp_op_last_path("attention"));
    rc = 0;
out:
    bp_kv_cache_free(c);
    free(kv), free(q), free(out), free(pos), free(tm);
    return rc;
}

static int bench_attention(const bopts *o, double bw) {
    bp_kind kinds[MAX_LIST];
    int nk = 0;
    if (o->nkinds)
        for (int i = 0; i < o->nkinds; i++) {
            const bp_kind_info *ki = bp_kind_by_name(o->kinds[i]);
            if (!ki || !bp_kv_kind_supported(ki->kind))
                return fprintf(stderr, "backplane bench: '%s' is not a KV cache kind\n", o->kinds[i]), 2;
            kinds[nk++] = ki->kind;
        }
    else {
#define BP_KV_KIND(NAME) kinds[nk++] = BP_KIND_##NAME;
#include "backend/kv_kinds.def"
#undef BP_KV_KIND
    }
    int total = nk * o->nctx * o->ngqa * o->ndim * o->nts, n = 0, failed = 0;
    attn_res *res = calloc((size_t)total, sizeof *res);
    if (!res) return 1;
    for (int a = 0; a < o->nctx; a++)
        for (int b = 0; b < o->ngqa; b++)
            for (int e = 0; e < o->ndim; e++)
                for (int f = 0; f < o->nts; f++)
                    for (int k = 0; k < nk; k++) {
                        attn_res *r = &res[n];
                        /* Alternate who goes first, so neither always runs on a machine the other warmed. */
                        if (o->ggml && n % 2) {
                            attn_res tmp = {.kind = bp_kind_lookup(kinds[k])->name, .ctx = o->ctx[a],
                                            .heads = o->heads, .kvh = o->heads / o->gqa[b], .dim = o->dim[e], .t = o->ts[f]};
                            run_ggml(o, &tmp);
                            if (bench_attention_one(o, kinds[k], o->ctx[a], o->gqa[b], o->dim[e], o->ts[f], r)) {
                                failed++;
                                continue;
                            }
                            r->g_us = tmp.g_us, r->g_gbps = tmp.g_gbps, r->g_share = tmp.g_share;
                        } else {
                            if (bench_attention_one(o, kinds[k], o->ctx[a], o->gqa[b], o->dim[e], o->ts[f], r)) {
                                failed++;
                                continue;
                            }
                            run_ggml(o, r);
                        }
                        if (!o->ggml) r->g_us = r->g_gbps = -1;
                        n++;
                    }
    if (o->json) {
        printf("{\"op\": \"attention\", \"read_bandwidth_gbps\": %.6g, \"threads\": %d, \"results\": [", bw, bp_cpu_threads());
        for (int i = 0; i < n; i++)
            printf("%s\n  {\"kind\": \"%s\", \"ctx\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"dim\": %lld, "
                   "\"t\": %lld, \"median_us\": %.6g, \"gbps\": %.6g, \"tokens_per_s\": %.6g, \"cpu_share\": %.3g, "
                   "\"ggml_median_us\": %.6g, \"ggml_gbps\": %.6g, \"ggml_cpu_share\": %.3g}",
                   i ? "," : "", res[i].kind, (long long)res[i].ctx, (long long)res[i].heads, (long long)res[i].kvh,
                   (long long)res[i].dim, (long long)res[i].t, res[i].us, res[i].gbps, res[i].tok_s, res[i].share,
                   res[i].g_us, res[i].g_gbps, res[i].g_share);
        printf("\n]}\n");
    } else {
        printf("| KV kind | ctx | heads (q/kv) | dim | t | us | tokens/s | KV GB/s | of read BW | CPU share | ggml us | "
               "ggml KV GB/s | ggml CPU share | ours / ggml speed | path |\n"
               "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
        for (int i = 0; i < n; i++) {
            char gu[32] = "-", gg[32] = "-", ratio[32] = "-";
            if (res[i].g_us > 0) {
                snprintf(gu, sizeof gu, "%.0f", res[i].g_us);
                snprintf(gg, sizeof gg, "%.2f", res[i].g_gbps);
                snprintf(ratio, sizeof ratio, "%.1fx", res[i].g_us / res[i].us);
            } else if (res[i].g_us == 0)
                snprintf(gu, sizeof gu, "unsupported");
            char sh[16] = "-", gsh[16] = "-";
            if (res[i].share >= 0) snprintf(sh, sizeof sh, "%.0f%%", 100 * res[i].share);
            if (res[i].g_share >= 0 && res[i].g_us > 0) snprintf(gsh, sizeof gsh, "%.0f%%", 100 * res[i].g_share);
            printf("| %s | %lld | %lld/%lld | %lld | %lld | %.0f | %.0f | %.2f | %.0f%% | %s | %s | %s | %s | %s | %s |\n",
                   res[i].kind, (long long)res[i].ctx, (long long)res[i].heads, (long long)res[i].kvh,
                   (long long)res[i].dim, (long long)res[i].t, res[i].us, res[i].tok_s, res[i].gbps,
                   bw > 0 ? 100 * res[i].gbps / bw : 0, sh, gu, gg, gsh, ratio, res[i].path);
        }
    }
    free(res);
    return failed ? 1 : 0;
}

/* ---- row ops and jobs ---------------------------------------------------------------------- */

typedef bp_status (*call_fn)(void *ctx);

static double time_calls(const bopts *o, call_fn fn, void *ctx) {
    fn(ctx);
    int cap = 100000, n = 0;
    double *tm = malloc(sizeof(double) * (size_t)cap), start = bp_bench_now();
    if (!tm) return -1;
    while (n < cap && (n < 5 || bp_bench_now() - start < o->min_ms / 1000.0)) {
        double t0 = bp_bench_now();
        if (fn(ctx)) {
            fprintf(stderr, "bench: %s\n", bp_last_error());
            free(tm);
            return -1;
        }
        tm[n++] = bp_bench_now() - t0;
    }
    double med = bp_bench_median(tm, n);
    free(tm);
    return med;
}

typedef struct row_ctx {
    const char *op;
    int64_t t, n, heads, dim;
    float *x, *y, *up, *g;
    int32_t *pos;
} row_ctx;

static bp_status call_rms(void *p) {
    row_ctx *c = p;
    return bp_rms_norm(c->x, c->t, c->n, c->g, 1e-6f, c->y);
}
static bp_status call_layer(void *p) {
    row_ctx *c = p;
    return bp_layer_norm(c->x, c->t, c->n, c->g, c->g, 1e-5f, c->y);
}
static bp_status call_rope(void *p) {
    row_ctx *c = p;
    bp_rope_desc d = {.n_heads = (int32_t)c->heads, .head_dim = (int32_t)c->dim, .n_rot = (int32_t)c->dim,
                      .layout = BP_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 1};
    return bp_rope(&d, c->x, c->t, c->pos);
}
static bp_status call_geglu(void *p) {
    row_ctx *c = p;
    return bp_glu(BP_GELU_TANH, c->x, c->up, c->t * c->n, c->y);
}
static bp_status call_swiglu(void *p) {
    row_ctx *c = p;
    return bp_glu(BP_SILU, c->x, c->up, c->t * c->n, c->y);
}

static int bench_rows(const bopts *o) {
    struct { const char *op, *name; call_fn fn; int64_t t, n, heads, dim; double bytes_per; } cases[] = {
        {"norm", "rms_norm", call_rms, 1, 640, 0, 0, 8},
        {"norm", "rms_norm", call_rms, 512, 640, 0, 0, 8},
        {"norm", "rms_norm", call_rms, 512, 4096, 0, 0, 8},
        {"norm", "layer_norm", call_layer, 512, 4096, 0, 0, 8},
        {"rope", "rope neox", call_rope, 1, 1024, 4, 256, 8},
        {"rope", "rope neox", call_rope, 512, 1024, 4, 256, 8},
        {"rope", "rope neox", call_rope, 512, 4096, 32, 128, 8},
        {"act", "geglu (gelu tanh)", call_geglu, 512, 2048, 0, 0, 12},
        {"act", "swiglu", call_swiglu, 512, 8192, 0, 0, 12},
    };
    int nc = (int)(sizeof cases / sizeof cases[0]);
    if (!o->json) printf("| op | case | shape | us | GB/s | path |\n|---|---|---|---:|---:|---|\n");
    else printf("{\"op\": \"%s\", \"results\": [", o->op);
    int first = 1;
    for (int i = 0; i < nc; i++) {
        if (strcmp(o->op, cases[i].op)) continue;
        row_ctx c = {.op = cases[i].op, .t = cases[i].t, .n = cases[i].n, .heads = cases[i].heads, .dim = cases[i].dim};
        size_t tn = (size_t)(c.t * c.n);
        c.x = malloc(tn * 4), c.y = malloc(tn * 4), c.up = malloc(tn * 4), c.g = malloc((size_t)c.n * 4);
        c.pos = malloc((size_t)c.t * 4);
        if (!c.x || !c.y || !c.up || !c.g || !c.pos) return 1;
        for (size_t j = 0; j < tn; j++) c.x[j] = randf(), c.up[j] = randf();
        for (int64_t j = 0; j < c.n; j++) c.g[j] = randf();
        for (int64_t j = 0; j < c.t; j++) c.pos[j] = (int32_t)j;
        double med = time_calls(o, cases[i].fn, &c);
        double gbps = med > 0 ? cases[i].bytes_per * (double)tn / med / 1e9 : 0;
        if (o->json)
            printf("%s\n  {\"case\": \"%s\", \"t\": %lld, \"n\": %lld, \"median_us\": %.6g, \"gbps\": %.6g}", first ? "" : ",",
                   cases[i].name, (long long)c.t, (long long)c.n, med * 1e6, gbps);
        else
            printf("| %s | %s | %lld x %lld | %.1f | %.2f | %s |\n", cases[i].op, cases[i].name, (long long)c.t,
                   (long long)c.n, med * 1e6, gbps, bp_op_last_path(cases[i].fn == call_geglu || cases[i].fn == call_swiglu ? "glu" : cases[i].op));
        first = 0;
        free(c.x), free(c.y), free(c.up), free(c.g), free(c.pos);
    }
    if (o->json) printf("\n]}\n");
    return 0;
}

typedef struct jobs_ctx {
    const float *x;
    int64_t t;
    bp_matmul_job *jobs;
    int n;
} jobs_ctx;

static bp_status call_jobs(void *p) {
    jobs_ctx *c = p;
    return bp_matmul(c->x, c->t, c->jobs, c->n);
}
static bp_status call_separate(void *p) {
    jobs_ctx *c = p;
    for (int i = 0; i < c->n; i++) {
        bp_status s = bp_gemm_on(c->jobs[i].w, "cpu", c->x, c->t, c->jobs[i].y);
        if (s) return s;
    }
    return BP_OK;
}

static int bench_jobs(const bopts *o) {
    struct { const char *name; int n; bp_kind k[3]; int64_t rows[3]; } sets[] = {
        {"gemma3-270m q/k/v", 3, {BP_KIND_Q5_0, BP_KIND_Q5_0, BP_KIND_Q8_0}, {1024, 256, 256}},
        {"gemma3-270m gate/up", 2, {BP_KIND_Q5_0, BP_KIND_Q5_0}, {2048, 2048}},
    };
    const int64_t cols = 640;
    const int64_t *ts = o->nts_given ? o->ts : (const int64_t[]){1, 512};
    int nts = o->nts_given ? o->nts : 2;
    if (!o->json) printf("| jobs | t | bp_matmul us | separate bp_gemm us | speed-up | path |\n|---|---:|---:|---:|---:|---|\n");
    else printf("{\"op\": \"jobs\", \"results\": [");
    int first = 1;
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        bp_weight *w[3] = {0};
        uint8_t *data[3] = {0};
        bp_matmul_job jobs[3];
        for (int i = 0; i < sets[s].n; i++) {
            size_t rb;
            bp_kind_row_bytes(sets[s].k[i], cols, &rb);
            float *f = malloc(sizeof(float) * (size_t)cols);
            data[i] = malloc(rb * (size_t)sets[s].rows[i]);
            for (int64_t r = 0; r < sets[s].rows[i]; r++) {
                for (int64_t j = 0; j < cols; j++) f[j] = randf();
                bp_quantize(sets[s].k[i], f, cols, data[i] + (size_t)r * rb, rb);
            }
            free(f);
            bp_weight_create(sets[s].k[i], data[i], rb * (size_t)sets[s].rows[i], sets[s].rows[i], cols, &w[i]);
            jobs[i].w = w[i];
        }
        for (int ti = 0; ti < nts; ti++) {
            int64_t t = ts[ti];
            float *x = malloc(sizeof(float) * (size_t)(t * cols));
            for (int64_t j = 0; j < t * cols; j++) x[j] = randf();
            for (int i = 0; i < sets[s].n; i++) jobs[i].y = malloc(sizeof(float) * (size_t)(t * sets[s].rows[i]));
            jobs_ctx c = {x, t, jobs, sets[s].n};
            /* Three rounds, the two ways interleaved (order alternating); the median of each
             * way's per-round medians, so neither gets the quieter moments of a shared machine. */
            double ra[3], rb[3];
            for (int round = 0; round < 3; round++) {
                if (round % 2) rb[round] = time_calls(o, call_separate, &c), ra[round] = time_calls(o, call_jobs, &c);
                else ra[round] = time_calls(o, call_jobs, &c), rb[round] = time_calls(o, call_separate, &c);
            }
            double a = bp_bench_median(ra, 3), b = bp_bench_median(rb, 3);
            if (o->json)
                printf("%s\n  {\"case\": \"%s\", \"t\": %lld, \"matmul_us\": %.6g, \"separate_us\": %.6g}", first ? "" : ",",
                       sets[s].name, (long long)t, a * 1e6, b * 1e6);
            else
                printf("| %s | %lld | %.1f | %.1f | %.2fx | %s |\n", sets[s].name, (long long)t, a * 1e6, b * 1e6, b / a,
                       bp_op_last_path("jobs"));
            first = 0;
            for (int i = 0; i < sets[s].n; i++) free(jobs[i].y);
            free(x);
        }
        for (int i = 0; i < sets[s].n; i++) bp_weight_free(w[i]), free(data[i]);
    }
    if (o->json) printf("\n]}\n");
    return 0;
}

int bp_bench_ops(int argc, char **argv) {
    bopts o;
    int p = parse(argc, argv, &o);
    if (p) return usage(p > 0 ? stdout : stderr, p > 0 ? 0 : 2);
    if (o.threads && bp_cpu_set_threads(o.threads) != BP_OK) return bp_cli_error("--threads", BP_E_INVAL);
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
    double l0 = loadavg();
    /* The read bandwidth as `backplane bench` measures it: 8 MiB segments of a buffer of at
     * least 512 MiB, so every segment comes from DRAM. */
    /* Twice the cold set (512 MiB by default, as `backplane bench`), at least 64 MiB. */
    size_t bwb = (size_t)(o.cold_mib * 1048576.0) * 2;
    if (bwb < ((size_t)64 << 20)) bwb = (size_t)64 << 20;
    bool attn = !strcmp(o.op, "attention"); /* the one table set against the read bandwidth */
    double bw = attn ? bp_cpu_read_bandwidth_gbps(bwb, (size_t)8 << 20, 3) : 0;
    if (!o.json) {
        printf("%s, %d threads, ISA %s; ", cpu, bp_cpu_threads(), bp_cpu_isa_name(bp_cpu_isa_current()));
        if (attn) printf("read bandwidth %.1f GB/s; ", bw);
        printf("load average %.1f at start\n\n", l0);
    }
    int rc;
    if (!strcmp(o.op, "attention")) rc = bench_attention(&o, bw);
    else if (!strcmp(o.op, "jobs")) rc = bench_jobs(&o);
    else if (!strcmp(o.op, "norm") || !strcmp(o.op, "rope") || !strcmp(o.op, "act")) rc = bench_rows(&o);
    else return fprintf(stderr, "backplane bench: unknown --op %s (attention, norm, rope, act, jobs)\n", o.op), 2;
    if (!o.json) printf("\nload average %.1f at end\n", loadavg());
    return rc;
}
