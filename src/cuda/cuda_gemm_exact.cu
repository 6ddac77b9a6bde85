// Exact mode's prefill kernels (bp_exact_mode, BACKPLANE_EXACT=1): every kind on the f32 tiled
// kernel of cuda_gemm.cuh, no f16 rounding of weights or activations.
//
// This file is compiled with --fmad=false (src/cuda/backend.cmake): nvcc would otherwise contract
// the dequant's d*q + m into one fused multiply-add, which rounds once where the CPU reference
// (built with -ffp-contract=off) rounds twice, so the dequantized weights would differ from the
// reference's in the last bit. Without contraction the dequant repeats the reference's IEEE
// operations exactly (cuda_kind_math.h); only the f32 accumulation order differs from the
// reference's double sum, which test_cuda_kernels bounds by NMSE <= 1e-8.
#include "cuda/cuda_gemm.cuh"

extern "C" const bp_cu_kernel_entry bp_cu_gemm_exact_kernels[] = {
#define BP_CU_ROW(NAME, CPB, MIN) {"gemm_exact_" #NAME, (const void *)bp_cu_gemm_f32<bp_cu::QLoad<bp_cu::K_##NAME>>},
    BP_CU_QUANT_KINDS(BP_CU_ROW)
#undef BP_CU_ROW
    {"gemm_exact_F16", (const void *)bp_cu_gemm_f32<bp_cu::FLoad<2, false>>},
    {"gemm_exact_F32", (const void *)bp_cu_gemm_f32<bp_cu::FLoad<4, false>>},
    {"gemm_exact_BF16", (const void *)bp_cu_gemm_f32<bp_cu::FLoad<2, true>>},
    {nullptr, nullptr},
};
