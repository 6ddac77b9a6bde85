/* Batched matmul jobs: several weights, one input. The jobs one backend takes (the seam's rule,
 * asked job by job) go to it as one jobs call -- one upload of the input, one submission where
 * the backend can; the rest run on the CPU as one submission sharing the input's
 * quantization. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "ops/ops_internal.h"

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

bp_status bp_matmul(const float *x, int64_t t, const bp_matmul_job *jobs, int n_jobs) {
    bp_status s = check(x, t, jobs, n_jobs);
    if (s || t == 0 || n_jobs == 0) return s;
    /* The non-finite policy of bp_matvec/bp_gemm (backplane.h): a NaN or Inf in x runs the CPU
     * reference for every job, so no kernel's 8-bit quantization of x turns it finite. */
    if (bp_seam_nonfinite(x, (size_t)t * (size_t)jobs[0].w->cols)) {
        for (int i = 0; i < n_jobs && !s; i++) {
            const bp_weight *w = jobs[i].w;
            const double t0 = bp_seam_now();
            s = bp_ref_gemm(w->kind, w->data, w->row_bytes * (size_t)w->rows, w->rows, w->cols, x, t, jobs[i].y);
            bp_op_call c = {.op = BP_OP_JOBS, .kind = w->kind, .kind2 = w->kind};
            c.u.jobs.x = x, c.u.jobs.t = t, c.u.jobs.jobs = &jobs[i], c.u.jobs.n_jobs = 1;
            bp_run_record r;
            bp_seam_record_fill(&r, &c, -1, "CPU reference (non-finite input)");
            if (!s) bp_seam_records_add(&c, &r, -1, bp_seam_now() - t0, NULL);
        }
        return s;
    }
    /* Each job's slot by the seam's rule (-1: the CPU); the jobs of one slot go to it as one
     * call, in the order their first job came. The walk asks the same rule of the group, and
     * every slot before this one declined each of its jobs, so the group lands where its jobs
     * were routed (or falls back, counted, from there). */
    int *slot = bp_malloc((size_t)n_jobs * sizeof *slot);
    bp_matmul_job *group = bp_malloc((size_t)n_jobs * sizeof *group);
    if (!slot || !group) {
        bp_free(slot), bp_free(group);
        return bp_fail(BP_E_NOMEM, "matmul: no memory for %d jobs", n_jobs);
    }
    for (int i = 0; i < n_jobs; i++) {
        const bp_weight *w = jobs[i].w;
        const bp_op_shape sh = {w->rows, w->cols, t};
        slot[i] = bp_seam_route(BP_OP_JOBS, w->kind, w->kind, &sh, NULL, NULL, 0);
    }
    for (int i = 0; i < n_jobs && !s; i++) {
        if (slot[i] == -2) continue; /* already in a group */
        int n = 0;
        const int my = slot[i];
        for (int j = i; j < n_jobs; j++)
            if (slot[j] == my) group[n++] = jobs[j], slot[j] = -2;
        bp_op_call c = {.op = BP_OP_JOBS, .kind = group[0].w->kind, .kind2 = group[0].w->kind};
        c.u.jobs.x = x, c.u.jobs.t = t, c.u.jobs.jobs = group, c.u.jobs.n_jobs = n;
        s = bp_op_run(&c);
    }
    bp_free(slot);
    bp_free(group);
    return s;
}
