/* The CPU's batched matmul jobs: Q/K/V or gate/up from one input, in one pool submission.
 *
 * Each job is set up exactly as bp_cpu_gemm would run it (bp_cpu_job_setup, the hook at the end
 * of cpu.c: same kernel, same repacked copy), so every output equals the single-weight call's
 * bit for bit. What is shared: the input is quantized once per activation format (Q5_0 and Q8_0
 * decode kernels both read q8 blocks of 32: one quantization for Q, K and V), the int8 GEMM's
 * input preparation runs once for every quantized job, and all jobs' row chunks go to the pool
 * in one call instead of one call (and one wake-up) per weight. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/cpu_internal.h"
#include "cpu/cpu_jobs.h"

enum { MAX_SUB = 64, MAX_ACTS = 8 };

typedef struct sub {
    bp_cpu_job job;
    bp_cpu_job_mode mode;
    int64_t unit, chunk_rows, first_chunk, nchunks;
} sub;

typedef struct plan {
    bp_chunk_runs runs; /* first: the 64-byte aligned part (the plan is allocated so) */
    sub s[MAX_SUB];
    int n;
    int64_t nchunks;
    float **scratch;
} plan;

size_t bp_cpu_jobs_call_bytes(void) { return sizeof(plan); }

static void worker(void *ctx, int ith, int nth) {
    (void)nth;
    plan *p = ctx;
    int cur = 0, k = 0;
    for (int64_t c; (c = bp_chunk_runs_next(&p->runs, ith, &k)) >= 0;) {
        /* chunks come in runs, and from other threads' runs backwards: look either way */
        while (c >= p->s[cur].first_chunk + p->s[cur].nchunks) cur++;
        while (c < p->s[cur].first_chunk) cur--;
        sub *s = &p->s[cur];
        bp_cpu_job job = s->job;
        job.scratch = p->scratch + ith;
        int64_t r0 = (c - s->first_chunk) * s->chunk_rows, r1 = r0 + s->chunk_rows;
        if (r1 > job.rows) r1 = job.rows;
        const bp_cpu_ops *ops = bp_cpu_ops_current();
        if (s->mode == BP_CPU_JOB_GEMM_F32) ops->gemm(&job, 0, r0, r1);
        else if (s->mode == BP_CPU_JOB_GEMM_Q8) ops->gemm_q8(&job, 0, r0, r1);
        else if (s->mode == BP_CPU_JOB_GEMM_BF16R) ops->gemm_bf16r(&job, 0, r0, r1);
        else job.vk->fn(&job, r0, r1);
    }
}

/* The per-job path: bp_cpu_gemm for each (shapes the shared path does not take). */
static bp_status one_by_one(const float *x, int64_t t, const bp_matmul_job *jobs, int n_jobs) {
    for (int i = 0; i < n_jobs; i++) {
        bp_status s = bp_cpu_gemm(jobs[i].w, x, t, jobs[i].y);
        if (s) return s;
    }
    return BP_OK;
}

