/* Batched matmul jobs: several weights, one input. Jobs whose kind a backend claims the jobs op
 * for go to it, one call per kind; jobs whose kind a GPU backend only has a matvec/GEMM for run
 * through bp_gemm (the weight seam, so they never silently land on the CPU); the rest run on
 * the CPU as one submission sharing the input's quantization. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "ops/ops_internal.h"
#include "seam/op_dispatch.h"

static bp_status check(const float *x, int64_t t, const bp_matmul_job *jobs, int n_jobs) {
    if (n_jobs < 0 || (n_jobs > 0 && !jobs))
        return bp_fail(BP_E_INVAL, "matmul: %d jobs at %p", n_jobs, (const void *)jobs);
    if (t < 0) return bp_fail(BP_E_SHAPE, "matmul: negative batch %lld", (long long)t);
    int64_t cols = 0;
    for (int i = 0; i < n_jobs; i++) {
        const bp_weight *w = jobs[i].w;
        if (!w || !jobs[i].y) return bp_fail(BP_E_INVAL, "matmul: job %d has a NULL weight or output", i);
        if (i == 0) cols = w->cols;
        if (w->cols != cols)
            return bp_fail(BP_E_SHAPE, "matmul: job %d weight is %lld x %lld, but job 0 takes %lld inputs (one x for all)",
                           i, (long long)w->rows, (long long)w->cols, (long long)cols);
        if (t > 0 && (uint64_t)t > (uint64_t)INT64_MAX / 4 / (uint64_t)(w->rows > w->cols ? w->rows : w->cols))
            return bp_fail(BP_E_SHAPE, "matmul: job %d: batch %lld overflows", i, (long long)t);
        if ((const float *)jobs[i].y == x) return bp_fail(BP_E_INVAL, "matmul: job %d writes its output over x", i);
    }
    if (t > 0 && n_jobs > 0 && !x) return bp_fail(BP_E_INVAL, "matmul: x is NULL");
    return BP_OK;
}

static double job_bytes(const bp_weight *w, int64_t t) {
    return (double)w->row_bytes * (double)w->rows + 4.0 * (double)t * (double)(w->rows + w->cols);
}

bp_status bp_matmul(const float *x, int64_t t, const bp_matmul_job *jobs, int n_jobs) {
    bp_status s = check(x, t, jobs, n_jobs);
    if (s || t == 0 || n_jobs == 0) return s;
    /* Partition: 0 = CPU group, 1 = through the weight seam, 2 = a backend's jobs op. */
    bp_matmul_job *cpu = bp_malloc((size_t)n_jobs * sizeof *cpu);
    char *done = bp_calloc((size_t)n_jobs, 1);
    if (!cpu || !done) {
        bp_free(cpu), bp_free(done);
        return bp_fail(BP_E_NOMEM, "matmul: no memory for %d jobs", n_jobs);
    }
    int n_cpu = 0;
    for (int i = 0; i < n_jobs && !s; i++) {
        if (done[i]) continue;
        bp_weight *w = jobs[i].w;
        if (bp_seam_op_route(BP_OP_JOBS, w->kind, w->kind) >= 0) {
            /* A backend takes the jobs op for this kind: all jobs of the kind in one call. */
            int n = 0;
            for (int j = i; j < n_jobs; j++)
                if (!done[j] && jobs[j].w->kind == w->kind) cpu[n_cpu + n++] = jobs[j], done[j] = 1;
            bp_op_call c = {.op = BP_OP_JOBS, .kind = w->kind, .kind2 = w->kind};
            c.u.jobs.x = x, c.u.jobs.t = t, c.u.jobs.jobs = cpu + n_cpu, c.u.jobs.n_jobs = n;
            for (int j = 0; j < n; j++) {
                c.bytes += job_bytes(cpu[n_cpu + j].w, t);
                c.flops += 2.0 * (double)t * (double)cpu[n_cpu + j].w->rows * (double)w->cols;
            }
            s = bp_op_run(&c);
        } else if (bp_seam_route_shape(w->kind, w->rows, w->cols, t > 1 ? t : 0, NULL, 0) >= 0) {
            /* A GPU backend takes this weight's matvec/GEMM at this shape (its cost model and
             * thresholds agreeing): the weight seam runs it there. */
            int slot = bp_seam_route_shape(w->kind, w->rows, w->cols, t > 1 ? t : 0, NULL, 0);
            double t0 = bp_ops_now();
            s = bp_gemm(w, x, t, jobs[i].y);
            done[i] = 1;
            if (!s)
                bp_stats_add(BP_OP_JOBS, bp_seam_slot_at(slot)->caps->name, bp_ops_now() - t0, job_bytes(w, t),
                             2.0 * (double)t * (double)w->rows * (double)w->cols);
        }
    }
    if (!s) {
        bp_op_call c = {.op = BP_OP_JOBS};
        for (int i = 0; i < n_jobs; i++)
            if (!done[i]) {
                cpu[n_cpu++] = jobs[i];
                c.bytes += job_bytes(jobs[i].w, t);
                c.flops += 2.0 * (double)t * (double)jobs[i].w->rows * (double)jobs[i].w->cols;
            }
        if (n_cpu) {
            /* No backend claims the jobs op for any of these kinds, so the walk ends on the CPU. */
            c.kind = c.kind2 = cpu[0].w->kind;
            c.u.jobs.x = x, c.u.jobs.t = t, c.u.jobs.jobs = cpu, c.u.jobs.n_jobs = n_cpu;
            s = bp_op_run(&c);
        }
    }
    bp_free(cpu);
    bp_free(done);
    return s;
}
