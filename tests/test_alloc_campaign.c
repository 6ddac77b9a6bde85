/* The allocation-failure campaign (SQLite's malloc tests, for backplane): every allocation a
 * representative workload makes -- host (core/alloc.h: bp_malloc & co.) and device (device
 * memory, pinned host memory, arenas: they ask the same switch) -- is made to fail, one at a
 * time (benign: only the Nth fails) and from the Nth on (persistent: the Nth and every later
 * one). After each failure:
 *   - the workload returned BP_OK with correct numbers (the seam fell back, and then the
 *     fallback was counted and named in the path), or a clear error (BP_E_NOMEM, or a forced
 *     backend's BP_E_DEVICE naming the allocation) with a message;
 *   - nothing leaked: the device ledgers hold what they held before, and so does the count of
 *     live host blocks through the door (bp_alloc_live); under `make sanitize`
 *     LeakSanitizer checks every host byte at exit as well;
 *   - the library still works: the workload run again without failures gives the same path as
 *     before the campaign (a failure never leaves a backend half-initialized or disabled).
 * Prints the figures: allocations per workload, failures injected, distinct allocation sites
 * failed, leaks.
 *
 * Adding a workload (the model runner): write a function that runs it
 * once, checks its own numbers with CHECK against a reference prepared before the campaign (the
 * reference kernels allocate too), frees everything, and returns its status; add a row to
 * `workloads` below. BP_ALLOC_CAMPAIGN_STRIDE=k tests every kth N only (BP_TEST_QUICK: every 3rd). */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/alloc.h"
#include "cpu/cpu_internal.h"
#include "backplane_device.h"
#include "harness.h"
#include "seam/mock_install.h"
#include "ops/ops_internal.h"
#include "seam/seam_internal.h"

/* ---- data prepared before the campaign (nothing here is injected) ------------------------ */

enum { NK = 5, ROWS = 7, COLS = 256, T = 3 };
static const bp_kind kinds[NK] = {BP_KIND_Q4_0, BP_KIND_Q4_K, BP_KIND_Q8_0, BP_KIND_IQ4_XS, BP_KIND_F16};
static uint8_t *wdata[NK];
static size_t wbytes[NK];
static float x[T * COLS], ref[NK][T * ROWS];
static void *gguf_buf;
static size_t gguf_len;
static int64_t gguf_tensors;

static void prepare_ops(void);
static void prepare_cm(void);

static void prepare(void) {
    uint64_t rng = 2024;
    for (int i = 0; i < T * COLS; i++) x[i] = bp_test_randf(&rng);
    for (int k = 0; k < NK; k++) {
        wdata[k] = bp_test_make_weight(kinds[k], ROWS, COLS, &rng, &wbytes[k]);
        CHECK(wdata[k] != NULL, "weight %d", k);
        CHECK_OK(bp_ref_gemm(kinds[k], wdata[k], wbytes[k], ROWS, COLS, x, T, ref[k]));
    }
    prepare_ops();
    prepare_cm();
    gguf_buf = bp_test_read_file("tests/gguf/kinds.gguf", &gguf_len);
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open_memory(gguf_buf, gguf_len, &f));
    gguf_tensors = f ? bp_gguf_tensor_count(f) : 0;
    bp_gguf_close(f);
}

/* Compare one result with the reference; false (and a recorded failure) when off. */
static bool right(int k, const float *y, int64_t t, const char *what, const bp_weight *w) {
    double e = bp_test_nmse(y, ref[k], (size_t)(t * ROWS));
    double tol = bp_test_tolerance(kinds[k], t > 1 ? "gemm" : "matvec");
    CHECK(e <= tol, "%s %s: NMSE %.3g > %.1g after an injected failure (path %s)",
          bp_kind_lookup((uint32_t)kinds[k])->name, what, e, tol, bp_weight_last_path(w));
    return e <= tol;
}

/* ---- workloads ---------------------------------------------------------------------------- */

