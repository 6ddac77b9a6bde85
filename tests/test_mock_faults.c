/* Faults at every device entry point, at every call position, through the mock backend on the
 * mock device: alloc, copy, launch, sync, event (create, record) and graph (begin, end, replay;
 * the mock backend captures its launch into a graph and waits on an event when told to), for a
 * matvec and a GEMM of two kinds. For each (entry point, n) the n-th such call of the op fails,
 * and the op must still return BP_OK with exactly the numbers the CPU backend gives (it is the
 * CPU that ran: the real backends are off here), count one fallback, name it in the path, log
 * a cause naming the entry point, and leave nothing live on the mock device. The same op forced
 * onto the mock (bp_matvec_on "mock") must instead fail with BP_E_DEVICE naming the cause.
 *
 * "Device lost" (a fault that disables the backend for the process, with a named reason) is the
 * `route` engineer's sticky-error mechanism (issue 13): their test_seam_route (test_device_lost)
 * drives it through this mock device (bp_mock_lose_device on their branch). */
#include <stdlib.h>
#include <string.h>

#include "backplane_device.h"
#include "harness.h"
#include "seam/mock_install.h"
#include "seam/seam_internal.h"

enum { ROWS = 9, COLS = 256, T = 3 };
static const bp_kind kinds[] = {BP_KIND_Q8_0, BP_KIND_Q4_K};
static FILE *logf_;
static int cases;

static bool log_has(const char *needle) {
    char line[512];
    bool found = false;
    rewind(logf_);
    while (fgets(line, sizeof line, logf_)) found = found || strstr(line, needle);
    fseek(logf_, 0, SEEK_END);
    return found;
}

