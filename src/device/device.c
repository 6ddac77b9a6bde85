/* The common device code: open/close, the wrappers every backend calls for memory, copies and
 * kernels (defaults for the optional members, range checks against the ledger, capture checks),
 * the op cache, properties, pinned memory and arenas. Streams, events and graphs: queue.c. */
#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "device/device_internal.h"

static bp_status need_dev(const bp_device *dev, const char *what) {
    if (!dev) return bp_fail(BP_E_INVAL, "%s: device is NULL", what);
    return BP_OK;
}

#define DEV_CHECK(what) \
    do { bp_status s_ = need_dev(dev, what); if (s_) return s_; } while (0)
#define TRY(expr) \
    do { bp_status s_ = (expr); if (s_) return s_; } while (0)
/* Traffic counters: relaxed atomics, read as a whole by bp_dev_traffic_get; and the calling
 * thread's, over every device, for the seam's run records (bp_dev_thread_traffic). */
_Thread_local bp_dev_traffic bp_dev_thread_counts;
#define COUNT(field, n)                                                                   \
    (__atomic_fetch_add(&dev->common->traffic.field, (uint64_t)(n), __ATOMIC_RELAXED), \
     bp_dev_thread_counts.field += (uint64_t)(n))

bp_status bp_device_fail(bp_status s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
    va_end(ap);
    return bp_fail(s, "%s", msg);
}

/* The bytes of a table each version fills: members up to the version's marker. */
static size_t table_bytes(int version) {
    return version == 1 ? offsetof(bp_device_methods, submits)
         : version == 2 ? offsetof(bp_device_methods, event_query) : sizeof(bp_device_methods);
}

bp_status bp_device_open(const bp_device_methods *table, void *impl, const char *name, bp_device **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_device_open: out is NULL");
    *out = NULL;
    if (!table) return bp_fail(BP_E_INVAL, "bp_device_open: method table is NULL");
    if (table->version > BP_DEVICE_METHODS_VERSION)
        return bp_fail(BP_E_UNSUPPORTED, "bp_device_open: method table '%s' is version %d; this library knows %d",
                       table->name ? table->name : "?", table->version, BP_DEVICE_METHODS_VERSION);
    /* Only the members of the table's version are read; the rest stay NULL (defaulted). */
    bp_device_methods mt;
    memset(&mt, 0, sizeof mt);
    if (table->version >= 1) memcpy(&mt, table, table_bytes(table->version));
    const bp_device_methods *m = &mt;
    const char *missing = m->version < 1 ? "version" : !m->name ? "name" : !m->alloc ? "alloc"
                        : !m->free ? "free" : !m->h2d ? "h2d" : !m->d2h ? "d2h" : NULL;
    if (!missing && m->graph_begin && (!m->graph_end || !m->graph_replay || !m->graph_destroy))
        missing = "graph_end/graph_replay/graph_destroy (required with graph_begin)";
    if (!missing && !m->arena_create != !m->arena_destroy) missing = "arena_create/arena_destroy (both or neither)";
    if (!missing && !m->host_ptr_to_device != !m->host_ptr_release)
        missing = "host_ptr_to_device/host_ptr_release (both or neither)";
    if (missing)
        return bp_fail(BP_E_INVAL, "bp_device_open: method table '%s' lacks the required member %s",
                       m->name ? m->name : "?", missing);
    bp_device *dev = bp_calloc(1, sizeof *dev);
    struct bp_device_common *c = bp_calloc(1, sizeof *c);
    if (!dev || !c) {
        bp_free(dev);
        bp_free(c);
        return bp_fail(BP_E_NOMEM, "bp_device_open: no memory");
    }
    pthread_mutex_init(&c->lock, NULL);
    c->methods = mt;
    dev->m = &c->methods;
    dev->impl = impl;
    dev->common = c;
    snprintf(dev->name, sizeof dev->name, "%s", name ? name : m->name);
    /* BACKPLANE_REDZONE=<bytes> arms every device of the process, for a whole-suite hunt. */
    const char *rz = getenv("BACKPLANE_REDZONE");
    if (rz && *rz) {
        char *end;
        unsigned long v = strtoul(rz, &end, 10);
        if (!*end && v <= 1u << 20) {
            c->redzone = v;
            c->poison = v > 0;
        }
    }
    *out = dev;
    return BP_OK;
}

