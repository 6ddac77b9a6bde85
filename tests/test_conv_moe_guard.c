/* conv2d and MoE under the seam's guard, through the mock backends:
 *  - an over-claimed (conv2d_gn, Q8_0) and (moe, Q4_K) pair is caught by name;
 *  - the route report is the walk's choice per norm variant and per (gate/up, down) kind pair;
 *  - a claimed pair runs on the mock with the reference's numbers, and a launch error (a
 *    failed device alloc, or a failed read-back of MoE's accumulated y) falls back to the CPU
 *    with the right numbers, a counted fallback naming backend, kind, op and cause, and a path
 *    that says so;
 *  - the MoE offload switch is honoured: off, a claiming op backend is skipped, and with a
 *    matvec-level mock claiming the kind, the expert matmuls stay on the CPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "seam/mock_install.h"
#include "ops/ops_internal.h"
#include "seam/seam_internal.h"

static void guard_bites(void) {
    bp_mock_backend_config cfg;
    memset(&cfg, 0, sizeof cfg);
    const bp_kind ks[] = {BP_KIND_Q8_0, BP_KIND_Q4_K, BP_KIND_F16};
    bp_mock_claim(&cfg, BP_OP_CONV2D_GN, ks, 3);
    bp_mock_claim(&cfg, BP_OP_MOE, ks, 3);
    cfg.launch[BP_OP_CONV2D_GN][BP_KIND_Q8_0] = false; /* over-claims */
    cfg.launch[BP_OP_MOE][BP_KIND_Q4_K] = false;
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_op bop[8];
    bp_kind bk[8];
    FILE *f = tmpfile();
    int n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bop, bk, 8, f);
    CHECK(n == 2 && bop[0] == BP_OP_CONV2D_GN && bk[0] == BP_KIND_Q8_0 && bop[1] == BP_OP_MOE && bk[1] == BP_KIND_Q4_K,
          "exactly conv2d_gn Q8_0 and moe Q4_K are reported (n=%d)", n);
    char a[256] = "", b[256] = "";
    rewind(f);
    CHECK(fgets(a, sizeof a, f) && fgets(b, sizeof b, f) &&
              strstr(a, "mock: conv2d_gn Q8_0 claimed but has_launch is false") &&
              strstr(b, "mock: moe Q4_K claimed but has_launch is false"),
          "report lines: %s%s", a, b);
    fclose(f);
    bp_mock_backend_uninstall();
}

typedef struct conv_setup {
    uint8_t *wd;
    bp_weight *w;
    bp_conv2d_params p;
    float x[9 * 7 * 32], gb[64], y[9 * 7 * 8], ref[9 * 7 * 8];
} conv_setup;

static void conv_make(conv_setup *c) {
    uint64_t rng = 21;
    size_t bytes;
    c->wd = bp_test_make_weight(BP_KIND_Q8_0, 8, 9 * 32, &rng, &bytes);
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, c->wd, bytes, 8, 9 * 32, &c->w));
    for (int i = 0; i < 9 * 7 * 32; i++) c->x[i] = bp_test_randf(&rng) + 0.5f;
    for (int i = 0; i < 64; i++) c->gb[i] = (i < 32) + 0.3f * bp_test_randf(&rng);
    c->p = (bp_conv2d_params){.h = 9, .w = 7, .cin = 32, .cout = 8, .k = 3, .stride = 1, .norm = BP_CONV_NORM_GROUP,
                              .groups = 4, .eps = 1e-5f, .gamma = c->gb, .beta = c->gb + 32, .silu = true};
    CHECK_OK(bp_conv2d_on(c->w, "cpu-ref", &c->p, c->x, c->ref));
}

enum { E = 4, H = 64, I = 32, T = 5, K = 2 };

typedef struct moe_setup {
    uint8_t *gu[E], *dn[E];
    bp_moe *m;
    float x[T * H], y0[T * H], y[T * H], ref[T * H], rw[T * K];
    int32_t ids[T * K];
} moe_setup;

static void moe_make(moe_setup *s, bp_kind k) {
    uint64_t rng = 99;
    const void *gp[E], *dp[E];
    size_t gs[E], ds[E];
    for (int e = 0; e < E; e++) {
        s->gu[e] = bp_test_make_weight(k, 2 * I, H, &rng, &gs[e]);
        s->dn[e] = bp_test_make_weight(k, H, I, &rng, &ds[e]);
        gp[e] = s->gu[e], dp[e] = s->dn[e];
    }
    CHECK_OK(bp_moe_upload(E, H, I, k, gp, gs, k, dp, ds, &s->m));
    for (int i = 0; i < T * H; i++) s->x[i] = bp_test_randf(&rng), s->y0[i] = bp_test_randf(&rng);
    for (int i = 0; i < T * K; i++) s->ids[i] = (int32_t)(bp_test_rand(&rng) % E), s->rw[i] = 0.5f + 0.5f * bp_test_randf(&rng);
    memcpy(s->ref, s->y0, sizeof s->ref);
    CHECK_OK(bp_moe_run_on(s->m, "cpu-ref", s->x, T, K, s->ids, s->rw, s->ref));
}

