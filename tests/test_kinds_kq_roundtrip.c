/* Round trip quantize -> dequantize for the quantizers in src/kinds/ref_kquants.c and
 * src/kinds/ref_lowbit.c: Q2_K Q3_K Q4_K Q5_K Q6_K Q8_K TQ1_0 TQ2_0 MXFP4.
 *
 * The K-quant quantizers have no bit-exact oracle (the gguf package has no quantizer for them),
 * so they are judged here by error bounds against the float input, plus structural facts that
 * do not go through our dequantizer or packing code:
 * - Q8_K: parsed from the raw block bytes, every dequantized value is exactly d*q, the stored
 *   bsums are the sums of the stored quants, max |q| is 127 and each |x - d*q| <= |d|/2.
 * - Q2_K / Q3_K / Q4_K: a sub-block holds at most 4 / 8 / 16 distinct dequantized values.
 * - Q2_K..Q6_K: every value comes back on the level of its sub-block's grid nearest to the
 *   input (or at the clamped end), with the grid read off the dequantized values themselves.
 * - Q2_K..Q6_K: the row error is at most a stated factor above a float64 round-to-nearest
 *   quantizer of the same bit width with exact (unrounded) per-sub-block scales, computed here.
 * The TQ1_0 / TQ2_0 / MXFP4 quantizers are also bit-exact-tested against gguf by
 * tests/test_kinds_quantize.c; here they get the same bounds plus exact round trips of inputs
 * that the format represents exactly.
 *
 * Rows: uniform and Gaussian random at several magnitudes, constant rows of either sign,
 * all-zero rows (must come back exactly 0), and rows with one huge outlier (blocks without the
 * outlier must keep the random-row bound; the outlier itself must come back within a bound).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { N = 1024, MAXB = 1024 * 2 };

/* Per-kind bounds. The rows are fixed (seeded), so the test is deterministic; each random-row
 * bound is about 1.5x the worst NMSE measured over them (2-core x86-64 VM, gcc 12 -O2; the test
 * prints the measured values): tight enough that a wrong rounding, a lost scale bit or a packing
 * slip shows, loose enough for a different but sane search. The levels follow from the bit
 * width: uniform quantization with L levels over a block's range gives NMSE about 1/L^2 on
 * uniform data (1/9 at 2 bits ... 1/16129 at 8), Gaussian data does worse because the block
 * range is set by the tails. */
typedef struct kind_bound {
    bp_kind kind;
    const char *name;
    int sub;              /* elements per sub-block sharing one scale (0: no baseline checks) */
    int bits;             /* quant bits for the baseline and the distinct-value check */
    int asym;             /* 1: the kind stores a min (x ~ d*q - m) */
    double nmse_uniform;  /* rows uniform in [-a, a], a = 1e-3, 1, 37 */
    double nmse_gauss;    /* Gaussian rows, sigma = 1e-3, 1, 37; also blocks next to an outlier */
    double nmse_const;    /* constant rows: only the scales' own rounding */
    double outlier_rel;   /* |y - x| / |x| at a 500-sigma outlier */
    double vs_baseline;   /* K-quants: NMSE <= this x a float64 round-to-nearest baseline */
} kind_bound;

