/* The CPU's batched matmul jobs (src/cpu/cpu_jobs.c): several weights sharing one input. */
#ifndef BP_CPU_JOBS_H
#define BP_CPU_JOBS_H

#include "cpu/cpu.h"

/* Every jobs[i].y = x W_i^T for x[t][cols] (all weights have cols columns; validated by the
 * caller). label gets the kernel that ran ("CPU avx512 Q5_0 ... x3 jobs"). */
bp_status bp_cpu_jobs(const float *x, int64_t t, const bp_matmul_job *jobs, int n_jobs, char *label,
                      size_t label_len);

#endif