void bp_device_close(bp_device *dev) {
    if (!dev) return;
    struct bp_device_common *c = dev->common;
    for (int i = 0; i < BP_DEV_SCRATCH; i++)
        if (c->scratch[i]) bp_dev_free(dev, c->scratch[i]);
    for (int i = 0; i < c->nk; i++)
        if (dev->m->kernel_release) dev->m->kernel_release(dev, c->kcache[i].k);
    bp_free(c->kcache);
    /* What is still live now is a leak of whoever allocated it: name each one. */
    bp_ledger_sweep(dev, stderr);
    if (dev->m->close) dev->m->close(dev);
    pthread_mutex_destroy(&c->lock);
    bp_free(c);
    bp_free(dev);
}


/* ---- memory ------------------------------------------------------------------------------ */

bp_status bp_dev_raw_d2h(bp_device *dev, void *dst, const void *src, size_t off, size_t n) {
    return dev->m->d2h(dev, dst, src, off, n);
}

bp_status bp_dev_raw_memset(bp_device *dev, void *dst, size_t off, int v, size_t n) {
    if (dev->m->memset) return dev->m->memset(dev, dst, off, v, n);
    unsigned char chunk[4096];
    memset(chunk, v, sizeof chunk);
    while (n) {
        size_t k = n < sizeof chunk ? n : sizeof chunk;
        bp_status s = dev->m->h2d(dev, dst, off, chunk, k);
        if (s) return s;
        off += k;
        n -= k;
    }
    return BP_OK;
}

static bp_status alloc_common(bp_device *dev, size_t bytes, void **buf, bool managed, const char *file,
                              int line) {
    if (!buf) return bp_fail(BP_E_INVAL, "bp_dev_alloc at %s:%d: buf is NULL", file, line);
    *buf = NULL;
    bp_status s = need_dev(dev, "bp_dev_alloc");
    if (s) return s;
    if (!bytes) return bp_fail(BP_E_INVAL, "bp_dev_alloc at %s:%d: zero bytes", file, line);
    pthread_mutex_lock(&dev->common->lock);
    size_t rz = dev->common->redzone;
    bool poison = dev->common->poison;
    pthread_mutex_unlock(&dev->common->lock);
    /* The slack kernels may read past the end: inside the guard band when that is longer. */
    const size_t slack = bp_dev_chunk_slack_bytes(dev);
    size_t total;
    if (!bp_add_size(bytes, rz > slack ? rz : slack, &total))
        return bp_fail(BP_E_NOMEM, "bp_dev_alloc at %s:%d: %zu bytes overflow", file, line, bytes);
    void *b = NULL;
    s = managed && dev->m->alloc_managed ? dev->m->alloc_managed(dev, total, &b) : dev->m->alloc(dev, total, &b);
    if (s || !b) {
        if (!s) s = bp_fail(BP_E_NOMEM, "%s: alloc of %zu bytes returned no buffer", dev->name, total);
        return s;
    }
    if (rz) s = bp_dev_raw_memset(dev, b, bytes, BP_REDZONE_BYTE, rz);
    if (!s && poison) s = bp_dev_raw_memset(dev, b, 0, BP_POISON_BYTE, bytes);
    if (!s) s = bp_ledger_add(dev, b, bytes, rz, file, line);
    if (s) {
        dev->m->free(dev, b);
        return s;
    }
    *buf = b;
    return BP_OK;
}

/* The allocation-failure campaign (core/alloc.h): device memory, pinned host memory and arenas
 * count as allocations and fail on the same switch as the host ones. */
#define INJECT_DEVICE_FAILURE(dev, what, bytes, out)                                                      \
    do {                                                                                                 \
        if (bp_alloc_inject_device(__builtin_return_address(0))) {                                       \
            if (out) *(out) = NULL;                                                                      \
            return bp_fail(BP_E_NOMEM, "%s: %s of %zu bytes failed (injected)", (dev) ? (dev)->name : "?", \
                           what, (size_t)(bytes));                                                       \
        }                                                                                                \
    } while (0)

bp_status bp_dev_alloc_at(bp_device *dev, size_t bytes, void **buf, const char *file, int line) {
    INJECT_DEVICE_FAILURE(dev, "alloc", bytes, buf);
    return alloc_common(dev, bytes, buf, false, file, line);
}

