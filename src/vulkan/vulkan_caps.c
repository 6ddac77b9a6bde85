/* Vulkan capabilities: compiled on every build, no SDK needed. Claims nothing until its kernels
 * land; each claim must then be backed by a launch (the seam's claim <=> launch test). */
#include "seam/seam.h"

static const char *vulkan_matvec_kernel(bp_kind k) {
    (void)k;
    return NULL;
}

static bool vulkan_has_gemm(bp_kind k) {
    (void)k;
    return false;
}

const bp_backend_caps bp_caps_vulkan = {
    .id = BP_BACKEND_VULKAN,
    .name = "vulkan",
    .display_name = "Vulkan",
    .prefill_fallback_name = "Vulkan per-position matvec",
    .matvec_kernel = vulkan_matvec_kernel,
    .has_gemm = vulkan_has_gemm,
    .unverified = false,
};
