/* The CPU thread pool: persistent workers woken once per call. Hot path: a per-worker state
 * store and one atomic increment to start (plus a futex wake only if a worker sleeps), one
 * compare-and-swap per worker to finish; no allocation and no locks. Workers spin before
 * sleeping because a decode step issues hundreds of calls back to back, and a futex sleep/wake
 * round trip (~5-20 us, far more when another process holds the CPU) would cost more than a
 * small matvec. A worker that has not started when the caller is done is cancelled rather than
 * waited for (see bp_pool_run): on a shared machine a descheduled worker would otherwise stall
 * every call by a time slice.
 *
 * The spin is timed (SPIN_NS), not counted: a cancelled call leaves the caller computing alone,
 * so the next call comes one single-threaded call later, and a spin shorter than that puts the
 * worker to sleep just before it; its wake then arrives late, that call is cancelled too, and the
 * process stays at one thread's speed (a count of pause instructions was that short on one CPU,
 * a pause costing 10-150 cycles across x86 cores). A longer spin also keeps a worker that shares
 * the caller's CPU spinning there: the placement below moves it. Measurements:
 * docs/cpu-kernels.md. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/cpu_internal.h"

enum { MAX_THREADS = 256, SPIN_ITERS = 20000 };
/* How long an idle worker spins for the next call before sleeping: longer than a
 * single-threaded call of a decode step's largest matvec (see the top). Past it, an idle
 * process's workers sleep. */
static const int64_t SPIN_NS = 4000000;
enum { IDLE = 0, POSTED = 1, RUNNING = 2, DONE = 3, CANCELLED = 4 };

typedef struct pool {
    int n; /* threads including the caller */
    pthread_t th[MAX_THREADS];
    _Atomic uint32_t gen;  /* bumped once per call; workers wait for it to change */
    _Atomic int state[MAX_THREADS]; /* per worker: IDLE, POSTED, RUNNING, DONE or CANCELLED */
    _Atomic int stop;
    uint32_t start_gen; /* gen when the workers were created */
    _Atomic int sleepers; /* workers in (or about to enter) futex_wait: wake only if any */
    _Atomic int caller_cpu; /* the CPU the caller posted the last call from; -1 unknown */
    bp_pool_fn fn;
    void *ctx;
    int nth; /* threads taking part in this call */
    float *scratch[MAX_THREADS];
    void *act;
    size_t act_bytes;
} pool;

static pool g_pool;
static atomic_flag g_busy = ATOMIC_FLAG_INIT;
static int g_started;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    (void)addr;
    (void)val;
    sched_yield();
#endif
}

static void futex_wake_all(_Atomic uint32_t *addr) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, MAX_THREADS, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

/* Placement. A worker spinning on the caller's own CPU takes half of it from the caller, and
 * the scheduler may leave it there for good (a spinning worker never wakes up elsewhere): beside
 * one busy process, calls then ran at one thread's speed, the worker and the caller on one CPU
 * and the busy process alone on the other. So a worker that finds itself, twice in a row while
 * it waits, on the CPU the caller last posted from moves to the others of its CPUs (affinity: its
 * starting mask minus that one) and takes its own mask back before it sleeps; it never narrows a
 * mask otherwise.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, pool.c. */
typedef struct place {
#ifdef __linux__
    cpu_set_t home; /* the mask the worker started with */
    bool have_home, away;
    int hits;
#else
    char unused; /* C has no empty structs */
#endif
} place;

static void place_init(place *pl) {
#ifdef __linux__
    pl->have_home = pthread_getaffinity_np(pthread_self(), sizeof pl->home, &pl->home) == 0;
    pl->away = false;
    pl->hits = 0;
#else
    (void)pl;
#endif
}

static void place_check(place *pl) {
#ifdef __linux__
    const int cc = atomic_load_explicit(&g_pool.caller_cpu, memory_order_relaxed);
    if (!pl->have_home || cc < 0 || cc >= CPU_SETSIZE || !CPU_ISSET(cc, &pl->home)) return;
    if (sched_getcpu() != cc) {
        pl->hits = 0;
        return;
    }
    if (++pl->hits < 2) return;
    pl->hits = 0;
    cpu_set_t away = pl->home;
    CPU_CLR(cc, &away);
    if (CPU_COUNT(&away) > 0 && pthread_setaffinity_np(pthread_self(), sizeof away, &away) == 0) pl->away = true;
#else
    (void)pl;
#endif
}

static void place_home(place *pl) {
#ifdef __linux__
    if (pl->away && pthread_setaffinity_np(pthread_self(), sizeof pl->home, &pl->home) == 0) pl->away = false;
#else
    (void)pl;
#endif
}

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    /* Not a fresh load of gen: a call may already have been issued before this thread got
     * to run, and it must not be mistaken for the starting point (that call would hang). */
    uint32_t seen = g_pool.start_gen;
    place pl;
    place_init(&pl);
    for (;;) {
        uint32_t g;
        int spins = 0;
        int64_t spin_end = 0;
        while ((g = atomic_load_explicit(&g_pool.gen, memory_order_acquire)) == seen) {
            cpu_relax();
            if (++spins % 256) continue; /* the clock (a ~30 ns vDSO call) every 256 pauses (1-13 us) */
            place_check(&pl);
            const int64_t t = mono_ns();
            if (!spin_end) spin_end = t + SPIN_NS;
            if (t >= spin_end) {
                spin_end = 0;
                place_home(&pl);
                /* seq_cst pairs with the caller's bump-then-read: either it sees us here and
                 * wakes us, or the kernel sees the new gen and futex_wait returns at once. */
                atomic_fetch_add(&g_pool.sleepers, 1);
                futex_wait(&g_pool.gen, seen);
                atomic_fetch_sub(&g_pool.sleepers, 1);
            }
        }
        seen = g;
        if (atomic_load_explicit(&g_pool.stop, memory_order_acquire)) return NULL;
        /* Claim the posted call; the caller may have cancelled it (it finished without us). */
        int expect = POSTED;
        if (atomic_compare_exchange_strong(&g_pool.state[me], &expect, RUNNING)) {
            g_pool.fn(g_pool.ctx, me, g_pool.nth);
            atomic_store_explicit(&g_pool.state[me], DONE, memory_order_release);
        }
    }
}

