/* ggml's side of the matmul side-by-side: times ggml's CPU backend on y = W x for one weight
 * kind and shape, the way `backplane bench` times ours, and prints one JSON line per batch.
 * Our own code, built against a ggml source tree by tools/sidebyside/build.sh (never linked
 * into backplane). ggml is used as llama.cpp uses it: the weight goes into the CPU "repack"
 * extra buffer type when ggml says that buffer supports the matmul (llama.cpp's loader asks
 * the same question per tensor), else a plain CPU buffer; activations are F32.
 *
 * Timing: each timed graph holds 8 matmuls (2 from batch 64 on, or for a weight bigger than the
 * cold set: one product then takes milliseconds and the per-graph cost is small beside it), so ggml's per-graph cost (plan, thread start)
 * is spread over them as in a model's graph; per-product time = graph time / nodes, median over
 * the timed graphs. Batch 1 (decode) rotates through enough copies of the weight
 * to exceed --cold-mib, so every product reads its weight from DRAM; batch > 1 reuses one
 * copy (hot), as `backplane bench` does.
 *
 *   ggml_mm --kind Q4_K[,Q8_0...] [--rows 4096] [--cols 4096] [--batch 1[,2,...]] [--threads N]
 *           [--cold-mib 256] [--min-ms 300]
 * Output, one line per kind and batch:
 *   {"lib": "ggml", "kind": "Q4_K", "batch": 1, "rows": 4096, "cols": 4096, "median_us": ..,
 *    "gbps": .., "gflops": .., "buffer": "CPU_REPACK"} */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "sbs_util.h"

enum { MAX_NODES = 8, MAX_LIST = 64, TILE_ROWS = 64 };

/* The buffer type llama.cpp's loader would pick for this weight: the first extra buffer type
 * whose supports_op accepts the matmul, else the plain CPU buffer. */
static ggml_backend_buffer_type_t pick_buft(ggml_backend_dev_t dev, enum ggml_type type, int64_t rows, int64_t cols,
                                            int64_t batch) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_dev_get_extra_bufts_t get =
        (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    if (!get) return ggml_backend_cpu_buffer_type();
    struct ggml_init_params ip = {.mem_size = 8 * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, type, cols, rows);
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, batch);
    struct ggml_tensor *op = ggml_mul_mat(ctx, w, x);
    ggml_backend_buffer_type_t found = NULL;
    for (ggml_backend_buffer_type_t *b = get(dev); b && *b && !found; b++) {
        ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(*b, 0);
        w->buffer = buf;
        if (ggml_backend_dev_supports_op(dev, op)) found = *b;
        w->buffer = NULL;
        ggml_backend_buffer_free(buf);
    }
    ggml_free(ctx);
    return found ? found : ggml_backend_cpu_buffer_type();
}

/* One tile of rows quantized from random floats, repeated down the matrix (values do not
 * change a kernel's speed; quantizing 16M floats with the IQ quantizers would take minutes). */
