/* Threads: 8 threads run matvec and GEMM at once, through every backend built here (the CPU, the
 * mock, Vulkan and OpenCL forced on with BACKPLANE_VULKAN=1 / BACKPLANE_OPENCL=1, and the seam's
 * own choice), on weights all threads share and on weights each thread makes for itself. The
 * threads start together at a barrier before anything in the process has run an op, so backend
 * probing (the mock's probe: the environment leaves it to the probe), device creation, kernel
 * compilation, the CPU pool's start and the weights' lazily made device copies and repacked
 * layouts all race their first use. Every result is checked against the CPU reference computed
 * before the threads start; the mock's probe must have run exactly once; the device ledger must
 * hold nothing of the weights afterwards. Built with -DBP_TSAN=ON (`make tsan`), ThreadSanitizer
 * checks every access on the way. BP_TEST_QUICK=1 (valgrind, TSan) runs fewer rounds. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "testing/tolerance.h"
#include "backplane_device.h"
#include "harness.h"
#include "seam/mock_install.h"
#include "seam/seam_internal.h"

enum { NTHREADS = 8, NK = 3, ROWS = 24, COLS = 256, T = 4 };
static const bp_kind kinds[NK] = {BP_KIND_Q4_K, BP_KIND_Q8_0, BP_KIND_F16};
static uint8_t *wdata[NK];
static size_t wbytes[NK];
static bp_weight *shared[NK];
static float x[T * COLS], ref[NK][T * ROWS];

static const char *routes[8]; /* NULL = the seam's choice */
static int n_routes;
static int rounds = 12;

static pthread_barrier_t start;
static atomic_int wrong, errors;

typedef struct arg {
    int id;
    char first_error[256];
} arg;

static void one(arg *a, bp_weight *w, int k, const char *route, bool gemm) {
    float y[T * ROWS];
    const int64_t t = gemm ? T : 1;
    bp_status s = gemm ? bp_gemm_on(w, route, x, T, y) : bp_matvec_on(w, route, x, y);
    if (s) {
        if (!atomic_fetch_add(&errors, 1))
            snprintf(a->first_error, sizeof a->first_error, "%s %s on %s: %s", bp_kind_lookup((uint32_t)kinds[k])->name,
                     gemm ? "gemm" : "matvec", route ? route : "seam", bp_last_error());
        return;
    }
    double e = bp_test_nmse(y, ref[k], (size_t)(t * ROWS));
    double tol = bp_tolerance_nmse(kinds[k], gemm ? "gemm" : "matvec");
    if (!(e <= tol) && !atomic_fetch_add(&wrong, 1))
        snprintf(a->first_error, sizeof a->first_error, "%s %s on %s: NMSE %.3g (path %s)",
                 bp_kind_lookup((uint32_t)kinds[k])->name, gemm ? "gemm" : "matvec", route ? route : "seam", e,
                 bp_weight_last_path(w));
}

static void *worker(void *p) {
    arg *a = p;
    pthread_barrier_wait(&start);
    /* Probing races first use: every thread asks, most of them while another is deciding. */
    (void)bp_backend_enabled(BP_BACKEND_VULKAN, NULL);
    bp_weight *own[NK] = {0};
    for (int k = 0; k < NK; k++)
        if (bp_weight_create(kinds[k], wdata[k], wbytes[k], ROWS, COLS, &own[k])) atomic_fetch_add(&errors, 1);
    for (int r = 0; r < rounds; r++) {
        const char *route = routes[(a->id + r) % n_routes];
        for (int k = 0; k < NK; k++) {
            one(a, shared[k], k, route, (r + k) & 1);
            if (own[k]) one(a, own[k], k, route, !((r + k) & 1));
        }
    }
    for (int k = 0; k < NK; k++) bp_weight_free(own[k]);
    return NULL;
}

