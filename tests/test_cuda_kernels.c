/* CUDA backend on a device: every kind's matvec and GEMM against the CPU reference
 * (NMSE within the tolerance table), then the device interface (ledger, copies, memset, pinned memory, streams,
 * events, graphs, properties).
 *
 * Without a GPU (or without CUDA compiled in) it says so LOUDLY on stderr via BP_SKIP, and
 * still checks what needs no device: the probe's reason carries the cudart error code, the
 * capability table claims exactly the kernels the registry can launch, and the library falls
 * back to the CPU for every kind. The kernels' arithmetic is tested device-free by
 * test_cuda_host_math.
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
    bp_kind bad[64];
    const bp_backend_dispatch *d = bp_backend_dispatch_of(BP_BACKEND_CUDA);
#if defined(BP_HAVE_CUDA)
    CHECK(d != NULL, "CUDA is compiled in but has no dispatch table");
#endif
    int nbad = bp_seam_check_claims(&bp_caps_cuda, d, bad, 64, stderr);
    CHECK(nbad == 0, "CUDA claim <=> launch: %d kinds violate it", nbad);
    CHECK(bp_caps_cuda.unverified && strstr(bp_caps_cuda.unverified, "UNRUN ON HARDWARE"), "CUDA claims must stay UNVERIFIED (UNRUN ON HARDWARE) until a GPU run");
    int claimed = 0, weights = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
        weights++;
        if (bp_caps_cuda.matvec_kernel(ki->kind)) claimed++;
    }
    CHECK(claimed == weights, "CUDA claims %d of the %d weight kinds", claimed, weights);
#if defined(BP_HAVE_CUDA)
    /* The seam's check sees one gemm entry point; this one sees each kind's GEMM kernel. */
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        char name[48];
        snprintf(name, sizeof name, "gemm_%s", ki->name);
        const bool has = bp_cu_kernel_find(name) != NULL;
        CHECK(has == (bp_caps_cuda.matvec_kernel(ki->kind) && bp_caps_cuda.has_gemm(ki->kind)),
              "%s: GEMM claim %d but registry kernel %s %s", ki->name, (int)bp_caps_cuda.has_gemm(ki->kind), name,
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

/* Forced onto CUDA where it cannot run, the library names why instead of silently running
 * elsewhere. */
static void check_forced_fails(void) {
    uint64_t st = 1;
    char path[300] = "";
    const double e = run_case(BP_KIND_Q4_0, "cuda", 8, 64, 1, &st, path, sizeof path);
    CHECK(isinf(e) && strstr(path, "error"), "bp_matvec_on(cuda) without a usable CUDA did not fail: %s", path);
}

int main(void) {
    check_claims();
#if !defined(BP_HAVE_CUDA)
    BP_SKIP("CUDA backend not compiled in (configure with nvcc on PATH, BP_CUDA=AUTO/ON): no CUDA kernels to run");
    check_forced_fails();
    return bp_test_finish();
#else
    char why[256];
    if (!bp_cu_probe(why, sizeof why)) {
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
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
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
    if (dev) check_device_interface(dev, s);
    return bp_test_finish();
#endif
}
