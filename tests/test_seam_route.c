/* Routing (issue 17) through the mock backend with a fake device:
 *  - a probe that finds only a CPU implementation does not enable the backend (the reason says
 *    so and names the env switch); BACKPLANE_MOCK=1 forces it, and forced it takes every shape;
 *  - the cost model routes small shapes to the CPU and large ones to the device: the expected
 *    side of the crossover is computed here from the kind's row size (bp_kind_row_bytes) and the
 *    fake rates, not from src/backend/cost.c;
 *  - bp_route (what `backplane probe --rows/--cols/--batch` prints) and the real dispatch agree
 *    on every kind for several shapes, also under BACKPLANE_MOCK_MIN_WORK;
 *  - strict mode: a launch error is returned as BP_E_FALLBACK naming op, kind, shape, backend
 *    and cause, and nothing runs on the CPU (the output keeps its NaN sentinel);
 *  - a lost device (the mock's sticky fault) disables the backend for the process: every later
 *    op it would have taken is a counted fallback naming the loss, and the mock is not asked;
 *  - the backend preference: prefer, force, "cpu", BACKPLANE_BACKEND, and the one-line report. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testing/tolerance.h"
#include "harness.h"
#include "cpu/cpu.h"
#include "seam/mock_install.h"

static FILE *logf_;

static const char *log_text(void) {
    static char buf[8192];
    rewind(logf_);
    size_t n = fread(buf, 1, sizeof buf - 1, logf_);
    buf[n] = '\0';
    fseek(logf_, 0, SEEK_END);
    return buf;
}

/* Every weight kind, with a GEMM: the mock claims them all. */
static bp_mock_backend_config all_kinds(void) {
    bp_kind ks[64];
    int n = 0;
    for (int i = 0; i < bp_kind_table_size(); i++)
        if (bp_kind_at(i)->role == BP_ROLE_W) ks[n++] = bp_kind_at(i)->kind;
    bp_mock_backend_config cfg;
    bp_mock_backend_config_for(&cfg, ks, n, true);
    return cfg;
}

static int mock_slot(void) { return bp_seam_slot_find("mock"); }

/* One weight of kind k, rows x cols, with inputs for up to max_t tokens, reused across cases. */
enum { MAX_T = 3 };
typedef struct tw {
    bp_kind kind;
    int64_t rows, cols;
    uint8_t *wd;
    float *x, *y;
    bp_weight *w;
} tw;

static bool tw_make(tw *m, bp_kind k, int64_t rows, int64_t cols, int64_t max_t, uint64_t *rng) {
    size_t bytes;
    memset(m, 0, sizeof *m);
    m->kind = k, m->rows = rows, m->cols = cols;
    m->wd = bp_test_make_weight(k, rows, cols, rng, &bytes);
    m->x = calloc((size_t)(max_t * cols), sizeof *m->x);
    m->y = calloc((size_t)(max_t * rows), sizeof *m->y);
    if (!m->wd || !m->x || !m->y || bp_weight_create(k, m->wd, bytes, rows, cols, &m->w) != BP_OK) {
        CHECK(0, "test weight for kind %d", (int)k);
        return false;
    }
    for (int64_t i = 0; i < max_t * cols; i++) m->x[i] = bp_test_randf(rng);
    return true;
}

static void tw_drop(tw *m) {
    bp_weight_free(m->w);
    free(m->wd), free(m->x), free(m->y);
}

/* Run one op (t == 1: matvec) through the seam; true when the mock ran it. */
static bool tw_ran_on_mock(tw *m, int64_t t) {
    int before = bp_mock_backend_ops();
    bp_status s = t == 1 ? bp_matvec(m->w, m->x, m->y) : bp_gemm(m->w, m->x, t, m->y);
    CHECK(s == BP_OK, "%s %lld x %lld t=%lld: %s", bp_kind_lookup((uint32_t)m->kind)->name, (long long)m->rows,
          (long long)m->cols, (long long)t, bp_last_error());
    const bool mock = bp_mock_backend_ops() > before;
    CHECK(mock == !strncmp(bp_weight_last_path(m->w), "Mock", 4), "path '%s' vs mock ops", bp_weight_last_path(m->w));
    return mock;
}

