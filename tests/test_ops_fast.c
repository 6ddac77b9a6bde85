/* The CPU fast paths against the CPU reference (bp_op_reference, double accumulation), for every
 * op and KV kind, on every ISA path, at 1 and 3 threads: attention over every K/V kind pair
 * used in practice, shapes that split the keys into chunks (long decode), Gemma-3-like prefill
 * (4 heads, 1 KV head, dim 256), head dims the vector width does not divide (the reference then
 * runs, by name), exact mode (on the best path); results bit-identical across thread counts.
 * Also the vector exp against expf. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"
#include "cpu/op_kern.h"
#include "ops/ops_internal.h"

static const bp_kind kv_kinds[] = {
#define BP_KV_KIND(NAME) BP_KIND_##NAME,
#include "backend/kv_kinds.def"
#undef BP_KV_KIND
};
enum { NKV = sizeof kv_kinds / sizeof kv_kinds[0] };

typedef struct shape {
    const char *name;
    int64_t t, len;
    int nh, nkv, dk, dv;
    bool causal;
    int64_t window;
    float softcap;
    bool sinks; /* a random per-head sink logit (gpt-oss) */
} shape;

static const shape shapes[] = {
    {"decode GQA 8:1 d128", 1, 333, 8, 1, 128, 128, true, 0, 0, false},
    {"long decode (split keys) d64", 1, 1500, 4, 2, 64, 64, true, 0, 0, false},
    {"long decode window 400 d256", 1, 700, 4, 1, 256, 256, true, 400, 0, false},
    {"gemma3-like prefill", 24, 200, 4, 1, 256, 256, true, 0, 0, false},
    {"gemma3-like prefill window 32", 24, 200, 4, 1, 256, 256, true, 32, 0, false},
    {"MHA prefill softcap dk!=dv", 21, 80, 3, 3, 64, 128, true, 0, 25, false},
    {"non-causal window 9", 17, 40, 4, 2, 80, 80, false, 9, 0, false},
    {"head dim 40 (not a multiple of 16)", 3, 50, 2, 1, 40, 40, true, 0, 0, false},
    {"long decode (split keys) with sinks", 1, 1500, 4, 2, 64, 64, true, 0, 0, true},
    {"prefill window 8 with sinks", 12, 40, 4, 2, 64, 64, true, 8, 0, true},
};

static void run_attention(const shape *sh, bp_kind kk, bp_kind kv, uint64_t *rng) {
    int64_t t = sh->t, len = sh->len;
    size_t nk = (size_t)(len * sh->nkv * sh->dk), nv = (size_t)(len * sh->nkv * sh->dv);
    size_t nq = (size_t)(t * sh->nh * sh->dk), no = (size_t)(t * sh->nh * sh->dv);
    float *K = malloc(nk * 4), *V = malloc(nv * 4), *q = malloc(nq * 4), *ref = malloc(no * 4), *out = malloc(no * 4),
          *first = malloc(no * 4);
    int32_t *pos = malloc((size_t)t * 4);
    for (size_t i = 0; i < nk; i++) K[i] = bp_test_randf(rng);
    for (size_t i = 0; i < nv; i++) V[i] = bp_test_randf(rng);
    for (size_t i = 0; i < nq; i++) q[i] = bp_test_randf(rng) * 2;
    for (int64_t i = 0; i < t; i++) pos[i] = (int32_t)(len - t + i);
    bp_kv_cache_desc cd = {.n_layers = 1, .n_kv_heads = sh->nkv, .head_dim_k = sh->dk, .head_dim_v = sh->dv,
                           .capacity = len, .kind_k = kk, .kind_v = kv};
    bp_kv_cache *c = NULL;
    if (bp_kv_cache_create(&cd, &c)) {
        /* head dim 40 is not a whole number of 32-element blocks: only float kinds apply */
        CHECK(sh->dk % 32 || sh->dv % 32, "%s: cache create failed: %s", sh->name, bp_last_error());
        goto done;
    }
    CHECK_OK(bp_kv_cache_append(c, 0, K, V, len, 0));
    float sinks[16];
    /* a long context outweighs a sink near 0: there it is raised to weigh as much as the keys */
    for (int h = 0; h < sh->nh && h < 16; h++) sinks[h] = 3.0f * bp_test_randf(rng) + (len > 100 ? logf((float)len) : 0);
    bp_attn_desc d = {.n_heads = sh->nh, .n_kv_heads = sh->nkv, .scale = 1.0f / sqrtf((float)sh->dk),
                      .causal = sh->causal, .window = sh->window, .softcap = sh->softcap};
    bp_op_call rc = {.op = BP_OP_ATTENTION, .kind = kk, .kind2 = kv};
    rc.u.attn.d = &d, rc.u.attn.q = q, rc.u.attn.t = t, rc.u.attn.positions = pos, rc.u.attn.cache = c;
    rc.u.attn.out = ref;
    CHECK_OK(bp_op_reference(&rc));
    if (sh->sinks) { /* the sinks change the result (else this shape would test nothing new) */
        d.sinks = sinks;
        memcpy(first, ref, no * 4);
        CHECK_OK(bp_op_reference(&rc));
        CHECK(bp_test_nmse(ref, first, no) > 1e-3, "%s: sinks moved the reference by only %.3g", sh->name,
              bp_test_nmse(ref, first, no));
    }
    const char *kn = bp_kind_lookup(kk)->name, *vn = bp_kind_lookup(kv)->name;
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        /* exact mode on the best path only, at 1 and 3 threads (the ISA kernels are the same) */
        bool best = isa + 1 == BP_CPU_ISA_COUNT || !bp_cpu_isa_available((bp_cpu_isa)(isa + 1));
        for (int exact = 0; exact < (best ? 2 : 1); exact++) {
            bp_set_exact_mode(exact);
            for (int th = 1; th <= 3; th += 2) {
                CHECK_OK(bp_cpu_set_threads(th));
                memset(out, 0xff, no * 4);
                CHECK_OK(bp_attention(&d, q, t, pos, c, 0, out));
                double e = bp_test_nmse(out, ref, no);
                CHECK(e <= 1e-10 && bp_test_all_finite(out, no), "%s K %s V %s %s exact=%d %d threads: NMSE %.3g (%s)",
                      sh->name, kn, vn, bp_cpu_isa_name((bp_cpu_isa)isa), exact, th, e, bp_op_last_path("attention"));
                if (th == 1) memcpy(first, out, no * 4);
                else CHECK(!memcmp(first, out, no * 4), "%s K %s V %s %s: %d threads bit-identical to 1", sh->name, kn,
                           vn, bp_cpu_isa_name((bp_cpu_isa)isa), th);
                const char *path = bp_op_last_path("attention");
                bool fast = sh->dk % bp_op_kern_current()->vl == 0 && sh->dv % bp_op_kern_current()->vl == 0;
                CHECK(strstr(path, fast ? "CPU " : "CPU reference") && (!fast || strstr(path, bp_cpu_isa_name((bp_cpu_isa)isa))),
                      "%s path on %s: %s", sh->name, bp_cpu_isa_name((bp_cpu_isa)isa), path);
            }
        }
    }
    bp_set_exact_mode(false);
