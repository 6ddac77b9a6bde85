/* Dispatch and named fallback, through the mock backend on the mock device (real numbers: the
 * mock's kernel is the CPU reference reading device memory). Each fault -- launch, alloc, copy,
 * sync, a shape the kernel cannot honour -- must fall back to the CPU with the right result,
 * log one line naming backend, kind, op, cause and fallback, count every occurrence, and leave
 * no live device allocation. Results are compared with the CPU reference (bp_ref_*, double
 * accumulation) computed here, independently of the path that ran. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "seam/mock_install.h"

static FILE *logf_;
static int log_lines(void) {
    char line[512];
    int n = 0;
    rewind(logf_);
    while (fgets(line, sizeof line, logf_)) n++;
    fseek(logf_, 0, SEEK_END);
    return n;
}
static const char *last_log(void) {
    static char line[512], cur[512];
    line[0] = '\0';
    rewind(logf_);
    while (fgets(cur, sizeof cur, logf_)) memcpy(line, cur, sizeof line);
    fseek(logf_, 0, SEEK_END);
    return line;
}

typedef struct mat {
    bp_kind kind;
    int64_t rows, cols;
    uint8_t *data;
    size_t bytes;
    float *x, *ref;
    bp_weight *w;
} mat;

/* A rows x cols weight of kind k (the harness's one weight maker), and t random inputs with the
 * reference output. Every kind's reference is finished: a non-finite one is a failure. */
static bool make(mat *m, bp_kind k, int64_t rows, int64_t cols, int64_t t) {
    static uint64_t seed = 12345;
    memset(m, 0, sizeof *m);
    m->kind = k, m->rows = rows, m->cols = cols;
    m->data = bp_test_make_weight(k, rows, cols, &seed, &m->bytes);
    CHECK(m->data != NULL, "no %lld x %lld test weight: %s", (long long)rows, (long long)cols, bp_last_error());
    if (!m->data) return false;
    m->x = malloc((size_t)(t * cols) * sizeof *m->x);
    m->ref = malloc((size_t)(t * rows) * sizeof *m->ref);
    for (int64_t i = 0; i < t * cols; i++) m->x[i] = bp_test_randf(&seed);
    CHECK_OK(bp_ref_gemm(k, m->data, m->bytes, rows, cols, m->x, t, m->ref));
    CHECK_OK(bp_weight_create(k, m->data, m->bytes, rows, cols, &m->w));
    bool finite = bp_test_all_finite(m->ref, (size_t)(t * rows));
    CHECK(finite, "the %s reference output is not finite", bp_kind_lookup((uint32_t)k)->name);
    return finite && m->w != NULL;
}

static void drop(mat *m) {
    bp_weight_free(m->w);
    free(m->data), free(m->x), free(m->ref);
}

/* The mock computes with the reference itself: its results are bit-identical to it. A fallback
 * result must be exactly what the CPU backend gives for the same op (it is the CPU backend that
 * ran; its threads split work by output, so it is deterministic), and within the verify
 * tolerance of the reference (the table, src/testing/tolerance.def): the CPU's SIMD kernels may
 * quantize activations to 8 bits (NMSE ~2e-5 here for Q8_0). */
static void check_result(const mat *m, const float *y, int64_t t, bool exact, const char *what) {
    size_t n = (size_t)(t * m->rows);
    if (exact) {
        CHECK(!memcmp(y, m->ref, n * sizeof *y), "%s: bit-identical to the reference", what);
        return;
    }
    float *cpu = malloc(n * sizeof *cpu);
    CHECK_OK(t > 1 ? bp_gemm_on(m->w, "cpu", m->x, t, cpu) : bp_matvec_on(m->w, "cpu", m->x, cpu));
    CHECK(!memcmp(y, cpu, n * sizeof *y), "%s: identical to the CPU backend's own result", what);
    free(cpu);
    double e = bp_test_nmse(y, m->ref, n), thr = bp_test_tolerance(m->kind, t > 1 ? "gemm" : "matvec");
    CHECK(e <= thr, "%s: NMSE %.3e against the reference (threshold %.0e)", what, e, thr);
}

static bp_mock_backend_config base_cfg(bool gemm) {
    bp_mock_backend_config cfg;
    const bp_kind ks[] = {BP_KIND_F32, BP_KIND_Q8_0};
    bp_mock_backend_config_for(&cfg, ks, 2, gemm);
    return cfg;
}

static void ledger_clean(const char *after) {
    CHECK(bp_ledger_live_count(NULL) == 0, "after %s: %zu live device allocations", after, bp_ledger_live_count(NULL));
}

