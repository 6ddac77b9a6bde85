/* ggml's side of the MoE side-by-side: times ggml's CPU backend on one routed-experts FFN,
 * built as llama.cpp builds it (ggml_mul_mat_id for gate and up over the routed experts,
 * ggml_swiglu_split, ggml_mul_mat_id for down, scaled by the route weights and summed over
 * the top-k), for the shapes `backplane bench --op moe` times, and prints one JSON line per
 * figure. Our own code against ggml's public API, built by tools/sidebyside/build.sh (or by
 * hand, see README.md); never linked into backplane.
 *
 * Weights are stacked 3-D tensors (ffn_gate_exps / ffn_up_exps [h, inter, E], ffn_down_exps
 * [inter, h, E]) in the CPU "repack" extra buffer type when ggml's supports_op accepts the
 * mul_mat_id there (as llama.cpp's loader asks per tensor), else a plain CPU buffer. A k-quant
 * whose down rows (inter) are not whole 256-blocks falls back as llama.cpp's quantizer does
 * (Q4_K -> Q5_0, ...), the same rule backplane's bench applies.
 *
 * Timing: each graph chains LAYERS MoE layers (cur = moe_l(cur)), so ggml's per-graph cost is
 * spread as in a model's graph; per-layer time = graph time / LAYERS, median over graphs.
 * Decode (t = 1) rotates through layer copies past --cold-mib and draws fresh random routes
 * (top-k distinct experts) before every graph; t > 1 is hot with fresh routes each time.
 *
 *   ggml_moe --kind Q4_K[,Q8_0] [--experts 8] [--top-k 2] [--h 2048] [--inter 1408] [--t 1,512]
 *            [--threads N] [--cold-mib 512] [--reps N]
 *   {"lib": "ggml", "shape": "8 experts top-2 h2048 i1408", "kind": "Q4_K, down Q5_0", "t": 1,
 *    "median_us": .., "gbps": .., "gflops": .., "buffer": "CPU_REPACK"} */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "sbs_util.h"

enum { LAYERS = 4, MAX_LIST = 16, FILL_ROWS = 64 };

static enum ggml_type type_named(const char *name) {
    enum ggml_type t = sbs_type(name);
    if (t == GGML_TYPE_COUNT) {
        fprintf(stderr, "ggml_moe: unknown type %s\n", name);
        exit(2);
    }
    return t;
}

/* Our spelling of a type name: upper case ("q4_K" -> "Q4_K"). */
static void upper(char *out, size_t len, const char *name) {
    size_t i = 0;
    for (; name[i] && i + 1 < len; i++) out[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 'a' + 'A' : name[i]);
    out[i] = '\0';
}

/* The fallback of llama.cpp's quantizer for rows that are no whole number of 256-blocks. */
static enum ggml_type down_type(enum ggml_type t, int64_t inter) {
    if (inter % ggml_blck_size(t) == 0) return t;
    switch (t) {
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K: return GGML_TYPE_IQ4_NL;
    case GGML_TYPE_Q4_K: return GGML_TYPE_Q5_0;
    case GGML_TYPE_Q5_K: return GGML_TYPE_Q5_1;
    default: return GGML_TYPE_Q8_0;
    }
}

/* E experts of rows x cols: FILL_ROWS rows quantized from random floats, repeated (values do
 * not change a kernel's speed). */
