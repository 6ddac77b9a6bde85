/* The device interface (include/backplane_device.h) over OpenCL 1.2, and the context behind it.
 *
 * Handles are cl_mem objects, never addresses, so this backend provides the typed `launch`
 * (a buffer argument at a non-zero offset becomes a sub-buffer) and no launch_raw. Everything
 * runs on one in-order queue: streams default to it (stream_create gives NULL), and every
 * blocking member ends with the data in place. OpenCL 1.2 has no command buffers, so a graph
 * is the launch list recorded between graph_begin and graph_end (kernels, grids and argument
 * values copied), replayed as one batch of enqueues and one flush: the device step's
 * "submission". Errors become BP_E_DEVICE naming the call and
 * the OpenCL error (BP_E_NOMEM for allocation failures).
 *
 * The program is built once, on the first kernel lookup (PoCL: ~2 s the first time, then from
 * its cache in ~/.cache/pocl), never per call: the op cache keeps each cl_kernel until close.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/error.h"
#include "opencl/cl_internal.h"

/* LeakSanitizer and PoCL. PoCL 3.1 leaks a few small LLVM objects (operator new, ~8 KB in ~110 blocks)
 * each time it compiles a kernel, i.e. on a cold ~/.cache/pocl -- a fresh CI machine -- and
 * never once its cache is warm. Every such stack has its allocating frame in libpocl itself, so
 * only leaks allocated inside the driver are suppressed: any leak of ours has no libpocl frame
 * and is still reported. Weak, so a program's own suppression list wins; compiled only into
 * sanitized builds. */
#if defined(__SANITIZE_ADDRESS__)
#define BP_CL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BP_CL_ASAN 1
#endif
#endif
#ifdef BP_CL_ASAN
const char *__lsan_default_suppressions(void) __attribute__((weak));
/* _dlerror_run: glibc keeps the last dlerror() message in thread-local storage, which
 * use_tls=0 below stops LeakSanitizer from scanning; any failed dlopen in the process (a
 * loader probing a driver) then shows as a 117-byte "leak" at exit. */
const char *__lsan_default_suppressions(void) { return "leak:libpocl.so\nleak:_dlerror_run\n"; }
/* And after a process in which PoCL compiled a kernel while its program came from the cache
 * (the second process on a fresh machine: `cli_matvec.sh` hit it on Q6_K and IQ3_S every
 * time), LeakSanitizer's exit check crashed reading thread-local storage ("Tracer caught
 * signal 11 ... LeakSanitizer has encountered a fatal error"), failing a correct program.
 * use_tls=0 stops it scanning TLS as roots: no leak can hide by it; a heap block referenced
 * only from a thread-local would be reported (none is, in backplane). */
const char *__lsan_default_options(void) __attribute__((weak));
const char *__lsan_default_options(void) { return "use_tls=0"; }
#endif

const char *bp_cl_error_name(cl_int e) {
    switch (e) {
#define N(x) case x: return #x;
    N(CL_SUCCESS) N(CL_DEVICE_NOT_FOUND) N(CL_DEVICE_NOT_AVAILABLE) N(CL_COMPILER_NOT_AVAILABLE)
    N(CL_MEM_OBJECT_ALLOCATION_FAILURE) N(CL_OUT_OF_RESOURCES) N(CL_OUT_OF_HOST_MEMORY)
    N(CL_BUILD_PROGRAM_FAILURE) N(CL_MISALIGNED_SUB_BUFFER_OFFSET) N(CL_INVALID_VALUE)
    N(CL_INVALID_DEVICE_TYPE) N(CL_INVALID_PLATFORM) N(CL_INVALID_DEVICE) N(CL_INVALID_CONTEXT)
    N(CL_INVALID_COMMAND_QUEUE) N(CL_INVALID_MEM_OBJECT) N(CL_INVALID_BUILD_OPTIONS)
    N(CL_INVALID_PROGRAM) N(CL_INVALID_PROGRAM_EXECUTABLE) N(CL_INVALID_KERNEL_NAME)
    N(CL_INVALID_KERNEL) N(CL_INVALID_ARG_INDEX) N(CL_INVALID_ARG_VALUE) N(CL_INVALID_ARG_SIZE)
    N(CL_INVALID_KERNEL_ARGS) N(CL_INVALID_WORK_DIMENSION) N(CL_INVALID_WORK_GROUP_SIZE)
    N(CL_INVALID_WORK_ITEM_SIZE) N(CL_INVALID_GLOBAL_OFFSET) N(CL_INVALID_BUFFER_SIZE)
    N(CL_INVALID_GLOBAL_WORK_SIZE) N(CL_INVALID_OPERATION)
#undef N
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL_<unknown>";
    }
}

