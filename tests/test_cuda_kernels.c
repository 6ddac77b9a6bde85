/* CUDA backend on a device: every kind's matvec and GEMM against the CPU reference
 * (NMSE within the tolerance table), then the device interface (ledger, copies, memset, pinned memory, streams,
 * events, graphs, properties).
 *
 * Without a GPU (or without CUDA compiled in) it says so LOUDLY on stderr via BP_SKIP, and
 * still checks what needs no device: the probe's reason carries the cudart error code, the
 * capability table claims exactly the kernels the registry can launch, the sticky-error
 * classification, and the library falls back to the CPU for every kind. The kernels'
 * arithmetic is tested device-free by test_cuda_host_math, the prefill guards (f16 overflow,
 * grid slices) by test_cuda_host_guards.
 *
 * BACKPLANE_REQUIRE_GPU=1 (tools/gpu_check.sh sets it) turns "no GPU" into a FAILURE: on the
 * machine that exists to run these kernels, a skip must not read as a pass.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "seam/seam.h"
#include "seam/seam_internal.h"

#if defined(BP_HAVE_CUDA)
#include "cuda/cuda_internal.h"
#endif

/* matvec or gemm (t > 1) of kind k on `backend` against the reference; returns the NMSE. */
static double run_case(bp_kind k, const char *backend, int64_t rows, int64_t cols, int64_t t, uint64_t *st,
                       char *path, size_t path_len) {
    size_t bytes = 0;
    uint8_t *wd = bp_test_make_weight(k, rows, cols, st, &bytes);
    float *x = malloc(sizeof(float) * (size_t)(t * cols));
    float *y = malloc(sizeof(float) * (size_t)(t * rows)), *ref = malloc(sizeof(float) * (size_t)(t * rows));
    double nmse = INFINITY;
    bp_weight *w = NULL;
    if (!wd || !x || !y || !ref) goto out;
    for (int64_t i = 0; i < t * cols; i++) x[i] = bp_test_randf(st);
    if (bp_ref_gemm(k, wd, bytes, rows, cols, x, t, ref) || bp_weight_create(k, wd, bytes, rows, cols, &w)) goto out;
    bp_status s = t == 1 ? bp_matvec_on(w, backend, x, y) : bp_gemm_on(w, backend, x, t, y);
    if (s == BP_OK) nmse = bp_test_nmse(y, ref, (size_t)(t * rows));
    else snprintf(path, path_len, "error %s: %s", bp_status_name(s), bp_last_error());
    if (s == BP_OK) snprintf(path, path_len, "%s", bp_weight_last_path(w));
out:
    bp_weight_free(w);
    free(wd);
    free(x);
    free(y);
    free(ref);
    return nmse;
}

/* Device-free: the capability table claims exactly what the dispatch can launch. */
static void check_claims(void) {
    const bp_backend_dispatch *d = bp_backend_dispatch_of(BP_BACKEND_CUDA);
#if defined(BP_HAVE_CUDA)
    CHECK(d != NULL, "CUDA is compiled in but has no dispatch table");
#endif
    int nbad = bp_seam_check_claims(&bp_caps_cuda, d, NULL, NULL, 0, stderr);
    CHECK(nbad == 0, "CUDA claim <=> launch: %d kinds violate it", nbad);
    CHECK(bp_caps_cuda.unverified && strstr(bp_caps_cuda.unverified, "UNRUN ON HARDWARE"), "CUDA claims must stay UNVERIFIED (UNRUN ON HARDWARE) until a GPU run");
    int claimed = 0, weights = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
        weights++;
        if (bp_caps_cuda.kernel(BP_OP_MATVEC, ki->kind)) claimed++;
    }
    CHECK(claimed == weights, "CUDA claims %d of the %d weight kinds", claimed, weights);
#if defined(BP_HAVE_CUDA)
    /* The seam's check sees one gemm entry point; this one sees each kind's GEMM kernel. */
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        char name[48];
        snprintf(name, sizeof name, "gemm_%s", ki->name);
        const bool has = bp_cu_kernel_find(name) != NULL;
        CHECK(has == (bp_caps_cuda.kernel(BP_OP_MATVEC, ki->kind) && bp_caps_cuda.kernel(BP_OP_GEMM, ki->kind)),
              "%s: GEMM claim %d but registry kernel %s %s", ki->name, bp_caps_cuda.kernel(BP_OP_GEMM, ki->kind) != NULL, name,
              has ? "present" : "absent");
        snprintf(name, sizeof name, "gemm_exact_%s", ki->name);
        CHECK((bp_cu_kernel_find(name) != NULL) == has, "%s: exact-mode GEMM kernel %s missing or extra", ki->name,
              name);
    }
    CHECK(bp_cu_kernel_find("quantize_q8") != NULL, "registry lacks quantize_q8");