#if defined(__SANITIZE_ADDRESS__)
/* PoCL's worker threads install an alternate signal stack of their own (heap memory); when such a
 * thread exits, ASan unmaps what sigaltstack names as if it were its own and aborts ("unable to
 * unmap", seen here with PoCL 3.1 and gcc 12's ASan, only when several threads run OpenCL ops).
 * ASan's own alternate stack is not needed by this test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "use_sigaltstack=0"; }
#endif

int main(void) {
    setenv("BACKPLANE_VULKAN", "1", 0);
    setenv("BACKPLANE_OPENCL", "1", 0);
    unsetenv("BACKPLANE_MOCK"); /* the mock's probe decides, once, while threads race for it */
    if (bp_test_quick()) rounds = 4;
    uint64_t rng = 77;
    for (int i = 0; i < T * COLS; i++) x[i] = bp_test_randf(&rng);
    for (int k = 0; k < NK; k++) {
        wdata[k] = bp_test_make_weight(kinds[k], ROWS, COLS, &rng, &wbytes[k]);
        CHECK_OK(bp_ref_gemm(kinds[k], wdata[k], wbytes[k], ROWS, COLS, x, T, ref[k]));
        CHECK_OK(bp_weight_create(kinds[k], wdata[k], wbytes[k], ROWS, COLS, &shared[k]));
    }
    /* The mock first in the order, claiming Q8_0 only: the seam's walk passes it for the other
     * kinds (to Vulkan, forced on, when built). */
    bp_mock_backend_config cfg;
    bp_mock_backend_config_for(&cfg, &kinds[1], 1, true);
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    routes[n_routes++] = NULL;
    routes[n_routes++] = "cpu";
    routes[n_routes++] = "cpu-ref";
    const char *gpus[] = {"vulkan", "opencl"};
    for (int g = 0; g < 2; g++) {
        bp_backend_id id;
        if (bp_backend_by_name(gpus[g], &id) || !bp_backend_dispatch_of(id)) continue; /* not built */
        char env[32];
        snprintf(env, sizeof env, "BACKPLANE_%s", g ? "OPENCL" : "VULKAN");
        if (bp_seam_env_parse(getenv(env), gpus[g]) == BP_ENV_OFF) {
            BP_SKIP("%s is built but %s=%s turns it off", gpus[g], env, getenv(env));
            continue;
        }
        routes[n_routes++] = gpus[g];
    }
    fprintf(stderr, "%d threads x %d rounds over the routes: seam (the mock first, for Q8_0)", NTHREADS, rounds);
    for (int r = 1; r < n_routes; r++) fprintf(stderr, ", %s", routes[r]);
    fputc('\n', stderr);

    pthread_barrier_init(&start, NULL, NTHREADS);
    pthread_t th[NTHREADS];
    arg args[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        args[i] = (arg){.id = i};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < NTHREADS; i++)
        if (args[i].first_error[0]) fprintf(stderr, "thread %d: %s\n", i, args[i].first_error);
    CHECK(atomic_load(&errors) == 0, "%d ops returned an error", atomic_load(&errors));
    CHECK(atomic_load(&wrong) == 0, "%d ops gave wrong numbers", atomic_load(&wrong));
    CHECK(bp_mock_backend_probe_calls() == 1, "the mock's probe ran %d times, want once",
          bp_mock_backend_probe_calls());
    /* A Vulkan/OpenCL built here but unable to run makes every op on it an error above; name it. */
    for (int r = 3; r < n_routes; r++) {
        bp_backend_id id;
        const char *why = "";
        bp_backend_by_name(routes[r], &id);
        CHECK(bp_backend_enabled(id, &why), "%s is built but not enabled: %s", routes[r], why);
    }
    CHECK(bp_mock_backend_ops() > 0, "the seam never reached the mock");
    for (int k = 0; k < NK; k++) bp_weight_free(shared[k]);
    CHECK(bp_ledger_live_count(bp_mock_backend_device()) == 0, "mock ledger: %zu live",
          bp_ledger_live_count(bp_mock_backend_device()));
    bp_mock_backend_uninstall();
    for (int k = 0; k < NK; k++) free(wdata[k]);
    return bp_test_finish();
}
