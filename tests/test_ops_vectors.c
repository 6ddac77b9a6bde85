/* Every op against NumPy float64 (tests/vectors/ops/gen_ops.py): norms, RoPE, activations,
 * softmax, attention over every KV kind. Inputs are redrawn here from the harness's generator
 * with each case's seed (the file holds the first four draws to prove the streams agree).
 * NMSE limits as ggml's test-backend-ops: 1e-6 for float paths (F32/F16/BF16 caches hold
 * exactly what the reference attends over), 5e-4 with a quantized KV cache. Run on every CPU
 * ISA path and at 1 and 3 threads, so the fast paths are held to the same numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"

typedef struct vcase {
    char name[48];
    int64_t p[16];
    double f[8];
    uint64_t seed;
    float first[4];
    uint64_t n_out;
    float *out;
} vcase;

typedef struct vfile {
    int n;
    vcase *c;
} vfile;

static bool load(const char *group, vfile *vf) {
    char path[256];
    snprintf(path, sizeof path, "tests/vectors/ops/ops_%s.bin", group);
    size_t len;
    uint8_t *b = bp_test_read_file(path, &len);
    memset(vf, 0, sizeof *vf);
    if (!b) return false;
    uint32_t ver, n;
    if (len < 12 || memcmp(b, "BPOP", 4)) goto bad;
    memcpy(&ver, b + 4, 4), memcpy(&n, b + 8, 4);
    if (ver != 1) goto bad;
    vf->c = calloc(n, sizeof *vf->c);
    size_t off = 12;
    for (uint32_t i = 0; i < n; i++) {
        vcase *c = &vf->c[i];
        size_t head = 48 + 128 + 64 + 8 + 16 + 8;
        if (off + head > len) goto bad;
        memcpy(c->name, b + off, 48), off += 48;
        c->name[47] = 0;
        memcpy(c->p, b + off, 128), off += 128;
        memcpy(c->f, b + off, 64), off += 64;
        memcpy(&c->seed, b + off, 8), off += 8;
        memcpy(c->first, b + off, 16), off += 16;
        memcpy(&c->n_out, b + off, 8), off += 8;
        if (c->n_out > (len - off) / 4) goto bad;
        c->out = malloc(c->n_out * 4 + 4);
        memcpy(c->out, b + off, c->n_out * 4), off += c->n_out * 4;
        vf->n = (int)i + 1;
    }
    free(b);
    return true;
bad:
    CHECK(0, "%s: malformed vector file", path);
    free(b);
    return false;
}

static void drop(vfile *vf) {
    for (int i = 0; i < vf->n; i++) free(vf->c[i].out);
    free(vf->c);
}

static float *draw(uint64_t *rng, int64_t n, double mul, double add) {
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)((double)bp_test_randf(rng) * mul + add);
    return v;
}

static void check_first(const vcase *c, const float *in, int64_t n) {
    size_t k = n < 4 ? (size_t)n : 4;
    CHECK(!memcmp(c->first, in, k * sizeof *in), "%s: input stream differs from the generator's", c->name);
}

static void compare(const char *group, const vcase *c, const float *got, double tol) {
    double e = bp_test_nmse(got, c->out, c->n_out);
    if (getenv("BP_SHOW_NMSE")) fprintf(stderr, "%s %s: %.3g\n", group, c->name, e);
    CHECK(e <= tol && bp_test_all_finite(got, c->n_out), "%s %s: NMSE %.3g > %.0e", group, c->name, e, tol);
}

static const char *g_tag = "";

static void run_norms(const vfile *vf) {
    for (int i = 0; i < vf->n; i++) {
        const vcase *c = &vf->c[i];
        uint64_t rng = c->seed;
        int64_t t = c->p[1], n = c->p[2], ch = c->p[3];
        float *x = draw(&rng, t * n, 3.0, 0.5);
        check_first(c, x, t * n);
        int64_t np = c->p[0] == 2 ? ch : n;
        float *g = c->p[5] ? draw(&rng, np, 1, 0) : NULL, *b = c->p[6] ? draw(&rng, np, 1, 0) : NULL;
        bp_norm_desc d = {.type = (bp_norm_type)c->p[0], .n = n, .channels = ch, .groups = c->p[4], .eps = (float)c->f[0],
                          .gamma = g, .beta = b, .silu = c->p[7] != 0};
        float *y = malloc((size_t)(t * n) * sizeof *y);
        CHECK_OK(bp_norm(&d, x, t, y));
        compare("norm", c, y, 1e-6);
        /* in place gives the same */
        CHECK_OK(bp_norm(&d, x, t, x));
        CHECK(!memcmp(x, y, (size_t)(t * n) * sizeof *y), "norm %s: in place equals out of place", c->name);
        free(x), free(g), free(b), free(y);
    }
}

static void run_ropes(const vfile *vf) {
    for (int i = 0; i < vf->n; i++) {
        const vcase *c = &vf->c[i];
        uint64_t rng = c->seed;
        int64_t t = c->p[0];
        int32_t *pos = malloc((size_t)t * sizeof *pos);
        for (int64_t j = 0; j < t; j++) pos[j] = (int32_t)((bp_test_rand(&rng) >> 40) % 70000);
        float *x = draw(&rng, t * c->p[1] * c->p[2], 1, 0);
        check_first(c, x, t * c->p[1] * c->p[2]);
        bp_rope_desc d = {.n_heads = (int32_t)c->p[1], .head_dim = (int32_t)c->p[2], .n_rot = (int32_t)c->p[3],
                          .layout = (bp_rope_layout)c->p[4], .freq_base = (float)c->f[0], .freq_scale = (float)c->f[1]};
        CHECK_OK(bp_rope(&d, x, t, pos));
        compare("rope", c, x, 1e-6);
        free(pos), free(x);
    }
}

