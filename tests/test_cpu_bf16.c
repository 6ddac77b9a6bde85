/* BF16 weights at t >= 2 outside exact mode on CPUs with AVX512_BF16 (avx512/bf16_dot.c): the
 * activations are rounded to bf16 once per call and multiplied with vdpbf16ps. Checked here:
 * - the rounding, value by value against bp_f32_to_bf16 (the gguf package's round to nearest
 *   even; f32 denormals to a signed zero, as vcvtne2ps2bf16 does): ties, the largest finite
 *   values, Inf, NaN, denormals, random bit patterns, and the zero padding after the row;
 * - which kernel runs, from this test's own CPUID read: by default the vdpbf16ps kernels at
 *   t >= 2 only on AMD CPUs with AVX512_BF16 (cpu.c says why); forced on (bp_cpu_set_bf16_dot)
 *   for every check below wherever the CPU has AVX512_BF16 (skipped loudly where it has not;
 *   then the exact kernels must run), never at t = 1, never in exact mode --
 *   bp_cpu_kernel_name and bp_weight_last_path alike;
 * - the results against two float64 references (bp_ref_gemm) over odd shapes (columns not a
 *   multiple of 32, odd columns where the last pair is half, rows past whole panels, more than
 *   one GEMM depth block) and batches on both sides of the tile / GEMM crossover: against the
 *   reference on x as given, within the tolerance table's BF16 gemm bound (the rounding's own
 *   error); against the reference on x rounded by bp_f32_to_bf16, within the FLOAT bound (only
 *   f32 summation may differ: a wrong rounding -- truncation, say -- fails this by 10x);
 * - exact mode (bp_set_exact_mode(true), read per call) at the FLOAT bound;
 * - the batched jobs (cpu_jobs.c) equal the single-weight calls bit for bit, tile and GEMM;
 * - Inf and NaN in x give the reference's non-finite pattern. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testing/tolerance.h"
#include "cpu/cpu_internal.h"
#include "cpu/cpu_jobs.h"
#include "harness.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
/* AVX512_BF16: CPUID leaf 7 subleaf 1, EAX bit 5 (read here, not taken from the library). */
static bool cpuid_avx512bf16(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return false;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return a & (1u << 5);
}
/* CPUID leaf 0's vendor string "AuthenticAMD" (read here, not taken from the library). */
static bool cpuid_amd(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    return !memcmp(&b, "Auth", 4) && !memcmp(&d, "enti", 4) && !memcmp(&c, "cAMD", 4);
}
#else
static bool cpuid_avx512bf16(void) { return false; }
static bool cpuid_amd(void) { return false; }
#endif

/* A float's bits and back (a union: C11 reads the other member as the same bytes). */
typedef union fbits {
    float f;
    uint32_t u;
} fbits;
static uint32_t bits(float f) { return (fbits){.f = f}.u; }
static float from_bits(uint32_t u) { return (fbits){.u = u}.f; }

/* The rounding the kernels must do: bp_f32_to_bf16, except that f32 denormals become a zero of
 * their sign (vcvtne2ps2bf16 and vdpbf16ps treat denormal inputs as zero). */
static uint16_t want_bf16(float f) {
    const uint32_t u = bits(f);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    return bp_f32_to_bf16(f);
}

static void check_rounding(const bp_cpu_ops *ops) {
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x80800000u, /* zeros, denormals, min normal */
        0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f80ffffu, 0xbf818000u, /* ties to even (down, up), above */
        0x7f7fffffu, 0xff7fffffu, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7e8000u,             /* max finite -> Inf (RNE), below it */
        0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu, 0xff80ffffu, /* Inf, NaNs */
    };
    enum { N = 1000 };
    const int nspecial = (int)(sizeof special / sizeof special[0]);
    float *x = malloc(sizeof(float) * N);
    uint64_t rng = 0x5eed;
    for (int n = 1; n <= N; n = n < 70 ? n + 1 : n * 3 + 1) { /* every tail length, then wider rows */
        for (int i = 0; i < n; i++) x[i] = i < nspecial ? from_bits(special[i]) : from_bits((uint32_t)bp_test_rand(&rng));
        const size_t ab = bp_cpu_bf16_act_bytes(n);
        CHECK(ab >= (size_t)(2 * n) && ab % 64 == 0 && ab % 1024 != 0, "n=%d: act bytes %zu", n, ab);
        uint16_t *q = aligned_alloc(64, ab);
        memset(q, 0xa5, ab);
        ops->quant[BP_ACT_BF16](x, n, q);
        int bad = 0;
        for (int i = 0; i < n; i++)
            if (q[i] != want_bf16(x[i]) && bad++ < 3)
                CHECK(false, "n=%d: x[%d] = 0x%08x rounds to 0x%04x, want 0x%04x", n, i, bits(x[i]), q[i], want_bf16(x[i]));
        CHECK(!bad, "n=%d: %d values rounded wrongly", n, bad);
        int pad = 0;
        for (size_t i = (size_t)n; i < ab / 2; i++) pad += q[i] != 0;
        CHECK(!pad, "n=%d: %d padding values are not zero", n, pad);
        free(q);
    }
    free(x);
}

