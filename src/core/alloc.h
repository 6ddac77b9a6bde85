/* Host allocations of the library, through one door so that tests can make any one of them fail.
 *
 * Every host allocation in src/ goes through these (not malloc/calloc/realloc/posix_memalign
 * directly): the allocation-failure campaign walks N over every allocation a workload makes,
 * fails the Nth, and checks that the result is a clear error or a counted fallback with correct
 * numbers and nothing leaked. An allocation that bypasses this door is one that campaign can
 * never fail, so a NULL check behind it is never proven.
 *
 * The wrappers record nothing per allocation (that is the device ledger's job); they count
 * calls, live blocks and their bytes, and consult the injection switch: a few relaxed atomics
 * when disarmed.
 * Memory from bp_malloc / bp_calloc / bp_realloc / bp_aligned_alloc is released with bp_free
 * (plain free() works too: they are the C library's allocations underneath, but then
 * bp_alloc_live() keeps counting the block).
 */
#ifndef BP_CORE_ALLOC_H
#define BP_CORE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

void *bp_malloc(size_t n);
void *bp_calloc(size_t count, size_t size);
void *bp_realloc(void *p, size_t n);
/* align: a power of two, at least sizeof(void *). n is rounded up to a multiple of align. */
void *bp_aligned_alloc(size_t align, size_t n);
/* Duplicate a NUL-terminated string (NULL in, NULL out). */
char *bp_strdup(const char *s);
void bp_free(void *p);

/* ---- failure injection (tests) ----------------------------------------------------------
 * bp_alloc_fail_after(n, persistent): the n-th allocation from now (1-based) returns NULL; with
 * persistent, every one after it does too (SQLite's "benign" vs "persistent" malloc faults).
 * n <= 0 disarms. Counting is process-wide and thread-safe. */
void bp_alloc_fail_after(long long n, bool persistent);
/* Allocations attempted since start (or since bp_alloc_count_reset); failures injected. */
long long bp_alloc_count(void);
long long bp_alloc_injected(void);
void bp_alloc_count_reset(void);
/* The code address that made the last injected allocation fail (the campaign counts distinct
 * sites with it); NULL when none since the last reset. */
const void *bp_alloc_last_injected_site(void);
/* Blocks from bp_malloc / bp_calloc / bp_realloc(NULL, n) / bp_aligned_alloc / bp_strdup not yet
 * released with bp_free: the campaign's leak count, exact and independent of the C library's
 * heap (a block released with plain free() stays counted: release the library's blocks with
 * bp_free in code that checks this). */
long long bp_alloc_live(void);
/* The usable bytes (malloc_usable_size) of those blocks now, the most there were since start or
 * since bp_alloc_peak_reset (which sets it to now): what `run --plan-check` holds the plan's host
 * heap to. Blocks released with plain free() stay counted here too. */
long long bp_alloc_live_bytes(void);
long long bp_alloc_peak_bytes(void);
void bp_alloc_peak_reset(void);
/* The device layer's allocations (device memory, pinned host memory, arenas: src/device)
 * count as allocations too and ask the same switch: true when this one is to fail. site: the
 * caller's address (__builtin_return_address(0)). */
bool bp_alloc_inject_device(const void *site);

#endif