/* Open the committed kinds.gguf from a file and from memory, look things up, close. */
static bp_status wl_gguf_read(const char *backend) {
    (void)backend;
    bp_gguf *f = NULL;
    bp_status s = bp_gguf_open("tests/gguf/kinds.gguf", &f);
    if (!s) {
        CHECK(bp_gguf_tensor_count(f) == gguf_tensors, "tensor count %lld", (long long)bp_gguf_tensor_count(f));
        CHECK(bp_gguf_find_tensor(f, "Q4_K") != NULL, "Q4_K tensor");
        bp_gguf_close(f);
        f = NULL;
        s = bp_gguf_open_memory(gguf_buf, gguf_len, &f);
    }
    if (!s) CHECK(bp_gguf_tensor_count(f) == gguf_tensors, "tensor count from memory");
    bp_gguf_close(f);
    return s;
}

/* Write a file with every value type and two tensors to memory, reopen it, compare. */
static bp_status wl_gguf_write(const char *backend) {
    (void)backend;
    bp_gguf_writer *w = NULL;
    bp_status s = bp_gguf_writer_create(&w);
    uint32_t u32 = 7;
    static const int32_t arr[] = {1, -2, 3};
    static const char *const strs[] = {"a", "", "bc"};
    int64_t ne[2] = {COLS, ROWS};
    if (!s) s = bp_gguf_writer_add_scalar(w, "c.u32", BP_GGUF_U32, &u32);
    if (!s) s = bp_gguf_writer_add_string(w, "c.str", "hello", 5);
    if (!s) s = bp_gguf_writer_add_array(w, "c.arr", BP_GGUF_I32, arr, 3);
    if (!s) s = bp_gguf_writer_add_string_array(w, "c.strs", strs, 3);
    if (!s) s = bp_gguf_writer_add_tensor(w, "w0", kinds[0], 2, ne, wdata[0], wbytes[0]);
    if (!s) s = bp_gguf_writer_add_tensor(w, "w1", kinds[1], 2, ne, wdata[1], wbytes[1]);
    void *buf = NULL;
    size_t len = 0;
    if (!s) s = bp_gguf_writer_write_memory(w, &buf, &len);
    bp_gguf_writer_free(w);
    bp_gguf *f = NULL;
    if (!s) s = bp_gguf_open_memory(buf, len, &f);
    if (!s) {
        uint64_t v = 0;
        CHECK(bp_gguf_get_u64(f, "c.u32", &v) == BP_OK && v == 7, "c.u32 read back");
        const bp_gguf_tensor *t = bp_gguf_find_tensor(f, "w1");
        CHECK(t && t->bytes == wbytes[1] && !memcmp(t->data, wdata[1], wbytes[1]), "w1 read back");
    }
    bp_gguf_close(f);
    free(buf); /* open_memstream's, as the API says: plain free */
    return s;
}

/* Create weights of every test kind, run a matvec and a GEMM on `backend` (NULL: the seam's
 * choice), check the numbers, free. */
static bp_status wl_matmul(const char *backend) {
    bp_status s = BP_OK;
    for (int k = 0; k < NK && !s; k++) {
        bp_weight *w = NULL;
        float y[T * ROWS];
        s = bp_weight_create(kinds[k], wdata[k], wbytes[k], ROWS, COLS, &w);
        if (!s) s = bp_matvec_on(w, backend, x, y);
        if (!s) right(k, y, 1, "matvec", w);
        if (!s) s = bp_gemm_on(w, backend, x, T, y);
        if (!s) right(k, y, T, "gemm", w);
        bp_weight_free(w);
    }
    return s;
}

/* The op layer (src/ops): a Q8_0 KV cache filled and attended to (prefill t = 3, GQA 4:2), two
 * matmul jobs sharing x (Q4_0 and Q8_0), an RMSNorm; references from the op layer's own
 * reference kernels, made in prepare_ops. */
enum { OH = 4, OKV = 2, OD = 64, OLEN = 40, OT = 3 };
static float okv[OLEN * OKV * OD], oq[OT * OH * OD], oatt_ref[OT * OH * OD], onorm_ref[T * COLS], ogamma[COLS];
static int32_t opos[OT] = {OLEN - 3, OLEN - 2, OLEN - 1};
static const bp_kv_cache_desc ocd = {.n_layers = 1, .n_kv_heads = OKV, .head_dim_k = OD, .head_dim_v = OD,
                                     .capacity = OLEN, .kind_k = BP_KIND_Q8_0, .kind_v = BP_KIND_Q8_0};
