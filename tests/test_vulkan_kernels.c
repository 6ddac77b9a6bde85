/* The Vulkan backend on a real driver (Mesa lavapipe in CI): every kind the Vulkan capability
 * table claims, matvec and GEMM, against the CPU reference bp_ref_gemm (NMSE within the tolerance table, src/testing/tolerance.def), on odd
 * shapes; weights split across several bindings; a shape over the binding limit declined with
 * an error; the claim <=> launch rule over the whole kind table. Without a Vulkan device it
 * says SKIP on stderr. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kinds/kinds_internal.h"
#include "seam/seam.h"
#include "seam/seam_internal.h"

#if BP_HAVE_VULKAN
#include "vulkan/vk_internal.h"
extern const bp_backend_dispatch bp_dispatch_vulkan;

/* One (kind, rows, cols, t) case: Vulkan matvec (t == 1) or GEMM against the reference. */
static void check_case(bp_kind k, int64_t rows, int64_t cols, int64_t t, uint64_t *rng) {
    bp_test_dispatch_case(&bp_dispatch_vulkan, k, rows, cols, t, rng);
}

/* Through the public API and the seam. Unforced, a CPU implementation (lavapipe) is not enabled
 * and the seam runs the CPU; with BACKPLANE_VULKAN=1 both the forced call and the seam's own
 * choice run on Vulkan, reporting the path that ran. */
static void check_public_api(uint64_t *rng) {
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q4_K, 9, 512, rng, &bytes);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q4_K, wd, bytes, 9, 512, &w));
    float x[2 * 512], ref[18], got[18];
    for (int i = 0; i < 1024; i++) x[i] = bp_test_randf(rng);
    CHECK_OK(bp_ref_gemm(BP_KIND_Q4_K, wd, bytes, 9, 512, x, 2, ref));
    const bool cpu_impl = bp_vk_ctx_of(bp_vk_device(NULL, 0))->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    unsetenv("BACKPLANE_VULKAN");
    bp_seam_test_reset_enabled();
    const char *reason = "";
    const bool on = bp_backend_enabled(BP_BACKEND_VULKAN, &reason);
    CHECK(on == !cpu_impl, "unforced, Vulkan on a %s is %s: %s", cpu_impl ? "CPU implementation" : "GPU",
          on ? "enabled" : "disabled", reason);
    if (cpu_impl) {
        CHECK(strstr(reason, "is a CPU implementation of Vulkan") && strstr(reason, "BACKPLANE_VULKAN=1"), "reason: %s",
              reason);
        CHECK_OK(bp_gemm(w, x, 2, got));
        CHECK(!strncmp(bp_weight_last_path(w), "CPU", 3), "unforced lavapipe: the seam runs the CPU (%s)",
              bp_weight_last_path(w));
        CHECK(bp_matvec_on(w, "vulkan", x, got) == BP_E_UNSUPPORTED && strstr(bp_last_error(), "BACKPLANE_VULKAN=1"),
              "forced call on a disabled CPU implementation says how to enable it: %s", bp_last_error());
    }
    setenv("BACKPLANE_VULKAN", "1", 1);
    bp_seam_test_reset_enabled();
    CHECK_OK(bp_matvec_on(w, "vulkan", x, got));
    CHECK(bp_test_nmse(got, ref, 9) <= bp_test_tolerance(BP_KIND_Q4_K, "matvec"), "bp_matvec_on vulkan: NMSE %g",
          bp_test_nmse(got, ref, 9));
    CHECK(strstr(bp_weight_last_path(w), "Vulkan") != NULL, "bp_matvec_on path '%s'", bp_weight_last_path(w));
    CHECK_OK(bp_gemm_on(w, "vulkan", x, 2, got));
    bp_test_jobs_on("vulkan", rng);
    CHECK(bp_test_nmse(got, ref, 18) <= bp_test_tolerance(BP_KIND_Q4_K, "gemm"), "bp_gemm_on vulkan: NMSE %g",
          bp_test_nmse(got, ref, 18));
    /* The seam's choice, forced on: Vulkan precedes the CPU (no CUDA/Metal device here). */
    CHECK_OK(bp_gemm(w, x, 2, got));
    CHECK(bp_test_nmse(got, ref, 18) <= bp_test_tolerance(BP_KIND_Q4_K, "gemm"), "bp_gemm: NMSE %g",
          bp_test_nmse(got, ref, 18));
    CHECK(strstr(bp_weight_last_path(w), "Vulkan") || strstr(bp_weight_last_path(w), "CUDA"),
          "bp_gemm ran '%s', not the GPU backend", bp_weight_last_path(w));
    bp_weight_free(w);
    free(wd);
}