static bool ran_on_mock(bp_kind k, int64_t rows, int64_t cols, int64_t t, uint64_t *rng) {
    tw m;
    bool mock = tw_make(&m, k, rows, cols, t, rng) && tw_ran_on_mock(&m, t);
    tw_drop(&m);
    return mock;
}

static void test_cpu_implementation(void) {
    bp_mock_backend_config cfg = all_kinds();
    cfg.describe = true;
    cfg.device_class = BP_DEVICE_CPU_IMPL;
    cfg.cost = (bp_cost_model){60, 10, 1, 3, "fake"};
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    const char *reason = "";
    CHECK(!bp_seam_slot_enabled(mock_slot(), &reason), "a CPU implementation is not enabled by its probe");
    CHECK(strstr(reason, "is a CPU implementation of Mock") && strstr(reason, "native CPU backend is faster") &&
              strstr(reason, "BACKPLANE_MOCK=1 uses it anyway"),
          "reason: %s", reason);
    CHECK(bp_mock_backend_probe_calls() == 1, "the probe ran once (%d)", bp_mock_backend_probe_calls());
    bp_backend_info info;
    CHECK_OK(bp_backend_info_at(mock_slot(), &info));
    CHECK(!strcmp(info.name, "mock") && !info.enabled && info.cpu_implementation && strstr(info.device, "mockpipe"),
          "info: %s enabled %d cpu_impl %d device '%s'", info.name, info.enabled, info.cpu_implementation, info.device);
    uint64_t rng = 7;
    CHECK(!ran_on_mock(BP_KIND_Q8_0, 512, 2048, 1, &rng), "off: the CPU ran it");
    CHECK(bp_mock_backend_attempts() == 0, "the mock was never asked (%d)", bp_mock_backend_attempts());
    bp_route_info r;
    CHECK_OK(bp_route(BP_KIND_Q8_0, 512, 2048, 1, &r));
    CHECK(!strcmp(r.backend, "cpu") && strstr(r.why, "mock: disabled: mockpipe"), "route: %s why: %s", r.backend, r.why);

    /* Forced on: it runs, at every shape (a cost comparison would always favour the CPU). */
    setenv("BACKPLANE_MOCK", "1", 1);
    bp_seam_test_reset_enabled();
    CHECK(bp_seam_slot_enabled(mock_slot(), &reason), "BACKPLANE_MOCK=1 forces it on: %s", reason);
    CHECK(ran_on_mock(BP_KIND_Q8_0, 1, 32, 1, &rng), "forced: even a 1 x 32 matvec runs on it");
    CHECK(ran_on_mock(BP_KIND_Q8_0, 512, 2048, 4, &rng), "forced: a GEMM runs on it");
    unsetenv("BACKPLANE_MOCK");
    bp_mock_backend_uninstall();
}

/* Fake rates chosen so the answer is plain: the device costs 1 us whatever the shape (its
 * bandwidth and FLOP rate are huge), the CPU reads weights at 10 GB/s = 1e4 bytes/us and
 * computes for free. So the device wins exactly when the weight holds more than 1e4 bytes. */
static const bp_cost_model dev_cost = {1, 0, 1e9, 1e12, "fake accelerator"};
static const bp_cost_model cpu_cost = {0, 0, 10, 1e12, "fake CPU"};

static bool mock_expected(bp_kind k, int64_t rows, int64_t cols, int64_t t, long long min_work) {
    if (min_work >= 0) return (double)rows * cols * t >= (double)min_work;
    size_t rb = 0;
    if (bp_kind_row_bytes(k, cols, &rb)) return false;
    return (double)rb * (double)rows > 1e4 + 1; /* + 1: the device's own few bytes of reads */
}

