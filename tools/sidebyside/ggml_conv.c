/* ggml's side of the conv2d side-by-side: times ggml's CPU backend on the U-Net convolutions
 * `backplane bench --op conv2d` times, built as stable-diffusion.cpp builds them, and prints
 * one JSON line per figure. Our own code against ggml's public API, built by
 * tools/sidebyside/build.sh (or by hand, see README.md); never linked into backplane.
 *
 *   input [W, H, Cin, 1] F32 (ggml's layout) -> optional ggml_group_norm(G) * gamma + beta,
 *   ggml_silu -> conv -> + bias
 *
 * The conv, per weight type:
 *   F16: ggml_conv_2d (im2col to F16, then mul_mat), and ggml_conv_2d_direct, both timed;
 *   any other type (Q8_0, ...): ggml_im2col to F32, then ggml_mul_mat with the kernel as a
 *   [k*k*Cin, Cout] matrix of that type (ggml_conv_2d cannot im2col into a quantized type).
 * Hot: one graph computed repeatedly (a U-Net runs each conv once per step on the same
 * weights); GFLOP/s = 2 OH OW Cout k k Cin / median time.
 *
 *   ggml_conv --kind F16[,Q8_0] [--hw 64] [--cin 320] [--cout 320] [--k 3] [--groups 0]
 *             [--threads N] [--reps 5]
 *   {"lib": "ggml", "shape": "64x64x320->320 k3", "kind": "F16", "method": "conv_2d (im2col+mul_mat)",
 *    "median_us": .., "gflops": ..} */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "sbs_util.h"

enum { MAX_LIST = 16 };

typedef struct conv {
    int64_t hw, cin, cout, k, groups;
} conv;

enum method { IM2COL_F16, DIRECT_F16, IM2COL_F32_MULMAT };
static const char *const method_names[] = {"conv_2d (im2col F16 + mul_mat)", "conv_2d_direct",
                                           "im2col F32 + mul_mat"};

static int run(ggml_backend_t be, enum ggml_type type, const char *kind, const conv *c, enum method m, int reps) {
    int64_t kk = c->k * c->k * c->cin, pad = c->k / 2;
    struct ggml_init_params wp = {.mem_size = 8 * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    struct ggml_context *wctx = ggml_init(wp);
    /* The kernel: [k, k, Cin, Cout] for ggml's conv ops, [k*k*Cin, Cout] for a plain mul_mat. */
    struct ggml_tensor *w = m == IM2COL_F32_MULMAT ? ggml_new_tensor_2d(wctx, type, kk, c->cout)
                                                   : ggml_new_tensor_4d(wctx, type, c->k, c->k, c->cin, c->cout);
    struct ggml_tensor *gamma = ggml_new_tensor_3d(wctx, GGML_TYPE_F32, 1, 1, c->cin);
    struct ggml_tensor *beta = ggml_new_tensor_3d(wctx, GGML_TYPE_F32, 1, 1, c->cin);
    struct ggml_tensor *bias = ggml_new_tensor_3d(wctx, GGML_TYPE_F32, 1, 1, c->cout);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, ggml_backend_cpu_buffer_type());
    size_t wbytes = ggml_nbytes(w);
    float *f = malloc(sizeof(float) * (size_t)(kk * c->cout)), *imat = malloc(sizeof(float) * (size_t)kk);
    void *q = malloc(wbytes);
    for (int64_t i = 0; i < kk * c->cout; i++) f[i] = sbs_f() * 0.05f;
    for (int64_t i = 0; i < kk; i++) imat[i] = 1.0f;
    ggml_quantize_chunk(type, f, q, 0, c->cout, kk, ggml_quantize_requires_imatrix(type) ? imat : NULL);
    ggml_backend_tensor_set(w, q, 0, wbytes);
    float *v = malloc(sizeof(float) * (size_t)(c->cin > c->cout ? c->cin : c->cout));
    for (int64_t i = 0; i < c->cin; i++) v[i] = 1.0f + 0.1f * sbs_f();
    ggml_backend_tensor_set(gamma, v, 0, sizeof(float) * (size_t)c->cin);
    for (int64_t i = 0; i < c->cin; i++) v[i] = 0.1f * sbs_f();
    ggml_backend_tensor_set(beta, v, 0, sizeof(float) * (size_t)c->cin);
    for (int64_t i = 0; i < c->cout; i++) v[i] = sbs_f();
    ggml_backend_tensor_set(bias, v, 0, sizeof(float) * (size_t)c->cout);

    struct ggml_init_params ap = {.mem_size = ggml_graph_overhead() + 16 * ggml_tensor_overhead(), .mem_buffer = NULL,
                                  .no_alloc = true};
    struct ggml_context *actx = ggml_init(ap);
    struct ggml_tensor *x = ggml_new_tensor_4d(actx, GGML_TYPE_F32, c->hw, c->hw, c->cin, 1);
    struct ggml_tensor *h = x;
    if (c->groups) {
        h = ggml_group_norm(actx, h, (int)c->groups, 1e-5f);
        h = ggml_add(actx, ggml_mul(actx, h, gamma), beta);
        h = ggml_silu(actx, h);
    }
    struct ggml_tensor *y;
    if (m == IM2COL_F16) y = ggml_conv_2d(actx, w, h, 1, 1, (int)pad, (int)pad, 1, 1);
    else if (m == DIRECT_F16) y = ggml_conv_2d_direct(actx, w, h, 1, 1, (int)pad, (int)pad, 1, 1);
    else {
        /* im2col needs the kernel's shape only: a [k, k, Cin, Cout] F16 view-less stand-in. */
        struct ggml_tensor *shape = ggml_new_tensor_4d(actx, GGML_TYPE_F16, c->k, c->k, c->cin, c->cout);
        struct ggml_tensor *cols = ggml_im2col(actx, shape, h, 1, 1, (int)pad, (int)pad, 1, 1, true, GGML_TYPE_F32);
        int64_t npix = cols->ne[1] * cols->ne[2];
        y = ggml_mul_mat(actx, w, ggml_reshape_2d(actx, cols, kk, npix)); /* [Cout, OW*OH] */
        y = ggml_cont(actx, ggml_transpose(actx, y));                      /* [OW*OH, Cout] */
        y = ggml_reshape_4d(actx, y, cols->ne[1], cols->ne[2], c->cout, 1);
    }
    y = ggml_add(actx, y, bias);
    struct ggml_cgraph *g = ggml_new_graph(actx);
    ggml_build_forward_expand(g, y);
    ggml_backend_buffer_t abuf = ggml_backend_alloc_ctx_tensors_from_buft(actx, ggml_backend_cpu_buffer_type());
    if (!abuf) {
        fprintf(stderr, "ggml_conv: cannot allocate the graph's tensors\n");
        return 1;
    }
    float *xv = malloc(sizeof(float) * (size_t)(c->hw * c->hw * c->cin));
    for (int64_t i = 0; i < c->hw * c->hw * c->cin; i++) xv[i] = sbs_f();
    ggml_backend_tensor_set(x, xv, 0, sizeof(float) * (size_t)(c->hw * c->hw * c->cin));
    if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) { /* warm-up */
        fprintf(stderr, "ggml_conv: %s %s failed\n", kind, method_names[m]);
        return 1;
    }
    double *times = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t0 = sbs_now();
        ggml_backend_graph_compute(be, g);
        times[r] = sbs_now() - t0;
    }
    double med = sbs_median(times, reps);
    printf("{\"lib\": \"ggml\", \"shape\": \"%lldx%lldx%lld->%lld k%lld%s\", \"kind\": \"%s\", \"method\": \"%s\", "
           "\"median_us\": %.6g, \"gflops\": %.6g}\n",
           (long long)c->hw, (long long)c->hw, (long long)c->cin, (long long)c->cout, (long long)c->k,
           c->groups ? (c->groups == 32 ? " GN32+SiLU" : " GN+SiLU") : "", kind, method_names[m], med * 1e6,
           2.0 * (double)(c->hw * c->hw) * (double)c->cout * (double)kk / med / 1e9);
    fflush(stdout);
    free(times);
    free(xv);
    free(f);
    free(imat);
    free(q);
    free(v);
    ggml_backend_buffer_free(abuf);
    ggml_free(actx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    return 0;
}

