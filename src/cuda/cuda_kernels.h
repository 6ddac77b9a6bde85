/* The CUDA kernels as the C side sees them: a registry of (name, entry point) rows that the .cu
 * files fill, looked up by the device's kernel_lookup and launched through cudaLaunchKernel
 * with the argument lists documented here. Plain C so the device interface (cuda_device.c)
 * and the dispatch (cuda_dispatch.c) stay C11.
 *
 * Kernel names and parameter lists (raw kernelParams order):
 *   "quantize_q8"   (const float *x, bp_cu_xq *xq, int nchunks)
 *                   one warp per chunk of 32; x has nchunks * 32 floats.
 *   "matvec_<KIND>" (const uint8_t *w, size_t pitch, int rows, int cols, const float *x,
 *                    const bp_cu_xq *xq, float *y)
 *                   quantized kinds read xq (x may be NULL); float kinds read x (xq NULL).
 *                   Block of BP_CU_MV_THREADS threads, one warp per row:
 *                   grid = ceil(rows / BP_CU_MV_ROWS). Rows start `pitch` bytes apart, pitch a
 *                   multiple of 16 (the kernels read the weights with 8/16-byte loads).
 *   "gemm_<KIND>"   (const uint8_t *w, size_t pitch, int rows, int cols, const float *x, int t,
 *   "gemm_exact_<KIND>"  float *y, unsigned *ovf)   Y[t][rows] = X[t][cols] W^T, X and Y row-major.
 *                   Block of BP_CU_GEMM_THREADS, grid = (ceil(rows/64), ceil(t/64)); t at most
 *                   BP_CU_GEMM_MAX_T per launch (gridDim.y <= 65535: larger batches are split).
 *                   The tensor-core kernels set *ovf to non-zero when a finite weight or
 *                   activation overflows f16 (BP_CU_F16_OVERFLOWS); the dispatch then reruns the
 *                   op on gemm_exact_<KIND>. The f32 kernels never write it.
 */
#ifndef BP_CUDA_KERNELS_H
#define BP_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_CU_MV_THREADS 128
#define BP_CU_MV_ROWS (BP_CU_MV_THREADS / 32)
#define BP_CU_GEMM_TILE 64
#define BP_CU_GEMM_THREADS 256
#define BP_CU_QUANT_THREADS 128 /* 4 chunks of 32 per block */
/* Bytes of one q8 activation chunk in device memory (bp_cu_xq). */
#define BP_CU_XQ_BYTES 48
/* CUDA caps gridDim.y (and z) at 65535: one GEMM launch covers at most this many tokens. */
#define BP_CU_GEMM_MAX_T (65535 * BP_CU_GEMM_TILE)

/* A finite float that f16 rounds to infinity: |v| >= 65520, the midpoint between the largest
 * half (65504) and the next step (65536), which round-to-nearest-even sends up. v - v == 0 is
 * false for inf and NaN (already non-finite: not an overflow of ours). Plain C: the host tests
 * check it against bp_f32_to_f16, the kernels use it on every value they round to f16. */
#define BP_CU_F16_OVERFLOWS(v) ((v) - (v) == 0.0f && ((v) >= 65520.0f || (v) <= -65520.0f))

/* The token slices of a GEMM of t tokens: slice i covers tokens [i * max_t, min(t, (i+1) * max_t)).
 * Returns the number of launches (0 for t <= 0). */
static inline int bp_cu_gemm_slices(long long t, long long max_t) {
    return t <= 0 || max_t <= 0 ? 0 : (int)((t + max_t - 1) / max_t);
}

typedef struct bp_cu_kernel_entry {
    const char *name;
    const void *func; /* the __global__ function, for cudaLaunchKernel */
} bp_cu_kernel_entry;

/* Rows end with {NULL, NULL}. One table per .cu file. */
extern const bp_cu_kernel_entry bp_cu_matvec_kernels[];
extern const bp_cu_kernel_entry bp_cu_gemm_kernels[];
extern const bp_cu_kernel_entry bp_cu_gemm_exact_kernels[];
/* The device step's kernels (cuda_step.cu), named "step_<kernel>" after gpu_step.h's list. */
extern const bp_cu_kernel_entry bp_cu_step_kernels[];

#ifdef __cplusplus
}
#endif

#endif