static void test_crossover_and_agreement(void) {
    bp_mock_backend_config cfg = all_kinds();
    cfg.describe = true;
    cfg.device_class = BP_DEVICE_ACCELERATOR;
    cfg.cost = dev_cost;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_cost_test_set_cpu(&cpu_cost);
    /* Rows x cols around the 1e4-byte crossover for 1- to 32-bit kinds. */
    static const int64_t shapes[][2] = {{8, 256}, {32, 512}, {96, 1024}};
    static const int64_t batches[] = {1, MAX_T};
    static const long long min_works[] = {-1, 50000};
    uint64_t rng = 99;
    int on_mock = 0, on_cpu = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            const int64_t rows = shapes[s][0], cols = shapes[s][1];
            if (cols % ki->block_elems) continue;
            tw m;
            if (!tw_make(&m, ki->kind, rows, cols, MAX_T, &rng)) {
                tw_drop(&m);
                continue;
            }
            for (size_t mw = 0; mw < sizeof min_works / sizeof *min_works; mw++) {
                if (min_works[mw] >= 0) {
                    char v[32];
                    snprintf(v, sizeof v, "%lld", min_works[mw]);
                    setenv("BACKPLANE_MOCK_MIN_WORK", v, 1);
                } else unsetenv("BACKPLANE_MOCK_MIN_WORK");
                bp_seam_test_reset_enabled();
                for (size_t b = 0; b < sizeof batches / sizeof *batches; b++) {
                    const int64_t t = batches[b];
                    bp_route_info r;
                    CHECK_OK(bp_route(ki->kind, rows, cols, t, &r));
                    const bool want = mock_expected(ki->kind, rows, cols, t, min_works[mw]);
                    const bool ran = tw_ran_on_mock(&m, t);
                    CHECK(ran == want, "%s %lld x %lld t=%lld MIN_WORK %lld: ran on %s, expected %s", ki->name,
                          (long long)rows, (long long)cols, (long long)t, min_works[mw], ran ? "mock" : "CPU",
                          want ? "mock" : "CPU");
                    CHECK(!strcmp(r.backend, ran ? "mock" : "cpu"),
                          "%s %lld x %lld t=%lld: bp_route says %s (%s), the op ran on %s", ki->name, (long long)rows,
                          (long long)cols, (long long)t, r.backend, r.why, ran ? "mock" : "cpu");
                    if (!ran)
                        CHECK(strstr(r.why, min_works[mw] >= 0 ? "BACKPLANE_MOCK_MIN_WORK" : "modelled"),
                              "route names why the mock declined: %s", r.why);
                    on_mock += ran, on_cpu += !ran;
                }
            }
            tw_drop(&m);
        }
    }
    CHECK(on_mock > 20 && on_cpu > 20, "both sides of the crossover exercised (%d mock, %d CPU)", on_mock, on_cpu);
    CHECK(bp_fallback_total() == 0, "declining a shape is not a fallback");
    unsetenv("BACKPLANE_MOCK_MIN_WORK");
    bp_cost_test_set_cpu(NULL);
    bp_mock_backend_uninstall();
}

/* A backend without a GEMM for the kind runs a prefill as t matvecs: t per-call overheads. A
 * 10 x 512 F32 weight (20480 bytes: 2.05 us on the fake CPU) is the device's at t = 1 (1 us)
 * but not at t = 3 per position (3 us); with a GEMM it is (1 us). */
