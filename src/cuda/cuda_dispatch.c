/* The CUDA backend's dispatch table (bp_dispatch_cuda): probe, the device-free launch table,
 * and the launch of matvec, GEMM and matmul jobs (one upload of the jobs' shared input). UNRUN ON HARDWARE until tools/gpu_check.sh runs on a GPU.
 *
 * Without a GPU or driver the binary still starts (cudart is linked statically and dlopens
 * libcuda.so.1 at the first call); the probe then reports cudaGetDeviceCount's error code
 * and text and the seam moves on to the next backend.
 *
 * One lock serializes every CUDA op of the process: the op cache's scratch slots are not for
 * concurrent users, and a weight's first upload must happen once. BACKPLANE_CUDA_DEVICE picks
 * the device by index; every thread that launches selects it (cudaSetDevice is per thread).
 * A sticky error (illegal address, launch failure, ...) disables the backend for the process.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "gpu/gpu_step.h"
#include "kinds/kinds_internal.h"

#ifndef BP_CUDA_MIN_CC
#define BP_CUDA_MIN_CC 75 /* set by src/cuda/backend.cmake from the build's targets */
#endif
#ifndef BP_CUDA_TARGETS
#define BP_CUDA_TARGETS "compute_75 PTX + sm_80 SASS + sm_90 SASS"
#endif

/* BACKPLANE_CUDA_DEVICE: the device index (default 0); -1 with why written when it is not one. */
static int device_index(char *why, size_t why_len) {
    const char *v = getenv("BACKPLANE_CUDA_DEVICE");
    if (!v || !*v) return 0;
    char *end;
    long i = strtol(v, &end, 10);
    if (*end || i < 0 || i > 1024) {
        snprintf(why, why_len, "BACKPLANE_CUDA_DEVICE=%s is not a device index (0, 1, ...)", v);
        return -1;
    }
    return (int)i;
}

bool bp_cu_probe(char *why, size_t why_len) {
    int n = 0; /* cudaGetDeviceCount leaves it unchanged on failure (TOOLCHAINS.md) */
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, why_len, "CUDA unavailable: cudaGetDeviceCount -> %d %s (%s)", (int)e, cudaGetErrorName(e),
                 cudaGetErrorString(e));
        return false;
    }
    if (n <= 0) {
        snprintf(why, why_len, "CUDA unavailable: cudaGetDeviceCount -> 0 devices");
        return false;
    }
    const int dev = device_index(why, why_len);
    if (dev < 0) return false;
    if (dev >= n) {
        snprintf(why, why_len, "CUDA unavailable: BACKPLANE_CUDA_DEVICE=%d but there %s %d CUDA device%s", dev,
                 n == 1 ? "is" : "are", n, n == 1 ? "" : "s");
        return false;
    }
    struct cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, why_len, "CUDA unavailable: cudaGetDeviceProperties(%d) -> %d %s", dev, (int)e,
                 cudaGetErrorName(e));
        return false;
    }
    /* The build runs on compute capability >= BP_CUDA_MIN_CC (SASS where built, the PTX JIT-
     * compiled elsewhere; src/cuda/backend.cmake lists which GPUs that covers). */
    if (p.major * 10 + p.minor < BP_CUDA_MIN_CC) {
        snprintf(why, why_len, "CUDA unavailable: device %d, %s, is sm_%d%d; this build has %s (compute capability >= %d.%d)",
                 dev, p.name, p.major, p.minor, BP_CUDA_TARGETS, BP_CUDA_MIN_CC / 10, BP_CUDA_MIN_CC % 10);
        return false;
    }
    snprintf(why, why_len, "device %d: %s (sm_%d%d, %d SMs, %.0f GiB); CUDA kernels UNRUN ON HARDWARE before tools/gpu_check.sh",
             dev, p.name, p.major, p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024 * 1024));
    return true;
}

bool bp_cu_error_is_sticky(int code) {
    /* The errors after which the CUDA context is corrupt and every later call of the process
     * fails with the same code (cudaErrorLaunchOutOfResources, 701, and the like are not). */
    switch ((cudaError_t)code) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed: return true;
    default: return false;
    }
}

static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;
static bp_device *cu_dev;
static bp_stream *cu_stream;
static bp_stream *cu_upload; /* the step's weight uploads, overlapping the first step's setup */
static int cu_ordinal;
static bool cu_tried;
static char cu_open_error[256];
/* Set after a sticky error (bp_cu_error_is_sticky): the context is dead for the process, so
 * every later op fails fast with this cause (and the seam, seeing BP_LAUNCH_LOST, disables the
 * backend) instead of each kind failing with a misplaced blame. */