bp_status bp_dev_alloc_managed_at(bp_device *dev, size_t bytes, void **buf, const char *file, int line) {
    INJECT_DEVICE_FAILURE(dev, "managed alloc", bytes, buf);
    return alloc_common(dev, bytes, buf, true, file, line);
}

bool bp_dev_has_managed(bp_device *dev) { return dev && dev->m->alloc_managed; }

bp_status bp_dev_host_ptr_to_device_at(bp_device *dev, void *host, size_t bytes, void **buf, const char *file,
                                       int line) {
    if (!buf) return bp_fail(BP_E_INVAL, "bp_dev_host_ptr_to_device at %s:%d: buf is NULL", file, line);
    *buf = NULL;
    DEV_CHECK("bp_dev_host_ptr_to_device");
    if (!host || !bytes)
        return bp_fail(BP_E_INVAL, "bp_dev_host_ptr_to_device at %s:%d: no host memory given", file, line);
    if (!dev->m->host_ptr_to_device)
        return bp_fail(BP_E_UNSUPPORTED, "%s cannot map host memory (bp_dev_host_ptr_to_device at %s:%d)", dev->name,
                       file, line);
    void *b = NULL;
    TRY(dev->m->host_ptr_to_device(dev, host, bytes, &b));
    if (!b) return bp_fail(BP_E_DEVICE, "%s: host_ptr_to_device gave no handle", dev->name);
    bp_status s = bp_ledger_add(dev, b, bytes, 0, file, line);
    if (s) {
        dev->m->host_ptr_release(dev, b);
        return s;
    }
    bp_ledger_mark(dev, b, BP_LEDGER_MAPPED);
    *buf = b;
    return BP_OK;
}

void bp_dev_free(bp_device *dev, void *buf) {
    if (!dev || !buf) return;
    size_t bytes, rz;
    int what;
    const char *file;
    int line;
    if (!bp_ledger_remove(dev, buf, &bytes, &rz, &what, &file, &line)) {
        /* Passing it on would be a double free in the driver: report and drop it. */
        fprintf(stderr, "backplane: bp_dev_free on %s: %p is not a live allocation (double free?)\n",
                dev->name, buf);
        return;
    }
    long bad = bp_ledger_check_band(dev, buf, bytes, rz);
    if (bad >= 0) {
        pthread_mutex_lock(&dev->common->lock);
        dev->common->rz_faults++;
        pthread_mutex_unlock(&dev->common->lock);
        fprintf(stderr, "backplane: redzone damaged %ld bytes past the end of %zu bytes on %s allocated at %s:%d\n",
                bad, bytes, dev->name, file, line);
    }
    if (what == BP_LEDGER_ARENA && dev->m->arena_destroy) dev->m->arena_destroy(dev, buf);
    else if (what == BP_LEDGER_MAPPED) dev->m->host_ptr_release(dev, buf);
    else dev->m->free(dev, buf);
}

/* A device-side range must lie inside a live allocation: catches use after free and
 * overruns at the call instead of as corrupted weights later. */
static bp_status check_range(bp_device *dev, const void *buf, size_t off, size_t n, const char *what) {
    size_t bytes, end;
    const char *file;
    int line;
    if (!buf) return bp_fail(BP_E_INVAL, "%s on %s: device buffer is NULL", what, dev->name);
    if (!bp_ledger_size_of(dev, buf, &bytes, &file, &line))
        return bp_fail(BP_E_INVAL, "%s on %s: %p is not a live allocation (freed, or not from bp_dev_alloc)", what,
                       dev->name, buf);
    if (!bp_add_size(off, n, &end) || end > bytes)
        return bp_fail(BP_E_INVAL, "%s on %s: %zu bytes at offset %zu overrun the %zu-byte buffer allocated at %s:%d",
                       what, dev->name, n, off, bytes, file, line);
    return BP_OK;
}

void bp_dev_thread_traffic(bp_dev_traffic *out) {
    if (out) *out = bp_dev_thread_counts;
}

void bp_dev_traffic_get(bp_device *dev, bp_dev_traffic *out) {
    memset(out, 0, sizeof *out);
    if (!dev || !dev->common) return;
    const bp_dev_traffic *t = &dev->common->traffic;
    out->h2d = __atomic_load_n(&t->h2d, __ATOMIC_RELAXED);
    out->d2h = __atomic_load_n(&t->d2h, __ATOMIC_RELAXED);
    out->h2d_bytes = __atomic_load_n(&t->h2d_bytes, __ATOMIC_RELAXED);
    out->d2h_bytes = __atomic_load_n(&t->d2h_bytes, __ATOMIC_RELAXED);
    out->launches = __atomic_load_n(&t->launches, __ATOMIC_RELAXED);
    out->submits = dev->m->submits ? dev->m->submits(dev) : __atomic_load_n(&t->submits, __ATOMIC_RELAXED);
}


