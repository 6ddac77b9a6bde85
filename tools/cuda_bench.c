/* Kernel-only timing of the CUDA decode (matvec) and prefill (GEMM) kernels, for
 * tools/gpu_check.sh on a GPU machine; not built by CMake (CI machines have no GPU).
 *
 * `backplane bench --backend cuda` times whole bp_matvec calls, which include the activation
 * upload, the result download and a stream sync -- tens of microseconds that dwarf an 8 us
 * kernel. This program times the kernels alone: CUDA events around `reps` back-to-back launches.
 * Decode reads rotate over enough weight copies to exceed the L2 cache (H200: 50 MB), so the
 * GB/s figure is HBM bandwidth, not L2.
 *
 * usage: cuda_bench [--rows R] [--cols C] [--batch T] [--reps N] [--kind K]
 * Output: a markdown table; decode GB/s and its fraction of 4.8 TB/s (H200 HBM3e), prefill TFLOP/s.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "kinds/kinds_internal.h"

#define HBM_GBPS 4800.0

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

int main(int argc, char **argv) {
    long rows = 8192, cols = 8192, t = 512, reps = 50;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows")) rows = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--cols")) cols = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) t = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--kind")) only = argv[i + 1];
    }
    if (rows < 1 || cols < 256 || cols % 256 || t < 2 || reps < 1) {
        fprintf(stderr, "cuda_bench: need rows >= 1, cols a multiple of 256, batch >= 2, reps >= 1\n");
        return 2;
    }
    char why[256];
    if (!bp_cu_probe(why, sizeof why)) {
        fprintf(stderr, "cuda_bench: %s\n", why);
        return 1;
    }
    bp_device *dev;
    bp_stream *s;
    if (bp_cu_device(&dev, &s)) return die("device");
    printf("# %s\n\n%ld x %ld, decode = quantize_q8 + matvec, prefill batch %ld, %ld reps, kernel time only\n\n",
           why, rows, cols, t, reps);
    printf("| kind | decode us | decode GB/s | of 4.8 TB/s | prefill ms | prefill TFLOP/s |\n|---|---|---|---|---|---|\n");
    void *x, *xq, *y;
    const int nch = (int)(cols / 32);
    if (bp_dev_alloc(dev, sizeof(float) * (size_t)(t * cols), &x) || bp_dev_alloc(dev, (size_t)nch * BP_CU_XQ_BYTES, &xq) ||
        bp_dev_alloc(dev, sizeof(float) * (size_t)(t * rows), &y))
        return die("activation buffers");
    float *hx = malloc(sizeof(float) * (size_t)(t * cols));
    for (long i = 0; i < t * cols; i++) hx[i] = (float)(rbyte() - 128) / 128.0f;
    if (bp_dev_h2d(dev, x, 0, hx, sizeof(float) * (size_t)(t * cols))) return die("x upload");
    bp_event *e0, *e1;
    if (bp_dev_event_create(dev, &e0) || bp_dev_event_create(dev, &e1)) return die("events");
    for (int ki = 0; ki < bp_kind_table_size(); ki++) {
        const bp_kind_info *info = bp_kind_at(ki);
        if (info->role != BP_ROLE_W || (only && strcmp(only, info->name))) continue;
        size_t rb;
        if (bp_kind_row_bytes(info->kind, cols, &rb)) return die("row bytes");
        const size_t pitch = (rb + 15) & ~(size_t)15, wbytes = pitch * (size_t)rows;
        const int copies = (int)((256u << 20) / wbytes + 1); /* > 5x the L2 */
        void **w = calloc((size_t)copies, sizeof *w);
        uint8_t *hw = malloc(wbytes);
        for (size_t i = 0; i < wbytes; i++) hw[i] = rbyte(); /* values do not matter for time */
        for (int c = 0; c < copies; c++)
            if (bp_dev_alloc(dev, wbytes + 16, &w[c]) || bp_dev_h2d(dev, w[c], 0, hw, wbytes)) return die("weights");
        char mv[48], gm[48];
        snprintf(mv, sizeof mv, "matvec_%s", info->name);
        snprintf(gm, sizeof gm, "gemm_%s", info->name);
        bp_kernel *kq, *km, *kg;
        if (bp_dev_kernel(dev, "quantize_q8", &kq) || bp_dev_kernel(dev, mv, &km) || bp_dev_kernel(dev, gm, &kg))
            return die("kernel lookup");
        int irows = (int)rows, icols = (int)cols, it = (int)t;
        const bool quant = info->block_elems > 1;
        bp_launch_dims qd = {{(uint32_t)((nch + 3) / 4), 1, 1}, {BP_CU_QUANT_THREADS, 1, 1}, 0};
        bp_launch_dims md = {{(uint32_t)((rows + BP_CU_MV_ROWS - 1) / BP_CU_MV_ROWS), 1, 1}, {BP_CU_MV_THREADS, 1, 1}, 0};
        bp_launch_dims gd = {{(uint32_t)((rows + 63) / 64), (uint32_t)((t + 63) / 64), 1}, {BP_CU_GEMM_THREADS, 1, 1}, 0};
        void *xqa = quant ? xq : NULL;
        float dms = 0, gms = 0;
        for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up */
            if (bp_dev_event_record(dev, e0, s)) return die("record");
            for (long r = 0; r < reps; r++) {
                const void *wp = w[r % copies];
                size_t p = pitch;
                void *qp[] = {&x, &xq, (void *)&nch};
                void *mp[] = {&wp, &p, &irows, &icols, &x, &xqa, &y};
                if (quant && bp_dev_launch_raw(dev, s, kq, &qd, qp, 3)) return die("quantize launch");
                if (bp_dev_launch_raw(dev, s, km, &md, mp, 7)) return die("matvec launch");
            }
            if (bp_dev_event_record(dev, e1, s) || bp_dev_event_sync(dev, e1) ||
                bp_dev_event_elapsed_ms(dev, e0, e1, &dms))
                return die("decode timing");
        }
        const long greps = reps / 10 > 3 ? reps / 10 : 3;
        for (int pass = 0; pass < 2; pass++) {
            if (bp_dev_event_record(dev, e0, s)) return die("record");
            for (long r = 0; r < greps; r++) {
                const void *wp = w[r % copies];
                size_t p = pitch;
                void *gp[] = {&wp, &p, &irows, &icols, &x, &it, &y};
                if (bp_dev_launch_raw(dev, s, kg, &gd, gp, 7)) return die("gemm launch");
            }
            if (bp_dev_event_record(dev, e1, s) || bp_dev_event_sync(dev, e1) ||
                bp_dev_event_elapsed_ms(dev, e0, e1, &gms))
                return die("prefill timing");
        }
        const double dus = 1000.0 * dms / (double)reps;
        const double gbps = ((double)rb * (double)rows + 4.0 * (double)cols) / (dus * 1e3);
        const double gsec = gms / 1000.0 / (double)greps;
        printf("| %s | %.1f | %.0f | %.1f%% | %.3f | %.1f |\n", info->name, dus, gbps, 100.0 * gbps / HBM_GBPS,
               gsec * 1e3, 2.0 * (double)rows * (double)cols * (double)t / gsec / 1e12);
        fflush(stdout);
        for (int c = 0; c < copies; c++) bp_dev_free(dev, w[c]);
        free(w);
        free(hw);
    }
    bp_dev_event_destroy(dev, e0);
    bp_dev_event_destroy(dev, e1);
    bp_dev_free(dev, x);
    bp_dev_free(dev, xq);
    bp_dev_free(dev, y);
    free(hx);
    return 0;
}