#endif
}

#if defined(BP_HAVE_CUDA)
static int released;
static void on_release(void *ctx) { released += *(int *)ctx; }

static void check_device_interface(bp_device *dev, bp_stream *s) {
    enum { N = 1 << 16 };
    uint8_t *h = malloc(N), *back = malloc(N);
    void *a = NULL, *b = NULL, *pinned = NULL;
    if (!h || !back) { CHECK(0, "no memory"); goto out; }
    for (int i = 0; i < N; i++) h[i] = (uint8_t)(i * 7 + 3);
    const size_t live0 = bp_ledger_live_count(dev);
    CHECK_OK(bp_dev_alloc(dev, N, &a));
    CHECK_OK(bp_dev_alloc(dev, N, &b));
    CHECK(bp_ledger_live_count(dev) == live0 + 2, "ledger did not record the allocations");
    /* blocking, async, on-stream, d2d */
    CHECK_OK(bp_dev_h2d(dev, a, 0, h, N));
    CHECK_OK(bp_dev_d2d(dev, b, 0, a, 0, N));
    memset(back, 0, N);
    CHECK_OK(bp_dev_d2h(dev, back, b, 0, N));
    CHECK(memcmp(back, h, N) == 0, "h2d -> d2d -> d2h round trip differs");
    CHECK_OK(bp_dev_memset_on(dev, s, b, 100, 0x5a, 1000));
    memset(back, 0, N);
    CHECK_OK(bp_dev_d2h_on(dev, s, back, b, 0, N));
    CHECK_OK(bp_dev_stream_sync(dev, s));
    CHECK(back[99] == h[99] && back[100] == 0x5a && back[1099] == 0x5a && back[1100] == h[1100],
          "memset_async wrote the wrong range");
    /* 2-D: 64 rows of 100 bytes, host pitch 128 -> device pitch 112 */
    CHECK_OK(bp_dev_copy_2d(dev, s, BP_COPY_H2D, a, 0, 112, h, 0, 128, 100, 64));
    CHECK_OK(bp_dev_copy_2d(dev, s, BP_COPY_D2H, back, 0, 128, a, 0, 112, 100, 64));
    CHECK_OK(bp_dev_stream_sync(dev, s));
    int ok2d = 1;
    for (int r = 0; r < 64; r++) ok2d &= memcmp(back + 128 * r, h + 128 * r, 100) == 0;
    CHECK(ok2d, "2-D pitched copy round trip differs");
    /* retained source: released exactly once */
    int one = 1;
    released = 0;
    CHECK_OK(bp_dev_h2d_retained(dev, s, a, 0, h, 4096, on_release, &one));
    CHECK_OK(bp_dev_stream_sync(dev, s));
    CHECK(released == 1, "retained copy released %d times", released);
    /* pinned host memory + events */
    CHECK_OK(bp_dev_host_alloc_pinned(dev, N, &pinned));
    bp_event *e0 = NULL, *e1 = NULL;
    CHECK_OK(bp_dev_event_create(dev, &e0));
    CHECK_OK(bp_dev_event_create(dev, &e1));
    CHECK_OK(bp_dev_event_record(dev, e0, s));
    if (pinned) CHECK_OK(bp_dev_d2h_on(dev, s, pinned, a, 0, N));
    CHECK_OK(bp_dev_event_record(dev, e1, s));
    CHECK_OK(bp_dev_event_sync(dev, e1));
    float ms = -1.0f;
    CHECK_OK(bp_dev_event_elapsed_ms(dev, e0, e1, &ms));
    CHECK(ms >= 0.0f, "event elapsed %g ms", ms);
    bp_dev_event_destroy(dev, e0);
    bp_dev_event_destroy(dev, e1);
    /* graph: capture a memset, replay it twice, and abort a capture left active */
    bp_graph *g = NULL;
    CHECK_OK(bp_dev_graph_begin(dev, s));
    CHECK(bp_dev_stream_is_capturing(dev, s), "stream not capturing after graph_begin");
    CHECK_OK(bp_dev_memset_on(dev, s, a, 0, 0x11, 256));
    CHECK_OK(bp_dev_graph_end(dev, s, &g));
    CHECK_OK(bp_dev_memset(dev, a, 0, 0, 256));
    if (g) {
        CHECK_OK(bp_dev_graph_replay(dev, g, s));
        CHECK_OK(bp_dev_graph_replay(dev, g, s));
        CHECK_OK(bp_dev_d2h_on(dev, s, back, a, 0, 256));
        CHECK_OK(bp_dev_stream_sync(dev, s));
        CHECK(back[0] == 0x11 && back[255] == 0x11, "graph replay did not run the captured memset");
        bp_dev_graph_destroy(dev, g);
    }
    CHECK_OK(bp_dev_graph_begin(dev, s));
    bp_dev_graph_abort(dev, s);
    CHECK(!bp_dev_stream_is_capturing(dev, s), "graph_abort left the stream capturing");
    CHECK_OK(bp_dev_stream_sync(dev, s));
    /* properties */
    size_t total = 0, freeb = 0;
    CHECK_OK(bp_dev_mem_info(dev, &total, &freeb));
    CHECK(total > 0 && freeb <= total, "mem_info total %zu free %zu", total, freeb);
    CHECK(bp_dev_compute_units(dev) > 1, "SM count %d", bp_dev_compute_units(dev));
    fprintf(stderr, "cuda: %d SMs, %.1f / %.1f GiB free\n", bp_dev_compute_units(dev), freeb / 1073741824.0,
            total / 1073741824.0);
out:
    if (pinned) bp_dev_host_free_pinned(dev, pinned);
    if (a) bp_dev_free(dev, a);
    if (b) bp_dev_free(dev, b);
    free(h);
    free(back);
}
#endif

