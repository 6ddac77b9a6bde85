/* backplane bench: decode GB/s and prefill GFLOP/s per kind and backend.
 *
 * Decode (batch 1) is memory-bound, so its figure is GB/s of weight bytes with a cold cache:
 * the weights are rotated through enough copies to exceed the last-level cache, as a real
 * model's layers are. Prefill (batch > 1) is compute-bound: GFLOP/s = 2 * rows * cols * batch
 * / time. Every figure is the median of repeated timed calls. The machine's read bandwidth is
 * measured in the same run, and each decode figure is shown as a fraction of it. All calls go
 * through bp_matvec_on / bp_gemm_on, so any backend the seam knows can be benchmarked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench_model.h"
#include "bench_ops.h"
#include "cli.h"
#include "cli_common.h"
#include "testing/testdata.h"
#include "cpu/cpu.h"

enum { MAX_LIST = 64 };
/* The working set that makes a read cold: decode weights rotate through copies totalling this
 * much, and the bandwidth figure reads the same buffer. 8x the LLC sysfs reports, and at least
 * 256 MiB: a VM's sysfs may report 32 MiB while the host CPU holds 96 MiB or more per die (3D
 * V-Cache). A large LLC is reported as the host has it, and 8x of it is more than cold needs:
 * on the Intel Xeon VM (480 MiB reported) 8x made a one-kind bench allocate and fault 3.8 GB,
 * 10.5 s wall, 8.8 s of it in the kernel, so past 1 GiB the set is 2x the LLC (reads over 512
 * MiB and more ran at the same ~37 GB/s there; 256 MiB already read at that speed in most
 * passes). One buffer of this size is allocated (huge pages when the kernel gives them),
 * touched once and reused by every figure: allocating and faulting 512 MiB for the bandwidth
 * probe and again per kind for the copies made a one-kind bench spend ~10 s in the kernel. */
static size_t cold_bytes(size_t llc) {
    const size_t min = (size_t)256 << 20, cap = (size_t)1 << 30;
    size_t want = 8 * llc;
    if (want > cap) want = 2 * llc > cap ? 2 * llc : cap;
    return want > min ? want : min;
}

typedef struct arena {
    uint8_t *p;
    size_t bytes;
} arena;

static bool arena_init(arena *a, size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    a->bytes = (bytes + huge - 1) / huge * huge;
    a->p = aligned_alloc(huge, a->bytes);
    if (!a->p) return false;
#ifdef MADV_HUGEPAGE
    madvise(a->p, a->bytes, MADV_HUGEPAGE);
#endif
    memset(a->p, 1, a->bytes);
    return true;
}

typedef struct opts {
    const char *kinds[MAX_LIST];
    int nkinds;
    const char *backends[MAX_LIST];
    int nbackends;
    int64_t batches[MAX_LIST];
    int nbatches;
    int64_t rows, cols;
    int reps; /* 0: automatic */
    int threads;
    int min_share; /* percent; 0: off */
    int cold_mib;  /* 0: from the LLC */
    int json;
} opts;

static int usage(FILE *f, int rc) {
    fprintf(f,
            "usage: backplane bench [--kind K ...] [--backend B ...] [--rows R --cols C] [--batch T ...]\n"
            "                       [--reps N] [--threads N] [--cold-mib M] [--json] [--fallbacks]\n"
            "  --kind K     a weight kind (repeat, or comma-separated); default: all 28\n"
            "  --backend B  cpu (default), cpu-ref, or a backend name (vulkan, cuda, opencl, ...)\n"
            "  --rows/--cols  matrix shape, default 4096 x 4096\n"
            "  --batch T    1 = decode (cold-cache GB/s), > 1 = prefill (GFLOP/s); default 1 and 512\n"
            "  --reps N     timed calls per figure (default: about 0.5 s of decode calls, 0.2 s of batch calls, at least 3)\n"
            "  --threads N  CPU threads (default: BACKPLANE_THREADS or every online CPU)\n"
            "  --min-share P  on a shared machine: time a figure again (up to 5 tries) while its timed\n"
            "               calls got under P%% of the CPUs; the table's CPU share column says what it got\n"
            "  --cold-mib M decode weights rotate through M MiB of copies (default: 8x the LLC, >= 256; over 1 GiB: 2x the LLC)\n"
            "  --json       {\"read_bandwidth_gbps\": x, \"results\": [...]}\n"
            "  --fallbacks  print how many ops fell back, from where and why\n"
            "  --strict     a fallback is an error (BACKPLANE_STRICT=1 does the same)\n"
            "  --crossover  instead: per backend, the measured per-call overhead, GB/s and GFLOP/s, the\n"
            "               cost model's figures (src/backend/cost.c), and the shape where it beats the CPU\n"
            "BACKPLANE_CPU_ISA=scalar|avx2|avx512 forces the CPU kernels' instruction set.\n");
    return rc;
}