typedef struct shape {
    int64_t rows, cols;
} shape;

/* x rounded as the kernels round it, back to f32: the second reference's input. */
static void round_x(const float *x, float *xr, int64_t n) {
    for (int64_t i = 0; i < n; i++) xr[i] = bp_bf16_to_f32(want_bf16(x[i]));
}

static void check_products(bool have) {
    const shape shapes[] = {
        {37, 1},     /* one column: one half pair */
        {3, 33},     /* one whole zmm of pairs and a half pair; rows under a tile */
        {35, 37},    /* odd columns, rows past whole tiles and panels */
        {21, 1100},  /* columns not a multiple of 32 past 2 KB column blocks */
        {45, 1027},  /* odd, three GEMM depth blocks (512 + 512 + 3); 32 + 13 rows */
        {50, 768},   /* whole blocks */
        {19, 4096},  /* a model-sized row */
    };
    const int64_t batches[] = {2, 3, 4, 5, 7, 8, 9, 16, 17, 32, 33, 64, 100, 512};
    const int64_t tmax = 512;
    const double tol_round = bp_test_tolerance(BP_KIND_BF16, "gemm"), tol_float = bp_test_tolerance(BP_KIND_F32, "gemm");
    const bool quick = bp_test_quick();
    uint64_t rng = 0xbf16bf16ull;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t rows = shapes[si].rows, cols = shapes[si].cols;
        if (quick && cols == 4096) continue;
        size_t rb, wbytes;
        CHECK_OK(bp_kind_row_bytes(BP_KIND_BF16, cols, &rb));
        uint8_t *w = bp_test_make_weight(BP_KIND_BF16, rows, cols, &rng, &wbytes);
        float *x = malloc(sizeof(float) * (size_t)(tmax * cols)), *xr = malloc(sizeof(float) * (size_t)(tmax * cols));
        float *ref = malloc(sizeof(float) * (size_t)(tmax * rows)), *refr = malloc(sizeof(float) * (size_t)(tmax * rows));
        float *got = malloc(sizeof(float) * (size_t)(tmax * rows)), *got2 = malloc(sizeof(float) * (size_t)(2 * tmax * rows));
        for (int64_t i = 0; i < tmax * cols; i++) x[i] = bp_test_randf(&rng);
        round_x(x, xr, tmax * cols);
        bp_weight *wt = NULL, *wt2 = NULL;
        CHECK_OK(bp_weight_create(BP_KIND_BF16, w, wbytes, rows, cols, &wt));
        CHECK_OK(bp_weight_create(BP_KIND_BF16, w, wbytes, rows, cols, &wt2));
        for (size_t bi = 0; wt && wt2 && bi < sizeof batches / sizeof batches[0]; bi++) {
            const int64_t t = batches[bi];
            if (quick && t != 5 && t != 100) continue;
            const size_t ny = (size_t)(t * rows);
            CHECK_OK(bp_ref_gemm(BP_KIND_BF16, w, wbytes, rows, cols, x, t, ref));
            CHECK_OK(bp_ref_gemm(BP_KIND_BF16, w, wbytes, rows, cols, xr, t, refr));
            for (int exact = 0; exact < 2; exact++) {
                bp_set_exact_mode(exact);
                const char *kn = bp_cpu_kernel_name(BP_KIND_BF16, t);
                const bool dp = strstr(kn, "vdpbf16ps") != NULL;
                CHECK(dp == (have && !exact), "%lldx%lld t=%lld%s: ran %s (AVX512_BF16 %s)", (long long)rows,
                      (long long)cols, (long long)t, exact ? " exact mode" : "", kn, have ? "present" : "absent");
                CHECK(dp == (strstr(kn, "rounded to bf16") != NULL), "%s: says vdpbf16ps and rounding together", kn);
                for (size_t i = 0; i < ny; i++) got[i] = NAN;
                /* Through the seam, on the CPU: bp_weight_last_path names what ran. */
                CHECK_OK(bp_gemm_on(wt, "cpu", x, t, got));
                CHECK(!strcmp(bp_weight_last_path(wt), kn), "t=%lld: last path '%s', kernel name '%s'", (long long)t,
                      bp_weight_last_path(wt), kn);
                const double e = bp_test_nmse(got, ref, ny), er = bp_test_nmse(got, refr, ny);
                const double bound = dp ? tol_round : tol_float;
                CHECK(e <= bound, "%lldx%lld t=%lld [%s]: NMSE %.3g > %.3g", (long long)rows, (long long)cols, (long long)t,
                      kn, e, bound);
                if (dp)
                    CHECK(er <= tol_float, "%lldx%lld t=%lld [%s]: NMSE %.3g > %.3g against x rounded to bf16 (the rounding is wrong)",
                          (long long)rows, (long long)cols, (long long)t, kn, er, tol_float);
                if (getenv("BP_TEST_VERBOSE"))
                    fprintf(stderr, "BF16 %4lldx%-5lld t=%-3lld NMSE %.2e, against rounded x %.2e  %s\n", (long long)rows,
                            (long long)cols, (long long)t, e, er, kn);
                /* Two weights in one submission (cpu_jobs.c): each equal to its own call. */
                bp_matmul_job jobs[2] = {{wt, got2}, {wt2, got2 + ny}};
                char label[256];
                CHECK_OK(bp_cpu_jobs(x, t, jobs, 2, label, sizeof label));
                CHECK(!memcmp(got2, got, sizeof(float) * ny) && !memcmp(got2 + ny, got, sizeof(float) * ny),
                      "%lldx%lld t=%lld [%s]: batched jobs differ from the single call", (long long)rows, (long long)cols,
                      (long long)t, label);
            }
            bp_set_exact_mode(false);
            /* Decode stays on the exact kernel in both modes. */
            const char *k1 = bp_cpu_kernel_name(BP_KIND_BF16, 1);
            CHECK(!strstr(k1, "vdpbf16ps") && !strstr(k1, "rounded"), "t=1 runs %s", k1);
        }
        bp_weight_free(wt);
        bp_weight_free(wt2);
        free(w), free(x), free(xr), free(ref), free(refr), free(got), free(got2);
    }
}