static const kind_bound bounds[] = {
    /* Q2_K: 2 bits + 4-bit scales and mins. Measured 0.058 / 0.101; 0.89x baseline (the fit
     * minimises absolute error, so it is not far below the MSE baseline). */
    {BP_KIND_Q2_K, "Q2_K", 16, 2, 1, 0.09, 0.15, 1e-5, 2e-3, 1.15},
    /* Q3_K: 3 bits + signed 6-bit scales. Measured 0.017 / 0.025; 0.71x baseline. */
    {BP_KIND_Q3_K, "Q3_K", 16, 3, 0, 0.026, 0.04, 1e-5, 2e-3, 1.0},
    /* Q4_K: 4 bits + 6-bit scales and mins. Measured 0.0032 / 0.0057; 0.87x baseline. */
    {BP_KIND_Q4_K, "Q4_K", 32, 4, 1, 0.005, 0.009, 1e-5, 2e-3, 1.1},
    /* Q5_K: 5 bits. Measured 0.0009 / 0.0016; 1.03x baseline (6-bit scales cost about what the
     * search gains at this width). */
    {BP_KIND_Q5_K, "Q5_K", 32, 5, 1, 0.0014, 0.0025, 1e-5, 2e-3, 1.25},
    /* Q6_K: 6 bits + int8 scales. The f16 super-block scale is amax/4096, an f16 subnormal below
     * amax ~ 0.25, so at 1e-3 it keeps ~2 significant bits (a format limit ggml shares): measured
     * 4.9e-4 there vs 1.8e-4 / 3.4e-4 at larger magnitudes, 5.5e-4 on the constant row -0.003.
     * Baseline ratio (magnitudes >= 1 only, see above) 0.88x. */
    {BP_KIND_Q6_K, "Q6_K", 16, 6, 0, 8e-4, 8e-4, 1e-3, 2e-3, 1.1},
    /* Q8_K: 8 bits with an f32 scale. Measured 1.6e-5 / 5.3e-5; constant rows exact. */
    {BP_KIND_Q8_K, "Q8_K", 0, 8, 0, 2.5e-5, 8e-5, 1e-10, 1e-6, 0},
    /* Ternary: {-d, 0, d} with d = max|x|, meant for ternary weights. Uniform data: 1/4 exactly
     * in the limit (measured 0.26); Gaussian worse (0.73), d being set by the tail. Constant rows
     * are exact up to the f16 rounding of d. */
    {BP_KIND_TQ1_0, "TQ1_0", 0, 0, 0, 0.30, 0.85, 1e-6, 1e-3, 0},
    {BP_KIND_TQ2_0, "TQ2_0", 0, 0, 0, 0.30, 0.85, 1e-6, 1e-3, 0},
    /* MXFP4: E2M1 with a power-of-two block scale chosen so the block max lands in [4, 8) x d;
     * the top code is 6, so values in (6, 8) x d clip: up to 25% at the block max (outlier
     * bound), constant row 123 -> 96 (NMSE 0.048). Random rows measured 0.022 / 0.015. */
    {BP_KIND_MXFP4, "MXFP4", 0, 0, 0, 0.035, 0.025, 0.06, 0.26, 0},
};