static void test_per_position_cost(void) {
    uint64_t rng = 21;
    for (int gemm = 0; gemm < 2; gemm++) {
        bp_mock_backend_config cfg = all_kinds();
        if (!gemm)
            for (int k = 0; k < BP_MOCK_MAX_KIND; k++) cfg.claim[BP_OP_GEMM][k] = cfg.launch[BP_OP_GEMM][k] = false;
        cfg.describe = true;
        cfg.cost = dev_cost;
        CHECK_OK(bp_mock_backend_install(&cfg, 0));
        bp_cost_test_set_cpu(&cpu_cost);
        tw m;
        if (tw_make(&m, BP_KIND_F32, 10, 512, 3, &rng)) {
            CHECK(tw_ran_on_mock(&m, 1), "gemm %d: decode on the device", gemm);
            CHECK(tw_ran_on_mock(&m, 3) == (gemm == 1), "gemm %d: prefill t=3 %s", gemm,
                  gemm ? "one call on the device" : "three calls cost more than the CPU");
            bp_route_info r;
            CHECK_OK(bp_route(BP_KIND_F32, 10, 512, 3, &r));
            CHECK(!strcmp(r.backend, gemm ? "mock" : "cpu"), "gemm %d: route %s (%s)", gemm, r.backend, r.why);
        }
        tw_drop(&m);
        bp_cost_test_set_cpu(NULL);
        bp_mock_backend_uninstall();
    }
}

typedef struct op {
    uint8_t *wd;
    float x[96], y[5];
    bp_weight *w;
} op;

static void make_op(op *o, uint64_t *rng) {
    size_t bytes;
    memset(o, 0, sizeof *o);
    o->wd = bp_test_make_weight(BP_KIND_Q8_0, 5, 96, rng, &bytes);
    for (int i = 0; i < 96; i++) o->x[i] = bp_test_randf(rng);
    CHECK_OK(bp_weight_create(BP_KIND_Q8_0, o->wd, bytes, 5, 96, &o->w));
}

static void drop_op(op *o) {
    bp_weight_free(o->w);
    free(o->wd);
}

static void test_strict(void) {
    bp_mock_backend_config cfg = all_kinds();
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_fallback_reset();
    uint64_t rng = 5;
    op o;
    make_op(&o, &rng);
    bp_set_strict(true);
    CHECK(bp_strict_mode(), "bp_set_strict(true)");
    bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_LAUNCH, 1, BP_E_DEVICE);
    for (int i = 0; i < 5; i++) o.y[i] = NAN;
    bp_status s = bp_matvec(o.w, o.x, o.y);
    const char *e = bp_last_error();
    CHECK(s == BP_E_FALLBACK, "strict: the launch error is the op's error (%s)", bp_status_name(s));
    CHECK(strstr(e, "matvec") && strstr(e, "Q8_0") && strstr(e, "5 x 96") && strstr(e, "batch 1") &&
              strstr(e, "on Mock") && strstr(e, "mock: injected launch failure"),
          "the error names op, kind, shape, backend and cause: %s", e);
    bool untouched = true;
    for (int i = 0; i < 5; i++) untouched = untouched && isnan(o.y[i]);
    CHECK(untouched, "nothing ran on the CPU in its place: the output kept its NaN sentinel");
    CHECK(bp_fallback_total() == 0, "strict: no fallback happened");
    /* The next op, with no fault armed, runs on the mock as the route says. */
    CHECK_OK(bp_matvec(o.w, o.x, o.y));
    CHECK(!strncmp(bp_weight_last_path(o.w), "Mock", 4), "then on the mock: %s", bp_weight_last_path(o.w));
    bp_set_strict(false);
    drop_op(&o);
    bp_mock_backend_uninstall();
}

/* The mock claiming every kind, installed first; one Q8_0 op and its reference output. */
static void lost_setup(op *o, float ref[5], uint64_t seed) {
    bp_mock_backend_config cfg = all_kinds();
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_fallback_reset();
    make_op(o, &seed);
    CHECK_OK(bp_ref_matvec(BP_KIND_Q8_0, o->wd, 5 * 102, 5, 96, o->x, ref));
}

