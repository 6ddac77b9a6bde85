/* y = W x for every tensor of tests/gguf/kinds.gguf (one 8 x 256 tensor per kind the gguf
 * package can write), read through our GGUF reader, against NumPy: W dequantized by the gguf
 * package, product in float64 (tests/gguf/kinds_y/, made by gen_gguf.py). Three paths:
 * bp_ref_matvec directly, the seam's choice (bp_matvec_on NULL) and the forced reference
 * ("cpu-ref"). Tolerances are relative to sum |W x| per row (kinds_y/<KIND>.scale.f32): the
 * reference accumulates in double, so 1e-6 of it leaves room only for float32 rounding of y.
 * The seam's choice may quantize x to 8 bits first (Q8_0/Q8_K activations, as llama.cpp does)
 * and accumulate in float32: rounding moves each x[c] by up to d/2 (d = max|x|/127), so y moves
 * by about sigma = |W row| * d / sqrt(12) (kinds_y/<KIND>.l2w.f32); its bound is 6 sigma plus
 * 2e-5 of sum |W x|. Measured on the CPU's q8 int-dot paths: at most 3.3 sigma (TQ2_0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { ROWS = 8, COLS = 256 };

static float *load(const char *path, size_t want) {
    size_t n = 0;
    float *p = bp_test_read_file(path, &n);
    if (p && n != want * sizeof(float)) {
        CHECK(0, "%s: %zu bytes, want %zu", path, n, want * sizeof(float));
        free(p);
        return NULL;
    }
    return p;
}

/* Number of rows off by more than tol * scale. */
static int compare(const char *kind, const char *path, const float *y, const float *ref, const float *scale,
                   double tol, const float *l2w, double q8_sigma) {
    int bad = 0;
    for (int r = 0; r < ROWS; r++) {
        double err = fabs((double)y[r] - ref[r]);
        double lim = tol * scale[r] + (l2w ? 6 * l2w[r] * q8_sigma : 0.0) + 1e-30;
        if (!(err <= lim)) {
            if (bad++ < 2)
                CHECK(0, "%s via %s: row %d: %.9g, NumPy %.9g (error %.3g, allowed %.3g)", kind, path, r, y[r],
                      ref[r], err, lim);
        }
    }
    return bad;
}

static int has_nan(const float *y) {
    for (int r = 0; r < ROWS; r++)
        if (isnan(y[r])) return 1;
    return 0;
}

int main(void) {
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open("tests/gguf/kinds.gguf", &f));
    float *x = load("tests/gguf/kinds_x.f32", COLS);
    if (!f || !x) {
        bp_gguf_close(f);
        free(x);
        return bp_test_finish();
    }
    double xmax = 0;
    for (int c = 0; c < COLS; c++) xmax = fmax(xmax, fabs(x[c]));
    int checked = 0;
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        const char *kind = t->kind_info->name;
        char path[256];
        snprintf(path, sizeof path, "tests/gguf/kinds_y/%s.f32", kind);
        float *ref = load(path, ROWS);
        snprintf(path, sizeof path, "tests/gguf/kinds_y/%s.scale.f32", kind);
        float *scale = load(path, ROWS);
        snprintf(path, sizeof path, "tests/gguf/kinds_y/%s.l2w.f32", kind);
        float *l2w = load(path, ROWS);
        CHECK(t->ne[0] == COLS && t->ne[1] == ROWS, "%s shape", kind);
        if (!ref || !scale || !l2w || t->ne[0] != COLS || t->ne[1] != ROWS) {
            free(ref);
            free(scale);
            free(l2w);
            continue;
        }
        float y[ROWS];
        CHECK_OK(bp_ref_matvec(t->kind, t->data, t->bytes, ROWS, COLS, x, y));
        /* Every kind's reference is finished: a NaN here is a failure, never a skip. */
        CHECK(!has_nan(y), "%s: the reference matvec gave NaN", kind);
        compare(kind, "bp_ref_matvec", y, ref, scale, 1e-6, NULL, 0);
        checked++;
        bp_weight *w = NULL;
        CHECK_OK(bp_weight_create(t->kind, t->data, t->bytes, ROWS, COLS, &w));
        if (w) {
            static const char *const backends[] = {NULL, "cpu-ref"};
            for (int b = 0; b < 2; b++) {
                float yb[ROWS];
                bp_status s = bp_matvec_on(w, backends[b], x, yb);
                CHECK(s == BP_OK, "%s on %s: %s: %s", kind, backends[b] ? backends[b] : "(seam)", bp_status_name(s),
                      bp_last_error());
                if (s == BP_OK && !has_nan(y)) {
                    if (backends[b]) compare(kind, bp_weight_last_path(w), yb, ref, scale, 1e-6, NULL, 0);
                    else compare(kind, bp_weight_last_path(w), yb, ref, scale, 2e-5, l2w, xmax / 127 / sqrt(12.0));
                }
            }
            bp_weight_free(w);
        }
        free(ref);
        free(scale);
        free(l2w);
    }
    fprintf(stderr, "%d kinds compared with NumPy\n", checked);
    CHECK(checked == bp_gguf_tensor_count(f) && checked > 0, "kinds covered");
    free(x);
    bp_gguf_close(f);
    return bp_test_finish();
}
