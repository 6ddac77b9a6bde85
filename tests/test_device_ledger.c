/* The device layer on the mock device: ledger (live bytes/count, call sites, report, list,
 * sweep), redzones (a kernel that overruns is caught by scan and by free), poison, range
 * checks, the defaults for optional members, op cache, graph capture / abort, fault injection.
 * Expected values are computed here from first principles (sizes we asked for, bytes we wrote),
 * never read back from the code under test. */
#include <stdlib.h>
#include <string.h>

#include "backplane_device.h"
#include "harness.h"
#include "mock/mock_device.h"

static char *slurp(FILE *f) {
    static char buf[8192];
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    return buf;
}

static void test_ledger(bp_device *dev) {
    void *a = NULL, *b = NULL, *c = NULL;
    int line_a = __LINE__ + 1;
    CHECK_OK(bp_dev_alloc(dev, 100, &a));
    int line_bc = __LINE__ + 2;
    for (int i = 0; i < 2; i++) /* one call site, two allocations */
        CHECK_OK(bp_dev_alloc(dev, i ? 300 : 200, i ? &c : &b));
    CHECK(bp_ledger_live_count(dev) == 3, "live count %zu, want 3", bp_ledger_live_count(dev));
    CHECK(bp_ledger_live_bytes(dev) == 600, "live bytes %zu, want 600", bp_ledger_live_bytes(dev));
    CHECK(bp_ledger_live_count(NULL) >= 3, "all-device count includes this device");

    bp_ledger_entry e[4];
    size_t n = bp_ledger_list(dev, e, 4);
    CHECK(n == 3, "list gives %zu", n);
    CHECK(e[0].buf == a && e[0].bytes == 100 && e[0].line == line_a && strstr(e[0].file, "test_device_ledger.c"),
          "first entry is a at line %d (got line %d, %zu bytes)", line_a, e[0].line, e[0].bytes);
    CHECK(e[1].line == line_bc && e[2].line == line_bc && e[1].seq < e[2].seq, "b, c at line %d in order", line_bc);

    FILE *f = tmpfile();
    bp_ledger_report(dev, f);
    char *rep = slurp(f);
    char want[64];
    snprintf(want, sizeof want, "test_device_ledger.c:%d  2 live  500 bytes", line_bc);
    CHECK(strstr(rep, want) != NULL, "report groups the call site: want '%s' in:\n%s", want, rep);
    snprintf(want, sizeof want, "test_device_ledger.c:%d  1 live  100 bytes", line_a);
    CHECK(strstr(rep, want) != NULL, "report names the other site: want '%s' in:\n%s", want, rep);
    fclose(f);

    bp_dev_free(dev, b);
    CHECK(bp_ledger_live_count(dev) == 2 && bp_ledger_live_bytes(dev) == 400, "after free: 2 live, 400 bytes");
    /* Double free: reported and NOT passed to the backend (under ASan a second free would abort). */
    bp_dev_free(dev, b);
    CHECK(bp_ledger_live_count(dev) == 2, "double free changes nothing");

    /* Use after free and overrun are caught at the wrapper, naming the allocation's site. */
    unsigned char host[400] = {0};
    CHECK(bp_dev_h2d(dev, b, 0, host, 10) == BP_E_INVAL, "h2d into a freed buffer is refused");
    CHECK(bp_dev_h2d(dev, a, 50, host, 51) == BP_E_INVAL, "h2d past the end is refused");
    snprintf(want, sizeof want, "allocated at %s:%d", e[0].file, line_a);
    CHECK(strstr(bp_last_error(), want) != NULL, "overrun message names the site: %s", bp_last_error());
    CHECK_OK(bp_dev_h2d(dev, a, 50, host, 50));

    f = tmpfile();
    size_t swept = bp_ledger_sweep(dev, f);
    rep = slurp(f);
    CHECK(swept == 2, "sweep freed %zu, want 2", swept);
    CHECK(strstr(rep, "sweeping 300 bytes") && strstr(rep, "sweeping 100 bytes"), "sweep names each: %s", rep);
    CHECK(bp_ledger_live_count(dev) == 0, "nothing live after sweep");
    fclose(f);
}

