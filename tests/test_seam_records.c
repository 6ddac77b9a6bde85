/* The route is the run: for every op of the op table at three shapes (tiny, decode, prefill),
 * under each way the rule can decide -- the backend's own wants threshold, BACKPLANE_MOCK_MIN_WORK,
 * a CPU preference, a forced backend, no threshold -- bp_route_op asked beforehand names exactly
 * the backend (and, on the mock, the kernel) that the record of the real call then names. A
 * jobs call mixing a wanted and a declined weight splits job by job, each job's record matching
 * its own route. The shapes the routes are asked at follow bp_route_op's documented rule, written
 * out here independently of the op layer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ops_internal.h"
#include "seam/mock_install.h"

typedef struct shape {
    const char *name;
    int64_t rows, cols, t;
} shape;

static const shape shapes[] = {{"tiny", 8, 32, 1}, {"decode", 256, 512, 1}, {"prefill", 256, 512, 16}};

static int checked, on_mock, on_cpu;

/* Compare the route asked before the call with the record the call left. */
static void same(const char *what, const char *how, const shape *s, const bp_run_record *route, const bp_run_record *ran) {
    CHECK(!strcmp(route->backend, ran->backend), "%s %s %s: route %s, ran on %s (%s)", how, what, s->name,
          route->backend, ran->backend, ran->kernel);
    if (strcmp(ran->backend, "cpu") || !strcmp(what, "matvec") || !strcmp(what, "gemm") || !strcmp(what, "jobs"))
        CHECK(!strcmp(route->kernel, ran->kernel) && route->per_position == ran->per_position,
              "%s %s %s: route kernel '%s', ran '%s'", how, what, s->name, route->kernel, ran->kernel);
    CHECK(!ran->fallback_from[0], "%s %s %s: no fallback (%s)", how, what, s->name, ran->cause);
    checked++;
    if (!strcmp(ran->backend, "mock")) on_mock++;
    else on_cpu++;
}

static void route(const char *op, bp_kind k, int64_t rows, int64_t cols, int64_t t, bp_run_record *r) {
    char why[512];
    CHECK_OK(bp_route_op(op, k, rows, cols, t, r, why, sizeof why));
}

static void last(const char *op, bp_run_record *r) { CHECK_OK(bp_op_last_record(op, r)); }

static void weight_ops(const char *how, const shape *s, uint64_t *rng) {
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q8_0, s->rows, s->cols, rng, &bytes);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, wd, bytes, s->rows, s->cols, &w));
    float *x = calloc((size_t)(s->t * s->cols), sizeof *x), *y = calloc((size_t)(s->t * s->rows), sizeof *y);
    for (int64_t i = 0; i < s->t * s->cols; i++) x[i] = bp_test_randf(rng);
    bp_run_record r, ran;
    /* matvec at batch 1; gemm at the shape's batch */
    route("matvec", BP_KIND_Q8_0, s->rows, s->cols, 1, &r);
    CHECK_OK(bp_matvec(w, x, y));
    CHECK_OK(bp_weight_last_record(w, &ran));
    same("matvec", how, s, &r, &ran);
    route("gemm", BP_KIND_Q8_0, s->rows, s->cols, s->t, &r);
    CHECK_OK(bp_gemm(w, x, s->t, y));
    CHECK_OK(bp_weight_last_record(w, &ran));
    same("gemm", how, s, &r, &ran);
    /* one job */
    route("jobs", BP_KIND_Q8_0, s->rows, s->cols, s->t, &r);
    bp_matmul_job job = {w, y};
    CHECK_OK(bp_matmul(x, s->t, &job, 1));
    CHECK_OK(bp_weight_last_record(w, &ran));
    same("jobs", how, s, &r, &ran);
    bp_weight_free(w);
    free(wd), free(x), free(y);
}