static const bp_attn_desc oad = {.n_heads = OH, .n_kv_heads = OKV, .scale = 0.125f, .causal = true};

static void prepare_ops(void) {
    uint64_t rng = 99;
    for (size_t i = 0; i < sizeof okv / sizeof okv[0]; i++) okv[i] = bp_test_randf(&rng);
    for (size_t i = 0; i < sizeof oq / sizeof oq[0]; i++) oq[i] = bp_test_randf(&rng);
    for (int i = 0; i < COLS; i++) ogamma[i] = 1.0f + 0.5f * bp_test_randf(&rng);
    bp_kv_cache *c = NULL;
    CHECK_OK(bp_kv_cache_create(&ocd, &c));
    if (c) CHECK_OK(bp_kv_cache_append(c, 0, okv, okv, OLEN, 0));
    if (c) CHECK_OK(bp_ref_attention(&oad, oq, OT, opos, c, 0, oatt_ref));
    bp_kv_cache_free(c);
    bp_norm_desc nd = {.type = BP_NORM_RMS, .n = COLS, .eps = 1e-6f, .gamma = ogamma};
    bp_ref_norm(&nd, x, T, onorm_ref);
}

static bp_status wl_ops(const char *backend) {
    (void)backend;
    bp_kv_cache *c = NULL;
    float out[OT * OH * OD], yn[T * COLS], y0[T * ROWS], y2[T * ROWS];
    bp_weight *w0 = NULL, *w2 = NULL;
    bp_status s = bp_kv_cache_create(&ocd, &c);
    if (!s) s = bp_kv_cache_append(c, 0, okv, okv, OLEN, 0);
    if (!s) s = bp_attention(&oad, oq, OT, opos, c, 0, out);
    if (!s)
        CHECK(bp_test_nmse(out, oatt_ref, sizeof out / sizeof out[0]) <= bp_test_tolerance(BP_KIND_Q8_0, "attention"),
              "attention after an injected failure: NMSE %.3g", bp_test_nmse(out, oatt_ref, sizeof out / sizeof out[0]));
    if (!s) s = bp_weight_create(kinds[0], wdata[0], wbytes[0], ROWS, COLS, &w0);
    if (!s) s = bp_weight_create(kinds[2], wdata[2], wbytes[2], ROWS, COLS, &w2);
    if (!s) {
        const bp_matmul_job jobs[2] = {{w0, y0}, {w2, y2}};
        s = bp_matmul(x, T, jobs, 2);
    }
    if (!s) {
        CHECK(bp_test_nmse(y0, ref[0], T * ROWS) <= bp_test_tolerance(kinds[0], "jobs"), "job 0 after a failure");
        CHECK(bp_test_nmse(y2, ref[2], T * ROWS) <= bp_test_tolerance(kinds[2], "jobs"), "job 1 after a failure");
    }
    if (!s) s = bp_rms_norm(x, T, COLS, ogamma, 1e-6f, yn);
    if (!s) CHECK(bp_test_nmse(yn, onorm_ref, T * COLS) <= bp_test_tolerance(BP_KIND_F32, "norm"), "norm after a failure");
    bp_weight_free(w0);
    bp_weight_free(w2);
    bp_kv_cache_free(c);
    return s;
}

/* conv2d and MoE (src/ops/conv2d*, src/ops/moe*): a 3x3 conv with GroupNorm + SiLU fused into
 * the input load over a 6x6x32 image (Q8_0 weight), and a 4-expert MoE layer (Q8_0 gate_up and
 * down) run for 3 tokens, top-2; references from their "cpu-ref" paths, made in prepare_cm. */
enum { CM_H = 6, CM_CIN = 32, CM_COUT = 7, CM_E = 4, CM_HD = 64, CM_I = 32, CM_T = 3, CM_K = 2 };
static uint8_t *cm_w, *cm_gu[CM_E], *cm_dn[CM_E];
static size_t cm_wb, cm_gub[CM_E], cm_dnb[CM_E];
static float cm_x[CM_H * CM_H * CM_CIN], cm_conv_ref[CM_H * CM_H * CM_COUT], cm_mx[CM_T * CM_HD],
    cm_moe_ref[CM_T * CM_HD], cm_rw[CM_T * CM_K];