bp_status bp_cl_status(cl_int e, const char *what) {
    if (e == CL_SUCCESS) return BP_OK;
    const bool nomem = e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_HOST_MEMORY;
    return bp_fail(nomem ? BP_E_NOMEM : BP_E_DEVICE, "%s: %s (%d)", what, bp_cl_error_name(e), (int)e);
}

#define CL_TRY(call, ...)                                                                       \
    do {                                                                                        \
        cl_int e_ = (call);                                                                     \
        if (e_ != CL_SUCCESS) {                                                                 \
            char what_[160];                                                                    \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                         \
            return bp_cl_status(e_, what_);                                                     \
        }                                                                                       \
    } while (0)

/* ---- context ------------------------------------------------------------------------------ */

/* BACKPLANE_OPENCL_DEVICE (index over all platforms' devices, or a name substring); else the
 * first GPU, else the first device of any type. */
static bool pick_device(bp_cl_ctx *c, cl_platform_id *plats, cl_uint np, char *why, size_t why_len) {
    const char *sel = getenv("BACKPLANE_OPENCL_DEVICE");
    if (sel && !*sel) sel = NULL;
    char *end = NULL;
    long want = sel ? strtol(sel, &end, 10) : -1;
    const bool by_index = sel && end && !*end;
    int flat = 0, best_rank = -1;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id ds[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, ds, &nd) != CL_SUCCESS) continue;
        if (nd > 16) nd = 16;
        for (cl_uint d = 0; d < nd; d++, flat++) {
            cl_device_type ty = 0;
            char dn[256] = "";
            clGetDeviceInfo(ds[d], CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
            clGetDeviceInfo(ds[d], CL_DEVICE_NAME, sizeof dn - 1, dn, NULL);
            bool take;
            if (sel) take = by_index ? flat == want : bp_dev_name_contains(dn, sel);
            else take = (ty & CL_DEVICE_TYPE_GPU ? 2 : 1) > best_rank;
            if (!take) continue;
            c->platform = plats[p];
            c->device = ds[d];
            best_rank = ty & CL_DEVICE_TYPE_GPU ? 2 : 1;
            if (sel) return true;
        }
    }
    if (c->device) return true;
    if (sel)
        snprintf(why, why_len, "OpenCL: BACKPLANE_OPENCL_DEVICE=%s matches none of the %d OpenCL devices", sel, flat);
    else
        snprintf(why, why_len, "OpenCL unavailable: %u platform(s) but no device (clGetDeviceIDs)", (unsigned)np);
    return false;
}

