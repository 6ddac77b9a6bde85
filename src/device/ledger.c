/* The allocation ledger: every live device allocation with its bytes and call site, across
 * all devices of the process, plus redzones (a guard band after each allocation).
 *
 * Why a ledger: a GPU backend that leaks a scratch buffer per call, or frees a weight twice,
 * shows up here by file:line instead of as an out-of-memory an hour into a run. Tests assert
 * zero live allocations after every case.
 *
 * Storage is a flat array searched linearly: live counts stay small (weights go into arenas,
 * one entry each), and a flat array under one lock is simple to get right. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "device/device_internal.h"

typedef struct entry {
    bp_ledger_entry e;
    size_t rz;
    int what; /* BP_LEDGER_PLAIN, _ARENA, _MAPPED: how bp_dev_free releases it */
} entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static entry *g_entries;
static size_t g_n, g_cap;
static uint64_t g_seq;
static uint64_t g_live, g_peak; /* bytes over every device now, and the most since the last reset */

static long find_locked(const bp_device *dev, const void *buf) {
    for (size_t i = 0; i < g_n; i++)
        if (g_entries[i].e.buf == buf && g_entries[i].e.dev == dev) return (long)i;
    return -1;
}

bp_status bp_ledger_add(bp_device *dev, void *buf, size_t bytes, size_t rz, const char *file, int line) {
    pthread_mutex_lock(&g_lock);
    if (g_n == g_cap) {
        size_t cap = g_cap ? g_cap * 2 : 64;
        entry *ne = bp_realloc(g_entries, cap * sizeof *ne);
        if (!ne) {
            pthread_mutex_unlock(&g_lock);
            return bp_fail(BP_E_NOMEM, "ledger: no memory to record an allocation at %s:%d", file, line);
        }
        g_entries = ne;
        g_cap = cap;
    }
    entry *en = &g_entries[g_n++];
    en->e.dev = dev;
    en->e.buf = buf;
    en->e.bytes = bytes;
    en->e.file = file;
    en->e.line = line;
    en->e.seq = ++g_seq;
    en->rz = rz;
    en->what = BP_LEDGER_PLAIN;
    g_live += bytes;
    if (g_live > g_peak) g_peak = g_live;
    pthread_mutex_unlock(&g_lock);
    return BP_OK;
}

void bp_ledger_mark(bp_device *dev, void *buf, int what) {
    pthread_mutex_lock(&g_lock);
    long i = find_locked(dev, buf);
    if (i >= 0) g_entries[i].what = what;
    pthread_mutex_unlock(&g_lock);
}

bool bp_ledger_remove(bp_device *dev, void *buf, size_t *bytes, size_t *rz, int *what, const char **file,
                      int *line) {
    pthread_mutex_lock(&g_lock);
    long i = find_locked(dev, buf);
    if (i < 0) {
        pthread_mutex_unlock(&g_lock);
        return false;
    }
    *bytes = g_entries[i].e.bytes;
    *rz = g_entries[i].rz;
    *what = g_entries[i].what;
    *file = g_entries[i].e.file;
    *line = g_entries[i].e.line;
    /* Keep allocation order (list and sweep report oldest first). */
    g_live -= g_entries[i].e.bytes;
    memmove(&g_entries[i], &g_entries[i + 1], (g_n - (size_t)i - 1) * sizeof *g_entries);
    g_n--;
    pthread_mutex_unlock(&g_lock);
    return true;
}

bool bp_ledger_size_of(const bp_device *dev, const void *buf, size_t *bytes, const char **file, int *line) {
    pthread_mutex_lock(&g_lock);
    long i = find_locked(dev, buf);
    if (i >= 0) {
        *bytes = g_entries[i].e.bytes;
        if (file) *file = g_entries[i].e.file;
        if (line) *line = g_entries[i].e.line;
    }
    pthread_mutex_unlock(&g_lock);
    return i >= 0;
}

