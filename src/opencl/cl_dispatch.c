/* The OpenCL half of the backend interface (src/backend/backend.h): probe, launch table (from the
 * program's own kernel names), and the launch of matvec, GEMM and matmul jobs (one upload of
 * the jobs' shared input).
 *
 * A weight is uploaded once, on first use, and cached in bp_weight.backend_state; activations
 * and results go through two scratch buffers of the op cache, reused across calls. Kernels
 * come from the op cache: the one program is built on the first launch and never again.
 * One lock serializes every launch (the scratch buffers and kernel arguments are shared).
 *
 * The device is opened on first use and kept until the process exits (not closed at exit:
 * weights freed after that would touch a dead context, and every object stays reachable from
 * here, so leak checkers do not report it).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "kinds/kinds_internal.h"
#include "cl_kernel_names.h"
#include "gpu/gpu_step.h"
#include "opencl/cl_internal.h"

enum { CL_SLOT_X = 0, CL_SLOT_Y = 1 };
#define CL_MV_LS 64  /* BP_CL_MV_LS of cl_kernels.cl */
#define CL_MV_ROWS 8 /* BP_CL_MV_ROWS (a mismatch drops rows: the 33-row tests catch it) */
#define CL_TILE 16  /* BP_CL_TILE */
#define CL_GEMM_LS 64 /* BP_CL_TILE * BP_CL_KC: a GEMM work-group */

static pthread_mutex_t cl_open_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cl_run_lock = PTHREAD_MUTEX_INITIALIZER;
static bool cl_tried, cl_ctx_ok;
static char cl_why[256];
static bp_cl_ctx cl_ctx;
static bp_device *cl_dev;

bp_device *bp_cl_device(char *why, size_t why_len) {
    pthread_mutex_lock(&cl_open_lock);
    if (!cl_tried) {
        cl_tried = true;
        cl_ctx_ok = bp_cl_ctx_create(&cl_ctx, cl_why, sizeof cl_why);
    }
    /* Over a context that works, the device is opened at first use, and again at the next use
     * when that failed (bp_device_open fails only for memory): a transient out-of-memory must not
     * take OpenCL away for the rest of the process (the cold allocation-failure campaign found
     * that it did). */
    if (cl_ctx_ok && !cl_dev) {
        char name[32];
        snprintf(name, sizeof name, "opencl:%.24s", cl_ctx.name);
        if (bp_device_open(&bp_cl_methods, &cl_ctx, name, &cl_dev) != BP_OK) {
            snprintf(cl_why, sizeof cl_why, "bp_device_open: %s", bp_last_error());
            cl_dev = NULL;
        }
    }
    bp_device *d = cl_dev;
    if (!d && why) snprintf(why, why_len, "%s", cl_why);
    pthread_mutex_unlock(&cl_open_lock);
    return d;
}

bp_cl_ctx *bp_cl_ctx_of(bp_device *dev) { return dev ? (bp_cl_ctx *)dev->impl : NULL; }

/* The probe opens the device (platform, device, context, queue: cheap) but does not build the
 * program, so `backplane probe` stays fast; the build happens at the first launch. */
static bool cl_probe(char *why, size_t why_len) {
    bp_device *d = bp_cl_device(why, why_len);
    if (d) snprintf(why, why_len, "%s", cl_ctx.name);
    return d != NULL;
}

/* Device-free: does the program define the kernel called name? Asked of the names generated
 * at build time from the preprocessed program text (cl_kernel_names.cmake), never of the
 * capability claims, so the guard catches a claim the program does not back. */
static bool program_has(const char *name) {
    for (int i = 0; i < BP_CL_KERNEL_COUNT; i++)
        if (!strcmp(bp_cl_kernel_names[i], name)) return true;
    return false;
}

/* matvec, gemm and jobs need both of the kind's kernels: t = 1 runs the matvec, more the GEMM. */
static bool cl_has_matmul(bp_op op, bp_kind k) {
    const bp_kind_traits *t = bp_kind_traits_of(k);
    if (!t || t->info.role != BP_ROLE_W || (op != BP_OP_MATVEC && op != BP_OP_GEMM && op != BP_OP_JOBS)) return false;
    char mv[48], gm[48];
    snprintf(mv, sizeof mv, "matvec_%s", t->info.name);
    snprintf(gm, sizeof gm, "gemm_%s", t->info.name);
    return program_has(mv) && program_has(gm);
}

/* The whole step (src/gpu/gpu_step.c): the step kernels for the KV kind and the shared ones. */
static bool cl_has_step(bp_kind kv) { return bp_gpu_step_has_kernels(kv, NULL, program_has); }

/* A weight kind's embedding and matmul kernels, for the step. */
static bool cl_has_step_weight(bp_kind k) {
    char e[48];
    snprintf(e, sizeof e, "embed_%s", bp_kind_traits_of(k)->info.name);
    return cl_has_matmul(BP_OP_JOBS, k) && program_has(e);
}

static bool cl_has_launch(bp_op op, bp_kind k) {
    if (op == BP_OP_STEP) return cl_has_step(k);
    return cl_has_matmul(op, k);
}

