/* bench_callers: what concurrent callers get. N threads call bp_matvec_on (decode, batch 1) in
 * a loop on one backend, on one weight they share or on a weight each, for a fixed time; the
 * table gives the aggregate ops/s and its ratio to one caller. Why it matters: the seam
 * serializes every op of a GPU-API backend under that backend's lock, and the CPU backend's
 * thread pool has one owner at a time (a caller that finds it busy runs on its own thread), so
 * adding callers is not adding throughput; this says by how much, per backend.
 *
 *   build/bench_callers [--rows R] [--cols C] [--kind K] [--seconds S] [--backend B ...] [--json]
 *
 * Vulkan and OpenCL are forced on (BACKPLANE_VULKAN=1 / BACKPLANE_OPENCL=1) when built: on a
 * machine without a GPU they run on lavapipe / PoCL, CPU implementations, so their figures say
 * how the seam shares a device among callers, not how fast a GPU is. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backplane.h"
#include "testing/testdata.h"
#include "seam/seam.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct ctx {
    const char *backend;
    bp_weight *w;
    const float *x;
    float *y;
    double until;
    long ops;
    int err;
} ctx;

static pthread_barrier_t go;

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *caller(void *p) {
    ctx *c = p;
    pthread_barrier_wait(&go);
    while (now() < c->until) {
        if (bp_matvec_on(c->w, c->backend, c->x, c->y)) {
            c->err = 1;
            break;
        }
        c->ops++;
    }
    return NULL;
}

/* Aggregate ops/s of n callers; -1 on an error. */
static double run(const char *backend, bp_weight **ws, int n, const float *x, float *ys, int64_t rows, double secs) {
    pthread_t th[16];
    ctx c[16];
    pthread_barrier_init(&go, NULL, (unsigned)n);
    double t0 = now();
    for (int i = 0; i < n; i++) {
        c[i] = (ctx){backend, ws[i], x, ys + (size_t)i * (size_t)rows, t0 + secs, 0, 0};
        pthread_create(&th[i], NULL, caller, &c[i]);
    }
    long ops = 0;
    int err = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        ops += c[i].ops;
        err |= c[i].err;
    }
    double el = now() - t0;
    pthread_barrier_destroy(&go);
    return err ? -1 : (double)ops / el;
}

int main(int argc, char **argv) {
    int64_t rows = 4096, cols = 4096;
    double secs = 0.5;
    int reps = 5;
    const char *kind = "Q4_0", *backends[8];
    int nb = 0;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kind") && i + 1 < argc) kind = argv[++i];
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc && nb < 8) backends[nb++] = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = true;
        else {
            fprintf(stderr, "usage: bench_callers [--rows R] [--cols C] [--kind K] [--seconds S] [--reps N] "
                            "[--backend B ...] [--json]\n");
            return 2;
        }
    }
    setenv("BACKPLANE_VULKAN", "1", 0);
    setenv("BACKPLANE_OPENCL", "1", 0);
    if (!nb) {
        backends[nb++] = "cpu";
        bp_backend_id id;
        if (!bp_backend_by_name("vulkan", &id) && bp_backend_dispatch_of(id)) backends[nb++] = "vulkan";
        if (!bp_backend_by_name("opencl", &id) && bp_backend_dispatch_of(id)) backends[nb++] = "opencl";
    }
    const bp_kind_info *ki = bp_kind_by_name(kind);
    if (!ki) {
        fprintf(stderr, "bench_callers: unknown kind %s\n", kind);
        return 2;
    }
    enum { MAXC = 8 };
    static const int callers[] = {1, 2, 4, 8};
    uint64_t rng = 1;
    size_t bytes;
    bp_weight *own[MAXC], *shared[MAXC];
    float *x = malloc(sizeof(float) * (size_t)cols), *ys = malloc(sizeof(float) * (size_t)(rows * MAXC));
    for (int64_t i = 0; i < cols; i++) x[i] = bp_rng_float(&rng);
    /* One 64-row random tile repeated down the matrix (values do not change a kernel's speed;
     * quantizing 16M floats with the reference quantizer would take longer than the benchmark).
     * The weights share these bytes; each makes its own repacked / device copy. */
    const int64_t tile = rows < 64 ? rows : 64;
    size_t rb = 0;
    uint8_t *t = bp_random_weight(ki->kind, tile, cols, &rng, &bytes);
    uint8_t *data = t && !bp_kind_row_bytes(ki->kind, cols, &rb) ? malloc(rb * (size_t)rows) : NULL;
    if (!data) {
        fprintf(stderr, "bench_callers: %s\n", bp_last_error());
        return 1;
    }
    for (int64_t r = 0; r < rows; r++) memcpy(data + (size_t)r * rb, t + (size_t)(r % tile) * rb, rb);
    free(t);
    bytes = rb * (size_t)rows;
    for (int i = 0; i < MAXC; i++)
        if (bp_weight_create(ki->kind, data, bytes, rows, cols, &own[i])) {
            fprintf(stderr, "bench_callers: %s\n", bp_last_error());
            return 1;
        }
    for (int i = 0; i < MAXC; i++) shared[i] = own[0];
    if (json) printf("[\n");
    else {
        printf("%s %lld x %lld matvec; aggregate ops/s of all callers (x one caller), median of %d interleaved "
               "sweeps of %.1f s per cell\n\n", kind, (long long)rows, (long long)cols, reps, secs);
        printf("| backend | weights | 1 caller | 2 callers | 4 callers | 8 callers |\n|---|---|---:|---:|---:|---:|\n");
    }
    bool first = true;
    for (int b = 0; b < nb; b++) {
        for (int sh = 0; sh < 2; sh++) {
            bp_weight **ws = sh ? shared : own;
            /* Warm: device copies and repacked layouts made, kernels compiled. */
            for (int i = 0; i < MAXC; i++) bp_matvec_on(ws[i], backends[b], x, ys);
            /* The caller counts interleaved, `reps` sweeps, the median per count: a shared
             * machine's load moves every cell alike instead of one. */
            enum { NC = sizeof callers / sizeof callers[0] };
            double cell[NC][64];
            int nr = reps < 1 ? 1 : reps > 64 ? 64 : reps;
            for (int r = 0; r < nr; r++)
                for (int ci = 0; ci < NC; ci++) cell[ci][r] = run(backends[b], ws, callers[ci], x, ys, rows, secs);
            double base = 0;
            if (!json) printf("| %s | %s |", backends[b], sh ? "shared" : "one each");
            for (int ci = 0; ci < NC; ci++) {
                qsort(cell[ci], (size_t)nr, sizeof(double), cmp_dbl);
                double r = cell[ci][0] < 0 ? -1 : cell[ci][nr / 2];
                if (ci == 0) base = r;
                if (json) {
                    printf("%s  {\"backend\": \"%s\", \"weights\": \"%s\", \"kind\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
                           "\"callers\": %d, \"ops_per_s\": %.1f, \"vs_one\": %.2f}",
                           first ? "" : ",\n", backends[b], sh ? "shared" : "own", kind, (long long)rows,
                           (long long)cols, callers[ci], r, base > 0 ? r / base : 0);
                    first = false;
                } else if (r < 0)
                    printf(" error: %s |", bp_last_error());
                else
                    printf(" %.0f (%.2fx) |", r, base > 0 ? r / base : 0);
                fflush(stdout);
            }
            if (!json) printf("\n");
        }
    }
    if (json) printf("\n]\n");
    for (int i = 0; i < MAXC; i++) bp_weight_free(own[i]);
    free(data);
    free(x);
    free(ys);
    return 0;
}
