/* The device interface (include/backplane_device.h) over Vulkan, through the bp_dev_* wrappers:
 * allocations in the ledger, copies both ways and device to device, memset, redzones, kernels
 * from the op cache, typed launches on the default stream and on a created stream, events,
 * refused arguments, a failed allocation with its cause. Runs with BACKPLANE_VULKAN_STAGING=1,
 * so the staging-buffer copy path a discrete GPU takes runs here too (lavapipe's memory is
 * host-visible, and test_vulkan_kernels covers the mapped path). SKIP without a device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#if BP_HAVE_VULKAN
#include "backplane_device.h"
#include "vulkan/vk_internal.h"

static void check_copies(bp_device *dev) {
    size_t base = bp_ledger_live_count(dev);
    unsigned char src[1000], back[1000];
    for (int i = 0; i < 1000; i++) src[i] = (unsigned char)(i * 7 + 3);
    void *a = NULL, *b = NULL;
    CHECK_OK(bp_dev_alloc(dev, 1000, &a));
    CHECK_OK(bp_dev_alloc(dev, 1000, &b));
    CHECK(bp_ledger_live_count(dev) == base + 2, "ledger: %zu live, want %zu", bp_ledger_live_count(dev), base + 2);
    CHECK_OK(bp_dev_h2d(dev, a, 0, src, 1000));
    memset(back, 0, sizeof back);
    CHECK_OK(bp_dev_d2h(dev, back, a, 0, 1000));
    CHECK(memcmp(src, back, 1000) == 0, "h2d then d2h changed the bytes");
    /* Offsets on both sides, d2d, and an odd length. */
    CHECK_OK(bp_dev_memset(dev, b, 0, 0x5A, 1000));
    CHECK_OK(bp_dev_d2d(dev, b, 101, a, 13, 77));
    CHECK_OK(bp_dev_d2h(dev, back, b, 0, 1000));
    bool ok = true;
    for (int i = 0; i < 1000; i++) {
        unsigned char want = (i >= 101 && i < 178) ? src[i - 101 + 13] : 0x5A;
        if (back[i] != want) ok = false;
    }
    CHECK(ok, "memset + d2d at offsets gave wrong bytes");
    /* A copy past the end is refused by the ledger check, naming the allocation. */
    bp_status s = bp_dev_h2d(dev, a, 990, src, 20);
    CHECK(s == BP_E_INVAL, "h2d past the end: %s", bp_status_name(s));
    bp_dev_free(dev, a);
    bp_dev_free(dev, b);
    CHECK(bp_ledger_live_count(dev) == base, "ledger: %zu live after free, want %zu", bp_ledger_live_count(dev), base);

    /* Async copies on a stream: valid after the stream is synced, in order with each other. */
    bp_stream *q = NULL;
    CHECK_OK(bp_dev_stream_create(dev, &q));
    void *c = NULL;
    CHECK_OK(bp_dev_alloc(dev, 1000, &c));
    if (q && c) {
        unsigned char back2[1000];
        memset(back, 0, sizeof back);
        memset(back2, 0, sizeof back2);
        CHECK_OK(bp_dev_h2d_on(dev, q, c, 0, src, 1000));
        CHECK_OK(bp_dev_d2h_on(dev, q, back, c, 0, 1000));
        CHECK_OK(bp_dev_h2d_on(dev, q, c, 500, src, 500)); /* after the d2h: must not show in back */
        CHECK_OK(bp_dev_d2h_on(dev, q, back2, c, 0, 1000));
        CHECK_OK(bp_dev_stream_sync(dev, q));
        CHECK(memcmp(back, src, 1000) == 0, "async h2d then d2h on a stream");
        CHECK(memcmp(back2, src, 500) == 0 && memcmp(back2 + 500, src, 500) == 0, "second async round trip");
        /* More d2h copies than one sync's worth of posts, and more than the first staging. */
        static float big[300000];
        for (int i = 0; i < 40; i++) CHECK_OK(bp_dev_d2h_on(dev, q, back + i, c, (size_t)i, 1));
        void *bb = NULL;
        CHECK_OK(bp_dev_alloc(dev, sizeof big, &bb));
        for (size_t i = 0; i < 300000; i++) big[i] = (float)i;
        if (bb) {
            CHECK_OK(bp_dev_h2d_on(dev, q, bb, 0, big, sizeof big));
            memset(big, 0, sizeof big);
            CHECK_OK(bp_dev_d2h_on(dev, q, big, bb, 0, sizeof big));
            CHECK_OK(bp_dev_stream_sync(dev, q));
            CHECK(big[0] == 0.0f && big[299999] == 299999.0f && big[12345] == 12345.0f, "1.2 MB async round trip");
            bp_dev_free(dev, bb);
        }
        CHECK(memcmp(back, src, 40) == 0, "40 one-byte async reads");
    }
    bp_dev_free(dev, c);
    bp_dev_stream_destroy(dev, q);

    /* Host-visible (managed) memory. */
    void *m = NULL;
    CHECK_OK(bp_dev_alloc_managed(dev, 64, &m));
    if (m) {
        CHECK_OK(bp_dev_h2d(dev, m, 0, src, 64));
        CHECK_OK(bp_dev_d2h(dev, back, m, 0, 64));
        CHECK(memcmp(src, back, 64) == 0, "managed memory round trip");
        bp_dev_free(dev, m);
    }

    /* Redzones: a guard band after the allocation, intact after in-range writes. */
    bp_ledger_set_redzone(dev, 64, true);
    void *r = NULL;
    CHECK_OK(bp_dev_alloc(dev, 100, &r));
    CHECK_OK(bp_dev_h2d(dev, r, 0, src, 100));
    CHECK(bp_ledger_scan(dev, stderr) == 0, "redzone damaged by an in-range write");
    bp_dev_free(dev, r);
    bp_ledger_set_redzone(dev, 0, false);

    /* An allocation the device cannot satisfy: an error with its cause, no crash, no entry. */
    void *huge = (void *)1;
    s = bp_dev_alloc(dev, (size_t)1 << 46, &huge);
    CHECK(s == BP_E_NOMEM || s == BP_E_DEVICE, "64 TiB allocation: %s", bp_status_name(s));
    CHECK(huge == NULL, "failed allocation left a handle");
    CHECK(strstr(bp_last_error(), "Vulkan") != NULL, "failed allocation message: '%s'", bp_last_error());
    CHECK(bp_ledger_live_count(dev) == base, "failed allocation is in the ledger");

    size_t total = 0, freeb = 0;
    CHECK_OK(bp_dev_mem_info(dev, &total, &freeb));
    CHECK(total > 0 && freeb <= total, "mem_info total %zu free %zu", total, freeb);
}