static void moe_free(moe_setup *s) {
    bp_moe_free(s->m);
    for (int e = 0; e < E; e++) free(s->gu[e]), free(s->dn[e]);
}

/* Run s's MoE from y0; NMSE of the op's part (y - y0) against the reference's. */
static double moe_err(moe_setup *s) {
    memcpy(s->y, s->y0, sizeof s->y);
    bp_status st = bp_moe_run(s->m, s->x, T, K, s->ids, s->rw, s->y);
    CHECK(st == BP_OK, "bp_moe_run: %s", bp_last_error());
    double num = 0, den = 0;
    for (int i = 0; i < T * H; i++) {
        double d = (double)s->y[i] - s->ref[i], r = (double)s->ref[i] - s->y0[i];
        num += d * d, den += r * r;
    }
    return num / den;
}

static void route_run_fallback(void) {
    bp_mock_backend_config cfg;
    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim(&cfg, BP_OP_CONV2D_GN, (const bp_kind[]){BP_KIND_Q8_0}, 1);
    bp_mock_claim(&cfg, BP_OP_MOE, (const bp_kind[]){BP_KIND_Q8_0}, 1);
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 99));
    int slot = bp_seam_slot_find("mock");
    CHECK(bp_test_route(BP_OP_CONV2D_GN, BP_KIND_Q8_0, BP_KIND_Q8_0) == slot, "GroupNorm conv Q8_0 routes to the mock");
    CHECK(bp_test_route(BP_OP_CONV2D, BP_KIND_Q8_0, BP_KIND_Q8_0) == -1, "a plain conv Q8_0 is unclaimed: CPU");
    CHECK(bp_test_route(BP_OP_CONV2D_LN, BP_KIND_Q8_0, BP_KIND_Q8_0) == -1, "a LayerNorm conv Q8_0 is unclaimed: CPU");
    CHECK(bp_test_route(BP_OP_MOE, BP_KIND_Q8_0, BP_KIND_Q8_0) == slot, "MoE Q8_0 routes to the mock");
    CHECK(bp_test_route(BP_OP_MOE, BP_KIND_Q8_0, BP_KIND_Q6_K) == -1, "MoE with a Q6_K down: both kinds needed, CPU");

    FILE *logf = tmpfile();
    bp_seam_set_log(logf);
    bp_fallback_reset();
    bp_stats_reset();
    conv_setup c;
    conv_make(&c);
    CHECK_OK(bp_conv2d(c.w, &c.p, c.x, c.y));
    CHECK(bp_mock_backend_ops() == 1 && !memcmp(c.y, c.ref, sizeof c.y), "the mock ran the conv with the reference's numbers");
    CHECK(!strcmp(bp_op_last_path("conv2d_gn"), "Mock conv2d_gn Q8_0"), "path: %s",
          bp_op_last_path("conv2d_gn"));
    bp_conv2d_params plain = c.p;
    plain.norm = BP_CONV_NORM_NONE, plain.gamma = plain.beta = NULL;
    CHECK(bp_conv2d_on(c.w, "mock", &plain, c.x, c.y) == BP_E_UNSUPPORTED && strstr(bp_last_error(), "no Q8_0 conv2d kernel"),
          "forcing an unclaimed conv on the mock is an error: %s", bp_last_error());

    bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_ALLOC, 1, BP_E_NOMEM);
    memset(c.y, 0, sizeof c.y);
    CHECK_OK(bp_conv2d(c.w, &c.p, c.x, c.y));
    double e = bp_test_nmse(c.y, c.ref, sizeof c.y / sizeof c.y[0]);
    CHECK(bp_mock_backend_ops() == 1 && e <= 5e-4, "conv fallback: NMSE %.3g against the reference", e);
    bp_fallback_entry fe[4];
    int nf = bp_fallback_list(fe, 4);
    CHECK(bp_fallback_total() == 1 && nf == 1 && !strcmp(fe[0].backend, "mock") && !strcmp(fe[0].kind, "Q8_0") &&
              !strcmp(fe[0].op, "conv2d_gn") && !strcmp(fe[0].to, "CPU") &&
              strstr(fe[0].cause, "injected alloc failure"),
          "conv fallback row names backend, kind, op, cause, CPU");
    CHECK(strstr(bp_op_last_path("conv2d_gn"), "CPU conv2d_gn Q8_0") &&
              strstr(bp_op_last_path("conv2d_gn"), "(fallback from Mock"),
          "conv path names the fallback: %s", bp_op_last_path("conv2d_gn"));
    CHECK(bp_test_op_calls("conv2d_gn", "mock") == 1 && bp_test_op_calls("conv2d_gn", "cpu") == 1, "conv stats");
    bp_weight_free(c.w);
    free(c.wd);

    moe_setup s;
    moe_make(&s, BP_KIND_Q8_0);
    bp_set_moe_offload(true);
    CHECK(moe_err(&s) <= 1e-10 && bp_mock_backend_ops() == 2, "the mock ran the MoE (runs %d)", bp_mock_backend_ops());
    CHECK(!strcmp(bp_moe_last_path(s.m), "Mock moe Q8_0"), "MoE path: %s", bp_moe_last_path(s.m));
    /* The read-back fails: y must be y0 + MoE once, not twice and not half. */
    bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_COPY, 2, BP_E_DEVICE);
    e = moe_err(&s);
    CHECK(bp_mock_backend_ops() == 2 && e <= 2e-3, "MoE fallback after a failed read-back: NMSE %.3g", e);
    nf = bp_fallback_list(fe, 4);
    CHECK(bp_fallback_total() == 2 && nf == 2 && !strcmp(fe[1].op, "moe") && !strcmp(fe[1].backend, "mock") &&
              strstr(fe[1].cause, "injected copy failure"),
          "MoE fallback row");
    CHECK(strstr(bp_moe_last_path(s.m), "(fallback from Mock"), "MoE path: %s", bp_moe_last_path(s.m));

    /* Offload off: the claiming mock is skipped, the CPU runs it, nothing falls back. */
    bp_set_moe_offload(false);
    e = moe_err(&s);
    CHECK(bp_mock_backend_ops() == 2 && e <= 2e-3, "offload off: not on the mock (runs %d), NMSE %.3g", bp_mock_backend_ops(), e);
    CHECK(strstr(bp_moe_last_path(s.m), "CPU MoE") && bp_fallback_total() == 2, "offload off path: %s",
          bp_moe_last_path(s.m));
    CHECK(bp_test_op_calls("moe", "cpu") == 2, "MoE stats count the CPU runs (%llu)", bp_test_op_calls("moe", "cpu"));
    /* Forcing a backend is explicit and ignores the switch. */
    memcpy(s.y, s.y0, sizeof s.y);
    CHECK_OK(bp_moe_run_on(s.m, "mock", s.x, T, K, s.ids, s.rw, s.y));
    CHECK(bp_mock_backend_ops() == 3, "bp_moe_run_on mockops runs on the mock");
    bp_set_moe_offload(true);
    moe_free(&s);
    bp_seam_set_log(NULL);
    fclose(logf);
    bp_mock_backend_uninstall();
}