bool bp_cl_ctx_create(bp_cl_ctx *c, char *why, size_t why_len) {
    memset(c, 0, sizeof *c);
    cl_platform_id plats[8];
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(8, plats, &np);
    if (e != CL_SUCCESS || np == 0) {
        snprintf(why, why_len, "OpenCL unavailable: clGetPlatformIDs -> %d %s%s", (int)e, bp_cl_error_name(e),
                 e == -1001 ? " (no OpenCL platform/ICD installed)" : np == 0 ? " (0 platforms)" : "");
        return false;
    }
    if (np > 8) np = 8;
    if (!pick_device(c, plats, np, why, why_len)) return false;
    cl_bool unified = CL_FALSE;
    clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof c->type, &c->type, NULL);
    clGetDeviceInfo(c->device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    c->unified = unified == CL_TRUE;
    /* Buffers well over the strings' sizes: a too-small one makes the query fail, not truncate. */
    char dn[256] = "", pn[256] = "", ver[256] = "";
    clGetDeviceInfo(c->device, CL_DEVICE_NAME, sizeof dn - 1, dn, NULL);
    clGetPlatformInfo(c->platform, CL_PLATFORM_NAME, sizeof pn - 1, pn, NULL);
    clGetDeviceInfo(c->device, CL_DRIVER_VERSION, sizeof ver - 1, ver, NULL);
    snprintf(c->name, sizeof c->name, "%.100s (%.40s %.16s)", dn, pn, ver);
    cl_uint cu = 1;
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    c->compute_units = cu;
    cl_ulong max_alloc = 0;
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
    c->max_alloc = (size_t)max_alloc;
    c->context = clCreateContext(NULL, 1, &c->device, NULL, NULL, &e);
    if (e == CL_SUCCESS) c->queue = clCreateCommandQueue(c->context, c->device, 0, &e);
    if (e != CL_SUCCESS) {
        snprintf(why, why_len, "OpenCL unavailable: %s: context/queue -> %d %s", c->name, (int)e, bp_cl_error_name(e));
        bp_cl_ctx_destroy(c);
        return false;
    }
    snprintf(why, why_len, "%s", c->name);
    return true;
}

void bp_cl_ctx_destroy(bp_cl_ctx *c) {
    if (c->program) clReleaseProgram(c->program);
    if (c->queue) clReleaseCommandQueue(c->queue);
    if (c->context) clReleaseContext(c->context);
    c->program = NULL;
    c->queue = NULL;
    c->context = NULL;
}

/* ---- memory and copies --------------------------------------------------------------------- */

#define CTX(dev) ((bp_cl_ctx *)(dev)->impl)
#define MEM(buf) ((cl_mem)(buf))

static bp_status ocl_alloc(bp_device *dev, size_t bytes, void **buf) {
    cl_int e;
    *buf = NULL;
    cl_mem m = clCreateBuffer(CTX(dev)->context, CL_MEM_READ_WRITE, bytes, NULL, &e);
    CL_TRY(e, "clCreateBuffer(%zu bytes)", bytes);
    *buf = m;
    return BP_OK;
}

static void ocl_free(bp_device *dev, void *buf) {
    (void)dev;
    if (buf) clReleaseMemObject(MEM(buf));
}

static bp_status ocl_h2d(bp_device *dev, void *dst, size_t off, const void *src, size_t bytes) {
    CL_TRY(clEnqueueWriteBuffer(CTX(dev)->queue, MEM(dst), CL_TRUE, off, bytes, src, 0, NULL, NULL),
           "clEnqueueWriteBuffer(%zu bytes at %zu)", bytes, off);
    return BP_OK;
}

static bp_status ocl_d2h(bp_device *dev, void *dst, const void *src, size_t off, size_t bytes) {
    CL_TRY(clEnqueueReadBuffer(CTX(dev)->queue, MEM(src), CL_TRUE, off, bytes, dst, 0, NULL, NULL),
           "clEnqueueReadBuffer(%zu bytes at %zu)", bytes, off);
    return BP_OK;
}

static bp_status ocl_d2d(bp_device *dev, void *dst, size_t doff, const void *src, size_t soff, size_t bytes) {
    CL_TRY(clEnqueueCopyBuffer(CTX(dev)->queue, MEM(src), MEM(dst), soff, doff, bytes, 0, NULL, NULL),
           "clEnqueueCopyBuffer(%zu bytes)", bytes);
    CL_TRY(clFinish(CTX(dev)->queue), "clFinish after clEnqueueCopyBuffer");
    return BP_OK;
}

