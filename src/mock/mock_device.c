/* The mock device: bp_device_methods in host memory, with call recording and fault injection. */
#include "core/alloc.h"
#include "mock/mock_device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"

#include "mock/mock_step_kernels.h"

enum { RING = 32, MAX_CAPTURED = 4096, MAX_PARAMS = BP_MOCK_MAX_PARAMS, MAX_VAL = BP_MOCK_MAX_VAL };

typedef bp_mock_kernel mock_kernel;

typedef struct captured {
    const mock_kernel *k;
    unsigned char vals[MAX_PARAMS][MAX_VAL];
} captured;

struct bp_graph {
    int n, cap;
    captured *c;
};

struct bp_stream {
    int id;
};

struct bp_event {
    int recorded;
};

typedef struct mock {
    pthread_mutex_t lock;
    int calls[BP_MOCK_CALL_KINDS];
    int fail_at[BP_MOCK_CALL_KINDS]; /* absolute call number that fails; 0: none */
    bp_status fail_status[BP_MOCK_CALL_KINDS];
    int lose_at[BP_MOCK_CALL_KINDS]; /* absolute call number that loses the device; 0: none */
    bool lost;                       /* sticky: every later call fails with BP_E_DEVICE_LOST */
    char lost_at[16];                /* the kind of call that lost it */
    int lookups;                     /* kernel_lookup calls (the op cache should ask once per name) */
    char ring[RING][48];
    int ring_n;
    size_t live;
    /* Capture: the stream being captured (&default_stream stands for NULL) and its graph. */
    const void *capturing;
    bp_graph *graph;
} mock;

static const char *const call_names[] = {"alloc", "copy", "launch", "sync", "event", "graph"};
_Static_assert(sizeof call_names / sizeof call_names[0] == BP_MOCK_CALL_KINDS, "one name per call kind");
static char default_stream;

const char *bp_mock_call_name(bp_mock_call c) {
    return (unsigned)c < BP_MOCK_CALL_KINDS ? call_names[c] : "?";
}

static mock *M(bp_device *dev) { return dev->impl; }

/* Count a call, log it, and fail it when armed. */
static bp_status note(bp_device *dev, bp_mock_call c, const char *op, const char *arg, size_t n) {
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    int no = ++m->calls[c];
    if (n) snprintf(m->ring[m->ring_n % RING], sizeof m->ring[0], "%s%s%s %zu", op, *arg ? " " : "", arg, n);
    else snprintf(m->ring[m->ring_n % RING], sizeof m->ring[0], "%s%s%s", op, *arg ? " " : "", arg);
    m->ring_n++;
    bool fail = m->fail_at[c] == no;
    bp_status s = m->fail_status[c];
    if (fail) m->fail_at[c] = 0;
    if (m->lose_at[c] == no) {
        m->lost = true;
        m->lose_at[c] = 0;
        snprintf(m->lost_at, sizeof m->lost_at, "%s", call_names[c]);
    }
    bool lost = m->lost;
    char at[16];
    memcpy(at, m->lost_at, sizeof at);
    pthread_mutex_unlock(&m->lock);
    /* Like a CUDA context after an illegal address: the first failing call and every later one
     * report the same sticky cause. */
    if (lost) return bp_fail(BP_E_DEVICE_LOST, "mock: device lost (sticky error injected at a %s call)", at);
    if (fail) return bp_fail(s, "mock: injected %s failure", call_names[c]); /* no call number: one cause */
    return BP_OK;
}

/* ---- kernels ---- */

/* A kernel's own failure (the reference k_gemm runs allocates) comes back from the launch, as a
 * real device reports a faulted kernel: a kernel that silently wrote nothing passed garbage off
 * as its result (the allocation-failure campaign found that). Set by the kernel, read by the
 * launch or replay on the same thread. */
static _Thread_local bp_status kernel_status;

static void k_gemm(const mock_kernel *k, void **p) {
    (void)k;
    const void *w = *(void **)p[0];
    const float *x = *(void **)p[1];
    float *y = *(void **)p[2];
    bp_kind kind = (bp_kind) * (int32_t *)p[3];
    int64_t rows = *(int64_t *)p[4], cols = *(int64_t *)p[5], t = *(int64_t *)p[6];
    size_t rb = 0;
    bp_status s = bp_kind_row_bytes(kind, cols, &rb);
    kernel_status = s ? s : bp_ref_gemm(kind, w, rb * (size_t)rows, rows, cols, x, t, y);
}