/* A weight split over several bindings, and activations over several batches. */
static void check_split(uint64_t *rng) {
    bp_vk_test_set_max_range(4096);
    check_case(BP_KIND_Q8_0, 100, 256, 1, rng);  /* 272-byte rows: 15 per chunk, 7 chunks */
    check_case(BP_KIND_Q8_0, 100, 256, 17, rng); /* 4 inputs per batch */
    check_case(BP_KIND_Q4_K, 45, 512, 9, rng);
    /* A row larger than one binding is declined with a named cause, not run wrong. */
    bp_vk_test_set_max_range(256);
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q8_0, 2, 256, rng, &bytes);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, wd, bytes, 2, 256, &w));
    float x[256] = {0}, y[2];
    char err[256] = "";
    bp_launch r = (bp_launch)bp_test_launch_mm(&bp_dispatch_vulkan, w, x, 1, y, false, err, sizeof err);
    CHECK(r == BP_LAUNCH_ERROR && strstr(err, "maxStorageBufferRange"), "over-range row: launch %d, err '%s'", (int)r, err);
    bp_weight_free(w);
    free(wd);
    bp_vk_test_set_max_range(0);
}

int main(void) {
    char why[256] = "";
    if (!bp_vk_device(why, sizeof why)) {
        BP_SKIP("no Vulkan device: %s", why);
        return bp_test_finish();
    }
    fprintf(stderr, "Vulkan device: %s\n", bp_vk_ctx_of(bp_vk_device(NULL, 0))->name);

    /* The rule of the seam, over every kind of the table. */
    int nbad = bp_seam_check_claims(&bp_caps_vulkan, &bp_dispatch_vulkan, NULL, NULL, 0, stderr);
    CHECK(nbad == 0, "Vulkan claim <=> launch: %d kinds violate it", nbad);

    uint64_t rng = 0x5eed1234abcdULL;
    int claimed = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *info = bp_kind_at(i);
        bp_kind k = info->kind;
        bool claims = bp_caps_vulkan.kernel(BP_OP_MATVEC, k) != NULL;
        CHECK(claims == bp_dispatch_vulkan.has_launch(BP_OP_MATVEC, k), "%s: claim %d but has_launch %d", info->name, claims,
              bp_dispatch_vulkan.has_launch(BP_OP_MATVEC, k));
        if (!claims) continue;
        claimed++;
        CHECK(bp_caps_vulkan.kernel(BP_OP_GEMM, k), "%s: a matvec but no GEMM claimed", info->name);
        int64_t qk = info->block_elems;
        /* Odd columns for the plain float kinds; three blocks otherwise. */
        int64_t cols = qk == 1 ? 67 : 3 * qk;
        static const int64_t rows_set[] = {1, 7, 33}, t_set[] = {1, 3, 17};
        for (int a = 0; a < 3; a++) {
            for (int b = 0; b < 3; b++) check_case(k, rows_set[a], cols, t_set[b], &rng);
        }
        /* Long rows: more sub-blocks than the 64 threads of a workgroup. */
        check_case(k, 70, 4096, 1, &rng);
        check_case(k, 70, 4096, 20, &rng);
    }
    fprintf(stderr, "Vulkan claims %d kinds; each ran matvec and GEMM on the device\n", claimed);
    /* Issue 6's bar: every weight kind a GGUF file can hold. */
    int weight_kinds = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        if (bp_kind_at(i)->role != BP_ROLE_W) continue;
        weight_kinds++;
        CHECK(bp_caps_vulkan.kernel(BP_OP_MATVEC, bp_kind_at(i)->kind) != NULL, "weight kind %s has no Vulkan kernel",
              bp_kind_at(i)->name);
    }
    CHECK(weight_kinds == 28, "the kind table has %d weight kinds, expected 28", weight_kinds);
    check_public_api(&rng);
    check_split(&rng);
    return bp_test_finish();
}
#else
int main(void) {
    BP_SKIP("the Vulkan backend is not built (BP_VULKAN=OFF or no Vulkan SDK / glslc)");
    return bp_test_finish();
}
#endif
