/* The device interface (include/backplane_device.h, version 3) over the CUDA runtime. UNRUN ON HARDWARE: compiled
 * and linked against static cudart on a machine without a GPU; the first run on a GPU is
 * tools/gpu_check.sh.
 *
 * Handles are device addresses (cudaMalloc), so the common code's default typed launch (a
 * buffer argument becomes buf + offset) is right for CUDA and `launch` is left NULL.
 * bp_stream * is a cudaStream_t; NULL is the legacy default stream. Every cudart error becomes
 * BP_E_DEVICE (BP_E_NOMEM for cudaErrorMemoryAllocation) with the call, its size and the
 * error's name and text, and is cleared from cudart's sticky "last error" so the next call
 * does not report it again.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/cuda_kernels.h"

#define CS(s) ((cudaStream_t)(void *)(s))

bp_status bp_cu_status(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return BP_OK;
    (void)cudaGetLastError(); /* clear a non-sticky error so it is reported once */
    if (bp_cu_error_is_sticky((int)e))
        return bp_fail(BP_E_DEVICE_LOST, "%s: %s (%d): %s (sticky: the CUDA context is unusable for the rest of the process)",
                       what, cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
    return bp_fail(e == cudaErrorMemoryAllocation ? BP_E_NOMEM : BP_E_DEVICE, "%s: %s (%d): %s", what,
                   cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

#define CU_TRY(call, ...)                                                                       \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            char what_[160];                                                                    \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                         \
            return bp_cu_status(e_, what_);                                                     \
        }                                                                                       \
    } while (0)

/* cudaMemcpy from pageable memory, device-to-device cudaMemcpy and cudaMemset may return
 * before the device has finished (CUDA's "API synchronization behavior"); the interface's
 * blocking members promise completion, and work queued next on a non-blocking stream would not
 * wait for the legacy stream. So the blocking forms end with a legacy-stream sync. */
static bp_status legacy_sync(const char *after) {
    cudaError_t e = cudaStreamSynchronize(0);
    if (e == cudaSuccess) return BP_OK;
    char what[96];
    snprintf(what, sizeof what, "cudaStreamSynchronize after %s", after);
    return bp_cu_status(e, what);
}

static bp_status cu_alloc(bp_device *dev, size_t bytes, void **buf) {
    (void)dev;
    *buf = NULL;
    CU_TRY(cudaMalloc(buf, bytes), "cudaMalloc(%zu bytes)", bytes);
    return BP_OK;
}

static bp_status cu_alloc_managed(bp_device *dev, size_t bytes, void **buf) {
    (void)dev;
    *buf = NULL;
    CU_TRY(cudaMallocManaged(buf, bytes, cudaMemAttachGlobal), "cudaMallocManaged(%zu bytes)", bytes);
    return BP_OK;
}

static void cu_free(bp_device *dev, void *buf) {
    cudaError_t e = cudaFree(buf);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "backplane: %s: cudaFree(%p): %s\n", dev->name, buf, cudaGetErrorString(e));
    }
}

static bp_status cu_h2d(bp_device *dev, void *dst, size_t off, const void *src, size_t n) {
    (void)dev;
    CU_TRY(cudaMemcpy((char *)dst + off, src, n, cudaMemcpyHostToDevice), "cudaMemcpy h2d (%zu bytes)", n);
    return legacy_sync("cudaMemcpy h2d");
}

static bp_status cu_d2h(bp_device *dev, void *dst, const void *src, size_t off, size_t n) {
    (void)dev;
    CU_TRY(cudaMemcpy(dst, (const char *)src + off, n, cudaMemcpyDeviceToHost), "cudaMemcpy d2h (%zu bytes)", n);
    return BP_OK;
}

static bp_status cu_d2d(bp_device *dev, void *dst, size_t doff, const void *src, size_t soff, size_t n) {
    (void)dev;
    CU_TRY(cudaMemcpy((char *)dst + doff, (const char *)src + soff, n, cudaMemcpyDeviceToDevice),
           "cudaMemcpy d2d (%zu bytes)", n);
    return legacy_sync("cudaMemcpy d2d");
}

static bp_status cu_h2d_async(bp_device *dev, bp_stream *s, void *dst, size_t off, const void *src, size_t n) {
    (void)dev;
    CU_TRY(cudaMemcpyAsync((char *)dst + off, src, n, cudaMemcpyHostToDevice, CS(s)), "cudaMemcpyAsync h2d (%zu bytes)", n);
    return BP_OK;
}