static void k_poke(const mock_kernel *k, void **p) {
    (void)k;
    unsigned char *base = *(void **)p[0];
    base[*(int64_t *)p[1]] = (unsigned char)*(int32_t *)p[2];
}

static void k_nop(const mock_kernel *k, void **p) { (void)k, (void)p; }

static const mock_kernel kernels[] = {
    {"gemm", 7, {sizeof(void *), sizeof(void *), sizeof(void *), 4, 8, 8, 8}, k_gemm, 0, false, ""},
    {"poke", 3, {sizeof(void *), 8, 4}, k_poke, 0, false, ""},
    {"nop_", 0, {0}, k_nop, 0, false, ""}, /* any name starting with "nop_" (see mock_device.h) */
};

static bool m_has_module(bp_device *dev, const char *name) {
    (void)dev;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (!strcmp(kernels[i].name, name) || (!strcmp(kernels[i].name, "nop_") && !strncmp(name, "nop_", 4))) return true;
    mock_kernel k;
    return bp_mock_step_kernel(name, &k);
}

static bp_status m_kernel_lookup(bp_device *dev, const char *name, bp_kernel **out) {
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    m->lookups++;
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (!strcmp(kernels[i].name, name) || (!strcmp(kernels[i].name, "nop_") && !strncmp(name, "nop_", 4))) {
            *out = (bp_kernel *)(void *)&kernels[i];
            return BP_OK;
        }
    /* the step's kernels (mock_step_kernels.c), one handle per name */
    mock_kernel k;
    if (bp_mock_step_kernel(name, &k)) {
        mock_kernel *h = bp_malloc(sizeof *h);
        if (!h) return bp_fail(BP_E_NOMEM, "mock: no memory for kernel %s", name);
        *h = k;
        snprintf(h->name_buf, sizeof h->name_buf, "%s", name);
        h->name = h->name_buf;
        h->dynamic = true;
        *out = (bp_kernel *)(void *)h;
        return BP_OK;
    }
    return bp_fail(BP_E_NOT_FOUND, "mock: no kernel called '%s'", name);
}

static void m_kernel_release(bp_device *dev, bp_kernel *kh) {
    (void)dev;
    mock_kernel *k = (mock_kernel *)(void *)kh;
    if (k && k->dynamic) bp_free(k);
}

static bp_status m_launch_raw(bp_device *dev, bp_stream *s, bp_kernel *kh, const bp_launch_dims *dims,
                              void **params, int nparams) {
    (void)dims;
    const mock_kernel *k = (const mock_kernel *)(void *)kh;
    bp_status st = note(dev, BP_MOCK_LAUNCH, "launch", k ? k->name : "?", 0);
    if (st) return st;
    if (!k || nparams != k->nparams)
        return bp_fail(BP_E_INVAL, "mock: kernel %s takes %d parameters, got %d", k ? k->name : "?",
                       k ? k->nparams : 0, nparams);
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    bool rec = m->capturing && m->capturing == (s ? (const void *)s : &default_stream);
    if (rec) {
        bp_graph *g = m->graph;
        if (g->n == g->cap) {
            int nc = g->cap ? 2 * g->cap : 64;
            captured *c = nc <= MAX_CAPTURED ? bp_realloc(g->c, (size_t)nc * sizeof *c) : NULL;
            if (!c) {
                pthread_mutex_unlock(&m->lock);
                return bp_fail(BP_E_NOMEM, "mock: graph full (%d launches)", g->n);
            }
            g->c = c, g->cap = nc;
        }
        captured *c = &g->c[g->n++];
        c->k = k;
        for (int i = 0; i < nparams; i++) memcpy(c->vals[i], params[i], k->sizes[i]);
    }
    pthread_mutex_unlock(&m->lock);
    if (rec) return BP_OK;
    kernel_status = BP_OK;
    k->run(k, params);
    return kernel_status;
}

/* ---- memory ---- */

static bp_status m_alloc(bp_device *dev, size_t bytes, void **buf) {
    bp_status s = note(dev, BP_MOCK_ALLOC, "alloc", "", bytes);
    if (s) return s;
    /* A 64-byte header keeps the size (for mem_info) and the payload 64-byte aligned. */
    unsigned char *p = bytes < SIZE_MAX - 64 ? bp_aligned_alloc(64, (bytes + 64 + 63) & ~(size_t)63) : NULL;
    if (!p) return bp_fail(BP_E_NOMEM, "mock: no host memory for %zu bytes", bytes);
    memcpy(p, &bytes, sizeof bytes);
    *buf = p + 64;
    pthread_mutex_lock(&M(dev)->lock);
    M(dev)->live += bytes;
    pthread_mutex_unlock(&M(dev)->lock);
    return BP_OK;
}

