/* The CPU paths of conv2d and MoE against their float64 references (conv2d_ref.c, moe_ref.c,
 * which test_conv2d_vectors / test_moe_vectors hold to NumPy), on shapes big enough for the
 * machinery the vector shapes do not reach: many tiles, tiles shorter than a row, one-pixel
 * tiles, ring reuse with stride 1, rows skipped by stride > k, even k, the direct 1x1 GEMM;
 * MoE with 10 experts, top-4, skewed routing. Every ISA path this machine has, 1 to 3 threads,
 * and results bit-identical across thread counts (the CPU backend's promise). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "harness.h"
#include "ops/conv2d_internal.h"

static double tol_of(bp_kind k) { return k == BP_KIND_F32 || k == BP_KIND_F16 || k == BP_KIND_BF16 ? 1e-6 : 5e-4; }

typedef struct conv_case {
    int64_t h, w, cin, cout, k, stride;
    bp_conv_norm norm;
    int64_t groups;
    bool silu, bias;
} conv_case;

static const conv_case conv_cases[] = {
    {13, 11, 64, 24, 3, 1, BP_CONV_NORM_GROUP, 8, true, true},
    {12, 9, 64, 16, 5, 2, BP_CONV_NORM_LAYER, 0, false, true},
    {7, 10, 64, 16, 1, 1, BP_CONV_NORM_NONE, 0, false, true}, /* the direct GEMM */
    {9, 9, 64, 16, 1, 3, BP_CONV_NORM_GROUP, 2, true, false}, /* stride > k: rows skipped */
    {11, 6, 64, 8, 3, 4, BP_CONV_NORM_NONE, 0, true, false},
    {6, 7, 32, 8, 2, 1, BP_CONV_NORM_GROUP, 32, false, true}, /* even k */
    {1, 17, 32, 8, 3, 1, BP_CONV_NORM_LAYER, 0, true, false}, /* one row */
};

static const size_t tiles[] = {0, 4096, 1}; /* default, several per row, one pixel */

static void conv_one(bp_kind k, const conv_case *c, uint64_t *rng) {
    const char *kn = bp_kind_lookup((uint32_t)k)->name;
    int64_t cols = c->k * c->k * c->cin;
    if (cols % bp_kind_lookup((uint32_t)k)->block_elems) return;
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(k, c->cout, cols, rng, &bytes);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(k, wd, bytes, c->cout, cols, &w));
    bp_conv2d_params p = {.h = c->h,
                          .w = c->w,
                          .cin = c->cin,
                          .cout = c->cout,
                          .k = c->k,
                          .stride = c->stride,
                          .norm = c->norm,
                          .groups = c->groups,
                          .eps = 1e-5f,
                          .silu = c->silu};
    float *x = malloc(sizeof(float) * (size_t)(c->h * c->w * c->cin)), *gb = malloc(sizeof(float) * 2 * (size_t)c->cin);
    float *bias = malloc(sizeof(float) * (size_t)c->cout);
    for (int64_t i = 0; i < c->h * c->w * c->cin; i++) x[i] = 2.0f * bp_test_randf(rng) + 0.3f * (float)(i % 7);
    for (int64_t i = 0; i < 2 * c->cin; i++) gb[i] = (i < c->cin ? 1.0f : 0.0f) + 0.4f * bp_test_randf(rng);
    for (int64_t i = 0; i < c->cout; i++) bias[i] = bp_test_randf(rng);
    if (c->norm) p.gamma = gb, p.beta = gb + c->cin;
    if (c->bias) p.bias = bias;
    int64_t oh, ow;
    CHECK_OK(bp_conv2d_out_size(&p, &oh, &ow));
    size_t ny = (size_t)(oh * ow * c->cout);
    float *ref = malloc(sizeof(float) * ny), *got = malloc(sizeof(float) * ny), *first = malloc(sizeof(float) * ny);
    CHECK_OK(bp_conv2d_on(w, "cpu-ref", &p, x, ref));
    bp_cpu_isa best = bp_cpu_isa_current();
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        for (int ti = 0; ti < 3; ti++) {
            if (ti && isa != (int)best) break; /* the tiling does not depend on the ISA: once */
            if (tiles[ti] == 1 && k != BP_KIND_Q8_0) break; /* one-pixel tiles (slow): one kind */
            bp_conv2d_cpu_set_tile_bytes(tiles[ti]);
            for (int th = 1; th <= 3; th += 2) {
                if (tiles[ti] == 1 && th > 1) break; /* one-pixel tiles: slow, and no split to vary */
                CHECK_OK(bp_cpu_set_threads(th));
                for (size_t i = 0; i < ny; i++) got[i] = NAN;
                CHECK_OK(bp_conv2d_on(w, "cpu", &p, x, got));
                double e = bp_test_nmse(got, ref, ny);
                CHECK(e <= tol_of(k), "%s %s conv %lldx%lldx%lld k %lld s %lld norm %d tile %zu threads %d: NMSE %.3g",
                      kn, bp_cpu_isa_name(bp_cpu_isa_current()), (long long)c->h, (long long)c->w, (long long)c->cin,
                      (long long)c->k, (long long)c->stride, (int)c->norm, tiles[ti], th, e);
                if (th == 1)
                    memcpy(first, got, sizeof(float) * ny);
                else
                    CHECK(!memcmp(first, got, sizeof(float) * ny),
                          "%s conv k %lld s %lld tile %zu: %d threads differ from 1", kn, (long long)c->k,
                          (long long)c->stride, tiles[ti], th);
            }
        }
    }
    bp_conv2d_cpu_set_tile_bytes(0);
    CHECK_OK(bp_cpu_isa_force(best));
    bp_weight_free(w);
    free(wd);
    free(x);
    free(gb);
    free(bias);
    free(ref);
    free(got);
    free(first);
}

