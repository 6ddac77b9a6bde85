/* backplane verify [--backend B] [--kind K] [--json] [--fallbacks]: every enabled backend (the
 * CPU included) against the CPU reference (bp_ref_matvec / bp_ref_gemm) for every weight kind
 * it claims, matvec and GEMM, on several shapes including odd ones (one row, one block, row
 * counts that are not a power of two). Prints NMSE per case and PASS/FAIL; exits 1 on any FAIL.
 *
 * Each case runs on the named backend only (bp_matvec_on / bp_gemm_on): a forced backend never
 * falls back, so a PASS is the backend's own kernel, never the CPU covering for it.
 *
 * Thresholds: the tolerance table, src/testing/tolerance.def (read through bp_tolerance_nmse):
 * 5e-4 NMSE for quantized kinds (kernels may quantize the activations to 8 bits,
 * as llama.cpp's do: about 1e-5 on these shapes, so 5e-4 leaves room without hiding a wrong
 * block layout, which gives NMSE near 1 or above). F32/F16/BF16 weights are exact values in
 * f32, so only summation order and f32 accumulation differ from the double-accumulating
 * reference: 1e-6.
 *
 * NMSE over a single output is the relative error of one dot product, which random signs can
 * make arbitrarily small (cancellation): a correct kernel with 8-bit activations then scores
 * 1e-3 or worse by chance. So every case pools at least MIN_OUTPUTS outputs: a case with fewer
 * (one row, batch one) repeats with fresh inputs, and "reps" in the report says how often. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "testing/testdata.h"
#include "testing/tolerance.h"
#include "verify_ops.h"
#include "seam/seam_internal.h"

enum { MIN_OUTPUTS = 32 };

typedef struct shape {
    int64_t rows, nblocks_idx, t; /* t == 0: matvec */
} shape;

/* Columns per shape as a block count, picked per block size so rows are 1-3 blocks (odd,
 * catching tail handling), a few blocks, or many. */
static int64_t cols_for(uint32_t be, int idx) {
    static const int64_t nb1[3] = {67, 256, 1001}, nb32[3] = {1, 7, 32}, nb64[3] = {1, 3, 8}, nb256[3] = {1, 3, 5};
    const int64_t *nb = be == 1 ? nb1 : be <= 32 ? nb32 : be < 256 ? nb64 : nb256;
    return nb[idx] * be;
}

static const shape shapes[] = {
    {1, 0, 0}, {7, 1, 0}, {33, 2, 0}, {64, 1, 0}, /* matvec */
    {7, 1, 2}, {33, 0, 5},                        /* gemm */
};

static uint64_t rng = 0x243F6A8885A308D3ull;
/* One generator, one weight maker, one NMSE, one tolerance table: the library's (src/core), the
 * same the tests use. */
static float randf(void) { return bp_rng_float(&rng); }

typedef struct tally {
    int cases, failed;
    bool json, first;
} tally;

static void emit(tally *tl, const char *backend, const char *kind, const shape *sh, int64_t cols, int reps,
                 double e, double thr, bool pass, const char *path, const char *err) {
    tl->cases++;
    if (!pass) tl->failed++;
    const char *op = sh->t ? "gemm" : "matvec";
    int64_t batch = sh->t ? sh->t : 1;
    if (tl->json) {
        printf("%s    {\"backend\": \"%s\", \"kind\": \"%s\", \"op\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
               "\"batch\": %lld, \"nmse\": ",
               tl->first ? "" : ",\n", backend, kind, op, (long long)sh->rows, (long long)cols, (long long)batch);
        if (isfinite(e)) printf("%.3e", e);
        else printf("null");
        printf(", \"threshold\": %.0e, \"reps\": %d, \"pass\": %s, \"path\": ", thr, reps, pass ? "true" : "false");
        bp_cli_json_str(stdout, path);
        if (err) {
            printf(", \"error\": ");
            bp_cli_json_str(stdout, err);
        }
        printf("}");
        tl->first = false;
    } else {
        printf("| %s | %s | %s | %lld | %lld | %lld | ", backend, kind, op, (long long)sh->rows, (long long)cols,
               (long long)batch);
        if (isfinite(e)) printf("%.3e", e);
        else printf("%s", err ? "error" : "nan");
        printf(" | %s | %s |\n", pass ? "PASS" : "FAIL", err ? err : path);
    }
}

