/* The CPU's batched matmul jobs: Q/K/V or gate/up from one input. Today each job runs the CPU
 * backend's matvec/GEMM in turn (correct, every kind); sharing one activation quantization and
 * one pool submission across jobs is the fast path that replaces this loop. */
#include <stdio.h>

#include "core/error.h"
#include "cpu/cpu_jobs.h"

bp_status bp_cpu_jobs(const float *x, int64_t t, const bp_matmul_job *jobs, int n_jobs, char *label,
                      size_t label_len) {
    for (int i = 0; i < n_jobs; i++) {
        bp_status s = bp_cpu_gemm(jobs[i].w, x, t, jobs[i].y);
        if (s) return s;
    }
    if (label && label_len)
        snprintf(label, label_len, "%s x%d jobs", n_jobs ? bp_cpu_kernel_name(jobs[0].w->kind, t) : "CPU", n_jobs);
    return BP_OK;
}