static void test_device_lost(void) {
    op o;
    float ref[5];
    lost_setup(&o, ref, 11);
    CHECK_OK(bp_matvec(o.w, o.x, o.y));
    CHECK(bp_mock_backend_ops() == 1, "first op on the mock");
    bp_mock_lose_device(bp_mock_backend_device(), BP_MOCK_LAUNCH, 1);
    CHECK_OK(bp_matvec(o.w, o.x, o.y));
    CHECK(strstr(bp_weight_last_path(o.w), "fallback from Mock"), "the loss falls back: %s", bp_weight_last_path(o.w));
    CHECK(bp_test_nmse(o.y, ref, 5) <= bp_test_tolerance(BP_KIND_Q8_0, "matvec"), "right result from the CPU");
    const char *reason = "";
    CHECK(!bp_seam_slot_enabled(mock_slot(), &reason) && strstr(reason, "disabled for this process after a device error") &&
              strstr(reason, "device lost"),
          "the backend is disabled with a named reason: %s", reason);
    const int attempts = bp_mock_backend_attempts();
    for (int i = 0; i < 3; i++) {
        CHECK_OK(bp_gemm(o.w, o.x, 1, o.y));
        CHECK_OK(bp_matvec(o.w, o.x, o.y));
    }
    CHECK(bp_mock_backend_attempts() == attempts, "the lost backend is not asked again (%d -> %d)", attempts,
          bp_mock_backend_attempts());
    CHECK(strstr(bp_weight_last_path(o.w), "fallback from Mock: disabled for this process after a device error"),
          "later ops name the loss: %s", bp_weight_last_path(o.w));
    bp_fallback_entry fe[8];
    int nfe = bp_fallback_list(fe, 8);
    bool named = nfe > 0;
    for (int i = 0; i < nfe && i < 8; i++) named = named && !strcmp(fe[i].backend, "mock") && strstr(fe[i].cause, "device lost");
    CHECK(named, "every counted row names the loss (%d rows)", nfe);
    CHECK(bp_fallback_total() == 7, "every op the lost backend would have taken is counted (%llu)", bp_fallback_total());
    CHECK(strstr(log_text(), "device lost") != NULL, "the loss is logged");
    bp_route_info r;
    CHECK_OK(bp_route(BP_KIND_Q8_0, 5, 96, 1, &r));
    CHECK(!strcmp(r.backend, "cpu") && strstr(r.why, "mock: disabled for this process"), "route: %s (%s)", r.backend,
          r.why);
    CHECK(bp_matvec_on(o.w, "mock", o.x, o.y) == BP_E_UNSUPPORTED && strstr(bp_last_error(), "device lost"),
          "forced onto the lost backend: %s", bp_last_error());
    /* Strict mode refuses the rerouting too. */
    bp_set_strict(true);
    CHECK(bp_matvec(o.w, o.x, o.y) == BP_E_FALLBACK && strstr(bp_last_error(), "device lost"), "strict: %s",
          bp_last_error());
    bp_set_strict(false);
    drop_op(&o);
    bp_mock_backend_uninstall();
}

/* The device lost while four threads dispatch: every result right, every op counted once as
 * either a mock run or a fallback, and the backend disabled exactly once (TSan covers the
 * reason being published while others read it). */
typedef struct lost_job {
    op *o;
    const float *ref;
    int bad;
} lost_job;

static void *lost_worker(void *arg) {
    lost_job *j = arg;
    float y[5];
    for (int i = 0; i < 30; i++) {
        if (bp_matvec(j->o->w, j->o->x, y) != BP_OK || !(bp_test_nmse(y, j->ref, 5) <= bp_tolerance_nmse(BP_KIND_Q8_0, "matvec")))
            j->bad++;
    }
    return NULL;
}

