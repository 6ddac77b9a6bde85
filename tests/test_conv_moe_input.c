/* Bad input to conv2d and MoE: a clear error naming what and where, never an abort, and the
 * output untouched (every check runs before anything is written). Also the GGUF route of the
 * MoE upload: stacked tensors written by our GGUF writer and read back give the same numbers
 * as bp_moe_upload_stacked over the same bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define EXPECT(expr, status, needle)                                                                            \
    do {                                                                                                       \
        bp_status s_ = (expr);                                                                                 \
        CHECK(s_ == (status) && strstr(bp_last_error(), needle), "%s -> %s (want %s), message \"%s\" lacks \"%s\"", \
              #expr, bp_status_name(s_), bp_status_name(status), bp_last_error(), needle);                     \
    } while (0)

static bool untouched(const float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (y[i] != 7.0f) return false;
    return true;
}

static void conv_bad(void) {
    uint64_t rng = 5;
    size_t bytes;
    enum { CIN = 32, COUT = 4, K = 3 };
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q8_0, COUT, K * K * CIN, &rng, &bytes);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, wd, bytes, COUT, K * K * CIN, &w));
    float x[5 * 5 * CIN], y[5 * 5 * COUT * 2], g[CIN];
    for (int i = 0; i < 5 * 5 * CIN; i++) x[i] = bp_test_randf(&rng);
    for (int i = 0; i < CIN; i++) g[i] = 1.0f;
    for (size_t i = 0; i < sizeof y / sizeof y[0]; i++) y[i] = 7.0f;
    bp_conv2d_params ok = {.h = 5, .w = 5, .cin = CIN, .cout = COUT, .k = K, .stride = 1, .eps = 1e-5f};
    bp_conv2d_params p;

    p = ok, p.norm = BP_CONV_NORM_GROUP, p.groups = 5;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "groups 5 does not divide cin 32");
    p.groups = 0;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "does not divide");
    p = ok, p.cin = 16; /* the weight was made for 32 channels */
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "[cout][ky][kx][cin]");
    p = ok, p.cout = 5;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "weight is 4 x 288");
    p = ok, p.k = 1;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "need 4 x 32");
    p = ok, p.stride = 0;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "stride 0");
    p = ok, p.h = -3;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "image -3 x 5");
    p = ok, p.norm = (bp_conv_norm)9;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_INVAL, "unknown norm 9");
    p = ok, p.gamma = g;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_INVAL, "without a norm");
    p = ok, p.norm = BP_CONV_NORM_LAYER, p.eps = NAN;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_INVAL, "eps");
    p = ok, p.h = p.w = (int64_t)1 << 40;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "1..2^31");
    p = ok, p.h = p.w = (int64_t)1 << 30, p.cin = CIN;
    EXPECT(bp_conv2d(w, &p, x, y), BP_E_SHAPE, "overflows");
    EXPECT(bp_conv2d(w, &ok, NULL, y), BP_E_INVAL, "NULL");
    EXPECT(bp_conv2d(NULL, &ok, x, y), BP_E_INVAL, "NULL");
    EXPECT(bp_conv2d_on(w, "nosuch", &ok, x, y), BP_E_NOT_FOUND, "nosuch");
    CHECK(untouched(y, sizeof y / sizeof y[0]), "a rejected conv2d wrote its output");
    CHECK_OK(bp_conv2d(w, &ok, x, y)); /* and the weight still works */
    CHECK(bp_test_all_finite(y, 5 * 5 * COUT) && !untouched(y, 5 * 5 * COUT), "conv2d after the errors");
    bp_weight_free(w);
    free(wd);
}

enum { E = 4, H = 64, I = 32 };