static void test_copies(bp_device *dev) {
    enum { N = 256 };
    unsigned char src[N], back[N], expect[N];
    for (int i = 0; i < N; i++) src[i] = (unsigned char)(i * 7 + 3);
    void *a = NULL, *b = NULL;
    CHECK_OK(bp_dev_alloc(dev, N, &a));
    CHECK_OK(bp_dev_alloc(dev, N, &b));
    CHECK_OK(bp_dev_h2d(dev, a, 0, src, N));
    CHECK_OK(bp_dev_d2d(dev, b, 0, a, 0, N));
    memset(back, 0, N);
    CHECK_OK(bp_dev_d2h(dev, back, b, 0, N));
    CHECK(!memcmp(back, src, N), "h2d -> d2d -> d2h round trip");

    /* d2d_on has no mock member: the default (sync + d2d) runs. Offsets both sides. */
    CHECK_OK(bp_dev_d2d_on(dev, NULL, b, 10, a, 100, 50));
    CHECK_OK(bp_dev_d2h(dev, back, b, 0, N));
    memcpy(expect, src, N);
    memcpy(expect + 10, src + 100, 50);
    CHECK(!memcmp(back, expect, N), "d2d_on with offsets");

    /* memset_on default, then memset member. */
    CHECK_OK(bp_dev_memset_on(dev, NULL, b, 5, 0xAB, 20));
    CHECK_OK(bp_dev_d2h_on(dev, NULL, back, b, 0, N));
    CHECK_OK(bp_dev_stream_sync(dev, NULL));
    memset(expect + 5, 0xAB, 20);
    CHECK(!memcmp(back, expect, N), "memset_on");

    /* 2-D pitched, default per-row path: 4 rows of 8 bytes, source pitch 16, device pitch 32. */
    unsigned char grid[64];
    for (int i = 0; i < 64; i++) grid[i] = (unsigned char)(200 - i);
    CHECK_OK(bp_dev_memset(dev, a, 0, 0, N));
    CHECK_OK(bp_dev_copy_2d(dev, NULL, BP_COPY_H2D, a, 3, 32, grid, 0, 16, 8, 4));
    CHECK_OK(bp_dev_d2h(dev, back, a, 0, N));
    memset(expect, 0, N);
    for (int r = 0; r < 4; r++) memcpy(expect + 3 + r * 32, grid + r * 16, 8);
    CHECK(!memcmp(back, expect, N), "copy_2d h2d pitched");
    CHECK(bp_dev_copy_2d(dev, NULL, BP_COPY_H2D, a, 3, 100, grid, 0, 16, 8, 4) == BP_E_INVAL,
          "copy_2d whose last row overruns is refused");

    /* Retained source: release runs exactly once, on success and on failure. */
    int released = 0;
    void release_cb(void *ctx);
    CHECK_OK(bp_dev_h2d_retained(dev, NULL, a, 0, src, N, release_cb, &released));
    CHECK(released == 1, "release ran once after success (%d)", released);
    CHECK(bp_dev_h2d_retained(dev, NULL, a, 1, src, N, release_cb, &released) == BP_E_INVAL, "overrun refused");
    CHECK(released == 2, "release ran once after failure too (%d)", released);

    bp_dev_free(dev, a);
    bp_dev_free(dev, b);
}

void release_cb(void *ctx) { (*(int *)ctx)++; }

