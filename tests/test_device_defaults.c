/* The defaults of the device interface (include/backplane_device.h), member by member, on the
 * mock device through a version-1 table of REQUIRED members only (bp_mock_device_open_bare), and
 * the version-3 members on the full mock and on a small host device defined here: what the
 * header promises for a NULL member is what the wrappers do. Expected values come from what the
 * test asked for and wrote, never from the code under test.
 *   - version: a table is read only up to its version's marker; a version above the library's
 *     is refused;
 *   - alloc_managed falls back to a plain allocation (bp_dev_has_managed says so);
 *   - graph capture without graph members runs the work at once, gives a NULL graph, replays
 *     it as nothing, and still refuses blocking calls while "capturing"; a NULL graph on a device
 *     with graphs is refused;
 *   - event_query never blocks and says done by default; bind_to_thread and the index default;
 *   - host_ptr_to_device: refused by default; on the mock the mapping is in the ledger, reads
 *     and writes the host bytes in place, is never poisoned, and its free leaves the host memory;
 *   - kernel metadata: has_kernel by lookup (no error left behind), n_tile 1, has_cast through
 *     the "cast_<FROM>_<TO>" name; chunk_slack_bytes widens allocations (inside the redzone);
 *   - pinned host memory comes back zeroed, from the default and from a member that does not;
 *   - copy_d2h_on_stream's default is an async copy and a stream sync;
 *   - bp_ledger_poison_redzones(lo, hi): guard bands refilled, payloads cleared, the rest left. */
#include <stdlib.h>
#include <string.h>

#include "backplane_device.h"
#include "harness.h"
#include "mock/mock_device.h"

/* ---- a host device with the version-3 members that change allocations ----------------------- */

static size_t host_last_alloc; /* the bytes the device was asked for last */

static bp_status h_alloc(bp_device *dev, size_t bytes, void **buf) {
    (void)dev;
    host_last_alloc = bytes;
    *buf = malloc(bytes);
    return *buf ? BP_OK : bp_device_fail(BP_E_NOMEM, "host: no memory");
}
static void h_free(bp_device *dev, void *buf) { (void)dev, free(buf); }
static bp_status h_h2d(bp_device *dev, void *dst, size_t off, const void *src, size_t n) {
    (void)dev, memcpy((char *)dst + off, src, n);
    return BP_OK;
}
static bp_status h_d2h(bp_device *dev, void *dst, const void *src, size_t off, size_t n) {
    (void)dev, memcpy(dst, (const char *)src + off, n);
    return BP_OK;
}
/* Pinned memory full of 0xAB: the wrapper must clear it. */
static bp_status h_pinned(bp_device *dev, size_t bytes, void **out) {
    (void)dev;
    *out = malloc(bytes);
    if (*out) memset(*out, 0xAB, bytes);
    return *out ? BP_OK : bp_device_fail(BP_E_NOMEM, "host: no memory");
}
static void h_unpin(bp_device *dev, void *p) { (void)dev, free(p); }
static size_t h_slack(bp_device *dev) { (void)dev; return 64; }
static bool h_has_module(bp_device *dev, const char *name) { (void)dev; return !strcmp(name, "cast_F32_F16"); }

static bp_device_methods host_table(int version) {
    bp_device_methods m;
    memset(&m, 0, sizeof m);
    m.version = version, m.name = "host";
    m.alloc = h_alloc, m.free = h_free, m.h2d = h_h2d, m.d2h = h_d2h;
    m.host_alloc_pinned = h_pinned, m.host_free_pinned = h_unpin;
    m.chunk_slack_bytes = h_slack, m.has_module = h_has_module;
    return m;
}

