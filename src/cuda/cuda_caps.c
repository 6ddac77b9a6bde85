/* CUDA capabilities: compiled on every build, no SDK needed.
 *
 * UNRUN ON HARDWARE. Every claim below is backed by a launch in this build's kernel registry
 * (src/cuda/cuda_matvec.cu, cuda_gemm.cu; the seam's claim <=> launch test checks it when CUDA
 * is compiled in), and the kernels' per-kind arithmetic is checked against the CPU reference on
 * the host (tests/test_cuda_host_math.c). No kernel has yet run on a GPU: the build machine has
 * none. `unverified` stays true -- and probe prints the claims as UNVERIFIED -- until
 * tools/gpu_check.sh has passed on a GPU (the build runs on sm_75 and newer: sm_80 and sm_90
 * SASS, compute_75 PTX; src/cuda/backend.cmake) and its figures are in the issue note.
 *
 * GEMM: tensor cores (wmma f16 in, f32 accumulate) for every quantized kind and F16, rerun on
 * the f32 kernel when a value overflows f16; a plain f32 tiled kernel for F32 and BF16 (f16
 * would not keep their range) and for every kind in exact mode. */
#include "backend/backend.h"
#include "gpu/gpu_step.h"

static const struct {
    bp_kind kind;
    bool gemm;
} cuda_claims[] = {
    {BP_KIND_F32, true},     {BP_KIND_F16, true},     {BP_KIND_BF16, true},   {BP_KIND_Q4_0, true},
    {BP_KIND_Q4_1, true},    {BP_KIND_Q5_0, true},    {BP_KIND_Q5_1, true},   {BP_KIND_Q8_0, true},
    {BP_KIND_Q2_K, true},    {BP_KIND_Q3_K, true},    {BP_KIND_Q4_K, true},   {BP_KIND_Q5_K, true},
    {BP_KIND_Q6_K, true},    {BP_KIND_IQ2_XXS, true}, {BP_KIND_IQ2_XS, true}, {BP_KIND_IQ2_S, true},
    {BP_KIND_IQ3_XXS, true}, {BP_KIND_IQ3_S, true},   {BP_KIND_IQ1_S, true},  {BP_KIND_IQ1_M, true},
    {BP_KIND_IQ4_NL, true},  {BP_KIND_IQ4_XS, true},  {BP_KIND_TQ1_0, true},  {BP_KIND_TQ2_0, true},
    {BP_KIND_MXFP4, true},   {BP_KIND_NVFP4, true},   {BP_KIND_Q1_0, true},   {BP_KIND_Q2_0, true},
};

static int cuda_claim_index(bp_kind k) {
    for (int i = 0; i < (int)(sizeof cuda_claims / sizeof cuda_claims[0]); i++)
        if (cuda_claims[i].kind == k) return i;
    return -1;
}

/* The whole step (cuda_step.cu) for the KV kinds its append and attention kernels store. The
 * rule runs it only where the probe found a GPU (an enabled backend). */
static const char *cuda_kernel(bp_op op, bp_kind k) {
    if (op == BP_OP_STEP) return bp_claim_answer(BP_BACKEND_CUDA, op, k, bp_gpu_step_kv_kind(k));
    const int i = cuda_claim_index(k);
    const bool claimed = i >= 0 && (op == BP_OP_MATVEC || ((op == BP_OP_GEMM || op == BP_OP_JOBS) && cuda_claims[i].gemm));
    return bp_claim_answer(BP_BACKEND_CUDA, op, k, claimed);
}

const bp_backend_caps bp_caps_cuda = {
    .id = BP_BACKEND_CUDA,
    .name = "cuda",
    .display_name = "CUDA",
    .prefill_fallback_name = "CUDA per-position matvec",
    .kernel = cuda_kernel,
    .unverified = "UNRUN ON HARDWARE", /* see the top of this file */
};