size_t bp_ledger_live_bytes(const bp_device *dev) {
    size_t sum = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++)
        if (!dev || g_entries[i].e.dev == dev) sum += g_entries[i].e.bytes;
    pthread_mutex_unlock(&g_lock);
    return sum;
}

uint64_t bp_ledger_peak_bytes(bool reset) {
    pthread_mutex_lock(&g_lock);
    uint64_t pk = g_peak;
    if (reset) g_peak = g_live;
    pthread_mutex_unlock(&g_lock);
    return pk;
}

size_t bp_ledger_live_count(const bp_device *dev) {
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++)
        if (!dev || g_entries[i].e.dev == dev) n++;
    pthread_mutex_unlock(&g_lock);
    return n;
}

size_t bp_ledger_list(const bp_device *dev, bp_ledger_entry *out, size_t max) {
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++) {
        if (dev && g_entries[i].e.dev != dev) continue;
        if (out && n < max) out[n] = g_entries[i].e;
        n++;
    }
    pthread_mutex_unlock(&g_lock);
    return n;
}

void bp_ledger_report(const bp_device *dev, FILE *out) {
    /* Snapshot, then group by call site (file pointer + line: __FILE__ strings of one site
     * are one object, but compare contents so two translation units agree). */
    size_t n = bp_ledger_list(dev, NULL, 0);
    if (!n || !out) return;
    bp_ledger_entry *snap = bp_malloc(n * sizeof *snap);
    bool *done = bp_calloc(n, sizeof *done);
    if (!snap || !done) {
        fprintf(out, "  ledger: %zu live allocations (no memory to group them)\n", n);
        bp_free(snap);
        bp_free(done);
        return;
    }
    size_t m = bp_ledger_list(dev, snap, n); /* may have shrunk meanwhile */
    if (m < n) n = m;
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        size_t count = 0, bytes = 0;
        for (size_t j = i; j < n; j++) {
            if (done[j] || snap[j].line != snap[i].line || strcmp(snap[j].file, snap[i].file)) continue;
            done[j] = true;
            count++;
            bytes += snap[j].bytes;
        }
        fprintf(out, "  %s:%d  %zu live  %zu bytes (%s)\n", snap[i].file, snap[i].line, count, bytes,
                snap[i].dev ? snap[i].dev->name : "?");
    }
    bp_free(snap);
    bp_free(done);
}

size_t bp_ledger_sweep(bp_device *dev, FILE *out) {
    size_t swept = 0;
    for (;;) {
        bp_ledger_entry e;
        pthread_mutex_lock(&g_lock);
        long found = -1;
        for (size_t i = 0; i < g_n; i++)
            if (!dev || g_entries[i].e.dev == dev) { found = (long)i; break; }
        if (found >= 0) e = g_entries[found].e;
        pthread_mutex_unlock(&g_lock);
        if (found < 0) break;
        if (out)
            fprintf(out, "ledger: sweeping %zu bytes on %s allocated at %s:%d\n", e.bytes,
                    e.dev->name, e.file, e.line);
        bp_dev_free((bp_device *)e.dev, e.buf);
        swept++;
    }
    return swept;
}

void bp_ledger_set_redzone(bp_device *dev, size_t bytes, bool poison) {
    if (!dev) return;
    pthread_mutex_lock(&dev->common->lock);
    dev->common->redzone = bytes;
    dev->common->poison = poison;
    pthread_mutex_unlock(&dev->common->lock);
}

long bp_ledger_check_band(bp_device *dev, void *buf, size_t bytes, size_t rz) {
    if (!rz) return -1;
    unsigned char stackbuf[256];
    unsigned char *band = rz <= sizeof stackbuf ? stackbuf : bp_malloc(rz);
    if (!band) return -1;
    long bad = -1;
    if (bp_dev_raw_d2h(dev, band, buf, bytes, rz) == BP_OK) {
        for (size_t i = 0; i < rz; i++)
            if (band[i] != BP_REDZONE_BYTE) { bad = (long)i; break; }
    }
    if (band != stackbuf) bp_free(band);
    return bad;
}