int main(int argc, char **argv) {
    char kdef[] = "F16", *kinds[MAX_LIST], *kl = kdef;
    conv c = {64, 320, 320, 3, 0};
    int threads = 0, reps = 5, nk = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i];
        long long v = strtoll(argv[i + 1], NULL, 10);
        if (!strcmp(a, "--kind")) kl = argv[i + 1];
        else if (!strcmp(a, "--hw")) c.hw = v;
        else if (!strcmp(a, "--cin")) c.cin = v;
        else if (!strcmp(a, "--cout")) c.cout = v;
        else if (!strcmp(a, "--k")) c.k = v;
        else if (!strcmp(a, "--groups")) c.groups = v;
        else if (!strcmp(a, "--threads")) threads = (int)v;
        else if (!strcmp(a, "--reps")) reps = v > 0 && v < 1000 ? (int)v : 5;
        else {
            fprintf(stderr, "ggml_conv: unknown option %s\n", a);
            return 2;
        }
    }
    nk = sbs_split(kl, kinds, MAX_LIST);
    ggml_backend_load_all();
    ggml_backend_t be = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL);
    if (!be) {
        fprintf(stderr, "ggml_conv: no CPU backend\n");
        return 1;
    }
    if (threads > 0) ggml_backend_cpu_set_n_threads(be, threads);
    int rc = 0;
    for (int k = 0; k < nk; k++) {
        enum ggml_type type = sbs_type(kinds[k]);
        if (type == GGML_TYPE_COUNT) {
            fprintf(stderr, "ggml_conv: unknown type %s\n", kinds[k]);
            rc = 1;
            continue;
        }
        if (type == GGML_TYPE_F16) {
            rc |= run(be, type, kinds[k], &c, IM2COL_F16, reps);
            rc |= run(be, type, kinds[k], &c, DIRECT_F16, reps);
        } else {
            rc |= run(be, type, kinds[k], &c, IM2COL_F32_MULMAT, reps);
        }
    }
    ggml_backend_free(be);
    return rc;
}
