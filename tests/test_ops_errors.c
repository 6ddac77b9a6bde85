/* Bad input to every op is a clear error naming the op, the shape and what is wrong; nothing is
 * written to the outputs and nothing aborts. A failed allocation is a clear BP_E_NOMEM. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "harness.h"

static bool says(bp_status got, bp_status want, const char *a, const char *b) {
    const char *m = bp_last_error();
    bool ok = got == want && strstr(m, a) && (!b || strstr(m, b));
    if (!ok) fprintf(stderr, "got %s: %s\n", bp_status_name(got), m);
    return ok;
}

static bool untouched(const float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (y[i] != 12345.0f) return false;
    return true;
}

static float out[4096];
static void poison(void) {
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) out[i] = 12345.0f;
}

static void test_attention(void) {
    float kv[8 * 2 * 64] = {0}, q[2 * 8 * 64] = {0};
    bp_kv_cache_desc cd = {.n_layers = 2, .n_kv_heads = 2, .head_dim_k = 64, .head_dim_v = 64, .capacity = 8,
                           .kind_k = BP_KIND_F16, .kind_v = BP_KIND_Q8_0};
    bp_kv_cache *c = NULL;
    CHECK_OK(bp_kv_cache_create(&cd, &c));
    CHECK_OK(bp_kv_cache_append(c, 0, kv, kv, 5, 0));
    int32_t pos[2] = {3, 4};
    bp_attn_desc d = {.n_heads = 8, .n_kv_heads = 2, .scale = 0.125f, .causal = true};
    poison();
    CHECK_OK(bp_attention(&d, q, 2, pos, c, 0, out));
    poison();
    d.n_kv_heads = 4;
    CHECK(says(bp_attention(&d, q, 2, pos, c, 0, out), BP_E_SHAPE, "4 kv heads given", "cache holds 2"),
          "kv heads differ from the cache");
    d.n_kv_heads = 3;
    CHECK(says(bp_attention(&d, q, 2, pos, c, 0, out), BP_E_SHAPE, "8 heads, 3 kv heads", "divide"),
          "kv heads do not divide heads");
    d.n_kv_heads = 2;
    pos[1] = 5;
    CHECK(says(bp_attention(&d, q, 2, pos, c, 0, out), BP_E_SHAPE, "query 1 at position 5", "[0, 5)"),
          "a position past the stored keys");
    pos[1] = -1;
    CHECK(says(bp_attention(&d, q, 2, pos, c, 0, out), BP_E_SHAPE, "position -1", NULL), "a negative position");
    pos[1] = 4;
    CHECK(says(bp_attention(&d, q, 2, pos, c, 1, out), BP_E_SHAPE, "layer 1 holds positions [0, 0)", NULL),
          "an empty layer");
    CHECK(says(bp_attention(&d, q, 2, pos, c, 2, out), BP_E_INVAL, "layer 2 out of range", NULL), "bad layer");
    d.softcap = -1;
    CHECK(says(bp_attention(&d, q, 2, pos, c, 0, out), BP_E_INVAL, "softcap", NULL), "negative softcap");
    d.softcap = 0, d.scale = NAN;
    CHECK(says(bp_attention(&d, q, 2, pos, c, 0, out), BP_E_INVAL, "scale", NULL), "NaN scale");
    d.scale = 1, d.window = -2;
    CHECK(says(bp_attention(&d, q, 2, pos, c, 0, out), BP_E_INVAL, "window -2", NULL), "negative window");
    d.window = 0;
    CHECK(says(bp_attention(&d, NULL, 2, pos, c, 0, out), BP_E_INVAL, "q, positions or out is NULL", NULL), "NULL q");
    CHECK(says(bp_attention(&d, q, 2, pos, NULL, 0, out), BP_E_INVAL, "cache is NULL", NULL), "NULL cache");
    CHECK(says(bp_attention(NULL, q, 2, pos, c, 0, out), BP_E_INVAL, "desc is NULL", NULL), "NULL desc");
    CHECK(untouched(out, sizeof out / sizeof out[0]), "attention errors write nothing");
    bp_kv_cache_free(c);
}

static void test_small_ops(void) {
    float x[64] = {0};
    poison();
    bp_norm_desc nd = {.type = BP_NORM_GROUP, .n = 60, .channels = 6, .groups = 4, .eps = 1e-5f};
    CHECK(says(bp_norm(&nd, x, 1, out), BP_E_SHAPE, "group_norm", "6 channels, 4 groups"), "groups do not divide channels");
    nd = (bp_norm_desc){.type = BP_NORM_RMS, .n = 64, .eps = -1};
    CHECK(says(bp_norm(&nd, x, 1, out), BP_E_INVAL, "rms_norm: eps", NULL), "negative eps");
    nd.eps = 1e-6f, nd.beta = x;
    CHECK(says(bp_norm(&nd, x, 1, out), BP_E_INVAL, "rms_norm: beta", NULL), "RMSNorm with beta");
    CHECK(says(bp_rms_norm(x, 1, 0, NULL, 1e-6f, out), BP_E_SHAPE, "rms_norm: [1][0]", NULL), "zero width");
    CHECK(says(bp_layer_norm(NULL, 2, 8, NULL, NULL, 1e-5f, out), BP_E_INVAL, "layer_norm: [2][8]", "NULL"), "NULL x");
    nd = (bp_norm_desc){.type = (bp_norm_type)7, .n = 4};
    CHECK(says(bp_norm(&nd, x, 1, out), BP_E_INVAL, "unknown norm type 7", NULL), "unknown norm");

    int32_t pos[1] = {0};
    bp_rope_desc rd = {.n_heads = 1, .head_dim = 64, .n_rot = 63, .layout = BP_ROPE_NEOX, .freq_base = 1e4f, .freq_scale = 1};
    CHECK(says(bp_rope(&rd, out, 1, pos), BP_E_SHAPE, "n_rot 63", "even"), "odd n_rot");
    rd.n_rot = 128;
    CHECK(says(bp_rope(&rd, out, 1, pos), BP_E_SHAPE, "n_rot 128", "head_dim 64"), "n_rot past head_dim");
    rd.n_rot = 64, rd.layout = (bp_rope_layout)1;
    CHECK(says(bp_rope(&rd, out, 1, pos), BP_E_INVAL, "unknown layout 1", NULL), "bad layout");
    rd.layout = BP_ROPE_NORMAL, rd.freq_base = 0;
    CHECK(says(bp_rope(&rd, out, 1, pos), BP_E_INVAL, "freq_base 0", NULL), "zero base");
    rd.freq_base = 1e4f;
    CHECK(says(bp_rope(&rd, out, 1, NULL), BP_E_INVAL, "positions is NULL", NULL), "NULL positions");

    CHECK(says(bp_activate((bp_activation)9, x, 4, out), BP_E_INVAL, "unknown activation 9", NULL), "bad activation");
    CHECK(says(bp_activate(BP_SILU, x, -1, out), BP_E_SHAPE, "act silu: negative count -1", NULL), "negative n");
    CHECK(says(bp_glu(BP_GELU_TANH, x, NULL, 4, out), BP_E_INVAL, "glu gelu_tanh: [4]", "NULL"), "NULL up");

    CHECK(says(bp_softmax(x, 2, 0, 1, 0, NULL, out), BP_E_SHAPE, "softmax: [2][0]", NULL), "softmax zero width");
    CHECK(says(bp_softmax(x, 2, 8, 1, -3, NULL, out), BP_E_INVAL, "softcap -3", NULL), "softmax negative cap");
    CHECK(says(bp_softmax(x, 2, 8, INFINITY, 0, NULL, out), BP_E_INVAL, "scale inf", NULL), "softmax inf scale");
    CHECK(untouched(out, sizeof out / sizeof out[0]), "errors write nothing");
}

static void test_matmul(void) {
    uint64_t rng = 3;
    size_t b1, b2;
    uint8_t *w1 = bp_test_make_weight(BP_KIND_Q8_0, 16, 64, &rng, &b1);
    uint8_t *w2 = bp_test_make_weight(BP_KIND_Q5_0, 8, 96, &rng, &b2);
    bp_weight *a = NULL, *b = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, w1, b1, 16, 64, &a));
    CHECK_OK(bp_weight_create(BP_KIND_Q5_0, w2, b2, 8, 96, &b));
    float x[96] = {0};
    poison();
    bp_matmul_job jobs[2] = {{a, out}, {b, out + 100}};
    CHECK(says(bp_matmul(x, 1, jobs, 2), BP_E_SHAPE, "job 1 weight is 8 x 96", "takes 64 inputs"), "cols differ");
    jobs[1].w = NULL;
    CHECK(says(bp_matmul(x, 1, jobs, 2), BP_E_INVAL, "job 1 has a NULL weight", NULL), "NULL weight");
    jobs[1] = (bp_matmul_job){a, x};
    CHECK(says(bp_matmul(x, 1, jobs, 2), BP_E_INVAL, "job 1 writes its output over x", NULL), "y over x");
    CHECK(says(bp_matmul(x, -1, jobs, 1), BP_E_SHAPE, "negative batch", NULL), "negative t");
    CHECK(says(bp_matmul(NULL, 1, jobs, 1), BP_E_INVAL, "x is NULL", NULL), "NULL x");
    CHECK(untouched(out, sizeof out / sizeof out[0]), "matmul errors write nothing");
    CHECK_OK(bp_matmul(x, 1, jobs, 0));
    bp_weight_free(a), bp_weight_free(b);
    free(w1), free(w2);
}

/* Every host allocation the ops make, failed in turn (core/alloc.h's switch): each call returns
 * BP_OK or a clear BP_E_NOMEM, never crashes, and (under ASan) leaks nothing. */