size_t bp_ledger_scan(bp_device *dev, FILE *out) {
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    entry *snap = g_n ? bp_malloc(g_n * sizeof *snap) : NULL;
    if (snap)
        for (size_t i = 0; i < g_n; i++)
            if ((!dev || g_entries[i].e.dev == dev) && g_entries[i].rz) snap[n++] = g_entries[i];
    pthread_mutex_unlock(&g_lock);
    size_t damaged = 0;
    for (size_t i = 0; i < n; i++) {
        bp_device *d = (bp_device *)snap[i].e.dev;
        long off = bp_ledger_check_band(d, snap[i].e.buf, snap[i].e.bytes, snap[i].rz);
        if (off < 0) continue;
        damaged++;
        pthread_mutex_lock(&d->common->lock);
        d->common->rz_faults++;
        pthread_mutex_unlock(&d->common->lock);
        if (out)
            fprintf(out, "ledger: redzone damaged %ld bytes past the end of %zu bytes on %s allocated at %s:%d\n",
                    off, snap[i].e.bytes, d->name, snap[i].e.file, snap[i].e.line);
    }
    bp_free(snap);
    return damaged;
}

bp_status bp_ledger_poison(bp_device *dev, void *buf) {
    size_t bytes;
    if (!dev || !bp_ledger_size_of(dev, buf, &bytes, NULL, NULL))
        return bp_fail(BP_E_INVAL, "ledger: poison of a buffer the ledger does not know (%p)", buf);
    pthread_mutex_lock(&g_lock);
    long i = find_locked(dev, buf);
    const bool mapped = i >= 0 && g_entries[i].what == BP_LEDGER_MAPPED;
    pthread_mutex_unlock(&g_lock);
    if (mapped) return bp_fail(BP_E_INVAL, "ledger: %p is mapped host memory, the caller's data: not poisoned", buf);
    return bp_dev_raw_memset(dev, buf, 0, BP_POISON_BYTE, bytes);
}

bp_status bp_ledger_poison_redzones(bp_device *dev, size_t lo, size_t hi) {
    if (!dev) return bp_fail(BP_E_INVAL, "bp_ledger_poison_redzones: device is NULL");
    /* A snapshot of the range: the memsets are device calls, not made under the ledger's lock. */
    pthread_mutex_lock(&g_lock);
    size_t n = 0;
    for (size_t i = 0; i < g_n; i++) n += g_entries[i].e.dev == dev;
    if (lo > hi || hi > n) {
        pthread_mutex_unlock(&g_lock);
        return bp_fail(BP_E_INVAL, "bp_ledger_poison_redzones on %s: range %zu..%zu outside the %zu live allocations",
                       dev->name, lo, hi, n);
    }
    entry *snap = hi > lo ? bp_malloc((hi - lo) * sizeof *snap) : NULL;
    if (hi > lo && !snap) {
        pthread_mutex_unlock(&g_lock);
        return bp_fail(BP_E_NOMEM, "bp_ledger_poison_redzones: no memory");
    }
    for (size_t i = 0, k = 0; i < g_n && k < hi; i++) {
        if (g_entries[i].e.dev != dev) continue;
        if (k >= lo) snap[k - lo] = g_entries[i];
        k++;
    }
    pthread_mutex_unlock(&g_lock);
    bp_status s = BP_OK;
    for (size_t j = 0; j < hi - lo && !s; j++) {
        if (snap[j].what == BP_LEDGER_MAPPED) continue;
        s = bp_dev_raw_memset(dev, snap[j].e.buf, 0, 0, snap[j].e.bytes);
        if (!s && snap[j].rz) s = bp_dev_raw_memset(dev, snap[j].e.buf, snap[j].e.bytes, BP_REDZONE_BYTE, snap[j].rz);
    }
    bp_free(snap);
    return s;
}

size_t bp_ledger_redzone_faults(const bp_device *dev) {
    if (!dev) return 0;
    pthread_mutex_lock(&dev->common->lock);
    size_t n = dev->common->rz_faults;
    pthread_mutex_unlock(&dev->common->lock);
    return n;
}
