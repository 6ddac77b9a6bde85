/* The non-finite activation policy (include/backplane.h, at bp_matvec): an x holding NaN or
 * +/-Inf runs the CPU reference, so every backend and kernel path gives the reference's IEEE
 * pattern and says so in bp_weight_last_path. The bug it prevents: the optimized CPU path
 * quantized x to 8 bits and turned one NaN into 33 finite outputs (issue 10).
 *
 * For every weight kind, matvec and GEMM, NaN / +Inf / -Inf at the first, a middle and the last
 * column (and in the last input row of a GEMM only), through every way an op reaches a backend
 * built here: the seam's own choice (Vulkan and OpenCL forced on with BACKPLANE_VULKAN=1 /
 * BACKPLANE_OPENCL=1, so they are first in the walk), each one forced by name, the CPU forced on
 * every ISA path this machine has, and the mock backend installed first in the order. Each result
 * must equal bp_ref_gemm's bit for bit (NaN where it has NaN), every output of a row that saw a
 * non-finite value must be non-finite, and finite inputs must not take the reference detour. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"
#include "seam/mock_install.h"
#include "seam/seam_internal.h"

enum { ROWS = 5, T = 3, MAX_COLS = 512 };
static const char *const NF_PATH = "CPU reference (non-finite input)";

typedef struct pattern {
    const char *name;
    float v[2];
    int where[2]; /* 0: first column, 1: middle, 2: last; -1: unused */
} pattern;

static const pattern patterns[] = {
    {"NaN at column 0", {NAN, 0}, {0, -1}},
    {"+Inf mid-row", {INFINITY, 0}, {1, -1}},
    {"-Inf in the last column", {-INFINITY, 0}, {2, -1}},
    {"NaN and +Inf", {NAN, INFINITY}, {2, 0}},
    {"+Inf and -Inf", {INFINITY, -INFINITY}, {0, 2}},
};

/* Equal as IEEE values, NaN equal to NaN (the payload may differ between paths). */
static bool same(float a, float b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }

static int cases;

/* One op on `route` ("seam": bp_matvec/bp_gemm; else bp_*_on by name) with pattern p. */
static void check_one(bp_weight *w, const uint8_t *wd, size_t bytes, int64_t cols, const char *route,
                      const char *label, const pattern *p, bool gemm) {
    const char *kn = bp_kind_lookup((uint32_t)w->kind)->name;
    uint64_t rng = 99;
    const int64_t t = gemm ? T : 1;
    float x[T * MAX_COLS], ref[T * ROWS], got[T * ROWS];
    for (int64_t i = 0; i < t * cols; i++) x[i] = bp_test_randf(&rng);
    float *last = x + (t - 1) * cols; /* a GEMM's non-finite values sit in its last row only */
    for (int j = 0; j < 2; j++) {
        if (p->where[j] < 0) continue;
        int64_t c = p->where[j] == 0 ? 0 : p->where[j] == 1 ? cols / 2 : cols - 1;
        last[c] = p->v[j];
    }
    for (int64_t i = 0; i < t * ROWS; i++) got[i] = 12345.0f;
    CHECK_OK(bp_ref_gemm(w->kind, wd, bytes, ROWS, cols, x, t, ref));
    const char *be = strcmp(route, "seam") ? route : NULL;
    bp_status s = gemm ? bp_gemm_on(w, be, x, t, got) : bp_matvec_on(w, be, x, got);
    CHECK(s == BP_OK, "%s %s %s %s: %s: %s", label, kn, gemm ? "gemm" : "matvec", p->name, bp_status_name(s),
          bp_last_error());
    /* cpu-ref is the reference already and names itself so. */
    const char *want = strcmp(route, "cpu-ref") ? NF_PATH : "CPU reference";
    CHECK(!strncmp(bp_weight_last_path(w), want, strlen(want)), "%s %s %s: path '%s', want '%s'", label, kn,
          p->name, bp_weight_last_path(w), want);
    int bad = 0, finite = 0;
    for (int64_t i = 0; i < t * ROWS; i++) {
        bad += !same(got[i], ref[i]);
        finite += i >= (t - 1) * ROWS && isfinite(got[i]);
    }
    CHECK(!bad, "%s %s %s %s: %d of %lld outputs differ from the reference (got[last] %g, ref %g)", label, kn,
          gemm ? "gemm" : "matvec", p->name, bad, (long long)(t * ROWS), (double)got[t * ROWS - 1],
          (double)ref[t * ROWS - 1]);
    CHECK(!finite, "%s %s %s: %d outputs of the non-finite row are finite", label, kn, p->name, finite);
    for (int64_t i = 0; gemm && i < (t - 1) * ROWS; i++)
        if (!isfinite(got[i])) {
            CHECK(0, "%s %s gemm %s: output %lld of a finite input row is %g", label, kn, p->name, (long long)i,
                  (double)got[i]);
            break;
        }
    cases++;
}