#if defined(BP_HAVE_CUDA)
/* Sticky errors disable the backend for the process; the others are one op's failure. */
static void check_sticky(void) {
    static const int sticky[] = {700, 702, 710, 714, 715, 716, 717, 718, 719, 214};
    static const int not_sticky[] = {1, 2, 98, 101, 209, 701, 720, 999};
    for (size_t i = 0; i < sizeof sticky / sizeof *sticky; i++)
        CHECK(bp_cu_error_is_sticky(sticky[i]), "cudaError %d (%s) is sticky", sticky[i],
              cudaGetErrorName((cudaError_t)sticky[i]));
    for (size_t i = 0; i < sizeof not_sticky / sizeof *not_sticky; i++)
        CHECK(!bp_cu_error_is_sticky(not_sticky[i]), "cudaError %d (%s) is not sticky", not_sticky[i],
              cudaGetErrorName((cudaError_t)not_sticky[i]));
    CHECK(bp_cu_status(cudaErrorIllegalAddress, "test") == BP_E_DEVICE_LOST && strstr(bp_last_error(), "sticky"),
          "a sticky error is BP_E_DEVICE_LOST: %s", bp_last_error());
    CHECK(bp_cu_status(cudaErrorLaunchOutOfResources, "test") == BP_E_DEVICE, "a launch-resources error is not");
}

/* f16 overflow on the tensor-core GEMM: activations of 1e5 (above 65504) must give the exact
 * f32 answer, not inf/NaN reported as success. */
static void check_f16_overflow(uint64_t *st) {
    const int64_t rows = 70, cols = 256, t = 9;
    size_t bytes = 0;
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q4_K, rows, cols, st, &bytes);
    float *x = malloc(sizeof(float) * (size_t)(t * cols)), *y = malloc(sizeof(float) * (size_t)(t * rows)),
          *ref = malloc(sizeof(float) * (size_t)(t * rows));
    bp_weight *w = NULL;
    if (wd && x && y && ref) {
        for (int64_t i = 0; i < t * cols; i++) x[i] = 1e5f * bp_test_randf(st);
        CHECK_OK(bp_ref_gemm(BP_KIND_Q4_K, wd, bytes, rows, cols, x, t, ref));
        CHECK_OK(bp_weight_create(BP_KIND_Q4_K, wd, bytes, rows, cols, &w));
        bp_set_exact_mode(false);
        CHECK_OK(bp_gemm_on(w, "cuda", x, t, y));
        CHECK(bp_test_all_finite(y, (size_t)(t * rows)), "f16 overflow: the result is finite");
        const double e = bp_test_nmse(y, ref, (size_t)(t * rows));
        CHECK(e <= 1e-8, "f16 overflow reran on the exact kernel: NMSE %.3g", e);
        fprintf(stderr, "  f16-overflow gemm NMSE %.2e (rerun on gemm_exact)\n", e);
    }
    bp_weight_free(w);
    free(wd), free(x), free(y), free(ref);
}
#endif

/* Forced onto CUDA where it cannot run, the library names why instead of silently running
 * elsewhere. */
static void check_forced_fails(void) {
    uint64_t st = 1;
    char path[300] = "";
    const double e = run_case(BP_KIND_Q4_0, "cuda", 8, 64, 1, &st, path, sizeof path);
    CHECK(isinf(e) && strstr(path, "error"), "bp_matvec_on(cuda) without a usable CUDA did not fail: %s", path);
}

