/* Every quantizer in the kind table.
 *
 * 1. Bit-exact: where tests/vectors/quant_<KIND>.bin exists (the gguf package's quantize on
 *    the same float inputs, see tests/vectors/gen_vectors.py), bp_quantize must give the same
 *    bytes.
 * 2. Round trip: every other kind with QUANT=1 quantizes random data and dequantizes it back;
 *    the normalised MSE must stay under the kind's row in bounds[] below. A QUANT=1 kind with
 *    neither vectors nor a row fails, and so does a row naming a kind that has no quantizer
 *    (a stale table).
 * 3. Structure of the activation kinds the dot products rely on: Q8_1's qs/d equal Q8_0's
 *    (checked bit-exact against the package above) and its s = d * sum(q); Q8_K's bsums are
 *    the exact sums of each group of 16 quants.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kinds_vectors.h"

/* Round-trip bounds on NMSE = sum (x' - x)^2 / sum x^2 over the test data below (Gaussian-like
 * values, a per-block scale spread over 4 decades, one outlier block). For b effective bits
 * per weight a scale-per-block quantizer gives roughly 4^-b / (a few) on such data; each bound
 * is that estimate times a margin of about 3, so a broken scale, sign or bit order (NMSE near
 * 1 or worse) fails while the honest rounding error passes. */
typedef struct {
    const char *kind;
    double max_nmse;
} nmse_bound;
static const nmse_bound bounds[] = {
    /* kind     bound      bits/weight; NMSE measured on this data (2-core x86-64, gcc -O2) */
    {"Q8_1", 1e-4},     /* 9.0 bpw: 8-bit, one f16 scale per 32; measured 2.8e-5 */
    {"Q8_K", 1e-4},     /* 9.1 bpw: 8-bit, one f32 scale per 256; measured 3.8e-5 */
    {"Q2_K", 0.2},      /* 2.6 bpw: 2-bit + 4-bit scale/min per 16; measured 0.083 */
    {"Q3_K", 0.07},     /* 3.4 bpw: 3-bit + 6-bit scale per 16; measured 0.022 */
    {"Q4_K", 0.015},    /* 4.5 bpw: 4-bit + 6-bit scale/min per 32; measured 0.0048 */
    {"Q5_K", 0.004},    /* 5.5 bpw; measured 0.00125 */
    {"Q6_K", 0.0008},   /* 6.6 bpw: 6-bit + 8-bit scale per 16; measured 0.00024 */
    {"IQ4_NL", 0.02},   /* 4.5 bpw: 16-level non-linear grid, scale per 32; measured 0.0076 */
};
enum { NBOUNDS = (int)(sizeof bounds / sizeof bounds[0]) };

static const nmse_bound *bound_for(const char *name) {
    for (int i = 0; i < NBOUNDS; i++)
        if (!strcmp(bounds[i].kind, name)) return &bounds[i];
    return NULL;
}

static void check_exact(const bp_kind_info *k) {
    bp_vec v;
    if (!bp_vec_load(&v, "quant", "BPQZ", k)) return;
    const size_t nb = v.a, n = nb * k->block_elems, bytes = nb * k->block_bytes;
    if (v.b != k->block_bytes || v.c != k->block_elems || nb == 0 || v.body_len != 4 * n + bytes) {
        CHECK(0, "%s: quant vector shape does not fit the table", k->name);
        bp_vec_free(&v);
        return;
    }
    float *x = malloc(n * sizeof *x);
    unsigned char *got = malloc(bytes + 1);
    if (!x || !got) abort();
    bp_vec_floats(v.body, x, n);
    memset(got, 0xEE, bytes + 1);
    /* Output at an odd address: quantizers must not assume alignment either. */
    CHECK_OK(bp_quantize((bp_kind)k->gguf_id, x, (int64_t)n, got + 1, bytes));
    const unsigned char *want = v.body + 4 * n;
    size_t bad = 0;
    for (size_t b = 0; b < nb; b++) {
        if (memcmp(got + 1 + b * k->block_bytes, want + b * k->block_bytes, k->block_bytes) == 0) continue;
        if (bad++ < 3) {
            size_t j = 0;
            while (got[1 + b * k->block_bytes + j] == want[b * k->block_bytes + j]) j++;
            fprintf(stderr, "  %s block %zu: first differing byte %zu: got 0x%02x, want 0x%02x\n", k->name, b, j,
                    got[1 + b * k->block_bytes + j], want[b * k->block_bytes + j]);
        }
    }
    CHECK(bad == 0, "%s: %zu of %zu blocks differ from %s", k->name, bad, nb, v.source);
    printf("quantize %-7s bit-exact vs %s: %s\n", k->name, v.source, bad ? "NO" : "yes");
    free(x);
    free(got);
    bp_vec_free(&v);
}

