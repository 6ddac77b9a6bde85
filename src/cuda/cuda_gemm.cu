// Prefill kernels: Y[t][rows] = X[t][cols] W^T, every weight kind (the templates and the why
// are in cuda_gemm.cuh). This file is the default path: f16 tensor cores for the quantized kinds
// and F16, f32 for F32 and BF16. Exact mode's kernels are in cuda_gemm_exact.cu.
#include "cuda/cuda_gemm.cuh"

extern "C" const bp_cu_kernel_entry bp_cu_gemm_kernels[] = {
#define BP_CU_ROW(NAME, CPB, MIN) {"gemm_" #NAME, (const void *)bp_cu_gemm_tc<bp_cu::QLoad<bp_cu::K_##NAME>>},
    BP_CU_QUANT_KINDS(BP_CU_ROW)
#undef BP_CU_ROW
    {"gemm_F16", (const void *)bp_cu_gemm_tc<bp_cu::FLoad<2, false>>},
    {"gemm_F32", (const void *)bp_cu_gemm_f32<bp_cu::FLoad<4, false>>},
    {"gemm_BF16", (const void *)bp_cu_gemm_f32<bp_cu::FLoad<2, true>>},
    {nullptr, nullptr},
};
