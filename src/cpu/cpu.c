/* PLACEHOLDER until the optimized CPU kernels land: the CPU backend runs the reference. */
#include "cpu/cpu.h"

bp_status bp_cpu_matvec(bp_weight *w, const float *x, float *y) {
    return bp_ref_matvec(w->kind, w->data, w->row_bytes * (size_t)w->rows, w->rows, w->cols, x, y);
}

bp_status bp_cpu_gemm(bp_weight *w, const float *x, int64_t t, float *y) {
    return bp_ref_gemm(w->kind, w->data, w->row_bytes * (size_t)w->rows, w->rows, w->cols, x, t, y);
}

const char *bp_cpu_kernel_name(bp_kind k, int64_t t) {
    (void)k;
    (void)t;
    return "CPU reference";
}
