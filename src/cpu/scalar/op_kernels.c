/* The portable op kernels (see op_kern.h), and the choice of table per ISA path. */
#include <math.h>
#include <pthread.h>

#include "kinds_internal.h"
#include "cpu/op_kern.h"

static void dequant(bp_kind k, const uint8_t *src, size_t stride, float *dst, int n, int rows) {
    const bp_kind_traits *kt = bp_kind_traits_of(k);
    for (int u = 0; u < rows; u++) kt->dequant(src + (size_t)u * stride, dst + (size_t)u * n, n / (int)kt->info.block_elems);
}

static void scores(const float *const *q, int R, const float *k, size_t kstride, int kt, int dk, float *s) {
    for (int r = 0; r < R; r++)
        for (int j = 0; j < kt; j++) {
            const float *kj = k + (size_t)j * kstride, *qr = q[r];
            float a[4] = {0, 0, 0, 0};
            int e = 0;
            for (; e + 4 <= dk; e += 4)
                for (int u = 0; u < 4; u++) a[u] += qr[e + u] * kj[e + u];
            for (; e < dk; e++) a[0] += qr[e] * kj[e];
            s[r * kt + j] = (a[0] + a[1]) + (a[2] + a[3]);
        }
}

static void pv(float *const *acc, const float *p, int R, const float *v, size_t vstride, int kt, int dv) {
    for (int r = 0; r < R; r++)
        for (int j = 0; j < kt; j++) {
            float w = p[r * kt + j];
            if (w == 0) continue;
            const float *vj = v + (size_t)j * vstride;
            for (int e = 0; e < dv; e++) acc[r][e] += w * vj[e];
        }
}

static float exp_sum(float *s, int n, float m) {
    float sum = 0;
    for (int i = 0; i < n; i++) sum += s[i] = expf(s[i] - m);
    return sum;
}

static void scale(float *x, int n, float c) {
    for (int i = 0; i < n; i++) x[i] *= c;
}

static float scale_max(float *x, int n, float c) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) {
        x[i] *= c;
        if (x[i] > m) m = x[i];
    }
    return m;
}

static void to_f16(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = bp_f32_to_f16(x[i]);
}

static void act(int a, const float *x, const float *up, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], r;
        if (a == BP_SILU) r = v / (1.0f + expf(-v));
        else if (a == BP_GELU_TANH) r = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
        else r = 0.5f * v * (1.0f + erff(v * 0.70710678f));
        y[i] = up ? r * up[i] : r;
    }
}

void bp_op_kern_scalar(bp_op_kern *k) {
    *k = (bp_op_kern){.isa = "scalar", .vl = 1, .dequant = dequant, .scores = scores, .pv = pv, .exp_sum = exp_sum,
                      .scale = scale, .scale_max = scale_max, .to_f16 = to_f16, .act = act};
}

static bp_op_kern tables[BP_CPU_ISA_COUNT];
static bool have[BP_CPU_ISA_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void) {
    bp_op_kern_scalar(&tables[BP_CPU_ISA_SCALAR]);
    have[BP_CPU_ISA_SCALAR] = true;
    have[BP_CPU_ISA_AVX2] = bp_cpu_isa_available(BP_CPU_ISA_AVX2) && bp_op_kern_avx2(&tables[BP_CPU_ISA_AVX2]);
    have[BP_CPU_ISA_AVX512] = bp_cpu_isa_available(BP_CPU_ISA_AVX512) && bp_op_kern_avx512(&tables[BP_CPU_ISA_AVX512]);
}

const bp_op_kern *bp_op_kern_portable(void) {
    pthread_once(&once, init);
    return &tables[BP_CPU_ISA_SCALAR];
}

const bp_op_kern *bp_op_kern_current(void) {
    pthread_once(&once, init);
    int isa = (int)bp_cpu_isa_current();
    while (isa > 0 && !have[isa]) isa--;
    return &tables[isa];
}