/* All cases of one (backend, kind). */
static int run_kind(tally *tl, const char *backend, const bp_kind_info *ki) {
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *sh = &shapes[si];
        const double thr = bp_tolerance_nmse(ki->kind, sh->t ? "gemm" : "matvec");
        int64_t cols = cols_for(ki->block_elems, (int)sh->nblocks_idx), t = sh->t ? sh->t : 1;
        int64_t per = t * sh->rows;
        int reps = (int)((MIN_OUTPUTS + per - 1) / per);
        size_t bytes = 0;
        uint8_t *data = bp_random_weight(ki->kind, sh->rows, cols, &rng, &bytes);
        float *x = malloc((size_t)(t * cols) * sizeof *x), *ref = malloc((size_t)(reps * per) * sizeof *ref),
              *got = malloc((size_t)(reps * per) * sizeof *got);
        bp_weight *w = NULL;
        if (!data || !x || !ref || !got) {
            free(data), free(x), free(ref), free(got);
            fprintf(stderr, "backplane verify: out of memory\n");
            return 1;
        }
        bp_status s = thr > 0 ? BP_OK : BP_E_NOT_FOUND; /* no tolerance row: a FAIL, never a pass */
        if (!s) s = bp_weight_create(ki->kind, data, bytes, sh->rows, cols, &w);
        bool ran = false;
        for (int r = 0; r < reps && !s; r++) {
            float *rr = ref + r * per, *gg = got + r * per;
            for (int64_t i = 0; i < t * cols; i++) x[i] = randf();
            s = sh->t ? bp_ref_gemm(ki->kind, data, bytes, sh->rows, cols, x, t, rr)
                      : bp_ref_matvec(ki->kind, data, bytes, sh->rows, cols, x, rr);
            if (s) break;
            for (int64_t i = 0; i < per; i++) gg[i] = NAN; /* a kernel that writes nothing fails */
            s = sh->t ? bp_gemm_on(w, backend, x, t, gg) : bp_matvec_on(w, backend, x, gg);
            ran = !s;
        }
        if (s) emit(tl, backend, ki->name, sh, cols, reps, NAN, thr, false, "", bp_last_error());
        else if (ran) {
            double e = bp_nmse(got, ref, (size_t)(reps * per));
            emit(tl, backend, ki->name, sh, cols, reps, e, thr, e <= thr, bp_weight_last_path(w), NULL);
        }
        bp_weight_free(w);
        free(data), free(x), free(ref), free(got);
    }
    return 0;
}

/* --rows/--cols/--batch: one shape, matvec and (batch > 1) GEMM. A large weight is made of a
 * 251-row pattern repeated (quantizing 58M floats per kind would take minutes; 251 is prime, so
 * a kernel reading the wrong row still disagrees), and the reference is computed for 64 rows
 * spread over the matrix (the first, the last, and a stride between) -- every output of those
 * rows, all t tokens. */
enum { PATTERN_ROWS = 251, SAMPLE_ROWS = 64 };