bp_status bp_dev_h2d(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t bytes) {
    DEV_CHECK("bp_dev_h2d");
    TRY(check_range(dev, dst, dst_off, bytes, "h2d"));
    TRY(bp_dev_blocking_ok(dev, "h2d"));
    if (!src && bytes) return bp_fail(BP_E_INVAL, "h2d on %s: host source is NULL", dev->name);
    if (bytes) COUNT(h2d, 1), COUNT(h2d_bytes, bytes);
    return bytes ? dev->m->h2d(dev, dst, dst_off, src, bytes) : BP_OK;
}

bp_status bp_dev_d2h(bp_device *dev, void *dst, const void *src, size_t src_off, size_t bytes) {
    DEV_CHECK("bp_dev_d2h");
    TRY(check_range(dev, src, src_off, bytes, "d2h"));
    TRY(bp_dev_blocking_ok(dev, "d2h"));
    if (!dst && bytes) return bp_fail(BP_E_INVAL, "d2h on %s: host destination is NULL", dev->name);
    if (bytes) COUNT(d2h, 1), COUNT(d2h_bytes, bytes);
    return bytes ? dev->m->d2h(dev, dst, src, src_off, bytes) : BP_OK;
}

static bp_status bounce_d2d(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t src_off,
                            size_t bytes) {
    enum { CHUNK = 1 << 20 };
    unsigned char *tmp = bp_malloc(bytes < CHUNK ? bytes : CHUNK);
    if (!tmp) return bp_fail(BP_E_NOMEM, "d2d on %s: no host bounce buffer", dev->name);
    bp_status s = BP_OK;
    for (size_t done = 0; done < bytes && !s;) {
        size_t k = bytes - done < CHUNK ? bytes - done : CHUNK;
        s = dev->m->d2h(dev, tmp, src, src_off + done, k);
        if (!s) s = dev->m->h2d(dev, dst, dst_off + done, tmp, k);
        done += k;
    }
    bp_free(tmp);
    return s;
}

bp_status bp_dev_d2d(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t src_off,
                     size_t bytes) {
    DEV_CHECK("bp_dev_d2d");
    TRY(check_range(dev, dst, dst_off, bytes, "d2d destination"));
    TRY(check_range(dev, src, src_off, bytes, "d2d source"));
    TRY(bp_dev_blocking_ok(dev, "d2d"));
    if (!bytes) return BP_OK;
    if (dev->m->d2d) return dev->m->d2d(dev, dst, dst_off, src, src_off, bytes);
    return bounce_d2d(dev, dst, dst_off, src, src_off, bytes);
}

/* The default for an async member: drain the stream, then the blocking copy. Refused while
 * that stream captures (the copy would run now, not be recorded). */
static bp_status default_async_prologue(bp_device *dev, bp_stream *s, const char *what) {
    if (bp_dev_stream_is_capturing(dev, s))
        return bp_fail(BP_E_UNSUPPORTED, "%s on %s: the backend has no async form to record in a graph", what,
                       dev->name);
    return bp_dev_stream_sync(dev, s);
}

bp_status bp_dev_h2d_on(bp_device *dev, bp_stream *s, void *dst, size_t dst_off, const void *src,
                        size_t bytes) {
    DEV_CHECK("bp_dev_h2d_on");
    TRY(check_range(dev, dst, dst_off, bytes, "h2d_async"));
    if (!bytes) return BP_OK;
    COUNT(h2d, 1), COUNT(h2d_bytes, bytes);
    if (dev->m->h2d_async) return dev->m->h2d_async(dev, s, dst, dst_off, src, bytes);
    TRY(default_async_prologue(dev, s, "h2d_async"));
    return dev->m->h2d(dev, dst, dst_off, src, bytes);
}

