/* Kernel-only timing of the CUDA backend for tools/gpu_check.sh step 2 (built by CMake with the
 * CUDA backend; needs a GPU to run).
 *
 * `backplane bench --backend cuda` times whole bp_matvec calls, which include the activation
 * upload, the result download and a stream sync -- tens of microseconds that dwarf an 8 us
 * kernel. This program times the kernels alone, with CUDA events around back-to-back launches,
 * repeated (doubling the count) until one timing spans at least --min-ms, so launch overhead
 * is amortized:
 *   1. achievable HBM bandwidth: a device-to-device copy of a large buffer (read + write bytes);
 *   2. per kind and shape: decode (quantize_q8 + matvec_<K>) GB/s of weight bytes, and its
 *      fraction of (1); weights rotate over copies totalling > 256 MiB, above the L2 (H200:
 *      50 MB), so the figure is HBM, not cache;
 *   3. per kind and shape: prefill TFLOP/s at batch T of gemm_<K> (tensor cores where the kind
 *      has them) and of gemm_exact_<K> (exact mode, f32).
 *
 * usage: cuda_bench [--shape RxC ...] [--batch T] [--kind K ...] [--min-ms M]
 * default: shapes 4096x4096 and 14336x4096, batch 512, every kind, 20 ms. Output: markdown. */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "kinds/kinds_internal.h"

enum { MAX_SHAPES = 8, MAX_KINDS = 64 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint8_t rbyte(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 32);
}

static int die(const char *what) {
    fprintf(stderr, "cuda_bench: %s: %s\n", what, bp_last_error());
    return 1;
}

typedef struct ctx {
    bp_device *dev;
    bp_stream *s;
    bp_event *e0, *e1;
    double min_ms;
} ctx;

/* One batch of n launches of `k` (with the i-th launch's params from fill(i)), timed. */
typedef bp_status (*launch_fn)(ctx *c, long i, void *arg);

/* Milliseconds per launch: n doubles until n launches take at least min_ms (after a warm-up). */
static double time_per(ctx *c, launch_fn f, void *arg) {
    long n = 1;
    for (int attempt = 0; attempt < 24; attempt++) {
        float ms = 0;
        if (f(c, 0, arg)) return -1; /* warm-up */
        if (bp_dev_event_record(c->dev, c->e0, c->s)) return -1;
        for (long i = 0; i < n; i++)
            if (f(c, i, arg)) return -1;
        if (bp_dev_event_record(c->dev, c->e1, c->s) || bp_dev_event_sync(c->dev, c->e1) ||
            bp_dev_event_elapsed_ms(c->dev, c->e0, c->e1, &ms))
            return -1;
        if (ms >= c->min_ms || n >= (1L << 20)) return (double)ms / (double)n;
        n *= 2;
    }
    return -1;
}

typedef struct copy_arg {
    void *a, *b;
    size_t bytes;
} copy_arg;

static bp_status do_copy(ctx *c, long i, void *p) {
    copy_arg *a = p;
    return i % 2 ? bp_dev_d2d_on(c->dev, c->s, a->a, 0, a->b, 0, a->bytes) : bp_dev_d2d_on(c->dev, c->s, a->b, 0, a->a, 0, a->bytes);
}

typedef struct op_arg {
    bp_kernel *kq, *km, *kg;
    void **w;
    int copies;
    size_t pitch;
    int rows, cols, t, nch;
    bool quant;
    void *x, *xq, *y, *ovf;
} op_arg;

static bp_status do_decode(ctx *c, long i, void *p) {
    op_arg *a = p;
    const void *wp = a->w[i % a->copies];
    void *xqa = a->quant ? a->xq : NULL;
    bp_launch_dims qd = {{(uint32_t)((a->nch + 3) / 4), 1, 1}, {BP_CU_QUANT_THREADS, 1, 1}, 0};
    bp_launch_dims md = {{(uint32_t)((a->rows + BP_CU_MV_ROWS - 1) / BP_CU_MV_ROWS), 1, 1}, {BP_CU_MV_THREADS, 1, 1}, 0};
    void *qp[] = {&a->x, &a->xq, &a->nch};
    void *mp[] = {(void *)&wp, &a->pitch, &a->rows, &a->cols, &a->x, &xqa, &a->y};
    bp_status s = a->quant ? bp_dev_launch_raw(c->dev, c->s, a->kq, &qd, qp, 3) : BP_OK;
    return s ? s : bp_dev_launch_raw(c->dev, c->s, a->km, &md, mp, 7);
}

