/* backplane bench --op conv2d | --op moe: the op layer's conv2d and MoE at real models' shapes.
 *
 * conv2d: a diffusion U-Net block's convolutions, 64x64x320 -> 320 (k 3) and 32x32x640 -> 640
 * (k 3, GroupNorm(32) + SiLU fused into the input); GFLOP/s = 2 oh ow cout k k cin / time, hot
 * (one weight, as a U-Net runs each conv once per step on the same weights).
 *
 * moe: routed experts at a real model's shapes (h 2048: 8 experts top-2 inter 1408, as
 * Qwen1.5-MoE-A2.7B's shape with 8 experts; 64 experts top-8 inter 768, as Qwen3-30B-A3B's
 * with 64), decode (t = 1) in GB/s of expert weights read (each used expert's gate, up and
 * down once), cold: the layer is rotated through copies bigger than the last-level cache and
 * each call routes to fresh random experts; prefill (t = 512, random top-k routes, hot) in
 * GFLOP/s = 6 t top_k h inter / time. Weights in the GGUF stacked layout (bp_moe_upload_stacked).
 *
 * Every figure is the median of repeated calls of the public op (bp_conv2d, bp_moe_run), so it
 * is what a model gets, on whatever backend the op layer picks (the path column names it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"

enum { MAX_KINDS = 32 };

typedef struct conv_shape {
    const char *name;
    int64_t hw, cin, cout, k, stride, groups; /* groups 0: no norm */
} conv_shape;

static const conv_shape conv_shapes[] = {
    {"64x64x320->320 k3", 64, 320, 320, 3, 1, 0},
    {"32x32x640->640 k3 GN32+SiLU", 32, 640, 640, 3, 1, 32},
};

typedef struct moe_shape {
    const char *name;
    int64_t experts, top_k, h, inter;
} moe_shape;

static const moe_shape moe_shapes[] = {
    {"8 experts top-2 h2048 i1408", 8, 2, 2048, 1408},
    {"64 experts top-8 h2048 i768", 64, 8, 2048, 768},
};

typedef struct bopts {
    const char *op;
    const bp_kind_info *kinds[MAX_KINDS];
    int nkinds, reps, threads, json;
    int64_t ts[8]; /* MoE token counts (default 1 and 512) */
    int nts;
} bopts;

bool bp_bench_conv_moe_wants(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--op") && (!strcmp(argv[i + 1], "conv2d") || !strcmp(argv[i + 1], "moe"))) return true;
    return false;
}

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: backplane bench --op conv2d|moe [--kind K ...] [--reps N] [--threads N] [--json] [--fallbacks]\n"
               "  conv2d: U-Net block convolutions (64x64x320->320 k3; 32x32x640->640 k3 GroupNorm(32)+SiLU), GFLOP/s;\n"
               "          default kinds F16 Q8_0\n"
               "  moe:    8 experts top-2 (inter 1408) and 64 experts top-8 (inter 768), h 2048: decode t=1 GB/s of\n"
               "          expert weights read (cold), prefill t=512 GFLOP/s; default kinds Q4_K Q8_0\n"
               "  --t T     MoE tokens per call (repeat the option; default 1 and 512)\n"
               "  --reps N  timed calls per figure (default: ~0.5 s of decode calls, 5 of the others)\n");
    return rc;
}

static int parse(int argc, char **argv, bopts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        else if (!v) return -1;
        else if (!strcmp(a, "--op")) o->op = argv[++i];
        else if (!strcmp(a, "--kind")) {
            for (char *tok = strtok(argv[++i], ","); tok; tok = strtok(NULL, ",")) {
                const bp_kind_info *ki = bp_kind_by_name(tok);
                if (!ki || ki->role != BP_ROLE_W || o->nkinds == MAX_KINDS) {
                    fprintf(stderr, "backplane bench: '%s' is not a weight kind\n", tok);
                    return -1;
                }
                o->kinds[o->nkinds++] = ki;
            }
        } else {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 100000) return -1;
            if (!strcmp(a, "--reps")) o->reps = (int)n;
            else if (!strcmp(a, "--t") && o->nts < 8) o->ts[o->nts++] = n;
            else if (!strcmp(a, "--threads")) o->threads = (int)n;
            else return -1;
        }
    }
    if (!o->nts) o->ts[o->nts++] = 1, o->ts[o->nts++] = 512;
    if (!o->nkinds) {
        const char *def[2] = {"F16", "Q8_0"};
        if (!strcmp(o->op, "moe")) def[0] = "Q4_K";
        for (int i = 0; i < 2; i++) o->kinds[o->nkinds++] = bp_kind_by_name(def[i]);
    }
    return 0;
}