bp_status bp_dev_d2h_on(bp_device *dev, bp_stream *s, void *dst, const void *src, size_t src_off,
                        size_t bytes) {
    DEV_CHECK("bp_dev_d2h_on");
    TRY(check_range(dev, src, src_off, bytes, "d2h_async"));
    if (!bytes) return BP_OK;
    COUNT(d2h, 1), COUNT(d2h_bytes, bytes);
    if (dev->m->d2h_async) return dev->m->d2h_async(dev, s, dst, src, src_off, bytes);
    TRY(default_async_prologue(dev, s, "d2h_async"));
    return dev->m->d2h(dev, dst, src, src_off, bytes);
}

bp_status bp_dev_d2d_on(bp_device *dev, bp_stream *s, void *dst, size_t dst_off, const void *src,
                        size_t src_off, size_t bytes) {
    DEV_CHECK("bp_dev_d2d_on");
    TRY(check_range(dev, dst, dst_off, bytes, "d2d_async destination"));
    TRY(check_range(dev, src, src_off, bytes, "d2d_async source"));
    if (!bytes) return BP_OK;
    if (dev->m->d2d_async) return dev->m->d2d_async(dev, s, dst, dst_off, src, src_off, bytes);
    TRY(default_async_prologue(dev, s, "d2d_async"));
    if (dev->m->d2d) return dev->m->d2d(dev, dst, dst_off, src, src_off, bytes);
    return bounce_d2d(dev, dst, dst_off, src, src_off, bytes);
}

bp_status bp_dev_h2d_retained(bp_device *dev, bp_stream *s, void *dst, size_t dst_off, const void *src,
                              size_t bytes, bp_release_fn release, void *ctx) {
    bp_status st = need_dev(dev, "bp_dev_h2d_retained");
    if (!st) st = check_range(dev, dst, dst_off, bytes, "h2d_retained");
    if (st) {
        /* The contract: release runs exactly once, failure included, so callers never leak. */
        if (release) release(ctx);
        return st;
    }
    if (dev->m->h2d_retained) return dev->m->h2d_retained(dev, s, dst, dst_off, src, bytes, release, ctx);
    st = bp_dev_h2d_on(dev, s, dst, dst_off, src, bytes);
    if (!st) st = bp_dev_stream_sync(dev, s);
    if (release) release(ctx);
    return st;
}

bp_status bp_dev_copy_2d(bp_device *dev, bp_stream *s, int dir, void *dst, size_t dst_off, size_t dpitch,
                         const void *src, size_t src_off, size_t spitch, size_t width, size_t height) {
    DEV_CHECK("bp_dev_copy_2d");
    if (dir < BP_COPY_H2D || dir > BP_COPY_D2D) return bp_fail(BP_E_INVAL, "copy_2d: bad direction %d", dir);
    if (!width || !height) return BP_OK;
    if (dpitch < width || spitch < width)
        return bp_fail(BP_E_INVAL, "copy_2d on %s: pitch (%zu, %zu) below width %zu", dev->name, dpitch, spitch,
                       width);
    size_t dspan, sspan;
    if (!bp_mul_size(height - 1, dpitch, &dspan) || !bp_add_size(dspan, width, &dspan) ||
        !bp_mul_size(height - 1, spitch, &sspan) || !bp_add_size(sspan, width, &sspan))
        return bp_fail(BP_E_INVAL, "copy_2d on %s: extent overflows", dev->name);
    if (dir != BP_COPY_H2D) TRY(check_range(dev, src, src_off, sspan, "copy_2d source"));
    if (dir != BP_COPY_D2H) TRY(check_range(dev, dst, dst_off, dspan, "copy_2d destination"));
    if (dev->m->copy_2d)
        return dev->m->copy_2d(dev, s, dir, dst, dst_off, dpitch, src, src_off, spitch, width, height);
    TRY(default_async_prologue(dev, s, "copy_2d"));
    for (size_t r = 0; r < height; r++) {
        bp_status st;
        if (dir == BP_COPY_H2D)
            st = dev->m->h2d(dev, dst, dst_off + r * dpitch, (const char *)src + r * spitch, width);
        else if (dir == BP_COPY_D2H)
            st = dev->m->d2h(dev, (char *)dst + r * dpitch, src, src_off + r * spitch, width);
        else if (dev->m->d2d)
            st = dev->m->d2d(dev, dst, dst_off + r * dpitch, src, src_off + r * spitch, width);
        else
            st = bounce_d2d(dev, dst, dst_off + r * dpitch, src, src_off + r * spitch, width);
        if (st) return st;
    }
    return BP_OK;
}