static void *stacked(enum ggml_type t, int64_t rows, int64_t cols, int64_t experts, size_t *bytes) {
    size_t rb = ggml_row_size(t, cols);
    *bytes = rb * (size_t)rows * (size_t)experts;
    uint8_t *w = malloc(*bytes);
    float *src = malloc(sizeof(float) * FILL_ROWS * (size_t)cols), *imat = malloc(sizeof(float) * (size_t)cols);
    if (!w || !src || !imat) {
        fprintf(stderr, "ggml_moe: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < FILL_ROWS * cols; i++) src[i] = sbs_f();
    for (int64_t i = 0; i < cols; i++) imat[i] = 1.0f;
    ggml_quantize_chunk(t, src, w, 0, FILL_ROWS, cols, ggml_quantize_requires_imatrix(t) ? imat : NULL);
    for (int64_t r = FILL_ROWS; r < rows * experts; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % FILL_ROWS) * rb, rb);
    free(src);
    free(imat);
    return w;
}

/* The buffer type llama.cpp would load an expert tensor into: the first extra type whose
 * supports_op takes this mul_mat_id, else the CPU buffer. */
static ggml_backend_buffer_type_t buffer_for(ggml_backend_dev_t dev, enum ggml_type t, int64_t rows, int64_t cols,
                                             int64_t experts, int64_t top_k, int64_t tokens) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_dev_get_extra_bufts_t extra =
        (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    if (!extra) return ggml_backend_cpu_buffer_type();
    struct ggml_init_params ip = {.mem_size = 8 * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *as = ggml_new_tensor_3d(ctx, t, cols, rows, experts);
    struct ggml_tensor *b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, cols, 1, tokens);
    struct ggml_tensor *ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, top_k, tokens);
    struct ggml_tensor *op = ggml_mul_mat_id(ctx, as, b, ids);
    ggml_backend_buffer_type_t found = NULL;
    for (ggml_backend_buffer_type_t *bt = extra(dev); bt && *bt && !found; bt++) {
        ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(*bt, 0);
        as->buffer = buf;
        if (ggml_backend_dev_supports_op(dev, op)) found = *bt;
        as->buffer = NULL;
        ggml_backend_buffer_free(buf);
    }
    ggml_free(ctx);
    return found ? found : ggml_backend_cpu_buffer_type();
}

typedef struct shape {
    int64_t experts, top_k, h, inter;
} shape;