static bp_status ocl_memset(bp_device *dev, void *dst, size_t off, int value, size_t bytes) {
    const cl_uchar v = (cl_uchar)value;
    CL_TRY(clEnqueueFillBuffer(CTX(dev)->queue, MEM(dst), &v, 1, off, bytes, 0, NULL, NULL),
           "clEnqueueFillBuffer(%zu bytes)", bytes);
    CL_TRY(clFinish(CTX(dev)->queue), "clFinish after clEnqueueFillBuffer");
    return BP_OK;
}

/* ---- kernels -------------------------------------------------------------------------------- */

static pthread_mutex_t cl_build_lock = PTHREAD_MUTEX_INITIALIZER;

static bp_status build_program(bp_cl_ctx *c) {
    if (c->program) return BP_OK;
    cl_int e;
    const char *src = bp_cl_program_source;
    const size_t len = bp_cl_program_source_len;
    cl_program p = clCreateProgramWithSource(c->context, 1, &src, &len, &e);
    CL_TRY(e, "clCreateProgramWithSource(%zu bytes)", len);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    e = clBuildProgram(p, 1, &c->device, "-cl-std=CL1.2", NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (e != CL_SUCCESS) {
        char log[1024] = "";
        size_t n = 0;
        clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &n);
        clReleaseProgram(p);
        /* A build failure is a defect of this build (the source is ours), named in full. */
        return bp_fail(BP_E_DEVICE, "clBuildProgram on %s: %s (%d): %.700s", c->name, bp_cl_error_name(e), (int)e, log);
    }
    c->build_seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    c->program = p;
    return BP_OK;
}

static bp_status ocl_kernel_lookup(bp_device *dev, const char *name, bp_kernel **out) {
    bp_cl_ctx *c = CTX(dev);
    pthread_mutex_lock(&cl_build_lock);
    bp_status s = build_program(c);
    pthread_mutex_unlock(&cl_build_lock);
    if (s) return s;
    cl_int e;
    cl_kernel k = clCreateKernel(c->program, name, &e);
    if (e == CL_INVALID_KERNEL_NAME) return bp_fail(BP_E_NOT_FOUND, "OpenCL: no kernel '%s' in the program", name);
    CL_TRY(e, "clCreateKernel(%s)", name);
    *out = (bp_kernel *)k;
    return BP_OK;
}

static void ocl_kernel_release(bp_device *dev, bp_kernel *k) {
    (void)dev;
    if (k) clReleaseKernel((cl_kernel)k);
}

/* Typed launch: grid x block work-items in work-groups of block. A buffer at a non-zero offset
 * is bound as a sub-buffer (OpenCL 1.2 has no pointer arithmetic on cl_mem), released right
 * after the enqueue (the queued command keeps its own reference). */
/* clSetKernelArg state lives in the cl_kernel, which the op cache shares: two threads setting
 * and enqueuing the same kernel would interleave their arguments (device.h lets methods be
 * called concurrently), so setting and enqueuing is one critical section. */
static pthread_mutex_t cl_launch_lock = PTHREAD_MUTEX_INITIALIZER;
static bp_status launch_locked(bp_cl_ctx *c, cl_kernel k, const bp_launch_dims *dims, const bp_kernel_arg *args,
                               int nargs);

static bp_status graph_record(bp_cl_ctx *c, cl_kernel k, const bp_launch_dims *dims, const bp_kernel_arg *args,
                              int nargs);

