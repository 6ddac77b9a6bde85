/* Activations (SiLU, GELU tanh and erf) and their gated forms (SwiGLU, GeGLU). Elementwise on
 * n values; the reference evaluates each in double. */
#include <math.h>

#include "core/error.h"
#include "ops/ops_internal.h"

double bp_ref_act1(bp_activation a, double x) {
    switch (a) {
    case BP_SILU: return x / (1.0 + exp(-x));
    case BP_GELU_TANH: {
        const double k = 0.7978845608028654; /* sqrt(2/pi) */
        return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
    case BP_GELU_ERF: return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    }
    return x;
}

void bp_ref_act(bp_activation a, const float *x, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = (float)bp_ref_act1(a, x[i]);
}

void bp_ref_glu(bp_activation a, const float *gate, const float *up, int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = (float)(bp_ref_act1(a, gate[i]) * (double)up[i]);
}

static const char *act_name(bp_activation a) {
    return a == BP_SILU ? "silu" : a == BP_GELU_TANH ? "gelu_tanh" : a == BP_GELU_ERF ? "gelu_erf" : "?";
}

static bp_status check(const char *op, bp_activation a, const float *x, const float *up, bool gated, int64_t n,
                       const float *y) {
    if (a != BP_SILU && a != BP_GELU_TANH && a != BP_GELU_ERF)
        return bp_fail(BP_E_INVAL, "%s: unknown activation %d (BP_SILU, BP_GELU_TANH, BP_GELU_ERF)", op, (int)a);
    if (n < 0) return bp_fail(BP_E_SHAPE, "%s %s: negative count %lld", op, act_name(a), (long long)n);
    if (n > 0 && (!x || !y || (gated && !up)))
        return bp_fail(BP_E_INVAL, "%s %s: [%lld]: an input or the output is NULL", op, act_name(a), (long long)n);
    return BP_OK;
}

bp_status bp_activate(bp_activation a, const float *x, int64_t n, float *y) {
    bp_status s = check("act", a, x, NULL, false, n, y);
    if (s || n == 0) return s;
    bp_op_call c = {.op = BP_OP_ACT, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
    c.u.act.a = a, c.u.act.x = x, c.u.act.n = n, c.u.act.y = y;
    c.shape = (bp_op_shape){1, n, 1};
    return bp_op_run(&c);
}

bp_status bp_glu(bp_activation a, const float *gate, const float *up, int64_t n, float *y) {
    bp_status s = check("glu", a, gate, up, true, n, y);
    if (s || n == 0) return s;
    bp_op_call c = {.op = BP_OP_GLU, .kind = BP_KIND_F32, .kind2 = BP_KIND_F32};
    c.u.act.a = a, c.u.act.x = gate, c.u.act.up = up, c.u.act.n = n, c.u.act.y = y;
    c.shape = (bp_op_shape){1, n, 1};
    return bp_op_run(&c);
}