/* Gaussian-like (sum of 4 uniforms) values with a per-block magnitude spread over 1e-3..10. */
static void test_data(float *x, size_t n, size_t be, uint64_t *rng) {
    for (size_t b = 0; b < n / be; b++) {
        const float scale = powf(10.0f, -3.0f + 4.0f * (0.5f + 0.5f * bp_test_randf(rng)));
        for (size_t i = 0; i < be; i++) {
            float g = bp_test_randf(rng) + bp_test_randf(rng) + bp_test_randf(rng) + bp_test_randf(rng);
            x[b * be + i] = g * scale;
        }
        if (b == 1) x[b * be + be / 3] *= 30.0f; /* one outlier */
    }
}

static void check_round_trip(const bp_kind_info *k) {
    const nmse_bound *bd = bound_for(k->name);
    CHECK(bd != NULL, "%s: has a quantizer but neither tests/vectors/quant_%s.bin nor a row in bounds[]", k->name,
          k->name);
    if (!bd) return;
    const size_t be = k->block_elems, nb = be >= 256 ? 16 : 128, n = nb * be, bytes = nb * k->block_bytes;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    unsigned char *q = malloc(bytes);
    if (!x || !y || !q) abort();
    uint64_t rng = 0x1234567ull + k->gguf_id;
    test_data(x, n, be, &rng);
    CHECK_OK(bp_quantize((bp_kind)k->gguf_id, x, (int64_t)n, q, bytes));
    CHECK_OK(bp_dequantize((bp_kind)k->gguf_id, q, bytes, y, (int64_t)n));
    /* Per block NMSE too: every block must be reconstructed, not just the big ones. */
    double worst = 0;
    for (size_t b = 0; b < nb; b++) {
        double e = bp_test_nmse(y + b * be, x + b * be, be);
        if (!(e <= worst)) worst = e; /* NaN propagates */
    }
    const double nmse = bp_test_nmse(y, x, n);
    CHECK(nmse <= bd->max_nmse, "%s: round-trip NMSE %.3g over the bound %.3g", k->name, nmse, bd->max_nmse);
    CHECK(worst <= 4 * bd->max_nmse, "%s: worst block NMSE %.3g over 4x the bound %.3g", k->name, worst, bd->max_nmse);
    printf("quantize %-7s round trip NMSE %.3g (worst block %.3g, bound %.3g)\n", k->name, nmse, worst, bd->max_nmse);
    free(x);
    free(y);
    free(q);
}