static bp_status ocl_launch(bp_device *dev, bp_stream *stream, bp_kernel *kp, const bp_launch_dims *dims,
                           const bp_kernel_arg *args, int nargs) {
    (void)stream; /* one in-order queue */
    bp_cl_ctx *c = CTX(dev);
    pthread_mutex_lock(&cl_launch_lock);
    bp_status s = c->capture ? graph_record(c, (cl_kernel)kp, dims, args, nargs)
                             : launch_locked(c, (cl_kernel)kp, dims, args, nargs);
    if (!s && !c->capture) c->submits++;
    pthread_mutex_unlock(&cl_launch_lock);
    return s;
}

static bp_status launch_locked(bp_cl_ctx *c, cl_kernel k, const bp_launch_dims *dims, const bp_kernel_arg *args,
                               int nargs) {
    cl_mem subs[16];
    int nsub = 0;
    bp_status s = BP_OK;
    cl_int e = CL_SUCCESS;
    char what[96] = "";
    for (int i = 0; i < nargs && !s; i++) {
        const bp_kernel_arg *a = &args[i];
        switch (a->type) {
        case BP_ARG_BUF: {
            cl_mem m = MEM(a->v.buf.buf);
            if (a->v.buf.offset) {
                size_t size = 0;
                clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL);
                if (nsub == 16 || a->v.buf.offset >= size) {
                    s = bp_fail(BP_E_INVAL, "OpenCL launch: argument %d offset %zu (size %zu)", i, a->v.buf.offset, size);
                    break;
                }
                cl_buffer_region r = {a->v.buf.offset, size - a->v.buf.offset};
                m = clCreateSubBuffer(m, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
                if (e != CL_SUCCESS) {
                    snprintf(what, sizeof what, "clCreateSubBuffer(argument %d, offset %zu)", i, a->v.buf.offset);
                    break;
                }
                subs[nsub++] = m;
            }
            e = clSetKernelArg(k, (cl_uint)i, sizeof m, &m);
            break;
        }
        case BP_ARG_I32: e = clSetKernelArg(k, (cl_uint)i, sizeof a->v.i32, &a->v.i32); break;
        case BP_ARG_U32: e = clSetKernelArg(k, (cl_uint)i, sizeof a->v.u32, &a->v.u32); break;
        case BP_ARG_I64: e = clSetKernelArg(k, (cl_uint)i, sizeof a->v.i64, &a->v.i64); break;
        case BP_ARG_F32: e = clSetKernelArg(k, (cl_uint)i, sizeof a->v.f32, &a->v.f32); break;
        case BP_ARG_BYTES: e = clSetKernelArg(k, (cl_uint)i, a->v.bytes.n, a->v.bytes.p); break;
        default: s = bp_fail(BP_E_INVAL, "OpenCL launch: argument %d has unknown type %d", i, (int)a->type);
        }
        if (e != CL_SUCCESS && !what[0]) snprintf(what, sizeof what, "clSetKernelArg(%d)", i);
    }
    if (!s && e == CL_SUCCESS) {
        size_t global[3], local[3];
        for (int d = 0; d < 3; d++) {
            local[d] = dims->block[d] ? dims->block[d] : 1;
            global[d] = (size_t)(dims->grid[d] ? dims->grid[d] : 1) * local[d];
        }
        e = clEnqueueNDRangeKernel(c->queue, k, 3, NULL, global, local, 0, NULL, NULL);
        if (e != CL_SUCCESS)
            snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%zux%zux%zu / %zux%zux%zu)", global[0], global[1],
                     global[2], local[0], local[1], local[2]);
    }
    for (int i = 0; i < nsub; i++) clReleaseMemObject(subs[i]);
    if (!s && e != CL_SUCCESS) s = bp_cl_status(e, what);
    return s;
}

/* ---- graphs: a recorded launch list ---------------------------------------------------------- */

enum { CL_REC_ARGS = 8, CL_REC_BYTES = 128 };

/* One recorded launch: its argument values copied (by-value blobs into bytes), a buffer at an
 * offset already made a sub-buffer (owned by the record, offset 0). */