/* One kind, one op (gemm or not), one backend configuration: every entry point, every position. */
static void sweep(bp_kind k, bool gemm, bool graph_events) {
    const char *kn = bp_kind_lookup((uint32_t)k)->name, *op = gemm ? "gemm" : "matvec";
    bp_mock_backend_config cfg;
    bp_mock_backend_config_for(&cfg, &k, 1, true);
    cfg.graph = cfg.events = graph_events;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_device *dev = bp_mock_backend_device();
    uint64_t rng = 5 + (uint64_t)k;
    size_t bytes;
    uint8_t *wd = bp_test_make_weight(k, ROWS, COLS, &rng, &bytes);
    float x[T * COLS], ref[T * ROWS], cpu[T * ROWS], y[T * ROWS];
    for (int i = 0; i < T * COLS; i++) x[i] = bp_test_randf(&rng);
    const int64_t t = gemm ? T : 1;
    const size_t n = (size_t)(t * ROWS) * sizeof(float);
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(k, wd, bytes, ROWS, COLS, &w));
    CHECK_OK(bp_ref_gemm(k, wd, bytes, ROWS, COLS, x, t, ref));
    CHECK_OK(gemm ? bp_gemm_on(w, "cpu", x, T, cpu) : bp_matvec_on(w, "cpu", x, cpu));

    /* Unfaulted: the mock ran it, bit-identical to the reference (its kernel is the reference). */
    int before[BP_MOCK_CALL_KINDS], per_op[BP_MOCK_CALL_KINDS];
    for (int c = 0; c < BP_MOCK_CALL_KINDS; c++) before[c] = bp_mock_calls(dev, (bp_mock_call)c);
    CHECK_OK(gemm ? bp_gemm(w, x, T, y) : bp_matvec(w, x, y));
    CHECK(strstr(bp_weight_last_path(w), "Mock") == bp_weight_last_path(w), "%s %s: path '%s'", kn, op,
          bp_weight_last_path(w));
    CHECK(!memcmp(y, ref, n), "%s %s on the mock: not bit-identical to the reference", kn, op);
    for (int c = 0; c < BP_MOCK_CALL_KINDS; c++) per_op[c] = bp_mock_calls(dev, (bp_mock_call)c) - before[c];
    CHECK(per_op[BP_MOCK_ALLOC] && per_op[BP_MOCK_COPY] && per_op[BP_MOCK_LAUNCH] && per_op[BP_MOCK_SYNC],
          "%s %s: the op reached every basic entry point", kn, op);
    if (graph_events)
        CHECK(per_op[BP_MOCK_EVENT] >= 2 && per_op[BP_MOCK_GRAPH] >= 3, "%s %s: events %d, graph calls %d", kn, op,
              per_op[BP_MOCK_EVENT], per_op[BP_MOCK_GRAPH]);

    for (int c = 0; c < BP_MOCK_CALL_KINDS; c++) {
        for (int pos = 1; pos <= per_op[c]; pos++) {
            char what[96], cause[64];
            snprintf(what, sizeof what, "%s %s, %s call %d of %d%s", kn, op, bp_mock_call_name((bp_mock_call)c), pos,
                     per_op[c], graph_events ? " (graph + events)" : "");
            snprintf(cause, sizeof cause, "mock: injected %s failure", bp_mock_call_name((bp_mock_call)c));
            const unsigned long long fb0 = bp_fallback_total();
            memset(y, 0xff, n);
            bp_mock_fail_nth(dev, (bp_mock_call)c, pos, BP_E_DEVICE);
            bp_status s = gemm ? bp_gemm(w, x, T, y) : bp_matvec(w, x, y);
            bp_mock_fail_nth(dev, (bp_mock_call)c, 0, BP_E_DEVICE);
            CHECK(s == BP_OK, "%s: %s", what, bp_last_error());
            CHECK(!memcmp(y, cpu, n), "%s: the fallback's numbers are not the CPU backend's", what);
            CHECK(bp_fallback_total() == fb0 + 1, "%s: %llu fallbacks counted, want 1", what, bp_fallback_total() - fb0);
            CHECK(strstr(bp_weight_last_path(w), "fallback from Mock") != NULL, "%s: path '%s'", what,
                  bp_weight_last_path(w));
            CHECK(log_has(cause), "%s: no log line names '%s'", what, cause);
            CHECK(bp_ledger_live_count(dev) == 0, "%s: %zu allocations live on the mock", what,
                  bp_ledger_live_count(dev));
            /* Forced onto the mock, the same fault is an error that names it, never a fallback. */
            bp_mock_fail_nth(dev, (bp_mock_call)c, pos, BP_E_DEVICE);
            s = gemm ? bp_gemm_on(w, "mock", x, T, y) : bp_matvec_on(w, "mock", x, y);
            bp_mock_fail_nth(dev, (bp_mock_call)c, 0, BP_E_DEVICE);
            CHECK(s == BP_E_DEVICE && strstr(bp_last_error(), cause), "%s forced: %s: %s", what, bp_status_name(s),
                  bp_last_error());
            CHECK(bp_ledger_live_count(dev) == 0, "%s forced: %zu allocations live", what, bp_ledger_live_count(dev));
            cases++;
        }
    }
    bp_weight_free(w);
    free(wd);
    bp_mock_backend_uninstall();
}

int main(void) {
    /* The real backends compiled in are off (before anything decides), so a fallback lands on
     * the CPU and the mock device's ledger holds only the mock's allocations. */
    for (int i = 0; i < BP_BACKEND_CPU; i++) setenv(bp_seam_slot_at(i)->env_name, "0", 1);
    logf_ = tmpfile();
    bp_seam_set_log(logf_);
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++)
        for (int gemm = 0; gemm < 2; gemm++)
            for (int ge = 0; ge < 2; ge++) sweep(kinds[ki], gemm, ge);
    fprintf(stderr, "%d (entry point, call position) faults, each a counted fallback with the CPU's numbers\n",
            cases);
    bp_seam_set_log(NULL);
    fclose(logf_);
    return bp_test_finish();
}