static void moe_one(bp_kind k, uint64_t *rng) {
    const char *kn = bp_kind_lookup((uint32_t)k)->name;
    enum { E = 10, H = 256, I = 256, T = 41, K = 4 };
    uint8_t *gu[E], *dn[E];
    const void *gup[E], *dnp[E];
    size_t gus[E], dns[E];
    for (int e = 0; e < E; e++) {
        gu[e] = bp_test_make_weight(k, 2 * I, H, rng, &gus[e]);
        dn[e] = bp_test_make_weight(k, H, I, rng, &dns[e]);
        gup[e] = gu[e];
        dnp[e] = dn[e];
    }
    bp_moe *m = NULL;
    CHECK_OK(bp_moe_upload(E, H, I, k, gup, gus, k, dnp, dns, &m));
    int32_t ids[T * K];
    float rw[T * K], *x = malloc(sizeof(float) * T * H), *ref = malloc(sizeof(float) * T * H);
    float *got = malloc(sizeof(float) * T * H), *first = malloc(sizeof(float) * T * H);
    /* Skewed: expert 0 takes a route of most tokens (a long group), E - 1 none, token 9 repeats. */
    for (int i = 0; i < T * K; i++) {
        ids[i] = i % K == 0 && i % 3 ? 0 : (int32_t)(bp_test_rand(rng) % (E - 1));
        rw[i] = 0.1f + 0.9f * fabsf(bp_test_randf(rng));
    }
    ids[9 * K + 1] = ids[9 * K + 2] = 7;
    for (int i = 0; i < T * H; i++) x[i] = bp_test_randf(rng);
    memset(ref, 0, sizeof(float) * T * H);
    CHECK_OK(bp_moe_run_on(m, "cpu-ref", x, T, K, ids, rw, ref));
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        for (int th = 1; th <= 3; th += 2) {
            CHECK_OK(bp_cpu_set_threads(th));
            for (int t = 1; t <= T; t += T - 1) { /* decode and prefill */
                memset(got, 0, sizeof(float) * T * H);
                CHECK_OK(bp_moe_run_on(m, "cpu", x, t, K, ids, rw, got));
                double e = bp_test_nmse(got, ref, (size_t)(t * H));
                double lim = tol_of(k) < 1e-5 ? tol_of(k) : 2e-3; /* test_moe_vectors.c says why */
                CHECK(e <= lim, "%s %s MoE t %d threads %d: NMSE %.3g", kn, bp_cpu_isa_name(bp_cpu_isa_current()), t,
                      th, e);
            }
            if (th == 1)
                memcpy(first, got, sizeof(float) * T * H);
            else
                CHECK(!memcmp(first, got, sizeof(float) * T * H), "%s MoE: %d threads differ from 1", kn, th);
        }
    }
    CHECK(strstr(bp_moe_last_path(m), "9 of 10 experts") != NULL, "%s MoE path: %s", kn, bp_moe_last_path(m));
    bp_moe_free(m);
    for (int e = 0; e < E; e++) {
        free(gu[e]);
        free(dn[e]);
    }
    free(x);
    free(ref);
    free(got);
    free(first);
}

int main(void) {
    /* F32 and BF16 have their own cases in test_conv2d_vectors / test_moe_vectors. */
    static const bp_kind kinds[] = {BP_KIND_F16, BP_KIND_Q8_0, BP_KIND_Q4_K, BP_KIND_IQ4_NL};
    bp_cpu_set_min_parallel_bytes(0); /* small shapes still split rows over threads */
    uint64_t rng = 0xC0FFEE;
    /* BP_TEST_QUICK (valgrind): the first two kinds, the same code paths */
    const size_t nk = bp_test_quick() ? 2 : sizeof kinds / sizeof kinds[0];
    for (size_t ki = 0; ki < nk; ki++) {
        for (size_t c = 0; c < sizeof conv_cases / sizeof conv_cases[0]; c++) conv_one(kinds[ki], &conv_cases[c], &rng);
        if (kinds[ki] != BP_KIND_IQ4_NL) moe_one(kinds[ki], &rng);
    }
    /* Exact mode: the SiLU through libm; the same limits hold. */
    bp_set_exact_mode(true);
    conv_one(BP_KIND_F32, &conv_cases[0], &rng);
    moe_one(BP_KIND_F16, &rng);
    bp_set_exact_mode(false);
    return bp_test_finish();
}
