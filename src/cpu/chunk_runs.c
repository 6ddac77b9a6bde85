/* Chunks of one pool call handed out as per-thread runs (bp_chunk_runs, cpu_internal.h): used by
 * bp_cpu_gemm's row chunks (cpu.c) and by the batched jobs' chunks over several weights
 * (cpu_jobs.c).
 *
 * Each thread owns a contiguous run of chunks and takes them front to back; a thread whose run is
 * empty takes chunks from the back of another's (a late or cancelled worker's rows get done, and
 * the threads finish together). Why runs and not one shared counter: with the counter a thread's
 * next chunk lay anywhere, so each chunk started where neither the kernel's software prefetch
 * (BP_ROW_PF ahead, avx2/simd.h) nor the hardware's had been, and ended prefetching rows another
 * thread was reading; in a run the prefetch at a chunk's end is the next chunk's start. Each run's
 * word has a line of its own (two on one line cost up to 3%); past BP_CHUNK_RUNS threads,
 * threads share runs (ith % BP_CHUNK_RUNS), which stays correct: every take is a
 * compare-and-swap.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, chunk_runs.c. */
#include "cpu/cpu_internal.h"

int64_t bp_chunk_rows_per(int64_t units, int nth) {
    /* About 8 chunks per thread: small enough to balance a late thread (its helpers take whole
     * chunks), large enough that the run words are touched rarely. */
    int64_t per = units / (8 * (int64_t)(nth < 1 ? 1 : nth));
    if (per < 1) per = 1;
    if (units / per >= (int64_t)1 << 31) per = units / ((int64_t)1 << 31) + 1; /* chunk numbers fit 32 bits */
    return per;
}

void bp_chunk_runs_init(bp_chunk_runs *cr, int64_t nchunks, int nth) {
    cr->nruns = nth < 1 ? 1 : nth > BP_CHUNK_RUNS ? BP_CHUNK_RUNS : nth;
    for (int i = 0; i < cr->nruns; i++) {
        const uint64_t lo = (uint64_t)(nchunks * i / cr->nruns), hi = (uint64_t)(nchunks * (i + 1) / cr->nruns);
        atomic_init(&cr->run[i].v, hi << 32 | lo);
    }
}

/* The next chunk of run i: from its front (own) or its back (helping); -1 when it is empty. */
static int64_t take(bp_chunk_runs *cr, int i, bool own) {
    uint64_t v = atomic_load_explicit(&cr->run[i].v, memory_order_relaxed);
    for (;;) {
        const uint64_t lo = v & 0xffffffffu, hi = v >> 32;
        if (lo >= hi) return -1;
        const uint64_t nv = own ? hi << 32 | (lo + 1) : (hi - 1) << 32 | lo;
        if (atomic_compare_exchange_weak_explicit(&cr->run[i].v, &v, nv, memory_order_relaxed, memory_order_relaxed))
            return (int64_t)(own ? lo : hi - 1);
    }
}

int64_t bp_chunk_runs_next(bp_chunk_runs *cr, int ith, int *k) {
    const int self = ith % cr->nruns;
    while (*k < cr->nruns) {
        const int64_t c = take(cr, (self + *k) % cr->nruns, *k == 0);
        if (c >= 0) return c;
        ++*k; /* that run is empty, and stays so: nothing is ever put back */
    }
    return -1;
}