static void test_versions(void) {
    bp_device_methods m = host_table(BP_DEVICE_METHODS_VERSION + 1);
    bp_device *dev = NULL;
    CHECK(bp_device_open(&m, NULL, NULL, &dev) == BP_E_UNSUPPORTED && !dev, "a table from a newer header is refused");
    CHECK(strstr(bp_last_error(), "version"), "the refusal names the version: %s", bp_last_error());

    /* Version 3: slack, pinned, has_module all read. The table is a temporary (copied at open). */
    m = host_table(3);
    CHECK_OK(bp_device_open(&m, NULL, NULL, &dev));
    memset(&m, 0, sizeof m);
    void *b = NULL;
    CHECK_OK(bp_dev_alloc(dev, 1000, &b));
    CHECK(host_last_alloc == 1064, "1000 bytes with 64 bytes of slack asked the device for %zu", host_last_alloc);
    bp_dev_free(dev, b);
    bp_ledger_set_redzone(dev, 128, false); /* the guard band is longer: it covers the slack */
    CHECK_OK(bp_dev_alloc(dev, 1000, &b));
    CHECK(host_last_alloc == 1128, "1000 bytes, redzone 128, slack 64 asked for %zu", host_last_alloc);
    CHECK(bp_ledger_scan(dev, NULL) == 0, "fresh guard band intact");
    bp_dev_free(dev, b);
    CHECK(bp_dev_chunk_slack_bytes(dev) == 64, "slack read");
    CHECK(bp_dev_has_cast(dev, BP_KIND_F32, BP_KIND_F16) && !bp_dev_has_cast(dev, BP_KIND_F16, BP_KIND_F32),
          "has_cast's default asks has_module for cast_<FROM>_<TO>");
    unsigned char *p = NULL;
    CHECK_OK(bp_dev_host_alloc_pinned(dev, 777, (void **)&p));
    int nonzero = 0;
    for (int i = 0; p && i < 777; i++) nonzero += p[i] != 0;
    CHECK(p && nonzero == 0, "pinned memory from a member that fills it: %d non-zero bytes", nonzero);
    bp_dev_host_free_pinned(dev, p);
    bp_device_close(dev);

    /* The same members in a version-1 table are past its marker: never read. */
    m = host_table(1);
    CHECK_OK(bp_device_open(&m, NULL, NULL, &dev));
    CHECK_OK(bp_dev_alloc(dev, 1000, &b));
    CHECK(host_last_alloc == 1000, "a version-1 table's slack member was read (asked %zu)", host_last_alloc);
    CHECK(bp_dev_chunk_slack_bytes(dev) == 0 && !bp_dev_has_cast(dev, BP_KIND_F32, BP_KIND_F16),
          "version-3 members of a version-1 table count as NULL");
    bp_dev_free(dev, b);
    bp_device_close(dev);

    bp_device_methods half = host_table(3);
    half.host_ptr_release = h_free; /* a release without the mapping */
    CHECK(bp_device_open(&half, NULL, NULL, &dev) == BP_E_INVAL && strstr(bp_last_error(), "host_ptr_to_device"),
          "host_ptr_release alone is refused: %s", bp_last_error());
}

/* ---- the bare mock: every optional member defaulted ------------------------------------------ */