/* matvec_F32 launched by hand with typed arguments: y = W x for a 3 x 5 W. */
static void check_launch(bp_device *dev) {
    bp_kernel *k = NULL, *k2 = NULL;
    CHECK_OK(bp_dev_kernel(dev, "matvec_F32", &k));
    CHECK_OK(bp_dev_kernel(dev, "matvec_F32", &k2));
    CHECK(k && k == k2, "the op cache built matvec_F32 twice");
    bp_kernel *none = NULL;
    bp_status s = bp_dev_kernel(dev, "matvec_NOPE", &none);
    CHECK(s == BP_E_NOT_FOUND, "unknown kernel: %s", bp_status_name(s));
    if (!k) return;
    float w[15], x[5], y[3] = {0}, want[3];
    for (int i = 0; i < 15; i++) w[i] = (float)(i % 7) - 2.5f;
    for (int i = 0; i < 5; i++) x[i] = 0.25f * (float)i - 0.3f;
    for (int r = 0; r < 3; r++) {
        double acc = 0;
        for (int c = 0; c < 5; c++) acc += (double)w[r * 5 + c] * x[c];
        want[r] = (float)acc;
    }
    void *wb = NULL, *xb = NULL, *yb = NULL;
    CHECK_OK(bp_dev_alloc(dev, sizeof w + 4, &wb));
    CHECK_OK(bp_dev_alloc(dev, sizeof x, &xb));
    CHECK_OK(bp_dev_alloc(dev, sizeof y, &yb));
    if (!wb || !xb || !yb) return;
    CHECK_OK(bp_dev_h2d(dev, wb, 0, w, sizeof w));
    CHECK_OK(bp_dev_h2d(dev, xb, 0, x, sizeof x));
    bp_vk_push pc = {.rows = 3, .cols = 5, .row_bytes = 20, .nsub = 5, .t = 1, .y_row0 = 0, .y_stride = 3};
    bp_launch_dims d = {{3, 1, 1}, {64, 1, 1}, 0};
    bp_kernel_arg args[4] = {bp_arg_buf(wb, 0), bp_arg_buf(xb, 0), bp_arg_buf(yb, 0), bp_arg_bytes(&pc, sizeof pc)};
    CHECK_OK(bp_dev_launch(dev, NULL, k, &d, args, 4));
    CHECK_OK(bp_dev_d2h(dev, y, yb, 0, sizeof y));
    for (int r = 0; r < 3; r++) CHECK(fabsf(y[r] - want[r]) < 1e-5f, "default stream: y[%d] = %g, want %g", r, (double)y[r], (double)want[r]);

    /* On a created stream, completion observed through an event. */
    bp_stream *st = NULL;
    bp_event *ev = NULL;
    CHECK_OK(bp_dev_stream_create(dev, &st));
    CHECK_OK(bp_dev_event_create(dev, &ev));
    CHECK_OK(bp_dev_memset(dev, yb, 0, 0, sizeof y));
    CHECK_OK(bp_dev_launch(dev, st, k, &d, args, 4));
    CHECK_OK(bp_dev_event_record(dev, ev, st));
    CHECK_OK(bp_dev_event_sync(dev, ev));
    CHECK_OK(bp_dev_stream_sync(dev, st));
    memset(y, 0, sizeof y);
    CHECK_OK(bp_dev_d2h(dev, y, yb, 0, sizeof y));
    for (int r = 0; r < 3; r++) CHECK(fabsf(y[r] - want[r]) < 1e-5f, "stream: y[%d] = %g, want %g", r, (double)y[r], (double)want[r]);
    /* Many launches in flight on one stream (more than the command-buffer ring). */
    for (int i = 0; i < 10; i++) {
        CHECK_OK(bp_dev_launch(dev, st, k, &d, args, 4));
        CHECK_OK(bp_dev_event_record(dev, ev, st));
    }
    CHECK_OK(bp_dev_sync(dev));
    bp_dev_event_destroy(dev, ev);
    bp_dev_stream_destroy(dev, st);

    /* Refused: a buffer with an offset, a grid over the device limit. */
    args[1] = bp_arg_buf(xb, 4);
    s = bp_dev_launch(dev, NULL, k, &d, args, 4);
    CHECK(s == BP_E_INVAL, "buffer offset: %s", bp_status_name(s));
    args[1] = bp_arg_buf(xb, 0);
    bp_launch_dims big = {{0xFFFFFFFFu, 1, 1}, {64, 1, 1}, 0};
    s = bp_dev_launch(dev, NULL, k, &big, args, 4);
    CHECK(s == BP_E_SHAPE, "grid over the limit: %s", bp_status_name(s));
    bp_dev_free(dev, wb);
    bp_dev_free(dev, xb);
    bp_dev_free(dev, yb);
}