done:
    bp_kv_cache_free(c);
    free(K), free(V), free(q), free(ref), free(out), free(first), free(pos);
}

static void test_attention(void) {
    uint64_t rng = 99;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        /* every kind as K and V on the first shapes; the costly prefill shapes on a subset (and
         * every shape on that subset under BP_TEST_QUICK: valgrind) */
        bool all = (s < 2 || (s >= 5 && !shapes[s].sinks)) && !bp_test_quick();
        for (int i = 0; i < NKV; i++) {
            if (!all && i % 3) continue;
            run_attention(&shapes[s], kv_kinds[i], kv_kinds[i], &rng);
        }
    }
    run_attention(&shapes[0], BP_KIND_Q8_0, BP_KIND_F16, &rng);
    run_attention(&shapes[5], BP_KIND_F16, BP_KIND_Q4_1, &rng);
}

static void test_rows(void) {
    uint64_t rng = 7;
    /* 40 x 1030: over the size that shares rows out over the pool */
    enum { T = 40, N = 1030 };
    static float x[T * N], y[T * N], r[T * N], g[N], b[N], up[T * N], y1[T * N];
    int32_t pos[T];
    for (int i = 0; i < T * N; i++) x[i] = bp_test_randf(&rng) * 6, up[i] = bp_test_randf(&rng);
    for (int i = 0; i < N; i++) g[i] = bp_test_randf(&rng), b[i] = bp_test_randf(&rng);
    for (int i = 0; i < T; i++) pos[i] = (int32_t)(bp_test_rand(&rng) % 50000);
    bp_norm_desc nds[] = {
        {.type = BP_NORM_RMS, .n = N, .eps = 1e-6f, .gamma = g},
        {.type = BP_NORM_LAYER, .n = N, .eps = 1e-5f, .gamma = g, .beta = b, .silu = true},
        {.type = BP_NORM_GROUP, .n = N, .channels = 10, .groups = 5, .eps = 1e-5f, .gamma = g, .beta = b, .silu = true},
    };
    bp_rope_desc rd = {.n_heads = 5, .head_dim = 206, .n_rot = 128, .layout = BP_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 0.5f};
    /* YaRN as gpt-oss-20b's (factor 32 from 4096, base 150000): the ramp covers pairs 8..18 */
    bp_rope_desc ry = {.n_heads = 5, .head_dim = 206, .n_rot = 64, .layout = BP_ROPE_NEOX, .freq_base = 150000.0f,
                       .freq_scale = 1.0f / 32, .ext_factor = 1, .attn_factor = 1, .beta_fast = 32, .beta_slow = 1,
                       .n_ctx_orig = 4096};
    for (int pass = 0; pass < 2 * BP_CPU_ISA_COUNT; pass++) {
        int isa = pass / 2, exact = pass % 2;
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        bp_set_exact_mode(exact);
        const char *in = bp_cpu_isa_name((bp_cpu_isa)isa);
        for (size_t k = 0; k < 3; k++) {
            bp_ref_norm(&nds[k], x, T, r);
            CHECK_OK(bp_cpu_set_threads(1));
            CHECK_OK(bp_norm(&nds[k], x, T, y1));
            CHECK_OK(bp_cpu_set_threads(3));
            CHECK_OK(bp_norm(&nds[k], x, T, y));
            CHECK(bp_test_nmse(y, r, T * N) <= 1e-12, "%s norm %zu: %.3g", in, k, bp_test_nmse(y, r, T * N));
            CHECK(!memcmp(y, y1, sizeof y), "%s norm %zu: 3 threads bit-identical to 1", in, k);
        }
        for (int a = 0; a < 3; a++) {
            bp_ref_act((bp_activation)a, x, T * N, r);
            CHECK_OK(bp_activate((bp_activation)a, x, T * N, y));
            CHECK(bp_test_nmse(y, r, T * N) <= 1e-12, "%s act %d: %.3g", in, a, bp_test_nmse(y, r, T * N));
            bp_ref_glu((bp_activation)a, x, up, T * N, r);
            CHECK_OK(bp_glu((bp_activation)a, x, up, T * N, y));
            CHECK(bp_test_nmse(y, r, T * N) <= 1e-12, "%s glu %d: %.3g", in, a, bp_test_nmse(y, r, T * N));
        }
        bp_ref_softmax(x, T, N, 0.7f, 20.0f, up, r);
        CHECK_OK(bp_softmax(x, T, N, 0.7f, 20.0f, up, y));
        CHECK(bp_test_nmse(y, r, T * N) <= 1e-12, "%s softmax: %.3g", in, bp_test_nmse(y, r, T * N));
        memcpy(r, x, sizeof r), memcpy(y, x, sizeof y);
        bp_ref_rope(&rd, r, T, pos);
        CHECK_OK(bp_rope(&rd, y, T, pos));
        CHECK(bp_test_nmse(y, r, (size_t)T * 5 * 206) <= 1e-12, "%s rope: %.3g", in, bp_test_nmse(y, r, (size_t)T * 5 * 206));
        CHECK(strstr(bp_op_last_path("rope"), in) != NULL, "rope ran on %s: %s", in, bp_op_last_path("rope"));
        memcpy(r, x, sizeof r), memcpy(y, x, sizeof y);
        bp_ref_rope(&ry, r, T, pos);
        CHECK_OK(bp_rope(&ry, y, T, pos));
        CHECK(bp_test_nmse(y, r, (size_t)T * 5 * 206) <= 1e-12, "%s YaRN rope: %.3g", in, bp_test_nmse(y, r, (size_t)T * 5 * 206));
        CHECK(!exact == !strstr(bp_op_last_path("glu"), "(exact)"), "glu path says exact mode: %s", bp_op_last_path("glu"));
    }
    bp_set_exact_mode(false);
}