static void m_free(bp_device *dev, void *buf) {
    if (!buf) return;
    unsigned char *p = (unsigned char *)buf - 64;
    size_t bytes;
    memcpy(&bytes, p, sizeof bytes);
    pthread_mutex_lock(&M(dev)->lock);
    M(dev)->live -= bytes;
    pthread_mutex_unlock(&M(dev)->lock);
    bp_free(p);
}

static bp_status m_h2d(bp_device *dev, void *dst, size_t off, const void *src, size_t n) {
    bp_status s = note(dev, BP_MOCK_COPY, "h2d", "", n);
    if (!s) memcpy((char *)dst + off, src, n);
    return s;
}

static bp_status m_d2h(bp_device *dev, void *dst, const void *src, size_t off, size_t n) {
    bp_status s = note(dev, BP_MOCK_COPY, "d2h", "", n);
    if (!s) memcpy(dst, (const char *)src + off, n);
    return s;
}

static bp_status m_d2d(bp_device *dev, void *dst, size_t doff, const void *src, size_t soff, size_t n) {
    bp_status s = note(dev, BP_MOCK_COPY, "d2d", "", n);
    if (!s) memmove((char *)dst + doff, (const char *)src + soff, n);
    return s;
}

static bp_status m_h2d_async(bp_device *dev, bp_stream *st, void *dst, size_t off, const void *src, size_t n) {
    (void)st;
    return m_h2d(dev, dst, off, src, n);
}

static bp_status m_d2h_async(bp_device *dev, bp_stream *st, void *dst, const void *src, size_t off, size_t n) {
    (void)st;
    return m_d2h(dev, dst, src, off, n);
}

static bp_status m_memset(bp_device *dev, void *dst, size_t off, int v, size_t n) {
    bp_status s = note(dev, BP_MOCK_COPY, "memset", "", n);
    if (!s) memset((char *)dst + off, v, n);
    return s;
}

/* ---- streams, events, graphs ---- */

static bp_status m_stream_create(bp_device *dev, bp_stream **out) {
    (void)dev;
    *out = bp_calloc(1, sizeof **out);
    return *out ? BP_OK : bp_fail(BP_E_NOMEM, "mock: no memory for a stream");
}

static void m_stream_destroy(bp_device *dev, bp_stream *s) {
    (void)dev;
    bp_free(s);
}

static bp_status m_stream_sync(bp_device *dev, bp_stream *s) {
    (void)s;
    return note(dev, BP_MOCK_SYNC, "sync", "stream", 0);
}

static bp_status m_device_sync(bp_device *dev) { return note(dev, BP_MOCK_SYNC, "sync", "device", 0); }

static bp_status m_event_create(bp_device *dev, bp_event **out) {
    bp_status st = note(dev, BP_MOCK_EVENT, "event", "create", 0);
    if (st) return st;
    *out = bp_calloc(1, sizeof **out);
    return *out ? BP_OK : bp_fail(BP_E_NOMEM, "mock: no memory for an event");
}

static void m_event_destroy(bp_device *dev, bp_event *e) {
    (void)dev;
    bp_free(e);
}

static bp_status m_event_record(bp_device *dev, bp_event *e, bp_stream *s) {
    (void)s;
    bp_status st = note(dev, BP_MOCK_EVENT, "event", "record", 0);
    if (st) return st;
    e->recorded = 1;
    return BP_OK;
}

static bp_status m_event_sync(bp_device *dev, bp_event *e) {
    if (!e->recorded) return bp_fail(BP_E_INVAL, "mock: sync on an event never recorded");
    return note(dev, BP_MOCK_SYNC, "sync", "event", 0);
}

static bp_status m_event_query(bp_device *dev, bp_event *e, bool *done) {
    (void)dev;
    (void)e;
    *done = true; /* the mock runs synchronously: recorded work is finished, and an event never
                     recorded counts as done (the interface's rule) */
    return BP_OK;
}

static bp_status m_bind_to_thread(bp_device *dev) { return note(dev, BP_MOCK_SYNC, "bind", "thread", 0); }