static int32_t cm_ids[CM_T * CM_K] = {0, 3, 1, 1, 2, 0};
static const bp_conv2d_params cm_p = {.h = CM_H, .w = CM_H, .cin = CM_CIN, .cout = CM_COUT, .k = 3, .stride = 1,
                                      .norm = BP_CONV_NORM_GROUP, .groups = 4, .eps = 1e-5f, .silu = true};

static void prepare_cm(void) {
    uint64_t rng = 4242;
    for (size_t i = 0; i < sizeof cm_x / sizeof cm_x[0]; i++) cm_x[i] = bp_test_randf(&rng);
    for (size_t i = 0; i < sizeof cm_mx / sizeof cm_mx[0]; i++) cm_mx[i] = bp_test_randf(&rng);
    for (size_t i = 0; i < sizeof cm_rw / sizeof cm_rw[0]; i++) cm_rw[i] = 0.5f + 0.25f * bp_test_randf(&rng);
    cm_w = bp_test_make_weight(BP_KIND_Q8_0, CM_COUT, 9 * CM_CIN, &rng, &cm_wb);
    for (int e = 0; e < CM_E; e++) {
        cm_gu[e] = bp_test_make_weight(BP_KIND_Q8_0, 2 * CM_I, CM_HD, &rng, &cm_gub[e]);
        cm_dn[e] = bp_test_make_weight(BP_KIND_Q8_0, CM_HD, CM_I, &rng, &cm_dnb[e]);
    }
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, cm_w, cm_wb, CM_COUT, 9 * CM_CIN, &w));
    if (w) CHECK_OK(bp_conv2d_on(w, "cpu-ref", &cm_p, cm_x, cm_conv_ref));
    bp_weight_free(w);
    bp_moe *m = NULL;
    CHECK_OK(bp_moe_upload(CM_E, CM_HD, CM_I, BP_KIND_Q8_0, (const void *const *)cm_gu, cm_gub, BP_KIND_Q8_0,
                           (const void *const *)cm_dn, cm_dnb, &m));
    if (m) CHECK_OK(bp_moe_run_on(m, "cpu-ref", cm_mx, CM_T, CM_K, cm_ids, cm_rw, cm_moe_ref));
    bp_moe_free(m);
}

static bp_status wl_conv_moe(const char *backend) {
    (void)backend;
    float y[CM_H * CM_H * CM_COUT], my[CM_T * CM_HD] = {0};
    bp_weight *w = NULL;
    bp_moe *m = NULL;
    bp_status s = bp_weight_create(BP_KIND_Q8_0, cm_w, cm_wb, CM_COUT, 9 * CM_CIN, &w);
    if (!s) s = bp_conv2d(w, &cm_p, cm_x, y);
    if (!s)
        CHECK(bp_test_nmse(y, cm_conv_ref, sizeof y / sizeof y[0]) <= bp_test_tolerance(BP_KIND_Q8_0, "conv2d_gn"),
              "conv2d after an injected failure: NMSE %.3g", bp_test_nmse(y, cm_conv_ref, sizeof y / sizeof y[0]));
    if (!s)
        s = bp_moe_upload(CM_E, CM_HD, CM_I, BP_KIND_Q8_0, (const void *const *)cm_gu, cm_gub, BP_KIND_Q8_0,
                          (const void *const *)cm_dn, cm_dnb, &m);
    if (!s) s = bp_moe_run(m, cm_mx, CM_T, CM_K, cm_ids, cm_rw, my);
    if (!s)
        CHECK(bp_test_nmse(my, cm_moe_ref, CM_T * CM_HD) <= bp_test_tolerance(BP_KIND_Q8_0, "moe"),
              "MoE after an injected failure: NMSE %.3g", bp_test_nmse(my, cm_moe_ref, CM_T * CM_HD));
    bp_moe_free(m);
    bp_weight_free(w);
    return s;
}

typedef struct workload {
    const char *name;
    bp_status (*run)(const char *backend);
    const char *backend; /* passed to run: NULL = the seam's choice; a name = forced */
    bool mock;           /* install the mock backend first in the order for this row */
} workload;