static bp_moe *make_moe(uint8_t **gu, uint8_t **dn, size_t *gus, size_t *dns, uint64_t *rng) {
    const void *gp[E], *dp[E];
    for (int e = 0; e < E; e++) {
        gu[e] = bp_test_make_weight(BP_KIND_Q4_0, 2 * I, H, rng, &gus[e]);
        dn[e] = bp_test_make_weight(BP_KIND_Q4_0, H, I, rng, &dns[e]);
        gp[e] = gu[e], dp[e] = dn[e];
    }
    bp_moe *m = NULL;
    CHECK_OK(bp_moe_upload(E, H, I, BP_KIND_Q4_0, gp, gus, BP_KIND_Q4_0, dp, dns, &m));
    /* Bad uploads over the same bytes. */
    bp_moe *bad = NULL;
    size_t short_gu[E] = {gus[0], gus[1], gus[2] - 18, gus[3]};
    EXPECT(bp_moe_upload(E, H, I, BP_KIND_Q4_0, gp, short_gu, BP_KIND_Q4_0, dp, dns, &bad), BP_E_SHAPE,
           "expert 2 gate/up is 2286 bytes; a Q4_0 [2*32][64] is 2304");
    EXPECT(bp_moe_upload(E, H, I + 1, BP_KIND_Q4_0, gp, gus, BP_KIND_Q4_0, dp, dns, &bad), BP_E_SHAPE,
           "not a whole number of 32-element blocks");
    EXPECT(bp_moe_upload(E, H, I, BP_KIND_Q4_0, gp, gus, BP_KIND_Q8_0, dp, dns, &bad), BP_E_SHAPE, "expert 0 down");
    EXPECT(bp_moe_upload(E, H, I, BP_KIND_I32, gp, gus, BP_KIND_Q4_0, dp, dns, &bad), BP_E_KIND, "not a weight kind");
    EXPECT(bp_moe_upload(0, H, I, BP_KIND_Q4_0, gp, gus, BP_KIND_Q4_0, dp, dns, &bad), BP_E_SHAPE, "0 experts");
    CHECK(bad == NULL, "a failed upload returned a layer");
    return m;
}