typedef struct cl_rec {
    cl_kernel k;
    bp_launch_dims d;
    int nargs;
    bp_kernel_arg a[CL_REC_ARGS];
    cl_mem sub[CL_REC_ARGS];
    size_t boff[CL_REC_ARGS];  /* a by-value argument's place in bytes: the list is realloc'ed as
                                  it grows, so pointers into it are made at replay, never kept */
    unsigned char bytes[CL_REC_BYTES];
} cl_rec;

struct bp_graph {
    cl_rec *l;
    int n, cap;
};

static void graph_free(bp_graph *g) {
    for (int i = 0; g && i < g->n; i++) {
        for (int j = 0; j < g->l[i].nargs; j++)
            if (g->l[i].sub[j]) clReleaseMemObject(g->l[i].sub[j]);
        clReleaseKernel(g->l[i].k);
    }
    if (g) bp_free(g->l);
    bp_free(g);
}

static bp_status graph_record(bp_cl_ctx *c, cl_kernel k, const bp_launch_dims *dims, const bp_kernel_arg *args,
                              int nargs) {
    bp_graph *g = c->capture;
    if (nargs > CL_REC_ARGS) return bp_fail(BP_E_INVAL, "OpenCL graph: a launch of %d arguments (at most %d)", nargs, CL_REC_ARGS);
    if (g->n == g->cap) {
        const int nc = g->cap ? 2 * g->cap : 16; /* small: every test model grows the list */
        cl_rec *l = bp_realloc(g->l, (size_t)nc * sizeof *l);
        if (!l) return bp_fail(BP_E_NOMEM, "OpenCL graph: out of host memory");
        g->l = l, g->cap = nc;
    }
    cl_rec *r = &g->l[g->n];
    memset(r, 0, sizeof *r);
    r->d = *dims, r->nargs = nargs;
    size_t used = 0;
    bp_status s = BP_OK;
    for (int i = 0; i < nargs && !s; i++) {
        r->a[i] = args[i];
        if (args[i].type == BP_ARG_BYTES) {
            if (used + args[i].v.bytes.n > CL_REC_BYTES) {
                s = bp_fail(BP_E_INVAL, "OpenCL graph: %zu argument bytes (at most %d)", used + args[i].v.bytes.n,
                            CL_REC_BYTES);
                break;
            }
            memcpy(r->bytes + used, args[i].v.bytes.p, args[i].v.bytes.n);
            r->boff[i] = used;
            used += (args[i].v.bytes.n + 7) & ~(size_t)7;
        } else if (args[i].type == BP_ARG_BUF && args[i].v.buf.offset) {
            size_t size = 0;
            cl_int e = clGetMemObjectInfo(MEM(args[i].v.buf.buf), CL_MEM_SIZE, sizeof size, &size, NULL);
            cl_buffer_region reg = {args[i].v.buf.offset, size - args[i].v.buf.offset};
            if (e == CL_SUCCESS && args[i].v.buf.offset < size)
                r->sub[i] = clCreateSubBuffer(MEM(args[i].v.buf.buf), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                              &reg, &e);
            if (!r->sub[i]) s = bp_cl_status(e ? e : CL_INVALID_VALUE, "OpenCL graph: clCreateSubBuffer");
            r->a[i] = bp_arg_buf(r->sub[i], 0);
        }
    }
    if (s) {
        for (int j = 0; j < nargs; j++)
            if (r->sub[j]) clReleaseMemObject(r->sub[j]);
        return s;
    }
    clRetainKernel(k);
    r->k = k;
    g->n++;
    return BP_OK;
}

static bp_status ocl_graph_begin(bp_device *dev, bp_stream *s) {
    (void)s;
    bp_cl_ctx *c = CTX(dev);
    bp_graph *g = bp_calloc(1, sizeof *g);
    if (!g) return bp_fail(BP_E_NOMEM, "OpenCL graph: out of host memory");
    pthread_mutex_lock(&cl_launch_lock);
    bp_status st = c->capture ? bp_fail(BP_E_INVAL, "OpenCL: graph_begin while capturing") : BP_OK;
    if (!st) c->capture = g;
    pthread_mutex_unlock(&cl_launch_lock);
    if (st) bp_free(g);
    return st;
}

