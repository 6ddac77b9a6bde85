/* MoE routed experts against a NumPy float64 loop over tokens and routes
 * (tests/vectors/conv_moe/gen_conv_moe.py), for every weight kind: 8 experts, top-1 / top-2 /
 * top-8, t = 1, 5 and 67, a token routing to one expert twice, an expert no token uses (5).
 * Both upload layouts: fused gate/up per expert and the GGUF 3-D stacked tensors (built here by
 * splitting the fused ones), which must give the same bytes to the same experts. Paths: the
 * float64 reference ("cpu-ref", NMSE <= 1e-9), the CPU path ("cpu") and the op's choice, at the
 * limits below. Where the file stores a sketch
 * (y R with R of +-1, for 256-wide t = 67 cases) the comparison is on the sketch, and the whole
 * y of each path is compared with the whole y of the reference as well. */
#include "conv_moe_vectors.h"

/* NMSE limits: the tolerance table's "moe" rows (src/testing/tolerance.def). Exact-float weights
 * (F32/F16/BF16) run in f32: 1e-6, as everywhere. Quantized kinds: the CPU kernels quantize each
 * matmul's input to 8 bits (max-abs scale per block, as llama.cpp's mul_mat_id does), and the
 * down projection's input silu(g) * u is heavy-tailed (its block maximum is ~10x its RMS), so
 * that one rounding costs 1e-4 .. 7e-4 NMSE on these shapes (measured: median 1.5e-4, worst
 * TQ2_0 at t = 5, 6.5e-4). 2e-3 keeps 3x room; a wrong expert, a lost route or a wrong weight
 * scores 0.1 or more. */
static double moe_tol(bp_kind k) { return bp_test_tolerance(k, "moe"); }

#include <math.h>
#include <stdio.h>

typedef struct layer {
    int64_t n_exp, h, inter;
    uint8_t *gu, *dn;       /* fused: n_exp x [2*inter][h], n_exp x [h][inter] */
    uint8_t *g, *u;         /* stacked gate and up, split from gu */
    size_t half, dn_bytes;  /* bytes of one [inter][h] and one [h][inter] */
    bp_moe *fused, *stacked;
} layer;

static bool load_layer(const bp_kind_info *ki, cm_file *f, layer *L) {
    L->n_exp = cm_i32(f), L->h = cm_i32(f), L->inter = cm_i32(f);
    uint64_t seed = cm_u64(f), fnv_gu = cm_u64(f), fnv_dn = cm_u64(f);
    if (f->bad) return false;
    int64_t be = ki->block_elems, gub = L->n_exp * 2 * L->inter * L->h / be, dnb = L->n_exp * L->h * L->inter / be;
    L->half = (size_t)(L->inter * L->h / be) * ki->block_bytes;
    L->dn_bytes = (size_t)(L->h * L->inter / be) * ki->block_bytes;
    L->gu = malloc((size_t)gub * ki->block_bytes);
    L->dn = malloc((size_t)dnb * ki->block_bytes);
    L->g = malloc(L->half * (size_t)L->n_exp);
    L->u = malloc(L->half * (size_t)L->n_exp);
    uint64_t rng = seed;
    cm_blocks(f, L->gu, gub, &rng);
    cm_blocks(f, L->dn, dnb, &rng);
    CHECK(cm_fnv1a(L->gu, (size_t)gub * ki->block_bytes) == fnv_gu && cm_fnv1a(L->dn, (size_t)dnb * ki->block_bytes) == fnv_dn,
          "%s: regenerated expert weights differ from the generator's (PRNG drift)", ki->name);
    const void *gup[8], *dnp[8];
    size_t gus[8], dns[8];
    for (int64_t e = 0; e < L->n_exp && e < 8; e++) {
        gup[e] = L->gu + 2 * L->half * (size_t)e;
        dnp[e] = L->dn + L->dn_bytes * (size_t)e;
        gus[e] = 2 * L->half;
        dns[e] = L->dn_bytes;
        memcpy(L->g + L->half * (size_t)e, gup[e], L->half);
        memcpy(L->u + L->half * (size_t)e, (const uint8_t *)gup[e] + L->half, L->half);
    }
    CHECK(L->n_exp == 8, "%s: %lld experts, the test expects 8", ki->name, (long long)L->n_exp);
    if (L->n_exp != 8) return false;
    CHECK_OK(bp_moe_upload(8, L->h, L->inter, ki->kind, gup, gus, ki->kind, dnp, dns, &L->fused));
    bp_moe_tensor tg = {ki->kind, {L->h, L->inter, 8}, L->g, L->half * 8};
    bp_moe_tensor tu = {ki->kind, {L->h, L->inter, 8}, L->u, L->half * 8};
    bp_moe_tensor td = {ki->kind, {L->inter, L->h, 8}, L->dn, L->dn_bytes * 8};
    CHECK_OK(bp_moe_upload_stacked(&tg, &tu, &td, &L->stacked));
    return L->fused && L->stacked;
}

static void free_layer(layer *L) {
    bp_moe_free(L->fused);
    bp_moe_free(L->stacked);
    free(L->gu);
    free(L->dn);
    free(L->g);
    free(L->u);
}