static void *make_weight(enum ggml_type type, int64_t rows, int64_t cols, size_t *bytes) {
    size_t rb = ggml_row_size(type, cols);
    *bytes = rb * (size_t)rows;
    uint8_t *w = malloc(*bytes);
    int64_t tile = rows < TILE_ROWS ? rows : TILE_ROWS;
    float *src = malloc(sizeof(float) * (size_t)(tile * cols));
    float *imat = malloc(sizeof(float) * (size_t)cols);
    if (!w || !src || !imat) {
        fprintf(stderr, "ggml_mm: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < tile * cols; i++) src[i] = sbs_f();
    for (int64_t i = 0; i < cols; i++) imat[i] = 1.0f;
    ggml_quantize_chunk(type, src, w, 0, tile, cols, ggml_quantize_requires_imatrix(type) ? imat : NULL);
    for (int64_t r = tile; r < rows; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % tile) * rb, rb);
    free(src);
    free(imat);
    return w;
}

static int run_one(ggml_backend_t backend, ggml_backend_dev_t dev, enum ggml_type type, const char *kind_name,
                   int64_t rows, int64_t cols, int64_t batch, size_t cold_bytes, double min_s) {
    size_t bytes;
    void *host = make_weight(type, rows, cols, &bytes);
    /* A weight bigger than the cold set (a model's output projection) is cold by itself. */
    const int NODES = batch >= 64 || bytes >= cold_bytes ? 2 : MAX_NODES;
    int copies = batch == 1 ? (int)(cold_bytes / bytes) + 1 : 1;
    if (copies < NODES && batch == 1) copies = NODES;
    int ngraphs = batch == 1 ? (copies + NODES - 1) / NODES : 1;
    copies = batch == 1 ? ngraphs * NODES : 1;
    ggml_backend_buffer_type_t buft = pick_buft(dev, type, rows, cols, batch);

    struct ggml_init_params wp = {.mem_size = (size_t)(copies + 1) * ggml_tensor_overhead(), .mem_buffer = NULL,
                                  .no_alloc = true};
    struct ggml_context *wctx = ggml_init(wp);
    struct ggml_tensor **w = malloc(sizeof *w * (size_t)copies);
    for (int c = 0; c < copies; c++) w[c] = ggml_new_tensor_2d(wctx, type, cols, rows);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    if (!wbuf) {
        fprintf(stderr, "ggml_mm: %s: cannot allocate %d copies of %zu bytes\n", kind_name, copies, bytes);
        return 1;
    }
    /* Huge pages for the weights, as `backplane bench` gives its own (its cold buffer and the
     * repacked copies): on a machine with transparent huge pages on "madvise", streaming over 4
     * KiB pages reads markedly slower, and both sides must read the same kind of memory. The
     * pages are not touched yet: tensor_set below faults them in. */
    {
        uintptr_t base = (uintptr_t)ggml_backend_buffer_get_base(wbuf), end = base + ggml_backend_buffer_get_size(wbuf);
        uintptr_t lo = (base + 4095) & ~(uintptr_t)4095;
        if (end > lo) madvise((void *)lo, (size_t)(end - lo) & ~(size_t)4095, MADV_HUGEPAGE);
    }
    for (int c = 0; c < copies; c++) ggml_backend_tensor_set(w[c], host, 0, bytes);
    free(host);

    size_t graph_mem = (size_t)ngraphs * (ggml_graph_overhead_custom(NODES * 2, false) + (NODES + 1) * ggml_tensor_overhead());
    struct ggml_init_params ap = {.mem_size = graph_mem + 4 * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct ggml_context *actx = ggml_init(ap);
    struct ggml_tensor *x = ggml_new_tensor_2d(actx, GGML_TYPE_F32, cols, batch);
    struct ggml_cgraph **g = malloc(sizeof *g * (size_t)ngraphs);
    for (int gi = 0; gi < ngraphs; gi++) {
        g[gi] = ggml_new_graph_custom(actx, NODES * 2, false);
        for (int n = 0; n < NODES; n++) ggml_build_forward_expand(g[gi], ggml_mul_mat(actx, w[batch == 1 ? gi * NODES + n : 0], x));
    }
    ggml_backend_buffer_t abuf = ggml_backend_alloc_ctx_tensors_from_buft(actx, ggml_backend_cpu_buffer_type());
    float *xv = malloc(sizeof(float) * (size_t)(cols * batch));
    for (int64_t i = 0; i < cols * batch; i++) xv[i] = sbs_f();
    ggml_backend_tensor_set(x, xv, 0, sizeof(float) * (size_t)(cols * batch));
    free(xv);

    /* Warm-up: every graph once (ggml plans its work buffer at first use). */
    for (int gi = 0; gi < ngraphs; gi++) ggml_backend_graph_compute(backend, g[gi]);
    int cap = 4096, n = 0;
    double *t = malloc(sizeof(double) * (size_t)cap), start = sbs_now();
    /* At least 5 graphs, 3 when one takes over a second (ggml's Q2_0 prefill: ~30 s for 5). */
    while (n < cap && (n < (n && t[0] * NODES > 1.0 ? 3 : 5) || sbs_now() - start < min_s)) {
        int gi = n % ngraphs;
        double t0 = sbs_now();
        ggml_backend_graph_compute(backend, g[gi]);
        t[n++] = (sbs_now() - t0) / NODES;
    }
    qsort(t, (size_t)n, sizeof *t, sbs_cmp);
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    printf("{\"lib\": \"ggml\", \"kind\": \"%s\", \"batch\": %lld, \"rows\": %lld, \"cols\": %lld, \"median_us\": %.6g, "
           "\"gbps\": %.6g, \"gflops\": %.6g, \"buffer\": \"%s\", \"copies\": %d, \"samples\": %d}\n",
           kind_name, (long long)batch, (long long)rows, (long long)cols, med * 1e6, (double)bytes / med / 1e9,
           2.0 * (double)rows * (double)cols * (double)batch / med / 1e9, ggml_backend_buft_name(buft), copies, n);
    fflush(stdout);
    free(t);
    free(g);
    free(w);
    ggml_backend_buffer_free(abuf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(actx);
    ggml_free(wctx);
    return 0;
}

int main(int argc, char **argv) {
    char *kinds[MAX_LIST], *batches_s[MAX_LIST];
    int nk = 0, nb = 0, threads = 2;
    int64_t rows = 4096, cols = 4096;
    double cold_mib = 256, min_ms = 300;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i];
        if (!strcmp(a, "--kind")) nk = sbs_split(argv[i + 1], kinds, MAX_LIST);
        else if (!strcmp(a, "--batch")) nb = sbs_split(argv[i + 1], batches_s, MAX_LIST);
        else if (!strcmp(a, "--rows")) rows = atoll(argv[i + 1]);
        else if (!strcmp(a, "--cols")) cols = atoll(argv[i + 1]);
        else if (!strcmp(a, "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(a, "--cold-mib")) cold_mib = atof(argv[i + 1]);
        else if (!strcmp(a, "--min-ms")) min_ms = atof(argv[i + 1]);
        else {
            fprintf(stderr, "ggml_mm: unknown option %s\n", a);
            return 2;
        }
    }
    if (!nk || rows < 1 || cols < 1 || threads < 1) {
        fprintf(stderr, "usage: ggml_mm --kind K[,K..] [--rows R] [--cols C] [--batch T[,T..]] [--threads N] "
                        "[--cold-mib M] [--min-ms MS]\n");
        return 2;
    }
    char one[] = "1";
    if (!nb) batches_s[nb++] = one;
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_t backend = ggml_backend_cpu_init();
    if (!dev || !backend) {
        fprintf(stderr, "ggml_mm: no ggml CPU backend\n");
        return 1;
    }
    ggml_backend_cpu_set_n_threads(backend, threads);
    int rc = 0;
    for (int k = 0; k < nk; k++) {
        const enum ggml_type type = sbs_type(kinds[k]);
        if (type == GGML_TYPE_COUNT) {
            fprintf(stderr, "ggml_mm: ggml has no type %s\n", kinds[k]);
            rc = 1;
            continue;
        }
        if (cols % ggml_blck_size(type)) {
            fprintf(stderr, "ggml_mm: %s needs columns in multiples of %lld\n", kinds[k],
                    (long long)ggml_blck_size(type));
            rc = 1;
            continue;
        }
        for (int b = 0; b < nb; b++) {
            int64_t t = atoll(batches_s[b]);
            if (t < 1) continue;
            rc |= run_one(backend, dev, type, kinds[k], rows, cols, t, (size_t)(cold_mib * 1048576.0),
                          min_ms / 1000.0);
        }
    }
    ggml_backend_free(backend);
    return rc;
}