static uint64_t rnext(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static float frand(uint64_t *s) { return (float)((rnext(s) >> 40) * (2.0 / 16777216.0) - 1.0); }

typedef struct row {
    const char *shape;
    char kind[32];          /* "Q4_K", or "Q4_K, down Q5_0" when the down projection differs */
    int64_t t;              /* MoE tokens; 0 for conv2d */
    double ms, gbps, gflops;
    char path[200];
} row;

static void print_rows(const bopts *o, const row *r, int n, double bw) {
    if (o->json) {
        printf("{\"op\": \"%s\", \"threads\": %d, \"read_bandwidth_gbps\": %.6g, \"results\": [", o->op, bp_cpu_threads(), bw);
        for (int i = 0; i < n; i++) {
            printf("%s\n  {\"lib\": \"backplane\", \"shape\": \"%s\", \"kind\": \"%s\", \"t\": %lld, \"median_us\": %.6g, "
                   "\"gbps\": %.6g, \"gflops\": %.6g, \"path\": ",
                   i ? "," : "", r[i].shape, r[i].kind, (long long)r[i].t, r[i].ms * 1e3, r[i].gbps, r[i].gflops);
            bp_cli_json_str(stdout, r[i].path);
            printf("}");
        }
        printf("\n]}\n");
        return;
    }
    printf("CPU: %d threads, ISA %s", bp_cpu_threads(), bp_cpu_isa_name(bp_cpu_isa_current()));
    if (bw > 0) printf("; read bandwidth %.1f GB/s", bw);
    printf("\n\n| shape | kind | test | median ms | GB/s | GFLOP/s | path |\n|---|---|---|---:|---:|---:|---|\n");
    for (int i = 0; i < n; i++) {
        char test[24] = "hot", gb[16] = "-";
        if (r[i].t) snprintf(test, sizeof test, r[i].t == 1 ? "decode t=1" : "prefill t=%lld", (long long)r[i].t);
        if (r[i].gbps > 0) snprintf(gb, sizeof gb, "%.1f", r[i].gbps);
        printf("| %s | %s | %s | %.3f | %s | %.1f | %s |\n", r[i].shape, r[i].kind, test, r[i].ms, gb, r[i].gflops,
               r[i].path);
    }
}

/* ---- conv2d ------------------------------------------------------------------------------- */

static int bench_conv(const bopts *o, const conv_shape *c, const bp_kind_info *ki, row *out) {
    int64_t cols = c->k * c->k * c->cin, npix = c->hw * c->hw;
    size_t rb;
    if (bp_kind_row_bytes(ki->kind, cols, &rb)) {
        fprintf(stderr, "backplane bench: conv2d %s: %s\n", ki->name, bp_last_error());
        return 1;
    }
    uint8_t *wd = malloc(rb * (size_t)c->cout);
    float *x = malloc(sizeof(float) * (size_t)(npix * c->cin)), *y = malloc(sizeof(float) * (size_t)(npix * c->cout));
    float *gb = malloc(sizeof(float) * 2 * (size_t)c->cin), *bias = malloc(sizeof(float) * (size_t)c->cout);
    double *times = malloc(sizeof(double) * 1000);
    bp_weight *w = NULL;
    int rc = 1;
    if (!wd || !x || !y || !gb || !bias || !times || bp_bench_fill_weights(ki, c->cout, cols, rb, wd) ||
        bp_weight_create(ki->kind, wd, rb * (size_t)c->cout, c->cout, cols, &w)) {
        fprintf(stderr, "backplane bench: conv2d %s: setup failed: %s\n", ki->name, bp_last_error());
        goto out;
    }
    uint64_t s = 0x51ED;
    for (int64_t i = 0; i < npix * c->cin; i++) x[i] = frand(&s);
    for (int64_t i = 0; i < 2 * c->cin; i++) gb[i] = (i < c->cin) + 0.1f * frand(&s);
    for (int64_t i = 0; i < c->cout; i++) bias[i] = frand(&s);
    bp_conv2d_params p = {.h = c->hw, .w = c->hw, .cin = c->cin, .cout = c->cout, .k = c->k, .stride = c->stride,
                          .bias = bias};
    if (c->groups) p.norm = BP_CONV_NORM_GROUP, p.groups = c->groups, p.eps = 1e-5f, p.gamma = gb, p.beta = gb + c->cin,
                   p.silu = true;
    if (bp_conv2d(w, &p, x, y)) { /* warm-up: repacks, pool start */
        fprintf(stderr, "backplane bench: conv2d %s: %s\n", ki->name, bp_last_error());
        goto out;
    }
    int reps = o->reps ? (o->reps < 1000 ? o->reps : 1000) : 5;
    for (int r = 0; r < reps; r++) {
        double t0 = bp_bench_now();
        bp_conv2d(w, &p, x, y);
        times[r] = bp_bench_now() - t0;
    }
    double med = bp_bench_median(times, reps);
    *out = (row){.shape = c->name, .ms = med * 1e3, .gflops = 2.0 * (double)npix * (double)c->cout * (double)cols / med / 1e9};
    snprintf(out->kind, sizeof out->kind, "%s", ki->name);
    snprintf(out->path, sizeof out->path, "%s", bp_op_last_path(c->groups ? "conv2d_gn" : "conv2d"));
    rc = 0;
out:
    bp_weight_free(w);
    free(wd);
    free(x);
    free(y);
    free(gb);
    free(bias);
    free(times);
    return rc;
}

/* ---- MoE ---------------------------------------------------------------------------------- */

/* top_k distinct random experts per token. */
static void random_routes(int64_t t, int64_t top_k, int64_t experts, uint64_t *s, int32_t *ids, float *w) {
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < top_k; j++) {
            int32_t e;
            bool dup;
            do {
                e = (int32_t)(rnext(s) % (uint64_t)experts);
                dup = false;
                for (int64_t q = 0; q < j; q++) dup |= ids[i * top_k + q] == e;
            } while (dup);
            ids[i * top_k + j] = e;
            w[i * top_k + j] = 1.0f / (float)top_k;
        }
}