static bp_status cu_d2h_async(bp_device *dev, bp_stream *s, void *dst, const void *src, size_t off, size_t n) {
    (void)dev;
    CU_TRY(cudaMemcpyAsync(dst, (const char *)src + off, n, cudaMemcpyDeviceToHost, CS(s)),
           "cudaMemcpyAsync d2h (%zu bytes)", n);
    return BP_OK;
}

static bp_status cu_d2d_async(bp_device *dev, bp_stream *s, void *dst, size_t doff, const void *src, size_t soff,
                              size_t n) {
    (void)dev;
    CU_TRY(cudaMemcpyAsync((char *)dst + doff, (const char *)src + soff, n, cudaMemcpyDeviceToDevice, CS(s)),
           "cudaMemcpyAsync d2d (%zu bytes)", n);
    return BP_OK;
}

/* Retained source: the release runs on cudart's host-callback thread once the copy before it
 * on the stream is done. cudart forbids CUDA calls inside it; a release only frees host memory. */
typedef struct retained {
    bp_release_fn release;
    void *ctx;
} retained;

static void CUDART_CB retained_done(void *p) {
    retained *r = p;
    r->release(r->ctx);
    bp_free(r);
}

static bp_status cu_h2d_retained(bp_device *dev, bp_stream *s, void *dst, size_t off, const void *src, size_t n,
                                 bp_release_fn release, void *ctx) {
    retained *r = bp_malloc(sizeof *r);
    bp_status st = r ? cu_h2d_async(dev, s, dst, off, src, n) : bp_fail(BP_E_NOMEM, "h2d_retained: no memory");
    if (st == BP_OK) {
        r->release = release;
        r->ctx = ctx;
        cudaError_t e = cudaLaunchHostFunc(CS(s), retained_done, r);
        if (e == cudaSuccess) return BP_OK;
        st = bp_cu_status(e, "cudaLaunchHostFunc (retained copy release)");
    }
    /* The contract: release exactly once, also on failure -- after the copy can no longer
     * read the source. */
    (void)cudaStreamSynchronize(CS(s));
    (void)cudaGetLastError();
    bp_free(r);
    release(ctx);
    return st;
}

static bp_status cu_copy_2d(bp_device *dev, bp_stream *s, int dir, void *dst, size_t doff, size_t dpitch,
                            const void *src, size_t soff, size_t spitch, size_t width, size_t height) {
    (void)dev;
    static const enum cudaMemcpyKind kinds[3] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                                 cudaMemcpyDeviceToDevice};
    if (dir < 0 || dir > 2) return bp_fail(BP_E_INVAL, "copy_2d: direction %d", dir);
    CU_TRY(cudaMemcpy2DAsync((char *)dst + doff, dpitch, (const char *)src + soff, spitch, width, height, kinds[dir],
                             CS(s)),
           "cudaMemcpy2DAsync (%zu x %zu bytes, dir %d)", height, width, dir);
    return BP_OK;
}

static bp_status cu_memset(bp_device *dev, void *dst, size_t off, int value, size_t n) {
    (void)dev;
    CU_TRY(cudaMemset((char *)dst + off, value, n), "cudaMemset (%zu bytes)", n);
    return legacy_sync("cudaMemset");
}

static bp_status cu_memset_async(bp_device *dev, bp_stream *s, void *dst, size_t off, int value, size_t n) {
    (void)dev;
    CU_TRY(cudaMemsetAsync((char *)dst + off, value, n, CS(s)), "cudaMemsetAsync (%zu bytes)", n);
    return BP_OK;
}

/* ---- kernels: the registry the .cu files export ------------------------------------------ */

const bp_cu_kernel_entry *bp_cu_kernel_find(const char *name) {
    const bp_cu_kernel_entry *tables[4] = {bp_cu_matvec_kernels, bp_cu_gemm_kernels, bp_cu_gemm_exact_kernels,
                                           bp_cu_step_kernels};
    for (int t = 0; t < 4; t++)
        for (const bp_cu_kernel_entry *e = tables[t]; e->name; e++)
            if (strcmp(e->name, name) == 0) return e;
    return NULL;
}

static bp_status cu_kernel_lookup(bp_device *dev, const char *name, bp_kernel **out) {
    const bp_cu_kernel_entry *e = bp_cu_kernel_find(name);
    if (!e) return bp_fail(BP_E_NOT_FOUND, "%s: no CUDA kernel called '%s' in this build", dev->name, name);
    *out = (bp_kernel *)(void *)(uintptr_t)e; /* the entry is the handle; never written */
    return BP_OK;
}