bp_status bp_cpu_jobs(const float *x, int64_t t, const bp_matmul_job *jobs, int n_jobs, char *label,
                      size_t label_len) {
    if (label && label_len)
        snprintf(label, label_len, "%s x%d jobs, one submission", n_jobs ? bp_cpu_kernel_name(jobs[0].w->kind, t) : "CPU",
                 n_jobs);
    if (n_jobs == 0 || t == 0) return BP_OK;
    plan *p = bp_aligned_alloc(64, sizeof *p);
    if (!p) return bp_fail(BP_E_NOMEM, "CPU jobs: no memory");
    memset(p, 0, sizeof *p);
    /* Set every job up; activation formats (decode) and the int8 GEMM's buffer, each once. */
    bp_cpu_act acts[MAX_ACTS];
    size_t act_size[MAX_ACTS], act_off[MAX_ACTS], total = 0, q8_size = 0;
    int nacts = 0;
    int64_t cols = jobs[0].w->cols;
    double wbytes = 0;
    bool shared = true;
    for (int i = 0; i < n_jobs && shared; i++) {
        bp_cpu_job job;
        bp_cpu_job_mode mode;
        size_t ab;
        bp_status st = bp_cpu_job_setup(jobs[i].w, t, &job, &mode, &ab);
        if (st) {
            bp_free(p);
            return st;
        }
        wbytes += (double)job.row_bytes * (double)job.rows;
        job.x = x, job.y = jobs[i].y;
        int copies = mode == BP_CPU_JOB_DECODE ? (int)t : 1; /* once-per-input kernels: a sub-job per input */
        if (p->n + copies > MAX_SUB) {
            shared = false;
            break;
        }
        /* The rounded-activation BF16 GEMM reads every input in its kernel's format, as a
         * multi-input kernel does. */
        if (mode == BP_CPU_JOB_DECODE || mode == BP_CPU_JOB_DECODE_MULTI || mode == BP_CPU_JOB_GEMM_BF16R) {
            int a = 0;
            while (a < nacts && acts[a] != job.vk->act) a++;
            if (a == nacts && ab) {
                if (nacts == MAX_ACTS) {
                    shared = false;
                    break;
                }
                acts[nacts] = job.vk->act, act_size[nacts] = ab, act_off[nacts] = total;
                total += (ab * (size_t)t + 63) & ~(size_t)63;
                nacts++;
            }
            job.xq_stride = ab;
            /* xq is set below, once the buffer exists: remember the format's index in xq. */
            job.xq = ab ? (const void *)(uintptr_t)(a + 1) : NULL;
        } else if (mode == BP_CPU_JOB_GEMM_Q8)
            q8_size = ab;
        for (int j = 0; j < copies; j++) {
            sub *s = &p->s[p->n++];
            s->job = job, s->mode = mode;
            if (mode == BP_CPU_JOB_DECODE) {
                s->job.x = x + (size_t)j * (size_t)cols, s->job.y = jobs[i].y + (size_t)j * (size_t)job.rows;
                s->job.batch = 1;
                s->first_chunk = j; /* temporarily: which input */
            }
            s->unit = mode == BP_CPU_JOB_GEMM_F32 || mode == BP_CPU_JOB_GEMM_Q8 || mode == BP_CPU_JOB_GEMM_BF16R ? BP_CPU_NR : 4;
        }
    }
    if (!shared) {
        bp_free(p);
        return one_by_one(x, t, jobs, n_jobs);
    }
    size_t q8_off = total;
    total += q8_size;
    bool held = bp_pool_acquire();
    void *own_act = NULL;
    float *own_scratch = NULL;
    void *act = NULL;
    if (held) {
        p->scratch = bp_pool_scratch();
        act = total ? bp_pool_act_buffer(total) : NULL;
    } else {
        own_scratch = bp_aligned_alloc(64, BP_CPU_SCRATCH_FLOATS * sizeof(float));
        p->scratch = &own_scratch;
        act = total ? (own_act = bp_aligned_alloc(64, total)) : NULL;
    }
    bp_status st = BP_OK;
    if ((total && !act) || !p->scratch[0]) {
        st = bp_fail(BP_E_NOMEM, "CPU jobs: no memory for activations or scratch");
        goto out;
    }
    const bp_cpu_ops *ops = bp_cpu_ops_current();
    for (int a = 0; a < nacts; a++)
        for (int64_t j = 0; j < t; j++)
            bp_cpu_quantize_act(ops, acts[a], x + (size_t)j * (size_t)cols, cols,
                                (char *)act + act_off[a] + (size_t)j * act_size[a]);
    if (q8_size) ops->gemm_q8_prep(x, t, cols, (char *)act + q8_off);
    int nth = held ? bp_pool_size() : 1;
    if (wbytes * (t > 1 ? 4 : 1) < (double)bp_cpu_min_parallel_bytes()) nth = 1;
    /* Chunks: about 8 per thread over all jobs, in whole units (4 rows decode, a panel GEMM). */
    int64_t units = 0;
    for (int i = 0; i < p->n; i++) units += (p->s[i].job.rows + p->s[i].unit - 1) / p->s[i].unit;
    const int64_t per = bp_chunk_rows_per(units, nth);
    for (int i = 0; i < p->n; i++) {
        sub *s = &p->s[i];
        if (s->mode == BP_CPU_JOB_DECODE || s->mode == BP_CPU_JOB_DECODE_MULTI || s->mode == BP_CPU_JOB_GEMM_BF16R) {
            uintptr_t a = (uintptr_t)s->job.xq;
            if (a) s->job.xq = (char *)act + act_off[a - 1] + (s->mode == BP_CPU_JOB_DECODE ? (size_t)s->first_chunk * act_size[a - 1] : 0);
        } else if (s->mode == BP_CPU_JOB_GEMM_Q8)
            s->job.xq = (char *)act + q8_off;
        s->chunk_rows = per * s->unit;
        s->nchunks = (s->job.rows + s->chunk_rows - 1) / s->chunk_rows;
        s->first_chunk = p->nchunks;
        p->nchunks += s->nchunks;
    }
    bp_chunk_runs_init(&p->runs, p->nchunks, nth);
    if (nth > 1) bp_pool_run(worker, p, nth);
    else worker(p, 0, 1);
out:
    if (held) bp_pool_release();
    bp_free(own_scratch);
    bp_free(own_act);
    bp_free(p);
    return st;
}
