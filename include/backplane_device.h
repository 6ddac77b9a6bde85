/* backplane device interface: what a GPU backend provides -- one struct of function pointers
 * per device (bp_device_methods) -- and the common code every backend calls around it: the
 * allocation ledger (live allocations with their call sites), redzones, an op cache of kernel
 * handles and scratch buffers, and the defaults for every optional member. CUDA, Vulkan, OpenCL
 * and the mock device implement it inside the library; a program can implement it too and
 * register the device as a backend of its own (bp_backend_register, at the end of this file).
 *
 * Included at the end of backplane.h: `#include <backplane.h>` gives everything. The library's
 * own backends include this very header (src/device/ has no copy of it).
 *
 * Documented member by member in the manner of SQLite's sqlite3_io_methods: each member says
 * REQUIRED, or OPTIONAL with the DEFAULT the common wrapper (bp_dev_*) applies when it is NULL,
 * what it must do and what it may skip. The defaults live in one place, the wrappers
 * (src/device/device.c, queue.c): backends and the code above them call bp_dev_*, never a member
 * directly, so that the defaults, the ledger checks and the capture rules always apply.
 *
 * STABILITY: changes are additive only. New members go at the END of the struct, after a marker
 * "members above are valid for version N"; `version` says which members a table fills, and
 * bp_device_open copies only those (the rest read as NULL: defaulted), so a table compiled
 * against an older header is never read past its end.
 *
 * Memory model. Device memory is named by an opaque handle `void *buf` (what `alloc` returned)
 * plus a byte offset, never by pointer arithmetic on the handle: a Vulkan or OpenCL allocation
 * is a VkBuffer/cl_mem, not an address. CUDA and the mock may hand out real addresses as
 * handles; the common code still passes (buf, offset) pairs to them.
 *
 * Threading. One bp_device may be used from several threads; the common code serializes the
 * ledger, op cache and scratch with a per-device lock. Members may be called concurrently from
 * several threads unless a member says otherwise; a backend that cannot allow that locks itself.
 *
 * Errors. Every member that can fail returns a bp_status and leaves a message for
 * bp_last_error() naming the call and the cause ("vkAllocateMemory(4096 bytes):
 * VK_ERROR_OUT_OF_DEVICE_MEMORY"); a backend outside the library sets it with bp_device_fail.
 * Members never abort on a device error; the seam turns a failure into a named fallback.
 * BP_E_DEVICE_LOST says the device is unusable for the rest of the process (the seam then
 * disables the backend instead of failing every later op one by one).
 */
#ifndef BACKPLANE_DEVICE_H
#define BACKPLANE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libbackplane.so (see backplane.h). */
#pragma GCC visibility push(default)

typedef struct bp_device bp_device;
/* Opaque backend objects. NULL as a stream means the device's default stream (in-order with
 * every other NULL-stream operation). */
typedef struct bp_stream bp_stream;
typedef struct bp_event bp_event;
typedef struct bp_graph bp_graph;
typedef struct bp_kernel bp_kernel;

/* Grid and workgroup of one launch. Backends whose workgroup size is fixed in the kernel
 * (Vulkan: local_size in the shader) ignore `block`. */
typedef struct bp_launch_dims {
    uint32_t grid[3];      /* number of workgroups / thread blocks per dimension (0 read as 1) */
    uint32_t block[3];     /* threads per workgroup (0 read as 1) */
    uint32_t shared_bytes; /* dynamic shared / local memory per workgroup */
} bp_launch_dims;

/* A typed kernel argument. Buffers are (handle, offset), so handle-based APIs can bind them. */
typedef enum bp_arg_type {
    BP_ARG_BUF = 0,   /* device memory: v.buf */
    BP_ARG_I32 = 1,
    BP_ARG_U32 = 2,
    BP_ARG_I64 = 3,
    BP_ARG_F32 = 4,
    BP_ARG_BYTES = 5, /* a by-value blob (push constants, a struct): v.bytes */
} bp_arg_type;

typedef struct bp_kernel_arg {
    bp_arg_type type;
    union {
        struct { void *buf; size_t offset; } buf;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        float f32;
        struct { const void *p; size_t n; } bytes;
    } v;
} bp_kernel_arg;

static inline bp_kernel_arg bp_arg_buf(void *buf, size_t offset) {
    bp_kernel_arg a; a.type = BP_ARG_BUF; a.v.buf.buf = buf; a.v.buf.offset = offset; return a;
}
static inline bp_kernel_arg bp_arg_i32(int32_t x) { bp_kernel_arg a; a.type = BP_ARG_I32; a.v.i32 = x; return a; }
static inline bp_kernel_arg bp_arg_u32(uint32_t x) { bp_kernel_arg a; a.type = BP_ARG_U32; a.v.u32 = x; return a; }
static inline bp_kernel_arg bp_arg_i64(int64_t x) { bp_kernel_arg a; a.type = BP_ARG_I64; a.v.i64 = x; return a; }
static inline bp_kernel_arg bp_arg_f32(float x) { bp_kernel_arg a; a.type = BP_ARG_F32; a.v.f32 = x; return a; }
static inline bp_kernel_arg bp_arg_bytes(const void *p, size_t n) {
    bp_kernel_arg a; a.type = BP_ARG_BYTES; a.v.bytes.p = p; a.v.bytes.n = n; return a;
}