static int add_list(const char **list, int *n, char *arg) {
    for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
        if (*n >= MAX_LIST) return -1;
        list[(*n)++] = tok;
    }
    return 0;
}

static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->rows = o->cols = 4096;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        else if (!v) {
            fprintf(stderr, "backplane bench: %s needs a value\n", a);
            return -1;
        } else {
            i++;
            char *end = NULL;
            long long n = strtoll(v, &end, 10);
            int isnum = end && *end == 0 && end != v;
            if (!strcmp(a, "--kind")) {
                if (add_list(o->kinds, &o->nkinds, argv[i])) return -1;
            } else if (!strcmp(a, "--backend")) {
                if (add_list(o->backends, &o->nbackends, argv[i])) return -1;
            } else if (!strcmp(a, "--batch") && isnum && n >= 1 && o->nbatches < MAX_LIST) o->batches[o->nbatches++] = n;
            else if (!strcmp(a, "--rows") && isnum && n >= 1 && n <= (1 << 20)) o->rows = n;
            else if (!strcmp(a, "--cols") && isnum && n >= 1 && n <= (1 << 20)) o->cols = n;
            else if (!strcmp(a, "--reps") && isnum && n >= 1 && n <= 1000000) o->reps = (int)n;
            else if (!strcmp(a, "--threads") && isnum && n >= 1 && n <= 256) o->threads = (int)n;
            else if (!strcmp(a, "--min-share") && isnum && n >= 0 && n <= 100) o->min_share = (int)n;
            else if (!strcmp(a, "--cold-mib") && isnum && n >= 1 && n <= (1 << 20)) o->cold_mib = (int)n;
            else {
                fprintf(stderr, "backplane bench: bad option or value: %s %s\n", a, v);
                return -1;
            }
        }
    }
    if (!o->nbackends) o->backends[o->nbackends++] = "cpu";
    if (!o->nbatches) {
        o->batches[o->nbatches++] = 1;
        o->batches[o->nbatches++] = 512;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Process CPU time over wall time inside the timed loops: on a shared machine a figure is only
 * as good as the share of the cores the run actually got, so the table says what it was. */
static double g_timed_cpu, g_timed_wall;

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t llc_bytes(void) {
    /* The largest cache level sysfs lists for cpu0; 32 MiB when sysfs says nothing. */
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            unsigned long long v = strtoull(buf, &end, 10);
            if (*end == 'K') v <<= 10;
            else if (*end == 'M') v <<= 20;
            if (v > best) best = (size_t)v;
        }
        fclose(f);
    }
    return best ? best : (size_t)32 << 20;
}

/* Random weights for one tile of rows (the one weight maker, bp_random_weight), repeated down
 * the matrix (the bytes' values do not change a kernel's speed, and quantizing 16M floats with
 * the reference quantizers would take longer than the benchmark). */
enum { TILE_ROWS = 64 };

static bp_status fill_weights(const bp_kind_info *ki, int64_t rows, int64_t cols, size_t rb, uint8_t *w) {
    uint64_t s = 0x2545f4914f6cdd1dull ^ ki->gguf_id;
    int64_t tile = rows < TILE_ROWS ? rows : TILE_ROWS;
    size_t tb = 0;
    uint8_t *t = bp_random_weight(ki->kind, tile, cols, &s, &tb);
    if (!t) return BP_E_NOMEM;
    memcpy(w, t, tb);
    free(t);
    for (int64_t r = tile; r < rows; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % tile) * rb, rb);
    return BP_OK;
}

