/* Metal capabilities: compiled on every build, no SDK needed. Claims nothing until its kernels
 * land; each claim must then be backed by a launch (the seam's claim <=> launch test). */
#include "seam/seam.h"

static const char *metal_matvec_kernel(bp_kind k) {
    (void)k;
    return NULL;
}

static bool metal_has_gemm(bp_kind k) {
    (void)k;
    return false;
}

const bp_backend_caps bp_caps_metal = {
    .id = BP_BACKEND_METAL,
    .name = "metal",
    .display_name = "Metal",
    .prefill_fallback_name = "Metal per-position matvec",
    .matvec_kernel = metal_matvec_kernel,
    .has_gemm = metal_has_gemm,
    .unverified = "UNVERIFIED: Metal kernels cannot be built or run here",
};