static const workload workloads[] = {
    {"gguf read", wl_gguf_read, NULL, false},
    {"gguf write + reopen", wl_gguf_write, NULL, false},
    {"matvec/gemm, CPU", wl_matmul, "cpu", false},
    {"matvec/gemm, seam's choice", wl_matmul, NULL, false},
    {"matvec/gemm, seam with the mock first", wl_matmul, NULL, true},
    {"matvec/gemm, mock forced", wl_matmul, "mock", true},
    {"matvec/gemm, Vulkan forced", wl_matmul, "vulkan", false},
    {"matvec/gemm, OpenCL forced", wl_matmul, "opencl", false},
    {"matvec/gemm, CUDA forced", wl_matmul, "cuda", false},
    {"ops: KV cache, attention, jobs, norm", wl_ops, NULL, false},
    {"ops: conv2d (GroupNorm + SiLU), MoE", wl_conv_moe, NULL, false},
};

/* ---- the campaign ----------------------------------------------------------------------- */

enum { MAX_SITES = 1024 };
static const void *sites[MAX_SITES];
static int n_sites;
static long long total_injected, total_runs, leaks;

static void note_site(const void *p) {
    if (!p) return;
    for (int i = 0; i < n_sites; i++)
        if (sites[i] == p) return;
    if (n_sites < MAX_SITES) sites[n_sites++] = p;
}

/* Is a backend forced by name usable here? NULL (the seam) always is. */
static bool usable(const char *backend, char *why, size_t len) {
    if (!backend || !strcmp(backend, "cpu") || !strcmp(backend, "mock")) return true;
    bp_backend_id id;
    if (bp_backend_by_name(backend, &id) || !bp_backend_dispatch_of(id)) {
        snprintf(why, len, "not built");
        return false;
    }
    bp_weight *w = NULL;
    float y[ROWS];
    bp_status s = bp_weight_create(kinds[0], wdata[0], wbytes[0], ROWS, COLS, &w);
    if (!s) s = bp_matvec_on(w, backend, x, y);
    snprintf(why, len, "%s", s ? bp_last_error() : "");
    bp_weight_free(w);
    return s == BP_OK;
}