static char cu_lost[300];

/* cudaSetDevice is per thread: every thread that calls cudart for this device selects it first
 * (cheap when already current). */
static bp_status select_device(void) {
    cudaError_t e = cudaSetDevice(cu_ordinal);
    return e == cudaSuccess ? BP_OK : bp_cu_status(e, "cudaSetDevice");
}

static bp_status open_locked(void) {
    if (cu_dev) return select_device();
    if (cu_tried) return bp_fail(BP_E_UNSUPPORTED, "%s", cu_open_error);
    cu_tried = true;
    char why[256], name[32];
    bp_status s;
    if (!bp_cu_probe(why, sizeof why)) {
        s = bp_fail(BP_E_UNSUPPORTED, "%s", why);
    } else {
        cu_ordinal = device_index(why, sizeof why);
        snprintf(name, sizeof name, "cuda:%d", cu_ordinal);
        if ((s = select_device()) == BP_OK && (s = bp_device_open(&bp_cu_device_methods, &cu_ordinal, name, &cu_dev)) == BP_OK &&
            ((s = bp_dev_stream_create(cu_dev, &cu_stream)) != BP_OK ||
             (s = bp_dev_stream_create(cu_dev, &cu_upload)) != BP_OK)) {
            bp_dev_stream_destroy(cu_dev, cu_stream);
            cu_stream = NULL;
            bp_device_close(cu_dev);
            cu_dev = NULL;
        }
    }
    if (s) snprintf(cu_open_error, sizeof cu_open_error, "%s", bp_last_error());
    /* Out of memory while opening (the device's common state, the stream) is retried at the
     * next use, as Vulkan and OpenCL do: a transient failure must not take CUDA away for the
     * process (the cold allocation-failure campaign found that pattern in those two; unrun
     * here, no GPU). */
    if (s == BP_E_NOMEM) cu_tried = false;
    return s;
}

bp_status bp_cu_device(bp_device **dev, bp_stream **stream) {
    pthread_mutex_lock(&cu_lock);
    bp_status s = open_locked();
    pthread_mutex_unlock(&cu_lock);
    if (s == BP_OK) {
        *dev = cu_dev;
        *stream = cu_stream;
    }
    return s;
}

/* The device copy of a weight: rows padded to a 16-byte pitch (the kernels' vector loads). */
typedef struct cu_weight {
    bp_device *dev;
    void *buf;
    size_t pitch;
} cu_weight;

static void cu_weight_free(void *p) {
    cu_weight *cw = p;
    pthread_mutex_lock(&cu_lock);
    (void)bp_dev_bind_to_thread(cw->dev); /* a weight may be freed on a thread that never ran an op */
    bp_dev_free(cw->dev, cw->buf);
    pthread_mutex_unlock(&cu_lock);
    bp_free(cw);
}

static bp_status upload_locked(bp_weight *w, cu_weight **out) {
    cu_weight *cw = w->backend_state[BP_BACKEND_CUDA];
    if (cw) {
        *out = cw;
        return BP_OK;
    }
    const size_t pitch = (w->row_bytes + 15) & ~(size_t)15;
    size_t bytes;
    /* + 16: the kernels' unaligned u32 reads (bp_cu_u32) may read up to 4 bytes past a row. */
    if (!bp_mul_size(pitch, (size_t)w->rows, &bytes) || !bp_add_size(bytes, 16, &bytes))
        return bp_fail(BP_E_SHAPE, "CUDA upload: %lld rows of %zu bytes overflow", (long long)w->rows, pitch);
    cw = bp_calloc(1, sizeof *cw);
    if (!cw) return bp_fail(BP_E_NOMEM, "CUDA upload: no memory");
    cw->dev = cu_dev;
    cw->pitch = pitch;
    bp_status s = bp_dev_alloc(cu_dev, bytes, &cw->buf);
    if (!s) s = bp_dev_memset_on(cu_dev, cu_stream, cw->buf, 0, 0, bytes); /* defined padding */
    if (!s)
        s = bp_dev_copy_2d(cu_dev, cu_stream, BP_COPY_H2D, cw->buf, 0, pitch, w->data, 0, w->row_bytes, w->row_bytes,
                           (size_t)w->rows);
    if (!s) s = bp_dev_stream_sync(cu_dev, cu_stream);
    if (s) {
        if (cw->buf) bp_dev_free(cu_dev, cw->buf);
        bp_free(cw);
        return s;
    }
    w->backend_state[BP_BACKEND_CUDA] = cw;
    w->backend_free[BP_BACKEND_CUDA] = cu_weight_free;
    *out = cw;
    return BP_OK;
}