int main(void) {
    const char *req = getenv("BACKPLANE_REQUIRE_GPU");
    const bool require = req && !strcmp(req, "1");
    check_claims();
#if !defined(BP_HAVE_CUDA)
    if (require) CHECK(0, "BACKPLANE_REQUIRE_GPU=1 but the CUDA backend is not compiled in");
    else BP_SKIP("CUDA backend not compiled in (configure with nvcc on PATH, BP_CUDA=AUTO/ON): no CUDA kernels to run");
    check_forced_fails();
    return bp_test_finish();
#else
    check_sticky();
    char why[256];
    if (!bp_cu_probe(why, sizeof why)) {
        if (require) CHECK(0, "BACKPLANE_REQUIRE_GPU=1 but no usable GPU: %s", why);
        else
            BP_SKIP("no CUDA device (%s) -- GPU kernels and device interface NOT tested; host math is in "
                    "test_cuda_host_math",
                    why);
        CHECK(strstr(why, "cudaGetDeviceCount ->") || strstr(why, "sm_"), "probe reason lacks the cudart error: %s",
              why);
        check_forced_fails();
        return bp_test_finish();
    }
    fprintf(stderr, "cuda: %s\n", why);
    bp_device *dev;
    bp_stream *s;
    CHECK_OK(bp_cu_device(&dev, &s));
    uint64_t st = 0x1234567ull;
    /* BP_TEST_KINDS=Q4_K,F16,...: only those (tools/gpu_check.sh's compute-sanitizer step,
     * where every launch is 10-100x slower). */
    const char *only = getenv("BP_TEST_KINDS");
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
        if (only && *only) {
            char pat[24];
            snprintf(pat, sizeof pat, ",%s,", ki->name);
            char list[256];
            snprintf(list, sizeof list, ",%s,", only);
            if (!strstr(list, pat)) continue;
        }
        /* Odd sizes on purpose: rows not a multiple of the 4 rows / 64-row tiles, a partial
         * last span of 32 chunks, float kinds with cols not a multiple of 32, t not of 64. */
        const int64_t rows = 257, t = 67;
        const int64_t cols = ki->block_elems == 1 ? 1003 : (ki->block_elems >= 128 ? 1280 : 1344);
        char path[300] = "";
        double e = run_case(ki->kind, "cuda", rows, cols, 1, &st, path, sizeof path);
        CHECK(e <= bp_test_tolerance(ki->kind, "matvec"), "%s matvec on CUDA: NMSE %.3g > %.1g (%s)", ki->name, e,
              bp_test_tolerance(ki->kind, "matvec"), path);
        fprintf(stderr, "  %-8s matvec NMSE %.2e  [%s]\n", ki->name, e, path);
        e = run_case(ki->kind, "cuda", rows, cols, t, &st, path, sizeof path);
        CHECK(e <= bp_test_tolerance(ki->kind, "gemm"), "%s gemm t=%lld on CUDA: NMSE %.3g > %.1g (%s)", ki->name,
              (long long)t, e, bp_test_tolerance(ki->kind, "gemm"), path);
        fprintf(stderr, "  %-8s gemm   NMSE %.2e  [%s]\n", ki->name, e, path);
        bp_set_exact_mode(true); /* the f32 prefill kernels */
        e = run_case(ki->kind, "cuda", rows, cols, t, &st, path, sizeof path);
        bp_set_exact_mode(false);
        CHECK(e <= 1e-8, "%s exact gemm t=%lld on CUDA: NMSE %.3g > 1e-8 (%s)", ki->name, (long long)t, e, path);
        fprintf(stderr, "  %-8s exact  NMSE %.2e\n", ki->name, e);
    }
    check_f16_overflow(&st);
    /* BACKPLANE_CUDA_DEVICE: an index past the devices, or not an index, is the probe's reason
     * (the probe reads it each call; the open device stays the one chosen at first use). */
    char why2[256];
    setenv("BACKPLANE_CUDA_DEVICE", "99", 1);
    CHECK(!bp_cu_probe(why2, sizeof why2) && strstr(why2, "BACKPLANE_CUDA_DEVICE=99"), "device 99: %s", why2);
    setenv("BACKPLANE_CUDA_DEVICE", "first", 1);
    CHECK(!bp_cu_probe(why2, sizeof why2) && strstr(why2, "not a device index"), "device 'first': %s", why2);
    setenv("BACKPLANE_CUDA_DEVICE", "0", 1);
    CHECK(bp_cu_probe(why2, sizeof why2) && strstr(why2, "device 0:"), "device 0: %s", why2);
    unsetenv("BACKPLANE_CUDA_DEVICE");
    if (dev) check_device_interface(dev, s);
    return bp_test_finish();
#endif
}
