/* A model with routed experts where a device backend is on (Vulkan, lavapipe here, forced on):
 * tiny-qwen3moe (tests/model/gen_tiny.py) against its float64 reference.
 *
 * - no device step records MoE: the step runs op by op (its record is the CPU's), with no
 *   fallback counted, and its logits stay within the fast path's 1e-3 of float64 (batch and
 *   decode);
 * - MoE offload on: the MoE op's record names Vulkan for the expert matmuls (each expert's GEMM
 *   through the seam); off (bp_set_moe_offload(false)): it names offload off and no Vulkan.
 * Skips loudly when Vulkan is not built or has no device; both are failures on CI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/model_ref.h"
#include "model/step_check.h"
#include "seam/seam_internal.h"

static void run(bool offload) {
    const char *path = model_tiny_path("qwen3moe");
    model_ref_logits r;
    if (!path || !model_ref_load("tests/model/ref/tiny-qwen3moe.f64.logits.bin", &r)) return;
    bp_set_moe_offload(offload);
    bp_model *m = NULL;
    bp_context *c = NULL;
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = 64;
    CHECK_OK(bp_model_load(path, NULL, &m));
    if (m) CHECK_OK(bp_context_create(m, &cp, &c));
    if (!c) goto out;
    const unsigned long long fb0 = bp_fallback_total();
    for (int batch = 1; batch >= 0; batch--) {
        double worst = 0;
        CHECK_OK(bp_context_truncate(c, 0));
        for (int p = 0; p < r.n_pos; p += batch ? r.n_pos : 1) {
            const int n = batch ? r.n_pos : 1;
            CHECK_OK(bp_context_eval(c, r.tokens + p, n, n));
            for (int j = 0; j < n && bp_context_logits(c, j); j++) {
                double e = model_ref_nmse(&r, p + j, bp_context_logits(c, j));
                if (!(e <= worst)) worst = e;
            }
        }
        CHECK(worst <= 1e-3, "offload %d, %s: worst NMSE %.3e > 1e-3 against float64", offload,
              batch ? "batch" : "decode", worst);
        fprintf(stderr, "qwen3moe with Vulkan on, MoE offload %s, %s: worst NMSE %.3e against float64\n",
                offload ? "on" : "off", batch ? "batch" : "decode", worst);
        bp_step_report sr;
        CHECK_OK(bp_context_step_report(c, batch, &sr));
        CHECK(!strcmp(sr.record.backend, "cpu"), "a step with experts ran on %s, not op by op", sr.record.backend);
        bp_run_record rec;
        CHECK_OK(bp_op_last_record("moe", &rec));
        if (offload)
            CHECK(strstr(rec.kernel, "Vulkan") != NULL, "offload on: the experts' record names no Vulkan: %s",
                  rec.kernel);
        else
            CHECK(strstr(rec.kernel, "MoE offload off") && !strstr(rec.kernel, "Vulkan"),
                  "offload off: the experts' record: %s", rec.kernel);
    }
    CHECK(bp_fallback_total() == fb0, "%llu fallbacks", bp_fallback_total() - fb0);
out:
    bp_context_free(c);
    bp_model_free(m);
    model_ref_free(&r);
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
    run(true);
    run(false);
    return bp_test_finish();
}