static void row_ops(const char *how, const shape *s, uint64_t *rng) {
    const int64_t n = s->cols, t = s->t;
    float *x = malloc(sizeof(float) * (size_t)(n * t)), *y = malloc(sizeof(float) * (size_t)(n * t));
    float *g = malloc(sizeof(float) * (size_t)n);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)t);
    for (int64_t i = 0; i < n * t; i++) x[i] = bp_test_randf(rng);
    for (int64_t i = 0; i < n; i++) g[i] = 1 + 0.1f * bp_test_randf(rng);
    for (int64_t i = 0; i < t; i++) pos[i] = (int32_t)i;
    bp_run_record r, ran;
    route("norm", BP_KIND_F32, 1, n, t, &r);
    CHECK_OK(bp_rms_norm(x, t, n, g, 1e-5f, y));
    last("norm", &ran);
    same("norm", how, s, &r, &ran);
    bp_rope_desc rd = {.n_heads = (int32_t)(n / 32), .head_dim = 32, .n_rot = 32, .layout = BP_ROPE_NEOX,
                       .freq_base = 10000, .freq_scale = 1};
    route("rope", BP_KIND_F32, 1, n, t, &r);
    CHECK_OK(bp_rope(&rd, y, t, pos));
    last("rope", &ran);
    same("rope", how, s, &r, &ran);
    route("act", BP_KIND_F32, 1, n * t, 1, &r);
    CHECK_OK(bp_activate(BP_SILU, x, n * t, y));
    last("act", &ran);
    same("act", how, s, &r, &ran);
    route("glu", BP_KIND_F32, 1, n * t, 1, &r);
    CHECK_OK(bp_glu(BP_SILU, x, x, n * t, y));
    last("glu", &ran);
    same("glu", how, s, &r, &ran);
    route("softmax", BP_KIND_F32, 1, n, t, &r);
    CHECK_OK(bp_softmax(x, t, n, 1.0f, 0, NULL, y));
    last("softmax", &ran);
    same("softmax", how, s, &r, &ran);
    free(x), free(y), free(g), free(pos);
}

/* Attention: s->rows / 32 heads of 32 dims over s->cols / 8 cached keys, t queries at the last
 * positions; shape heads x (head dim x the mean of the keys each query sees) + 1. */
static void attention(const char *how, const shape *s, uint64_t *rng) {
    const int nh = (int)(s->rows / 32 > 0 ? s->rows / 32 : 1), d = 32;
    const int64_t len = s->cols / 8 > s->t ? s->cols / 8 : s->t, t = s->t;
    bp_kv_cache_desc cd = {.n_layers = 1, .n_kv_heads = nh, .head_dim_k = d, .head_dim_v = d, .capacity = len,
                           .kind_k = BP_KIND_F16, .kind_v = BP_KIND_F16};
    bp_kv_cache *c = NULL;
    CHECK_OK(bp_kv_cache_create(&cd, &c));
    float *kv = malloc(sizeof(float) * (size_t)(len * nh * d)), *q = malloc(sizeof(float) * (size_t)(t * nh * d));
    float *out = malloc(sizeof(float) * (size_t)(t * nh * d));
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)t);
    for (int64_t i = 0; i < len * nh * d; i++) kv[i] = bp_test_randf(rng);
    for (int64_t i = 0; i < t * nh * d; i++) q[i] = bp_test_randf(rng);
    CHECK_OK(bp_kv_cache_append(c, 0, kv, kv, len, 0));
    double keys = 0;
    for (int64_t i = 0; i < t; i++) pos[i] = (int32_t)(len - t + i), keys += (double)(pos[i] + 1);
    bp_attn_desc ad = {.n_heads = nh, .n_kv_heads = nh, .scale = 0.1f, .causal = true};
    bp_run_record r, ran;
    route("attention", BP_KIND_F16, nh, (int64_t)(d * (keys / (double)t)) + 1, t, &r);
    CHECK_OK(bp_attention(&ad, q, t, pos, c, 0, out));
    last("attention", &ran);
    same("attention", how, s, &r, &ran);
    bp_kv_cache_free(c);
    free(kv), free(q), free(out), free(pos);
}

/* conv2d: a 3 x 3 kernel over an image of s->t pixels in a row, cin = s->cols / 9 rounded to
 * blocks; shape cout x 9 cin, t = output pixels. MoE (offload on): 4 experts of s->rows / 4
 * rows of s->cols, every token routed to 2 of them; shape 3 x inter x used experts x h, t =
 * routes per used expert, rounded up. */
