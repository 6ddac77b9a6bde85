/* conv2d, the float64 reference: the oracle the CPU fast path and every backend are tested
 * against (beside the NumPy vectors of tests/vectors/conv_moe). Plain on purpose: the input
 * normalized whole in double, the weight dequantized whole by the reference dequantizer
 * (bp_dequantize, bit-exact against the gguf package), and a direct loop over output pixel,
 * output channel, ky, kx, cin accumulating in double. Padding is zeros after the norm, as
 * F.conv2d pads its (already normalized) input. */
#include <math.h>

#include "core/alloc.h"
#include "core/error.h"
#include "ops/conv2d_internal.h"

/* xn = act(norm(x) * gamma + beta), all in double. */
static void normalize(const bp_conv2d_params *p, const float *x, double *xn) {
    int64_t npix = p->h * p->w, cin = p->cin;
    for (int64_t i = 0; i < npix * cin; i++) xn[i] = x[i];
    if (p->norm == BP_CONV_NORM_GROUP) {
        int64_t cg = cin / p->groups;
        for (int64_t g = 0; g < p->groups; g++) {
            double sum = 0, ss = 0, n = (double)(npix * cg);
            for (int64_t i = 0; i < npix; i++)
                for (int64_t c = g * cg; c < (g + 1) * cg; c++) sum += xn[i * cin + c];
            double mean = sum / n;
            for (int64_t i = 0; i < npix; i++)
                for (int64_t c = g * cg; c < (g + 1) * cg; c++) ss += (xn[i * cin + c] - mean) * (xn[i * cin + c] - mean);
            double rstd = 1.0 / sqrt(ss / n + (double)p->eps);
            for (int64_t i = 0; i < npix; i++)
                for (int64_t c = g * cg; c < (g + 1) * cg; c++) xn[i * cin + c] = (xn[i * cin + c] - mean) * rstd;
        }
    } else if (p->norm == BP_CONV_NORM_LAYER) {
        for (int64_t i = 0; i < npix; i++) {
            double *r = xn + i * cin, sum = 0, ss = 0;
            for (int64_t c = 0; c < cin; c++) sum += r[c];
            double mean = sum / (double)cin;
            for (int64_t c = 0; c < cin; c++) ss += (r[c] - mean) * (r[c] - mean);
            double rstd = 1.0 / sqrt(ss / (double)cin + (double)p->eps);
            for (int64_t c = 0; c < cin; c++) r[c] = (r[c] - mean) * rstd;
        }
    }
    for (int64_t i = 0; i < npix; i++) {
        double *r = xn + i * cin;
        for (int64_t c = 0; c < cin; c++) {
            double v = r[c];
            if (p->norm != BP_CONV_NORM_NONE) v = v * (p->gamma ? (double)p->gamma[c] : 1.0) + (p->beta ? (double)p->beta[c] : 0.0);
            if (p->silu) v = v / (1.0 + exp(-v));
            r[c] = v;
        }
    }
}

bp_status bp_conv2d_ref(const bp_weight *w, const bp_conv2d_params *p, const float *x, float *y) {
    int64_t oh, ow;
    bp_status s = bp_conv2d_out_size(p, &oh, &ow);
    if (s) return s;
    int64_t k = p->k, cin = p->cin, cols = w->cols, pad = k / 2;
    double *xn = bp_malloc(sizeof(double) * (size_t)(p->h * p->w * cin));
    float *wf = bp_malloc(sizeof(float) * (size_t)(w->rows * cols));
    if (!xn || !wf) {
        bp_free(xn);
        bp_free(wf);
        return bp_fail(BP_E_NOMEM, "conv2d reference: no memory for the %lld x %lld x %lld image and the %lld x %lld weight",
                       (long long)p->h, (long long)p->w, (long long)cin, (long long)w->rows, (long long)cols);
    }
    for (int64_t r = 0; r < w->rows && !s; r++)
        s = bp_dequantize(w->kind, w->data + (size_t)r * w->row_bytes, w->row_bytes, wf + r * cols, cols);
    if (!s) normalize(p, x, xn);
    for (int64_t oy = 0; oy < oh && !s; oy++)
        for (int64_t ox = 0; ox < ow; ox++)
            for (int64_t co = 0; co < p->cout; co++) {
                double acc = p->bias ? (double)p->bias[co] : 0.0;
                for (int64_t ky = 0; ky < k; ky++) {
                    int64_t iy = oy * p->stride - pad + ky;
                    if (iy < 0 || iy >= p->h) continue;
                    for (int64_t kx = 0; kx < k; kx++) {
                        int64_t ix = ox * p->stride - pad + kx;
                        if (ix < 0 || ix >= p->w) continue;
                        const double *xr = xn + (iy * p->w + ix) * cin;
                        const float *wr = wf + co * cols + (ky * k + kx) * cin;
                        for (int64_t c = 0; c < cin; c++) acc += (double)wr[c] * xr[c];
                    }
                }
                y[(oy * ow + ox) * p->cout + co] = (float)acc;
            }
    bp_free(xn);
    bp_free(wf);
    return s;
}
