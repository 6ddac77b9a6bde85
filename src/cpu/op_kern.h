/* The CPU op kernels per instruction set: the inner loops of attention (dequantize a KV tile,
 * the score tile, the P V accumulation, exp and row sums), the activations and the norms' row
 * sums. scalar/op_kernels.c is portable C; avx2/op_kernels.c and avx512/op_kernels.c compile
 * op_kern.inc with their own -m flags (src/cpu/backend.cmake), and the path follows the CPU
 * backend's (bp_cpu_isa_current: CPUID, BACKPLANE_CPU_ISA, bp_cpu_isa_force), so one binary
 * runs on any x86-64 and the tests drive every path. */
#ifndef BP_CPU_OP_KERN_H
#define BP_CPU_OP_KERN_H

#include "cpu/cpu.h"

typedef struct bp_op_kern {
    const char *isa;  /* "scalar", "avx2", "avx512" */
    int vl;           /* floats per vector: head dims must be multiples to use this table */
    /* rows KV rows of kind k (row u at src + u * stride, n values, n a multiple of the kind's
     * block) to dst[u * n ..]. */
    void (*dequant)(bp_kind k, const uint8_t *src, size_t stride, float *dst, int n, int rows);
    /* s[r * kt + j] = q[r] . k[j] for r < R, j < kt (k rows kstride floats apart). */
    void (*scores)(const float *const *q, int R, const float *k, size_t kstride, int kt, int dk, float *s);
    /* acc[r][0..dv) += sum_j p[r * kt + j] * v[j] for r < R. */
    void (*pv)(float *const *acc, const float *p, int R, const float *v, size_t vstride, int kt, int dv);
    /* The same two over an F16 cache read in place (strides in halves); NULL: dequantize first. */
    void (*scores_f16)(const float *const *q, int R, const uint16_t *k, size_t kstride, int kt, int dk, float *s);
    void (*pv_f16)(float *const *acc, const float *p, int R, const uint16_t *v, size_t vstride, int kt, int dv);
    /* s[i] = exp(s[i] - m) for i < n (exp(-inf) = 0); returns the sum. */
    float (*exp_sum)(float *s, int n, float m);
    /* x[i] *= c */
    void (*scale)(float *x, int n, float c);
    /* x[i] *= c; returns max x[i] (-inf for n = 0) */
    float (*scale_max)(float *x, int n, float c);
    /* y[i] = x[i] as IEEE half, round to nearest even (the F16 quantizer's rounding): the KV
     * cache's F16 append. */
    void (*to_f16)(const float *x, uint16_t *y, int64_t n);
    /* y[i] = act(x[i]) (up: y[i] = act(x[i]) * up[i]); act is a bp_activation. */
    void (*act)(int act, const float *x, const float *up, float *y, int64_t n);
} bp_op_kern;

/* The table for the CPU's current ISA path. */
const bp_op_kern *bp_op_kern_current(void);
/* The portable table (libm expf/tanhf/erff): what exact mode uses for the activations. */
const bp_op_kern *bp_op_kern_portable(void);

void bp_op_kern_scalar(bp_op_kern *k);
/* false when this build or machine lacks the instruction set. */
bool bp_op_kern_avx2(bp_op_kern *k);
bool bp_op_kern_avx512(bp_op_kern *k);

#endif