bp_status bp_dev_memset(bp_device *dev, void *dst, size_t dst_off, int value, size_t bytes) {
    DEV_CHECK("bp_dev_memset");
    TRY(check_range(dev, dst, dst_off, bytes, "memset"));
    TRY(bp_dev_blocking_ok(dev, "memset"));
    return bytes ? bp_dev_raw_memset(dev, dst, dst_off, value, bytes) : BP_OK;
}

bp_status bp_dev_memset_on(bp_device *dev, bp_stream *s, void *dst, size_t dst_off, int value, size_t bytes) {
    DEV_CHECK("bp_dev_memset_on");
    TRY(check_range(dev, dst, dst_off, bytes, "memset_async"));
    if (!bytes) return BP_OK;
    if (dev->m->memset_async) return dev->m->memset_async(dev, s, dst, dst_off, value, bytes);
    TRY(default_async_prologue(dev, s, "memset_async"));
    return bp_dev_raw_memset(dev, dst, dst_off, value, bytes);
}

bp_status bp_dev_copy_d2h_on_stream(bp_device *dev, bp_stream *s, void *dst, const void *src, size_t src_off,
                                    size_t bytes) {
    DEV_CHECK("bp_dev_copy_d2h_on_stream");
    TRY(check_range(dev, src, src_off, bytes, "copy_d2h_on_stream"));
    if (!dst && bytes) return bp_fail(BP_E_INVAL, "copy_d2h_on_stream on %s: host destination is NULL", dev->name);
    if (bp_dev_stream_is_capturing(dev, s))
        return bp_fail(BP_E_INVAL, "copy_d2h_on_stream on %s: a blocking copy on a capturing stream", dev->name);
    if (!bytes) return BP_OK;
    if (!dev->m->copy_d2h_on_stream) {
        TRY(bp_dev_d2h_on(dev, s, dst, src, src_off, bytes));
        return bp_dev_stream_sync(dev, s);
    }
    COUNT(d2h, 1), COUNT(d2h_bytes, bytes);
    return dev->m->copy_d2h_on_stream(dev, s, dst, src, src_off, bytes);
}

/* ---- kernels and the op cache ------------------------------------------------------------ */

bp_status bp_dev_kernel(bp_device *dev, const char *name, bp_kernel **out) {
    DEV_CHECK("bp_dev_kernel");
    if (!name || !out) return bp_fail(BP_E_INVAL, "bp_dev_kernel: name or out is NULL");
    *out = NULL;
    if (strlen(name) >= sizeof dev->common->kcache[0].name)
        return bp_fail(BP_E_INVAL, "bp_dev_kernel: kernel name '%s' too long", name);
    struct bp_device_common *c = dev->common;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->nk; i++)
        if (!strcmp(c->kcache[i].name, name)) {
            *out = c->kcache[i].k;
            pthread_mutex_unlock(&c->lock);
            return BP_OK;
        }
    pthread_mutex_unlock(&c->lock);
    if (!dev->m->kernel_lookup) return bp_fail(BP_E_UNSUPPORTED, "%s has no kernels (kernel '%s')", dev->name, name);
    /* Lookup may compile a program (seconds on PoCL): not under the lock. */
    bp_kernel *k = NULL;
    TRY(dev->m->kernel_lookup(dev, name, &k));
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->nk; i++)
        if (!strcmp(c->kcache[i].name, name)) { /* another thread won the race */
            bp_kernel *winner = c->kcache[i].k;
            pthread_mutex_unlock(&c->lock);
            if (dev->m->kernel_release && k != winner) dev->m->kernel_release(dev, k);
            *out = winner;
            return BP_OK;
        }
    if (c->nk == c->cap_k) {
        int cap = c->cap_k ? 2 * c->cap_k : BP_DEV_KCACHE;
        bp_dev_kentry *grown = bp_realloc(c->kcache, (size_t)cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&c->lock);
            if (dev->m->kernel_release) dev->m->kernel_release(dev, k);
            return bp_fail(BP_E_NOMEM, "%s: no memory to grow the op cache past %d kernels at '%s'", dev->name, c->nk,
                           name);
        }
        c->kcache = grown;
        c->cap_k = cap;
    }
    snprintf(c->kcache[c->nk].name, sizeof c->kcache[c->nk].name, "%s", name);
    c->kcache[c->nk++].k = k;
    pthread_mutex_unlock(&c->lock);
    *out = k;
    return BP_OK;
}