/* Called once the device no longer needs a retained copy source (see h2d_retained). */
typedef void (*bp_release_fn)(void *ctx);

/* The version of bp_device_methods this header describes: 1 the first members, 2 adds `submits`,
 * 3 the members after its marker (event_query ... graph_update). */
#define BP_DEVICE_METHODS_VERSION 3

typedef struct bp_device_methods {
    /* REQUIRED. BP_DEVICE_METHODS_VERSION the table was written against (1 .. this header's).
     * Members past that version's marker are never read: they count as NULL. A version above
     * this library's is refused at open (its members would have meanings this library does not
     * know). */
    int version;
    /* REQUIRED. Short lower-case name for logs and the ledger report: "cuda", "vulkan", "mock". */
    const char *name;

    /* ---- lifetime ---- */
    /* OPTIONAL. Release the backend's own state (impl) when bp_device_close runs, after the
     * common code swept the ledger and emptied the op cache. DEFAULT: nothing. */
    void (*close)(bp_device *dev);

    /* ---- memory ---- */
    /* REQUIRED. Allocate `bytes` (> 0) of device memory; *buf receives a non-NULL handle. On
     * failure return BP_E_NOMEM (or BP_E_DEVICE) and leave *buf NULL. Contents undefined.
     * Alignment: at least 256 bytes, so that (buf, k*256) suits every kernel argument. */
    bp_status (*alloc)(bp_device *dev, size_t bytes, void **buf);
    /* OPTIONAL. Memory visible to host and device at the same address (CUDA managed,
     * host-visible Vulkan heap). DEFAULT: a plain `alloc` -- the buffer works with every copy and
     * kernel, but the host must not dereference it; bp_dev_has_managed says which one a device
     * gives. (Falling back rather than failing: the callers that ask for managed memory want it
     * for speed, and every one of them also copies, so an error would only add a second path.) */
    bp_status (*alloc_managed)(bp_device *dev, size_t bytes, void **buf);
    /* REQUIRED. Free a handle from alloc or alloc_managed. NULL is a no-op. Must not fail:
     * a device error here is logged by the backend and dropped. */
    void (*free)(bp_device *dev, void *buf);

    /* ---- copies ---- blocking copies return once the data has arrived; all ranges are
     * checked against the ledger by the wrappers before the member is called. */
    /* REQUIRED. Host -> device, blocking. */
    bp_status (*h2d)(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t bytes);
    /* REQUIRED. Device -> host, blocking. */
    bp_status (*d2h)(bp_device *dev, void *dst, const void *src, size_t src_off, size_t bytes);
    /* OPTIONAL. Device -> device, blocking. DEFAULT: bounce through a host buffer (d2h, h2d). */
    bp_status (*d2d)(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t src_off,
                     size_t bytes);
    /* OPTIONAL. Host -> device queued on `stream` (NULL: default stream); returns before the copy
     * may have run. The caller keeps `src` alive and unchanged until the stream is synced.
     * DEFAULT: stream_sync(stream), then the blocking h2d. The same holds for d2h_async
     * (the host `dst` is valid only after a sync) and d2d_async. */
    bp_status (*h2d_async)(bp_device *dev, bp_stream *stream, void *dst, size_t dst_off,
                           const void *src, size_t bytes);
    bp_status (*d2h_async)(bp_device *dev, bp_stream *stream, void *dst, const void *src,
                           size_t src_off, size_t bytes);
    bp_status (*d2d_async)(bp_device *dev, bp_stream *stream, void *dst, size_t dst_off,
                           const void *src, size_t src_off, size_t bytes);
    /* OPTIONAL. Host -> device with a RETAINED source: the device takes over `src` and calls
     * release(ctx) exactly once when it no longer reads it (possibly from another thread, and
     * also on failure). Lets an uploader queue a copy of a temporary without a sync.
     * DEFAULT: h2d_async, stream_sync, then release(ctx) -- always called, even on error. */
    bp_status (*h2d_retained)(bp_device *dev, bp_stream *stream, void *dst, size_t dst_off,
                              const void *src, size_t bytes, bp_release_fn release, void *ctx);
    /* OPTIONAL. 2-D pitched copy of `height` rows of `width` bytes, row starts `dpitch` and
     * `spitch` bytes apart; dir 0 = h2d, 1 = d2h, 2 = d2d (the host side is a plain pointer).
     * Queued on stream (NULL: default). DEFAULT: one 1-D copy per row after a stream_sync. */
    bp_status (*copy_2d)(bp_device *dev, bp_stream *stream, int dir, void *dst, size_t dst_off,
                         size_t dpitch, const void *src, size_t src_off, size_t spitch,
                         size_t width, size_t height);
    /* OPTIONAL. Fill bytes with `value` (low 8 bits), blocking. DEFAULT: h2d of a host buffer
     * filled with value (in chunks). */
    bp_status (*memset)(bp_device *dev, void *dst, size_t dst_off, int value, size_t bytes);
    /* OPTIONAL. As memset, queued on stream. DEFAULT: stream_sync(stream), then memset. */
    bp_status (*memset_async)(bp_device *dev, bp_stream *stream, void *dst, size_t dst_off,
                              int value, size_t bytes);

    /* ---- kernels ---- */
    /* OPTIONAL (REQUIRED to launch anything). Find the kernel called `name` ("matvec_Q4_K") in
     * the backend's embedded programs, building it on first use. BP_E_NOT_FOUND when there is
     * none (never another kernel: a claim is proven by its lookup, see has_module). The common op cache (bp_dev_kernel) calls this at most once per name per device and
     * keeps the handle until close. DEFAULT: BP_E_UNSUPPORTED. */
    bp_status (*kernel_lookup)(bp_device *dev, const char *name, bp_kernel **out);
    /* OPTIONAL. Release a handle from kernel_lookup (op cache emptied on close).
     * DEFAULT: nothing. */
    void (*kernel_release)(bp_device *dev, bp_kernel *k);
    /* OPTIONAL. Launch with RAW arguments: params[i] points at the i-th argument's value, sized
     * as the kernel's signature says (CUDA's kernelParams convention). Queued on stream.
     * DEFAULT: BP_E_UNSUPPORTED. */
    bp_status (*launch_raw)(bp_device *dev, bp_stream *stream, bp_kernel *k,
                            const bp_launch_dims *dims, void **params, int nparams);
    /* OPTIONAL. Launch with TYPED arguments (buffers as handle + offset). Queued on stream.
     * Handle-based backends (Vulkan, OpenCL) must provide it. DEFAULT: converted to launch_raw,
     * a BP_ARG_BUF becoming the address (char *)buf + offset -- valid only where handles are
     * addresses (CUDA, mock). At least one of launch / launch_raw must be set to launch. */
    bp_status (*launch)(bp_device *dev, bp_stream *stream, bp_kernel *k,
                        const bp_launch_dims *dims, const bp_kernel_arg *args, int nargs);

    /* ---- streams and events ---- */
    /* OPTIONAL. Create / destroy an in-order queue. DEFAULT: create gives NULL (the default
     * stream) and BP_OK, destroy does nothing: everything is then in order on one queue. */
    bp_status (*stream_create)(bp_device *dev, bp_stream **out);
    void (*stream_destroy)(bp_device *dev, bp_stream *s);
    /* OPTIONAL. Block until all work queued on s (NULL: default stream) has finished; report any
     * asynchronous error that work raised. DEFAULT: device_sync. */
    bp_status (*stream_sync)(bp_device *dev, bp_stream *s);
    /* OPTIONAL. Block until all work on every stream has finished. DEFAULT: BP_OK (a backend
     * without streams or async members is synchronous already). */
    bp_status (*device_sync)(bp_device *dev);
    /* OPTIONAL. Events: create/destroy; record marks a point in s; wait makes s wait for the
     * event (without blocking the host); sync blocks the host; elapsed gives ms between two
     * recorded events. DEFAULT: create gives a dummy event, record = stream_sync(s),
     * wait = nothing (record already synced), sync = nothing, elapsed = BP_E_UNSUPPORTED. */
    bp_status (*event_create)(bp_device *dev, bp_event **out);
    void (*event_destroy)(bp_device *dev, bp_event *e);
    bp_status (*event_record)(bp_device *dev, bp_event *e, bp_stream *s);
    bp_status (*event_wait)(bp_device *dev, bp_stream *s, bp_event *e);
    bp_status (*event_sync)(bp_device *dev, bp_event *e);
    bp_status (*event_elapsed_ms)(bp_device *dev, bp_event *start, bp_event *end, float *ms);

    /* ---- graphs ---- capture the work queued on a stream once, replay it many times.
     * While capturing, blocking copies, syncs and allocations are illegal (CUDA invalidates the
     * capture); the wrappers refuse them with BP_E_INVAL naming the capture. */
    /* OPTIONAL. Start capturing s: work queued on s until graph_end is recorded, not run.
     * DEFAULT (a device without graphs): nothing is recorded -- the work runs as it is queued --
     * and graph_end gives a NULL graph, so one caller's code serves both kinds of device:
     *     bp_dev_graph_begin(dev, s); queue the work; bp_dev_graph_end(dev, s, &g);
     *     if (g) bp_dev_graph_replay(dev, g, s);   (g NULL: the work already ran)
     * The capture rules (no blocking call while capturing) hold in the default too, so a step
     * that breaks them fails on every device, not only on the one with graphs. */
    bp_status (*graph_begin)(bp_device *dev, bp_stream *s);
    /* OPTIONAL (REQUIRED with graph_begin). End the capture on s; *out the graph (non-NULL). */
    bp_status (*graph_end)(bp_device *dev, bp_stream *s, bp_graph **out);
    /* OPTIONAL (REQUIRED with graph_begin). Queue one replay on s. A NULL graph is refused
     * (BP_E_INVAL) on a device with graphs: it would replay nothing and look like success. */
    bp_status (*graph_replay)(bp_device *dev, bp_graph *g, bp_stream *s);
    /* OPTIONAL (REQUIRED with graph_begin). */
    void (*graph_destroy)(bp_device *dev, bp_graph *g);
    /* OPTIONAL. If s is capturing, end the capture and discard it; else nothing. Error paths
     * call this so a failed op never leaves a stream in capture mode (where every later sync
     * fails with a confusing "capture invalidated"). DEFAULT: graph_end + graph_destroy when
     * stream_is_capturing says so. */
    void (*graph_abort)(bp_device *dev, bp_stream *s);
    /* OPTIONAL. Is s being captured? DEFAULT: the common code's own flag, set by
     * bp_dev_graph_begin and cleared by bp_dev_graph_end / bp_dev_graph_abort. */
    bool (*stream_is_capturing)(bp_device *dev, bp_stream *s);

    /* ---- properties ---- */
    /* OPTIONAL. Total and currently free device memory in bytes. DEFAULT: BP_E_UNSUPPORTED. */
    bp_status (*mem_info)(bp_device *dev, size_t *total, size_t *free_bytes);
    /* OPTIONAL. Compute units (SMs, CUs, cores). DEFAULT: 1. */
    int (*compute_units)(bp_device *dev);

    /* ---- pinned host memory ---- */
    /* OPTIONAL. Page-locked host memory for fast async copies. The wrapper zeroes it, so a
     * member need not (a staging buffer's stale bytes would otherwise reach the device as
     * plausible numbers). DEFAULT: 64-byte aligned host memory (async copies then behave as
     * the blocking ones do). */
    bp_status (*host_alloc_pinned)(bp_device *dev, size_t bytes, void **out);
    void (*host_free_pinned)(bp_device *dev, void *p);

    /* ---- weight arenas ---- one device allocation holding many weights, so a model's
     * tensors cost one driver allocation and one ledger entry. */
    /* OPTIONAL. Reserve an arena of `bytes`; *buf its handle (weights inside are (buf, offset)).
     * DEFAULT: bp_dev_alloc (so the arena shows up in the ledger at the caller's site). */
    bp_status (*arena_create)(bp_device *dev, size_t bytes, void **buf);
    /* OPTIONAL (REQUIRED with arena_create). DEFAULT: bp_dev_free. */
    void (*arena_destroy)(bp_device *dev, void *buf);
    /* ---- members above are valid for version 1 ---- */
    /* OPTIONAL. Work submissions to the device's queues since open (vkQueueSubmit, a graph
     * launch), for the traffic count of bp_dev_traffic. DEFAULT: the common code counts graph
     * replays and stream / device syncs instead. */
    uint64_t (*submits)(bp_device *dev);
    /* ---- members above are valid for version 2 ---- */

    /* OPTIONAL. *done = whether all work before e's record has finished. Must NEVER block or
     * wait: a scheduler polls it between tokens, and a query that waits stalls every other
     * sequence behind one. An event never recorded counts as done. DEFAULT: *done = true (the
     * default event_record already waited). */
    bp_status (*event_query)(bp_device *dev, bp_event *e, bool *done);
    /* OPTIONAL. Make this device the current one of the calling thread (cudaSetDevice). A
     * backend calls bp_dev_bind_to_thread on a thread that may not have used the device yet (a
     * weight freed on another thread): members that need a current device (CUDA runtime calls)
     * would otherwise run on device 0 from every new thread. DEFAULT: BP_OK, nothing (a
     * handle-based API names its device in every call). */
    bp_status (*bind_to_thread)(bp_device *dev);
    /* OPTIONAL. This device's index among its backend's devices (what BACKPLANE_CUDA_DEVICE
     * chose), for logs and for bind_to_thread. DEFAULT: 0. */
    int (*device_index)(bp_device *dev);
    /* OPTIONAL. Give the device access to `bytes` of host memory at `host` without a copy
     * (cudaHostRegister + cudaHostGetDevicePointer, a Vulkan imported host pointer); *buf a
     * handle usable as any buffer, (buf, offset) naming host + offset. The caller keeps the
     * host memory alive until bp_dev_free(buf), which calls host_ptr_release. The ledger lists
     * it, but never poisons or guards it: it is the caller's data. DEFAULT: BP_E_UNSUPPORTED
     * (callers copy instead). */
    bp_status (*host_ptr_to_device)(bp_device *dev, void *host, size_t bytes, void **buf);
    /* OPTIONAL (REQUIRED with host_ptr_to_device). Undo it; must not fail. */
    void (*host_ptr_release)(bp_device *dev, void *buf);
    /* OPTIONAL. Device-free and cheap: does this build hold a kernel called `name`, without
     * compiling it? Answered from what the build embeds (a registry, SPIR-V names), so the
     * claim <=> launch guard can ask it for every kernel a table claims. DEFAULT: a lookup
     * through the op cache (bp_dev_kernel) succeeds -- right, but may compile. */
    bool (*has_module)(bp_device *dev, const char *name);
    /* OPTIONAL. Output rows one workgroup of kernel k computes (its tile): a launch over n rows
     * needs ceil(n / tile) workgroups, and a grid computed from a different tile skips rows or
     * writes past the output. DEFAULT: 1. */
    int (*kernel_n_tile)(bp_device *dev, bp_kernel *k);
    /* OPTIONAL. Can the device convert `from` to `to` in device memory (f32 activations to
     * f16, a KV kind to f32)? DEFAULT: has_module("cast_<FROM>_<TO>"), kinds as GGUF spells
     * them ("cast_F32_F16"): one naming rule, so a cast is claimed only where a kernel is. */
    bool (*has_cast)(bp_device *dev, bp_kind from, bp_kind to);
    /* OPTIONAL. Bytes a kernel of this device may READ past the end of a buffer (vector loads of
     * a whole chunk at a row's tail). bp_dev_alloc allocates that much more than asked (the
     * redzone, when on, covers it), so such a read never leaves the allocation -- on a GPU an
     * out-of-bounds read is an illegal address that kills the context. DEFAULT: 0. */
    size_t (*chunk_slack_bytes)(bp_device *dev);
    /* OPTIONAL. Device -> host queued on stream s (NULL: default), BLOCKING: returns once the
     * bytes are in dst. Reads a step's logits on its own stream without a device-wide sync,
     * which would also wait for a weight upload running on another stream. DEFAULT: d2h_async
     * on s, then stream_sync(s). */
    bp_status (*copy_d2h_on_stream)(bp_device *dev, bp_stream *s, void *dst, const void *src, size_t src_off,
                                    size_t bytes);
    /* OPTIONAL. End the capture on s and make *g -- a graph of an earlier capture, or NULL --
     * run what was just captured: in place when the two have the same topology (the same
     * kernels in the same order, only their arguments and grids differ: cudaGraphExecUpdate),
     * which skips the instantiation that makes a capture costly; else *g is replaced by a new
     * graph. *updated says which. A failure leaves *g as it was (still valid) and the capture
     * ended. DEFAULT: graph_end into a new graph, then the old one destroyed (*updated false). */
    bp_status (*graph_update)(bp_device *dev, bp_stream *s, bp_graph **g, bool *updated);
    /* ---- members above are valid for version 3 ---- */
} bp_device_methods;