static void test_redzone(bp_device *dev) {
    bp_ledger_set_redzone(dev, 64, true);
    void *a = NULL;
    CHECK_OK(bp_dev_alloc(dev, 100, &a));
    unsigned char back[100];
    CHECK_OK(bp_dev_d2h(dev, back, a, 0, 100));
    bool poisoned = true;
    for (int i = 0; i < 100; i++) poisoned = poisoned && back[i] == 0xFF;
    CHECK(poisoned, "a new allocation reads as poison (0xFF: NaN floats)");

    bp_kernel *poke = NULL, *again = NULL;
    CHECK_OK(bp_dev_kernel(dev, "poke", &poke));
    CHECK_OK(bp_dev_kernel(dev, "poke", &again));
    CHECK(poke && poke == again, "op cache returns the same handle");
    CHECK(bp_dev_kernel(dev, "nope", &again) == BP_E_NOT_FOUND, "unknown kernel is NOT_FOUND");
    bp_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};

    /* In bounds: the last byte. Scan finds nothing. */
    bp_kernel_arg in[3] = {bp_arg_buf(a, 0), bp_arg_i64(99), bp_arg_i32(7)};
    CHECK_OK(bp_dev_launch(dev, NULL, poke, &dims, in, 3));
    CHECK(bp_ledger_scan(dev, NULL) == 0, "in-bounds write leaves the redzone intact");

    /* Three bytes past the end: the kind of off-by-a-block bug a kernel makes. */
    bp_kernel_arg out[3] = {bp_arg_buf(a, 0), bp_arg_i64(103), bp_arg_i32(1)};
    CHECK_OK(bp_dev_launch(dev, NULL, poke, &dims, out, 3));
    FILE *f = tmpfile();
    size_t bad = bp_ledger_scan(dev, f);
    char *rep = slurp(f);
    CHECK(bad == 1, "scan finds the damaged allocation (%zu)", bad);
    CHECK(strstr(rep, "3 bytes past the end of 100 bytes") && strstr(rep, "test_device_ledger.c"),
          "scan report names the offset and the site: %s", rep);
    fclose(f);
    CHECK(bp_ledger_redzone_faults(dev) == 1, "fault counted");
    bp_dev_free(dev, a); /* free checks again */
    CHECK(bp_ledger_redzone_faults(dev) == 2, "free detects the damage too (%zu)", bp_ledger_redzone_faults(dev));

    /* Poison on request. */
    CHECK_OK(bp_dev_alloc(dev, 16, &a));
    CHECK_OK(bp_dev_memset(dev, a, 0, 0, 16));
    CHECK_OK(bp_ledger_poison(dev, a));
    CHECK_OK(bp_dev_d2h(dev, back, a, 0, 16));
    CHECK(back[0] == 0xFF && back[15] == 0xFF, "poison fills the allocation");
    bp_dev_free(dev, a);
    CHECK(bp_ledger_poison(dev, a) == BP_E_INVAL, "poison of a freed buffer is refused");
    bp_ledger_set_redzone(dev, 0, false);
}

static void test_graph(bp_device *dev) {
    bp_stream *s = NULL;
    void *a = NULL;
    CHECK_OK(bp_dev_stream_create(dev, &s));
    CHECK_OK(bp_dev_alloc(dev, 8, &a));
    CHECK_OK(bp_dev_memset(dev, a, 0, 0, 8));
    bp_kernel *poke = NULL;
    CHECK_OK(bp_dev_kernel(dev, "poke", &poke));
    bp_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    bp_kernel_arg args[3] = {bp_arg_buf(a, 0), bp_arg_i64(2), bp_arg_i32(42)};

    CHECK_OK(bp_dev_graph_begin(dev, s));
    CHECK(bp_dev_stream_is_capturing(dev, s), "capturing after begin");
    CHECK_OK(bp_dev_launch(dev, s, poke, &dims, args, 3));
    unsigned char back[8];
    CHECK(bp_dev_d2h(dev, back, a, 0, 8) == BP_E_INVAL, "a blocking copy during capture is refused");
    CHECK(strstr(bp_last_error(), "capture") != NULL, "and says why: %s", bp_last_error());
    bp_graph *g = NULL;
    CHECK_OK(bp_dev_graph_end(dev, s, &g));
    CHECK(!bp_dev_stream_is_capturing(dev, s), "not capturing after end");
    CHECK_OK(bp_dev_d2h(dev, back, a, 0, 8));
    CHECK(back[2] == 0, "a captured launch did not run yet");
    CHECK_OK(bp_dev_graph_replay(dev, g, s));
    CHECK_OK(bp_dev_stream_sync(dev, s));
    CHECK_OK(bp_dev_d2h(dev, back, a, 0, 8));
    CHECK(back[2] == 42, "replay ran it (%d)", back[2]);
    bp_dev_graph_destroy(dev, g);

    /* abort-if-active: ends a live capture, is a no-op otherwise. */
    CHECK_OK(bp_dev_graph_begin(dev, s));
    bp_dev_graph_abort(dev, s);
    CHECK(!bp_dev_stream_is_capturing(dev, s), "abort ended the capture");
    bp_dev_graph_abort(dev, s);
    CHECK_OK(bp_dev_d2h(dev, back, a, 0, 8));

    bp_event *e0 = NULL, *e1 = NULL;
    CHECK_OK(bp_dev_event_create(dev, &e0));
    CHECK_OK(bp_dev_event_create(dev, &e1));
    CHECK_OK(bp_dev_event_record(dev, e0, s));
    CHECK_OK(bp_dev_event_wait(dev, NULL, e0));
    CHECK_OK(bp_dev_event_sync(dev, e0));
    float ms;
    CHECK(bp_dev_event_elapsed_ms(dev, e0, e1, &ms) == BP_E_UNSUPPORTED, "elapsed defaults to unsupported");
    bp_dev_event_destroy(dev, e0);
    bp_dev_event_destroy(dev, e1);
    bp_dev_stream_destroy(dev, s);
    bp_dev_free(dev, a);

    size_t total = 0, fr = 0;
    CHECK_OK(bp_dev_mem_info(dev, &total, &fr));
    CHECK(total == (size_t)1 << 30 && fr == total, "mem_info: 1 GiB, all free (%zu)", fr);
    CHECK(bp_dev_compute_units(dev) == 4, "compute units");
    void *pin = NULL;
    CHECK_OK(bp_dev_host_alloc_pinned(dev, 100, &pin));
    CHECK(pin && ((uintptr_t)pin & 63) == 0, "default pinned memory is 64-byte aligned");
    bp_dev_host_free_pinned(dev, pin);
    void *arena = NULL;
    CHECK_OK(bp_dev_arena_create(dev, 4096, &arena));
    CHECK(bp_ledger_live_bytes(dev) == 4096, "the arena is one ledger entry");
    bp_dev_arena_destroy(dev, arena);
}

