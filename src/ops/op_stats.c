/* Stats per (op, backend): calls, seconds, bytes, FLOPs -- what `--profile` prints. One lock
 * around a small table; an op costs far more than the lock. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "ops/ops_internal.h"

enum { MAX_BACKENDS = 12 };

typedef struct row {
    char backend[24];
    unsigned long long calls;
    double seconds, bytes, flops;
} row;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static row rows[BP_OP_COUNT][MAX_BACKENDS];

double bp_ops_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bp_stats_add(bp_op op, const char *backend, double seconds, double bytes, double flops) {
    if ((unsigned)op >= BP_OP_COUNT || !backend) return;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_BACKENDS; i++) {
        row *r = &rows[op][i];
        if (r->backend[0] && strcmp(r->backend, backend)) continue;
        if (!r->backend[0]) snprintf(r->backend, sizeof r->backend, "%s", backend);
        r->calls++;
        r->seconds += seconds, r->bytes += bytes, r->flops += flops;
        break;
    }
    pthread_mutex_unlock(&lock);
}

int bp_stats_get(bp_op_stat *out, int max) {
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int op = 0; op < BP_OP_COUNT; op++)
        for (int i = 0; i < MAX_BACKENDS && rows[op][i].backend[0]; i++, n++) {
            if (!out || n >= max) continue;
            const row *r = &rows[op][i];
            /* The backend name must outlive the lock: names come from caps tables (static). */
            out[n] = (bp_op_stat){bp_op_name(op), NULL, r->calls, r->seconds, r->bytes, r->flops};
            out[n].backend = r->backend;
        }
    pthread_mutex_unlock(&lock);
    return n;
}

void bp_stats_reset(void) {
    pthread_mutex_lock(&lock);
    memset(rows, 0, sizeof rows);
    pthread_mutex_unlock(&lock);
}

void bp_stats_report(FILE *out) {
    if (!out) return;
    bp_op_stat st[BP_OP_COUNT * MAX_BACKENDS];
    int n = bp_stats_get(st, BP_OP_COUNT * MAX_BACKENDS);
    fprintf(out, "| op | backend | calls | ms | ms/call | GB/s | GFLOP/s |\n|---|---|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++) {
        double s = st[i].seconds > 0 ? st[i].seconds : 1e-12;
        fprintf(out, "| %s | %s | %llu | %.3f | %.4f | %.2f | %.2f |\n", st[i].op, st[i].backend, st[i].calls,
                1e3 * st[i].seconds, 1e3 * st[i].seconds / (double)st[i].calls, st[i].bytes / s * 1e-9,
                st[i].flops / s * 1e-9);
    }
    if (!n) fprintf(out, "| (no ops ran) | | | | | | |\n");
    bp_fallback_report(out);
}