static int run(ggml_backend_t be, ggml_backend_dev_t dev, enum ggml_type tg, const shape *s, int64_t t,
               size_t cold_bytes, int reps_opt) {
    enum ggml_type td = down_type(tg, s->inter);
    int64_t E = s->experts, K = s->top_k, h = s->h, I = s->inter;
    size_t gb, db;
    void *gh = stacked(tg, I, h, E, &gb), *dh = stacked(td, h, I, E, &db);
    size_t layer = 2 * gb + db;
    int copies = t == 1 ? (int)(cold_bytes / layer) + 1 : 1;
    if (copies < LAYERS) copies = LAYERS;
    copies = (copies + LAYERS - 1) / LAYERS * LAYERS;
    int ngraphs = copies / LAYERS;
    ggml_backend_buffer_type_t bg = buffer_for(dev, tg, I, h, E, K, t), bd = buffer_for(dev, td, h, I, E, K, t);

    /* Weights: two contexts, as the gate/up and down tensors may go to different buffer types. */
    struct ggml_init_params wp = {.mem_size = (size_t)(2 * copies + 2) * ggml_tensor_overhead(), .mem_buffer = NULL,
                                  .no_alloc = true};
    struct ggml_context *gctx = ggml_init(wp), *dctx = ggml_init(wp);
    struct ggml_tensor **wg = malloc(sizeof *wg * (size_t)copies), **wu = malloc(sizeof *wu * (size_t)copies);
    struct ggml_tensor **wd = malloc(sizeof *wd * (size_t)copies);
    for (int c = 0; c < copies; c++) {
        wg[c] = ggml_new_tensor_3d(gctx, tg, h, I, E);
        wu[c] = ggml_new_tensor_3d(gctx, tg, h, I, E);
        wd[c] = ggml_new_tensor_3d(dctx, td, I, h, E);
    }
    ggml_backend_buffer_t gbuf = ggml_backend_alloc_ctx_tensors_from_buft(gctx, bg);
    ggml_backend_buffer_t dbuf = ggml_backend_alloc_ctx_tensors_from_buft(dctx, bd);
    if (!gbuf || !dbuf) {
        fprintf(stderr, "ggml_moe: cannot allocate %d copies of a %zu MB layer\n", copies, layer >> 20);
        return 1;
    }
    for (int c = 0; c < copies; c++) {
        ggml_backend_tensor_set(wg[c], gh, 0, gb);
        ggml_backend_tensor_set(wu[c], gh, 0, gb);
        ggml_backend_tensor_set(wd[c], dh, 0, db);
    }
    free(gh);
    free(dh);

    /* Graphs: LAYERS chained MoE layers each, one ids and weights tensor shared by all. */
    size_t per_graph = ggml_graph_overhead_custom(64 * LAYERS, false) + (size_t)(LAYERS * (12 + 2 * K) + 4) * ggml_tensor_overhead();
    struct ggml_init_params ap = {.mem_size = (size_t)ngraphs * per_graph + 8 * ggml_tensor_overhead(), .mem_buffer = NULL,
                                  .no_alloc = true};
    struct ggml_context *actx = ggml_init(ap);
    struct ggml_tensor *x = ggml_new_tensor_2d(actx, GGML_TYPE_F32, h, t);
    struct ggml_tensor *ids = ggml_new_tensor_2d(actx, GGML_TYPE_I32, K, t);
    struct ggml_tensor *rw = ggml_new_tensor_3d(actx, GGML_TYPE_F32, 1, K, t);
    struct ggml_cgraph **g = malloc(sizeof *g * (size_t)ngraphs);
    for (int gi = 0; gi < ngraphs; gi++) {
        g[gi] = ggml_new_graph_custom(actx, 64 * LAYERS, false);
        struct ggml_tensor *cur = x;
        for (int l = 0; l < LAYERS; l++) {
            int c = gi * LAYERS + l;
            struct ggml_tensor *x3 = ggml_reshape_3d(actx, cur, h, 1, t);
            struct ggml_tensor *up = ggml_mul_mat_id(actx, wu[c], x3, ids);   /* [I, K, t] */
            struct ggml_tensor *gate = ggml_mul_mat_id(actx, wg[c], x3, ids); /* [I, K, t] */
            struct ggml_tensor *par = ggml_swiglu_split(actx, gate, up);
            struct ggml_tensor *ex = ggml_mul_mat_id(actx, wd[c], par, ids); /* [h, K, t] */
            ex = ggml_mul(actx, ex, rw);
            struct ggml_tensor *sum = ggml_view_2d(actx, ex, h, t, ex->nb[2], 0);
            for (int64_t j = 1; j < K; j++)
                sum = ggml_add(actx, sum, ggml_view_2d(actx, ex, h, t, ex->nb[2], (size_t)j * ex->nb[1]));
            cur = sum;
        }
        ggml_build_forward_expand(g[gi], cur);
    }
    ggml_backend_buffer_t abuf = ggml_backend_alloc_ctx_tensors_from_buft(actx, ggml_backend_cpu_buffer_type());
    if (!abuf) {
        fprintf(stderr, "ggml_moe: cannot allocate activations\n");
        return 1;
    }
    float *xv = malloc(sizeof(float) * (size_t)(h * t)), *wv = malloc(sizeof(float) * (size_t)(K * t));
    int32_t *iv = malloc(sizeof(int32_t) * (size_t)(K * t));
    for (int64_t i = 0; i < h * t; i++) xv[i] = sbs_f() * 0.1f;
    for (int64_t i = 0; i < K * t; i++) wv[i] = 1.0f / (float)K;
    ggml_backend_tensor_set(x, xv, 0, sizeof(float) * (size_t)(h * t));
    ggml_backend_tensor_set(rw, wv, 0, sizeof(float) * (size_t)(K * t));

#define ROUTE()                                                                          \
    do {                                                                                 \
        for (int64_t i_ = 0; i_ < t; i_++)                                               \
            for (int64_t j_ = 0; j_ < K; j_++) {                                         \
                int32_t e_;                                                              \
                int dup_;                                                                \
                do {                                                                     \
                    e_ = (int32_t)(sbs_u64() % (uint64_t)E);                             \
                    dup_ = 0;                                                            \
                    for (int64_t q_ = 0; q_ < j_; q_++) dup_ |= iv[i_ * K + q_] == e_;   \
                } while (dup_);                                                          \
                iv[i_ * K + j_] = e_;                                                    \
            }                                                                            \
        ggml_backend_tensor_set(ids, iv, 0, sizeof(int32_t) * (size_t)(K * t));          \
    } while (0)

    for (int gi = 0; gi < ngraphs; gi++) { /* warm-up: plans, repacks */
        ROUTE();
        ggml_backend_graph_compute(be, g[gi]);
    }
    int reps = reps_opt;
    if (!reps) {
        double t0 = sbs_now();
        ROUTE();
        ggml_backend_graph_compute(be, g[0]);
        double one = (sbs_now() - t0) / LAYERS;
        reps = t == 1 ? (int)(0.5 / (one * LAYERS > 0 ? one * LAYERS : 1e-3)) : 5;
        if (reps < (t == 1 ? 20 : 3)) reps = t == 1 ? 20 : 3;
    }
    if (reps > 2000) reps = 2000;
    double *times = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        ROUTE();
        double t0 = sbs_now();
        ggml_backend_graph_compute(be, g[r % ngraphs]);
        times[r] = (sbs_now() - t0) / LAYERS;
    }