typedef struct result {
    const char *kind, *backend;
    int64_t batch;
    double median_us, gbps, gflops;
    double cpu_share; /* process CPU time / (wall time x threads) over this figure's timed calls */
    char kernel[128];
} result;

/* Times one (kind, backend, batch). Returns 0, or 1 when the backend cannot run it (message
 * on stderr). */
static int bench_one(const opts *o, const bp_kind_info *ki, const char *backend, int64_t batch, const arena *ar,
                     result *res) {
    size_t rb;
    if (bp_kind_row_bytes(ki->kind, o->cols, &rb) != BP_OK) {
        fprintf(stderr, "backplane bench: %s: %s\n", ki->name, bp_last_error());
        return 1;
    }
    size_t bytes = rb * (size_t)o->rows;
    /* Decode: as many copies as the cold buffer holds, so each call reads from DRAM; a weight
     * bigger than the buffer is cold by itself and gets its own allocation. */
    int copies = batch == 1 ? (int)(ar->bytes / bytes) : 1;
    if (copies < 1) copies = 1;
    if (copies > 4096) copies = 4096;
    uint8_t *own = bytes > ar->bytes ? malloc(bytes) : NULL;
    uint8_t *data = own ? own : ar->p;
    float *x = malloc(sizeof(float) * (size_t)(batch * o->cols));
    float *y = malloc(sizeof(float) * (size_t)(batch * o->rows));
    bp_weight **w = calloc((size_t)copies, sizeof *w);
    double *times = NULL;
    int rc = 1;
    if ((bytes > ar->bytes && !own) || !x || !y || !w) {
        fprintf(stderr, "backplane bench: %s: out of memory\n", ki->name);
        goto out;
    }
    if (fill_weights(ki, o->rows, o->cols, rb, data) != BP_OK) goto out;
    for (int c = 1; c < copies; c++) memcpy(data + (size_t)c * bytes, data, bytes);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < batch * o->cols; i++) x[i] = bp_rng_float(&s);
    for (int c = 0; c < copies; c++)
        if (bp_weight_create(ki->kind, data + (size_t)c * bytes, bytes, o->rows, o->cols, &w[c]) != BP_OK) {
            fprintf(stderr, "backplane bench: %s: %s\n", ki->name, bp_last_error());
            goto out;
        }
#define CALL(c) (batch == 1 ? bp_matvec_on(w[c], backend, x, y) : bp_gemm_on(w[c], backend, x, batch, y))
    /* Warm-up: one call per copy (first-use work such as uploads or repacking is not timed). */
    for (int c = 0; c < copies; c++) {
        bp_status st = CALL(c);
        if (st) {
            fprintf(stderr, "backplane bench: %s on %s (batch %lld): %s\n", ki->name, backend, (long long)batch,
                    bp_last_error());
            goto out;
        }
    }
    double t_one = 0;
    {
        double t0 = now_s();
        CALL(0);
        t_one = now_s() - t0;
    }
    int reps = o->reps;
    if (!reps) {
        /* Batches get a budget too: with 3 calls, a small matrix's median was at the mercy of one
         * worker preempted mid-chunk on a shared machine (640 x 1024 Q4_K at t = 4 read 10
         * GFLOP/s instead of ~250); a 512-input prefill call is long enough that 3 suffice. */
        double budget = batch == 1 ? 0.5 : 0.2;
        reps = t_one > 0 ? (int)(budget / t_one) : 1000;
        if (reps < (batch == 1 ? 20 : 3)) reps = batch == 1 ? 20 : 3;
        if (reps > 2000) reps = 2000;
    }
    times = malloc(sizeof(double) * (size_t)reps);
    if (!times) goto out;
    double cpu0 = cpu_s(), wall0 = now_s();
    for (int r = 0; r < reps; r++) {
        int c = r % copies;
        double t0 = now_s();
        CALL(c);
        times[r] = now_s() - t0;
    }
    double dcpu = cpu_s() - cpu0, dwall = now_s() - wall0;
    g_timed_cpu += dcpu;
    g_timed_wall += dwall;
    /* Other threads' CPU time reaches the process clock at scheduler ticks: under ~50 ms the
     * ratio means nothing (it read 250% on a 1 ms loop), so it is not reported. */
    res->cpu_share = dwall >= 0.05 ? dcpu / dwall / bp_cpu_threads() : -1;