static bp_status do_gemm(ctx *c, long i, void *p) {
    op_arg *a = p;
    const void *wp = a->w[i % a->copies];
    bp_launch_dims gd = {{(uint32_t)((a->rows + BP_CU_GEMM_TILE - 1) / BP_CU_GEMM_TILE),
                          (uint32_t)((a->t + BP_CU_GEMM_TILE - 1) / BP_CU_GEMM_TILE), 1},
                         {BP_CU_GEMM_THREADS, 1, 1}, 0};
    void *gp[] = {(void *)&wp, &a->pitch, &a->rows, &a->cols, &a->x, &a->t, &a->y, &a->ovf};
    return bp_dev_launch_raw(c->dev, c->s, a->kg, &gd, gp, 8);
}

static int usage(void) {
    fprintf(stderr, "usage: cuda_bench [--shape RxC ...] [--batch T] [--kind K ...] [--min-ms M]\n"
                    "  defaults: --shape 4096x4096 --shape 14336x4096 --batch 512 --min-ms 20, every kind\n");
    return 2;
}

int main(int argc, char **argv) {
    long shapes[MAX_SHAPES][2];
    int nshapes = 0, nkinds = 0;
    const char *kinds[MAX_KINDS];
    long t = 512;
    ctx c = {0};
    c.min_ms = 20;
    if (argc % 2 == 0) return usage(); /* options come in pairs */
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *v = argv[i + 1];
        if (!strcmp(argv[i], "--shape") && nshapes < MAX_SHAPES &&
            sscanf(v, "%ldx%ld", &shapes[nshapes][0], &shapes[nshapes][1]) == 2)
            nshapes++;
        else if (!strcmp(argv[i], "--batch")) t = atol(v);
        else if (!strcmp(argv[i], "--kind") && nkinds < MAX_KINDS) kinds[nkinds++] = v;
        else if (!strcmp(argv[i], "--min-ms")) c.min_ms = atof(v);
        else return usage();
    }
    if (!nshapes) {
        shapes[0][0] = 4096, shapes[0][1] = 4096, shapes[1][0] = 14336, shapes[1][1] = 4096;
        nshapes = 2;
    }
    for (int i = 0; i < nshapes; i++)
        if (shapes[i][0] < 1 || shapes[i][1] < 256 || shapes[i][1] % 256) {
            fprintf(stderr, "cuda_bench: shape %ldx%ld: need rows >= 1 and cols a multiple of 256\n", shapes[i][0],
                    shapes[i][1]);
            return 2;
        }
    if (t < 2 || t > BP_CU_GEMM_MAX_T || c.min_ms <= 0) return usage();
    char why[256];
    if (!bp_cu_probe(why, sizeof why)) {
        fprintf(stderr, "cuda_bench: %s\n", why);
        return 1;
    }
    if (bp_cu_device(&c.dev, &c.s)) return die("device");
    if (bp_dev_event_create(c.dev, &c.e0) || bp_dev_event_create(c.dev, &c.e1)) return die("events");
    printf("# %s\n\nkernel time only (CUDA events around back-to-back launches, each timing >= %.0f ms)\n\n", why,
           c.min_ms);

    /* 1. Achievable HBM bandwidth: d2d copies back and forth, bytes read + bytes written. */
    size_t total = 0, freeb = 0;
    if (bp_dev_mem_info(c.dev, &total, &freeb)) return die("mem_info");
    copy_arg ca = {NULL, NULL, (size_t)1 << 31};
    while (ca.bytes * 4 > freeb && ca.bytes > ((size_t)64 << 20)) ca.bytes /= 2;
    if (bp_dev_alloc(c.dev, ca.bytes, &ca.a) || bp_dev_alloc(c.dev, ca.bytes, &ca.b)) return die("copy buffers");
    if (bp_dev_memset(c.dev, ca.a, 0, 1, ca.bytes)) return die("memset");
    const double cms = time_per(&c, do_copy, &ca);
    if (cms <= 0) return die("d2d timing");
    const double hbm = 2.0 * (double)ca.bytes / (cms * 1e6);
    printf("d2d copy of %zu MiB: %.0f GB/s (read + write) -- the decode figures' 100%%\n\n", ca.bytes >> 20, hbm);
    bp_dev_free(c.dev, ca.a);
    bp_dev_free(c.dev, ca.b);
    fflush(stdout);

    for (int si = 0; si < nshapes; si++) {
        const long rows = shapes[si][0], cols = shapes[si][1];
        printf("## %ld x %ld: decode (batch 1) and prefill (batch %ld)\n\n", rows, cols, t);
        printf("| kind | decode us | decode GB/s | of d2d | prefill ms | prefill TFLOP/s | exact ms | exact TFLOP/s |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|\n");
        op_arg a = {0};
        a.rows = (int)rows, a.cols = (int)cols, a.t = (int)t, a.nch = (int)(cols / 32);
        float *hx = malloc(sizeof(float) * (size_t)(t * cols));
        if (!hx) return die("host x");
        for (long i = 0; i < t * cols; i++) hx[i] = (float)(rbyte() - 128) / 128.0f;
        if (bp_dev_alloc(c.dev, sizeof(float) * (size_t)(t * cols), &a.x) ||
            bp_dev_alloc(c.dev, (size_t)a.nch * BP_CU_XQ_BYTES, &a.xq) ||
            bp_dev_alloc(c.dev, sizeof(float) * (size_t)(t * rows), &a.y) || bp_dev_alloc(c.dev, 4, &a.ovf) ||
            bp_dev_h2d(c.dev, a.x, 0, hx, sizeof(float) * (size_t)(t * cols)))
            return die("activation buffers");
        free(hx);
        for (int ki = 0; ki < bp_kind_table_size(); ki++) {
            const bp_kind_info *info = bp_kind_at(ki);
            bool want = info->role == BP_ROLE_W && !nkinds;
            for (int j = 0; j < nkinds; j++) want = want || !strcmp(kinds[j], info->name);
            if (!want) continue;
            size_t rb;
            if (bp_kind_row_bytes(info->kind, cols, &rb)) return die("row bytes");
            a.pitch = (rb + 15) & ~(size_t)15;
            const size_t wbytes = a.pitch * (size_t)rows;
            a.copies = (int)((256u << 20) / wbytes + 1);
            a.w = calloc((size_t)a.copies, sizeof *a.w);
            uint8_t *hw = malloc(wbytes);
            if (!a.w || !hw) return die("host weights");
            for (size_t i = 0; i < wbytes; i++) hw[i] = rbyte(); /* values do not matter for time */
            for (int k = 0; k < a.copies; k++)
                if (bp_dev_alloc(c.dev, wbytes + 16, &a.w[k]) || bp_dev_h2d(c.dev, a.w[k], 0, hw, wbytes))
                    return die("weights");
            free(hw);
            char mv[48], gm[48], gx[48];
            snprintf(mv, sizeof mv, "matvec_%s", info->name);
            snprintf(gm, sizeof gm, "gemm_%s", info->name);
            snprintf(gx, sizeof gx, "gemm_exact_%s", info->name);
            bp_kernel *kexact;
            if (bp_dev_kernel(c.dev, "quantize_q8", &a.kq) || bp_dev_kernel(c.dev, mv, &a.km) ||
                bp_dev_kernel(c.dev, gm, &a.kg) || bp_dev_kernel(c.dev, gx, &kexact))
                return die("kernel lookup");
            a.quant = info->block_elems > 1;
            const double dms = time_per(&c, do_decode, &a);
            const double gms = time_per(&c, do_gemm, &a);
            a.kg = kexact;
            const double xms = time_per(&c, do_gemm, &a);
            if (dms <= 0 || gms <= 0 || xms <= 0) return die("timing");
            const double gbps = ((double)rb * (double)rows) / (dms * 1e6);
            const double flop = 2.0 * (double)rows * (double)cols * (double)t;
            printf("| %s | %.1f | %.0f | %.0f%% | %.3f | %.1f | %.3f | %.1f |\n", info->name, dms * 1e3, gbps,
                   100.0 * gbps / hbm, gms, flop / (gms * 1e9), xms, flop / (xms * 1e9));
            fflush(stdout);
            for (int k = 0; k < a.copies; k++) bp_dev_free(c.dev, a.w[k]);
            free(a.w);
        }
        bp_dev_free(c.dev, a.x);
        bp_dev_free(c.dev, a.xq);
        bp_dev_free(c.dev, a.y);
        bp_dev_free(c.dev, a.ovf);
        printf("\n");
    }
    bp_dev_event_destroy(c.dev, c.e0);
    bp_dev_event_destroy(c.dev, c.e1);
    return 0;
}