static void conv_moe(const char *how, const shape *s, uint64_t *rng) {
    const int64_t cin = 32, cout = s->rows / 8 > 0 ? s->rows / 8 : 1, k = 3, hw = s->t;
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q8_0, cout, k * k * cin, rng, &bytes);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, wd, bytes, cout, k * k * cin, &w));
    float *x = malloc(sizeof(float) * (size_t)(hw * cin)), *y = malloc(sizeof(float) * (size_t)(hw * cout));
    for (int64_t i = 0; i < hw * cin; i++) x[i] = bp_test_randf(rng);
    bp_conv2d_params p = {.h = 1, .w = hw, .cin = cin, .cout = cout, .k = k, .stride = 1};
    bp_run_record r, ran;
    route("conv2d", BP_KIND_Q8_0, cout, k * k * cin, hw, &r);
    CHECK_OK(bp_conv2d(w, &p, x, y));
    last("conv2d", &ran);
    same("conv2d", how, s, &r, &ran);
    bp_weight_free(w);
    free(wd), free(x), free(y);

    enum { NE = 4, TOPK = 2 };
    const int64_t h = 64, inter = s->rows / 4 > 32 ? s->rows / 4 : 32, t = s->t;
    uint8_t *gu[NE], *dn[NE];
    const void *gp[NE], *dp[NE];
    size_t gs[NE], ds[NE];
    for (int e = 0; e < NE; e++) {
        gu[e] = bp_test_make_weight(BP_KIND_Q8_0, 2 * inter, h, rng, &gs[e]);
        dn[e] = bp_test_make_weight(BP_KIND_Q8_0, h, inter, rng, &ds[e]);
        gp[e] = gu[e], dp[e] = dn[e];
    }
    bp_moe *m = NULL;
    CHECK_OK(bp_moe_upload(NE, h, inter, BP_KIND_Q8_0, gp, gs, BP_KIND_Q8_0, dp, ds, &m));
    float *mx = malloc(sizeof(float) * (size_t)(t * h)), *my = calloc((size_t)(t * h), sizeof(float));
    float rw[64 * TOPK];
    int32_t ids[64 * TOPK];
    bool used[NE] = {0};
    int n_used = 0;
    for (int64_t i = 0; i < t * h; i++) mx[i] = bp_test_randf(rng);
    for (int64_t i = 0; i < t * TOPK; i++) {
        ids[i] = (int32_t)((i / TOPK + i % TOPK) % NE), rw[i] = 0.5f;
        if (!used[ids[i]]) used[ids[i]] = true, n_used++;
    }
    bp_set_moe_offload(true);
    route("moe", BP_KIND_Q8_0, 3 * inter * n_used, h, (t * TOPK + n_used - 1) / n_used, &r);
    CHECK_OK(bp_moe_run(m, mx, t, TOPK, ids, rw, my));
    last("moe", &ran);
    same("moe", how, s, &r, &ran);
    bp_set_moe_offload(false);
    bp_moe_free(m);
    for (int e = 0; e < NE; e++) free(gu[e]), free(dn[e]);
    free(mx), free(my);
}

/* Two jobs sharing one input, the first too small for the mock's threshold, the second not:
 * the seam splits them, each job's record naming what its own route names. */
static void mixed_jobs(uint64_t *rng) {
    size_t b1, b2;
    uint8_t *w1 = bp_test_make_weight(BP_KIND_Q8_0, 4, 512, rng, &b1), *w2 = bp_test_make_weight(BP_KIND_Q8_0, 512, 512, rng, &b2);
    bp_weight *a = NULL, *b = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, w1, b1, 4, 512, &a));
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, w2, b2, 512, 512, &b));
    float x[512], ya[4], yb[512], ref[512];
    for (int i = 0; i < 512; i++) x[i] = bp_test_randf(rng);
    bp_run_record ra, rb, ga, gb;
    route("jobs", BP_KIND_Q8_0, 4, 512, 1, &ra);
    route("jobs", BP_KIND_Q8_0, 512, 512, 1, &rb);
    CHECK(!strcmp(ra.backend, "cpu") && !strcmp(rb.backend, "mock"), "mixed jobs: routes %s and %s", ra.backend, rb.backend);
    bp_matmul_job jobs[2] = {{a, ya}, {b, yb}};
    CHECK_OK(bp_matmul(x, 1, jobs, 2));
    CHECK_OK(bp_weight_last_record(a, &ga));
    CHECK_OK(bp_weight_last_record(b, &gb));
    shape s = {"mixed", 0, 0, 1};
    same("jobs (small)", "threshold", &s, &ra, &ga);
    same("jobs (large)", "threshold", &s, &rb, &gb);
    CHECK_OK(bp_ref_gemm(BP_KIND_Q8_0, w2, b2, 512, 512, x, 1, ref));
    CHECK(bp_test_nmse(yb, ref, 512) < 1e-4, "mixed jobs: the mock's job has the reference's numbers");
    bp_weight_free(a), bp_weight_free(b);
    free(w1), free(w2);
}

/* Every op at every shape under one rule; want_mock / want_cpu: whether some call must (1),
 * must not (0) or may (-1) land there, so each rule is seen to decide. */
/* The bytes the tally's rows of op on backend say their calls moved. */
static void tally_bytes(const char *op, const char *backend, unsigned long long *h2d, unsigned long long *d2h) {
    static bp_run_tally rows[512];
    const int n = bp_run_tally_get(rows, 512);
    *h2d = *d2h = 0;
    for (int i = 0; i < n && i < 512; i++)
        if (!strcmp(bp_op_name(rows[i].record.op), op) && !strcmp(rows[i].record.backend, backend))
            *h2d += rows[i].h2d_bytes, *d2h += rows[i].d2h_bytes;
}

/* Three jobs on the mock: one launch, one upload of their shared input (then each weight up and
 * each result down): 7 device copies, not the 9 of a call per job. The tally's rows of the jobs
 * hold the bytes those copies moved (src/mock/mock_backend.c's run_jobs: x, each weight's bytes,
 * each result), split among the three and adding up exactly. */