static void test_normal(bp_kind k) {
    bp_mock_backend_config cfg = base_cfg(true);
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    mat m;
    if (!make(&m, k, 9, 64, 3)) {
        drop(&m);
        bp_mock_backend_uninstall();
        return;
    }
    const char *kn = bp_kind_lookup((uint32_t)k)->name;
    float y[27];
    char want[64];
    CHECK_OK(bp_matvec(m.w, m.x, y));
    snprintf(want, sizeof want, "Mock %s matvec", kn);
    CHECK(!strcmp(bp_weight_last_path(m.w), want), "path '%s', want '%s'", bp_weight_last_path(m.w), want);
    check_result(&m, y, 1, true, "mock matvec");
    CHECK_OK(bp_gemm(m.w, m.x, 3, y));
    snprintf(want, sizeof want, "Mock %s gemm", kn);
    CHECK(!strcmp(bp_weight_last_path(m.w), want), "path '%s', want '%s'", bp_weight_last_path(m.w), want);
    check_result(&m, y, 3, true, "mock gemm");
    CHECK(bp_mock_backend_ops() == 2, "the mock ran both (%d)", bp_mock_backend_ops());
    CHECK(bp_fallback_total() == 0, "no fallback");
    /* A kind the mock does not claim goes to the CPU without a fallback. */
    mat h;
    if (make(&h, BP_KIND_F16, 4, 64, 1)) {
        CHECK_OK(bp_matvec(h.w, h.x, y));
        CHECK(!strncmp(bp_weight_last_path(h.w), "CPU", 3), "F16 not claimed: CPU (%s)", bp_weight_last_path(h.w));
        check_result(&h, y, 1, false, "CPU F16");
        CHECK(bp_fallback_total() == 0, "not claiming is not a fallback");
    }
    drop(&h);
    drop(&m);
    bp_mock_backend_uninstall();
    ledger_clean("normal dispatch");
}

/* Arm one fault, run an op, expect the CPU to answer and the fault to be named and counted. */
static void test_fault(bp_mock_call call, int nth, bool gemm_op) {
    bp_mock_backend_config cfg = base_cfg(true);
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_fallback_reset();
    mat m;
    if (!make(&m, BP_KIND_Q8_0, 5, 96, 4)) {
        drop(&m);
        bp_mock_backend_uninstall();
        return;
    }
    float y[20];
    const char *op = gemm_op ? "gemm" : "matvec";
    int lines0 = log_lines();
    for (int rep = 0; rep < 2; rep++) {
        bp_mock_fail_nth(bp_mock_backend_device(), call, nth, BP_E_DEVICE);
        CHECK_OK(gemm_op ? bp_gemm(m.w, m.x, 4, y) : bp_matvec(m.w, m.x, y));
        CHECK(strstr(bp_weight_last_path(m.w), "fallback from Mock") != NULL, "path names the fallback: %s",
              bp_weight_last_path(m.w));
        check_result(&m, y, gemm_op ? 4 : 1, false, "fallback result");
        ledger_clean(bp_mock_call_name(call));
    }
    char want[160];
    snprintf(want, sizeof want, "backplane: mock Q8_0 %s failed: mock: injected %s failure; falling back to CPU\n", op,
             bp_mock_call_name(call));
    CHECK(log_lines() == lines0 + 1, "one log line for two identical failures (%d)", log_lines() - lines0);
    CHECK(!strcmp(last_log(), want), "log line\n  got:  %s  want: %s", last_log(), want);
    CHECK(bp_fallback_total() == 2, "both fallbacks counted (%llu)", bp_fallback_total());
    bp_fallback_entry e[4];
    int n = bp_fallback_list(e, 4);
    snprintf(want, sizeof want, "mock: injected %s failure", bp_mock_call_name(call));
    CHECK(n == 1 && e[0].count == 2 && !strcmp(e[0].backend, "mock") && !strcmp(e[0].kind, "Q8_0") &&
              !strcmp(e[0].op, op) && !strcmp(e[0].cause, want) && !strcmp(e[0].to, "CPU"),
          "counter row names the cause (n=%d, count=%llu, cause='%s')", n, n ? e[0].count : 0, n ? e[0].cause : "");
    FILE *f = tmpfile();
    bp_fallback_report(f);
    char rep[512] = "";
    rewind(f);
    size_t got = fread(rep, 1, sizeof rep - 1, f);
    rep[got] = '\0';
    fclose(f);
    CHECK(strstr(rep, "fallbacks: 2 ops fell back") && strstr(rep, want), "report:\n%s", rep);
    drop(&m);
    bp_mock_backend_uninstall();
    ledger_clean("fault test");
}