static void test_device_lost_threads(void) {
    op o;
    float ref[5];
    lost_setup(&o, ref, 13);
    bp_mock_lose_device(bp_mock_backend_device(), BP_MOCK_LAUNCH, 25);
    pthread_t th[4];
    lost_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (lost_job){&o, ref, 0};
        pthread_create(&th[i], NULL, lost_worker, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += jobs[i].bad;
    }
    CHECK(bad == 0, "%d of 120 concurrent matvecs wrong", bad);
    CHECK(bp_mock_backend_ops() + (int)bp_fallback_total() == 120, "each op ran on the mock or fell back once (%d + %llu)",
          bp_mock_backend_ops(), bp_fallback_total());
    /* Launches 1..24 succeed; an op whose launch came before the loss but whose copy back came
     * after it fails too (a lost device fails every call), so at most 24 finished there. */
    CHECK(bp_mock_backend_ops() <= 24 && bp_mock_backend_ops() >= 20, "ran before the loss: %d", bp_mock_backend_ops());
    const char *reason = "";
    CHECK(!bp_seam_slot_enabled(mock_slot(), &reason) && strstr(reason, "device lost"), "disabled: %s", reason);
    drop_op(&o);
    bp_mock_backend_uninstall();
}

static void test_preference(void) {
    bp_mock_backend_config cfg = all_kinds();
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    uint64_t rng = 3;
    /* "cpu" keeps every op on the CPU although the mock is enabled and wants it. */
    CHECK_OK(bp_set_backend_preference("cpu", BP_PREFER));
    CHECK(!ran_on_mock(BP_KIND_F32, 4, 64, 1, &rng), "prefer cpu");
    bp_route_info r;
    CHECK_OK(bp_route(BP_KIND_F32, 4, 64, 1, &r));
    CHECK(!strcmp(r.backend, "cpu"), "route under prefer cpu: %s", r.backend);
    CHECK_OK(bp_set_backend_preference(NULL, BP_PREFER));
    CHECK(ran_on_mock(BP_KIND_F32, 4, 64, 1, &rng), "cleared: the mock again");
    /* Forcing: errors name why; a forced backend takes every shape. */
    CHECK(bp_set_backend_preference("rocm", BP_FORCE) == BP_E_NOT_FOUND, "unknown backend");
    CHECK(bp_set_backend_preference("metal", BP_FORCE) == BP_E_UNSUPPORTED && strstr(bp_last_error(), "not built"),
          "forcing an unbuilt backend: %s", bp_last_error());
    if (bp_backend_dispatch_of(BP_BACKEND_VULKAN))
        CHECK(bp_set_backend_preference("vulkan", BP_FORCE) == BP_E_UNSUPPORTED &&
                  strstr(bp_last_error(), "disabled: BACKPLANE_VULKAN=0"),
              "forcing a disabled backend: %s", bp_last_error());
    bp_mock_backend_uninstall();
    cfg.min_work = 1000000000;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    CHECK(!ran_on_mock(BP_KIND_F32, 4, 64, 1, &rng), "the mock declines 4 x 64 by itself");
    CHECK_OK(bp_set_backend_preference("mock", BP_FORCE));
    bp_backend_pref mode;
    CHECK(bp_backend_preference(&mode) && mode == BP_FORCE, "forced");
    CHECK(ran_on_mock(BP_KIND_F32, 4, 64, 1, &rng), "forced: it takes the shape it declined");
    CHECK_OK(bp_route(BP_KIND_F32, 4, 64, 1, &r));
    CHECK(!strcmp(r.backend, "mock"), "route under force: %s (%s)", r.backend, r.why);
    CHECK_OK(bp_set_backend_preference(NULL, BP_PREFER));
    /* Preferring a disabled backend: BP_OK and the one-line report. */
    setenv("BACKPLANE_MOCK", "0", 1);
    bp_seam_test_reset_enabled();
    CHECK_OK(bp_set_backend_preference("mock", BP_PREFER));
    CHECK(strstr(log_text(), "[Mock: BACKPLANE_MOCK=0 forces it off; using CPU]\n") != NULL, "report line:\n%s",
          log_text());
    CHECK(bp_set_backend_preference("mock", BP_FORCE) == BP_E_UNSUPPORTED && strstr(bp_last_error(), "disabled"),
          "forcing it is an error: %s", bp_last_error());
    CHECK(!ran_on_mock(BP_KIND_F32, 4, 64, 1, &rng), "preferred but off: the CPU");
    unsetenv("BACKPLANE_MOCK");
    CHECK_OK(bp_set_backend_preference(NULL, BP_PREFER));
    /* The environment: read at first use after a reset. */
    bp_seam_test_reset_enabled();
    setenv("BACKPLANE_BACKEND", "cpu", 1);
    bp_seam_test_reset_preference();
    CHECK(!ran_on_mock(BP_KIND_F32, 4, 64, 1, &rng), "BACKPLANE_BACKEND=cpu");
    int order[8], n = 0;
    setenv("BACKPLANE_BACKEND", "tpu", 1);
    bp_seam_test_reset_preference();
    n = bp_seam_order(order, 8);
    CHECK(n == bp_seam_slot_count() && order[0] == 0, "an unknown name keeps the default order (%d slots)", n);
    CHECK(strstr(log_text(), "[BACKPLANE_BACKEND=tpu: no such backend") != NULL, "names the bad value:\n%s", log_text());
    unsetenv("BACKPLANE_BACKEND");
    bp_seam_test_reset_preference();
    /* Order: the preferred slot first, the others after it in table order. */
    CHECK_OK(bp_set_backend_preference("opencl", BP_PREFER));
    n = bp_seam_order(order, 8);
    CHECK(n == bp_seam_slot_count() && order[0] == bp_seam_slot_find("opencl") && order[1] == 0,
          "prefer opencl: order %d %d ... (%d slots)", order[0], order[1], n);
    CHECK_OK(bp_set_backend_preference(NULL, BP_PREFER));
    bp_mock_backend_uninstall();
}