/* BACKPLANE_VULKAN_DEVICE, in a child process each (the device is chosen once per process):
 * a name that matches nothing is refused with a sentence naming it; an index and a name
 * substring of the device found without the variable select it. */
static int select_in_child(const char *sel, char *name, size_t name_len) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        setenv("BACKPLANE_VULKAN_DEVICE", sel, 1);
        char why[256] = "";
        bp_device *d = bp_vk_device(why, sizeof why);
        char out[300];
        int n = snprintf(out, sizeof out, "%c%s", d ? '+' : '-', d ? bp_vk_ctx_of(d)->name : why);
        if (write(fd[1], out, (size_t)n) < 0) _exit(3);
        _exit(0); /* no atexit teardown in the child: it shares nothing worth cleaning */
    }
    close(fd[1]);
    ssize_t n = read(fd[0], name, name_len - 1);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    name[n > 0 ? n : 0] = 0;
    return n > 0 ? 0 : -1;
}

static void check_selection(const char *found) {
    char got[300];
    CHECK(select_in_child("no-such-gpu-xyz", got, sizeof got) == 0 && got[0] == '-' &&
              strstr(got, "no-such-gpu-xyz"), "a name matching nothing: '%s'", got);
    char sub[8];
    snprintf(sub, sizeof sub, "%.5s", found);
    CHECK(select_in_child(sub, got, sizeof got) == 0 && got[0] == '+' && strcmp(got + 1, found) == 0,
          "by name '%s': '%s'", sub, got);
    /* Some index selects this device (it may not be 0 where several exist). */
    bool any = false;
    for (int i = 0; i < 8 && !any; i++) {
        char idx[4];
        snprintf(idx, sizeof idx, "%d", i);
        if (select_in_child(idx, got, sizeof got) == 0 && got[0] == '+' && strcmp(got + 1, found) == 0) any = true;
    }
    CHECK(any, "no index 0..7 selects %s", found);
}

int main(void) {
    /* Before this process opens Vulkan, so the children start clean. */
    char found[300] = "";
    if (select_in_child("", found, sizeof found) == 0 && found[0] == '+') check_selection(found + 1);
    setenv("BACKPLANE_VULKAN_STAGING", "1", 1);
    char why[256] = "";
    bp_device *dev = bp_vk_device(why, sizeof why);
    if (!dev) {
        BP_SKIP("no Vulkan device: %s", why);
        return bp_test_finish();
    }
    CHECK(!bp_vk_ctx_of(dev)->device_mappable, "BACKPLANE_VULKAN_STAGING=1 did not force the staging path");
    check_copies(dev);
    check_launch(dev);
    return bp_test_finish();
}
#else
int main(void) {
    BP_SKIP("the Vulkan backend is not built (BP_VULKAN=OFF or no Vulkan SDK / glslc)");
    return bp_test_finish();
}
#endif
