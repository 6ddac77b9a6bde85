/* OpenCL capabilities: compiled on every build, no SDK needed.
 *
 * Claims exactly the kinds cl_kernels.cl instantiates a matvec and a GEMM for: the same two
 * X-macro lists of src/cuda/cuda_kind_math.h (BP_CU_QUANT_KINDS, BP_CU_FLOAT_KINDS) expand
 * both here and in the kernel source, so a claim cannot name a kernel that is not there. The
 * dispatch's has_launch checks the embedded program text really holds both kernels, and
 * tests/test_opencl_kernels.c runs every claim against the CPU reference on PoCL. */
#include "cuda/cuda_kind_math.h"
#include "seam/seam.h"

static bool opencl_claims(bp_kind k) {
    switch (k) {
#define BP_CL_CLAIM_Q(NAME, CPB, HAS_MIN) case BP_KIND_##NAME:
#define BP_CL_CLAIM_F(NAME, ESIZE) case BP_KIND_##NAME:
        BP_CU_QUANT_KINDS(BP_CL_CLAIM_Q)
        BP_CU_FLOAT_KINDS(BP_CL_CLAIM_F)
#undef BP_CL_CLAIM_Q
#undef BP_CL_CLAIM_F
        return true;
    default:
        return false;
    }
}

static const char *opencl_matvec_kernel(bp_kind k) {
    if (!opencl_claims(k)) return NULL;
    const bp_kind_info *info = bp_kind_lookup((uint32_t)k);
    return info ? info->name : NULL;
}

static bool opencl_has_gemm(bp_kind k) { return opencl_claims(k); }

const bp_backend_caps bp_caps_opencl = {
    .id = BP_BACKEND_OPENCL,
    .name = "opencl",
    .display_name = "OpenCL",
    .prefill_fallback_name = "OpenCL per-position matvec",
    .matvec_kernel = opencl_matvec_kernel,
    .has_gemm = opencl_has_gemm,
    .unverified = NULL,
};
