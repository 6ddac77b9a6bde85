/* OpenCL capabilities: compiled on every build, no SDK needed.
 *
 * Claims matvec, gemm and matmul jobs for the kinds cl_kernels.cl is written to instantiate a
 * matvec and a GEMM for: the two X-macro lists of src/cuda/cuda_kind_math.h (BP_CU_QUANT_KINDS,
 * BP_CU_FLOAT_KINDS). The dispatch's has_launch does not read these lists: it asks the table of
 * kernel names generated at build time from the program text itself (cl_kernel_names.h, by
 * embed_cl.cmake), so the guard catches a claim the program does not back. tests/
 * test_opencl_kernels.c runs every claim against the CPU reference on PoCL. */
#include "cuda/cuda_kind_math.h"
#include "backend/backend.h"
#include "gpu/gpu_step.h"

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

/* The whole step: for the KV kinds cl_step.cl writes kv_append and attention for. */
static const char *opencl_kernel(bp_op op, bp_kind k) {
    if (op == BP_OP_STEP) return bp_claim_answer(BP_BACKEND_OPENCL, op, k, bp_gpu_step_kv_kind(k));
    return bp_claim_answer(BP_BACKEND_OPENCL, op, k,
                           opencl_claims(k) && (op == BP_OP_MATVEC || op == BP_OP_GEMM || op == BP_OP_JOBS));
}

const bp_backend_caps bp_caps_opencl = {
    .id = BP_BACKEND_OPENCL,
    .name = "opencl",
    .display_name = "OpenCL",
    .prefill_fallback_name = "OpenCL per-position matvec",
    .kernel = opencl_kernel,
    .unverified = NULL,
};
