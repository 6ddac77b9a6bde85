/* The OpenCL backend on a real driver (PoCL on the CPU in CI): every kind the OpenCL capability
 * table claims, matvec and GEMM, against the CPU reference bp_ref_gemm (NMSE within the tolerance
 * table, src/testing/tolerance.def), on odd shapes; the claim <=> launch rule over the
 * whole kind table; the public API forced onto OpenCL; a bad shape refused with BP_LAUNCH_ERROR
 * and a named cause; the device layer's copies, sub-buffer arguments and named OpenCL errors. Without an OpenCL device it says SKIP on stderr.
 *
 * Runtime: the program (all kinds) is built once per process; PoCL then compiles each kernel
 * for its work-group size at its first launch and caches both in ~/.cache/pocl. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "kinds/kinds_internal.h"
#include "seam/seam.h"
#include "seam/seam_internal.h"

#if BP_HAVE_OPENCL
#include "gpu/step_args.h"
#include "opencl/cl_internal.h"


static int cases_run;

/* One (kind, rows, cols, t) case: OpenCL matvec (t == 1) or GEMM against the reference; the
 * float kinds are held tighter. */
static void check_case(bp_kind k, int64_t rows, int64_t cols, int64_t t, uint64_t *rng) {
    if (bp_test_dispatch_case(&bp_dispatch_opencl, k, rows, cols, t, rng)) cases_run++;
}

/* Through the public API and the seam. Unforced, PoCL's CPU device is not enabled (the reason
 * says how to force it); with BACKPLANE_OPENCL=1 the forced calls run on OpenCL and report it. */
static void check_public_api(uint64_t *rng) {
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q4_K, 9, 512, rng, &bytes);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q4_K, wd, bytes, 9, 512, &w));
    float x[2 * 512], ref[18], got[18];
    for (int i = 0; i < 1024; i++) x[i] = bp_test_randf(rng);
    CHECK_OK(bp_ref_gemm(BP_KIND_Q4_K, wd, bytes, 9, 512, x, 2, ref));
    const bool cpu_impl = (bp_cl_ctx_of(bp_cl_device(NULL, 0))->type & CL_DEVICE_TYPE_CPU) != 0;
    unsetenv("BACKPLANE_OPENCL");
    bp_seam_test_reset_enabled();
    const char *reason = "";
    const bool on = bp_backend_enabled(BP_BACKEND_OPENCL, &reason);
    CHECK(on == !cpu_impl, "unforced, OpenCL on a %s device is %s: %s", cpu_impl ? "CPU" : "GPU",
          on ? "enabled" : "disabled", reason);
    if (cpu_impl)
        CHECK(strstr(reason, "is a CPU implementation of OpenCL") && strstr(reason, "BACKPLANE_OPENCL=1"), "reason: %s",
              reason);
    setenv("BACKPLANE_OPENCL", "1", 1);
    bp_seam_test_reset_enabled();
    CHECK_OK(bp_matvec_on(w, "opencl", x, got));
    CHECK(bp_test_nmse(got, ref, 9) <= bp_test_tolerance(BP_KIND_Q4_K, "matvec"), "bp_matvec_on opencl: NMSE %g",
          bp_test_nmse(got, ref, 9));
    CHECK(strstr(bp_weight_last_path(w), "OpenCL") != NULL, "bp_matvec_on path '%s'", bp_weight_last_path(w));
    CHECK_OK(bp_gemm_on(w, "opencl", x, 2, got));
    bp_test_jobs_on("opencl", rng);
    CHECK(bp_test_nmse(got, ref, 18) <= bp_test_tolerance(BP_KIND_Q4_K, "gemm"), "bp_gemm_on opencl: NMSE %g",
          bp_test_nmse(got, ref, 18));
    CHECK(strstr(bp_weight_last_path(w), "OpenCL") != NULL, "bp_gemm_on path '%s'", bp_weight_last_path(w));
    bp_weight_free(w);
    free(wd);
}

/* A weight whose recorded row size contradicts its kind is refused before any launch, with a
 * named cause, not run on garbage. */