static void run_acts(const vfile *vf) {
    for (int i = 0; i < vf->n; i++) {
        const vcase *c = &vf->c[i];
        uint64_t rng = c->seed;
        int64_t n = c->p[1];
        float *x = draw(&rng, n, c->f[0], 0);
        check_first(c, x, n);
        float *y = malloc((size_t)n * sizeof *y);
        if (c->p[2]) {
            float *up = draw(&rng, n, 1, 0);
            CHECK_OK(bp_glu((bp_activation)c->p[0], x, up, n, y));
            free(up);
        } else
            CHECK_OK(bp_activate((bp_activation)c->p[0], x, n, y));
        compare("act", c, y, 1e-6);
        free(x), free(y);
    }
}

static void run_softmaxes(const vfile *vf) {
    for (int i = 0; i < vf->n; i++) {
        const vcase *c = &vf->c[i];
        uint64_t rng = c->seed;
        int64_t t = c->p[0], n = c->p[1];
        float *x = draw(&rng, t * n, c->f[2], 0);
        check_first(c, x, t * n);
        float *m = NULL;
        if (c->p[2]) {
            m = malloc((size_t)(t * n) * sizeof *m);
            for (int64_t j = 0; j < t * n; j++)
                m[j] = (bp_test_rand(&rng) >> 40) % 5 == 0 ? -INFINITY : bp_test_randf(&rng);
        }
        float *y = malloc((size_t)(t * n) * sizeof *y);
        CHECK_OK(bp_softmax(x, t, n, (float)c->f[0], (float)c->f[1], m, y));
        compare("softmax", c, y, 1e-6);
        free(x), free(m), free(y);
    }
}

static bool float_kind(bp_kind k) { return k == BP_KIND_F32 || k == BP_KIND_F16 || k == BP_KIND_BF16; }

static void run_attentions(const vfile *vf) {
    for (int i = 0; i < vf->n; i++) {
        const vcase *c = &vf->c[i];
        uint64_t rng = c->seed;
        int64_t t = c->p[0], len = c->p[1];
        int nh = (int)c->p[2], nkv = (int)c->p[3], dk = (int)c->p[4], dv = (int)c->p[5];
        bp_kind kk = (bp_kind)c->p[8], kv = (bp_kind)c->p[9];
        float *K = draw(&rng, len * nkv * dk, 1, 0);
        check_first(c, K, len * nkv * dk);
        float *V = draw(&rng, len * nkv * dv, 1, 0);
        float *q = draw(&rng, t * nh * dk, 1, 0);
        int32_t *pos = malloc((size_t)t * sizeof *pos);
        for (int64_t j = 0; j < t; j++)
            pos[j] = c->p[11] ? (int32_t)((bp_test_rand(&rng) >> 40) % (uint64_t)len) : (int32_t)(len - t + j);
        bp_kv_cache_desc cd = {.n_layers = 2, .n_kv_heads = nkv, .head_dim_k = dk, .head_dim_v = dv,
                               .capacity = len + 3, .kind_k = kk, .kind_v = kv};
        bp_kv_cache *cache = NULL;
        CHECK_OK(bp_kv_cache_create(&cd, &cache));
        if (!cache) continue;
        /* Layer 1, appended in two pieces (the second rewriting one token) to exercise first_pos. */
        int64_t a = len / 2;
        CHECK_OK(bp_kv_cache_append(cache, 1, K, V, a + 1, 0));
        CHECK_OK(bp_kv_cache_append(cache, 1, K + a * nkv * dk, V + a * nkv * dv, len - a, a));
        bp_attn_desc d = {.n_heads = nh, .n_kv_heads = nkv, .scale = (float)c->f[0], .causal = c->p[6] != 0,
                          .window = c->p[7], .softcap = (float)c->f[1]};
        float *out = malloc((size_t)(t * nh * dv) * sizeof *out);
        CHECK_OK(bp_attention(&d, q, t, pos, cache, 1, out));
        /* IQ4_NL caches are compared with the unquantized values (the gguf package cannot
         * quantize IQ4_NL): 4.5-bit rounding of K and V measured at NMSE 4e-3 to 5e-3 here, so 1e-2. */
        double tol = !c->p[10] ? 1e-2 : float_kind(kk) && float_kind(kv) ? 1e-6 : 5e-4;
        compare("attention", c, out, tol);
        bp_kv_cache_free(cache);
        free(K), free(V), free(q), free(pos), free(out);
    }
}

int main(void) {
    static const char *groups[] = {"norm", "rope", "act", "softmax", "attention"};
    void (*fns[])(const vfile *) = {run_norms, run_ropes, run_acts, run_softmaxes, run_attentions};
    vfile vf[5];
    for (int g = 0; g < 5; g++)
        if (!load(groups[g], &vf[g])) return bp_test_finish();
    /* Every ISA path this machine has, at 1 and 3 threads. */
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) {
            fprintf(stderr, "note: ISA path %s not available here\n", bp_cpu_isa_name((bp_cpu_isa)isa));
            continue;
        }
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        for (int th = 1; th <= 3; th += 2) {
            CHECK_OK(bp_cpu_set_threads(th));
            g_tag = bp_cpu_isa_name((bp_cpu_isa)isa);
            int before = bp_test_failed;
            for (int g = 0; g < 5; g++) fns[g](&vf[g]);
            fprintf(stderr, "%s, %d thread%s: %s\n", g_tag, th, th > 1 ? "s" : "",
                    bp_test_failed == before ? "all cases pass" : "FAILURES above");
        }
    }
    for (int g = 0; g < 5; g++) drop(&vf[g]);
    return bp_test_finish();
}
