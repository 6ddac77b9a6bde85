/* backplane verify, the conv2d and MoE part: for one backend and weight kind, every conv2d row
 * (conv2d, conv2d_gn, conv2d_ln) and moe the backend claims (the CPU: all) on small odd
 * shapes, run on that backend only (bp_conv2d_on / bp_moe_run_on: a forced backend never
 * falls back, so a PASS is its own kernel) against the float64 references ("cpu-ref").
 *
 * Thresholds: conv2d as matvec (1e-6 exact-float weights, 5e-4 quantized); MoE 1e-6 / 2e-3:
 * the down projection's input silu(g) * u is heavy-tailed, so its 8-bit rounding costs up to
 * ~7e-4 (tests/test_moe_vectors.c measures it); a wrong expert or route scores 0.1 or more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "testing/tolerance.h"
#include "ops/conv2d_internal.h"
#include "ops/moe_internal.h"
#include "seam/seam_internal.h"

static void row(bp_verify_rows *out, const char *backend, const char *kind, const char *op, int64_t rows, int64_t cols,
                int64_t batch, double e, double thr, const char *path, const char *err) {
    bool pass = !err && e <= thr;
    out->cases++;
    out->failed += !pass;
    if (out->json) {
        printf("%s    {\"backend\": \"%s\", \"kind\": \"%s\", \"op\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
               "\"batch\": %lld, \"nmse\": ",
               out->first ? "" : ",\n", backend, kind, op, (long long)rows, (long long)cols, (long long)batch);
        if (isfinite(e) && !err) printf("%.3e", e);
        else printf("null");
        printf(", \"threshold\": %.0e, \"reps\": 1, \"pass\": %s, \"path\": ", thr, pass ? "true" : "false");
        bp_cli_json_str(stdout, err ? "" : path);
        if (err) {
            printf(", \"error\": ");
            bp_cli_json_str(stdout, err);
        }
        printf("}");
        out->first = false;
        return;
    }
    printf("| %s | %s | %s | %lld | %lld | %lld | ", backend, kind, op, (long long)rows, (long long)cols, (long long)batch);
    if (err) printf("error");
    else printf("%.3e", e);
    printf(" | %s | %s |\n", pass ? "PASS" : "FAIL", err ? err : path);
}

static bool claims(const bp_backend_caps *caps, bp_op op, bp_kind k) {
    return !caps || caps->kernel(op, k);
}

static bp_status weights(const bp_kind_info *ki, int64_t rows, int64_t cols, uint8_t **data, size_t *bytes) {
    size_t rb;
    bp_status s = bp_kind_row_bytes(ki->kind, cols, &rb);
    if (s) return s;
    *bytes = rb * (size_t)rows;
    *data = malloc(*bytes);
    return *data ? bp_bench_fill_weights(ki, rows, cols, rb, *data) : BP_E_NOMEM;
}

static void conv_cases(bp_verify_rows *out, const char *backend, const bp_backend_caps *caps, const bp_kind_info *ki) {
    static const struct {
        bp_conv_norm norm;
        int64_t h, w, k, stride, groups;
        bool silu;
    } cases[] = {
        {BP_CONV_NORM_NONE, 7, 5, 3, 1, 0, false},
        {BP_CONV_NORM_GROUP, 9, 7, 3, 2, 4, true},
        {BP_CONV_NORM_LAYER, 5, 9, 1, 1, 0, true},
    };
    int64_t cin = ki->block_elems > 32 ? ki->block_elems : 32, cout = 5;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bp_conv2d_params p = {.h = cases[i].h, .w = cases[i].w, .cin = cin, .cout = cout, .k = cases[i].k,
                              .stride = cases[i].stride, .norm = cases[i].norm, .groups = cases[i].groups,
                              .eps = 1e-5f, .silu = cases[i].silu};
        bp_op op = bp_conv2d_op_of(&p);
        if (!claims(caps, op, ki->kind)) continue;
        int64_t oh = 0, ow = 0, cols = p.k * p.k * cin;
        bp_conv2d_out_size(&p, &oh, &ow);
        uint8_t *data = NULL;
        size_t bytes = 0;
        bp_weight *w = NULL;
        size_t nx = (size_t)(p.h * p.w * cin), ny = (size_t)(oh * ow * cout);
        float *x = malloc(sizeof(float) * nx), *gb = malloc(sizeof(float) * 2 * (size_t)cin);
        float *ref = malloc(sizeof(float) * ny), *got = malloc(sizeof(float) * ny);
        bp_status s = x && gb && ref && got ? weights(ki, cout, cols, &data, &bytes) : BP_E_NOMEM;
        if (!s) s = bp_weight_create(ki->kind, data, bytes, cout, cols, &w);
        if (!s) {
            for (size_t j = 0; j < nx; j++) x[j] = bp_verify_randf() + 0.25f;
            for (int64_t j = 0; j < 2 * cin; j++) gb[j] = (j < cin) + 0.3f * bp_verify_randf();
            if (p.norm) p.gamma = gb, p.beta = gb + cin;
            for (size_t j = 0; j < ny; j++) got[j] = NAN;
            s = bp_conv2d_on(w, "cpu-ref", &p, x, ref);
        }
        if (!s) s = bp_conv2d_on(w, backend, &p, x, got);
        double thr = bp_tolerance_nmse(ki->kind, bp_op_name(op)); /* src/testing/tolerance.def */
        row(out, backend, ki->name, bp_op_name(op), cout, cols, oh * ow, s ? NAN : bp_verify_nmse(got, ref, ny), thr,
            bp_op_last_path(bp_op_name(op)), s ? bp_last_error() : NULL);
        bp_weight_free(w);
        free(data), free(x), free(gb), free(ref), free(got);
    }
}

