/* Resident memory: the CPU backend repacks some weight kinds (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL
 * MXFP4) into a second, decode-friendly copy at first use (bp_weight.backend_state). With the
 * original still mapped and touched, a model's resident size would be the file plus those
 * copies: Gemma 3 270M Q4_K_M is 241 MiB and repacks 213 MiB of it (the tied 171 MiB Q8_0
 * token_embd/output and the Q5_0 projections) into 256 MiB of copies, so `backplane run` was
 * 517 MiB resident; with what follows it is 316 MiB (README, "Memory").
 *
 * Decode reads only the copy; the originals are read again only by a prefill's GEMM (which
 * dequantizes from the GGUF layout), by embedding lookups (one row per token) and by a backend
 * uploading them. The weights are a read-only, private, file-backed mapping, so dropping their
 * pages (MADV_DONTNEED) loses nothing: a later read faults them back from the page cache. So
 * after each eval, every weight that has a repacked copy and whose original pages are resident
 * gets them dropped; a prefill marks the weights it read as resident again, and they are dropped
 * again after it. bp_model_params.release_originals = false keeps them. */
#include <sys/mman.h>
#include <unistd.h>

#include "model/context_internal.h"

size_t bp_model_release_span(const bp_weight *w, uintptr_t *lo) {
    long pg = sysconf(_SC_PAGESIZE);
    *lo = 0;
    if (pg <= 0) return 0;
    *lo = ((uintptr_t)w->data + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
    uintptr_t hi = ((uintptr_t)w->data + w->row_bytes * (size_t)w->rows) & ~(uintptr_t)(pg - 1);
    return hi > *lo ? (size_t)(hi - *lo) : 0;
}

static void release(const bp_weight *w) {
    uintptr_t lo;
    size_t n = bp_model_release_span(w, &lo);
    if (n) madvise((void *)lo, n, MADV_DONTNEED);
}

void bp_model_memory_after_eval(bp_model *m, bool prefill, bool output_gemm) {
    if (!m->release_originals) return;
    for (int64_t i = 0; i < m->n_weights; i++) {
        bp_weight *w = m->weights[i].w;
        bool is_output = w == m->output;
        /* a prefill read every layer weight's original; the output's only when several
         * positions' logits were asked for */
        if (prefill && (!is_output || output_gemm)) __atomic_store_n(&m->released[i], 0, __ATOMIC_RELAXED);
        if (__atomic_load_n(&m->released[i], __ATOMIC_RELAXED)) continue;
        if (!__atomic_load_n(&w->backend_state[BP_BACKEND_CPU], __ATOMIC_ACQUIRE)) continue;
        release(w);
        __atomic_store_n(&m->released[i], 1, __ATOMIC_RELAXED);
    }
}