static void test_vexp(void) {
    enum { N = 4001 };
    static float s[N], xs[N];
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        const bp_op_kern *kn = bp_op_kern_current();
        /* the inputs kept, not recomputed: a compiler may contract one expression into an FMA */
        for (int i = 0; i < N; i++) s[i] = xs[i] = -100.0f + 0.047f * (float)i; /* -100 .. 88 */
        kn->exp_sum(s, N, 0.0f);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            float x = xs[i];
            double want = exp((double)x);
            /* below -87.3 the vector exp gives 0, expf (scalar path) a denormal: both < 2e-38 */
            if (x < -87.3f) CHECK(s[i] >= 0.0f && s[i] < 2e-38f, "%s exp(%g) below the cut is ~0", kn->isa, x);
            else worst = fmax(worst, fabs(s[i] - want) / want);
        }
        CHECK(worst < 4e-7, "%s vector exp: worst relative error %.3g", kn->isa, worst);
        float m[3] = {-INFINITY, 0.0f, -INFINITY};
        CHECK(kn->exp_sum(m, 3, 0.0f) == 1.0f && m[0] == 0 && m[2] == 0, "%s: exp(-inf) = 0", kn->isa);
    }
}

int main(void) {
    test_vexp();
    test_rows();
    test_attention();
    return bp_test_finish();
}
