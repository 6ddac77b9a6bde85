/* backplane: quantized (GGUF) transformer inference through one accelerator seam.
 *
 * Public API. Every function that can fail returns a bp_status; on failure a message naming
 * what and where is available from bp_last_error() on the same thread. No function aborts on
 * user input.
 */
#ifndef BACKPLANE_H
#define BACKPLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every declaration from here to the matching pop is exported from libbackplane.so, which is
 * compiled with -fvisibility=hidden: a public function needs no marking, and nothing internal
 * leaks. Each public header (include/backplane_*.h) does the same around its own declarations;
 * tests/install/exports.sh fails on a public declaration that is not exported and on an
 * exported symbol no public header declares. */
#pragma GCC visibility push(default)

/* ---- version ---------------------------------------------------------------------------- */

/* The library's version, "MAJOR.MINOR.PATCH" (the CMake project version); `backplane --version`
 * prints the same. The shared library's SONAME carries the ABI version (libbackplane.so.0). */
const char *bp_version(void);

/* ---- status and errors ------------------------------------------------------------------ */

typedef enum bp_status {
    BP_OK = 0,
    BP_E_INVAL = 1,       /* bad argument: NULL pointer, negative size, short buffer */
    BP_E_KIND = 2,        /* unknown kind id, or an operation the kind does not support */
    BP_E_SHAPE = 3,       /* a shape that does not fit (row not a whole number of blocks, ...) */
    BP_E_NOMEM = 4,       /* an allocation failed */
    BP_E_IO = 5,          /* a file could not be opened, read, mapped or written */
    BP_E_FORMAT = 6,      /* a malformed file */
    BP_E_DEVICE = 7,      /* a device or driver error */
    BP_E_UNSUPPORTED = 8, /* not built in, or not available on this machine */
    BP_E_NOT_FOUND = 9,   /* a named thing (tensor, key, backend) does not exist */
    BP_E_DEVICE_LOST = 10, /* the device is unusable for the rest of the process (a sticky CUDA
                              error, VK_ERROR_DEVICE_LOST); its backend is disabled */
    BP_E_FALLBACK = 11,   /* strict mode: the op would have fallen back from the backend its
                             route names; the message names op, kind, shape, backend, cause */
} bp_status;

/* Short name of a status ("BP_E_SHAPE"). Never NULL. */
const char *bp_status_name(bp_status s);
/* Message for the last failure on this thread; "" when none. Valid until the next call that
 * fails on this thread. */
const char *bp_last_error(void);
void bp_clear_error(void);

/* ---- kinds ------------------------------------------------------------------------------ */

/* Kind values are the GGUF/ggml type ids. The list lives in include/backplane_kinds.def. */
typedef enum bp_kind {
#define BP_KIND(NAME, ID, BE, BB, ROLE, Q) BP_KIND_##NAME = ID,
#include "backplane_kinds.def"
#undef BP_KIND
} bp_kind;

typedef enum bp_kind_role {
    BP_ROLE_W = 0, /* a weight kind (one of the 28) */
    BP_ROLE_A = 1, /* activation kind used inside dot products */
    BP_ROLE_D = 2, /* plain data (integers, F64) */
} bp_kind_role;

typedef struct bp_kind_info {
    bp_kind kind;
    uint32_t gguf_id;
    const char *name;        /* as GGUF spells it: "Q4_K" */
    uint32_t block_elems;    /* elements per block */
    uint32_t block_bytes;    /* bytes per block */
    bp_kind_role role;
    bool can_quantize;       /* this build has a quantizer from f32 */
    double bits_per_weight;  /* 8 * block_bytes / block_elems */
} bp_kind_info;

/* Number of rows in the kind table (all roles). */
int bp_kind_table_size(void);
/* Row i of the kind table, in GGUF id order; NULL when i is out of range. */
const bp_kind_info *bp_kind_at(int i);
/* The row for a GGUF type id; NULL (and BP_E_KIND set) when the id names no kind. */
const bp_kind_info *bp_kind_lookup(uint32_t gguf_id);
/* Case-sensitive lookup by GGUF name ("IQ4_XS"); NULL (and BP_E_KIND set) if unknown. */
const bp_kind_info *bp_kind_by_name(const char *name);
/* Bytes of one row of n elements; BP_E_SHAPE when n is not a whole number of blocks or the
 * size overflows. */