static void campaign(const workload *wl, long stride) {
    char why[256] = "";
    if (!usable(wl->backend, why, sizeof why)) {
        if (!strcmp(why, "not built")) {
            fprintf(stderr, "%-40s not built into this binary: not run\n", wl->name);
            return;
        }
        BP_SKIP("%s: %s is built but cannot run here: %s", wl->name, wl->backend, why);
        return;
    }
    if (wl->mock) {
        bp_mock_backend_config cfg;
        bp_mock_backend_config_for(&cfg, kinds, NK, true);
        CHECK_OK(bp_mock_backend_install(&cfg, 0));
    }
    /* Warm-up: lazily made state (the CPU pool, a device, compiled kernels) exists from here
     * on; the count run measures what the workload itself allocates. */
    CHECK_OK(wl->run(wl->backend));
    bp_alloc_count_reset();
    CHECK_OK(wl->run(wl->backend));
    const long long n = bp_alloc_count();
    char path_before[160];
    {
        bp_weight *w = NULL;
        float y[ROWS];
        CHECK_OK(bp_weight_create(kinds[1], wdata[1], wbytes[1], ROWS, COLS, &w));
        if (wl->run == wl_matmul) CHECK_OK(bp_matvec_on(w, wl->backend, x, y));
        snprintf(path_before, sizeof path_before, "%s", bp_weight_last_path(w));
        bp_weight_free(w);
    }
    long long injected = 0, errors = 0, fallbacks = 0, oks = 0, bad = 0;
    for (int persistent = 0; persistent < 2; persistent++) {
        for (long long i = 1; i <= n; i += stride) {
            const size_t live0 = bp_ledger_live_count(NULL);
            const long long host0 = bp_alloc_live();
            const unsigned long long fb0 = bp_fallback_total();
            bp_alloc_count_reset();
            bp_clear_error();
            bp_alloc_fail_after(i, persistent);
            bp_status s = wl->run(wl->backend);
            bp_alloc_fail_after(0, false);
            const long long inj = bp_alloc_injected();
            injected += inj;
            note_site(bp_alloc_last_injected_site());
            total_runs++;
            if (s == BP_OK) {
                oks++;
                if (bp_fallback_total() > fb0) fallbacks++;
            } else {
                errors++;
                const char *e = bp_last_error();
                bool clear = s == BP_E_NOMEM ||
                             (s == BP_E_DEVICE && wl->backend && (strstr(e, "alloc") || strstr(e, "memory")));
                CHECK(clear && e[0], "%s: failing allocation %lld%s: %s: '%s' is not a clear out-of-memory error",
                      wl->name, i, persistent ? " (persistent)" : "", bp_status_name(s), e);
                bad += !clear;
            }
            CHECK(inj > 0 || s == BP_OK, "%s: allocation %lld: no failure injected, yet %s", wl->name, i,
                  bp_status_name(s));
            /* Leaks: device allocations (the ledger) and host blocks through the door, exact
             * counts (not heap bytes, which a driver's pools and the C library's arenas move). */
            const size_t live1 = bp_ledger_live_count(NULL);
            const long long host1 = bp_alloc_live();
            if (live1 != live0 || host1 != host0) {
                leaks++;
                CHECK(0, "%s: failing allocation %lld%s: %zu live device allocations (%zu before), %lld live "
                      "host blocks (%lld before)", wl->name, i, persistent ? " (persistent)" : "", live1, live0,
                      host1, host0);
                if (live1 != live0) bp_ledger_report(NULL, stderr);
            }
        }
    }
    /* Nothing half-made: the same path as before the campaign. */
    CHECK_OK(wl->run(wl->backend));
    if (wl->run == wl_matmul) {
        bp_weight *w = NULL;
        float y[ROWS];
        CHECK_OK(bp_weight_create(kinds[1], wdata[1], wbytes[1], ROWS, COLS, &w));
        CHECK_OK(bp_matvec_on(w, wl->backend, x, y));
        CHECK(!strcmp(bp_weight_last_path(w), path_before), "%s: after the campaign the path is '%s', was '%s'",
              wl->name, bp_weight_last_path(w), path_before);
        bp_weight_free(w);
    }
    if (wl->mock) bp_mock_backend_uninstall();
    total_injected += injected;
    printf("%-40s %4lld allocations, %5lld failures injected: %lld ok (%lld after a counted fallback), "
           "%lld clear errors, %lld unclear\n", wl->name, n, injected, oks, fallbacks, errors, bad);
}

/* ---- cold: failures during first use ------------------------------------------------------
 * The warm campaign above fails what a workload allocates once the process has warmed up. What
 * is made once per process -- the CPU pool and its scratch, a device and its context, compiled
 * kernels, tables uploaded at first use -- is reached only in a fresh process. So for each row
 * and each failure point the test runs itself again (/proc/self/exe --cold ROW N PERSISTENT):
 * the child prepares its data, arms the failure, runs the row once and judges it as above, then
 * runs it again undisturbed, which must succeed on the path an undisturbed process takes: a
 * transient out-of-memory at first use must not disable a backend or leave it half-made for
 * the rest of the process. Leaks: under `make sanitize` LeakSanitizer checks each child. */