static bp_status cu_launch_raw(bp_device *dev, bp_stream *s, bp_kernel *k, const bp_launch_dims *d, void **params,
                               int nparams) {
    (void)nparams;
    const bp_cu_kernel_entry *e = (const bp_cu_kernel_entry *)(const void *)k;
    dim3 grid = {d->grid[0] ? d->grid[0] : 1, d->grid[1] ? d->grid[1] : 1, d->grid[2] ? d->grid[2] : 1};
    dim3 block = {d->block[0] ? d->block[0] : 1, d->block[1] ? d->block[1] : 1, d->block[2] ? d->block[2] : 1};
    CU_TRY(cudaLaunchKernel(e->func, grid, block, params, d->shared_bytes, CS(s)), "%s: launch %s (grid %ux%u, block %u)",
           dev->name, e->name, grid.x, grid.y, block.x);
    return BP_OK;
}

/* ---- streams, events, graphs ------------------------------------------------------------- */

static bp_status cu_stream_create(bp_device *dev, bp_stream **out) {
    (void)dev;
    cudaStream_t st;
    CU_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    *out = (bp_stream *)(void *)st;
    return BP_OK;
}

static void cu_stream_destroy(bp_device *dev, bp_stream *s) {
    (void)dev;
    if (s && cudaStreamDestroy(CS(s)) != cudaSuccess) (void)cudaGetLastError();
}

static bp_status cu_stream_sync(bp_device *dev, bp_stream *s) {
    (void)dev;
    CU_TRY(cudaStreamSynchronize(CS(s)), "cudaStreamSynchronize");
    return BP_OK;
}

static bp_status cu_device_sync(bp_device *dev) {
    (void)dev;
    CU_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return BP_OK;
}

static bp_status cu_event_create(bp_device *dev, bp_event **out) {
    (void)dev;
    cudaEvent_t ev;
    CU_TRY(cudaEventCreate(&ev), "cudaEventCreate");
    *out = (bp_event *)(void *)ev;
    return BP_OK;
}

static void cu_event_destroy(bp_device *dev, bp_event *e) {
    (void)dev;
    if (e && cudaEventDestroy((cudaEvent_t)(void *)e) != cudaSuccess) (void)cudaGetLastError();
}

static bp_status cu_event_record(bp_device *dev, bp_event *e, bp_stream *s) {
    (void)dev;
    CU_TRY(cudaEventRecord((cudaEvent_t)(void *)e, CS(s)), "cudaEventRecord");
    return BP_OK;
}

static bp_status cu_event_wait(bp_device *dev, bp_stream *s, bp_event *e) {
    (void)dev;
    CU_TRY(cudaStreamWaitEvent(CS(s), (cudaEvent_t)(void *)e, 0), "cudaStreamWaitEvent");
    return BP_OK;
}

static bp_status cu_event_sync(bp_device *dev, bp_event *e) {
    (void)dev;
    CU_TRY(cudaEventSynchronize((cudaEvent_t)(void *)e), "cudaEventSynchronize");
    return BP_OK;
}

static bp_status cu_event_elapsed(bp_device *dev, bp_event *a, bp_event *b, float *ms) {
    (void)dev;
    CU_TRY(cudaEventElapsedTime(ms, (cudaEvent_t)(void *)a, (cudaEvent_t)(void *)b), "cudaEventElapsedTime");
    return BP_OK;
}

typedef struct cu_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
} cu_graph;