bool bp_dev_has_kernel(bp_device *dev, const char *name) {
    if (!dev || !name) return false;
    if (dev->m->has_module) return dev->m->has_module(dev, name);
    /* The default asks the op cache; a "no" is an answer, not a failure to report. */
    char saved[512];
    snprintf(saved, sizeof saved, "%s", bp_last_error());
    bp_kernel *k = NULL;
    const bool yes = bp_dev_kernel(dev, name, &k) == BP_OK;
    if (!yes) {
        if (saved[0]) bp_fail(BP_E_INVAL, "%s", saved);
        else bp_clear_error();
    }
    return yes;
}

int bp_dev_kernel_n_tile(bp_device *dev, bp_kernel *k) {
    if (!dev || !k || !dev->m->kernel_n_tile) return 1;
    int n = dev->m->kernel_n_tile(dev, k);
    return n > 0 ? n : 1;
}

bool bp_dev_has_cast(bp_device *dev, bp_kind from, bp_kind to) {
    if (!dev) return false;
    if (dev->m->has_cast) return dev->m->has_cast(dev, from, to);
    const bp_kind_info *a = bp_kind_lookup((uint32_t)from), *b = bp_kind_lookup((uint32_t)to);
    if (!a || !b) return false;
    char name[64];
    snprintf(name, sizeof name, "cast_%s_%s", a->name, b->name);
    return bp_dev_has_kernel(dev, name);
}

size_t bp_dev_chunk_slack_bytes(bp_device *dev) {
    return dev && dev->m->chunk_slack_bytes ? dev->m->chunk_slack_bytes(dev) : 0;
}

bp_status bp_dev_scratch(bp_device *dev, int slot, size_t bytes, void **buf) {
    DEV_CHECK("bp_dev_scratch");
    if (!buf || slot < 0 || slot >= BP_DEV_SCRATCH)
        return bp_fail(BP_E_INVAL, "bp_dev_scratch: slot %d out of 0..%d or buf NULL", slot, BP_DEV_SCRATCH - 1);
    struct bp_device_common *c = dev->common;
    pthread_mutex_lock(&c->lock);
    void *cur = c->scratch[slot];
    size_t have = c->scratch_bytes[slot];
    pthread_mutex_unlock(&c->lock);
    if (cur && have >= bytes) {
        *buf = cur;
        return BP_OK;
    }
    if (cur) bp_dev_free(dev, cur);
    void *nb = NULL;
    bp_status s = bp_dev_alloc(dev, bytes ? bytes : 1, &nb);
    pthread_mutex_lock(&c->lock);
    c->scratch[slot] = s ? NULL : nb;
    c->scratch_bytes[slot] = s ? 0 : (bytes ? bytes : 1);
    pthread_mutex_unlock(&c->lock);
    *buf = nb;
    return s;
}

enum { MAX_ARGS = 32 };

bp_status bp_dev_launch_raw(bp_device *dev, bp_stream *s, bp_kernel *k, const bp_launch_dims *dims,
                            void **params, int nparams) {
    DEV_CHECK("bp_dev_launch_raw");
    if (!dims || nparams < 0 || (nparams && !params)) return bp_fail(BP_E_INVAL, "launch on %s: bad arguments", dev->name);
    if (!dev->m->launch_raw) return bp_fail(BP_E_UNSUPPORTED, "%s has no raw-argument launch", dev->name);
    COUNT(launches, 1);
    return dev->m->launch_raw(dev, s, k, dims, params, nparams);
}