#undef CALL
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    double med = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    res->kind = ki->name;
    res->backend = backend;
    res->batch = batch;
    res->median_us = med * 1e6;
    res->gbps = (double)bytes / med / 1e9;
    res->gflops = 2.0 * (double)o->rows * (double)o->cols * (double)batch / med / 1e9;
    snprintf(res->kernel, sizeof res->kernel, "%s", bp_weight_last_path(w[0]));
    rc = 0;
out:
    if (w)
        for (int c = 0; c < copies; c++) bp_weight_free(w[c]);
    free(w);
    free(times);
    free(own);
    free(x);
    free(y);
    return rc;
}

static int bench_main(int argc, char **argv);

int bp_cmd_bench(int argc, char **argv) {
    bp_cli_take_fallbacks(&argc, argv);
    bp_cli_take_strict(&argc, argv);
    bp_cli_take_profile(&argc, argv);
    bp_cli_take_no_memory_check(&argc, argv); /* bench MODEL.gguf's contexts */
    /* --op attention|norm|rope|act|jobs: the op layer's benchmarks (bench_ops.c);
     * --op conv2d|moe: bench_conv_moe.c; --crossover: bench_crossover.c; MODEL.gguf or --model:
     * a whole model's pp/tg tokens/s (bench_model.c). */
    int rc = argc > 1 && !strcmp(argv[1], "--crossover") ? bp_bench_crossover(argc - 1, argv + 1)
             : bp_bench_model_requested(argc, argv)         ? bp_bench_model(argc, argv)
             : bp_bench_conv_moe_wants(argc, argv)          ? bp_bench_conv_moe(argc, argv)
             : bp_bench_op_requested(argc, argv)            ? bp_bench_ops(argc, argv)
                                                            : bench_main(argc, argv);
    bp_cli_print_profile();
    bp_cli_print_fallbacks();
    return rc;
}