static void check_bad_shape(uint64_t *rng) {
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q8_0, 2, 64, rng, &bytes);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, wd, bytes, 2, 64, &w));
    if (w) {
        w->row_bytes -= 1; /* what a corrupted weight would look like to the backend */
        float x[64] = {0}, y[2] = {0};
        char err[256] = "";
        bp_launch r = (bp_launch)bp_test_launch_mm(&bp_dispatch_opencl, w, x, 1, y, false, err, sizeof err);
        CHECK(r == BP_LAUNCH_ERROR && strstr(err, "whole blocks"), "bad row size: launch %d, err '%s'", (int)r, err);
        w->row_bytes += 1;
    }
    bp_weight_free(w);
    free(wd);
}

/* The device layer itself: copies at offsets, memset, device-to-device, a kernel bound at a
 * buffer offset (a sub-buffer), and OpenCL errors coming back named. */
static void check_device_layer(bp_device *dev) {
    void *a = NULL, *b = NULL;
    CHECK_OK(bp_dev_alloc(dev, 4096, &a));
    CHECK_OK(bp_dev_alloc(dev, 4096, &b));
    if (!a || !b) return;
    uint8_t src[300], back[300];
    for (int i = 0; i < 300; i++) src[i] = (uint8_t)(i * 7 + 1);
    CHECK_OK(bp_dev_memset(dev, a, 0, 0xAB, 4096));
    CHECK_OK(bp_dev_h2d(dev, a, 100, src, 300));
    CHECK_OK(bp_dev_d2d(dev, b, 1000, a, 90, 320));
    memset(back, 0, sizeof back);
    CHECK_OK(bp_dev_d2h(dev, back, b, 1010, 300));
    CHECK(memcmp(back, src, 300) == 0, "h2d at 100, d2d 90 -> 1000, d2h at 1010: bytes differ");
    CHECK_OK(bp_dev_d2h(dev, back, b, 1000, 10));
    CHECK(back[0] == 0xAB && back[9] == 0xAB, "memset bytes came back as %#x %#x", back[0], back[9]);

    /* matvec_F32 (the step's argument block, src/gpu/step_args.h) on a 3 x 64 weight at offset 0 of a,
     * x at offset 1024 of b, y at 2048 of b: sub-buffers. */
    float w[3 * 64], x[64], y[3] = {0}, ref[3];
    for (int i = 0; i < 3 * 64; i++) w[i] = (float)((i % 13) - 6) * 0.25f;
    for (int i = 0; i < 64; i++) x[i] = (float)((i % 5) - 2);
    for (int r = 0; r < 3; r++) {
        double acc = 0;
        for (int c = 0; c < 64; c++) acc += (double)w[r * 64 + c] * x[c];
        ref[r] = (float)acc;
    }
    CHECK_OK(bp_dev_h2d(dev, a, 0, w, sizeof w));
    CHECK_OK(bp_dev_h2d(dev, b, 1024, x, sizeof x));
    bp_kernel *k = NULL;
    CHECK_OK(bp_dev_kernel(dev, "matvec_F32", &k));
    const bp_launch_dims d = {{1, 1, 1}, {64, 1, 1}, 0};
    const bp_gpu_mm_args mm = {.rows = 3, .cols = 64, .row_bytes = 64 * 4, .nsub = 64, .t = 1, .y_stride = 3};
    const bp_kernel_arg args[] = {bp_arg_buf(a, 0), bp_arg_buf(b, 1024), bp_arg_buf(b, 2048), bp_arg_bytes(&mm, sizeof mm)};
    if (k) {
        CHECK_OK(bp_dev_launch(dev, NULL, k, &d, args, 4));
        CHECK_OK(bp_dev_d2h(dev, y, b, 2048, sizeof y));
        /* Small integers times quarters: every partial sum is exact in float. */
        CHECK(y[0] == ref[0] && y[1] == ref[1] && y[2] == ref[2], "sub-buffer launch: %g %g %g vs %g %g %g",
              (double)y[0], (double)y[1], (double)y[2], (double)ref[0], (double)ref[1], (double)ref[2]);
        /* A work-group size the kernel's reqd_work_group_size(64) forbids: the enqueue fails and
         * the status names the OpenCL error. */
        const bp_launch_dims bad = {{2, 1, 1}, {32, 1, 1}, 0};
        bp_status st = bp_dev_launch(dev, NULL, k, &bad, args, 4);
        CHECK(st == BP_E_DEVICE && strstr(bp_last_error(), "CL_INVALID_WORK_GROUP_SIZE"), "bad work-group: %s: %s",
              bp_status_name(st), bp_last_error());
    }
    bp_kernel *none = NULL;
    bp_status st = bp_dev_kernel(dev, "matvec_NO_SUCH_KIND", &none);
    CHECK(st == BP_E_NOT_FOUND, "unknown kernel: %s: %s", bp_status_name(st), bp_last_error());
    bp_dev_free(dev, a);
    bp_dev_free(dev, b);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
    char why[256] = "";
    bp_device *dev = bp_cl_device(why, sizeof why);
    /* Claims and launches agree on every build with OpenCL, device or not (device-free). */
    int nbad = bp_seam_check_claims(&bp_caps_opencl, &bp_dispatch_opencl, NULL, NULL, 0, stderr);
    CHECK(nbad == 0, "OpenCL claim <=> launch: %d kinds violate it", nbad);
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *info = bp_kind_at(i);
        bool claims = bp_caps_opencl.kernel(BP_OP_MATVEC, info->kind) != NULL;
        CHECK(claims == bp_dispatch_opencl.has_launch(BP_OP_MATVEC, info->kind), "%s: claim %d but has_launch %d", info->name,
              claims, bp_dispatch_opencl.has_launch(BP_OP_MATVEC, info->kind));
        CHECK(claims == (bp_caps_opencl.kernel(BP_OP_GEMM, info->kind) != NULL), "%s: matvec claim %d, gemm claim %d", info->name, claims,
              bp_caps_opencl.kernel(BP_OP_GEMM, info->kind) != NULL);
    }
    if (!dev) {
        BP_SKIP("no OpenCL device: %s", why);
        return bp_test_finish();
    }
    fprintf(stderr, "OpenCL device: %s\n", bp_cl_ctx_of(dev)->name);

    uint64_t rng = 0x5eed1234abcdULL;
    int claimed = 0;
    const double t0 = now_s();
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *info = bp_kind_at(i);
        bp_kind k = info->kind;
        if (!bp_caps_opencl.kernel(BP_OP_MATVEC, k)) continue;
        claimed++;
        int64_t qk = info->block_elems;
        /* Odd columns for the plain float kinds; three blocks otherwise (for the 32-element
         * kinds: 96 columns, a GEMM k-step of 128 left partly empty). */
        int64_t cols = qk == 1 ? 67 : 3 * qk;
        static const int64_t rows_set[] = {1, 7, 33}, t_set[] = {1, 3, 17};
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) check_case(k, rows_set[a], cols, t_set[b], &rng);
        /* Long rows: more blocks than the 64 work-items of a matvec work-group (Q4_0: 128). */
        check_case(k, 20, 4096, 1, &rng);
        check_case(k, 20, 4096, 18, &rng);
    }
    fprintf(stderr, "OpenCL claims %d kinds; %d cases ran on the device in %.1f s (program build %.2f s)\n", claimed,
            cases_run, now_s() - t0, bp_cl_ctx_of(dev)->build_seconds);
    int weight_kinds = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        if (bp_kind_at(i)->role != BP_ROLE_W) continue;
        weight_kinds++;
        CHECK(bp_caps_opencl.kernel(BP_OP_MATVEC, bp_kind_at(i)->kind) != NULL, "weight kind %s has no OpenCL kernel",
              bp_kind_at(i)->name);
    }
    CHECK(weight_kinds == 28 && claimed == 28, "%d weight kinds, %d claimed by OpenCL; expected 28", weight_kinds,
          claimed);
    check_public_api(&rng);
    check_bad_shape(&rng);
    check_device_layer(dev);
    return bp_test_finish();
}
#else
int main(void) {
    BP_SKIP("the OpenCL backend is not built (BP_OPENCL=OFF or no OpenCL headers / libOpenCL)");
    return bp_test_finish();
}
#endif