static int default_threads(void) {
    const char *e = getenv("BACKPLANE_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == 0 && v >= 1 && v <= MAX_THREADS) return (int)v;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef __linux__
    /* The CPUs this process may run on (taskset, cgroups cpusets), when fewer than online. */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < n) n = CPU_COUNT(&set);
#endif
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    return (int)n;
}

static void stop_workers(void) {
    if (g_pool.n <= 1) return;
    atomic_store_explicit(&g_pool.stop, 1, memory_order_release);
    atomic_fetch_add_explicit(&g_pool.gen, 1, memory_order_acq_rel);
    futex_wake_all(&g_pool.gen);
    for (int i = 1; i < g_pool.n; i++) pthread_join(g_pool.th[i], NULL);
    atomic_store(&g_pool.stop, 0);
}

static void free_scratch(void) {
    for (int i = 0; i < MAX_THREADS; i++) {
        bp_free(g_pool.scratch[i]);
        g_pool.scratch[i] = NULL;
    }
}

/* Caller holds g_busy. */
static bp_status start(int n) {
    free_scratch();
    for (int i = 0; i < n; i++) {
        if (!(g_pool.scratch[i] = bp_aligned_alloc(64, BP_CPU_SCRATCH_FLOATS * sizeof(float)))) {
            free_scratch();
            return bp_fail(BP_E_NOMEM, "CPU pool: no memory for thread scratch");
        }
    }
    g_pool.n = 1;
    g_pool.start_gen = atomic_load(&g_pool.gen);
    atomic_store(&g_pool.caller_cpu, -1);
    for (int i = 1; i < n; i++) {
        if (pthread_create(&g_pool.th[i], NULL, worker, (void *)(intptr_t)i)) break;
        g_pool.n = i + 1;
    }
    g_started = 1;
    return BP_OK;
}

bool bp_pool_acquire(void) {
    if (atomic_flag_test_and_set_explicit(&g_busy, memory_order_acquire)) return false;
    if (!g_started && start(default_threads()) != BP_OK) {
        atomic_flag_clear_explicit(&g_busy, memory_order_release);
        return false;
    }
    return true;
}

void bp_pool_release(void) { atomic_flag_clear_explicit(&g_busy, memory_order_release); }

int bp_pool_size(void) {
    if (!g_started) return default_threads();
    return g_pool.n;
}

bp_status bp_pool_resize(int n) {
    if (n < 1 || n > MAX_THREADS) return bp_fail(BP_E_INVAL, "CPU threads: %d is outside 1..%d", n, MAX_THREADS);
    while (atomic_flag_test_and_set_explicit(&g_busy, memory_order_acquire)) sched_yield();
    if (g_started) stop_workers();
    bp_status s = start(n);
    atomic_flag_clear_explicit(&g_busy, memory_order_release);
    return s;
}

float **bp_pool_scratch(void) { return g_pool.scratch; }

void *bp_pool_act_buffer(size_t bytes) {
    if (bytes > g_pool.act_bytes) {
        bp_free(g_pool.act);
        g_pool.act = NULL;
        g_pool.act_bytes = 0;
        size_t round = (bytes + 4095) & ~(size_t)4095;
        if (!(g_pool.act = bp_aligned_alloc(64, round))) return NULL;
        g_pool.act_bytes = round;
    }
    return g_pool.act;
}

void bp_pool_run(bp_pool_fn fn, void *ctx, int n) {
    if (n > g_pool.n) n = g_pool.n;
    if (n <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    g_pool.fn = fn;
    g_pool.ctx = ctx;
    g_pool.nth = n;
#ifdef __linux__
    atomic_store_explicit(&g_pool.caller_cpu, sched_getcpu(), memory_order_relaxed);
#endif
    for (int i = 1; i < n; i++) atomic_store(&g_pool.state[i], POSTED);
    atomic_fetch_add(&g_pool.gen, 1);
    if (atomic_load(&g_pool.sleepers) > 0) futex_wake_all(&g_pool.gen);
    fn(ctx, 0, n);
    for (int i = 1; i < n; i++) {
        int expect = POSTED;
        if (atomic_compare_exchange_strong(&g_pool.state[i], &expect, CANCELLED)) continue;
        /* It is running: it is scheduled and on its last chunk, so this wait is short. */
        int spins = 0;
        while (atomic_load_explicit(&g_pool.state[i], memory_order_acquire) != DONE) {
            if (++spins < SPIN_ITERS) cpu_relax();
            else sched_yield();
        }
    }
}
