/* ggml's side of the attention side-by-side: times ggml's CPU flash attention
 * (ggml_flash_attn_ext) on decode (and short prefill) shapes the way `backplane bench --op
 * attention` times ours, and prints one JSON line per shape. Our own code against ggml's
 * public API, built by tools/sidebyside/build.sh (or by hand, see below); never linked into
 * backplane.
 *
 * ggml is used as llama.cpp uses it: K and V are views of a token-major cache
 * ([head_dim * n_kv_heads] per token, one tensor per layer, in the cache type), Q is F32
 * [head_dim, t, n_heads], an F16 mask [n_kv, t] (zeros: a decode query sees every key), and
 * the result is F32. Each timed graph holds NODES attentions over NODES different layers' caches
 * (as a model's graph does), and the set of layers rotated through exceeds --cold-mib, so every
 * attention reads its K/V from DRAM. Per-attention time = graph time / NODES; median.
 *
 *   ggml_attn --kind F16[,Q8_0..] [--ctx 4096] [--heads 32] [--kv-heads 4] [--dim 128] [--t 1]
 *             [--threads N] [--cold-mib 256] [--min-ms 300]
 * Output, one line per kind:
 *   {"lib": "ggml", "op": "attention", "kind": "F16", "ctx": 4096, "heads": 32, "kv_heads": 4,
 *    "dim": 128, "t": 1, "median_us": .., "gbps": .., "tokens_per_s": .., "layers": ..,
 *    "samples": .., "cpu_share": CPU time / (wall time x threads) over the timed graphs}
 * A kind ggml's CPU backend does not support for this op prints {"...", "supported": false}.
 *
 * By hand: cc -std=c11 -O2 -I/tmp/llama.cpp/ggml/include tools/sidebyside/ggml_attn.c \
 *   -o /tmp/bp_sidebyside/bin/ggml_attn -L/tmp/llama.cpp/build/bin \
 *   -Wl,-rpath,/tmp/llama.cpp/build/bin -lggml -lggml-base -lggml-cpu -lm */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "sbs_util.h"

enum { NODES = 8, MAX_LIST = 16 };

/* Process CPU time, for the share of the CPUs the timed graphs got (cpu_share). */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct shape {
    int64_t ctx, heads, kv_heads, dim, t;
} shape;

/* One layer's cache rows (ctx tokens of kv_heads * dim values) in type: random floats
 * quantized once, the same bytes for every layer. */
static void *make_rows(enum ggml_type type, const shape *s, size_t *bytes) {
    int64_t n_per = s->kv_heads * s->dim;
    size_t rb = ggml_row_size(type, n_per);
    *bytes = rb * (size_t)s->ctx;
    uint8_t *out = malloc(*bytes);
    int64_t tile = s->ctx < 64 ? s->ctx : 64;
    float *src = malloc(sizeof(float) * (size_t)(tile * n_per));
    if (!out || !src) return NULL;
    for (int64_t i = 0; i < tile * n_per; i++) src[i] = sbs_f();
    ggml_quantize_chunk(type, src, out, 0, tile, n_per, NULL);
    for (int64_t r = tile; r < s->ctx; r++) memcpy(out + (size_t)r * rb, out + (size_t)(r % tile) * rb, rb);
    free(src);
    return out;
}