static void moe_bad(void) {
    uint64_t rng = 11;
    uint8_t *gu[E], *dn[E];
    size_t gus[E], dns[E];
    bp_moe *m = make_moe(gu, dn, gus, dns, &rng);
    float x[3 * H], y[3 * H], rw[3 * 2] = {0.5f, 0.5f, 1, 0, 0.2f, 0.8f};
    int32_t ids[3 * 2] = {0, 1, 3, 3, 2, E}; /* token 2's second route names expert 4 of 0..3 */
    for (int i = 0; i < 3 * H; i++) x[i] = bp_test_randf(&rng), y[i] = 7.0f;
    EXPECT(bp_moe_run(m, x, 3, 2, ids, rw, y), BP_E_INVAL, "token 2 route 1 names expert 4; the layer has experts 0..3");
    ids[5] = -1;
    EXPECT(bp_moe_run(m, x, 3, 2, ids, rw, y), BP_E_INVAL, "names expert -1");
    ids[5] = 0;
    EXPECT(bp_moe_run(m, x, 3, 0, ids, rw, y), BP_E_SHAPE, "top_k 0");
    EXPECT(bp_moe_run(m, x, 3, 2, NULL, rw, y), BP_E_INVAL, "NULL");
    EXPECT(bp_moe_run_on(m, "nosuch", x, 3, 2, ids, rw, y), BP_E_NOT_FOUND, "nosuch");
    CHECK(untouched(y, 3 * H), "a rejected MoE run wrote its output");
    CHECK_OK(bp_moe_run(m, x, 0, 2, ids, rw, y)); /* no tokens: nothing to do */
    CHECK_OK(bp_moe_run(m, x, 3, 2, ids, rw, y));

    /* Stacked tensors: shapes that disagree. */
    uint8_t *g = malloc(gus[0] / 2 * E), *u = malloc(gus[0] / 2 * E), *d = malloc(dns[0] * E);
    for (int e = 0; e < E; e++) {
        memcpy(g + gus[0] / 2 * e, gu[e], gus[0] / 2);
        memcpy(u + gus[0] / 2 * e, gu[e] + gus[0] / 2, gus[0] / 2);
        memcpy(d + dns[0] * e, dn[e], dns[0]);
    }
    bp_moe_tensor tg = {BP_KIND_Q4_0, {H, I, E}, g, gus[0] / 2 * E}, tu = tg, td = {BP_KIND_Q4_0, {I, H, E}, d, dns[0] * E};
    tu.data = u;
    bp_moe *ms = NULL, *bad = NULL;
    CHECK_OK(bp_moe_upload_stacked(&tg, &tu, &td, &ms));
    bp_moe_tensor wrong = tu;
    wrong.ne[2] = E - 1;
    EXPECT(bp_moe_upload_stacked(&tg, &wrong, &td, &bad), BP_E_SHAPE, "ffn_up_exps is 64 x 32 x 3");
    wrong = td;
    wrong.ne[0] = H, wrong.ne[1] = I; /* down given as [inter][h]: transposed */
    EXPECT(bp_moe_upload_stacked(&tg, &tu, &wrong, &bad), BP_E_SHAPE, "ffn_down_exps is 64 x 32 x 4");
    wrong = tg;
    wrong.bytes -= 1;
    EXPECT(bp_moe_upload_stacked(&wrong, &tu, &td, &bad), BP_E_SHAPE, "ffn_gate_exps is");

    /* The same tensors through a GGUF file. */
    bp_gguf_writer *gw = NULL;
    CHECK_OK(bp_gguf_writer_create(&gw));
    int64_t ne_gu[3] = {H, I, E}, ne_d[3] = {I, H, E}, ne_2d[2] = {H, I};
    CHECK_OK(bp_gguf_writer_add_tensor(gw, "blk.0.ffn_gate_exps.weight", BP_KIND_Q4_0, 3, ne_gu, g, tg.bytes));
    CHECK_OK(bp_gguf_writer_add_tensor(gw, "blk.0.ffn_up_exps.weight", BP_KIND_Q4_0, 3, ne_gu, u, tu.bytes));
    CHECK_OK(bp_gguf_writer_add_tensor(gw, "blk.0.ffn_down_exps.weight", BP_KIND_Q4_0, 3, ne_d, d, td.bytes));
    CHECK_OK(bp_gguf_writer_add_tensor(gw, "blk.1.ffn_gate_exps.weight", BP_KIND_Q4_0, 2, ne_2d, g, tg.bytes / E));
    void *buf = NULL;
    size_t len = 0;
    CHECK_OK(bp_gguf_writer_write_memory(gw, &buf, &len));
    bp_gguf_writer_free(gw);
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open_memory(buf, len, &f));
    bp_moe *mg = NULL;
    CHECK_OK(bp_moe_upload_gguf(f, "blk.0.", &mg));
    EXPECT(bp_moe_upload_gguf(f, "blk.1.", &bad), BP_E_SHAPE, "'blk.1.ffn_gate_exps.weight' has 2 dimensions");
    EXPECT(bp_moe_upload_gguf(f, "blk.2.", &bad), BP_E_NOT_FOUND, "no tensor 'blk.2.ffn_gate_exps.weight'");
    float y1[3 * H] = {0}, y2[3 * H] = {0}, y3[3 * H] = {0};
    CHECK_OK(bp_moe_run(m, x, 3, 2, ids, rw, y1));
    CHECK_OK(bp_moe_run(ms, x, 3, 2, ids, rw, y2));
    if (mg) CHECK_OK(bp_moe_run(mg, x, 3, 2, ids, rw, y3));
    CHECK(!memcmp(y1, y2, sizeof y1) && !memcmp(y1, y3, sizeof y1),
          "fused, stacked and GGUF uploads of the same experts disagree");
    int64_t ne = 0, hh = 0, ii = 0;
    bp_moe_shape(mg, &ne, &hh, &ii);
    CHECK(ne == E && hh == H && ii == I, "bp_moe_shape: %lld %lld %lld", (long long)ne, (long long)hh, (long long)ii);
    bp_moe_free(mg);
    bp_gguf_close(f);
    free(buf);
    bp_moe_free(ms);
    bp_moe_free(m);
    free(g);
    free(u);
    free(d);
    for (int e = 0; e < E; e++) {
        free(gu[e]);
        free(dn[e]);
    }
}

static void route_bad(void) {
    float l[2 * 4] = {1, 3, 2, 3, 0, 0, 0, 0};
    int32_t ids[2 * 2];
    float w[2 * 2];
    EXPECT(bp_moe_route(l, 2, 4, 5, BP_MOE_GATE_SOFTMAX, true, ids, w), BP_E_SHAPE, "top_k 5");
    EXPECT(bp_moe_route(l, 2, 4, 2, (bp_moe_gate)7, true, ids, w), BP_E_INVAL, "unknown gate 7");
    l[6] = NAN;
    EXPECT(bp_moe_route(l, 2, 4, 2, BP_MOE_GATE_SOFTMAX, true, ids, w), BP_E_INVAL, "token 1 expert 2");
}

int main(void) {
    conv_bad();
    moe_bad();
    route_bad();
    return bp_test_finish();
}