/* out[t][n] = y R, R[h][n] = +-1. */
static void sketch(const float *y, int64_t t, int64_t h, const float *R, int64_t n, float *out) {
    for (int64_t i = 0; i < t; i++)
        for (int64_t c = 0; c < n; c++) {
            double s = 0;
            for (int64_t r = 0; r < h; r++) s += (double)y[i * h + r] * R[r * n + c];
            out[i * n + c] = (float)s;
        }
}

static void run_case(const bp_kind_info *ki, cm_file *f, const layer *L, int ci) {
    int64_t t = cm_i32(f), top_k = cm_i32(f), sk = cm_i32(f);
    uint64_t seed = cm_u64(f), fnv_x = cm_u64(f);
    const int32_t *ids_raw = cm_take(f, sizeof(int32_t) * (size_t)(t * top_k));
    const float *rw_raw = cm_take(f, sizeof(float) * (size_t)(t * top_k));
    int64_t nwant = sk ? t * sk : t * L->h;
    const float *want_raw = cm_take(f, sizeof(float) * (size_t)nwant);
    if (f->bad) return;
    int64_t h = L->h;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(t * top_k));
    float *rw = malloc(sizeof(float) * (size_t)(t * top_k)), *want = malloc(sizeof(float) * (size_t)nwant);
    memcpy(ids, ids_raw, sizeof(int32_t) * (size_t)(t * top_k));
    memcpy(rw, rw_raw, sizeof(float) * (size_t)(t * top_k));
    memcpy(want, want_raw, sizeof(float) * (size_t)nwant);
    float *x = malloc(sizeof(float) * (size_t)(t * h)), *y0 = malloc(sizeof(float) * (size_t)(t * h));
    float *R = malloc(sizeof(float) * (size_t)(h * (sk ? sk : 1)));
    uint64_t rng = seed;
    cm_fill(x, t * h, 1.0, 0.0, &rng);
    cm_fill(y0, t * h, 0.5, 0.0, &rng);
    for (int64_t i = 0; i < h * sk; i++) R[i] = (bp_test_rand(&rng) & 1) ? 1.0f : -1.0f;
    CHECK(cm_fnv1a(x, sizeof(float) * (size_t)(t * h)) == fnv_x, "%s case %d: regenerated x differs (PRNG drift)",
          ki->name, ci);
    float *y = malloc(sizeof(float) * (size_t)(t * h)), *yref = malloc(sizeof(float) * (size_t)(t * h));
    float *got = malloc(sizeof(float) * (size_t)nwant);
    for (int li = 0; li < 2; li++) {
        bp_moe *m = li ? L->stacked : L->fused;
        const char *layout = li ? "stacked" : "fused";
        /* The reference and the op's own choice (which may be a GPU-API backend's matmuls) on the
         * fused upload; the stacked one must give the CPU path the same experts. */
        for (int pi = li ? 1 : 0; pi < (li ? 2 : 3); pi++) {
            const char *path = pi == 0 ? "cpu-ref" : pi == 1 ? "cpu" : NULL;
            memcpy(y, y0, sizeof(float) * (size_t)(t * h));
            bp_status s = bp_moe_run_on(m, path, x, t, top_k, ids, rw, y);
            CHECK(s == BP_OK, "%s case %d %s via %s: %s", ki->name, ci, layout, path ? path : "(op's choice)",
                  bp_last_error());
            if (pi == 0) memcpy(yref, y, sizeof(float) * (size_t)(t * h));
            if (sk) sketch(y, t, h, R, sk, got);
            else memcpy(got, y, sizeof(float) * (size_t)nwant);
            double e = bp_test_nmse(got, want, (size_t)nwant), tol = pi == 0 ? 1e-9 : moe_tol(ki->kind);
            CHECK(e <= tol, "%s case %d (t %lld, top-%lld) %s via %s: NMSE %.3g > %.1g against NumPy%s", ki->name, ci,
                  (long long)t, (long long)top_k, layout, path ? path : "(op's choice)", e, tol, sk ? " (sketch)" : "");
            if (pi > 0) {
                /* The whole y against the whole reference y (y0 subtracted: it is not the op's). */
                double num = 0, den = 0;
                for (int64_t i = 0; i < t * h; i++) {
                    double d = (double)y[i] - yref[i], r = (double)yref[i] - y0[i];
                    num += d * d;
                    den += r * r;
                }
                CHECK(num <= moe_tol(ki->kind) * den, "%s case %d %s via %s: NMSE %.3g against the float64 reference",
                      ki->name, ci, layout, path ? path : "(op's choice)", num / den);
            }
        }
    }
    free(ids);
    free(rw);
    free(want);
    free(x);
    free(y0);
    free(R);
    free(y);
    free(yref);
    free(got);
}

static void run_file(const bp_kind_info *ki, cm_file *f) {
    layer L = {0};
    if (load_layer(ki, f, &L))
        for (uint32_t c = 0; c < f->ncases && !f->bad; c++) run_case(ki, f, &L, (int)c);
    free_layer(&L);
}

int main(void) {
    cm_each_kind("moe", "BPMO", run_file);
    return bp_test_finish();
}