static bp_status launch(const char *name, const bp_launch_dims *dims, void **params, int n) {
    bp_kernel *k;
    bp_status s = bp_dev_kernel(cu_dev, name, &k);
    return s ? s : bp_dev_launch_raw(cu_dev, cu_stream, k, dims, params, n);
}

/* Exact mode (bp_exact_mode: BACKPLANE_EXACT or bp_set_exact_mode) keeps prefill off the f16
 * tensor cores (weights and activations rounded to f16, activations above 65504 overflow) and
 * on the f32 kernels. The decode kernels are unaffected (q8 activations, f32 accumulation).
 * Outside exact mode an f16 overflow is detected by the tensor-core kernel (*ovf) and the op
 * reruns on the exact kernel: the f16 path never returns inf/NaN as success. */

/* The GEMM in slices of at most BP_CU_GEMM_MAX_T tokens (gridDim.y <= 65535); *ovf (device) is
 * set by a tensor-core kernel on f16 overflow. */
static bp_status gemm_launches(const char *name, const void *wp, size_t pitch, int rows, int cols, void *xb, int t,
                               void *yb, void *ovf) {
    const int slices = bp_cu_gemm_slices(t, BP_CU_GEMM_MAX_T);
    for (int i = 0; i < slices; i++) {
        int t0 = i * BP_CU_GEMM_MAX_T, tt = t - t0 < BP_CU_GEMM_MAX_T ? t - t0 : BP_CU_GEMM_MAX_T;
        void *xs = (char *)xb + (size_t)t0 * (size_t)cols * sizeof(float);
        void *ys = (char *)yb + (size_t)t0 * (size_t)rows * sizeof(float);
        bp_launch_dims gd = {{(uint32_t)((rows + BP_CU_GEMM_TILE - 1) / BP_CU_GEMM_TILE),
                              (uint32_t)((tt + BP_CU_GEMM_TILE - 1) / BP_CU_GEMM_TILE), 1},
                             {BP_CU_GEMM_THREADS, 1, 1}, 0};
        void *gp[] = {(void *)&wp, &pitch, &rows, &cols, &xs, &tt, &ys, &ovf};
        bp_status s = launch(name, &gd, gp, 8);
        if (s) return s;
    }
    return BP_OK;
}

/* Every job's Y = X W^T for the same X[t][cols]; t == 1 runs the decode kernels. X is uploaded
 * (and, for decode, quantized to q8) once for all the jobs; decode queues every job's kernel
 * and read-back on the stream with one sync at the end (the stream is in order, so the jobs
 * share the output scratch). A GEMM job syncs to read its f16-overflow flag. Called under
 * cu_lock. */
