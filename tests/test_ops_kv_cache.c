/* The KV cache: every KV kind stores exactly what its quantizer makes (read back == dequantize
 * (quantize(x)) from the kind's reference functions, which test_kinds_* hold to the gguf
 * package), appends in pieces and rewrites, truncate/clear, views, per-layer capacities, and
 * every bad call is a clear error that leaves the stored tokens as they were. */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"

static const bp_kind kinds[] = {
#define BP_KV_KIND(NAME) BP_KIND_##NAME,
#include "backend/kv_kinds.def"
#undef BP_KV_KIND
};
enum { NK = sizeof kinds / sizeof kinds[0] };

static bool msg_has(const char *a, const char *b) {
    const char *m = bp_last_error();
    bool ok = strstr(m, a) && (!b || strstr(m, b));
    if (!ok) fprintf(stderr, "message was: %s\n", m);
    return ok;
}

static void test_roundtrip(void) {
    enum { H = 2, D = 64, L = 3, CAP = 40 };
    uint64_t rng = 1;
    for (int i = 0; i < NK; i++) {
        bp_kind k = kinds[i];
        const char *kn = bp_kind_lookup(k)->name;
        bp_kv_cache_desc d = {.n_layers = L, .n_kv_heads = H, .head_dim_k = D, .head_dim_v = D, .capacity = CAP,
                              .kind_k = k, .kind_v = k};
        bp_kv_cache *c = NULL;
        CHECK_OK(bp_kv_cache_create(&d, &c));
        if (!c) continue;
        float x[33 * H * D], y[33 * H * D], want[33 * H * D];
        for (int j = 0; j < 33 * H * D; j++) x[j] = bp_test_randf(&rng) * 4;
        size_t rb;
        CHECK_OK(bp_kind_row_bytes(k, D, &rb));
        uint8_t blk[512];
        for (int j = 0; j < 33 * H; j++) {
            CHECK_OK(bp_quantize(k, x + j * D, D, blk, sizeof blk));
            CHECK_OK(bp_dequantize(k, blk, rb, want + j * D, D));
        }
        CHECK_OK(bp_kv_cache_append(c, 2, x, x, 20, 0));
        CHECK_OK(bp_kv_cache_append(c, 2, x + 20 * H * D, x + 20 * H * D, 13, 20));
        CHECK(bp_kv_cache_length(c, 2) == 33 && bp_kv_cache_length(c, 0) == 0, "%s: lengths", kn);
        CHECK_OK(bp_kv_cache_read(c, 2, false, 0, 33, y));
        CHECK(!memcmp(y, want, sizeof y), "%s: K read back is dequantize(quantize(x))", kn);
        CHECK_OK(bp_kv_cache_read(c, 2, true, 5, 10, y));
        CHECK(!memcmp(y, want + 5 * H * D, 10 * H * D * sizeof(float)), "%s: V tokens 5..14", kn);
        bp_kv_view v;
        CHECK_OK(bp_kv_cache_view(c, 2, false, &v));
        CHECK(v.kind == k && v.length == 33 && v.row_bytes == rb && v.head_stride == rb * CAP && v.n_kv_heads == H,
              "%s: view geometry", kn);
        /* head 1, token 7 in the view is the quantization of x[7][1] */
        CHECK_OK(bp_quantize(k, x + (7 * H + 1) * D, D, blk, sizeof blk));
        CHECK(!memcmp(v.data + v.head_stride + 7 * v.row_bytes, blk, rb), "%s: view row (head 1, token 7)", kn);
        /* rewrite from 10: length becomes 12 */
        CHECK_OK(bp_kv_cache_append(c, 2, x, x, 2, 10));
        CHECK(bp_kv_cache_length(c, 2) == 12, "%s: rewrite sets the length", kn);
        CHECK_OK(bp_kv_cache_read(c, 2, false, 10, 2, y));
        CHECK(!memcmp(y, want, 2 * H * D * sizeof(float)), "%s: rewritten tokens", kn);
        CHECK_OK(bp_kv_cache_truncate(c, 2, 4));
        CHECK(bp_kv_cache_length(c, 2) == 4, "%s: truncate", kn);
        CHECK_OK(bp_kv_cache_append(c, 0, x, x, 3, 0));
        CHECK_OK(bp_kv_cache_truncate(c, -1, 1));
        CHECK(bp_kv_cache_length(c, 0) == 1 && bp_kv_cache_length(c, 2) == 1, "%s: truncate all", kn);
        bp_kv_cache_clear(c);
        CHECK(bp_kv_cache_length(c, 0) == 0 && bp_kv_cache_length(c, 2) == 0, "%s: clear", kn);
        CHECK(bp_kv_cache_bytes(c) == 2 * (size_t)L * H * CAP * rb, "%s: bytes", kn);
        bp_kv_cache_free(c);
    }
}

