/* OpenCL capabilities: compiled on every build, no SDK needed. Claims nothing until its kernels
 * land; each claim must then be backed by a launch (the seam's claim <=> launch test). */
#include "seam/seam.h"

static const char *opencl_matvec_kernel(bp_kind k) {
    (void)k;
    return NULL;
}

static bool opencl_has_gemm(bp_kind k) {
    (void)k;
    return false;
}

const bp_backend_caps bp_caps_opencl = {
    .id = BP_BACKEND_OPENCL,
    .name = "opencl",
    .display_name = "OpenCL",
    .prefill_fallback_name = "OpenCL per-position matvec",
    .matvec_kernel = opencl_matvec_kernel,
    .has_gemm = opencl_has_gemm,
    .unverified = NULL,
};
