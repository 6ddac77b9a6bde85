/* Vulkan capabilities: compiled on every build, no SDK needed. Claims exactly the kinds listed
 * in vk_kinds.def, which is also the list backend.cmake compiles shaders for (a matvec and a
 * GEMM each); the seam's claim <=> launch test checks the SPIR-V really is embedded. */
#include "seam/seam.h"

static bool vulkan_claims(bp_kind k) {
    switch (k) {
#define BP_VK_KIND(NAME) case BP_KIND_##NAME:
#include "vulkan/vk_kinds.def"
#undef BP_VK_KIND
        return true;
    default:
        return false;
    }
}

static const char *vulkan_matvec_kernel(bp_kind k) {
    if (!vulkan_claims(k)) return NULL;
    const bp_kind_info *info = bp_kind_lookup((uint32_t)k);
    return info ? info->name : NULL;
}

static bool vulkan_has_gemm(bp_kind k) { return vulkan_claims(k); }

const bp_backend_caps bp_caps_vulkan = {
    .id = BP_BACKEND_VULKAN,
    .name = "vulkan",
    .display_name = "Vulkan",
    .prefill_fallback_name = "Vulkan per-position matvec",
    .matvec_kernel = vulkan_matvec_kernel,
    .has_gemm = vulkan_has_gemm,
    .unverified = NULL,
};