static bp_status run_jobs_locked(const bp_matmul_job *jobs, int n, const float *x, int64_t t) {
    bp_status s = open_locked();
    if (s) return s;
    const int64_t cols64 = jobs[0].w->cols;
    bool any_quant = false;
    int64_t rows_max = 0;
    for (int j = 0; j < n; j++) {
        const bp_weight *w = jobs[j].w;
        const bp_kind_traits *kt = w->traits;
        if (w->rows > INT32_MAX || w->cols > INT32_MAX || t > INT32_MAX / 64 || t < 1)
            return bp_fail(BP_E_SHAPE, "CUDA %s: %lld x %lld, t=%lld exceeds the kernels' int range", kt->info.name,
                           (long long)w->rows, (long long)w->cols, (long long)t);
        any_quant = any_quant || kt->info.block_elems > 1;
        if (w->rows > rows_max) rows_max = w->rows;
    }
    int cols = (int)cols64, tt = (int)t;
    int nch = cols / 32;
    size_t xbytes = (size_t)t * (size_t)cols * sizeof(float), ymax = (size_t)t * (size_t)rows_max * sizeof(float);
    void *xb, *yb, *xqb = NULL, *ovf = NULL;
    if ((s = bp_dev_scratch(cu_dev, 0, xbytes, &xb)) || (s = bp_dev_scratch(cu_dev, 2, ymax, &yb))) return s;
    if ((s = bp_dev_h2d_on(cu_dev, cu_stream, xb, 0, x, xbytes))) return s;
    if (t == 1 && any_quant) {
        if ((s = bp_dev_scratch(cu_dev, 1, (size_t)nch * BP_CU_XQ_BYTES, &xqb))) return s;
        bp_launch_dims qd = {{(uint32_t)((nch + 3) / 4), 1, 1}, {BP_CU_QUANT_THREADS, 1, 1}, 0};
        void *qp[] = {&xb, &xqb, &nch};
        if ((s = launch("quantize_q8", &qd, qp, 3))) return s;
    }
    for (int j = 0; j < n; j++) {
        bp_weight *w = jobs[j].w;
        float *y = jobs[j].y;
        const bp_kind_traits *kt = w->traits;
        cu_weight *cw = NULL;
        if ((s = upload_locked(w, &cw))) return s;
        int rows = (int)w->rows;
        size_t ybytes = (size_t)t * (size_t)rows * sizeof(float);
        char name[48];
        const void *wp = cw->buf;
        size_t pitch = cw->pitch;
        if (t == 1) {
            bp_launch_dims md = {{(uint32_t)((rows + BP_CU_MV_ROWS - 1) / BP_CU_MV_ROWS), 1, 1}, {BP_CU_MV_THREADS, 1, 1}, 0};
            void *mp[] = {&wp, &pitch, &rows, &cols, &xb, &xqb, &yb};
            snprintf(name, sizeof name, "matvec_%s", kt->info.name);
            if ((s = launch(name, &md, mp, 7))) return s;
            if ((s = bp_dev_d2h_on(cu_dev, cu_stream, y, yb, 0, ybytes))) return s;
            continue;
        }
        const bool exact = bp_exact_mode();
        unsigned flag = 0;
        if ((s = bp_dev_scratch(cu_dev, 3, sizeof(unsigned), &ovf)) ||
            (s = bp_dev_memset_on(cu_dev, cu_stream, ovf, 0, 0, sizeof(unsigned))))
            return s;
        snprintf(name, sizeof name, exact ? "gemm_exact_%s" : "gemm_%s", kt->info.name);
        if ((s = gemm_launches(name, wp, pitch, rows, cols, xb, tt, yb, ovf))) return s;
        /* The flag comes back with the result: one sync in the common case. */
        if ((s = bp_dev_d2h_on(cu_dev, cu_stream, &flag, ovf, 0, sizeof flag)) ||
            (s = bp_dev_d2h_on(cu_dev, cu_stream, y, yb, 0, ybytes)) || (s = bp_dev_stream_sync(cu_dev, cu_stream)))
            return s;
        if (exact || !flag) continue;
        /* f16 overflowed somewhere: the exact kernel gives the right numbers. */
        snprintf(name, sizeof name, "gemm_exact_%s", kt->info.name);
        if ((s = gemm_launches(name, wp, pitch, rows, cols, xb, tt, yb, ovf))) return s;
        if ((s = bp_dev_d2h_on(cu_dev, cu_stream, y, yb, 0, ybytes)) || (s = bp_dev_stream_sync(cu_dev, cu_stream)))
            return s;
    }
    return bp_dev_stream_sync(cu_dev, cu_stream);
}

/* The device step's kernels (cuda_step.cu) for a weight kind, or for a KV kind and the shared ones. */
static bool cu_has_step_weight(bp_kind k) {
    const char *kn = bp_kind_traits_of(k)->info.name;
    char a[48], b[48], e[48];
    snprintf(a, sizeof a, "step_matvec_%s", kn);
    snprintf(b, sizeof b, "step_gemm_%s", kn);
    snprintf(e, sizeof e, "step_embed_%s", kn);
    return bp_cu_kernel_find(a) && bp_cu_kernel_find(b) && bp_cu_kernel_find(e);
}

static bool cu_has_named(const char *name) { return bp_cu_kernel_find(name) != NULL; }
static bool cu_has_step(bp_kind kv) { return bp_gpu_step_has_kernels(kv, "step_", cu_has_named); }

/* The whole step (src/gpu/gpu_step.c) on the device's stream: recorded once per shape by stream
 * capture into a CUDA graph, replayed per step (one cudaGraphLaunch). Under cu_lock. */
/* the kernels index buffers with 32-bit element offsets: bindings of at most 2 GiB */
static bp_gpu_backend cu_step_backend(void) {
    return (bp_gpu_backend){.id = BP_BACKEND_CUDA, .name = "cuda", .display = "CUDA", .max_binding = (size_t)1 << 31,
                            .mm_tile = 16, .mv_rows = 2, .kprefix = "step_", .stream = cu_stream, .upload = cu_upload};
}

static bp_status cu_step_bytes(const bp_step_prog *p, bp_step_bytes *out) {
    const bp_gpu_backend b = cu_step_backend();
    return bp_gpu_step_bytes(&b, p, out);
}