bp_status bp_dev_launch(bp_device *dev, bp_stream *s, bp_kernel *k, const bp_launch_dims *dims,
                        const bp_kernel_arg *args, int nargs) {
    DEV_CHECK("bp_dev_launch");
    if (!dims || nargs < 0 || nargs > MAX_ARGS || (nargs && !args))
        return bp_fail(BP_E_INVAL, "launch on %s: bad arguments (%d args, at most %d)", dev->name, nargs, MAX_ARGS);
    COUNT(launches, 1);
    if (dev->m->launch) return dev->m->launch(dev, s, k, dims, args, nargs);
    if (!dev->m->launch_raw) return bp_fail(BP_E_UNSUPPORTED, "%s cannot launch kernels", dev->name);
    /* Default: typed -> raw, a buffer becoming its address plus offset (CUDA, mock only). */
    void *addr[MAX_ARGS];
    void *params[MAX_ARGS];
    for (int i = 0; i < nargs; i++) {
        const bp_kernel_arg *a = &args[i];
        switch (a->type) {
        case BP_ARG_BUF:
            addr[i] = (char *)a->v.buf.buf + a->v.buf.offset;
            params[i] = &addr[i];
            break;
        case BP_ARG_I32: params[i] = (void *)&a->v.i32; break;
        case BP_ARG_U32: params[i] = (void *)&a->v.u32; break;
        case BP_ARG_I64: params[i] = (void *)&a->v.i64; break;
        case BP_ARG_F32: params[i] = (void *)&a->v.f32; break;
        case BP_ARG_BYTES: params[i] = (void *)a->v.bytes.p; break;
        default: return bp_fail(BP_E_INVAL, "launch on %s: argument %d has unknown type %d", dev->name, i, (int)a->type);
        }
    }
    return dev->m->launch_raw(dev, s, k, dims, params, nargs);
}

/* ---- properties, pinned memory, arenas ----------------------------------------------------- */

bool bp_dev_name_contains(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return true;
    }
    return n == 0;
}

bp_status bp_dev_mem_info(bp_device *dev, size_t *total, size_t *free_bytes) {
    DEV_CHECK("bp_dev_mem_info");
    if (!total || !free_bytes) return bp_fail(BP_E_INVAL, "bp_dev_mem_info: NULL output");
    if (!dev->m->mem_info) return bp_fail(BP_E_UNSUPPORTED, "%s does not report its memory", dev->name);
    return dev->m->mem_info(dev, total, free_bytes);
}

int bp_dev_compute_units(bp_device *dev) {
    if (!dev || !dev->m->compute_units) return 1;
    int n = dev->m->compute_units(dev);
    return n > 0 ? n : 1;
}

bp_status bp_dev_host_alloc_pinned(bp_device *dev, size_t bytes, void **out) {
    DEV_CHECK("bp_dev_host_alloc_pinned");
    if (!out) return bp_fail(BP_E_INVAL, "bp_dev_host_alloc_pinned: out is NULL");
    INJECT_DEVICE_FAILURE(dev, "pinned host alloc", bytes, out);
    *out = NULL;
    if (dev->m->host_alloc_pinned) {
        TRY(dev->m->host_alloc_pinned(dev, bytes, out));
        if (!*out) return bp_fail(BP_E_NOMEM, "%s: pinned alloc of %zu bytes gave no memory", dev->name, bytes);
    } else {
        size_t rounded = (bytes + 63) & ~(size_t)63;
        *out = bp_aligned_alloc(64, rounded ? rounded : 64);
        if (!*out) return bp_fail(BP_E_NOMEM, "no memory for %zu pinned host bytes", bytes);
    }
    memset(*out, 0, bytes);
    return BP_OK;
}

void bp_dev_host_free_pinned(bp_device *dev, void *p) {
    if (!dev || !p) return;
    if (dev->m->host_free_pinned) dev->m->host_free_pinned(dev, p);
    else bp_free(p);
}

bp_status bp_dev_arena_create_at(bp_device *dev, size_t bytes, void **buf, const char *file, int line) {
    DEV_CHECK("bp_dev_arena_create");
    if (!dev->m->arena_create) return bp_dev_alloc_at(dev, bytes, buf, file, line);
    INJECT_DEVICE_FAILURE(dev, "arena", bytes, buf);
    if (!buf || !bytes) return bp_fail(BP_E_INVAL, "bp_dev_arena_create at %s:%d: bad arguments", file, line);
    *buf = NULL;
    void *b = NULL;
    TRY(dev->m->arena_create(dev, bytes, &b));
    bp_status s = bp_ledger_add(dev, b, bytes, 0, file, line);
    if (s) {
        dev->m->arena_destroy(dev, b);
        return s;
    }
    bp_ledger_mark(dev, b, BP_LEDGER_ARENA);
    *buf = b;
    return BP_OK;
}

void bp_dev_arena_destroy(bp_device *dev, void *buf) {
    /* The ledger knows whether it came from the backend's arena_create (then arena_destroy runs)
     * or from the default (a plain allocation): one path, also for sweeps at close. */
    bp_dev_free(dev, buf);
}