/* The device copy of a weight. */
typedef struct cl_weight {
    bp_device *dev;
    void *buf;
} cl_weight;

static void cl_weight_free(void *p) {
    cl_weight *cw = p;
    pthread_mutex_lock(&cl_run_lock);
    bp_dev_free(cw->dev, cw->buf);
    pthread_mutex_unlock(&cl_run_lock);
    bp_free(cw);
}

static bp_status upload_locked(bp_weight *w, cl_weight **out) {
    cl_weight *cw = w->backend_state[BP_BACKEND_OPENCL];
    if (cw) {
        *out = cw;
        return BP_OK;
    }
    size_t bytes;
    if (!bp_mul_size(w->row_bytes, (size_t)w->rows, &bytes) || bytes == 0)
        return bp_fail(BP_E_SHAPE, "OpenCL upload: %lld rows of %zu bytes", (long long)w->rows, w->row_bytes);
    cw = bp_calloc(1, sizeof *cw);
    if (!cw) return bp_fail(BP_E_NOMEM, "OpenCL upload: no memory");
    cw->dev = cl_dev;
    bp_status s = bp_dev_alloc(cl_dev, bytes, &cw->buf);
    if (!s) s = bp_dev_h2d(cl_dev, cw->buf, 0, w->data, bytes);
    if (s) {
        if (cw->buf) bp_dev_free(cl_dev, cw->buf);
        bp_free(cw);
        return s;
    }
    w->backend_state[BP_BACKEND_OPENCL] = cw;
    w->backend_free[BP_BACKEND_OPENCL] = cl_weight_free;
    *out = cw;
    return BP_OK;
}

/* Refuse what the kernels cannot index (int) or what the row layout contradicts. */
static bp_status check_shape(const bp_weight *w, int64_t t) {
    const bp_kind_traits *kt = w->traits;
    const char *kn = kt->info.name;
    size_t row_bytes = 0;
    if (w->rows < 1 || w->cols < 1 || t < 1 || w->rows > INT32_MAX / CL_MV_LS || w->cols > INT32_MAX / 4 ||
        t > INT32_MAX / 4 || (double)t * (double)w->cols > (double)INT32_MAX ||
        (double)t * (double)w->rows > (double)INT32_MAX)
        return bp_fail(BP_E_SHAPE, "OpenCL %s: %lld x %lld, t=%lld is outside the kernels' int range", kn,
                       (long long)w->rows, (long long)w->cols, (long long)t);
    if (bp_kind_row_bytes(w->kind, w->cols, &row_bytes) != BP_OK || row_bytes != w->row_bytes ||
        (kt->info.block_elems > 1 && w->cols % 32 != 0) || kt->info.block_bytes > 224)
        return bp_fail(BP_E_SHAPE, "OpenCL %s: %lld columns do not make whole blocks of %u (row %zu bytes)", kn,
                       (long long)w->cols, kt->info.block_elems, w->row_bytes);
    return BP_OK;
}

/* Every job's Y = X W^T from one X[t][cols]: X uploaded once, each job's kernel and blocking
 * read-back in order on the one queue (t == 1 runs the matvec kernels). Under cl_run_lock. */
static bp_status run_jobs_locked(const bp_matmul_job *jobs, int n, const float *x, int64_t t) {
    char why[256];
    if (!bp_cl_device(why, sizeof why)) return bp_fail(BP_E_UNSUPPORTED, "%s", why);
    bp_status s;
    int64_t rows_max = 0;
    for (int j = 0; j < n; j++) {
        if ((s = check_shape(jobs[j].w, t))) return s;
        if (jobs[j].w->rows > rows_max) rows_max = jobs[j].w->rows;
    }
    const int cols = (int)jobs[0].w->cols, tt = (int)t;
    const size_t xbytes = (size_t)t * (size_t)cols * sizeof(float);
    void *xb, *yb;
    if ((s = bp_dev_scratch(cl_dev, CL_SLOT_X, xbytes, &xb)) ||
        (s = bp_dev_scratch(cl_dev, CL_SLOT_Y, (size_t)t * (size_t)rows_max * sizeof(float), &yb)))
        return s;
    if ((s = bp_dev_h2d(cl_dev, xb, 0, x, xbytes))) return s;
    for (int j = 0; j < n; j++) {
        bp_weight *w = jobs[j].w;
        cl_weight *cw = NULL;
        if ((s = upload_locked(w, &cw))) return s;
        char name[48];
        snprintf(name, sizeof name, "%s_%s", t == 1 ? "matvec" : "gemm", w->traits->info.name);
        bp_kernel *k;
        if ((s = bp_dev_kernel(cl_dev, name, &k))) return s;
        const int rows = (int)w->rows;
        const bp_kind_traits *kt = bp_kind_traits_of(w->kind);
        const bp_gpu_mm_args a = {.rows = (uint32_t)rows, .cols = (uint32_t)cols, .row_bytes = (uint32_t)w->row_bytes,
                                  .nsub = (uint32_t)(cols / (int)kt->info.block_elems), .t = (uint32_t)tt,
                                  .y_stride = (uint32_t)rows, .fscale = 1.0f};
        const bp_launch_dims d = t == 1 ? (bp_launch_dims){{(uint32_t)((rows + CL_MV_ROWS - 1) / CL_MV_ROWS), 1, 1}, {CL_MV_LS, 1, 1}, 0}
                                        : (bp_launch_dims){{(uint32_t)((rows + CL_TILE - 1) / CL_TILE),
                                                            (uint32_t)((tt + CL_TILE - 1) / CL_TILE), 1}, {CL_GEMM_LS, 1, 1}, 0};
        const bp_kernel_arg args[] = {bp_arg_buf(cw->buf, 0), bp_arg_buf(xb, 0), bp_arg_buf(yb, 0), bp_arg_bytes(&a, sizeof a)};
        s = bp_dev_launch(cl_dev, NULL, k, &d, args, 4);
        if (s) return s;
        /* blocking, in order after the kernel: the next job may reuse the output scratch */
        if ((s = bp_dev_d2h(cl_dev, jobs[j].y, yb, 0, (size_t)t * (size_t)rows * sizeof(float)))) return s;
    }
    return BP_OK;
}