static int cold_child(int row, long long n, bool persistent) {
    const workload *wl = &workloads[row];
    bp_backend_id id;
    if (wl->backend && !bp_backend_by_name(wl->backend, &id) && id != BP_BACKEND_CPU && !bp_backend_dispatch_of(id))
        return 77; /* not built */
    prepare();
    if (wl->mock) {
        bp_mock_backend_config cfg;
        bp_mock_backend_config_for(&cfg, kinds, NK, true);
        CHECK_OK(bp_mock_backend_install(&cfg, 0));
    }
    bp_alloc_count_reset();
    bp_alloc_fail_after(n, persistent);
    bp_status s = wl->run(wl->backend);
    bp_alloc_fail_after(0, false);
    const long long count = bp_alloc_count(), inj = bp_alloc_injected();
    if (n > 0 && s) {
        const char *e = bp_last_error();
        CHECK(s == BP_E_NOMEM || (s == BP_E_DEVICE && wl->backend && (strstr(e, "alloc") || strstr(e, "memory"))),
              "%s, cold, failing allocation %lld%s: %s: '%s' is not a clear out-of-memory error", wl->name, n,
              persistent ? " (persistent)" : "", bp_status_name(s), e);
    } else if (n == 0 && s) { /* built but cannot run here: the warm campaign says SKIP for it */
        if (wl->mock) bp_mock_backend_uninstall();
        return 77;
    }
    s = wl->run(wl->backend); /* the recovery run */
    CHECK(s == BP_OK, "%s, cold, after failing allocation %lld%s the next run fails: %s: %s", wl->name, n,
          persistent ? " (persistent)" : "", bp_status_name(s), bp_last_error());
    char path[160] = "-";
    if (wl->run == wl_matmul) {
        bp_weight *w = NULL;
        float y[ROWS];
        if (!bp_weight_create(kinds[1], wdata[1], wbytes[1], ROWS, COLS, &w) && !bp_matvec_on(w, wl->backend, x, y))
            snprintf(path, sizeof path, "%s", bp_weight_last_path(w));
        bp_weight_free(w);
    }
    if (wl->mock) bp_mock_backend_uninstall();
    printf("cold %lld %lld %s\n", count, inj, path);
    fflush(stdout);
    int rc = bp_test_finish();
    return rc == 1 ? 1 : (n > 0 && inj == 0) ? 3 : 0;
}