static void one_upload(uint64_t *rng) {
    bp_weight *w[3];
    uint8_t *wd[3];
    float x[256], y[3][96];
    for (int i = 0; i < 256; i++) x[i] = bp_test_randf(rng);
    for (int j = 0; j < 3; j++) {
        size_t b;
        wd[j] = bp_test_make_weight(BP_KIND_Q8_0, 96, 256, rng, &b);
        CHECK_OK(bp_weight_create(BP_KIND_Q8_0, wd[j], b, 96, 256, &w[j]));
    }
    bp_matmul_job jobs[3] = {{w[0], y[0]}, {w[1], y[1]}, {w[2], y[2]}};
    const int copies = bp_mock_calls(bp_mock_backend_device(), BP_MOCK_COPY), tries = bp_mock_backend_attempts();
    unsigned long long h0, d0, h1, d1;
    tally_bytes("jobs", "mock", &h0, &d0);
    CHECK_OK(bp_matmul(x, 1, jobs, 3));
    tally_bytes("jobs", "mock", &h1, &d1);
    const unsigned long long want_h = sizeof x + 3 * (unsigned long long)(w[0]->rows * (int64_t)w[0]->row_bytes);
    CHECK(h1 - h0 == want_h && d1 - d0 == sizeof y, "three jobs: the records say %llu B up, %llu B down; the copies "
          "moved %llu and %zu", h1 - h0, d1 - d0, want_h, sizeof y);
    tally_bytes("jobs", "cpu", &h0, &d0);
    CHECK(h0 == 0 && d0 == 0, "jobs on the CPU moved %llu B up, %llu B down", h0, d0);
    CHECK(bp_mock_backend_attempts() - tries == 1, "three jobs, %d launches", bp_mock_backend_attempts() - tries);
    CHECK(bp_mock_calls(bp_mock_backend_device(), BP_MOCK_COPY) - copies == 7, "three jobs, %d device copies",
          bp_mock_calls(bp_mock_backend_device(), BP_MOCK_COPY) - copies);
    for (int j = 0; j < 3; j++) bp_weight_free(w[j]), free(wd[j]);
}

static void all_ops(const char *how, uint64_t *rng, int want_mock, int want_cpu) {
    on_mock = on_cpu = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        weight_ops(how, &shapes[i], rng);
        row_ops(how, &shapes[i], rng);
        attention(how, &shapes[i], rng);
        conv_moe(how, &shapes[i], rng);
    }
    fprintf(stderr, "%s: %d calls on the mock, %d on the CPU\n", how, on_mock, on_cpu);
    if (want_mock >= 0) CHECK((on_mock > 0) == want_mock, "%s: %d calls on the mock", how, on_mock);
    if (want_cpu >= 0) CHECK((on_cpu > 0) == want_cpu, "%s: %d calls on the CPU", how, on_cpu);
}

int main(void) {
    uint64_t rng = 0x7ec0;
    bp_mock_backend_config cfg;
    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim_all(&cfg);
    cfg.reference = bp_op_reference;
    /* The mock's own wants: rows x cols x t of at least 64 x 64 x 2 (tiny shapes decline). */
    cfg.min_work = 64 * 64 * 2;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    all_ops("wants", &rng, 1, 1);
    mixed_jobs(&rng);
    /* MIN_WORK from the environment decides instead of wants. */
    setenv("BACKPLANE_MOCK_MIN_WORK", "200000", 1);
    bp_seam_test_reset_enabled();
    all_ops("MIN_WORK", &rng, 1, 1);
    unsetenv("BACKPLANE_MOCK_MIN_WORK");
    bp_seam_test_reset_enabled();
    /* The CPU preferred: nothing goes to the mock. */
    CHECK_OK(bp_set_backend_preference("cpu", BP_PREFER));
    all_ops("prefer cpu", &rng, 0, 1);
    /* The mock forced: it takes every shape, its threshold notwithstanding. */
    CHECK_OK(bp_set_backend_preference("mock", BP_FORCE));
    all_ops("force mock", &rng, 1, 0);
    CHECK_OK(bp_set_backend_preference(NULL, BP_PREFER));
    bp_mock_backend_uninstall();
    /* No threshold at all: the mock takes everything it claims. */
    cfg.min_work = 0;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    all_ops("no threshold", &rng, 1, 0);
    one_upload(&rng);
    bp_mock_backend_uninstall();
    fprintf(stderr, "%d (op, shape, rule) routes compared with the records of their runs\n", checked);
    CHECK(checked >= 5 * 3 * 11, "every op at every shape under every rule (%d)", checked);
    return bp_test_finish();
}