static double gauss(uint64_t *s) {
    /* Box-Muller from two uniforms in (0, 1]. */
    const double u1 = ((double)(bp_test_rand(s) >> 11) + 1.0) / 9007199254740992.0;
    const double u2 = (double)(bp_test_rand(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int roundtrip(const kind_bound *kb, const float *x, float *y, uint8_t *q) {
    size_t bytes = 0;
    CHECK_OK(bp_kind_row_bytes(kb->kind, N, &bytes));
    if (bytes > MAXB) {
        CHECK(0, "%s: row of %zu bytes exceeds the test buffer", kb->name, bytes);
        return 0;
    }
    memset(q, 0xA5, MAXB); /* a byte the quantizer forgets to write reads as garbage */
    bp_status s1 = bp_quantize(kb->kind, x, N, q, bytes);
    bp_status s2 = bp_dequantize(kb->kind, q, bytes, y, N);
    CHECK(s1 == BP_OK && s2 == BP_OK, "%s: quantize/dequantize failed: %s", kb->name, bp_last_error());
    return s1 == BP_OK && s2 == BP_OK;
}

/* float64 round-to-nearest at `bits` over sub-blocks of `sub` with exact scales: asymmetric
 * over [min, max] with 2^bits levels, or symmetric with 2^(bits-1) - 1 steps each side. */
static double baseline_nmse(const float *x, int sub, int bits, int asym) {
    double num = 0, den = 0;
    for (int b = 0; b < N; b += sub) {
        double lo = x[b], hi = x[b], amax = 0;
        for (int i = 0; i < sub; i++) {
            lo = fmin(lo, x[b + i]);
            hi = fmax(hi, x[b + i]);
            amax = fmax(amax, fabs(x[b + i]));
        }
        for (int i = 0; i < sub; i++) {
            double v = x[b + i], r;
            if (asym) {
                const double st = (hi - lo) / ((1 << bits) - 1);
                r = st > 0 ? lo + st * nearbyint((v - lo) / st) : v;
            } else {
                const double st = amax / ((1 << (bits - 1)) - 1);
                r = st > 0 ? st * nearbyint(v / st) : v;
            }
            num += (r - v) * (r - v);
            den += v * v;
        }
    }
    return den > 0 ? num / den : 0;
}

static int distinct(const float *y, int n) {
    int cnt = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = y[j] == y[i];
        cnt += !seen;
    }
    return cnt;
}

static int cmp_float(const void *a, const void *b) {
    const float fa = *(const float *)a, fb = *(const float *)b;
    return (fa > fb) - (fa < fb);
}

/* Elements of a sub-block that did not land on their nearest level. The levels are an evenly
 * spaced grid (a*q + b); its spacing is taken as the smallest gap between the distinct values
 * the sub-block came back with (a multiple of the true spacing at worst, which only loosens
 * the check). An element may sit farther than half a step only at an end of the used range,
 * on the outside (clamping). Catches a flipped quant bit that the NMSE bound would average away. */
static int off_grid(const float *x, const float *y, int sub) {
    float v[64];
    memcpy(v, y, (size_t)sub * sizeof *v);
    qsort(v, (size_t)sub, sizeof *v, cmp_float);
    double step = INFINITY;
    for (int i = 1; i < sub; i++)
        if (v[i] != v[i - 1]) step = fmin(step, (double)v[i] - v[i - 1]);
    if (step == INFINITY) return 0; /* a single level */
    int bad = 0;
    for (int i = 0; i < sub; i++) {
        const double err = fabs((double)x[i] - y[i]);
        if (err <= 0.5 * step * (1 + 1e-3) + 1e-6 * fabs(y[i])) continue;
        if ((y[i] == v[sub - 1] && x[i] > y[i]) || (y[i] == v[0] && x[i] < y[i])) continue;
        bad++;
    }
    return bad;
}

static void check_random(const kind_bound *kb, float *x, float *y, uint8_t *q) {
    uint64_t s = 0x1234u + (uint64_t)kb->kind;
    double worst[2] = {0, 0}, worst_ratio = 0;
    static const double mags[] = {1e-3, 1.0, 37.0};
    for (int dist = 0; dist < 2; dist++)
        for (int m = 0; m < 3; m++)
            for (int rep = 0; rep < 3; rep++) {
                for (int i = 0; i < N; i++)
                    x[i] = (float)(mags[m] * (dist ? gauss(&s) : (double)bp_test_randf(&s)));
                if (!roundtrip(kb, x, y, q)) return;
                const double e = bp_test_nmse(y, x, N), bound = dist ? kb->nmse_gauss : kb->nmse_uniform;
                if (e > worst[dist]) worst[dist] = e;
                CHECK(e <= bound, "%s %s x%g: NMSE %.3g > bound %.3g", kb->name,
                      dist ? "gauss" : "uniform", mags[m], e, bound);
                /* Not at 1e-3: there Q6_K's f16 scale is subnormal (format limit, see the table). */
                if (kb->vs_baseline > 0 && mags[m] >= 1.0) {
                    const double r = e / baseline_nmse(x, kb->sub, kb->bits, kb->asym);
                    if (r > worst_ratio) worst_ratio = r;
                    CHECK(r <= kb->vs_baseline, "%s: NMSE %.3g is %.2fx the float64 baseline (bound %.2fx)",
                          kb->name, e, r, kb->vs_baseline);
                }
                for (int b = 0; kb->sub && b < N; b += kb->sub) {
                    const int d = distinct(y + b, kb->sub);
                    CHECK(kb->bits > 4 || d <= (1 << kb->bits), "%s: sub-block at %d has %d distinct values > %d",
                          kb->name, b, d, 1 << kb->bits);
                    const int off = off_grid(x + b, y + b, kb->sub);
                    CHECK(off == 0, "%s: sub-block at %d: %d values not on their nearest level", kb->name, b, off);
                }
            }
    printf("%-6s random: worst NMSE uniform %.3g (bound %.3g), gauss %.3g (bound %.3g)", kb->name, worst[0],
           kb->nmse_uniform, worst[1], kb->nmse_gauss);
    if (kb->vs_baseline > 0) printf(", worst %.2fx float64 baseline (bound %.2fx)", worst_ratio, kb->vs_baseline);
    printf("\n");
}

static void check_special(const kind_bound *kb, float *x, float *y, uint8_t *q) {
    /* All zero: exactly zero back (a NaN from 0/0 or a stray min would show here). */
    for (int i = 0; i < N; i++) x[i] = 0;
    if (roundtrip(kb, x, y, q)) {
        int bad = 0;
        for (int i = 0; i < N; i++) bad += y[i] != 0.0f;
        CHECK(bad == 0, "%s: all-zero row: %d non-zero values back", kb->name, bad);
    }
    /* Constant rows of either sign (for the min-kinds a negative constant is all "min"). */
    static const float consts[] = {0.7f, -0.7f, 123.0f, -3e-3f};
    double worst = 0;
    for (int c = 0; c < 4; c++) {
        for (int i = 0; i < N; i++) x[i] = consts[c];
        if (!roundtrip(kb, x, y, q)) continue;
        const double e = bp_test_nmse(y, x, N);
        if (e > worst) worst = e;
        CHECK(e <= kb->nmse_const, "%s: constant row %g: NMSE %.3g > bound %.3g", kb->name,
              (double)consts[c], e, kb->nmse_const);
    }
    /* One huge outlier in a Gaussian row: it may ruin its own block (that is the format), but
     * no other block, and it must itself survive. */
    const int be = (int)bp_kind_lookup((uint32_t)kb->kind)->block_elems;
    uint64_t s = 0xBADC0DEu + (uint64_t)kb->kind;
    double worst_rel = 0;
    for (int rep = 0; rep < 4; rep++) {
        for (int i = 0; i < N; i++) x[i] = (float)gauss(&s);
        const int at = (int)(bp_test_rand(&s) % N);
        x[at] = rep % 2 ? -500.0f : 500.0f;
        if (!roundtrip(kb, x, y, q)) continue;
        const double rel = fabs((double)y[at] - x[at]) / fabs((double)x[at]);
        if (rel > worst_rel) worst_rel = rel;
        CHECK(rel <= kb->outlier_rel, "%s: outlier %g came back as %g (rel %.3g > %.3g)", kb->name,
              (double)x[at], (double)y[at], rel, kb->outlier_rel);
        const int ob = at / be * be;
        for (int b = 0; b < N; b += be) {
            if (b == ob) continue;
            const double e = bp_test_nmse(y + b, x + b, (size_t)be);
            CHECK(e <= kb->nmse_gauss, "%s: block at %d next to an outlier: NMSE %.3g > %.3g", kb->name,
                  b, e, kb->nmse_gauss);
        }
    }
    printf("%-6s constant rows: worst NMSE %.3g (bound %.3g); outlier: worst rel %.3g (bound %.3g)\n",
           kb->name, worst, kb->nmse_const, worst_rel, kb->outlier_rel);
}

static float load_f32le(const uint8_t *p) {
    const uint32_t u = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Q8_K facts read straight from the block bytes (ggml-common.h: float d, int8 qs[256],
 * int16 bsums[16]), not through our dequantizer. */
static void check_q8k_structure(float *x, float *y, uint8_t *q) {
    const kind_bound kb = {BP_KIND_Q8_K, "Q8_K", 0, 8, 0, 0, 0, 0, 0, 0};
    uint64_t s = 77;
    for (int rep = 0; rep < 6; rep++) {
        for (int i = 0; i < N; i++) x[i] = (float)(gauss(&s) * (rep + 1) * 0.3);
        if (rep == 5) x[3] = -900.0f;
        if (!roundtrip(&kb, x, y, q)) return;
        for (int b = 0; b < N / 256; b++) {
            const uint8_t *blk = q + 292 * b;
            const float d = load_f32le(blk);
            int maxq = 0, bad_val = 0, bad_err = 0, bad_sum = 0;
            for (int i = 0; i < 256; i++) {
                const int qi = (int8_t)blk[4 + i];
                if (abs(qi) > maxq) maxq = abs(qi);
                bad_val += y[256 * b + i] != d * (float)qi;
                /* Nearest rounding: within half a step (plus float slack on x*iscale). */
                bad_err += fabs((double)x[256 * b + i] - (double)d * qi) > 0.5 * fabs(d) * (1 + 1e-5);
            }
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int i = 0; i < 16; i++) sum += (int8_t)blk[4 + 16 * g + i];
                const int16_t stored = (int16_t)(blk[260 + 2 * g] | (blk[261 + 2 * g] << 8));
                bad_sum += stored != sum;
            }
            CHECK(bad_val == 0, "Q8_K block %d: %d values differ from d*q", b, bad_val);
            CHECK(bad_err == 0, "Q8_K block %d: %d values off by more than d/2", b, bad_err);
            CHECK(bad_sum == 0, "Q8_K block %d: %d bsums differ from the sums of the quants", b, bad_sum);
            CHECK(maxq == 127, "Q8_K block %d: max |q| = %d, want 127", b, maxq);
        }
    }
}

/* Inputs the format holds exactly must come back bit for bit. */
static void check_exact(float *x, float *y, uint8_t *q) {
    uint64_t s = 99;
    /* Ternary: {-c, 0, c} with c exact in f16. */
    for (int k = 0; k < 2; k++) {
        const kind_bound *kb = &bounds[6 + k];
        for (int i = 0; i < N; i++) x[i] = 0.375f * (float)((int)(bp_test_rand(&s) % 3) - 1);
        x[5] = 0.375f; /* every block needs its max: put one in each */
        for (int b = 0; b < N; b += 256) x[b] = -0.375f;
        if (!roundtrip(kb, x, y, q)) continue;
        int bad = 0;
        for (int i = 0; i < N; i++) bad += y[i] != x[i];
        CHECK(bad == 0, "%s: %d exactly-ternary values not reproduced", kb->name, bad);
    }
    /* MXFP4: 2^k times E2M1 values (0, .5, 1, 1.5, 2, 3, 4, 6), each block holding a +-6. */
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int b = 0; b < N; b += 32) {
        const float scale = ldexpf(1.0f, (int)(bp_test_rand(&s) % 40) - 20);
        for (int i = 0; i < 32; i++) {
            const float v = e2m1[bp_test_rand(&s) % 8] * scale;
            x[b + i] = bp_test_rand(&s) & 1 ? -v : v;
        }
        x[b + (int)(bp_test_rand(&s) % 32)] = (bp_test_rand(&s) & 1 ? -6.0f : 6.0f) * scale;
    }
    if (roundtrip(&bounds[8], x, y, q)) {
        int bad = 0;
        for (int i = 0; i < N; i++) bad += y[i] != x[i];
        CHECK(bad == 0, "MXFP4: %d exactly-representable values not reproduced", bad);
    }
}