/* Every kind x pattern x {matvec, gemm} on one route. */
static void check_route(const char *route, const char *label) {
    uint64_t rng = 7;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
        int64_t cols = ki->block_elems == 1 ? 67 : ki->block_elems * (ki->block_elems <= 64 ? 3 : 2);
        size_t bytes = 0;
        uint8_t *wd = bp_test_make_weight(ki->kind, ROWS, cols, &rng, &bytes);
        bp_weight *w = NULL;
        CHECK(wd != NULL, "%s: no weight", ki->name);
        if (wd) CHECK_OK(bp_weight_create(ki->kind, wd, bytes, ROWS, cols, &w));
        for (size_t p = 0; w && p < sizeof patterns / sizeof patterns[0]; p++)
            for (int g = 0; g < 2; g++) check_one(w, wd, bytes, cols, route, label, &patterns[p], g);
        bp_weight_free(w);
        free(wd);
    }
}

/* Finite input on the route: it must run there (not on the reference detour); false (with the
 * reason) when the backend cannot run on this machine. */
static bool route_works(const char *route, char *why, size_t why_len) {
    uint64_t rng = 3;
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(BP_KIND_Q8_0, ROWS, 64, &rng, &bytes);
    bp_weight *w = NULL;
    float x[T * 64], y[T * ROWS];
    for (int i = 0; i < T * 64; i++) x[i] = bp_test_randf(&rng);
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, wd, bytes, ROWS, 64, &w));
    const char *be = strcmp(route, "seam") ? route : NULL;
    bp_status s = bp_matvec_on(w, be, x, y);
    if (!s) s = bp_gemm_on(w, be, x, T, y);
    snprintf(why, why_len, "%s", s ? bp_last_error() : "");
    if (!s)
        CHECK(strcmp(bp_weight_last_path(w), NF_PATH), "%s: finite input took the non-finite detour", route);
    bp_weight_free(w);
    free(wd);
    return s == BP_OK;
}

int main(void) {
    /* Before anything decides: the GPU-API backends built here forced on (they are CPU
     * implementations here and off by default), so they are first in the seam's walk; an
     * explicit BACKPLANE_VULKAN / BACKPLANE_OPENCL in the environment (0 for `make valgrind`)
     * wins, and the test then says SKIP for that backend. */
    setenv("BACKPLANE_VULKAN", "1", 0);
    setenv("BACKPLANE_OPENCL", "1", 0);
    char why[256];

    check_route("seam", "seam");
    check_route("cpu-ref", "cpu-ref");
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) continue;
        CHECK_OK(bp_cpu_isa_force((bp_cpu_isa)isa));
        char label[48];
        snprintf(label, sizeof label, "cpu %s", bp_cpu_isa_name((bp_cpu_isa)isa));
        CHECK(route_works("cpu", why, sizeof why), "cpu: %s", why);
        check_route("cpu", label);
    }
    for (int b = 0; b < BP_BACKEND_CPU; b++) {
        if (!bp_backend_dispatch_of((bp_backend_id)b)) continue; /* not built: nothing to run */
        const char *name = bp_backend_name((bp_backend_id)b);
        if (!route_works(name, why, sizeof why)) {
            BP_SKIP("%s is built but cannot run here: %s", bp_backend_display_name((bp_backend_id)b), why);
            continue;
        }
        check_route(name, name);
    }

    /* The mock backend, first in the order, claiming every weight kind with a GEMM. */
    bp_kind all[64];
    int n = 0;
    for (int i = 0; i < bp_kind_table_size() && n < 64; i++)
        if (bp_kind_at(i)->role == BP_ROLE_W) all[n++] = bp_kind_at(i)->kind;
    bp_mock_backend_config cfg;
    bp_mock_backend_config_for(&cfg, all, n, true);
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    CHECK(route_works("mock", why, sizeof why), "mock: %s", why);
    int ops0 = bp_mock_backend_ops();
    check_route("mock", "mock");
    check_route("seam", "seam with the mock first");
    CHECK(bp_mock_backend_ops() == ops0, "the mock ran %d ops on non-finite input", bp_mock_backend_ops() - ops0);
    bp_mock_backend_uninstall();

    fprintf(stderr, "%d non-finite cases, every one the reference's pattern\n", cases);
    return bp_test_finish();
}