static void test_bare(void) {
    bp_device *dev = NULL;
    CHECK_OK(bp_mock_device_open_bare(&dev));
    if (!dev) return;
    void *a = NULL;
    CHECK(!bp_dev_has_managed(dev), "the bare mock has no managed memory");
    CHECK_OK(bp_dev_alloc_managed(dev, 256, &a));
    CHECK(a && bp_ledger_live_count(dev) == 1, "managed falls back to a plain allocation in the ledger");
    const unsigned char pat[4] = {1, 2, 3, 4};
    unsigned char back[4] = {0};
    CHECK_OK(bp_dev_h2d(dev, a, 100, pat, 4));
    CHECK_OK(bp_dev_copy_d2h_on_stream(dev, NULL, back, a, 100, 4));
    CHECK(!memcmp(back, pat, 4), "copy_d2h_on_stream's default returns with the bytes");

    /* Graphs: the work runs at once, the graph is NULL, its replay is nothing. */
    CHECK(!bp_dev_has_graphs(dev), "the bare mock has no graphs");
    bp_kernel *poke = NULL;
    CHECK_OK(bp_dev_kernel(dev, "poke", &poke));
    CHECK_OK(bp_dev_graph_begin(dev, NULL));
    CHECK(bp_dev_stream_is_capturing(dev, NULL), "the capture flag is set without graph members");
    const bp_kernel_arg args[3] = {bp_arg_buf(a, 0), bp_arg_i64(7), bp_arg_i32(0x5A)};
    const bp_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    CHECK_OK(bp_dev_launch(dev, NULL, poke, &dims, args, 3));
    CHECK(bp_dev_d2h(dev, back, a, 7, 1) == BP_E_INVAL, "a blocking copy during a capture is refused without graphs too");
    bp_graph *g = (bp_graph *)(void *)&g;
    CHECK_OK(bp_dev_graph_end(dev, NULL, &g));
    CHECK(g == NULL, "graph_end's default gives no graph");
    CHECK_OK(bp_dev_d2h(dev, back, a, 7, 1));
    CHECK(back[0] == 0x5A, "the launch ran during the default capture (byte %#x)", back[0]);
    CHECK_OK(bp_dev_graph_replay(dev, NULL, NULL));
    CHECK(bp_dev_graph_end(dev, NULL, &g) == BP_E_INVAL, "graph_end without a capture is refused");

    /* Events, thread binding, index. */
    bp_event *e = NULL;
    bool done = false;
    CHECK_OK(bp_dev_event_create(dev, &e));
    CHECK_OK(bp_dev_event_record(dev, e, NULL));
    CHECK_OK(bp_dev_event_query(dev, e, &done));
    CHECK(done, "event_query's default says done");
    bp_dev_event_destroy(dev, e);
    CHECK_OK(bp_dev_bind_to_thread(dev));
    CHECK(bp_dev_index(dev) == 0, "device index defaults to 0");

    /* Mapped host memory is refused; metadata defaults. */
    char host[64];
    void *m = (void *)1;
    CHECK(bp_dev_host_ptr_to_device(dev, host, sizeof host, &m) == BP_E_UNSUPPORTED && !m,
          "host_ptr_to_device defaults to unsupported");
    bp_clear_error();
    CHECK(bp_dev_has_kernel(dev, "gemm") && !bp_dev_has_kernel(dev, "no_such_kernel"), "has_kernel by lookup");
    CHECK(bp_last_error()[0] == '\0', "a 'no' from has_kernel leaves no error: %s", bp_last_error());
    CHECK(bp_dev_kernel_n_tile(dev, poke) == 1, "n_tile defaults to 1");
    CHECK(!bp_dev_has_cast(dev, BP_KIND_F32, BP_KIND_F16), "no cast kernel in the mock");
    CHECK(bp_dev_chunk_slack_bytes(dev) == 0, "slack defaults to 0");
    unsigned char *pin = NULL;
    CHECK_OK(bp_dev_host_alloc_pinned(dev, 100, (void **)&pin));
    int nonzero = 0;
    for (int i = 0; pin && i < 100; i++) nonzero += pin[i] != 0;
    CHECK(pin && nonzero == 0, "default pinned memory zeroed (%d non-zero)", nonzero);
    bp_dev_host_free_pinned(dev, pin);
    bp_dev_free(dev, a);
    CHECK(bp_ledger_live_count(dev) == 0, "bare mock ledger empty");
    bp_device_close(dev);
}

/* ---- the full mock: version-3 members, a NULL graph refused, poison_redzones ------------------ */