bp_status bp_kind_row_bytes(bp_kind k, int64_t n, size_t *bytes);

/* ---- CPU reference kernels (the correctness oracle) ------------------------------------- */

/* dst[0..n) = the n values encoded in src. src_bytes must be at least the row's size. */
bp_status bp_dequantize(bp_kind k, const void *src, size_t src_bytes, float *dst, int64_t n);
/* Encode n floats into dst (dst_bytes at least the row's size). BP_E_KIND for kinds without a
 * quantizer (see bp_kind_info.can_quantize). */
bp_status bp_quantize(bp_kind k, const float *src, int64_t n, void *dst, size_t dst_bytes);
/* *out = sum_i w[i] * x[i] over one row of n elements (accumulated in double). */
bp_status bp_ref_dot(bp_kind k, const void *row, size_t row_bytes, const float *x, int64_t n,
                     float *out);
/* y[r] = sum_c W[r][c] * x[c]; W is rows x cols of kind k, rows stored one after another
 * (GGUF order: ne0 = cols, ne1 = rows). */
bp_status bp_ref_matvec(bp_kind k, const void *w, size_t w_bytes, int64_t rows, int64_t cols,
                        const float *x, float *y);
/* Y = X W^T: X is t x cols (row-major), Y is t x rows (row-major). */
bp_status bp_ref_gemm(bp_kind k, const void *w, size_t w_bytes, int64_t rows, int64_t cols,
                      const float *x, int64_t t, float *y);

/* ---- weights and dispatch through the seam ---------------------------------------------- */

/* A weight matrix of kind k, rows x cols (GGUF order: ne0 = cols, ne1 = rows), over bytes the
 * caller owns and keeps alive and unchanged until bp_weight_free. Backends cache their own
 * copies (device uploads, repacked layouts) inside it; the caller's bytes are never written. */
typedef struct bp_weight bp_weight;
bp_status bp_weight_create(bp_kind k, const void *data, size_t bytes, int64_t rows, int64_t cols,
                           bp_weight **out);
void bp_weight_free(bp_weight *w);

/* y[rows] = W x, on the first backend in precedence order that is enabled, claims the kind,
 * wants the shape and launches; the CPU last.
 *
 * Non-finite activations: when any value of x is NaN or +/-Inf, the call (this one, bp_gemm,
 * and the forced variants below once the backend is known to be usable) runs the CPU reference
 * kernel (bp_ref_matvec / bp_ref_gemm) instead, so every backend and kernel path gives the
 * reference's IEEE result (NaN and Inf propagate as double arithmetic makes them: a NaN in x
 * makes every output NaN; an Inf gives +/-Inf, or NaN where it meets a zero weight or an
 * opposite Inf), and bp_weight_last_path says "CPU reference (non-finite input)". Kernels that
 * quantize x to 8 bits would otherwise drop a NaN silently. Finite x costs one scan of x. */
bp_status bp_matvec(bp_weight *w, const float *x, float *y);
/* Y = X W^T for t inputs: X is t x cols, Y is t x rows, both row-major. */
bp_status bp_gemm(bp_weight *w, const float *x, int64_t t, float *y);
/* As bp_matvec / bp_gemm, but on the named backend only: "cpu-ref" (the reference kernel),
 * "cpu", or a backend name from src/backend/backends.def ("vulkan", "cuda", ...). NULL means the
 * seam's own choice. A backend that is not built, not enabled, or has no kernel for the kind is
 * an error (BP_E_UNSUPPORTED) naming why: a forced backend never silently becomes another. */
bp_status bp_matvec_on(bp_weight *w, const char *backend, const float *x, float *y);
bp_status bp_gemm_on(bp_weight *w, const char *backend, const float *x, int64_t t, float *y);
/* ---- run records: what really ran a call --------------------------------------------- */
/* The seam fills one record per call where the work ran (src/seam/walk.c): every report --
 * `run`'s summary, `--profile`, `probe`, bp_route -- reads records, never a string rebuilt
 * later. Strings are made from a record only to print it (bp_run_record_label). */