/* The public list: backends.def's rows in order, then the CPU; out of range is an error. */
static void test_backend_list(void) {
    static const char *const want[] = {"cuda", "metal", "vulkan", "opencl", "cpu"};
    CHECK(bp_backend_count() == 5, "5 rows (%d)", bp_backend_count());
    for (int i = 0; i < bp_backend_count() && i < 5; i++) {
        bp_backend_info b;
        CHECK_OK(bp_backend_info_at(i, &b));
        CHECK(!strcmp(b.name, want[i]) && b.display && b.reason && b.device, "row %d: %s", i, b.name);
        CHECK(b.compiled || !b.enabled, "%s: enabled but not compiled", b.name);
        if (i < 4 && b.compiled) CHECK(strstr(b.reason, "=0 forces it off") != NULL, "%s: %s", b.name, b.reason);
    }
    bp_backend_info last;
    CHECK_OK(bp_backend_info_at(4, &last));
    CHECK(last.enabled && last.compiled && !last.cpu_implementation, "the CPU is always there");
    CHECK(bp_backend_info_at(5, &last) == BP_E_INVAL && bp_backend_info_at(-1, &last) == BP_E_INVAL, "out of range");
    bp_route_info r;
    CHECK(bp_route(BP_KIND_I32, 4, 4, 1, &r) == BP_E_KIND, "a data kind has no route");
    CHECK(bp_route(BP_KIND_Q4_K, 0, 256, 1, &r) == BP_E_SHAPE, "zero rows");
    CHECK_OK(bp_route(BP_KIND_Q4_K, 4096, 4096, 512, &r));
    CHECK(!strcmp(r.backend, "cpu") && !strncmp(r.path, "CPU", 3), "every real backend off: the CPU (%s)", r.path);
}

int main(void) {
    /* Only the mock and the CPU: the real backends of this build are switched off. */
    for (int i = 0; i < BP_BACKEND_CPU; i++) setenv(bp_seam_slot_at(i)->env_name, "0", 1);
    unsetenv("BACKPLANE_BACKEND");
    unsetenv("BACKPLANE_STRICT");
    logf_ = tmpfile();
    bp_seam_set_log(logf_);
    test_backend_list();
    test_cpu_implementation();
    test_crossover_and_agreement();
    test_per_position_cost();
    test_strict();
    test_device_lost();
    test_device_lost_threads();
    test_preference();
    bp_seam_set_log(NULL);
    fclose(logf_);
    return bp_test_finish();
}