static void rotate_rows(uint8_t *m, size_t bytes, int64_t rows, int64_t by) {
    size_t rb = bytes / (size_t)rows, cut = rb * (size_t)(by % rows);
    uint8_t *tmp = malloc(cut);
    if (!tmp) return;
    memcpy(tmp, m, cut);
    memmove(m, m + cut, bytes - cut);
    memcpy(m + bytes - cut, tmp, cut);
    free(tmp);
}

static void moe_cases(bp_verify_rows *out, const char *backend, const bp_backend_caps *caps, const bp_kind_info *ki) {
    if (!claims(caps, BP_OP_MOE, ki->kind)) return;
    enum { E = 4, K = 2, T = 7 };
    int64_t h = ki->block_elems > 64 ? ki->block_elems : 64, inter = ki->block_elems > 32 ? ki->block_elems : 32;
    uint8_t *gu[E] = {0}, *dn[E] = {0};
    const void *gp[E], *dp[E];
    size_t gs[E], ds[E];
    bp_status s = BP_OK;
    for (int e = 0; e < E && !s; e++) {
        s = weights(ki, 2 * inter, h, &gu[e], &gs[e]);
        if (!s) s = weights(ki, h, inter, &dn[e], &ds[e]);
        gp[e] = gu[e], dp[e] = dn[e];
    }
    /* The bench fill is the same for every call: rotate expert e's rows by 7e so experts differ. */
    for (int e = 1; e < E && !s; e++) {
        rotate_rows(gu[e], gs[e], 2 * inter, 7 * e);
        rotate_rows(dn[e], ds[e], h, 7 * e);
    }
    bp_moe *m = NULL;
    if (!s) s = bp_moe_upload(E, h, inter, ki->kind, gp, gs, ki->kind, dp, ds, &m);
    float x[T * 256], ref[T * 256], got[T * 256], rw[T * K];
    int32_t ids[T * K];
    for (int64_t t = 1; t <= T && !s; t += T - 1) {
        for (int64_t i = 0; i < t * h; i++) x[i] = bp_verify_randf(), ref[i] = got[i] = 0.0f;
        for (int64_t i = 0; i < t * K; i++) ids[i] = (int32_t)((i * 3 + t) % E), rw[i] = 0.5f + 0.5f * bp_verify_randf();
        bp_status st = bp_moe_run_on(m, "cpu-ref", x, t, K, ids, rw, ref);
        if (!st) st = bp_moe_run_on(m, backend, x, t, K, ids, rw, got);
        double thr = bp_tolerance_nmse(ki->kind, "moe"); /* src/testing/tolerance.def */
        row(out, backend, ki->name, "moe", h, inter, t, st ? NAN : bp_verify_nmse(got, ref, (size_t)(t * h)), thr,
            bp_moe_last_path(m), st ? bp_last_error() : NULL);
    }
    if (s) row(out, backend, ki->name, "moe", h, inter, 0, NAN, 0, "", bp_last_error());
    bp_moe_free(m);
    for (int e = 0; e < E; e++) free(gu[e]), free(dn[e]);
}

void bp_verify_conv_moe(bp_verify_rows *out, const char *backend, const bp_backend_caps *caps,
                        const bp_kind_info *ki) {
    conv_cases(out, backend, caps, ki);
    moe_cases(out, backend, caps, ki);
}