/* Host addresses are the mock's handles, so mapped host memory is its own handle. */
static bp_status m_host_ptr_to_device(bp_device *dev, void *host, size_t bytes, void **buf) {
    bp_status s = note(dev, BP_MOCK_ALLOC, "map", "host", bytes);
    if (!s) *buf = host;
    return s;
}

static void m_host_ptr_release(bp_device *dev, void *buf) { (void)dev, (void)buf; }

static bp_status m_copy_d2h_on_stream(bp_device *dev, bp_stream *st, void *dst, const void *src, size_t off, size_t n) {
    (void)st;
    return m_d2h(dev, dst, src, off, n);
}

static bp_status m_graph_begin(bp_device *dev, bp_stream *s) {
    mock *m = M(dev);
    bp_status st = note(dev, BP_MOCK_GRAPH, "graph", "begin", 0);
    if (st) return st;
    bp_graph *g = bp_calloc(1, sizeof *g);
    if (!g) return bp_fail(BP_E_NOMEM, "mock: no memory for a graph");
    pthread_mutex_lock(&m->lock);
    m->capturing = s ? (const void *)s : &default_stream;
    m->graph = g;
    pthread_mutex_unlock(&m->lock);
    return BP_OK;
}

static bp_status m_graph_end(bp_device *dev, bp_stream *s, bp_graph **out) {
    (void)s;
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    *out = m->graph;
    m->graph = NULL;
    m->capturing = NULL;
    pthread_mutex_unlock(&m->lock);
    if (!*out) return bp_fail(BP_E_INVAL, "mock: graph_end without graph_begin");
    /* A failed end still ends the capture; the half-made graph is freed here. */
    bp_status st = note(dev, BP_MOCK_GRAPH, "graph", "end", 0);
    if (st) {
        bp_free((*out)->c);
        bp_free(*out);
        *out = NULL;
    }
    return st;
}

static bp_status m_graph_replay(bp_device *dev, bp_graph *g, bp_stream *s) {
    (void)s;
    bp_status rs = note(dev, BP_MOCK_GRAPH, "graph", "replay", 0);
    if (rs) return rs;
    for (int i = 0; i < g->n; i++) {
        bp_status st = note(dev, BP_MOCK_LAUNCH, "replay", g->c[i].k->name, 0);
        if (st) return st;
        void *params[MAX_PARAMS];
        for (int j = 0; j < g->c[i].k->nparams; j++) params[j] = g->c[i].vals[j];
        kernel_status = BP_OK;
        g->c[i].k->run(g->c[i].k, params);
        if (kernel_status) return kernel_status;
    }
    return BP_OK;
}

static void m_graph_destroy(bp_device *dev, bp_graph *g) {
    (void)dev;
    if (g) bp_free(g->c);
    bp_free(g);
}

/* As CUDA's cudaGraphExecUpdate: the same kernels in the same order take the new arguments in
 * place; any other capture replaces the graph. */
static bp_status m_graph_update(bp_device *dev, bp_stream *s, bp_graph **g, bool *updated) {
    bp_graph *ng = NULL;
    bp_status st = m_graph_end(dev, s, &ng);
    if (st) return st;
    bp_graph *old = *g;
    bool same = old && old->n == ng->n;
    for (int i = 0; same && i < ng->n; i++) same = old->c[i].k == ng->c[i].k;
    if (same) {
        memcpy(old->c, ng->c, (size_t)ng->n * sizeof *ng->c);
        m_graph_destroy(dev, ng);
    } else {
        m_graph_destroy(dev, old);
        *g = ng;
    }
    *updated = same;
    return BP_OK;
}

static bp_status m_mem_info(bp_device *dev, size_t *total, size_t *free_bytes) {
    mock *m = M(dev);
    *total = (size_t)1 << 30;
    pthread_mutex_lock(&m->lock);
    *free_bytes = m->live < *total ? *total - m->live : 0;
    pthread_mutex_unlock(&m->lock);
    return BP_OK;
}

static int m_compute_units(bp_device *dev) {
    (void)dev;
    return 4;
}

static void m_close(bp_device *dev) {
    mock *m = M(dev);
    if (m->graph) bp_free(m->graph->c);
    bp_free(m->graph);
    pthread_mutex_destroy(&m->lock);
    bp_free(m);
}

/* Deliberately leaves d2d_async, copy_2d, memset_async, h2d_retained, launch (typed),
 * stream_is_capturing, graph_abort, pinned memory, arenas, kernel_n_tile, has_cast and
 * chunk_slack_bytes NULL, so the common defaults for them run in the tests (the bare table below
 * leaves every optional member NULL). */
