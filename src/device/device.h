/* The device interface: what the GPU backends (CUDA, Vulkan, OpenCL, the mock) provide, as one
 * struct of function pointers per device, plus the common code every backend calls around it:
 * the allocation ledger (live allocations with their call sites), redzones, an op cache of
 * kernel handles and scratch buffers, and defaults for every optional member.
 *
 * Layering (DESIGN.md): backends -> device. The seam and the ops never see this header; a
 * backend's dispatch entry points (src/<backend>/) use it to talk to their device.
 *
 * STABILITY: other backends implement bp_device_methods against this header. Changes are
 * additive only: new members go at the END of the struct, and `version` says which members a
 * table fills (members past a table's version are treated as NULL, i.e. defaulted).
 *
 * Memory model. Device memory is named by an opaque handle `void *buf` (what `alloc` returned)
 * plus a byte offset, never by pointer arithmetic on the handle: a Vulkan or OpenCL allocation
 * is a VkBuffer/cl_mem, not an address. CUDA and the mock may hand out real addresses as
 * handles; the common code still passes (buf, offset) pairs to them.
 *
 * Threading. One bp_device may be used from several threads; the common code serializes the
 * ledger, op cache and scratch with a per-device lock. Methods may be called concurrently from
 * several threads unless a member says otherwise; a backend that cannot allow that locks itself.
 *
 * Errors. Every member that can fail returns a bp_status and records the message with
 * bp_fail() (src/core/error.h): "vkAllocateMemory(4096 bytes): VK_ERROR_OUT_OF_DEVICE_MEMORY".
 * Members never abort on a device error; the seam turns a failure into a named fallback.
 *
 * Optional members: each member's comment says REQUIRED, or OPTIONAL with the DEFAULT the
 * common wrapper (bp_dev_*) provides when it is NULL -- in the manner of sqlite3_io_methods.
 * Backends call the bp_dev_* wrappers, never the members directly, so that defaults, the
 * ledger and redzones always apply.
 */
#ifndef BP_DEVICE_H
#define BP_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#define BP_DEVICE_METHODS_VERSION 2

typedef struct bp_device_methods {
    /* REQUIRED. BP_DEVICE_METHODS_VERSION the table was written against. */
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
     * host-visible Vulkan heap). DEFAULT: BP_E_UNSUPPORTED; callers must use alloc + copies. */
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
     * none. The common op cache (bp_dev_kernel) calls this at most once per name per device and
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
    /* OPTIONAL. Start capturing s. DEFAULT: BP_E_UNSUPPORTED; callers then run eagerly. */
    bp_status (*graph_begin)(bp_device *dev, bp_stream *s);
    /* OPTIONAL (REQUIRED with graph_begin). End the capture on s; *out the graph. */
    bp_status (*graph_end)(bp_device *dev, bp_stream *s, bp_graph **out);
    /* OPTIONAL (REQUIRED with graph_begin). Queue one replay on s. */
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
    /* OPTIONAL. Page-locked host memory for fast async copies. DEFAULT: 64-byte aligned
     * malloc / free (async copies then behave as the blocking ones do). */
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
} bp_device_methods;

/* A device: the backend's method table and state, plus the common state (ledger, op cache,
 * scratch, capture flag) behind `common`, owned by device.c. */
struct bp_device {
    const bp_device_methods *m;
    void *impl;                    /* the backend's own state */
    char name[32];                 /* "cuda:0", "mock" */
    struct bp_device_common *common;
};

/* Create a device around a method table (checked: version, name, the REQUIRED members; a bad
 * table is BP_E_INVAL naming the member). impl is the backend's state, kept in dev->impl. */
bp_status bp_device_open(const bp_device_methods *m, void *impl, const char *name, bp_device **out);
/* Sweep the ledger (each leak is reported on stderr with its call site), empty the op cache
 * and scratch, call m->close, free dev. NULL is a no-op. */
void bp_device_close(bp_device *dev);

/* ---- common wrappers: what backends call ------------------------------------------------ */

/* Allocate through the ledger; the macro records the caller's file:line as the call site. */
#define bp_dev_alloc(dev, bytes, bufp) bp_dev_alloc_at((dev), (bytes), (bufp), __FILE__, __LINE__)
#define bp_dev_alloc_managed(dev, bytes, bufp) \
    bp_dev_alloc_managed_at((dev), (bytes), (bufp), __FILE__, __LINE__)
bp_status bp_dev_alloc_at(bp_device *dev, size_t bytes, void **buf, const char *file, int line);
bp_status bp_dev_alloc_managed_at(bp_device *dev, size_t bytes, void **buf, const char *file,
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

/* Op cache: the kernel called `name`, looked up once per device and kept until close. */
bp_status bp_dev_kernel(bp_device *dev, const char *name, bp_kernel **out);
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

bp_status bp_dev_graph_begin(bp_device *dev, bp_stream *s);
bp_status bp_dev_graph_end(bp_device *dev, bp_stream *s, bp_graph **out);
bp_status bp_dev_graph_replay(bp_device *dev, bp_graph *g, bp_stream *s);
void bp_dev_graph_destroy(bp_device *dev, bp_graph *g);
void bp_dev_graph_abort(bp_device *dev, bp_stream *s);
bool bp_dev_stream_is_capturing(bp_device *dev, bp_stream *s);

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
/* Redzone damage found so far on dev (by scans and by bp_dev_free); tests read this. */
size_t bp_ledger_redzone_faults(const bp_device *dev);

#ifdef __cplusplus
}
#endif

#endif /* BP_DEVICE_H */