/* One child; its status, allocation count and path. */
static int cold_run(int row, long long n, bool persistent, long long *count, char *path, size_t path_len,
                    char *out, size_t out_len) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "exec /proc/%d/exe --cold %d %lld %d 2>&1", (int)getpid(), row, n, (int)persistent);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t used = 0;
    out[0] = '\0';
    char line[512];
    *count = -1;
    while (fgets(line, sizeof line, p)) {
        long long c, inj;
        char pth[256];
        if (sscanf(line, "cold %lld %lld %255[^\n]", &c, &inj, pth) == 3) {
            *count = c;
            snprintf(path, path_len, "%s", pth);
        } else if (used + strlen(line) < out_len) {
            memcpy(out + used, line, strlen(line) + 1);
            used += strlen(line);
        }
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* A row that reaches a driver (lavapipe, PoCL) costs ~0.3 s per fresh process here, the others
 * ~0.01-0.05 s: by default (benign failures only) driver rows test every 5th failure point
 * after the first 8, mock rows (whose allocations the warm campaign covers one by one) every
 * 3rd, the rest all of them; BP_ALLOC_CAMPAIGN_COLD_STRIDE=1 tests every point of every row,
 * benign and persistent (the README's figure). */
static bool reaches_driver(const workload *wl) {
    if (wl->run == wl_gguf_read || wl->run == wl_gguf_write || wl->mock) return false;
    return !wl->backend || !strcmp(wl->backend, "vulkan") || !strcmp(wl->backend, "opencl");
}

static void cold_campaign(int row, long stride) {
    const workload *wl = &workloads[row];
    if (!getenv("BP_ALLOC_CAMPAIGN_COLD_STRIDE")) stride *= reaches_driver(wl) ? 5 : wl->mock ? 3 : 1;
    long long count;
    char path0[256], path[256], out[4096];
    int rc = cold_run(row, 0, false, &count, path0, sizeof path0, out, sizeof out);
    if (rc == 77 || count < 0) { /* not built or cannot run here: the warm campaign says so */
        return;
    }
    CHECK(rc == 0, "%s, cold, undisturbed: exit %d\n%s", wl->name, rc, out);
    long long runs = 0, bad = 0;
    /* Persistent failures from a cold start only in the full sweep (the warm campaign takes them
     * all): by default the cold part stays a few seconds. */
    const int modes = getenv("BP_ALLOC_CAMPAIGN_COLD_STRIDE") ? 2 : 1;
    for (int persistent = 0; persistent < modes; persistent++)
        /* Every one of the first 8 points (a device's open and first tables), then the stride. */
        for (long long i = 1; i <= count; i += i < 8 ? 1 : stride) {
            long long c;
            rc = cold_run(row, i, persistent, &c, path, sizeof path, out, sizeof out);
            runs++;
            total_runs++;
            total_injected++;
            if (rc == 3) break; /* fewer allocations this time (a cache): past the end */
            bad += rc != 0 || strcmp(path, path0);
            CHECK(rc == 0, "%s, cold, failing allocation %lld%s: exit %d\n%s", wl->name, i,
                  persistent ? " (persistent)" : "", rc, out);
            CHECK(!strcmp(path, path0), "%s, cold, after failing allocation %lld%s the path is '%s', undisturbed '%s'",
                  wl->name, i, persistent ? " (persistent)" : "", path, path0);
        }
    printf("%-40s %4lld allocations from a cold start, %lld fresh processes (stride %ld), %lld wrong\n", wl->name,
           count, runs, stride, bad);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--cold")) {
        /* The CPU's batch-1 kernel for some kinds is picked by a first-use timing (cpu.c
         * time_pick): noise can pick the other kernel in another process, and the cold runs
         * compare paths across processes. Pinned to the main kernel here (a failed allocation
         * inside the timing itself runs the main kernel for that call and stores nothing). */
        bp_cpu_set_decode_pick(1);
        setenv("BACKPLANE_VULKAN", "1", 0);
        setenv("BACKPLANE_OPENCL", "1", 0);
        FILE *log = tmpfile();
        bp_seam_set_log(log);
        return cold_child(atoi(argv[2]), atoll(argv[3]), atoi(argv[4]) != 0);
    }
    /* The GPU-API backends built here are CPU implementations on this machine and off by
     * default: force them on so the campaign reaches their allocations (an explicit value in the
     * environment wins: `make valgrind` runs with them off). */
    setenv("BACKPLANE_VULKAN", "1", 0);
    setenv("BACKPLANE_OPENCL", "1", 0);
    FILE *log = tmpfile(); /* the seam's one-line-per-cause fallback log */
    bp_seam_set_log(log);
    const char *st = getenv("BP_ALLOC_CAMPAIGN_STRIDE");
    long stride = st && atol(st) > 0 ? atol(st) : bp_test_quick() ? 3 : 1;
    /* Cold first: the children are fresh processes, whatever this one has made. */
    const char *cs = getenv("BP_ALLOC_CAMPAIGN_COLD_STRIDE");
    long cold_stride = cs && atol(cs) > 0 ? atol(cs) : bp_test_quick() ? 8 : 1;
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++)
        if (argc < 2 || strstr(workloads[i].name, argv[1])) cold_campaign((int)i, cold_stride);
    prepare();
    /* Warm every path first: process-wide state made at first use (the CPU pool, a device, its
     * scratch buffers and tables, compiled kernels) is not a leak of the run that made it, and a
     * backend first reached as another's fallback would otherwise make it mid-campaign. */
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
        char why[256];
        if (!usable(workloads[i].backend, why, sizeof why)) continue;
        if (workloads[i].mock) {
            bp_mock_backend_config cfg;
            bp_mock_backend_config_for(&cfg, kinds, NK, true);
            CHECK_OK(bp_mock_backend_install(&cfg, 0));
        }
        CHECK_OK(workloads[i].run(workloads[i].backend));
        if (workloads[i].mock) bp_mock_backend_uninstall();
    }
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++)
        if (argc < 2 || strstr(workloads[i].name, argv[1])) campaign(&workloads[i], stride); /* argv[1]: a filter */
    if (getenv("BP_ALLOC_CAMPAIGN_SITES")) { /* for addr2line -f -e <this program> <offset>... */
        extern char __executable_start;
        for (int i = 0; i < n_sites; i++)
            printf("site 0x%lx\n", (unsigned long)((const char *)sites[i] - &__executable_start - 1));
    }
    printf("allocation-failure campaign: %lld runs, %lld failures injected, %d distinct allocation sites failed, "
           "%lld leaks\n", total_runs, total_injected, n_sites, leaks);
    bp_seam_set_log(NULL);
    fclose(log);
    for (int k = 0; k < NK; k++) free(wdata[k]);
    free(gguf_buf);
    return bp_test_finish();
}