/* The down projection's kind: its rows are inter long, and 1408 is no whole number of 256-element
 * blocks, so a model quantized to a k-quant stores ffn_down_exps in the kind llama.cpp's
 * quantizer falls back to for such rows (Q2_K, Q3_K -> IQ4_NL; Q4_K -> Q5_0; Q5_K -> Q5_1;
 * Q6_K -> Q8_0; anything else -> Q8_0). */
static const bp_kind_info *down_kind(const bp_kind_info *ki, int64_t inter) {
    if (inter % ki->block_elems == 0) return ki;
    const char *fb = "Q8_0";
    if (ki->kind == BP_KIND_Q2_K || ki->kind == BP_KIND_Q3_K) fb = "IQ4_NL";
    else if (ki->kind == BP_KIND_Q4_K) fb = "Q5_0";
    else if (ki->kind == BP_KIND_Q5_K) fb = "Q5_1";
    return bp_kind_by_name(fb);
}

static int bench_moe(const bopts *o, const moe_shape *m, const bp_kind_info *ki, int64_t t, row *out) {
    int64_t E = m->experts, h = m->h, I = m->inter, K = m->top_k;
    const bp_kind_info *kd = down_kind(ki, I);
    size_t rb_gu, rb_d;
    if (bp_kind_row_bytes(ki->kind, h, &rb_gu) || bp_kind_row_bytes(kd->kind, I, &rb_d)) {
        fprintf(stderr, "backplane bench: moe %s: %s\n", ki->name, bp_last_error());
        return 1;
    }
    size_t gu_mat = rb_gu * (size_t)I, d_mat = rb_d * (size_t)h, layer = (2 * gu_mat + d_mat) * (size_t)E;
    /* Decode reads cold weights: copies of the layer past the LLC, each call on the next copy. */
    int copies = t == 1 ? (int)(bp_bench_cold_bytes() / layer) + 1 : 1;
    uint8_t *data = malloc(layer * (size_t)copies);
    bp_moe **mo = calloc((size_t)copies, sizeof *mo);
    float *x = malloc(sizeof(float) * (size_t)(t * h)), *y = malloc(sizeof(float) * (size_t)(t * h));
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(t * K));
    float *rw = malloc(sizeof(float) * (size_t)(t * K));
    double *times = malloc(sizeof(double) * 4000);
    int rc = 1;
    if (!data || !mo || !x || !y || !ids || !rw || !times) {
        fprintf(stderr, "backplane bench: moe %s: out of memory (%d copies of %zu MB)\n", ki->name, copies, layer >> 20);
        goto out;
    }
    /* One matrix of each shape filled, then copied to every expert of every copy. */
    uint8_t *g0 = data, *d0 = data + 2 * gu_mat * (size_t)E;
    if (bp_bench_fill_weights(ki, I, h, rb_gu, g0) || bp_bench_fill_weights(kd, h, I, rb_d, d0)) goto out;
    for (int64_t e = 1; e < 2 * E; e++) memcpy(g0 + (size_t)e * gu_mat, g0, gu_mat);
    for (int64_t e = 1; e < E; e++) memcpy(d0 + (size_t)e * d_mat, d0, d_mat);
    for (int c = 0; c < copies; c++) {
        uint8_t *base = data + (size_t)c * layer;
        if (c) memcpy(base, data, layer);
        bp_moe_tensor tg = {ki->kind, {h, I, E}, base, gu_mat * (size_t)E};
        bp_moe_tensor tu = {ki->kind, {h, I, E}, base + gu_mat * (size_t)E, gu_mat * (size_t)E};
        bp_moe_tensor td = {kd->kind, {I, h, E}, base + 2 * gu_mat * (size_t)E, d_mat * (size_t)E};
        if (bp_moe_upload_stacked(&tg, &tu, &td, &mo[c])) {
            fprintf(stderr, "backplane bench: moe %s: %s\n", ki->name, bp_last_error());
            goto out;
        }
    }
    uint64_t s = 0xE4E4 + (uint64_t)t;
    for (int64_t i = 0; i < t * h; i++) x[i] = frand(&s);
    /* Warm-up: every copy, every expert once (repacked layouts are made at first use). */
    int32_t all[64];
    float allw[64];
    for (int64_t e = 0; e < E; e += K) {
        for (int64_t j = 0; j < K; j++) all[j] = (int32_t)((e + j) % E), allw[j] = 1.0f / (float)K;
        for (int c = 0; c < copies; c++)
            if (bp_moe_run(mo[c], x, 1, K, all, allw, y)) {
                fprintf(stderr, "backplane bench: moe %s: %s\n", ki->name, bp_last_error());
                goto out;
            }
    }
    int reps = o->reps ? o->reps : t == 1 ? 0 : 5;
    if (!reps) { /* about half a second of decode calls */
        random_routes(t, K, E, &s, ids, rw);
        double t0 = bp_bench_now();
        bp_moe_run(mo[0], x, t, K, ids, rw, y);
        double one = bp_bench_now() - t0;
        reps = one > 0 ? (int)(0.5 / one) : 100;
        reps = reps < 20 ? 20 : reps;
    }
    if (reps > 4000) reps = 4000;
    for (int r = 0; r < reps; r++) {
        random_routes(t, K, E, &s, ids, rw); /* fresh experts each call: no reuse across calls */
        double t0 = bp_bench_now();
        bp_moe_run(mo[r % copies], x, t, K, ids, rw, y);
        times[r] = bp_bench_now() - t0;
    }
    double med = bp_bench_median(times, reps);
    *out = (row){.shape = m->name, .t = t, .ms = med * 1e3, .gflops = 6.0 * (double)(t * K) * (double)h * (double)I / med / 1e9};
    if (kd == ki) snprintf(out->kind, sizeof out->kind, "%s", ki->name);
    else snprintf(out->kind, sizeof out->kind, "%s, down %s", ki->name, kd->name);
    if (t == 1) out->gbps = (double)(2 * gu_mat + d_mat) * (double)K / med / 1e9;
    snprintf(out->path, sizeof out->path, "%s", bp_moe_last_path(mo[0]));
    rc = 0;