static void test_alloc_failures(void) {
    enum { H = 2, D = 64, LEN = 600 };
    static float kv[LEN * H * D], q[4 * 8 * D], o[4 * 8 * D], x[4 * 256], y[4 * 256];
    for (int i = 0; i < LEN * H * D; i++) kv[i] = (float)((i * 37) % 101) / 101.0f;
    for (int i = 0; i < 4 * 8 * D; i++) q[i] = (float)((i * 13) % 53) / 53.0f;
    int32_t pos[4] = {LEN - 4, LEN - 3, LEN - 2, LEN - 1};
    int nomem = 0, ok = 0;
    /* n = 0 first: a clean run counts the allocations the sequence makes; then each one fails. */
    long long total = 0;
    for (long long n = 0; n <= total + 1; n++) {
        bp_alloc_count_reset();
        bp_alloc_fail_after(n, false);
        bp_kv_cache_desc cd = {.n_layers = 2, .n_kv_heads = H, .head_dim_k = D, .head_dim_v = D, .capacity = LEN,
                               .kind_k = BP_KIND_Q8_0, .kind_v = BP_KIND_F16};
        bp_kv_cache *c = NULL;
        bp_status s = bp_kv_cache_create(&cd, &c);
        if (!s) s = bp_kv_cache_append(c, 1, kv, kv, LEN, 0);
        bp_attn_desc d = {.n_heads = 8, .n_kv_heads = H, .scale = 0.125f, .causal = true};
        if (!s) s = bp_attention(&d, q, 4, pos, c, 1, o);
        if (!s) s = bp_attention(&d, q + 3 * 8 * D, 1, pos + 3, c, 1, o);
        bp_rope_desc rd = {.n_heads = 1, .head_dim = 256, .n_rot = 256, .layout = BP_ROPE_NEOX, .freq_base = 1e4f, .freq_scale = 1};
        if (!s) s = bp_rope(&rd, x, 4, pos);
        if (!s) s = bp_rms_norm(x, 4, 256, NULL, 1e-6f, y);
        bp_alloc_fail_after(0, false);
        if (n == 0) {
            total = bp_alloc_count();
            CHECK(s == BP_OK && total > 0, "the clean run passes (%s) and allocates (%lld)", bp_last_error(), total);
        }
        CHECK(s == BP_OK || s == BP_E_NOMEM, "allocation %lld failed: %s (%s)", n, bp_status_name(s), bp_last_error());
        if (s == BP_E_NOMEM) CHECK(strstr(bp_last_error(), "memory") != NULL, "NOMEM message: %s", bp_last_error());
        nomem += s == BP_E_NOMEM, ok += s == BP_OK;
        bp_kv_cache_free(c);
    }
    CHECK(nomem > 0 && ok > 0, "some runs hit a failed allocation (%d of %lld allocations), later ones ran through (%d)",
          nomem, total, ok);
    fprintf(stderr, "allocation failures: %lld allocations, %d failed cleanly\n", total, nomem);
}

int main(void) {
    test_alloc_failures();
    test_attention();
    test_small_ops();
    test_matmul();
    return bp_test_finish();
}