/* With no MoE kernel anywhere, the CPU's MoE sends the expert matmuls through the seam when
 * offload is on: a backend with a GEMM for the kind runs them; off, the CPU kernels do. */
static void offload_matmuls(void) {
    bp_mock_backend_config cfg;
    bp_mock_backend_config_for(&cfg, (const bp_kind[]){BP_KIND_Q8_0}, 1, true);
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    moe_setup s;
    moe_make(&s, BP_KIND_Q8_0);
    bp_set_moe_offload(true);
    int ops0 = bp_mock_backend_ops();
    double e = moe_err(&s);
    CHECK(bp_mock_backend_ops() > ops0 && e <= 2e-3, "offload on: expert matmuls on the mock (%d), NMSE %.3g",
          bp_mock_backend_ops() - ops0, e);
    CHECK(strstr(bp_moe_last_path(s.m), "expert matmuls: gate/up Mock Q8_0 gemm; down Mock Q8_0 gemm"), "path: %s", bp_moe_last_path(s.m));
    bp_set_moe_offload(false);
    ops0 = bp_mock_backend_ops();
    e = moe_err(&s);
    CHECK(bp_mock_backend_ops() == ops0 && e <= 2e-3, "offload off: no matmul on the mock, NMSE %.3g", e);
    CHECK(strstr(bp_moe_last_path(s.m), "expert matmuls: gate/up CPU"), "path: %s", bp_moe_last_path(s.m));
    bp_set_moe_offload(true);
    moe_free(&s);
    bp_mock_backend_uninstall();
}

int main(void) {
    /* Only the mocks: a real GPU backend enabled here (lavapipe, PoCL) would take the expert
     * matmuls this test routes to the mock, and keep device scratch the ledger check counts. */
    setenv("BACKPLANE_CUDA", "0", 1);
    setenv("BACKPLANE_VULKAN", "0", 1);
    setenv("BACKPLANE_OPENCL", "0", 1);
    guard_bites();
    route_run_fallback();
    offload_matmuls();
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty at the end");
    return bp_test_finish();
}