/* A device: the backend's method table (the copy bp_device_open made) and state, plus the common
 * state (ledger, op cache, scratch, capture flags) behind `common`, owned by the library. A
 * backend reads `impl` and `name`; nothing else of it is the backend's to change. */
struct bp_device {
    const bp_device_methods *m;
    void *impl;                    /* the backend's own state */
    char name[32];                 /* "cuda:0", "mock" */
    struct bp_device_common *common;
};

/* Create a device around a method table (checked: version, name, the REQUIRED members and the
 * pairs that go together; a bad table is BP_E_INVAL naming the member, a version above this
 * library's BP_E_UNSUPPORTED). The members the table's version covers are copied (dev->m points
 * at the copy; the rest are NULL), so the table may be a temporary. impl is the backend's state,
 * kept in dev->impl. */
bp_status bp_device_open(const bp_device_methods *m, void *impl, const char *name, bp_device **out);
/* Sweep the ledger (each leak is reported on stderr with its call site), empty the op cache
 * and scratch, call m->close, free dev. NULL is a no-op. */
void bp_device_close(bp_device *dev);
/* Record status s with a formatted message for bp_last_error() on this thread and return s:
 * how a member written outside the library reports its failure (`return bp_device_fail(
 * BP_E_DEVICE, "toy: launch %s: ...", name);`). */