#undef ROUTE
    double med = sbs_median(times, reps);
    double read = (double)(2 * ggml_row_size(tg, h) * (size_t)I + ggml_row_size(td, I) * (size_t)h) * (double)K;
    char kind[48], a[16], d[16];
    upper(a, sizeof a, ggml_type_name(tg));
    upper(d, sizeof d, ggml_type_name(td));
    if (td == tg) snprintf(kind, sizeof kind, "%s", a);
    else snprintf(kind, sizeof kind, "%s, down %s", a, d);
    printf("{\"lib\": \"ggml\", \"shape\": \"%lld experts top-%lld h%lld i%lld\", \"kind\": \"%s\", \"t\": %lld, "
           "\"median_us\": %.6g, \"gbps\": %.6g, \"gflops\": %.6g, \"buffer\": \"%s/%s\"}\n",
           (long long)E, (long long)K, (long long)h, (long long)I, kind, (long long)t, med * 1e6,
           t == 1 ? read / med / 1e9 : 0.0, 6.0 * (double)(t * K) * (double)h * (double)I / med / 1e9,
           ggml_backend_buft_name(bg), ggml_backend_buft_name(bd));
    fflush(stdout);
    free(times);
    free(xv);
    free(wv);
    free(iv);
    free(g);
    free(wg);
    free(wu);
    free(wd);
    ggml_backend_buffer_free(abuf);
    ggml_free(actx);
    ggml_backend_buffer_free(gbuf);
    ggml_backend_buffer_free(dbuf);
    ggml_free(gctx);
    ggml_free(dctx);
    return 0;
}

static int split(char *arg, char **out) {
    int n = 0;
    for (char *tok = strtok(arg, ","); tok && n < MAX_LIST; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

int main(int argc, char **argv) {
    char *kinds[MAX_LIST], *ts[MAX_LIST];
    char kdef[] = "Q4_K", tdef[] = "1,512";
    int nk = split(kdef, kinds), nt = 0, threads = 0, reps = 0;
    shape s = {8, 2, 2048, 1408};
    size_t cold = (size_t)512 << 20;
    char *tlist = tdef;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i];
        long long v = strtoll(argv[i + 1], NULL, 10);
        if (!strcmp(a, "--kind")) nk = split(argv[i + 1], kinds);
        else if (!strcmp(a, "--t")) tlist = argv[i + 1];
        else if (!strcmp(a, "--experts")) s.experts = v;
        else if (!strcmp(a, "--top-k")) s.top_k = v;
        else if (!strcmp(a, "--h")) s.h = v;
        else if (!strcmp(a, "--inter")) s.inter = v;
        else if (!strcmp(a, "--threads")) threads = (int)v;
        else if (!strcmp(a, "--cold-mib")) cold = (size_t)v << 20;
        else if (!strcmp(a, "--reps")) reps = (int)v;
        else {
            fprintf(stderr, "ggml_moe: unknown option %s\n", a);
            return 2;
        }
    }
    nt = split(tlist, ts);
    if (s.experts < 1 || s.top_k < 1 || s.top_k > s.experts || s.top_k > 64) {
        fprintf(stderr, "ggml_moe: need 1 <= top-k <= experts, top-k <= 64\n");
        return 2;
    }
    ggml_backend_load_all();
    ggml_backend_t be = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL);
    if (!be) {
        fprintf(stderr, "ggml_moe: no CPU backend\n");
        return 1;
    }
    if (threads > 0) ggml_backend_cpu_set_n_threads(be, threads);
    ggml_backend_dev_t dev = ggml_backend_get_device(be);
    int rc = 0;
    for (int k = 0; k < nk; k++)
        for (int j = 0; j < nt; j++) rc |= run(be, dev, type_named(kinds[k]), &s, strtoll(ts[j], NULL, 10), cold, reps);
    ggml_backend_free(be);
    return rc;
}