typedef struct bp_run_record {
    int op;                 /* bp_op_name(op): "matvec", "gemm", "jobs", "attention", ... */
    bp_kind kind, kind2;    /* the call's kinds (kind2: V cache / MoE down kind; else = kind) */
    int64_t batch;          /* t: 1 for a decode matvec */
    char backend[16];       /* "vulkan", "cpu", "mock" */
    char display[16];       /* "Vulkan", "CPU", "Mock" */
    char kernel[256];       /* the kernel: a GPU claim's name ("Q4_K", "attention Q8_0") or the
                               CPU's ("CPU avx512 Q4_K", "CPU reference") */
    bool per_position;      /* a gemm as t matvecs: the backend claims no gemm for the kind */
    char fallback_from[16]; /* the first backend that failed this call (display name); "" when
                               none did */
    char cause[200];        /* its error */
    bool part;              /* a step: the first part of a step split by a device budget (the
                               CPU's layers); the step's tokens are counted by its other part */
} bp_run_record;
/* One line for a record: "Vulkan Q4_K gemm", "Vulkan attention Q8_0", "CPU avx2 Q4_K",
 * "Vulkan per-position matvec", "... (fallback from CUDA: <cause>)". Writes buf, returns it. */
const char *bp_run_record_label(const bp_run_record *r, char *buf, size_t len);
/* What ran the last bp_matvec/bp_gemm (or matmul job) on w. BP_E_NOT_FOUND when nothing has
 * run it yet. */
bp_status bp_weight_last_record(const bp_weight *w, bp_run_record *out);
/* bp_run_record_label of that record ("none yet" before the first call). Returns a
 * thread-local copy, valid until the next call on this thread (ops on one weight may run on
 * several threads). */
const char *bp_weight_last_path(const bp_weight *w);
/* Exact mode: no reduced-precision matrix units (a GPU GEMM on f16 tensor cores rounds weights
 * and activations to f16). Outside it, CPU BF16 batches (t >= 2) on CPUs with AVX512_BF16 round
 * the activations to bf16 for vdpbf16ps (NMSE ~2.5e-6); exact mode keeps them in f32. Default
 * from BACKPLANE_EXACT=1|true|on, read once at first use; the setter overrides it for the whole
 * process, and takes effect from the next call. */
bool bp_exact_mode(void);
void bp_set_exact_mode(bool on);
/* Print how many ops fell back, from where, and why, since the process started. */
void bp_fallback_report(FILE *out);
/* Device memory the library holds now, over every device of the process (the allocation
 * ledger): live bytes and live allocations; either pointer may be NULL. Freeing everything a
 * program made brings both back to where they were, which is how a leak shows. */
void bp_device_memory(uint64_t *live_bytes, uint64_t *live_allocations);
/* The most device bytes live at once since the process started or the last reset (reset true:
 * returns the peak, then starts again from what is live now): what `run --plan-check` holds a
 * plan's device bytes to. */
uint64_t bp_device_memory_peak(bool reset);
/* The library's host allocations (every one goes through one door, src/core/alloc.h): usable
 * bytes live now and the most since the process started or the last reset (reset true: then
 * starts again from what is live now). Either pointer may be NULL. */
void bp_host_memory(uint64_t *live_bytes, uint64_t *peak_bytes, bool reset);

/* ---- backends: what is here, where an op will run, preference, strict mode -------------- */
/* Backends in dispatch order (src/backend/backends.def), the CPU last. Asking may run a backend's
 * device probe (once per process). The strings stay valid until the process ends. */
typedef struct bp_backend_info {
    const char *name;        /* "cuda", "metal", "vulkan", "opencl", "cpu" */
    const char *display;     /* "CUDA", ..., "CPU" */
    bool compiled;           /* built into this library */
    bool enabled;            /* runs ops in this process */
    const char *reason;      /* why: "BACKPLANE_VULKAN=0 forces it off", "llvmpipe (...) is a CPU
                                implementation of Vulkan; ...", "probe found NVIDIA H200 ..." */
    const char *device;      /* the device's name; "" when no device was opened; the CPU's ISA */
    bool cpu_implementation; /* the device is a CPU implementation of the API (lavapipe, PoCL) */
    const char *unverified;  /* NULL, or why its kernels are not proven ("UNRUN ON HARDWARE") */
} bp_backend_info;
int bp_backend_count(void);
/* Row i (0 .. bp_backend_count() - 1); BP_E_INVAL out of range. */
bp_status bp_backend_info_at(int i, bp_backend_info *out);