static const bp_device_methods mock_methods = {
    .version = BP_DEVICE_METHODS_VERSION,
    .name = "mock",
    .close = m_close,
    .alloc = m_alloc,
    .free = m_free,
    .h2d = m_h2d,
    .d2h = m_d2h,
    .d2d = m_d2d,
    .h2d_async = m_h2d_async,
    .d2h_async = m_d2h_async,
    .memset = m_memset,
    .kernel_lookup = m_kernel_lookup,
    .kernel_release = m_kernel_release,
    .launch_raw = m_launch_raw,
    .stream_create = m_stream_create,
    .stream_destroy = m_stream_destroy,
    .stream_sync = m_stream_sync,
    .device_sync = m_device_sync,
    .event_create = m_event_create,
    .event_destroy = m_event_destroy,
    .event_record = m_event_record,
    .event_sync = m_event_sync,
    .graph_begin = m_graph_begin,
    .graph_end = m_graph_end,
    .graph_replay = m_graph_replay,
    .graph_destroy = m_graph_destroy,
    .mem_info = m_mem_info,
    .compute_units = m_compute_units,
    .event_query = m_event_query,
    .bind_to_thread = m_bind_to_thread,
    .host_ptr_to_device = m_host_ptr_to_device,
    .host_ptr_release = m_host_ptr_release,
    .has_module = m_has_module,
    .copy_d2h_on_stream = m_copy_d2h_on_stream,
    .graph_update = m_graph_update,
};

/* A version-1 table with the REQUIRED members only, plus what launching needs: every default of
 * the interface runs on it (tests/test_device_defaults.c). */
static const bp_device_methods mock_bare_methods = {
    .version = 1,
    .name = "mock-bare",
    .close = m_close,
    .alloc = m_alloc,
    .free = m_free,
    .h2d = m_h2d,
    .d2h = m_d2h,
    .kernel_lookup = m_kernel_lookup,
    .kernel_release = m_kernel_release,
    .launch_raw = m_launch_raw,
};

static bp_status open_with(const bp_device_methods *t, const char *name, bp_device **out) {
    mock *m = bp_calloc(1, sizeof *m);
    if (!m) return bp_fail(BP_E_NOMEM, "mock: no memory");
    pthread_mutex_init(&m->lock, NULL);
    bp_status s = bp_device_open(t, m, name, out);
    if (s) {
        pthread_mutex_destroy(&m->lock);
        bp_free(m);
    }
    return s;
}

bp_status bp_mock_device_open(bp_device **out) { return open_with(&mock_methods, "mock", out); }

bp_status bp_mock_device_open_bare(bp_device **out) { return open_with(&mock_bare_methods, "mock-bare", out); }

void bp_mock_fail_nth(bp_device *dev, bp_mock_call c, int n, bp_status s) {
    if (!dev || (unsigned)c >= BP_MOCK_CALL_KINDS) return;
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    m->fail_at[c] = n > 0 ? m->calls[c] + n : 0;
    m->fail_status[c] = s ? s : BP_E_DEVICE;
    pthread_mutex_unlock(&m->lock);
}

void bp_mock_lose_device(bp_device *dev, bp_mock_call c, int n) {
    if (!dev || (unsigned)c >= BP_MOCK_CALL_KINDS) return;
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    m->lose_at[c] = n > 0 ? m->calls[c] + n : 0;
    pthread_mutex_unlock(&m->lock);
}

int bp_mock_lookups(bp_device *dev) {
    if (!dev) return 0;
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    int n = m->lookups;
    pthread_mutex_unlock(&m->lock);
    return n;
}

int bp_mock_calls(bp_device *dev, bp_mock_call c) {
    if (!dev || (unsigned)c >= BP_MOCK_CALL_KINDS) return 0;
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    int n = m->calls[c];
    pthread_mutex_unlock(&m->lock);
    return n;
}

const char *bp_mock_recent(bp_device *dev, int i, char *buf, size_t len) {
    if (!buf || !len) return "";
    buf[0] = '\0';
    if (!dev || i < 0 || i >= RING) return buf;
    mock *m = M(dev);
    pthread_mutex_lock(&m->lock);
    if (i < m->ring_n) snprintf(buf, len, "%s", m->ring[(m->ring_n - 1 - i) % RING]);
    pthread_mutex_unlock(&m->lock);
    return buf;
}