static int bench_main(int argc, char **argv) {
    opts o;
    int p = parse(argc, argv, &o);
    if (p) return usage(p > 0 ? stdout : stderr, p > 0 ? 0 : 2);
    if (bp_cli_dry_run) return 0; /* the CLI fuzz target: parsing only */
    const bp_kind_info *kinds[MAX_LIST];
    int nk = 0;
    if (o.nkinds) {
        for (int i = 0; i < o.nkinds; i++) {
            const bp_kind_info *ki = bp_kind_by_name(o.kinds[i]);
            if (!ki || ki->role != BP_ROLE_W) {
                fprintf(stderr, "backplane bench: '%s' is not a weight kind (see 'backplane kinds')\n", o.kinds[i]);
                return 2;
            }
            kinds[nk++] = ki;
        }
    } else {
        for (int i = 0; i < bp_kind_table_size() && nk < MAX_LIST; i++)
            if (bp_kind_at(i)->role == BP_ROLE_W) kinds[nk++] = bp_kind_at(i);
    }
    if (o.threads && bp_cpu_set_threads(o.threads) != BP_OK) return bp_cli_error("--threads", BP_E_INVAL);
    size_t llc = llc_bytes();
    size_t bw_bytes = o.cold_mib ? (size_t)o.cold_mib << 20 : cold_bytes(llc);
    arena ar;
    if (!arena_init(&ar, bw_bytes)) {
        fprintf(stderr, "backplane bench: no memory for the %zu MiB cold buffer (try --cold-mib)\n", bw_bytes >> 20);
        return 1;
    }
    bw_bytes = ar.bytes;
    /* 8 MiB segments: the size of a 4096 x 4096 4-bit matrix, the decode figures' unit. Two
     * passes over the buffer (3 before): ~60 timed segments already make a stable median. */
    double bw = bp_cpu_read_bandwidth_on(ar.p, ar.bytes, (size_t)8 << 20, 2);
    int nres = nk * o.nbackends * o.nbatches;
    result *res = calloc((size_t)nres, sizeof *res);
    if (!res) {
        free(ar.p);
        return 1;
    }
    int n = 0, failed = 0;
    for (int k = 0; k < nk; k++)
        for (int b = 0; b < o.nbackends; b++)
            for (int t = 0; t < o.nbatches; t++) {
                int rc = 1;
                for (int attempt = 0; attempt < 5; attempt++) {
                    rc = bench_one(&o, kinds[k], o.backends[b], o.batches[t], &ar, &res[n]);
                    if (rc || res[n].cpu_share < 0 || 100 * res[n].cpu_share >= o.min_share) break;
                }
                if (rc) failed++;
                else n++;
            }
    double share = g_timed_wall > 0 ? g_timed_cpu / g_timed_wall / bp_cpu_threads() : 0;
    if (o.json) {
        /* %.6g, not %.3f: a slow backend's GB/s on a small shape is 0.0xx, and scripts
         * recompute figures from these. */
        printf("{\"read_bandwidth_gbps\": %.6g, \"cold_mib\": %zu, \"results\": [", bw, bw_bytes >> 20);
        for (int i = 0; i < n; i++)
            printf("%s\n  {\"kind\": \"%s\", \"backend\": \"%s\", \"batch\": %lld, \"rows\": %lld, \"cols\": %lld, "
                   "\"median_us\": %.6g, \"gbps\": %.6g, \"gflops\": %.6g}",
                   i ? "," : "", res[i].kind, res[i].backend, (long long)res[i].batch, (long long)o.rows,
                   (long long)o.cols, res[i].median_us, res[i].gbps, res[i].gflops);
        printf("\n]}\n");
    } else {
        printf("CPU: %d threads, ISA %s; read bandwidth %.1f GB/s (median of 8 MiB reads over %zu MiB); LLC %zu MiB; "
               "timed calls got %.0f%% of %d CPUs\n\n",
               bp_cpu_threads(), bp_cpu_isa_name(bp_cpu_isa_current()), bw, bw_bytes >> 20, llc >> 20, 100 * share,
               bp_cpu_threads());
        printf("| kind | backend | test | rows x cols | median us | GB/s | of read BW | GFLOP/s | CPU share | kernel |\n"
               "|---|---|---|---|---:|---:|---:|---:|---:|---|\n");
        for (int i = 0; i < n; i++) {
            char test[32], frac[16] = "";
            if (res[i].batch == 1) snprintf(test, sizeof test, "decode");
            else snprintf(test, sizeof test, "prefill t=%lld", (long long)res[i].batch);
            if (res[i].batch == 1 && bw > 0) snprintf(frac, sizeof frac, "%.0f%%", 100.0 * res[i].gbps / bw);
            char share[16] = "-";
            if (res[i].cpu_share >= 0) snprintf(share, sizeof share, "%.0f%%", 100 * res[i].cpu_share);
            printf("| %s | %s | %s | %lldx%lld | %.1f | %.2f | %s | %.1f | %s | %s |\n", res[i].kind, res[i].backend,
                   test, (long long)o.rows, (long long)o.cols, res[i].median_us, res[i].gbps, frac, res[i].gflops, share,
                   res[i].kernel);
        }
    }
    free(res);
    free(ar.p);
    return failed ? 1 : 0;
}

/* ---- for the op benches in other files (declared in cli_common.h) --------------------------- */

bp_status bp_bench_fill_weights(const bp_kind_info *ki, int64_t rows, int64_t cols, size_t rb, uint8_t *w) {
    return fill_weights(ki, rows, cols, rb, w);
}

size_t bp_bench_cold_bytes(void) { return cold_bytes(llc_bytes()); }

double bp_bench_now(void) { return now_s(); }

double bp_bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
