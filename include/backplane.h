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
} bp_status;

/* Short name of a status ("BP_E_SHAPE"). Never NULL. */
const char *bp_status_name(bp_status s);
/* Message for the last failure on this thread; "" when none. Valid until the next call that
 * fails on this thread. */
const char *bp_last_error(void);
void bp_clear_error(void);

/* ---- kinds ------------------------------------------------------------------------------ */

/* Kind values are the GGUF/ggml type ids. The list lives in src/kinds/kinds.def. */
typedef enum bp_kind {
#define BP_KIND(NAME, ID, BE, BB, ROLE, Q) BP_KIND_##NAME = ID,
#include "kinds.def"
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
 * wants the shape and launches; the CPU last. */
bp_status bp_matvec(bp_weight *w, const float *x, float *y);
/* Y = X W^T for t inputs: X is t x cols, Y is t x rows, both row-major. */
bp_status bp_gemm(bp_weight *w, const float *x, int64_t t, float *y);
/* As bp_matvec / bp_gemm, but on the named backend only: "cpu-ref" (the reference kernel),
 * "cpu", or a backend name from src/seam/backends.def ("vulkan", "cuda", ...). NULL means the
 * seam's own choice. A backend that is not built, not enabled, or has no kernel for the kind is
 * an error (BP_E_UNSUPPORTED) naming why: a forced backend never silently becomes another. */
bp_status bp_matvec_on(bp_weight *w, const char *backend, const float *x, float *y);
bp_status bp_gemm_on(bp_weight *w, const char *backend, const float *x, int64_t t, float *y);
/* What ran the last bp_matvec/bp_gemm on w: backend and kernel, e.g. "Vulkan Q4_K matvec". */
const char *bp_weight_last_path(const bp_weight *w);
/* Print how many ops fell back, from where, and why, since the process started. */
void bp_fallback_report(FILE *out);

/* ---- half precision helpers ------------------------------------------------------------- */

float bp_f16_to_f32(uint16_t h);
uint16_t bp_f32_to_f16(float f);   /* round to nearest even, as numpy's astype(float16) */
float bp_bf16_to_f32(uint16_t h);
uint16_t bp_f32_to_bf16(float f);  /* round to nearest even; NaN stays NaN */

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_H */