static void test_full(void) {
    bp_device *dev = NULL;
    CHECK_OK(bp_mock_device_open(&dev));
    if (!dev) return;
    CHECK(bp_dev_has_graphs(dev), "the mock has graphs");
    CHECK(bp_dev_graph_replay(dev, NULL, NULL) == BP_E_INVAL, "a NULL graph is refused where graphs exist");
    const int binds = bp_mock_calls(dev, BP_MOCK_SYNC);
    CHECK_OK(bp_dev_bind_to_thread(dev));
    CHECK(bp_mock_calls(dev, BP_MOCK_SYNC) == binds + 1, "bind_to_thread reaches the member");

    /* Mapped host memory: in place, in the ledger, never poisoned, not freed by bp_dev_free. */
    unsigned char *host = malloc(256);
    for (int i = 0; i < 256; i++) host[i] = (unsigned char)i;
    bp_ledger_set_redzone(dev, 32, true);
    void *mapped = NULL, *b0 = NULL, *b1 = NULL;
    CHECK_OK(bp_dev_alloc(dev, 100, &b0));
    CHECK_OK(bp_dev_host_ptr_to_device(dev, host, 256, &mapped));
    CHECK_OK(bp_dev_alloc(dev, 50, &b1));
    CHECK(bp_ledger_live_count(dev) == 3, "the mapping is in the ledger");
    unsigned char v = 0;
    CHECK_OK(bp_dev_d2h(dev, &v, mapped, 200, 1));
    CHECK(v == 200, "the device reads the host bytes in place (%u)", v);
    CHECK(bp_ledger_poison(dev, mapped) == BP_E_INVAL && host[5] == 5, "mapped memory is not poisoned");
    CHECK(bp_dev_h2d(dev, mapped, 300, &v, 1) == BP_E_INVAL, "a range past the mapping is refused");

    /* poison_redzones over allocations 1..2 (the mapping, b1): b1's band refilled, payload
     * cleared; the mapping untouched; b0 (index 0) left alone. */
    bp_kernel *poke = NULL;
    CHECK_OK(bp_dev_kernel(dev, "poke", &poke));
    const bp_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    const bp_kernel_arg over1[3] = {bp_arg_buf(b1, 0), bp_arg_i64(50 + 3), bp_arg_i32(0)}; /* 3 past the end */
    const bp_kernel_arg over0[3] = {bp_arg_buf(b0, 0), bp_arg_i64(100), bp_arg_i32(0)};
    CHECK_OK(bp_dev_launch(dev, NULL, poke, &dims, over1, 3));
    CHECK_OK(bp_dev_launch(dev, NULL, poke, &dims, over0, 3));
    CHECK_OK(bp_dev_memset(dev, b1, 0, 0x11, 50));
    CHECK(bp_ledger_scan(dev, NULL) == 2, "both overruns seen before");
    CHECK_OK(bp_ledger_poison_redzones(dev, 1, 3));
    CHECK(bp_ledger_scan(dev, NULL) == 1, "after poison_redzones(1, 3) only b0's damage is left");
    unsigned char pay[50];
    CHECK_OK(bp_dev_d2h(dev, pay, b1, 0, 50));
    int nz = 0;
    for (int i = 0; i < 50; i++) nz += pay[i] != 0;
    CHECK(nz == 0, "b1's payload cleared (%d non-zero)", nz);
    int intact = 1;
    for (int i = 0; i < 256; i++) intact &= host[i] == (unsigned char)i;
    CHECK(intact, "the mapped host memory is untouched by poison_redzones");
    CHECK(bp_ledger_poison_redzones(dev, 2, 4) == BP_E_INVAL, "a range past the live count is refused");
    CHECK(bp_ledger_poison_redzones(dev, 2, 1) == BP_E_INVAL, "lo > hi is refused");
    CHECK_OK(bp_ledger_poison_redzones(dev, 0, 1)); /* repair b0 so its free reports nothing */
    bp_dev_free(dev, mapped);
    bp_dev_free(dev, b0);
    bp_dev_free(dev, b1);
    host[0] = 42; /* still the caller's memory (ASan would see a free) */
    free(host);

    /* event_query on the mock: done once recorded, without blocking. */
    bp_event *e = NULL;
    bool done = false;
    CHECK_OK(bp_dev_event_create(dev, &e));
    CHECK_OK(bp_dev_event_record(dev, e, NULL));
    CHECK_OK(bp_dev_event_query(dev, e, &done));
    CHECK(done, "a recorded mock event is done");
    bp_dev_event_destroy(dev, e);
    CHECK(bp_ledger_live_count(dev) == 0, "full mock ledger empty");
    bp_device_close(dev);
}

int main(void) {
    test_versions();
    test_bare();
    test_full();
    return bp_test_finish();
}