/* Hostile input: NaN, infinities, the float extremes and subnormals must not crash or trip the
 * sanitizers (a float -> int conversion out of range is undefined behaviour; the ASan+UBSan
 * build runs this). Only the all-subnormal row has a checked result: it must come back finite
 * and tiny. */
static void check_hostile(float *x, float *y, uint8_t *q) {
    static const float nasty[] = {NAN, INFINITY, -INFINITY, 3.4e38f, -3.4e38f, 1e-45f, -0.0f, 1e-40f, 65504.0f, 7e4f};
    uint64_t s = 5;
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        const kind_bound *kb = &bounds[k];
        for (size_t v = 0; v < sizeof nasty / sizeof nasty[0]; v++) {
            for (int i = 0; i < N; i++) x[i] = bp_test_randf(&s);
            for (int i = 0; i < N; i += 7) x[i] = nasty[v];
            (void)roundtrip(kb, x, y, q);
        }
        for (int i = 0; i < N; i++) x[i] = bp_test_randf(&s) * 1e-40f;
        if (!roundtrip(kb, x, y, q)) continue;
        int bad = 0;
        for (int i = 0; i < N; i++) bad += !(fabsf(y[i]) <= 1e-30f);
        CHECK(bad == 0, "%s: subnormal row: %d values not finite and tiny", kb->name, bad);
    }
}

int main(void) {
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *q = malloc(MAXB);
    if (!x || !y || !q) return 1;
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        const bp_kind_info *info = bp_kind_lookup((uint32_t)bounds[k].kind);
        CHECK(info && info->can_quantize, "%s: kind table says no quantizer", bounds[k].name);
        if (!info || !info->can_quantize) continue;
        check_random(&bounds[k], x, y, q);
        check_special(&bounds[k], x, y, q);
    }
    check_q8k_structure(x, y, q);
    check_exact(x, y, q);
    check_hostile(x, y, q);
    free(x);
    free(y);
    free(q);
    return bp_test_finish();
}