static bp_status ocl_graph_end(bp_device *dev, bp_stream *s, bp_graph **out) {
    (void)s;
    bp_cl_ctx *c = CTX(dev);
    pthread_mutex_lock(&cl_launch_lock);
    *out = c->capture;
    c->capture = NULL;
    pthread_mutex_unlock(&cl_launch_lock);
    return *out ? BP_OK : bp_fail(BP_E_INVAL, "OpenCL: graph_end without graph_begin");
}

/* Every recorded launch enqueued, then one flush: the queue starts on the batch at once. */
static bp_status ocl_graph_replay(bp_device *dev, bp_graph *g, bp_stream *s) {
    (void)s;
    bp_cl_ctx *c = CTX(dev);
    bp_status st = BP_OK;
    pthread_mutex_lock(&cl_launch_lock);
    for (int i = 0; i < g->n && !st; i++) {
        cl_rec *r = &g->l[i];
        for (int j = 0; j < r->nargs; j++)
            if (r->a[j].type == BP_ARG_BYTES) r->a[j].v.bytes.p = r->bytes + r->boff[j];
        st = launch_locked(c, r->k, &r->d, r->a, r->nargs);
    }
    cl_int e = clFlush(c->queue);
    if (!st) st = bp_cl_status(e, "clFlush after a graph replay");
    if (!st) c->submits++;
    pthread_mutex_unlock(&cl_launch_lock);
    return st;
}

static void ocl_graph_destroy(bp_device *dev, bp_graph *g) {
    (void)dev;
    graph_free(g);
}

static uint64_t ocl_submits(bp_device *dev) {
    pthread_mutex_lock(&cl_launch_lock);
    const uint64_t n = CTX(dev)->submits;
    pthread_mutex_unlock(&cl_launch_lock);
    return n;
}

static bp_status ocl_sync(bp_device *dev) {
    CL_TRY(clFinish(CTX(dev)->queue), "clFinish");
    return BP_OK;
}

static bp_status ocl_stream_sync(bp_device *dev, bp_stream *s) {
    (void)s;
    return ocl_sync(dev);
}

static bp_status ocl_mem_info(bp_device *dev, size_t *total, size_t *free_bytes) {
    cl_ulong t = 0;
    CL_TRY(clGetDeviceInfo(CTX(dev)->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof t, &t, NULL),
           "clGetDeviceInfo(CL_DEVICE_GLOBAL_MEM_SIZE)");
    *total = (size_t)t;
    *free_bytes = (size_t)t; /* OpenCL 1.2 cannot say; the total is the honest upper bound */
    return BP_OK;
}

static int ocl_compute_units(bp_device *dev) { return (int)CTX(dev)->compute_units; }

const bp_device_methods bp_cl_methods = {
    .version = BP_DEVICE_METHODS_VERSION,
    .name = "opencl",
    .alloc = ocl_alloc,
    .free = ocl_free,
    .h2d = ocl_h2d,
    .d2h = ocl_d2h,
    .d2d = ocl_d2d,
    .memset = ocl_memset,
    .kernel_lookup = ocl_kernel_lookup,
    .kernel_release = ocl_kernel_release,
    .launch = ocl_launch,
    .graph_begin = ocl_graph_begin,
    .graph_end = ocl_graph_end,
    .graph_replay = ocl_graph_replay,
    .graph_destroy = ocl_graph_destroy,
    .stream_sync = ocl_stream_sync,
    .device_sync = ocl_sync,
    .mem_info = ocl_mem_info,
    .compute_units = ocl_compute_units,
    .submits = ocl_submits,
};