/* Inf and NaN in x reach the products as Inf and NaN (the seam sends such calls to the
 * reference, but bp_cpu_gemm is a library entry of its own). */
static void check_nonfinite(void) {
    const int64_t rows = 40, cols = 100;
    uint64_t rng = 7;
    size_t wbytes;
    uint8_t *w = bp_test_make_weight(BP_KIND_BF16, rows, cols, &rng, &wbytes);
    bp_weight *wt = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_BF16, w, wbytes, rows, cols, &wt));
    const int64_t ts[] = {5, 100};
    for (int k = 0; wt && k < 2; k++) {
        const int64_t t = ts[k];
        float *x = malloc(sizeof(float) * (size_t)(t * cols)), *ref = malloc(sizeof(float) * (size_t)(t * rows)),
              *got = malloc(sizeof(float) * (size_t)(t * rows));
        for (int64_t i = 0; i < t * cols; i++) x[i] = bp_test_randf(&rng);
        x[0 * cols + 3] = INFINITY;
        x[1 * cols + 99] = -INFINITY;
        x[2 * cols + 50] = NAN;
        x[3 * cols + 7] = FLT_MAX; /* finite, past bf16's largest (3.39e38): RNE makes it Inf */
        CHECK_OK(bp_ref_gemm(BP_KIND_BF16, w, wbytes, rows, cols, x, t, ref));
        CHECK_OK(bp_cpu_gemm(wt, x, t, got));
        int bad = 0;
        for (int64_t j = 0; j < t; j++)
            for (int64_t r = 0; r < rows; r++) {
                const float g = got[j * rows + r], f = ref[j * rows + r];
                const bool ok = j == 3 ? isinf(g) : isnan(f) ? isnan(g) : isinf(f) ? g == f : isfinite(g);
                bad += !ok;
            }
        CHECK(!bad, "t=%lld: %d outputs with the wrong non-finite pattern", (long long)t, bad);
        free(x), free(ref), free(got);
    }
    bp_weight_free(wt);
    free(w);
}

int main(void) {
    bp_cpu_set_min_parallel_bytes(0);
    CHECK_OK(bp_cpu_set_threads(2));
    const bool was = bp_exact_mode();
    const bool avx512 = bp_cpu_isa_current() == BP_CPU_ISA_AVX512;
    const bool have = avx512 && cpuid_avx512bf16();
    if (!have)
        fprintf(stderr, "test_cpu_bf16: SKIPPED the vdpbf16ps checks: %s; checking that the exact kernels run instead\n",
                avx512 ? "this CPU lacks AVX512_BF16 (CPUID 7.1 EAX bit 5)" : "the AVX-512 path is not in use here");
    else
        check_rounding(bp_cpu_ops_current());
    /* By default only AMD CPUs take the vdpbf16ps kernels (cpu.c says why): the library's answer,
     * the kernel it names and this test's own CPUID read must agree. */
    const bool used = bp_cpu_bf16_dot_used(), amd = cpuid_amd();
    CHECK(used == (have && amd), "bp_cpu_bf16_dot_used() = %d, AVX512_BF16 %d, AMD %d", used, have, amd);
    const char *k512 = bp_cpu_kernel_name(BP_KIND_BF16, 512);
    CHECK((strstr(k512, "vdpbf16ps") != NULL) == used, "t=512 runs %s, vdpbf16ps used: %d", k512, used);
    if (have && !amd)
        fprintf(stderr, "test_cpu_bf16: this CPU is not an AMD one: BF16 batches keep the exact kernels by default; "
                        "the vdpbf16ps kernels are checked here forced on\n");
    bp_cpu_set_bf16_dot(1); /* every check below: the vdpbf16ps kernels wherever the CPU has them */
    check_products(have);
    if (have) check_nonfinite();
    bp_cpu_set_bf16_dot(0);
    bp_set_exact_mode(was);
    return bp_test_finish();
}