static int run_shape(tally *tl, const char *backend, const bp_kind_info *ki, int64_t rows, int64_t cols, int64_t t) {
    double thr = bp_tolerance_nmse(ki->kind, "matvec");
    if (cols % ki->block_elems) return 0; /* the shape is not a whole number of this kind's blocks */
    size_t rb;
    if (bp_kind_row_bytes(ki->kind, cols, &rb)) return bp_cli_error("verify", BP_E_SHAPE);
    const int64_t prow = rows < PATTERN_ROWS ? rows : PATTERN_ROWS;
    const int64_t ns = rows < SAMPLE_ROWS ? rows : SAMPLE_ROWS;
    uint8_t *data = malloc(rb * (size_t)rows), *sub = malloc(rb * (size_t)ns);
    float *x = malloc(sizeof(float) * (size_t)(t * cols)), *y = malloc(sizeof(float) * (size_t)(t * rows));
    float *ref = malloc(sizeof(float) * (size_t)(t * ns)), *got = malloc(sizeof(float) * (size_t)(t * ns));
    int64_t *pick = malloc(sizeof(int64_t) * (size_t)ns);
    bp_weight *w = NULL;
    int rc = 0;
    if (!data || !sub || !x || !y || !ref || !got || !pick) {
        fprintf(stderr, "backplane verify: out of memory for %lld x %lld, batch %lld\n", (long long)rows, (long long)cols,
                (long long)t);
        rc = 1;
        goto out;
    }
    size_t pb = 0;
    uint8_t *pat = bp_random_weight(ki->kind, prow, cols, &rng, &pb);
    bp_status s = pat ? BP_OK : BP_E_NOMEM;
    if (pat) memcpy(data, pat, pb);
    free(pat);
    for (int64_t r = prow; r < rows && !s; r++) memcpy(data + (size_t)r * rb, data + (size_t)(r % prow) * rb, rb);
    for (int64_t i = 0; i < ns; i++) {
        pick[i] = ns == 1 ? 0 : i * (rows - 1) / (ns - 1);
        memcpy(sub + (size_t)i * rb, data + (size_t)pick[i] * rb, rb);
    }
    for (int64_t i = 0; i < t * cols; i++) x[i] = randf();
    if (!s) s = bp_weight_create(ki->kind, data, rb * (size_t)rows, rows, cols, &w);
    for (int op = 0; op < 2 && !s; op++) {
        const int64_t tt = op ? t : 1;
        if (op && t < 2) break;
        const shape sh = {rows, 0, op ? t : 0};
        thr = bp_tolerance_nmse(ki->kind, op ? "gemm" : "matvec");
        for (int64_t i = 0; i < t * rows; i++) y[i] = NAN;
        s = tt > 1 ? bp_ref_gemm(ki->kind, sub, rb * (size_t)ns, ns, cols, x, tt, ref)
                   : bp_ref_matvec(ki->kind, sub, rb * (size_t)ns, ns, cols, x, ref);
        if (!s) s = tt > 1 ? bp_gemm_on(w, backend, x, tt, y) : bp_matvec_on(w, backend, x, y);
        if (s) {
            emit(tl, backend, ki->name, &sh, cols, 1, NAN, thr, false, "", bp_last_error());
            s = BP_OK; /* reported; go on with the next case */
            continue;
        }
        for (int64_t j = 0; j < tt; j++)
            for (int64_t i = 0; i < ns; i++) got[j * ns + i] = y[j * rows + pick[i]];
        const double e = bp_nmse(got, ref, (size_t)(tt * ns));
        emit(tl, backend, ki->name, &sh, cols, 1, e, thr, e <= thr, bp_weight_last_path(w), NULL);
    }
    if (s) emit(tl, backend, ki->name, &(shape){rows, 0, 0}, cols, 1, NAN, thr, false, "", bp_last_error());
out:
    bp_weight_free(w);
    free(data), free(sub), free(x), free(y), free(ref), free(got), free(pick);
    return rc;
}

static int usage(int rc) {
    fprintf(rc ? stderr : stdout,
            "usage: backplane verify [--backend B] [--kind K] [--seed N] [--json] [--fallbacks] [--profile]\n"
            "  every enabled backend (cpu included) against the CPU reference, for every weight kind it\n"
            "  claims, matvec and gemm on several shapes; NMSE per case; exit status 1 on any FAIL\n"
            "  --backend B  only B (cuda, metal, vulkan, opencl, cpu)\n"
            "  --kind K     only kind K (Q4_K, IQ4_XS, ...)\n"
            "  --seed N     random weights and inputs from seed N (default fixed: runs repeat exactly)\n"
            "  --rows R --cols C [--batch T]  one shape instead of the built-in set: matvec, and GEMM at\n"
            "               batch T (> 1); large weights repeat a 251-row pattern and the reference is\n"
            "               computed for 64 rows spread over the matrix (e.g. 14336 x 4096, T = 512)\n"
            "  --strict     a fallback is an error (each case runs on its backend only: none falls back)\n"
            "  a CPU implementation (lavapipe, PoCL) is verified when forced on: BACKPLANE_VULKAN=1 ...\n"
            "       backplane verify MODEL.gguf [-f TEXT | --peer FILE] [--backend B ...] [--ctx N] [--kv-kind K] [--max-kl X] [--json]\n"
            "  the model over a text on each backend against the CPU reference path: KL divergence, top-1\n"
            "  agreement, perplexity, non-finite logits (backplane verify MODEL.gguf --help)\n");
    return rc;
}

/* A MODEL.gguf argument makes it the model-level verify (verify_model.c). */
static bool model_mode(int argc, char **argv) {
    static const char *const takes_value[] = {"--rows", "--cols", "--batch", "--backend", "--kind", "--seed",
                                              "-f", "--ctx", "--kv-kind", "--max-kl"};
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        bool value = false;
        for (size_t j = 0; j < sizeof takes_value / sizeof takes_value[0]; j++) value |= !strcmp(argv[i - 1], takes_value[j]);
        if (!value) return true;
    }
    return false;
}

