/* Softmax per row with scale, logit soft-capping and an additive mask (the order ggml's
 * soft_max/flash attention use: scale, cap, then mask). The reference works in double. */
#include <math.h>

#include "core/error.h"
#include "ops/ops_internal.h"

static double logit(float x, float scale, float softcap, const float *m) {
    double z = (double)scale * x;
    if (softcap > 0) z = softcap * tanh(z / softcap);
    return m ? z + *m : z;
}

void bp_ref_softmax(const float *x, int64_t t, int64_t n, float scale, float softcap, const float *mask, float *y) {
    for (int64_t r = 0; r < t; r++) {
        const float *xr = x + r * n, *mr = mask ? mask + r * n : NULL;
        float *yr = y + r * n;
        double mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < n; i++) {
            double z = logit(xr[i], scale, softcap, mr ? mr + i : NULL);
            if (z > mx) mx = z;
        }
        if (mx == -INFINITY) {
            for (int64_t i = 0; i < n; i++) yr[i] = 0;
            continue;
        }
        for (int64_t i = 0; i < n; i++) sum += exp(logit(xr[i], scale, softcap, mr ? mr + i : NULL) - mx);
        /* y may be x: element i is read for the last time just before it is written */
        for (int64_t i = 0; i < n; i++) yr[i] = (float)(exp(logit(xr[i], scale, softcap, mr ? mr + i : NULL) - mx) / sum);
    }
}

bp_status bp_softmax(const float *x, int64_t t, int64_t n, float scale, float softcap, const float *mask, float *y) {
    if (t < 0 || n <= 0)
        return bp_fail(BP_E_SHAPE, "softmax: [%lld][%lld]: rows must be >= 0 and n > 0", (long long)t, (long long)n);
    if (!isfinite(scale)) return bp_fail(BP_E_INVAL, "softmax: scale %g is not finite", scale);
    if (!(softcap >= 0) || !isfinite(softcap))
        return bp_fail(BP_E_INVAL, "softmax: softcap %g must be finite and >= 0 (0: none)", softcap);
    if (t == 0) return BP_OK;
    if (!x || !y) return bp_fail(BP_E_INVAL, "softmax: [%lld][%lld]: x or y is NULL", (long long)t, (long long)n);
    if ((uint64_t)t > (uint64_t)INT64_MAX / (uint64_t)n)
        return bp_fail(BP_E_SHAPE, "softmax: [%lld][%lld] overflows", (long long)t, (long long)n);
    bp_op_call c = {.op = BP_OP_SOFTMAX, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
    c.u.softmax.x = x, c.u.softmax.t = t, c.u.softmax.n = n, c.u.softmax.scale = scale;
    c.u.softmax.softcap = softcap, c.u.softmax.mask = mask, c.u.softmax.y = y;
    c.shape = (bp_op_shape){1, n, t};
    return bp_op_run(&c);
}