static bp_status run_step_locked(const bp_op_call *c) {
    bp_status s = open_locked();
    if (s) return s;
    const bp_gpu_backend b = cu_step_backend();
    char label[160]; /* the walk's record names the claim; the label is not kept */
    s = bp_gpu_step_check_weights(&b, c->u.step.prog, cu_has_step_weight);
    return s ? s : bp_gpu_step_run(&b, cu_dev, c, label, sizeof label);
}

static bool cu_has_launch(bp_op op, bp_kind k) {
    if (op == BP_OP_STEP) return cu_has_step(k);
    const bp_kind_traits *t = bp_kind_traits_of(k);
    if (!t || t->info.role != BP_ROLE_W) return false;
    char name[48];
    if (op == BP_OP_MATVEC) snprintf(name, sizeof name, "matvec_%s", t->info.name);
    else if (op == BP_OP_GEMM || op == BP_OP_JOBS) snprintf(name, sizeof name, "gemm_%s", t->info.name);
    else return false;
    return bp_cu_kernel_find(name) != NULL && (op == BP_OP_MATVEC || cu_has_launch(BP_OP_MATVEC, k));
}

static bp_launch cu_launch(const bp_op_call *c, char *err, size_t err_len) {
    bp_kind kinds[16];
    const int nk = bp_op_call_kinds(c, kinds, 16);
    for (int i = 0; i < nk; i++)
        if (!cu_has_launch(c->op, kinds[i])) return BP_LAUNCH_NO_KERNEL;
    const bool mm = c->op == BP_OP_MATVEC || c->op == BP_OP_GEMM;
    const bp_matmul_job one = {mm ? c->u.mm.w : NULL, mm ? c->u.mm.y : NULL};
    const bp_matmul_job *jobs = c->op == BP_OP_JOBS ? c->u.jobs.jobs : &one;
    const int n = c->op == BP_OP_JOBS ? c->u.jobs.n_jobs : 1;
    const float *x = c->op == BP_OP_JOBS ? c->u.jobs.x : mm ? c->u.mm.x : NULL;
    const int64_t t = c->op == BP_OP_JOBS ? c->u.jobs.t : mm ? c->u.mm.t : 0;
    pthread_mutex_lock(&cu_lock);
    if (cu_lost[0]) {
        snprintf(err, err_len, "%s", cu_lost);
        pthread_mutex_unlock(&cu_lock);
        return BP_LAUNCH_LOST;
    }
    bp_status s = c->op == BP_OP_STEP ? run_step_locked(c) : n > 0 ? run_jobs_locked(jobs, n, x, t) : BP_OK;
    if (s && cu_dev) bp_dev_graph_abort(cu_dev, cu_stream); /* never leave the stream capturing */
    if (s == BP_E_DEVICE_LOST)
        snprintf(cu_lost, sizeof cu_lost, "CUDA context lost after a sticky error: %.240s", bp_last_error());
    pthread_mutex_unlock(&cu_lock);
    if (s == BP_OK) return BP_LAUNCH_OK;
    snprintf(err, err_len, "%s", s == BP_E_DEVICE_LOST ? cu_lost : bp_last_error());
    return bp_launch_of_status(s);
}

/* An accelerator; its cost model (src/backend/cost.c) with the memory bandwidth the device's
 * attributes give (clock x bus width x 2 for DDR, x 0.8 achievable), where cudart reports them. */
static bool cu_describe(bp_device_desc *out) {
    pthread_mutex_lock(&cu_lock);
    bp_status s = open_locked();
    int ord = cu_ordinal;
    pthread_mutex_unlock(&cu_lock);
    if (s) return false;
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, ord) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    out->cls = BP_DEVICE_ACCELERATOR;
    snprintf(out->name, sizeof out->name, "%.64s (sm_%d%d, %d SMs)", p.name, p.major, p.minor, p.multiProcessorCount);
    bp_cost_default(BP_BACKEND_CUDA, BP_DEVICE_ACCELERATOR, p.integrated != 0, &out->cost);
    int khz = 0, bits = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, ord) == cudaSuccess &&
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, ord) == cudaSuccess && khz > 0 && bits > 0)
        out->cost.mem_gbps = 0.8 * 2.0 * (double)khz * 1e3 * (double)bits / 8.0 / 1e9;
    else
        (void)cudaGetLastError();
    return true;
}

const bp_backend_dispatch bp_dispatch_cuda = {
    .probe = bp_cu_probe,
    .has_launch = cu_has_launch,
    .wants = NULL,
    .launch = cu_launch,
    .describe = cu_describe,
    .step_bytes = cu_step_bytes,
};