static void test_errors(void) {
    enum { H = 1, D = 32 };
    float x[8 * H * D] = {0}, y[8 * H * D];
    int64_t caps[2] = {4, 8};
    bp_kv_cache_desc d = {.n_layers = 2, .n_kv_heads = H, .head_dim_k = D, .head_dim_v = D, .capacity = 8,
                          .layer_capacity = caps, .kind_k = BP_KIND_Q8_0, .kind_v = BP_KIND_F16};
    bp_kv_cache *c = NULL;
    CHECK_OK(bp_kv_cache_create(&d, &c));
    if (!c) return;
    CHECK(bp_kv_cache_info(c)->layer_capacity[0] == 4, "per-layer capacity kept");
    for (int i = 0; i < 8 * H * D; i++) x[i] = (float)i / 100;
    CHECK_OK(bp_kv_cache_append(c, 0, x, x, 3, 0));
    CHECK_OK(bp_kv_cache_read(c, 0, false, 0, 3, y));
    float before[3 * D];
    memcpy(before, y, sizeof before);

    CHECK(bp_kv_cache_append(c, 0, x, x, 2, 3) == BP_E_SHAPE && msg_has("past its capacity of 4", "layer 0"),
          "past the layer's capacity");
    CHECK(bp_kv_cache_length(c, 0) == 3, "a failed append stores nothing");
    CHECK(bp_kv_cache_append(c, 0, x, x, 1, 5) == BP_E_SHAPE && msg_has("gap", NULL), "a gap");
    CHECK(bp_kv_cache_append(c, 2, x, x, 1, 0) == BP_E_INVAL && msg_has("layer 2 out of range", NULL), "bad layer");
    CHECK(bp_kv_cache_append(c, 0, NULL, x, 1, 0) == BP_E_INVAL, "NULL k");
    CHECK(bp_kv_cache_append(c, 0, x, x, -1, 0) == BP_E_SHAPE, "negative count");
    CHECK(bp_kv_cache_truncate(c, 0, 4) == BP_E_SHAPE && msg_has("holds 3 tokens", NULL), "truncate past length");
    CHECK(bp_kv_cache_read(c, 0, false, 2, 2, y) == BP_E_SHAPE && msg_has("[2, 4)", NULL), "read past length");
    CHECK_OK(bp_kv_cache_read(c, 0, false, 0, 3, y));
    CHECK(!memcmp(y, before, sizeof before), "stored tokens unchanged by the failures");
    CHECK_OK(bp_kv_cache_append(c, 1, x, x, 8, 0));
    bp_kv_cache_free(c);

    bp_kv_cache *bad = (bp_kv_cache *)1;
    d.layer_capacity = NULL;
    d.kind_k = BP_KIND_Q4_K;
    CHECK(bp_kv_cache_create(&d, &bad) == BP_E_KIND && bad == NULL && msg_has("Q4_K", "not a KV cache kind"),
          "Q4_K is not a KV kind");
    d.kind_k = BP_KIND_Q8_0;
    d.head_dim_k = 80;
    CHECK(bp_kv_cache_create(&d, &bad) == BP_E_SHAPE && msg_has("head_dim 80", "Q8_0's block of 32"),
          "head dim 80 with Q8_0");
    d.head_dim_k = 32;
    d.n_kv_heads = 0;
    CHECK(bp_kv_cache_create(&d, &bad) == BP_E_SHAPE, "zero kv heads");
    d.n_kv_heads = 1;
    d.layer_capacity = (const int64_t[]){4, 9};
    CHECK(bp_kv_cache_create(&d, &bad) == BP_E_SHAPE && msg_has("layer 1 capacity 9", NULL), "layer capacity > capacity");
    CHECK(bp_kv_cache_create(NULL, &bad) == BP_E_INVAL, "NULL desc");
    bp_kv_cache_free(NULL);
    CHECK(bp_kv_cache_length(NULL, 0) == -1, "length of NULL is -1");
}

/* F16 appends convert with F16C on the SIMD paths: the same halves as the F16 quantizer for
 * overflow, the largest finite values, halfway cases (round to even) and subnormals. */
static void test_f16_edges(void) {
    enum { D = 32 };
    static const float edge[D] = {65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e-7f, 6e-8f, -3e-8f, 2049.0f, 2051.0f,
                                  -2049.0f, 0.1f, 1.0f / 3, 1e-5f, 6.1035156e-05f, 6.09e-05f, -0.0f, 0.0f, 4097.0f,
                                  1.00048828125f, 1.00146484375f, 3.14159265f, -2.71828183f, 1e4f, 7.5e-8f};
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        bp_kv_cache_desc d = {.n_layers = 1, .n_kv_heads = 1, .head_dim_k = D, .head_dim_v = D, .capacity = 1,
                              .kind_k = BP_KIND_F16, .kind_v = BP_KIND_F16};
        bp_kv_cache *c = NULL;
        CHECK_OK(bp_kv_cache_create(&d, &c));
        if (!c) continue;
        CHECK_OK(bp_kv_cache_append(c, 0, edge, edge, 1, 0));
        bp_kv_view v;
        CHECK_OK(bp_kv_cache_view(c, 0, false, &v));
        for (int i = 0; i < D; i++) {
            uint16_t got = (uint16_t)(v.data[2 * i] | v.data[2 * i + 1] << 8), want = bp_f32_to_f16(edge[i]);
            CHECK(got == want, "%s: F16 of %g is 0x%04x, the quantizer's 0x%04x", bp_cpu_isa_name((bp_cpu_isa)isa),
                  (double)edge[i], got, want);
        }
        bp_kv_cache_free(c);
    }
}

int main(void) {
    test_f16_edges();
    test_roundtrip();
    test_errors();
    return bp_test_finish();
}
