/* The whole forward step on Vulkan (lavapipe here, forced on), on the tiny random-weight models
 * of every architecture (tests/model/gen_tiny.py), against the CPU reference path (scalar
 * kernels: no activation rounding) over the same token ids:
 *
 * - one 32-token batch (prefill GEMMs, every row's logits), one token at a time (decode: the
 *   recorded step replayed); NMSE per position <= 1e-10 with an F32 cache and <= 1e-7 with F16
 *   (the kernels sum in another order, nothing else differs), the best id equal at every position;
 * - every step ran on Vulkan (the step's run record), with no fallback;
 * - the traffic of one replayed decode step: one upload (ids and positions), one download (the
 *   logits), one queue submission; the first step of a shape records it once;
 * - the CPU taking over a sequence the device held (BACKPLANE_BACKEND switched mid-way) gives the
 *   same logits: the device hands its KV cache back;
 * - with bindings of 40 KiB (as if the device's maxStorageBufferRange were that small) the same
 *   decode logits: the qwen3 model's embedding and output weights split into pieces over arenas.
 * Skips loudly when Vulkan is not built or has no device; both are failures on CI. */
#include "model/step_check.h"
#if BP_HAVE_VULKAN
#include "vulkan/vk_internal.h"
#endif

enum { P = 32 };

/* Every KV kind the step stores; the device quantizes as the CPU does, so only the summation
 * order differs (and a rounding tie, rarely): measured F32 8e-13, F16 5e-9, ... */
static const bp_kind kvs[] = {BP_KIND_F32, BP_KIND_F16, BP_KIND_BF16, BP_KIND_Q8_0,
                              BP_KIND_Q4_0, BP_KIND_Q4_1, BP_KIND_Q5_0, BP_KIND_Q5_1};
static const double bound[] = {1e-10, 1e-7, 1e-6, 1e-5, 1e-5, 1e-5, 1e-5, 1e-5};

/* Every binding 40 KiB: the placement splits the larger weights into pieces. */
static void small_bindings(void) {
#if BP_HAVE_VULKAN
    model_ref_logits r;
    bp_model *m;
    if (!model_tiny_open("qwen3", &r, &m)) return;
    const int64_t V = r.n_vocab;
    float *ref = malloc((size_t)P * V * 4), *got = malloc((size_t)P * V * 4);
    if (m && ref && got) {
        step_force("cpu");
        CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
        step_run(m, BP_KIND_F16, r.tokens, P, false, ref, V, NULL);
        bp_vk_test_set_max_range(40 << 10);
        step_force("vulkan");
        step_traffic_view tv = {0};
        if (step_run(m, BP_KIND_F16, r.tokens, P, false, got, V, &tv)) {
            int same = 0;
            const double worst = step_worst(got, ref, P, V, &same);
            CHECK(worst <= 1e-7, "40 KiB bindings: worst NMSE %.3e", worst);
            CHECK(!strcmp(tv.rec.backend, "vulkan"), "40 KiB bindings: the step ran on %s (%s)", tv.rec.backend, tv.rec.cause);
            CHECK(V * 272 > (40 << 10), "the Q8_0 output weight fits one binding: the split is not exercised");
        }
        bp_vk_test_set_max_range(0);
    }
    free(ref), free(got);
    bp_model_free(m);
    model_ref_free(&r);
#endif
}

int main(void) {
    setenv("BACKPLANE_VULKAN", "1", 1); /* lavapipe is a CPU implementation: on only when forced */
    bool built, on;
    step_backend_state("vulkan", &built, &on);
    if (!built) {
        BP_SKIP("the Vulkan backend is not built (BP_VULKAN=OFF or no Vulkan SDK / glslc)");
        return bp_test_finish();
    }
    if (!on) {
        BP_SKIP("no Vulkan device (install mesa-vulkan-drivers for lavapipe)");
        return bp_test_finish();
    }
    const char *archs[] = {"llama", "qwen2", "qwen3", "gemma3"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        step_check_arch(archs[i], "vulkan", P, kvs, bound, (int)(sizeof kvs / sizeof kvs[0]));
    /* fused attn_qkv / gate-up views (phi3), NORM RoPE with factors (mistral3): two KV kinds */
    step_check_arch("phi3", "vulkan", P, kvs, bound, 2);
    step_check_arch("mistral3", "vulkan", P, kvs, bound, 2);
    /* Phi-3 LongRoPE factors of magnitude 1 (the short set at this context): frequencies only */
    step_check_arch("phi3-longrope-short", "vulkan", P, kvs, bound, 2);
    small_bindings();
    return bp_test_finish();
}