/* The step on the OpenCL device, every weight kind's embedding and matmul kernels too. Under
 * cl_run_lock (the kernels' arguments are shared with the matmul path). */
/* What the step tells the common code: the kernels index buffers with 32-bit offsets, so a
 * binding spans at most 2 GiB. */
static bp_gpu_backend cl_step_backend(void) {
    size_t range = cl_ctx.max_alloc ? cl_ctx.max_alloc : (size_t)128 << 20;
    if (range > ((size_t)1 << 31)) range = (size_t)1 << 31;
    return (bp_gpu_backend){.id = BP_BACKEND_OPENCL, .name = "opencl", .display = "OpenCL", .max_binding = range,
                            .mm_tile = CL_TILE, .mv_rows = CL_MV_ROWS};
}

static bp_status run_step_locked(const bp_op_call *c, char *label, size_t len) {
    char why[256];
    bp_device *dev = bp_cl_device(why, sizeof why);
    if (!dev) return bp_fail(BP_E_UNSUPPORTED, "%s", why);
    const bp_gpu_backend b = cl_step_backend();
    bp_status st = bp_gpu_step_check_weights(&b, c->u.step.prog, cl_has_step_weight);
    return st ? st : bp_gpu_step_run(&b, dev, c, label, len);
}

static bp_status cl_step_bytes(const bp_step_prog *p, bp_step_bytes *out) {
    char why[256];
    if (!bp_cl_device(why, sizeof why)) return bp_fail(BP_E_UNSUPPORTED, "%s", why);
    const bp_gpu_backend b = cl_step_backend();
    return bp_gpu_step_bytes(&b, p, out);
}

static bp_launch cl_launch(const bp_op_call *c, char *err, size_t err_len) {
    bp_kind kinds[16];
    const int nk = bp_op_call_kinds(c, kinds, 16);
    for (int i = 0; i < nk; i++)
        if (!cl_has_launch(c->op, kinds[i])) return BP_LAUNCH_NO_KERNEL;
    bp_matmul_job one = {NULL, NULL};
    if (c->op != BP_OP_JOBS && c->op != BP_OP_STEP) one.w = c->u.mm.w, one.y = c->u.mm.y;
    char label[160]; /* the walk's record names the claim; the step's label is not kept */
    pthread_mutex_lock(&cl_run_lock);
    bp_status s = c->op == BP_OP_STEP  ? run_step_locked(c, label, sizeof label)
                  : c->op == BP_OP_JOBS ? run_jobs_locked(c->u.jobs.jobs, c->u.jobs.n_jobs, c->u.jobs.x, c->u.jobs.t)
                                        : run_jobs_locked(&one, 1, c->u.mm.x, c->op == BP_OP_GEMM ? c->u.mm.t : 1);
    pthread_mutex_unlock(&cl_run_lock);
    if (s == BP_OK) return BP_LAUNCH_OK;
    snprintf(err, err_len, "%s", bp_last_error());
    return bp_launch_of_status(s);
}

/* The device's class (PoCL's CPU device is a CPU implementation: not enabled unless forced)
 * and its cost model (src/backend/cost.c). */
static bool cl_describe(bp_device_desc *out) {
    if (!bp_cl_device(NULL, 0)) return false;
    const bool cpu = (cl_ctx.type & CL_DEVICE_TYPE_CPU) != 0;
    out->cls = cpu ? BP_DEVICE_CPU_IMPL : BP_DEVICE_ACCELERATOR;
    snprintf(out->name, sizeof out->name, "%.95s", cl_ctx.name);
    bp_cost_default(BP_BACKEND_OPENCL, out->cls, cl_ctx.unified, &out->cost);
    return true;
}

const bp_backend_dispatch bp_dispatch_opencl = {
    .probe = cl_probe,
    .has_launch = cl_has_launch,
    .wants = NULL,
    .launch = cl_launch,
    .describe = cl_describe,
    .step_bytes = cl_step_bytes,
};
