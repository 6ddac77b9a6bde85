/* The CPU backend: the seam's last stop, always able. Optimized kernels per kind and ISA, with
 * the reference kernels (src/kinds) as their oracle. */
#ifndef BP_CPU_H
#define BP_CPU_H

#include "seam/seam.h"

/* y = W x on the CPU. Never returns "no kernel": every kind runs here. */
bp_status bp_cpu_matvec(bp_weight *w, const float *x, float *y);
/* Y = X W^T for t inputs on the CPU. */
bp_status bp_cpu_gemm(bp_weight *w, const float *x, int64_t t, float *y);
/* Name of the CPU kernel that runs kind k at batch t, e.g. "CPU avx2 Q4_K" (for reports). */
const char *bp_cpu_kernel_name(bp_kind k, int64_t t);

#endif