static void test_shape(void) {
    bp_mock_backend_config cfg = base_cfg(true);
    cfg.cols_multiple = 64; /* the "kernel" handles whole 64-column tiles only */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_fallback_reset();
    mat m;
    if (make(&m, BP_KIND_Q8_0, 3, 96, 1)) {
        float y[3];
        CHECK_OK(bp_matvec(m.w, m.x, y));
        check_result(&m, y, 1, false, "shape fallback");
        CHECK(strstr(last_log(), "cols must be a multiple of 64; falling back to CPU") != NULL, "log: %s", last_log());
        CHECK(bp_fallback_total() == 1, "counted");
        /* Forced onto the mock, the same shape is an error that says why -- not an abort, and
         * not a silent run elsewhere. */
        CHECK(bp_matvec_on(m.w, "mock", m.x, y) == BP_E_DEVICE, "forced: error");
        CHECK(strstr(bp_last_error(), "shape 3 x 96 not supported") != NULL, "error: %s", bp_last_error());
        CHECK(bp_fallback_total() == 1, "a forced backend never falls back");
    }
    drop(&m);

    /* Bad shapes at the API: errors, never aborts. */
    uint8_t buf[64] = {0};
    bp_weight *w = NULL;
    float x[64] = {0}, y[64];
    CHECK(bp_weight_create(BP_KIND_Q8_0, buf, sizeof buf, 2, 33, &w) == BP_E_SHAPE && !w, "33 cols of Q8_0");
    CHECK(bp_weight_create(BP_KIND_Q8_0, buf, 34, 2, 32, &w) == BP_E_SHAPE && !w, "2 rows in 34 bytes");
    CHECK(strstr(bp_last_error(), "68") != NULL, "names the size needed: %s", bp_last_error());
    CHECK(bp_weight_create(BP_KIND_Q8_0, buf, sizeof buf, 0, 32, &w) == BP_E_SHAPE, "zero rows");
    CHECK(bp_weight_create(BP_KIND_I32, buf, sizeof buf, 1, 4, &w) == BP_E_KIND, "data kind is not a weight");
    CHECK(bp_weight_create((bp_kind)77, buf, sizeof buf, 1, 4, &w) == BP_E_KIND, "unknown kind");
    CHECK_OK(bp_weight_create(BP_KIND_F32, buf, sizeof buf, 4, 4, &w));
    CHECK(bp_gemm(w, x, -1, y) == BP_E_SHAPE, "negative batch");
    CHECK(bp_matvec(w, NULL, y) == BP_E_INVAL, "NULL input");
    CHECK(bp_matvec_on(w, "rocm", x, y) == BP_E_NOT_FOUND, "unknown backend");
    bp_weight *h = NULL;
    CHECK_OK(bp_weight_create(BP_KIND_F16, buf, sizeof buf, 4, 4, &h));
    CHECK(bp_matvec_on(h, "mock", x, y) == BP_E_UNSUPPORTED && strstr(bp_last_error(), "no F16"),
          "forced onto a backend without the kind: %s", bp_last_error());
    bp_weight_free(h);
    bp_weight_free(w);
    bp_mock_backend_uninstall();
    CHECK(bp_matvec_on(NULL, "cpu", x, y) == BP_E_INVAL, "NULL weight");
    ledger_clean("shape test");
}

