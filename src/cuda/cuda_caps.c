/* CUDA capabilities: compiled on every build, no SDK needed. Claims nothing until its kernels
 * land; each claim must then be backed by a launch (the seam's claim <=> launch test). */
#include "seam/seam.h"

static const char *cuda_matvec_kernel(bp_kind k) {
    (void)k;
    return NULL;
}

static bool cuda_has_gemm(bp_kind k) {
    (void)k;
    return false;
}

const bp_backend_caps bp_caps_cuda = {
    .id = BP_BACKEND_CUDA,
    .name = "cuda",
    .display_name = "CUDA",
    .prefill_fallback_name = "CUDA per-position matvec",
    .matvec_kernel = cuda_matvec_kernel,
    .has_gemm = cuda_has_gemm,
    .unverified = false,
};