static void test_faults(bp_device *dev) {
    void *a = NULL;
    bp_mock_fail_nth(dev, BP_MOCK_ALLOC, 1, BP_E_NOMEM);
    CHECK(bp_dev_alloc(dev, 64, &a) == BP_E_NOMEM && a == NULL, "injected alloc failure");
    CHECK(strstr(bp_last_error(), "injected alloc failure") != NULL, "message: %s", bp_last_error());
    CHECK(bp_ledger_live_count(dev) == 0, "a failed alloc is not in the ledger");
    CHECK_OK(bp_dev_alloc(dev, 64, &a));
    unsigned char h[64] = {0};
    bp_mock_fail_nth(dev, BP_MOCK_COPY, 2, BP_E_DEVICE);
    CHECK_OK(bp_dev_h2d(dev, a, 0, h, 64));
    CHECK(bp_dev_h2d(dev, a, 0, h, 64) == BP_E_DEVICE, "second copy fails as armed");
    CHECK_OK(bp_dev_h2d(dev, a, 0, h, 64));
    bp_mock_fail_nth(dev, BP_MOCK_SYNC, 1, BP_E_DEVICE);
    CHECK(bp_dev_sync(dev) == BP_E_DEVICE, "sync failure");
    char buf[48];
    CHECK(!strcmp(bp_mock_recent(dev, 0, buf, sizeof buf), "sync device"), "recent call recorded: '%s'", buf);
    int before = bp_mock_calls(dev, BP_MOCK_COPY);
    CHECK_OK(bp_dev_h2d(dev, a, 0, h, 64));
    CHECK(bp_mock_calls(dev, BP_MOCK_COPY) == before + 1, "copy calls counted");
    bp_dev_free(dev, a);
}

static void test_bad_tables(void) {
    bp_device_methods m = {0};
    bp_device *d = NULL;
    m.version = BP_DEVICE_METHODS_VERSION;
    m.name = "broken";
    CHECK(bp_device_open(&m, NULL, NULL, &d) == BP_E_INVAL && !d, "a table without alloc is refused");
    CHECK(strstr(bp_last_error(), "alloc") != NULL, "naming the member: %s", bp_last_error());
}

int main(void) {
    bp_device *dev = NULL;
    CHECK_OK(bp_mock_device_open(&dev));
    if (!dev) return bp_test_finish();
    test_ledger(dev);
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty after test_ledger");
    test_copies(dev);
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty after test_copies");
    test_redzone(dev);
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty after test_redzone");
    test_graph(dev);
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty after test_graph (%zu)", bp_ledger_live_count(NULL));
    test_faults(dev);
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty after test_faults");
    test_bad_tables();

    /* A leak at close is swept (and named on stderr), so the process ledger ends empty. */
    void *leak = NULL;
    CHECK_OK(bp_dev_alloc(dev, 32, &leak));
    bp_device_close(dev);
    CHECK(bp_ledger_live_count(NULL) == 0, "close swept the leak");
    return bp_test_finish();
}
