/* backplane bench --crossover [--json]: measure the numbers of the seam's cost model (src/seam/
 * cost.c) on this machine, per backend, and print where each backend starts beating the CPU.
 *
 * Per backend that is enabled here (the CPU always; a CPU implementation such as lavapipe or
 * PoCL only when forced on, e.g. BACKPLANE_VULKAN=1), through bp_matvec_on / bp_gemm_on -- the
 * calls the seam makes, copies and waits included:
 *   overhead   median time of a tiny matvec (8 x 256 Q8_0), first call (upload, build) excluded
 *   GB/s       weight bytes / (median time - overhead) of a 8192 x 8192 Q4_K matvec (37.7 MB)
 *   GFLOP/s    2 rows cols t / median time of a 2048 x 2048 Q4_K GEMM at t = 64
 * Then, from the measured figures of the backend and of the CPU, the smallest square Q4_K weight
 * (n x n, n a multiple of 256) whose decode, and whose prefill at t = 512, the model gives to the
 * backend -- beside the same crossover from the constants the seam uses now. A backend whose
 * crossover is "never" is one the seam should keep off (or that is off: a CPU implementation). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_common.h"
#include "testing/testdata.h"
#include "cpu/cpu.h"
#include "seam/seam_internal.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median microseconds of reps calls (after one untimed warm-up call); negative on an error. */
static double time_op(const char *backend, bp_kind k, int64_t rows, int64_t cols, int64_t t, int reps) {
    size_t rb;
    if (bp_kind_row_bytes(k, cols, &rb)) return -1;
    const size_t bytes = rb * (size_t)rows;
    uint8_t *w = malloc(bytes);
    float *x = malloc(sizeof(float) * (size_t)(t * cols)), *y = malloc(sizeof(float) * (size_t)(t * rows));
    float *f = malloc(sizeof(float) * (size_t)cols);
    double *us = malloc(sizeof(double) * (size_t)reps), med = -1;
    bp_weight *wt = NULL;
    if (!w || !x || !y || !f || !us) goto out;
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < cols; i++) f[i] = 0.5f * bp_rng_float(&st); /* uniform in [-0.5, 0.5) */
    for (int64_t r = 0; r < rows; r++)
        if (bp_quantize(k, f, cols, w + (size_t)r * rb, rb)) goto out;
    for (int64_t i = 0; i < t * cols; i++) x[i] = f[i % cols];
    if (bp_weight_create(k, w, bytes, rows, cols, &wt)) goto out;
    for (int i = -1; i < reps; i++) {
        double t0 = now_us();
        bp_status s = t > 1 ? bp_gemm_on(wt, backend, x, t, y) : bp_matvec_on(wt, backend, x, y);
        if (s) goto out;
        if (i >= 0) us[i] = now_us() - t0;
    }
    qsort(us, (size_t)reps, sizeof *us, cmp_d);
    med = us[reps / 2];
out:
    bp_weight_free(wt);
    free(w), free(x), free(y), free(f), free(us);
    return med;
}

typedef struct row {
    const char *name;
    bp_cost_model measured, model;
    bool ok;
} row;

/* Smallest n (multiple of 256, up to 32768) whose n x n Q4_K op of batch t the device model
 * wins over the CPU model; 0 when none. */
static int64_t crossover(const bp_cost_model *dev, const bp_cost_model *cpu, int64_t t) {
    for (int64_t n = 256; n <= 32768; n += 256) {
        const bp_op_shape s = {n, n, t};
        const bp_op_work w = bp_op_work_of(t > 1 ? BP_OP_GEMM : BP_OP_MATVEC, BP_KIND_Q4_K, &s);
        if (bp_cost_us(dev, &w) < bp_cost_us(cpu, &w)) return n;
    }
    return 0;
}

static void measure(const char *backend, row *r) {
    const double ov = time_op(backend, BP_KIND_Q8_0, 8, 256, 1, 31);
    const double mv = time_op(backend, BP_KIND_Q4_K, 8192, 8192, 1, 5);
    const double gm = time_op(backend, BP_KIND_Q4_K, 2048, 2048, 64, 3);
    r->ok = ov > 0 && mv > 0 && gm > 0;
    if (!r->ok) return;
    size_t rb = 0;
    bp_kind_row_bytes(BP_KIND_Q4_K, 8192, &rb);
    r->measured.overhead_us = ov;
    r->measured.mem_gbps = (double)rb * 8192.0 / fmax(mv - ov, 1.0) / 1e3;
    r->measured.gflops = 2.0 * 2048 * 2048 * 64 / gm / 1e3;
    /* Activations: the tiny matvec's time is all overhead; no separate link figure is measured,
     * so the model's own link rate is kept. */
    r->measured.link_gbps = strcmp(backend, "cpu") ? r->model.link_gbps : 0;
    r->measured.source = "measured now";
}