int bp_cmd_verify(int argc, char **argv) {
    if (model_mode(argc, argv)) return bp_cmd_verify_model(argc, argv);
    bp_cli_take_fallbacks(&argc, argv);
    bp_cli_take_strict(&argc, argv);
    bp_cli_take_profile(&argc, argv);
    const char *only_backend = NULL, *only_kind = NULL;
    tally tl = {0, 0, false, true};
    int64_t srows = 0, scols = 0, sbatch = 1;
    for (int i = 1; i < argc; i++) {
        int64_t *dst = !strcmp(argv[i], "--rows") ? &srows : !strcmp(argv[i], "--cols") ? &scols
                     : !strcmp(argv[i], "--batch") ? &sbatch : NULL;
        if (dst) {
            char *end = NULL;
            long long v = i + 1 < argc ? strtoll(argv[i + 1], &end, 10) : 0;
            if (!end || *end || v < 1 || v > (1LL << 24)) {
                fprintf(stderr, "backplane verify: %s needs a positive integer\n", argv[i]);
                return usage(2);
            }
            *dst = v;
            i++;
        } else if (!strcmp(argv[i], "--json")) tl.json = true;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) only_backend = argv[++i];
        else if (!strcmp(argv[i], "--kind") && i + 1 < argc) only_kind = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            unsigned long long seed;
            if (!bp_cli_u64("verify", "--seed", argv[++i], &seed)) return usage(2);
            rng = seed * 0x9E3779B97F4A7C15ull + 0x243F6A8885A308D3ull;
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(0);
        else {
            fprintf(stderr, "backplane verify: unknown option '%s'\n", argv[i]);
            return usage(2);
        }
    }
    if (!srows != !scols) {
        fprintf(stderr, "backplane verify: --rows and --cols go together\n");
        return usage(2);
    }
    if (only_kind) {
        const bp_kind_info *ki = bp_kind_by_name(only_kind);
        if (!ki) return bp_cli_error("verify --kind", BP_E_KIND);
        if (ki->role != BP_ROLE_W) {
            fprintf(stderr, "backplane verify: %s is not a weight kind\n", only_kind);
            return 2;
        }
    }
    if (bp_cli_dry_run) return 0; /* the CLI fuzz target: parsing only */
    int n = bp_seam_slot_count();
    if (only_backend && strcmp(only_backend, "cpu")) {
        int i = bp_seam_slot_find(only_backend);
        const char *reason = "";
        if (i < 0) {
            fprintf(stderr, "backplane verify: no backend called '%s'\n", only_backend);
            return 2;
        }
        if (!bp_seam_slot_enabled(i, &reason)) {
            fprintf(stderr, "backplane verify: %s is not enabled here: %s\n", only_backend, reason);
            return 1;
        }
    }
    if (tl.json) printf("{\n  \"results\": [\n");
    else printf("| backend | kind | op | rows | cols | batch | nmse | result | path |\n|---|---|---|---:|---:|---:|---:|---|---|\n");
    for (int b = 0; b <= n; b++) {
        const bp_seam_slot *s = b < n ? bp_seam_slot_at(b) : NULL;
        const char *name = s ? s->caps->name : "cpu";
        if (only_backend && strcmp(only_backend, name)) continue;
        if (s && !bp_seam_slot_enabled(b, NULL)) continue;
        for (int k = 0; k < bp_kind_table_size(); k++) {
            const bp_kind_info *ki = bp_kind_at(k);
            if (ki->role != BP_ROLE_W || (only_kind && strcmp(only_kind, ki->name))) continue;
            if ((!s || s->caps->kernel(BP_OP_MATVEC, ki->kind)) &&
                (srows ? run_shape(&tl, name, ki, srows, scols, sbatch) : run_kind(&tl, name, ki)))
                return 1;
            if (srows) continue; /* one shape asked for: matvec and GEMM only */
            /* conv2d and MoE (verify_conv_moe.c), by the backend's op claims */
            bp_verify_rows vr = {.json = tl.json, .first = tl.first};
            bp_verify_conv_moe(&vr, name, s ? s->caps : NULL, ki);
            tl.first = vr.first, tl.cases += vr.cases, tl.failed += vr.failed;
        }
    }
    if (tl.json) printf("\n  ],\n");
    /* Ops (verify_ops.c): attention over every KV kind and the row ops, per backend. */
    int op_failed = 0;
    tl.cases += bp_verify_ops(tl.json, only_backend, only_kind, &op_failed);
    tl.failed += op_failed;
    if (tl.json) printf("  \"cases\": %d,\n  \"failed\": %d\n}\n", tl.cases, tl.failed);
    else printf("\n%d cases, %d failed: %s\n", tl.cases, tl.failed, tl.failed ? "FAIL" : "PASS");
    bp_cli_print_profile();
    bp_cli_print_fallbacks();
    return tl.failed ? 1 : 0;
}

/* ---- for verify_conv_moe.c (declared in cli_common.h): one RNG (--seed applies), one NMSE --- */
float bp_verify_randf(void) { return randf(); }
double bp_verify_nmse(const float *got, const float *ref, size_t n) { return bp_nmse(got, ref, n); }