static int run_one(ggml_backend_t backend, ggml_backend_dev_t dev, enum ggml_type type, const char *kind, const shape *s,
                   size_t cold_bytes, double min_s, int threads) {
    size_t kv_bytes;
    void *rows = make_rows(type, s, &kv_bytes);
    if (!rows) return 1;
    size_t layer_bytes = 2 * kv_bytes; /* K and V */
    int layers = (int)(cold_bytes / layer_bytes) + 1;
    if (layers < NODES) layers = NODES;
    int ngraphs = (layers + NODES - 1) / NODES;
    layers = ngraphs * NODES;

    struct ggml_init_params wp = {.mem_size = (size_t)(2 * layers + 4) * ggml_tensor_overhead(), .mem_buffer = NULL,
                                  .no_alloc = true};
    struct ggml_context *wctx = ggml_init(wp);
    struct ggml_tensor **kc = malloc(sizeof *kc * (size_t)layers), **vc = malloc(sizeof *vc * (size_t)layers);
    for (int l = 0; l < layers; l++) {
        kc[l] = ggml_new_tensor_2d(wctx, type, s->kv_heads * s->dim, s->ctx);
        vc[l] = ggml_new_tensor_2d(wctx, type, s->kv_heads * s->dim, s->ctx);
    }
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, ggml_backend_cpu_buffer_type());
    if (!wbuf) {
        fprintf(stderr, "ggml_attn: %s: cannot allocate %d layers of %zu bytes\n", kind, layers, layer_bytes);
        return 1;
    }
    for (int l = 0; l < layers; l++) {
        ggml_backend_tensor_set(kc[l], rows, 0, kv_bytes);
        ggml_backend_tensor_set(vc[l], rows, 0, kv_bytes);
    }
    free(rows);

    size_t gmem = (size_t)ngraphs * (ggml_graph_overhead_custom(NODES * 8, false) + NODES * 4 * ggml_tensor_overhead());
    struct ggml_init_params ap = {.mem_size = gmem + 8 * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct ggml_context *actx = ggml_init(ap);
    struct ggml_tensor *q = ggml_new_tensor_3d(actx, GGML_TYPE_F32, s->dim, s->t, s->heads);
    struct ggml_tensor *mask = ggml_new_tensor_2d(actx, GGML_TYPE_F16, s->ctx, s->t);
    struct ggml_cgraph **g = malloc(sizeof *g * (size_t)ngraphs);
    int supported = 1;
    for (int gi = 0; gi < ngraphs; gi++) {
        g[gi] = ggml_new_graph_custom(actx, NODES * 8, false);
        for (int n = 0; n < NODES; n++) {
            int l = gi * NODES + n;
            size_t rb = ggml_row_size(type, s->kv_heads * s->dim), hb = ggml_row_size(type, s->dim);
            struct ggml_tensor *k = ggml_view_3d(actx, kc[l], s->dim, s->ctx, s->kv_heads, rb, hb, 0);
            struct ggml_tensor *v = ggml_view_3d(actx, vc[l], s->dim, s->ctx, s->kv_heads, rb, hb, 0);
            struct ggml_tensor *o = ggml_flash_attn_ext(actx, q, k, v, mask, 1.0f / sqrtf((float)s->dim), 0.0f, 0.0f);
            if (gi == 0 && n == 0) supported = ggml_backend_dev_supports_op(dev, o);
            ggml_build_forward_expand(g[gi], o);
        }
    }
    if (!supported) {
        printf("{\"lib\": \"ggml\", \"op\": \"attention\", \"kind\": \"%s\", \"ctx\": %lld, \"heads\": %lld, "
               "\"kv_heads\": %lld, \"dim\": %lld, \"t\": %lld, \"supported\": false}\n",
               kind, (long long)s->ctx, (long long)s->heads, (long long)s->kv_heads, (long long)s->dim, (long long)s->t);
        fflush(stdout);
        ggml_backend_buffer_free(wbuf);
        ggml_free(actx);
        ggml_free(wctx);
        return 0;
    }
    ggml_backend_buffer_t abuf = ggml_backend_alloc_ctx_tensors_from_buft(actx, ggml_backend_cpu_buffer_type());
    float *qv = malloc(sizeof(float) * (size_t)(s->dim * s->t * s->heads));
    for (int64_t i = 0; i < s->dim * s->t * s->heads; i++) qv[i] = sbs_f();
    ggml_backend_tensor_set(q, qv, 0, ggml_nbytes(q));
    free(qv);
    /* Causal over the last t positions: query i sees keys 0 .. ctx - t + i. */
    uint16_t *mv = calloc((size_t)(s->ctx * s->t), sizeof *mv);
    for (int64_t i = 0; i < s->t; i++)
        for (int64_t j = s->ctx - s->t + i + 1; j < s->ctx; j++) mv[i * s->ctx + j] = ggml_fp32_to_fp16(-INFINITY);
    ggml_backend_tensor_set(mask, mv, 0, ggml_nbytes(mask));
    free(mv);

    for (int gi = 0; gi < ngraphs; gi++) ggml_backend_graph_compute(backend, g[gi]);
    int cap = 4096, n = 0;
    double *tm = malloc(sizeof(double) * (size_t)cap), start = sbs_now(), cpu0 = cpu_s();
    while (n < cap && (n < 5 || sbs_now() - start < min_s)) {
        int gi = n % ngraphs;
        double t0 = sbs_now();
        ggml_backend_graph_compute(backend, g[gi]);
        tm[n++] = (sbs_now() - t0) / NODES;
    }
    double wall = sbs_now() - start, share = wall >= 0.05 ? (cpu_s() - cpu0) / wall / threads : -1;
    qsort(tm, (size_t)n, sizeof *tm, sbs_cmp);
    double med = n % 2 ? tm[n / 2] : 0.5 * (tm[n / 2 - 1] + tm[n / 2]);
    printf("{\"lib\": \"ggml\", \"op\": \"attention\", \"kind\": \"%s\", \"ctx\": %lld, \"heads\": %lld, \"kv_heads\": %lld, "
           "\"dim\": %lld, \"t\": %lld, \"median_us\": %.6g, \"gbps\": %.6g, \"tokens_per_s\": %.6g, \"layers\": %d, "
           "\"samples\": %d, \"cpu_share\": %.3g}\n",
           kind, (long long)s->ctx, (long long)s->heads, (long long)s->kv_heads, (long long)s->dim, (long long)s->t,
           med * 1e6, (double)layer_bytes / med / 1e9, (double)s->t / med, layers, n, share);
    fflush(stdout);
    free(tm);
    free(g);
    free(kc);
    free(vc);
    ggml_backend_buffer_free(abuf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(actx);
    ggml_free(wctx);
    return 0;
}

int main(int argc, char **argv) {
    char *kinds[MAX_LIST];
    int nk = 0, threads = 2;
    shape s = {.ctx = 4096, .heads = 32, .kv_heads = 4, .dim = 128, .t = 1};
    double cold_mib = 256, min_ms = 300;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i];
        if (!strcmp(a, "--kind")) nk = sbs_split(argv[i + 1], kinds, MAX_LIST);
        else if (!strcmp(a, "--ctx")) s.ctx = atoll(argv[i + 1]);
        else if (!strcmp(a, "--heads")) s.heads = atoll(argv[i + 1]);
        else if (!strcmp(a, "--kv-heads")) s.kv_heads = atoll(argv[i + 1]);
        else if (!strcmp(a, "--dim")) s.dim = atoll(argv[i + 1]);
        else if (!strcmp(a, "--t")) s.t = atoll(argv[i + 1]);
        else if (!strcmp(a, "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(a, "--cold-mib")) cold_mib = atof(argv[i + 1]);
        else if (!strcmp(a, "--min-ms")) min_ms = atof(argv[i + 1]);
        else {
            fprintf(stderr, "ggml_attn: unknown option %s\n", a);
            return 2;
        }
    }
    if (!nk || s.ctx < 1 || s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads || s.dim < 1 || s.t < 1 ||
        s.t > s.ctx || threads < 1) {
        fprintf(stderr, "usage: ggml_attn --kind K[,K..] [--ctx N] [--heads H] [--kv-heads G] [--dim D] [--t T] "
                        "[--threads N] [--cold-mib M] [--min-ms MS]\n");
        return 2;
    }
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_t backend = ggml_backend_cpu_init();
    if (!dev || !backend) {
        fprintf(stderr, "ggml_attn: no ggml CPU backend\n");
        return 1;
    }
    ggml_backend_cpu_set_n_threads(backend, threads);
    int rc = 0;
    for (int k = 0; k < nk; k++) {
        const enum ggml_type type = sbs_type(kinds[k]);
        if (type == GGML_TYPE_COUNT || s.dim % ggml_blck_size(type)) {
            fprintf(stderr, "ggml_attn: %s: no such ggml type, or dim %lld not a multiple of its block\n", kinds[k],
                    (long long)s.dim);
            rc = 1;
            continue;
        }
        rc |= run_one(backend, dev, type, kinds[k], &s, (size_t)(cold_mib * 1048576.0), min_ms / 1000.0,
                      threads);
    }
    ggml_backend_free(backend);
    return rc;
}