static void fmt_n(char *buf, size_t len, int64_t n) {
    if (n) snprintf(buf, len, "%lld x %lld", (long long)n, (long long)n);
    else snprintf(buf, len, "never (<= 32768)");
}

int bp_bench_crossover(int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else {
            fprintf(stderr, "backplane bench --crossover: unknown option '%s' (only --json)\n", argv[i]);
            return 2;
        }
    }
    if (bp_cli_dry_run) return 0; /* the CLI fuzz target: parsing only */
    int n = bp_seam_slot_count();
    row *rows = calloc((size_t)n + 1, sizeof *rows);
    if (!rows) return 1;
    int nr = 0;
    rows[nr].name = "cpu";
    bp_cost_cpu(&rows[nr].model);
    measure("cpu", &rows[nr]);
    nr++;
    for (int i = 0; i < n; i++) {
        const bp_seam_slot *s = bp_seam_slot_at(i);
        const char *reason = "";
        if (!s->dispatch) continue;
        if (!bp_seam_slot_enabled(i, &reason)) {
            fprintf(stderr, "%s: not measured: %s (%s=1 forces it on)\n", s->caps->name, reason, s->env_name);
            continue;
        }
        row *r = &rows[nr++];
        r->name = s->caps->name;
        const bp_device_desc *d = bp_seam_slot_desc(i);
        if (d) r->model = d->cost;
        measure(s->caps->name, r);
        if (!r->ok) fprintf(stderr, "%s: measurement failed: %s\n", r->name, bp_last_error());
    }
    if (json) printf("{\"threads\": %d, \"backends\": [", bp_cpu_threads());
    else {
        printf("CPU: %d threads, ISA %s. Cost model: time = overhead + activations / link + max(weights / GB/s, "
               "flops / GFLOP/s)\n\n",
               bp_cpu_threads(), bp_cpu_isa_name(bp_cpu_isa_current()));
        printf("| backend | overhead us (model) | GB/s (model) | GFLOP/s (model) | decode beats CPU from | "
               "(model) | prefill t=512 from | (model) |\n|---|---:|---:|---:|---|---|---|---|\n");
    }
    for (int i = 0; i < nr; i++) {
        const row *r = &rows[i];
        char dm[40] = "-", dc[40] = "-", pm[40] = "-", pc[40] = "-";
        int64_t xdm = 0, xdc = 0, xpm = 0, xpc = 0;
        if (i > 0 && r->ok && rows[0].ok) {
            xdm = crossover(&r->measured, &rows[0].measured, 1), xpm = crossover(&r->measured, &rows[0].measured, 512);
            fmt_n(dm, sizeof dm, xdm), fmt_n(pm, sizeof pm, xpm);
        }
        if (i > 0) {
            xdc = crossover(&r->model, &rows[0].model, 1), xpc = crossover(&r->model, &rows[0].model, 512);
            fmt_n(dc, sizeof dc, xdc), fmt_n(pc, sizeof pc, xpc);
        }
        if (json)
            printf("%s\n  {\"backend\": \"%s\", \"ok\": %s, \"overhead_us\": %.4g, \"gbps\": %.4g, \"gflops\": %.4g, "
                   "\"model_overhead_us\": %.4g, \"model_gbps\": %.4g, \"model_gflops\": %.4g, \"decode_crossover_n\": "
                   "%lld, \"model_decode_crossover_n\": %lld, \"prefill_crossover_n\": %lld, "
                   "\"model_prefill_crossover_n\": %lld}",
                   i ? "," : "", r->name, r->ok ? "true" : "false", r->measured.overhead_us, r->measured.mem_gbps,
                   r->measured.gflops, r->model.overhead_us, r->model.mem_gbps, r->model.gflops, (long long)xdm,
                   (long long)xdc, (long long)xpm, (long long)xpc);
        else
            printf("| %s | %.1f (%.0f) | %.2f (%.3g) | %.1f (%.3g) | %s | %s | %s | %s |\n", r->name,
                   r->measured.overhead_us, r->model.overhead_us, r->measured.mem_gbps, r->model.mem_gbps,
                   r->measured.gflops, r->model.gflops, dm, dc, pm, pc);
    }
    if (json) printf("\n]}\n");
    else
        printf("\nA square Q4_K weight at least that size goes to the backend (model: the constants the seam uses "
               "now, src/backend/cost.c). Measured with Q4_K 8192 x 8192 decode, 2048 x 2048 t=64 GEMM, 8 x 256 Q8_0 for "
               "the overhead; the weight stays hot in large caches, so the CPU's GB/s can read above DRAM's.\n");
    free(rows);
    return 0;
}