bp_status bp_device_fail(bp_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- common wrappers: what backends call ------------------------------------------------ */

/* Allocate through the ledger; the macro records the caller's file:line as the call site. */
#define bp_dev_alloc(dev, bytes, bufp) bp_dev_alloc_at((dev), (bytes), (bufp), __FILE__, __LINE__)
#define bp_dev_alloc_managed(dev, bytes, bufp) \
    bp_dev_alloc_managed_at((dev), (bytes), (bufp), __FILE__, __LINE__)
bp_status bp_dev_alloc_at(bp_device *dev, size_t bytes, void **buf, const char *file, int line);
bp_status bp_dev_alloc_managed_at(bp_device *dev, size_t bytes, void **buf, const char *file,
                                  int line);
/* Whether bp_dev_alloc_managed gives memory the host may dereference (the member exists). */
bool bp_dev_has_managed(bp_device *dev);
/* A handle for host memory the device reads in place (host_ptr_to_device); in the ledger at the
 * caller's site until bp_dev_free, which releases the mapping, never the host memory. */
#define bp_dev_host_ptr_to_device(dev, host, bytes, bufp) \
    bp_dev_host_ptr_to_device_at((dev), (host), (bytes), (bufp), __FILE__, __LINE__)
bp_status bp_dev_host_ptr_to_device_at(bp_device *dev, void *host, size_t bytes, void **buf, const char *file,
                                       int line);
/* Free through the ledger: a handle the ledger does not know is reported (double free, foreign
 * pointer) and NOT passed to the backend. With redzones on, the guard band is checked first. */
void bp_dev_free(bp_device *dev, void *buf);

/* Copies: ranges are checked against the ledger entry of the device side (BP_E_INVAL naming
 * the allocation's call site on overflow), then the member or its default runs. */
bp_status bp_dev_h2d(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t bytes);
bp_status bp_dev_d2h(bp_device *dev, void *dst, const void *src, size_t src_off, size_t bytes);
bp_status bp_dev_d2d(bp_device *dev, void *dst, size_t dst_off, const void *src, size_t src_off,
                     size_t bytes);
/* Async on the default stream ("_async") or on a given stream ("_on"). */
#define bp_dev_h2d_async(dev, dst, off, src, n) bp_dev_h2d_on((dev), NULL, (dst), (off), (src), (n))
#define bp_dev_d2h_async(dev, dst, src, off, n) bp_dev_d2h_on((dev), NULL, (dst), (src), (off), (n))
bp_status bp_dev_h2d_on(bp_device *dev, bp_stream *s, void *dst, size_t dst_off, const void *src,
                        size_t bytes);
bp_status bp_dev_d2h_on(bp_device *dev, bp_stream *s, void *dst, const void *src, size_t src_off,
                        size_t bytes);
bp_status bp_dev_d2d_on(bp_device *dev, bp_stream *s, void *dst, size_t dst_off, const void *src,
                        size_t src_off, size_t bytes);
bp_status bp_dev_h2d_retained(bp_device *dev, bp_stream *s, void *dst, size_t dst_off,
                              const void *src, size_t bytes, bp_release_fn release, void *ctx);
bp_status bp_dev_copy_2d(bp_device *dev, bp_stream *s, int dir, void *dst, size_t dst_off,
                         size_t dpitch, const void *src, size_t src_off, size_t spitch,
                         size_t width, size_t height);
#define BP_COPY_H2D 0
#define BP_COPY_D2H 1
#define BP_COPY_D2D 2
bp_status bp_dev_memset(bp_device *dev, void *dst, size_t dst_off, int value, size_t bytes);
bp_status bp_dev_memset_on(bp_device *dev, bp_stream *s, void *dst, size_t dst_off, int value,
                           size_t bytes);
/* Device -> host on stream s, returning once the bytes are in dst (copy_d2h_on_stream). */
bp_status bp_dev_copy_d2h_on_stream(bp_device *dev, bp_stream *s, void *dst, const void *src, size_t src_off,
                                    size_t bytes);

/* Op cache: the kernel called `name`, looked up once per device and kept until close. */
bp_status bp_dev_kernel(bp_device *dev, const char *name, bp_kernel **out);
/* Kernel metadata (has_module, kernel_n_tile, has_cast, chunk_slack_bytes with their defaults).
 * bp_dev_has_kernel leaves no error behind when the answer is no. */
bool bp_dev_has_kernel(bp_device *dev, const char *name);
int bp_dev_kernel_n_tile(bp_device *dev, bp_kernel *k);
bool bp_dev_has_cast(bp_device *dev, bp_kind from, bp_kind to);
size_t bp_dev_chunk_slack_bytes(bp_device *dev);
/* Op cache: a scratch buffer of at least `bytes` for slot (0..7), grown (never shrunk) on
 * demand and kept until close; the ledger lists it at device.c. Not for concurrent users of
 * the same slot. */
bp_status bp_dev_scratch(bp_device *dev, int slot, size_t bytes, void **buf);
bp_status bp_dev_launch(bp_device *dev, bp_stream *s, bp_kernel *k, const bp_launch_dims *dims,
                        const bp_kernel_arg *args, int nargs);
bp_status bp_dev_launch_raw(bp_device *dev, bp_stream *s, bp_kernel *k, const bp_launch_dims *dims,
                            void **params, int nparams);

bp_status bp_dev_stream_create(bp_device *dev, bp_stream **out);
void bp_dev_stream_destroy(bp_device *dev, bp_stream *s);
bp_status bp_dev_stream_sync(bp_device *dev, bp_stream *s);
bp_status bp_dev_sync(bp_device *dev);
bp_status bp_dev_event_create(bp_device *dev, bp_event **out);
void bp_dev_event_destroy(bp_device *dev, bp_event *e);
bp_status bp_dev_event_record(bp_device *dev, bp_event *e, bp_stream *s);
bp_status bp_dev_event_wait(bp_device *dev, bp_stream *s, bp_event *e);
bp_status bp_dev_event_sync(bp_device *dev, bp_event *e);
bp_status bp_dev_event_elapsed_ms(bp_device *dev, bp_event *start, bp_event *end, float *ms);
bp_status bp_dev_event_query(bp_device *dev, bp_event *e, bool *done);
/* Make dev current on the calling thread (bind_to_thread); its index among its backend's. */
bp_status bp_dev_bind_to_thread(bp_device *dev);
int bp_dev_index(bp_device *dev);

bp_status bp_dev_graph_begin(bp_device *dev, bp_stream *s);
bp_status bp_dev_graph_end(bp_device *dev, bp_stream *s, bp_graph **out);
bp_status bp_dev_graph_replay(bp_device *dev, bp_graph *g, bp_stream *s);
void bp_dev_graph_destroy(bp_device *dev, bp_graph *g);
void bp_dev_graph_abort(bp_device *dev, bp_stream *s);
bool bp_dev_stream_is_capturing(bp_device *dev, bp_stream *s);
/* Whether graph capture records (graph_begin exists); without it capture runs the work at once
 * and graph_end gives NULL (see graph_begin). */
bool bp_dev_has_graphs(bp_device *dev);
/* End the capture on s into *g: updated in place where the member can (graph_update). On a
 * device without graphs *g stays NULL (the work ran). */
bp_status bp_dev_graph_update(bp_device *dev, bp_stream *s, bp_graph **g, bool *updated);

/* What crossed between host and device since open, counted by the wrappers where the copies and
 * launches are made: calls and bytes each way, kernel launches, queue submissions (the
 * backend's `submits` member, else replays + syncs). A step's traffic is the difference of two
 * readings. */
typedef struct bp_dev_traffic {
    uint64_t h2d, d2h, h2d_bytes, d2h_bytes, launches, submits;
} bp_dev_traffic;
void bp_dev_traffic_get(bp_device *dev, bp_dev_traffic *out);
/* The same counted for the calling thread over every device since it started (copies and
 * launches are made on the thread that asks for them): the seam reads it around each call, so
 * a run record carries the bytes its call moved. submits: the wrappers' count only. */
void bp_dev_thread_traffic(bp_dev_traffic *out);

/* Case-insensitive substring test: BACKPLANE_VULKAN_DEVICE / BACKPLANE_OPENCL_DEVICE pick a
 * device whose name contains the value. An empty needle matches. */
bool bp_dev_name_contains(const char *name, const char *needle);
bp_status bp_dev_mem_info(bp_device *dev, size_t *total, size_t *free_bytes);
int bp_dev_compute_units(bp_device *dev);
bp_status bp_dev_host_alloc_pinned(bp_device *dev, size_t bytes, void **out);
void bp_dev_host_free_pinned(bp_device *dev, void *p);
#define bp_dev_arena_create(dev, bytes, bufp) \
    bp_dev_arena_create_at((dev), (bytes), (bufp), __FILE__, __LINE__)
bp_status bp_dev_arena_create_at(bp_device *dev, size_t bytes, void **buf, const char *file, int line);
void bp_dev_arena_destroy(bp_device *dev, void *buf);

/* ---- the allocation ledger -------------------------------------------------------------- */
/* Every bp_dev_alloc* is recorded with bytes and call site until bp_dev_free. `dev` NULL in
 * the queries means all devices of the process. */

typedef struct bp_ledger_entry {
    const bp_device *dev;
    void *buf;
    size_t bytes;          /* as requested (the redzone is extra) */
    const char *file;      /* allocating call site */
    int line;
    uint64_t seq;          /* allocation order, process-wide */
} bp_ledger_entry;

size_t bp_ledger_live_bytes(const bp_device *dev);
size_t bp_ledger_live_count(const bp_device *dev);
/* Copy up to max live entries (oldest first) into out; returns the number live. */
size_t bp_ledger_list(const bp_device *dev, bp_ledger_entry *out, size_t max);
/* One line per call site: "  src/cuda/upload.c:41  3 live  12.0 MiB". Nothing when empty. */
void bp_ledger_report(const bp_device *dev, FILE *out);
/* Free every live allocation of dev (all devices when NULL), naming each on `out` (NULL:
 * silent); returns how many were swept. Teardown and tests use it to prove nothing leaked. */
size_t bp_ledger_sweep(bp_device *dev, FILE *out);

/* Redzones: with `bytes` > 0, every later allocation on dev gets a guard band of that many
 * bytes after it, filled with BP_REDZONE_BYTE; with poison, new allocations are filled with
 * BP_POISON_BYTE (0xFF bytes read as NaN floats, so a kernel reading memory nobody wrote shows
 * up as NaN instead of as plausible stale numbers). Off by default; BACKPLANE_REDZONE=<bytes>
 * turns it on for every device at open. */
#define BP_REDZONE_BYTE 0xFD
#define BP_POISON_BYTE 0xFF
void bp_ledger_set_redzone(bp_device *dev, size_t bytes, bool poison);
/* Check every live allocation's guard band (a d2h of each); report each damaged one with its
 * call site and the first bad offset on `out` (NULL: silent). Returns how many are damaged. */
size_t bp_ledger_scan(bp_device *dev, FILE *out);
/* Fill a live allocation with BP_POISON_BYTE (e.g. before reuse); BP_E_INVAL if unknown. */
bp_status bp_ledger_poison(bp_device *dev, void *buf);
/* Ready allocations lo .. hi-1 of dev (in allocation order, as bp_ledger_list gives them) for
 * a kernel under test: each guard band refilled with BP_REDZONE_BYTE, each payload cleared to
 * zero, so a later bp_ledger_scan tells a write past the end from one inside, and no output
 * starts out holding the previous test's numbers. Host memory mapped with
 * bp_dev_host_ptr_to_device in the range is left alone (it is the caller's data). BP_E_INVAL
 * for lo > hi or hi past the live count. Common code, not a member: the ledger knows the
 * allocations; the device only sees the memsets. */
bp_status bp_ledger_poison_redzones(bp_device *dev, size_t lo, size_t hi);
/* Redzone damage found so far on dev (by scans and by bp_dev_free); tests read this. */
size_t bp_ledger_redzone_faults(const bp_device *dev);

/* ---- a backend outside the library -------------------------------------------------------
 * A program registers a device it opened (bp_device_open over its own bp_device_methods) as a
 * backend of the seam, placed in the dispatch order like the built-in ones. It runs matvec, gemm
 * and matmul jobs (a model's matmuls) of weight kind K with its kernel called "matmul_<K>" (K
 * as GGUF spells it: "matmul_Q4_K", "matmul_F32"), launched through bp_dev_launch with typed
 * arguments
 *     (buf W, buf X, buf Y, i64 rows, i64 cols, i64 t),   grid {rows, t, 1}, block {1, 1, 1}
 * computing Y[t][rows] = X[t][cols] W^T: W the weight's GGUF bytes (rows of cols elements one
 * after another), X and Y float32, row-major, each on the device at offset 0 of its own buffer.
 * The library uploads W and X, launches, syncs the default stream and reads Y back. Every other
 * op runs where it ran before (the CPU).
 *
 * A claim is proven before it is made: at registration, for every weight kind whose kernel the
 * device has (bp_dev_has_kernel), the kernel runs on a small weight (5 x 512, t = 3) and must
 * match the CPU reference (bp_ref_gemm) within NMSE 1e-3 -- loose enough for a kernel that
 * rounds activations to 8 bits, far below what a wrong block layout gives (~1). Only the kinds
 * that pass are claimed (matvec, gemm and jobs), the claim <=> launch guard is run over the new
 * tables, and the run records of the calls it runs name the backend (bp_run_record.backend =
 * name) and the kind's kernel, as for every backend.
 *
 * name: lower case [a-z0-9_], 1..15 characters, not a built-in backend's, "cpu", "cpu-ref" or a
 * registered one's; its environment switch is BACKPLANE_<NAME> (0 turns it off, as for every
 * backend). display_name: 1..15 printable characters ("Toy"). position: its place in the order
 * (0 first, before CUDA; a count past the end: just before the CPU). At most 4 at a time.
 * proven (may be NULL) receives how many kinds were claimed; none is BP_E_NOT_FOUND (nothing
 * registered) naming the first kind that failed its proof and why. The device stays the
 * caller's: bp_backend_unregister before bp_device_close. Neither call may run while ops run. */
bp_status bp_backend_register(bp_device *dev, const char *name, const char *display_name, int position,
                              int *proven);
/* Remove a registered backend from the order (BP_E_NOT_FOUND for a name never registered). */
bp_status bp_backend_unregister(const char *name);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_DEVICE_H */
