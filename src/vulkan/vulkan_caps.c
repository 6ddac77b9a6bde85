/* Vulkan capabilities: compiled on every build, no SDK needed. Claims matvec, gemm and matmul
 * jobs for exactly the kinds listed in vk_kinds.def, which is also the list backend.cmake
 * compiles shaders for (a matvec and a GEMM each); the guard's claim <=> launch test checks the
 * SPIR-V really is embedded. */
#include "backend/backend.h"
#include "gpu/gpu_step.h"

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

/* The whole step: for the KV kinds the step's attention and append kernels store. */
static const char *vulkan_kernel(bp_op op, bp_kind k) {
    if (op == BP_OP_STEP) return bp_claim_answer(BP_BACKEND_VULKAN, op, k, bp_gpu_step_kv_kind(k));
    return bp_claim_answer(BP_BACKEND_VULKAN, op, k,
                           vulkan_claims(k) && (op == BP_OP_MATVEC || op == BP_OP_GEMM || op == BP_OP_JOBS));
}

const bp_backend_caps bp_caps_vulkan = {
    .id = BP_BACKEND_VULKAN,
    .name = "vulkan",
    .display_name = "Vulkan",
    .prefill_fallback_name = "Vulkan per-position matvec",
    .kernel = vulkan_kernel,
    .unverified = NULL,
};
