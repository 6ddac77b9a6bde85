/* conv2d against NumPy float64 (tests/vectors/conv_moe/gen_conv_moe.py: F.conv2d with
 * GroupNorm / LayerNorm, affine and SiLU applied to the input first, over weights dequantized
 * by the gguf package), for every weight kind: k = 1, 3, 5, strides 1 and 2, odd image sizes,
 * GroupNorm with groups dividing cin (1, 4, cin), LayerNorm, SiLU alone, bias or none; F32, F16
 * and Q8_0 over every k x stride x variant. Three paths: the float64 reference ("cpu-ref",
 * NMSE <= 1e-9: only summation order differs), the CPU fast path ("cpu") and the op's own
 * choice, both at the NMSE limits (1e-6 exact-float weights, 5e-4 quantized). */
#include "conv_moe_vectors.h"

#include <math.h>
#include <stdio.h>

static void run_case(const bp_kind_info *ki, cm_file *f, int ci) {
    bp_conv2d_params p = {0};
    p.h = cm_i32(f), p.w = cm_i32(f), p.cin = cm_i32(f), p.cout = cm_i32(f), p.k = cm_i32(f);
    p.stride = cm_i32(f);
    p.norm = (bp_conv_norm)cm_i32(f);
    p.groups = cm_i32(f);
    p.silu = cm_i32(f) != 0;
    int has_bias = cm_i32(f);
    p.eps = cm_f32(f);
    uint64_t seed = cm_u64(f), fnv_x = cm_u64(f), fnv_w = cm_u64(f);
    int64_t oh = 0, ow = 0;
    CHECK_OK(bp_conv2d_out_size(&p, &oh, &ow));
    const float *want_raw = cm_take(f, sizeof(float) * (size_t)(oh * ow * p.cout));
    if (f->bad) return;
    float *want = malloc(sizeof(float) * (size_t)(oh * ow * p.cout));
    memcpy(want, want_raw, sizeof(float) * (size_t)(oh * ow * p.cout));

    uint64_t rng = seed;
    int64_t cols = p.k * p.k * p.cin, nb = p.cout * cols / ki->block_elems;
    float *x = malloc(sizeof(float) * (size_t)(p.h * p.w * p.cin));
    float *gamma = malloc(sizeof(float) * (size_t)p.cin), *beta = malloc(sizeof(float) * (size_t)p.cin);
    float *bias = malloc(sizeof(float) * (size_t)p.cout);
    uint8_t *wd = malloc((size_t)nb * ki->block_bytes);
    cm_fill(x, p.h * p.w * p.cin, 1.5, 0.25, &rng);
    cm_fill(gamma, p.cin, 0.5, 1.0, &rng);
    cm_fill(beta, p.cin, 0.25, 0.0, &rng);
    cm_fill(bias, p.cout, 0.5, 0.0, &rng);
    cm_blocks(f, wd, nb, &rng);
    CHECK(cm_fnv1a(x, sizeof(float) * (size_t)(p.h * p.w * p.cin)) == fnv_x && cm_fnv1a(wd, (size_t)nb * ki->block_bytes) == fnv_w,
          "%s case %d: regenerated input or weight differs from the generator's (PRNG drift)", ki->name, ci);
    if (p.norm != BP_CONV_NORM_NONE) p.gamma = gamma, p.beta = beta;
    if (has_bias) p.bias = bias;

    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(ki->kind, wd, (size_t)nb * ki->block_bytes, p.cout, cols, &w));
    float *y = malloc(sizeof(float) * (size_t)(oh * ow * p.cout));
    const char *paths[] = {"cpu-ref", "cpu", NULL};
    for (int pi = 0; pi < 3 && w; pi++) {
        const char *path = pi < 2 ? paths[pi] : "(op's choice)";
        for (int64_t i = 0; i < oh * ow * p.cout; i++) y[i] = NAN;
        bp_status s = pi < 2 ? bp_conv2d_on(w, paths[pi], &p, x, y) : bp_conv2d(w, &p, x, y);
        CHECK(s == BP_OK, "%s case %d via %s: %s", ki->name, ci, path, bp_last_error());
        double e = bp_test_nmse(y, want, (size_t)(oh * ow * p.cout)), tol = pi == 0 ? 1e-9 : cm_tol(ki->kind);
        CHECK(e <= tol,
              "%s case %d via %s (%lldx%lldx%lld -> %lld, k %lld, stride %lld, norm %d groups %lld, silu %d): NMSE %.3g > %.1g",
              ki->name, ci, path, (long long)p.h, (long long)p.w, (long long)p.cin, (long long)p.cout, (long long)p.k,
              (long long)p.stride, (int)p.norm, (long long)p.groups, (int)p.silu, e, tol);
    }
    bp_weight_free(w);
    free(y);
    free(x);
    free(gamma);
    free(beta);
    free(bias);
    free(wd);
    free(want);
}

static void run_file(const bp_kind_info *ki, cm_file *f) {
    for (uint32_t c = 0; c < f->ncases && !f->bad; c++) run_case(ki, f, (int)c);
}

int main(void) {
    cm_each_kind("conv2d", "BPCV", run_file);
    return bp_test_finish();
}