/* Where an op of kind k on a rows x cols weight with batch `batch` (1: a decode matvec) runs
 * now -- the rule bp_matvec / bp_gemm apply (enabled, claims, BACKPLANE_<B>_MIN_WORK, the cost
 * model, the preference). A launch error at run time still falls back (or fails in strict
 * mode). */
typedef struct bp_route_info {
    char backend[16];  /* "vulkan", "cpu" */
    char display[16];  /* "Vulkan", "CPU" */
    char path[128];    /* what runs: "Vulkan Q4_K gemm", "Vulkan per-position matvec", "CPU avx512 Q4_K" */
    bool per_position; /* a prefill as t matvecs (the backend has no GEMM for the kind) */
    char why[768];     /* why each backend before it passed: "cuda: not compiled ...; vulkan: ..." */
} bp_route_info;
bp_status bp_route(bp_kind k, int64_t rows, int64_t cols, int64_t batch, bp_route_info *out);
/* The same rule for any op of the op table (bp_op_name: "matvec", "gemm", "jobs", "attention",
 * "norm", ...) at a shape: weight ops a rows x cols weight and batch t (conv2d: cout x k*k*cin,
 * t = output pixels); activation ops rows 1, cols the row length, batch the rows; attention
 * rows = heads, cols = head dim x keys, batch = queries. kind: the weight kind, the KV kind
 * (attention) or F32 (activation ops). *record gets what the call would run: the record the
 * run then fills, as far as the route can know it (not a later launch error's fallback). */
bp_status bp_route_op(const char *op, bp_kind k, int64_t rows, int64_t cols, int64_t batch, bp_run_record *record,
                      char *why, size_t why_len);

/* Prefer or force one backend for the whole process ("cuda", "metal", "vulkan", "opencl",
 * "cpu"; NULL clears). BP_PREFER: it is tried first, then the usual order; when it cannot run
 * (not built, disabled, no device) the call still succeeds and prints one line on stderr,
 * "[CUDA: <why>; using CPU]". "cpu" runs every op on the CPU. BP_FORCE: only that backend (and
 * the CPU for kinds it does not claim); it takes every shape; forcing a backend that is not
 * built or not enabled is an error (BP_E_UNSUPPORTED) naming why, and changes nothing.
 * Default: BACKPLANE_BACKEND=cuda|vulkan|opencl|metal|cpu as a preference, read at first use.
 * Device choice per backend: BACKPLANE_CUDA_DEVICE (index), BACKPLANE_VULKAN_DEVICE and
 * BACKPLANE_OPENCL_DEVICE (index or name substring), read when the device is opened. */
typedef enum bp_backend_pref { BP_PREFER = 0, BP_FORCE = 1 } bp_backend_pref;
bp_status bp_set_backend_preference(const char *name, bp_backend_pref mode);
/* The preference in effect (NULL when none); *mode (may be NULL) gets its mode. */
const char *bp_backend_preference(bp_backend_pref *mode);

/* Strict mode: every fallback becomes an error. An op whose backend fails (a launch error, a
 * lost device) returns BP_E_FALLBACK naming op, kind, shape, backend and cause, and nothing
 * runs on the CPU in its place. Default from BACKPLANE_STRICT=1|true|on, read once at first
 * use; the setter overrides it for the whole process. */
bool bp_strict_mode(void);
void bp_set_strict(bool on);

/* ---- half precision helpers ------------------------------------------------------------- */

float bp_f16_to_f32(uint16_t h);
uint16_t bp_f32_to_f16(float f);   /* round to nearest even, as numpy's astype(float16) */
float bp_bf16_to_f32(uint16_t h);
uint16_t bp_f32_to_bf16(float f);  /* round to nearest even; NaN stays NaN */

/* ---- GGUF files ------------------------------------------------------------------------ */
/* A GGUF v2/v3 file, read by mmap (or from a caller's buffer) and validated completely at open:
 * every count, length, offset and dimension is checked against the file size before use, so
 * every pointer handed out below points inside the file. Nothing is copied except key and
 * tensor names (NUL-terminated); tensor data is a zero-copy pointer into the mapping. */