out:
    for (int c = 0; mo && c < copies; c++) bp_moe_free(mo[c]);
    free(mo);
    free(data);
    free(x);
    free(y);
    free(ids);
    free(rw);
    free(times);
    return rc;
}

int bp_bench_conv_moe(int argc, char **argv) {
    bopts o;
    int p = parse(argc, argv, &o);
    if (p || !o.op) return usage(p > 0 ? stdout : stderr, p > 0 ? 0 : 2);
    if (o.threads && bp_cpu_set_threads(o.threads) != BP_OK) return bp_cli_error("--threads", BP_E_INVAL);
    bool conv = !strcmp(o.op, "conv2d");
    row res[2 * 8 * MAX_KINDS];
    int n = 0, failed = 0;
    double bw = -1;
    if (!conv) bw = bp_cpu_read_bandwidth_gbps(bp_bench_cold_bytes(), (size_t)8 << 20, 3);
    for (size_t si = 0; si < (conv ? sizeof conv_shapes / sizeof conv_shapes[0] : sizeof moe_shapes / sizeof moe_shapes[0]); si++)
        for (int k = 0; k < o.nkinds; k++) {
            if (conv) {
                if (bench_conv(&o, &conv_shapes[si], o.kinds[k], &res[n])) failed++;
                else n++;
                continue;
            }
            for (int ti = 0; ti < o.nts; ti++) {
                if (bench_moe(&o, &moe_shapes[si], o.kinds[k], o.ts[ti], &res[n])) failed++;
                else n++;
            }
        }
    print_rows(&o, res, n, bw);
    return failed ? 1 : 0;
}