static bp_status cu_graph_begin(bp_device *dev, bp_stream *s) {
    /* The legacy default stream cannot be captured (cudaErrorStreamCaptureUnsupported). */
    if (!s) return bp_fail(BP_E_INVAL, "%s: graph capture needs a created stream, not the default one", dev->name);
    CU_TRY(cudaStreamBeginCapture(CS(s), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    return BP_OK;
}

static bp_status cu_graph_end(bp_device *dev, bp_stream *s, bp_graph **out) {
    (void)dev;
    cu_graph *g = bp_calloc(1, sizeof *g);
    if (!g) return bp_fail(BP_E_NOMEM, "graph_end: no memory");
    cudaError_t e = cudaStreamEndCapture(CS(s), &g->graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&g->exec, g->graph, 0);
    if (e != cudaSuccess) {
        if (g->graph) (void)cudaGraphDestroy(g->graph);
        bp_free(g);
        return bp_cu_status(e, "cudaStreamEndCapture / cudaGraphInstantiate");
    }
    *out = (bp_graph *)(void *)g;
    return BP_OK;
}

static bp_status cu_graph_replay(bp_device *dev, bp_graph *gp, bp_stream *s) {
    (void)dev;
    cu_graph *g = (cu_graph *)(void *)gp;
    CU_TRY(cudaGraphLaunch(g->exec, CS(s)), "cudaGraphLaunch");
    return BP_OK;
}

static void cu_graph_destroy(bp_device *dev, bp_graph *gp) {
    (void)dev;
    cu_graph *g = (cu_graph *)(void *)gp;
    if (!g) return;
    if (g->exec) (void)cudaGraphExecDestroy(g->exec);
    if (g->graph) (void)cudaGraphDestroy(g->graph);
    bp_free(g);
}

/* A new capture of the same topology (a prefill of another length: the same kernels, other
 * grids and arguments) updates the instantiated graph in place; cudaGraphExecUpdate refuses
 * another topology, and then the capture is instantiated anew. UNRUN ON HARDWARE. */
static bp_status cu_graph_update(bp_device *dev, bp_stream *s, bp_graph **gp, bool *updated) {
    (void)dev;
    cu_graph *g = (cu_graph *)(void *)*gp;
    cudaGraph_t ng = NULL;
    CU_TRY(cudaStreamEndCapture(CS(s), &ng), "cudaStreamEndCapture");
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    if (cudaGraphExecUpdate(g->exec, ng, &info) == cudaSuccess) {
        (void)cudaGraphDestroy(g->graph);
        g->graph = ng;
        *updated = true;
        return BP_OK;
    }
    (void)cudaGetLastError(); /* not an error: the topology changed */
    cudaGraphExec_t nx = NULL;
    cudaError_t e = cudaGraphInstantiate(&nx, ng, 0);
    if (e != cudaSuccess) {
        (void)cudaGraphDestroy(ng);
        return bp_cu_status(e, "cudaGraphInstantiate (after a topology change)");
    }
    (void)cudaGraphExecDestroy(g->exec);
    (void)cudaGraphDestroy(g->graph);
    g->exec = nx, g->graph = ng;
    *updated = false;
    return BP_OK;
}

static bool cu_stream_is_capturing(bp_device *dev, bp_stream *s) {
    (void)dev;
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(CS(s), &st) != cudaSuccess) (void)cudaGetLastError();
    return st != cudaStreamCaptureStatusNone;
}

/* End and discard a capture, whether it is still active or already invalidated by an illegal
 * call; otherwise every later call on the stream fails with a confusing capture error. */
static void cu_graph_abort(bp_device *dev, bp_stream *s) {
    if (!cu_stream_is_capturing(dev, s)) return;
    cudaGraph_t g = NULL;
    (void)cudaStreamEndCapture(CS(s), &g);
    if (g) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
}

/* ---- properties, pinned memory, arenas --------------------------------------------------- */

static bp_status cu_mem_info(bp_device *dev, size_t *total, size_t *free_bytes) {
    (void)dev;
    CU_TRY(cudaMemGetInfo(free_bytes, total), "cudaMemGetInfo");
    return BP_OK;
}

static int cu_compute_units(bp_device *dev) {
    (void)dev;
    int n = 1, ord = 0;
    if (cudaGetDevice(&ord) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, ord) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return n;
}

static bp_status cu_host_alloc_pinned(bp_device *dev, size_t bytes, void **out) {
    (void)dev;
    *out = NULL;
    CU_TRY(cudaMallocHost(out, bytes), "cudaMallocHost(%zu bytes)", bytes);
    return BP_OK;
}

static void cu_host_free_pinned(bp_device *dev, void *p) {
    (void)dev;
    if (p && cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
}

/* ---- version 3: queries, thread binding, mapped host memory, metadata ----------------------- */

static bp_status cu_event_query(bp_device *dev, bp_event *e, bool *done) {
    (void)dev;
    cudaError_t r = cudaEventQuery((cudaEvent_t)(void *)e); /* never blocks */
    if (r == cudaErrorNotReady) {
        (void)cudaGetLastError();
        *done = false;
        return BP_OK;
    }
    *done = r == cudaSuccess;
    return bp_cu_status(r, "cudaEventQuery");
}

/* impl is the device's ordinal (cuda_dispatch.c keeps it). */
static int cu_device_index(bp_device *dev) { return dev->impl ? *(const int *)dev->impl : 0; }

static bp_status cu_bind_to_thread(bp_device *dev) {
    CU_TRY(cudaSetDevice(cu_device_index(dev)), "cudaSetDevice(%d)", cu_device_index(dev));
    return BP_OK;
}

/* Mapped, page-locked host memory: the kernels read it over the bus in place (zero-copy). With
 * unified addressing the device pointer usually equals the host pointer; the release finds the
 * host pointer from the handle either way. */
static bp_status cu_host_ptr_to_device(bp_device *dev, void *host, size_t bytes, void **buf) {
    (void)dev;
    CU_TRY(cudaHostRegister(host, bytes, cudaHostRegisterMapped), "cudaHostRegister(%zu bytes)", bytes);
    cudaError_t e = cudaHostGetDevicePointer(buf, host, 0);
    if (e != cudaSuccess) {
        (void)cudaHostUnregister(host);
        return bp_cu_status(e, "cudaHostGetDevicePointer");
    }
    return BP_OK;
}

static void cu_host_ptr_release(bp_device *dev, void *buf) {
    struct cudaPointerAttributes a;
    void *host = buf;
    if (cudaPointerGetAttributes(&a, buf) == cudaSuccess && a.hostPointer) host = a.hostPointer;
    if (cudaHostUnregister(host) != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "backplane: %s: cudaHostUnregister(%p) failed\n", dev->name, host);
    }
}

static bool cu_has_module(bp_device *dev, const char *name) {
    (void)dev;
    return bp_cu_kernel_find(name) != NULL;
}

/* Rows per block, from the launch rules of src/cuda/cuda_kernels.h. */
static int cu_kernel_n_tile(bp_device *dev, bp_kernel *k) {
    (void)dev;
    const char *n = ((const bp_cu_kernel_entry *)(const void *)k)->name;
    if (!strncmp(n, "matvec_", 7)) return BP_CU_MV_ROWS;
    if (!strncmp(n, "gemm_", 5)) return BP_CU_GEMM_TILE;
    return 1;
}

/* The weight kernels read rows with 16-byte loads (cuda_kernels.h). */
static size_t cu_chunk_slack_bytes(bp_device *dev) {
    (void)dev;
    return 16;
}

static bp_status cu_copy_d2h_on_stream(bp_device *dev, bp_stream *s, void *dst, const void *src, size_t off, size_t n) {
    (void)dev;
    CU_TRY(cudaMemcpyAsync(dst, (const char *)src + off, n, cudaMemcpyDeviceToHost, CS(s)),
           "cudaMemcpyAsync d2h on stream (%zu bytes)", n);
    CU_TRY(cudaStreamSynchronize(CS(s)), "cudaStreamSynchronize after d2h");
    return BP_OK;
}

/* Arenas are one cudaMalloc each (the common code records them in the ledger); weights inside
 * are suballocated by offset, 256-byte aligned by the caller. */
static bp_status cu_arena_create(bp_device *dev, size_t bytes, void **buf) { return cu_alloc(dev, bytes, buf); }
static void cu_arena_destroy(bp_device *dev, void *buf) { cu_free(dev, buf); }

const bp_device_methods bp_cu_device_methods = {
    .version = BP_DEVICE_METHODS_VERSION,
    .name = "cuda",
    .alloc = cu_alloc,
    .alloc_managed = cu_alloc_managed,
    .free = cu_free,
    .h2d = cu_h2d,
    .d2h = cu_d2h,
    .d2d = cu_d2d,
    .h2d_async = cu_h2d_async,
    .d2h_async = cu_d2h_async,
    .d2d_async = cu_d2d_async,
    .h2d_retained = cu_h2d_retained,
    .copy_2d = cu_copy_2d,
    .memset = cu_memset,
    .memset_async = cu_memset_async,
    .kernel_lookup = cu_kernel_lookup,
    .launch_raw = cu_launch_raw,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .device_sync = cu_device_sync,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .event_wait = cu_event_wait,
    .event_sync = cu_event_sync,
    .event_elapsed_ms = cu_event_elapsed,
    .graph_begin = cu_graph_begin,
    .graph_end = cu_graph_end,
    .graph_replay = cu_graph_replay,
    .graph_destroy = cu_graph_destroy,
    .graph_abort = cu_graph_abort,
    .stream_is_capturing = cu_stream_is_capturing,
    .mem_info = cu_mem_info,
    .compute_units = cu_compute_units,
    .host_alloc_pinned = cu_host_alloc_pinned,
    .host_free_pinned = cu_host_free_pinned,
    .arena_create = cu_arena_create,
    .arena_destroy = cu_arena_destroy,
    .event_query = cu_event_query,
    .bind_to_thread = cu_bind_to_thread,
    .device_index = cu_device_index,
    .host_ptr_to_device = cu_host_ptr_to_device,
    .host_ptr_release = cu_host_ptr_release,
    .has_module = cu_has_module,
    .kernel_n_tile = cu_kernel_n_tile,
    .chunk_slack_bytes = cu_chunk_slack_bytes,
    .copy_d2h_on_stream = cu_copy_d2h_on_stream,
    .graph_update = cu_graph_update,
};
