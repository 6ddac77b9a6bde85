/* The whole forward step on OpenCL (PoCL here, forced on), on the tiny random-weight models of
 * every architecture (tests/model/gen_tiny.py), against the CPU reference path (scalar kernels:
 * no activation rounding) over the same token ids -- tests/model/step_check.h, as for Vulkan:
 * every KV kind the step stores, a batch and one token at a time, NMSE within the kind's bound
 * and the best id equal at every position, the decode step on OpenCL with no fallback, a
 * replayed decode step moving exactly 1 upload, 1 download (the logits) and 1 submission (the
 * recorded launch list enqueued with one flush), the CPU taking over the device's sequence.
 * The kernels' arithmetic is src/cuda/cuda_step_math.h, the CUDA step's too.
 *
 * PoCL runs a tiny model's decode step in tens of milliseconds (each of ~100 launches ~0.3 ms),
 * so the positions are fewer than Vulkan's (12 with every KV kind on llama, 8 on the others).
 * Skips loudly when OpenCL is not built or has no device; both are failures on CI. */
#include "model/step_check.h"

static const bp_kind kvs[] = {BP_KIND_F32, BP_KIND_F16, BP_KIND_BF16, BP_KIND_Q8_0,
                              BP_KIND_Q4_0, BP_KIND_Q4_1, BP_KIND_Q5_0, BP_KIND_Q5_1};
/* The bounds test_vulkan_step holds the same kernels' order of summation to. */
static const double bound[] = {1e-10, 1e-7, 1e-6, 1e-5, 1e-5, 1e-5, 1e-5, 1e-5};

int main(void) {
    setenv("BACKPLANE_OPENCL", "1", 1); /* PoCL is a CPU implementation: on only when forced */
    bool built, on;
    step_backend_state("opencl", &built, &on);
    if (!built) {
        BP_SKIP("the OpenCL backend is not built (BP_OPENCL=OFF or no OpenCL headers / library)");
        return bp_test_finish();
    }
    if (!on) {
        BP_SKIP("no OpenCL device (install pocl-opencl-icd for PoCL)");
        return bp_test_finish();
    }
    const int nkv = (int)(sizeof kvs / sizeof kvs[0]);
    step_check_arch("llama", "opencl", 12, kvs, bound, nkv);
    const char *archs[] = {"qwen2", "qwen3", "gemma3"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) step_check_arch(archs[i], "opencl", 8, kvs, bound, nkv);
    /* fused attn_qkv / gate-up views (phi3), NORM RoPE with factors (mistral3): the first KV kind */
    step_check_arch("phi3", "opencl", 8, kvs, bound, 1);
    step_check_arch("mistral3", "opencl", 8, kvs, bound, 1);
    return bp_test_finish();
}
