#include "core/alloc.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static atomic_llong n_calls;     /* allocations attempted */
static atomic_llong fail_at;     /* call number that fails; 0: disarmed */
static atomic_bool fail_sticky;  /* and every one after it */
static atomic_llong n_injected;
static _Atomic(const void *) last_site; /* return address of the last injected failure */
static atomic_llong n_live;              /* blocks handed out and not yet given to bp_free */
static atomic_llong n_bytes, n_peak;     /* their usable bytes, and the most there ever were */

static void add_bytes(long long b) {
    long long now = atomic_fetch_add_explicit(&n_bytes, b, memory_order_relaxed) + b;
    long long pk = atomic_load_explicit(&n_peak, memory_order_relaxed);
    while (now > pk && !atomic_compare_exchange_weak_explicit(&n_peak, &pk, now, memory_order_relaxed,
                                                              memory_order_relaxed)) {
    }
}

/* Count a block handed out (p non-NULL); returns p. */
static void *live(void *p) {
    if (p) {
        atomic_fetch_add_explicit(&n_live, 1, memory_order_relaxed);
        add_bytes((long long)malloc_usable_size(p));
    }
    return p;
}

/* True when this call (from code address site) is to fail. */
static bool injected_at(const void *site) {
    long long at = atomic_load_explicit(&fail_at, memory_order_relaxed);
    long long me = atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed) + 1;
    if (!at) return false;
    if (me == at || (me > at && atomic_load_explicit(&fail_sticky, memory_order_relaxed))) {
        atomic_fetch_add_explicit(&n_injected, 1, memory_order_relaxed);
        atomic_store_explicit(&last_site, site, memory_order_relaxed);
        return true;
    }
    return false;
}
#define injected() injected_at(__builtin_return_address(0))

bool bp_alloc_inject_device(const void *site) { return injected_at(site); }
const void *bp_alloc_last_injected_site(void) { return atomic_load(&last_site); }

void *bp_malloc(size_t n) { return injected() ? NULL : live(malloc(n ? n : 1)); }

void *bp_calloc(size_t count, size_t size) {
    if (injected()) return NULL;
    return live(calloc(count ? count : 1, size ? size : 1));
}

void *bp_realloc(void *p, size_t n) {
    if (injected()) return NULL;
    const long long old = p ? (long long)malloc_usable_size(p) : 0;
    void *q = realloc(p, n ? n : 1);
    if (!p) return live(q);
    if (q) add_bytes((long long)malloc_usable_size(q) - old); /* a grown block is the same block */
    return q;
}

void *bp_aligned_alloc(size_t align, size_t n) {
    if (injected()) return NULL;
    if (align < sizeof(void *) || (align & (align - 1))) return NULL;
    if (n > SIZE_MAX - align) return NULL;
    size_t rounded = (n + align - 1) & ~(align - 1);
    void *p = NULL;
    return posix_memalign(&p, align, rounded ? rounded : align) ? NULL : live(p);
}

char *bp_strdup(const char *s) {
    if (!s || injected()) return NULL;
    size_t n = strlen(s) + 1;
    char *d = live(malloc(n));
    if (d) memcpy(d, s, n);
    return d;
}

void bp_free(void *p) {
    if (p) {
        atomic_fetch_sub_explicit(&n_live, 1, memory_order_relaxed);
        add_bytes(-(long long)malloc_usable_size(p));
    }
    free(p);
}

long long bp_alloc_live(void) { return atomic_load(&n_live); }
long long bp_alloc_live_bytes(void) { return atomic_load(&n_bytes); }
long long bp_alloc_peak_bytes(void) { return atomic_load(&n_peak); }
void bp_alloc_peak_reset(void) { atomic_store(&n_peak, atomic_load(&n_bytes)); }

void bp_alloc_fail_after(long long n, bool persistent) {
    atomic_store(&fail_sticky, persistent);
    atomic_store(&fail_at, n > 0 ? atomic_load(&n_calls) + n : 0);
}

long long bp_alloc_count(void) { return atomic_load(&n_calls); }
long long bp_alloc_injected(void) { return atomic_load(&n_injected); }

void bp_alloc_count_reset(void) {
    atomic_store(&fail_at, 0);
    atomic_store(&n_calls, 0);
    atomic_store(&n_injected, 0);
    atomic_store(&last_site, NULL);
}
