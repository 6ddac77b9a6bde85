/* run --plan-check: what the run took, measured where it is counted, against the plan.
 *
 *   host heap   the library's allocations (one door, bp_host_memory): the peak since before the
 *               load, less what the plan does not cover (the tokenizer, the CLI's sampler,
 *               measured here by making one more of each), against the plan's heap
 *   device      the allocation ledger's peak (bp_device_memory_peak) against the plan's device
 *   resident    the process's RSS growth since the start (every backend probed first), against
 *               the plan's host total (the mapped file read whole at load, and the heap), the
 *               device's when the device is a CPU implementation whose "device memory" is this
 *               process's, and an allowance for thread stacks and the C library's arenas
 * The heap and the device are held to "never above the plan, within 5% of it"; RSS counts only
 * the pages touched (a KV cache is allocated whole and filled as tokens come), so it is held to
 * "never above" only. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cpu/cpu.h"
#include "cli_common.h"
#include "model_cli.h"
#include "plan_check.h"

void bp_plan_check_begin(bp_plan_check *pc) {
    pc->on = true;
    /* every backend probed first: its driver's libraries and state are the process's, not the
     * model's (lavapipe's LLVM alone is tens of MiB resident) */
    bp_backend_info bi;
    for (int i = 0; i < bp_backend_count(); i++) bp_backend_info_at(i, &bi);
    bp_host_memory(&pc->heap0, NULL, true);
    uint64_t live;
    bp_device_memory(&live, NULL);
    pc->dev0 = live;
    bp_device_memory_peak(true);
    pc->rss0 = bp_cli_rss_bytes();
}

/* The heap one more tokenizer and sampler over m take at their most, encoding a sentence and
 * sampling a token (called after the run's peak was read: it resets the peak). */
static uint64_t unplanned_bytes(const bp_model *m) {
    uint64_t a, b = 0;
    bp_host_memory(&a, NULL, true);
    bp_tokenizer *tok = NULL;
    bp_sampler *smp = NULL;
    bp_token *ids = NULL, id;
    size_t n;
    float *lg = NULL;
    bp_sampler_params sp = bp_sampler_default_params();
    bp_model_info info;
    bp_model_get_info(m, &info);
    const char *text = "The quick brown fox jumps over the lazy dog.";
    if (bp_tokenizer_create(bp_model_gguf(m), &tok) == BP_OK &&
        bp_tokenizer_encode_alloc(tok, text, strlen(text), true, false, &ids, &n) == BP_OK &&
        bp_sampler_create(&sp, (int32_t)info.n_vocab, &smp) == BP_OK &&
        (lg = calloc((size_t)info.n_vocab, sizeof *lg)) && bp_sampler_sample(smp, lg, &id) == BP_OK)
        bp_host_memory(NULL, &b, false);
    free(lg);
    bp_tokens_free(ids);
    bp_sampler_free(smp);
    bp_tokenizer_free(tok);
    return b > a ? b - a : 0;
}

typedef struct row {
    const char *what;
    uint64_t measured, plan;
    bool lower; /* held to within 5% below too */
    bool held;  /* false: printed only */
} row;

static bool above(const row *r) { return r->held && r->measured > r->plan; }
static bool close_enough(const row *r) {
    return !r->held || !r->lower || (double)r->measured >= 0.95 * (double)r->plan;
}

int bp_plan_check_end(const bp_plan_check *pc, const char *path, const bp_model *m, int64_t n_ctx, bp_kind kv,
                      uint64_t budget, FILE *f, bool json) {
    uint64_t heap_peak;
    bp_host_memory(NULL, &heap_peak, false);
    const uint64_t dev_peak = bp_device_memory_peak(false);
    const size_t rss = bp_cli_rss_bytes();
    const uint64_t extra = unplanned_bytes(m);
    bp_plan_params pp = bp_plan_default_params();
    pp.n_ctx = n_ctx, pp.kv_kind = kv, pp.device_budget = budget;
    bp_plan *p = NULL;
    bp_status s = bp_plan_file(path, &pp, &p);
    if (s) return bp_cli_error("plan", s);
    const uint64_t heap = heap_peak > pc->heap0 + extra ? heap_peak - pc->heap0 - extra : 0;
    const bool dev = p->n_mem > 1 && p->mem[1].known;
    const uint64_t dev_plan = dev ? p->mem[1].total : 0;
    /* a CPU implementation's device memory is this process's (lavapipe, PoCL) */
    bp_backend_info bi = {0};
    for (int i = 0; dev && i < bp_backend_count(); i++)
        if (bp_backend_info_at(i, &bi) == BP_OK && !strcmp(bi.name, p->mem[1].name)) break;
    /* RSS also holds what no allocation names: the pool's thread stacks and the C library's
     * per-thread arenas, a few pages each: an allowance of 256 KiB per thread and 1 MiB */
    const uint64_t slack = (uint64_t)bp_cpu_threads() * (256u << 10) + (1u << 20);
    const uint64_t rss_plan = p->mem[0].total + (dev && bi.cpu_implementation ? dev_plan : 0) + slack;
    /* Held: the heap when the CPU runs the step or the first layers of a split one (a whole
     * device step's own host tables are not sized), the device always, RSS unless the device is a
     * CPU implementation (its driver's compiled kernels are this process's memory, tens of MiB no
     * plan can name). */
    const bool cpu_impl = dev && bi.cpu_implementation;
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer's redzones, quarantine of freed blocks and shadow pages are resident and
     * named by no allocation: RSS is printed, not held, in such a build */
    const bool sanitized = true;
#else
    const bool sanitized = false;
#endif
    const bool rss_held = !cpu_impl && !sanitized;
    row rows[3] = {{"host heap", heap, p->heap, true, !dev || p->split},
                   {"device", dev_peak > pc->dev0 ? dev_peak - pc->dev0 : 0, dev_plan, true, true},
                   {"resident", rss > pc->rss0 ? rss - pc->rss0 : 0, rss_plan, false, rss_held}};
    const int n = 3;
    int rc = 0;
    if (json) {
        fprintf(f, "{\"plan_check\": {\"step_backend\": ");
        bp_cli_json_str(f, p->step_backend);
        fprintf(f, ", \"unplanned\": %llu", (unsigned long long)extra);
    } else {
        fprintf(f, "plan check (%s step; tokenizer and sampler, %.2f MiB, not planned):\n", p->step_backend,
                (double)extra / (1 << 20));
    }
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        if (i == 1 && !dev) continue;
        const bool ok = !above(r) && close_enough(r);
        if (above(r)) rc = 1;
        if (json) {
            fprintf(f,
                    ", \"%s\": {\"measured\": %llu, \"plan\": %llu, \"held\": %s, \"above\": %s, \"within_5pct\": %s}",
                    i == 0 ? "heap" : i == 1 ? "device" : "resident", (unsigned long long)r->measured,
                    (unsigned long long)r->plan, r->held ? "true" : "false", above(r) ? "true" : "false",
                    close_enough(r) ? "true" : "false");
        } else {
            fprintf(f, "  %-10s measured %10.2f MiB, plan %10.2f MiB (%.3f)%s\n", r->what, (double)r->measured / (1 << 20),
                    (double)r->plan / (1 << 20), r->plan ? (double)r->measured / (double)r->plan : 0.0,
                    !r->held ? "  (not held)" : ok ? "" : above(r) ? "  ABOVE THE PLAN" : "  more than 5% below the plan");
        }
    }
    if (json) fprintf(f, "}}\n");
    if (rc) fprintf(stderr, "backplane run: --plan-check: the run took more memory than the plan said\n");
    bp_plan_free(p);
    return rc;
}