typedef struct bp_gguf bp_gguf;

/* Metadata value types; the values are the GGUF type ids. */
typedef enum bp_gguf_type {
    BP_GGUF_U8 = 0, BP_GGUF_I8 = 1, BP_GGUF_U16 = 2, BP_GGUF_I16 = 3, BP_GGUF_U32 = 4,
    BP_GGUF_I32 = 5, BP_GGUF_F32 = 6, BP_GGUF_BOOL = 7, BP_GGUF_STRING = 8, BP_GGUF_ARRAY = 9,
    BP_GGUF_U64 = 10, BP_GGUF_I64 = 11, BP_GGUF_F64 = 12,
} bp_gguf_type;
/* "u32", "string", "array", ...; "?" for a value outside the enum. */
const char *bp_gguf_type_name(bp_gguf_type t);

/* A view of one metadata value inside the file. Scalars: data points at its little-endian
 * bytes (possibly unaligned; read them with the getters). Strings: data/len are the bytes (not
 * NUL-terminated). Arrays: elem_type, len = element count, data = first element. */
typedef struct bp_gguf_value {
    bp_gguf_type type;
    bp_gguf_type elem_type; /* arrays only */
    const void *data;
    uint64_t len;           /* string bytes, or array elements */
    uint64_t bytes;         /* bytes from data to the end of the value */
    uint64_t offset;        /* file offset where the value starts (its length/count field) */
} bp_gguf_value;

/* Open and validate; *out is NULL on failure, with a message naming the byte offset and what
 * was wrong (BP_E_IO: cannot open/map; BP_E_FORMAT: malformed; BP_E_KIND: unknown kind id). */
bp_status bp_gguf_open(const char *path, bp_gguf **out);
/* The same over a caller's buffer, which must stay alive and unchanged until bp_gguf_close. */
bp_status bp_gguf_open_memory(const void *buf, size_t len, bp_gguf **out);
void bp_gguf_close(bp_gguf *f); /* NULL is fine */

uint32_t bp_gguf_version(const bp_gguf *f);
uint32_t bp_gguf_alignment(const bp_gguf *f);   /* general.alignment, or 32 */
uint64_t bp_gguf_data_offset(const bp_gguf *f); /* file offset of the tensor data section */
uint64_t bp_gguf_file_size(const bp_gguf *f);

/* Metadata, in file order. */
int64_t bp_gguf_kv_count(const bp_gguf *f);
const char *bp_gguf_kv_key(const bp_gguf *f, int64_t i); /* NULL when out of range */
bp_status bp_gguf_kv_value(const bp_gguf *f, int64_t i, bp_gguf_value *v);
/* Index of key, or -1 when absent (no error recorded). */
int64_t bp_gguf_find_key(const bp_gguf *f, const char *key);
/* Value of key; BP_E_NOT_FOUND when absent. */
bp_status bp_gguf_get(const bp_gguf *f, const char *key, bp_gguf_value *v);
/* Typed getters. Integers convert between widths only when the value fits exactly (a negative
 * i32 is not a u64); f64 accepts any integer or float; BP_E_FORMAT names key and stored type. */
bp_status bp_gguf_get_u64(const bp_gguf *f, const char *key, uint64_t *out);
bp_status bp_gguf_get_i64(const bp_gguf *f, const char *key, int64_t *out);
bp_status bp_gguf_get_f64(const bp_gguf *f, const char *key, double *out);
bp_status bp_gguf_get_bool(const bp_gguf *f, const char *key, bool *out);
bp_status bp_gguf_get_str(const bp_gguf *f, const char *key, const char **s, size_t *len);
/* The same conversions on a value view (an array element, for instance). */
bp_status bp_gguf_value_u64(const bp_gguf_value *v, uint64_t *out);
bp_status bp_gguf_value_i64(const bp_gguf_value *v, int64_t *out);
bp_status bp_gguf_value_f64(const bp_gguf_value *v, double *out);
bp_status bp_gguf_value_bool(const bp_gguf_value *v, bool *out);
bp_status bp_gguf_value_str(const bp_gguf_value *v, const char **s, size_t *len);
/* Elements of an array value: *elem = element i (O(1) for fixed-size elements, O(i) for strings
 * and nested arrays); bp_gguf_array_next walks them in order: prev NULL gives element 0,
 * otherwise the element after prev. BP_E_NOT_FOUND past the end. */