static void test_per_position_and_wants(void) {
    bp_mock_backend_config cfg = base_cfg(false); /* matvec only: prefill runs per position */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_fallback_reset();
    mat m;
    if (make(&m, BP_KIND_F32, 6, 40, 5)) {
        float y[30];
        CHECK_OK(bp_gemm(m.w, m.x, 5, y));
        CHECK(!strcmp(bp_weight_last_path(m.w), "Mock per-position matvec"), "path: %s", bp_weight_last_path(m.w));
        CHECK(bp_mock_backend_ops() == 5, "five matvecs (%d)", bp_mock_backend_ops());
        check_result(&m, y, 5, true, "per-position gemm");
        /* A launch failing mid-way (third position) falls back for the whole op. */
        bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_LAUNCH, 3, BP_E_DEVICE);
        CHECK_OK(bp_gemm(m.w, m.x, 5, y));
        check_result(&m, y, 5, false, "fallback after a partial per-position run");
        CHECK(bp_fallback_total() == 1, "counted once");
    }
    bp_mock_backend_uninstall();
    ledger_clean("per-position");

    /* wants: below the threshold the op goes to the CPU, and that is not a fallback. */
    cfg = base_cfg(true);
    cfg.min_work = 1000000;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_fallback_reset();
    float y[30];
    if (m.w) {
        CHECK_OK(bp_matvec(m.w, m.x, y));
        CHECK(!strncmp(bp_weight_last_path(m.w), "CPU", 3), "small op declined: %s", bp_weight_last_path(m.w));
        CHECK(bp_mock_backend_ops() == 0 && bp_fallback_total() == 0, "declining is silent");
        /* The env threshold overrides the backend's own (read with the enable decision). */
        setenv("BACKPLANE_MOCK_MIN_WORK", "0", 1);
        bp_seam_test_reset_enabled();
        CHECK_OK(bp_matvec(m.w, m.x, y));
        CHECK(!strcmp(bp_weight_last_path(m.w), "Mock F32 matvec"), "BACKPLANE_MOCK_MIN_WORK=0: %s",
              bp_weight_last_path(m.w));
        setenv("BACKPLANE_MOCK_MIN_WORK", "100000", 1);
        bp_seam_test_reset_enabled();
        CHECK_OK(bp_matvec(m.w, m.x, y));
        CHECK(!strncmp(bp_weight_last_path(m.w), "CPU", 3), "env threshold 100000 > 240: %s", bp_weight_last_path(m.w));
        unsetenv("BACKPLANE_MOCK_MIN_WORK");
        /* Disabled by env: straight to the CPU, probe never asked. */
        setenv("BACKPLANE_MOCK", "0", 1);
        bp_seam_test_reset_enabled();
        int probes = bp_mock_backend_probe_calls();
        CHECK_OK(bp_matvec(m.w, m.x, y));
        CHECK(!strncmp(bp_weight_last_path(m.w), "CPU", 3) && bp_mock_backend_probe_calls() == probes,
              "BACKPLANE_MOCK=0: CPU, no probe");
        CHECK(bp_matvec_on(m.w, "mock", m.x, y) == BP_E_UNSUPPORTED && strstr(bp_last_error(), "disabled"),
              "forced onto a disabled backend: %s", bp_last_error());
        unsetenv("BACKPLANE_MOCK");
    }
    drop(&m);
    bp_mock_backend_uninstall();
    ledger_clean("wants");
}

/* Several threads dispatching at once through the mock (ledger, op cache, stats under load),
 * one of them meeting an injected launch failure: every result right, one fallback counted. */
typedef struct job {
    mat *m;
    double tol;
    int bad;
} job;

static void *worker(void *arg) {
    job *j = arg;
    float y[16];
    for (int i = 0; i < 25; i++) {
        if (bp_matvec(j->m->w, j->m->x, y) != BP_OK) j->bad++;
        else {
            double e = bp_test_nmse(y, j->m->ref, (size_t)j->m->rows);
            if (!(e <= j->tol)) j->bad++;
        }
    }
    return NULL;
}

static void test_threads(void) {
    bp_mock_backend_config cfg = base_cfg(true);
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_fallback_reset();
    mat m;
    if (make(&m, BP_KIND_Q8_0, 16, 128, 1)) {
        bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_LAUNCH, 40, BP_E_DEVICE);
        pthread_t th[4];
        job jobs[4];
        for (int i = 0; i < 4; i++) {
            jobs[i] = (job){&m, bp_test_tolerance(m.kind, "matvec"), 0};
            pthread_create(&th[i], NULL, worker, &jobs[i]);
        }
        int bad = 0;
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            bad += jobs[i].bad;
        }
        CHECK(bad == 0, "%d of 100 concurrent matvecs wrong", bad);
        CHECK(bp_mock_backend_ops() == 99, "99 ran on the mock (%d)", bp_mock_backend_ops());
        CHECK(bp_fallback_total() == 1, "the one injected failure fell back (%llu)", bp_fallback_total());
        CHECK(bp_ledger_live_count(bp_mock_backend_device()) == 0, "nothing live on the mock device");
    }
    drop(&m);
    bp_mock_backend_uninstall();
    ledger_clean("threads");
}

int main(void) {
    /* These cases are about the mock and the CPU behind it: switch the real backends compiled
     * into this build off (before anything decides), so "falls back to the CPU" means exactly
     * that and the ledger holds only the mock's allocations. */
    for (int i = 0; i < BP_BACKEND_CPU; i++) setenv(bp_seam_slot_at(i)->env_name, "0", 1);
    logf_ = tmpfile();
    bp_seam_set_log(logf_);
    test_normal(BP_KIND_F32);
    test_normal(BP_KIND_Q8_0);
    test_fault(BP_MOCK_LAUNCH, 1, false);
    test_fault(BP_MOCK_ALLOC, 2, false); /* the second alloc: the first must be released */
    test_fault(BP_MOCK_COPY, 2, true);
    test_fault(BP_MOCK_SYNC, 1, true);
    test_shape();
    test_per_position_and_wants();
    test_threads();
    bp_seam_set_log(NULL);
    fclose(logf_);
    return bp_test_finish();
}