static uint16_t u16_at(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static void check_q8_structure(void) {
    enum { N = 32 * 64 };
    float x[N];
    unsigned char q81[64 * 36], q80[64 * 34], q8k[8 * 292];
    uint64_t rng = 99;
    test_data(x, N, 32, &rng);
    CHECK_OK(bp_quantize(BP_KIND_Q8_1, x, N, q81, sizeof q81));
    CHECK_OK(bp_quantize(BP_KIND_Q8_0, x, N, q80, sizeof q80));
    for (int b = 0; b < 64; b++) {
        const unsigned char *p1 = q81 + 36 * b, *p0 = q80 + 34 * b;
        CHECK(!memcmp(p1, p0, 2) && !memcmp(p1 + 4, p0 + 2, 32), "Q8_1 block %d: d/qs differ from Q8_0's", b);
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += (int8_t)p1[4 + j];
        /* s = f16(d32 * sum) where d32 is d before its f16 rounding: within 2^-10 relative. */
        const double d = bp_f16_to_f32(u16_at(p1)), s = bp_f16_to_f32(u16_at(p1 + 2));
        CHECK(fabs(s - d * sum) <= fabs(d * sum) * 0x1p-9 + 1e-7, "Q8_1 block %d: s=%g, d*sum(q)=%g", b, s, d * sum);
    }
    CHECK_OK(bp_quantize(BP_KIND_Q8_K, x, N, q8k, sizeof q8k));
    for (int b = 0; b < 8; b++) {
        const unsigned char *p = q8k + 292 * b;
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += (int8_t)p[4 + 16 * g + j];
            const int16_t bs = (int16_t)u16_at(p + 260 + 2 * g);
            CHECK(bs == sum, "Q8_K block %d group %d: bsums %d, sum of quants %d", b, g, bs, sum);
        }
    }
}

/* Non-finite and huge inputs are user input too: every quantizer must return (no trap, no UB
 * that the sanitizer build catches); what it writes for them is not specified. */
static void check_nonfinite(const bp_kind_info *k) {
    float x[512];
    unsigned char q[1024];
    float y[512];
    const float specials[] = {NAN, INFINITY, -INFINITY, 3.0e38f, -3.0e38f, 1e-45f, 0.0f};
    for (size_t v = 0; v < sizeof specials / sizeof specials[0]; v++) {
        for (int i = 0; i < 512; i++) x[i] = (i % 7 == 3) ? specials[v] : 0.01f * (float)(i % 13 - 6);
        const int64_t n = 2 * (int64_t)k->block_elems;
        CHECK_OK(bp_quantize((bp_kind)k->gguf_id, x, n, q, sizeof q));
        CHECK_OK(bp_dequantize((bp_kind)k->gguf_id, q, sizeof q, y, n));
    }
}

int main(void) {
    int quantizers = 0, exact = 0, trip = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *k = bp_kind_at(i);
        const int has_vec = bp_vec_exists("quant", k->name);
        if (!k->can_quantize) {
            CHECK(!has_vec, "%s: quant vectors exist but the kind has no quantizer (QUANT=0 in backplane_kinds.def)", k->name);
            /* Valid buffers for one block: the only thing wrong is the missing quantizer. */
            static float zeros[256]; /* the largest block */
            static unsigned char out[1024];
            const bp_status s = bp_quantize((bp_kind)k->gguf_id, zeros, k->block_elems, out, sizeof out);
            CHECK(s == BP_E_KIND && bp_last_error()[0], "%s: bp_quantize without a quantizer -> %s, want BP_E_KIND",
                  k->name, bp_status_name(s));
            continue;
        }
        quantizers++;
        check_nonfinite(k);
        if (has_vec) exact++, check_exact(k);
        else trip++, check_round_trip(k);
    }
    for (int i = 0; i < NBOUNDS; i++) {
        const bp_kind_info *k = bp_kind_by_name(bounds[i].kind);
        CHECK(k && k->can_quantize, "bounds[] row %s names no kind with a quantizer", bounds[i].kind);
        CHECK(!bp_vec_exists("quant", bounds[i].kind), "bounds[] row %s: the kind has exact vectors; drop the row",
              bounds[i].kind);
    }
    check_q8_structure();
    printf("quantizers: %d (%d bit-exact vs the gguf package, %d round trip)\n", quantizers, exact, trip);
    return bp_test_finish();
}