bp_status bp_gguf_array_at(const bp_gguf_value *arr, uint64_t i, bp_gguf_value *elem);
bp_status bp_gguf_array_next(const bp_gguf_value *arr, const bp_gguf_value *prev, bp_gguf_value *elem);

/* Tensors, in file order. */
typedef struct bp_gguf_tensor {
    const char *name;
    bp_kind kind;
    const bp_kind_info *kind_info;
    uint32_t n_dims;        /* 0..4 */
    int64_t ne[4];          /* ne[0] = elements per row (columns); unused dims are 1 */
    int64_t n_elems;
    size_t bytes;
    uint64_t offset;        /* absolute file offset of the data */
    uint64_t info_offset;   /* file offset of the tensor's info record */
    const void *data;       /* zero-copy, inside the mapping; valid until bp_gguf_close */
} bp_gguf_tensor;
int64_t bp_gguf_tensor_count(const bp_gguf *f);
const bp_gguf_tensor *bp_gguf_tensor_at(const bp_gguf *f, int64_t i); /* NULL when out of range */
/* NULL (and BP_E_NOT_FOUND recorded) when no tensor has that name. */
const bp_gguf_tensor *bp_gguf_find_tensor(const bp_gguf *f, const char *name);

/* A GGUF v3 writer, good for tests and tools. Keys and tensor names must be unique; tensor
 * data is referenced, not copied: keep it alive until the write. */
typedef struct bp_gguf_writer bp_gguf_writer;
bp_status bp_gguf_writer_create(bp_gguf_writer **out);
void bp_gguf_writer_free(bp_gguf_writer *w);
/* Also writes general.alignment (u32). Power of two; default 32 (then no key is written). */
bp_status bp_gguf_writer_set_alignment(bp_gguf_writer *w, uint32_t alignment);
/* value points at the C type of `type` (uint8_t, ..., bool for BP_GGUF_BOOL, double for F64). */
bp_status bp_gguf_writer_add_scalar(bp_gguf_writer *w, const char *key, bp_gguf_type type,
                                    const void *value);
bp_status bp_gguf_writer_add_string(bp_gguf_writer *w, const char *key, const char *s, size_t len);
/* An array of a fixed-size element type, elems as a C array of that type. */
bp_status bp_gguf_writer_add_array(bp_gguf_writer *w, const char *key, bp_gguf_type elem_type,
                                   const void *elems, uint64_t count);
bp_status bp_gguf_writer_add_string_array(bp_gguf_writer *w, const char *key,
                                          const char *const *strs, uint64_t count);
/* A copy of a value read from a file (any type, nested arrays included): how a tool carries
 * metadata over from one file to another. general.alignment (u32) also sets the alignment. */
bp_status bp_gguf_writer_add_value(bp_gguf_writer *w, const char *key, const bp_gguf_value *v);
/* ne[0] = elements per row; bytes must equal the tensor's size for its kind and shape. */
bp_status bp_gguf_writer_add_tensor(bp_gguf_writer *w, const char *name, bp_kind kind,
                                    uint32_t n_dims, const int64_t *ne, const void *data,
                                    size_t bytes);
bp_status bp_gguf_writer_write_file(bp_gguf_writer *w, const char *path);
/* *buf is malloc'd; the caller frees it. */
bp_status bp_gguf_writer_write_memory(bp_gguf_writer *w, void **buf, size_t *len);

/* ---- end of GGUF files ------------------------------------------------------------------ */

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

/* Public areas with their own headers. */
#include "backplane_ops.h"       /* the op layer: matmul jobs, norms, RoPE, activations, softmax,
                                    KV cache, attention, stats */
#include "backplane_tokenizer.h" /* tokenizer and sampler */
#include "backplane_ops_conv_moe.h" /* conv2d with a fused input norm, MoE routed experts */
#include "backplane_model.h"     /* models: load, contexts with a KV cache, evaluate, logits */
#include "backplane_device.h"    /* the device interface a GPU backend implements, and
                                    registering one written outside the library */

#endif /* BACKPLANE_H */
