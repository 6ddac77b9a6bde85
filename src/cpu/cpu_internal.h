/* Internals shared by the CPU backend's files: the job passed to kernels, the per-ISA kernel
 * table, the activation formats and the thread pool. */
#ifndef BP_CPU_INTERNAL_H
#define BP_CPU_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "cpu/kernels.h"
#include "kinds/kinds_internal.h"

/* Activations quantized once per call, in OUR layout (not GGUF's): the sum of each block's
 * quants is precomputed so offset kinds (Q4_0's -8, Q4_1's min, Q4_K's mins) cost one
 * multiply per block instead of a second pass. */
typedef struct bp_q8x32 {
    int8_t q[32];
    float d;   /* x ~= d * q */
    int32_t s; /* sum of q */
    float ds;  /* d * s, so an offset term costs one multiply-add per block */
} bp_q8x32;

typedef struct bp_q8x256 {
    int8_t q[256];
    float d;
    int16_t bsums[16]; /* sum of each 16 consecutive q */
} bp_q8x256;

typedef enum bp_cpu_act {
    BP_ACT_F32 = 0,  /* the kernel reads x as floats */
    BP_ACT_Q8X32 = 1,
    BP_ACT_Q8X256 = 2,
    /* For repacked 32-element kinds: blocks padded to a multiple of 8; per pair of blocks the
     * 64 quants as [b0 0..15, b1 0..15, b0 16..31, b1 16..31] (the order a 32-byte load of two
     * blocks' packed nibbles unpacks to); then all block scales d, then all d * sum(q). */
    BP_ACT_Q8X32P = 3,
    /* bp_q8x256 with each pair of 32-element groups' quants stored as [g0 0..15, g1 0..15,
     * g0 16..31, g1 16..31], so 32 bytes of two groups' packed nibbles multiply straight. */
    BP_ACT_Q8X256P = 4,
    /* For the AVX-512 kernels repacked by 4 blocks (avx512/decode_repacked.c): blocks padded to a
     * multiple of 8; per 4 blocks the 128 quants as [b0 0..15, b1 0..15, b2 0..15, b3 0..15,
     * b0 16..31, ..., b3 16..31]; then all block scales d, then all d * sum(q), then per 8 blocks
     * the d * sum(q[0..15]) of each, then the d * sum(q[16..31]) of each (NVFP4, scaled per 16). */
    BP_ACT_Q8X32Q = 5,
    /* x rounded to bf16 (nearest even), zero-padded to bp_cpu_bf16_act_bytes (avx512/bf16_dot.c). */
    BP_ACT_BF16 = 6,
    /* x as f32, each whole 32 columns as their 16 even then their 16 odd ones, the cols % 32
     * left in order, zero-padded to bp_cpu_f32eo_act_bytes: the order in which the exact BF16
     * tiles widen 32 weights with one shift and one mask (avx512/float_kinds.c). */
    BP_ACT_F32EO = 7,
    /* BP_ACT_Q8X32Q's bytes with the quants of each 8 blocks (16 groups of 16: group l = 8 h + b
     * is block b's elements 16 h ..) in 4 zmm, zmm k holding elements 4k..4k+3 of every group
     * (byte 4 l + e: group l's element 4k + e), so that one vpdpbusd lane sums one group: for
     * NVFP4's AVX-512 kernel (avx512/decode_repacked.c), scaled per 16. The scales and sums as Q8X32Q's. */
    BP_ACT_Q8X16I = 8,
    BP_ACT_COUNT
} bp_cpu_act;

/* Bytes of one input's BP_ACT_BF16 activations: 2 * cols rounded up to 64 (whole zmm loads),
 * plus 64 where that is a multiple of 1 KB, so that the GEMM's inputs (this far apart) do not
 * all fall in the same L1 sets as 4096-column rows 8 KB apart would. */
static inline size_t bp_cpu_bf16_act_bytes(int64_t cols) {
    size_t b = ((size_t)cols * 2 + 63) / 64 * 64;
    return b % 1024 ? b : b + 64;
}
/* Bytes of one input's BP_ACT_F32EO activations: cols rounded up to whole 32-column chunks. */
static inline size_t bp_cpu_f32eo_act_bytes(int64_t cols) { return (size_t)((cols + 31) / 32 * 32) * sizeof(float); }

/* Panel GEMM blocking: NR weight rows by KC columns are dequantized once and reused for the
 * whole batch. KC is a multiple of every kind's block (256) so a chunk is whole blocks. */
enum { BP_CPU_NR = 16, BP_CPU_KC = 256, BP_CPU_MR = 6 };

typedef struct bp_cpu_job {
    const bp_kind_traits *kt;
    const uint8_t *w;
    size_t row_bytes;
    int64_t rows, cols, batch;
    const float *x; /* batch x cols */
    const void *xq; /* x quantized per the kernel's activation format (decode) */
    size_t xq_stride; /* bytes between inputs' activations, for multi-input kernels */
    float *y;       /* batch x rows */
    const struct bp_cpu_vec_kernel *vk;
    const struct bp_cpu_packed *packed; /* the repacked weight, for kernels that need one */
    float **scratch; /* per thread: BP_CPU_SCRATCH_FLOATS floats, 64-byte aligned */
    bp_dequant_fn dequant; /* for GEMM panels: the ISA's fast one or the reference */
} bp_cpu_job;

/* 3 f32 panels' worth: each GEMM lays out its own row buffer and packed panels in it. */
enum { BP_CPU_SCRATCH_FLOATS = 3 * BP_CPU_NR * BP_CPU_KC + 1024 };

/* Computes y[r] for r in [r0, r1) of one input (decode). */
typedef void (*bp_cpu_vec_fn)(const bp_cpu_job *job, int64_t r0, int64_t r1);
/* Makes a kernel's repacked copy of a weight; false when out of memory. */
typedef bool (*bp_cpu_pack_fn)(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes,
                               struct bp_cpu_packed *out);

typedef struct bp_cpu_vec_kernel {
    bp_cpu_vec_fn fn;
    bp_cpu_act act;
    const char *name; /* "CPU avx2 Q4_K (q8_K int dot)" */
    /* Up to this batch the kernel runs (once per input, or once for all with multi) instead of
     * the panel GEMM (0: the default, 4): where the two cross (kernels.def, docs/cpu-kernels.md). */
    int max_batch;
    /* Non-NULL: the kernel reads a repacked copy of the weight (job->packed), made by this at
     * first use and kept in bp_weight.backend_state[BP_BACKEND_CPU]; the caller's bytes are
     * never written. Returns false when out of memory. */
    bp_cpu_pack_fn pack;
    /* true: fn computes all job->batch inputs in one pass over the weights (their activations
     * job->xq_stride bytes apart), instead of being called once per input. */
    bool multi;
} bp_cpu_vec_kernel;

/* Zeroed memory for a repacked copy of `rows` x `stride` bytes (NULL when out of memory; free
 * with bp_free). Copies of 2 MiB and more are 2 MiB-aligned and advised onto huge pages: decode
 * streams them, and under THP "madvise" a stream over 4 KiB pages reads ~2x slower cold, the
 * hardware prefetchers stopping at every page.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, cpu_internal.h. */
uint8_t *bp_cpu_packed_alloc(int64_t rows, size_t stride);

/* A repacked weight: rows of row_stride bytes at data, in the kernel's own layout. */
typedef struct bp_cpu_packed {
    bp_kind kind;
    bp_cpu_pack_fn layout; /* the pack function that made it: a different kernel repacks anew */
    size_t row_stride;
    uint8_t *data;
} bp_cpu_packed;

enum { BP_CPU_MAX_KIND = 64 };

typedef struct bp_cpu_ops {
    const char *isa_name;
    bp_cpu_vec_kernel vec[BP_CPU_MAX_KIND]; /* fn NULL: use vec_generic */
    bp_cpu_vec_kernel vec_generic;          /* dequantize a chunk, float dot */
    /* For kinds whose vec kernel repacks: the kernel on the plain layout, run when the
     * repacked copy cannot be allocated (a weight too big to hold twice). */
    bp_cpu_vec_kernel vec_plain[BP_CPU_MAX_KIND];
    /* A second decode kernel (batch 1) for the same kind and activation format, from the level
     * below (the AVX2 kernel an AVX-512 one replaced): where two paths are close, or a wide one
     * may cost clock speed (512-bit ops on some Intel parts). Which one runs: alt_first, or what
     * BACKPLANE_CPU_DECODE says (cpu.c). fn NULL: none. */
    bp_cpu_vec_kernel vec_alt[BP_CPU_MAX_KIND];
    /* The kernel vec[k] replaced where the CPU has AVX512_VBMI (avx512/decode_repacked.c's vpermb lookups;
     * fn NULL: vec[k] needs no VBMI): it runs instead with bp_cpu_set_vbmi(false) or
     * BACKPLANE_CPU_VBMI=0, so that tests reach both on a VBMI machine. Same packed layout. */
    bp_cpu_vec_kernel vec_novbmi[BP_CPU_MAX_KIND];
    /* true: batch 1 runs vec_alt by default (cpu.c: the alternative was the faster one on every
     * machine timed); false: vec. BACKPLANE_CPU_DECODE=time times the two instead. */
    bool alt_first[BP_CPU_MAX_KIND];
    /* Batches (t >= 2) of vec reach it in chunks of a multiple of this many rows (0: 4, as
     * decode): 16 for the AVX-512 float quads, which tile by 16 (a chunk of 40 rows left every
     * third tile half empty); the quantized kinds keep 4, finer chunks balancing better. */
    int vec_row_unit[BP_CPU_MAX_KIND];
    /* Faster dequantizers than the reference for the GEMM panels, per kind (NULL: reference).
     * Same contract as bp_dequant_fn, and bit-identical to the reference: test_cpu_dequant
     * compares every one, value by value. */
    bp_dequant_fn dequant[BP_CPU_MAX_KIND];
    /* Panel GEMM over the thread's share of the row panels. */
    void (*gemm)(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
    const char *gemm_name;
    const char *gemm_isa; /* the instruction set of the GEMM kernel (an ISA path inherits) */
    /* Optional int8 GEMM for the quantized kinds (not F32/F16/BF16): prep quantizes X into a
     * buffer of gemm_q8_bytes(T, cols) that job->xq then points to. */
    void (*gemm_q8)(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
    void (*gemm_q8_prep)(const float *x, int64_t T, int64_t cols, void *buf);
    size_t (*gemm_q8_bytes)(int64_t T, int64_t cols);
    const char *gemm_q8_name;
    /* The activation quantizer of each format on this path (NULL for BP_ACT_F32: x as it is). */
    void (*quant[BP_ACT_COUNT])(const float *x, int64_t n, void *out);
    /* BF16 weights at t >= 2 outside exact mode on CPUs with AVX512_BF16 (avx512/bf16_dot.c):
     * x rounded to bf16 once per call (BP_ACT_BF16), vdpbf16ps products.
     * vec_bf16r (multi-input) up to its max_batch, then gemm_bf16r, which reads job->xq (batch
     * inputs, xq_stride apart; x rounded by quant[BP_ACT_BF16]). fn / gemm NULL: none, the
     * exact kernels run. */
    bp_cpu_vec_kernel vec_bf16r;
    void (*gemm_bf16r)(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
    const char *gemm_bf16r_name;
    /* Read n bytes (n a multiple of 256) as fast as possible; returns a value that depends on
     * every byte so the compiler cannot drop the loads. For the bandwidth figure. */
    uint64_t (*read_sum)(const uint8_t *p, size_t n);
} bp_cpu_ops;

/* ops as the kernel table (kernels.def) makes it for path isa, with the VBMI kernels (vbmi) and
 * the rounded-activation BF16 kernels (bf16r) or without; false where this build has no kernels
 * for the path (a non-x86 build's AVX2 and AVX512). Needs no CPU support: it runs no kernel but
 * the path's table setups, so tests build every path's table on any machine. */
bool bp_cpu_ops_build(bp_cpu_isa isa, bp_cpu_ops *ops, bool vbmi, bool bf16r);
/* Fills the path's lookup tables (BP_CPU_SETUP rows); call once, where the CPU has the path. */
void bp_cpu_setup_tables(bp_cpu_isa isa);
/* Bytes of one input's activations in format act (0 for BP_ACT_F32). */
size_t bp_cpu_act_bytes(bp_cpu_act act, int64_t cols);
/* A GEMM's inputs in near-equal blocks of at most max (a block: a whole pass over the weights,
 * its panels packed again), each a multiple of unit but for the last: the block size. Past ~512
 * inputs the columns of every input that a panel pair reads per depth block no longer stay in L2
 * (seen at t = 1024 and 2048 in the AVX-512 GEMMs, then the AVX2 ones). */
static inline int64_t bp_batch_block(int64_t T, int64_t max, int64_t unit) {
    if (T <= max) return T > 0 ? T : 1;
    const int64_t nblk = (T + max - 1) / max;
    return ((T + nblk - 1) / nblk + unit - 1) / unit * unit;
}

/* The int8 GEMMs' activations (avx512/gemm_int8.c, avx2/gemm_int8.c): int8 per block of 64 columns
 * where 64 divides the row, else 32, then one float scale per block after all the bytes. */
static inline int bp_cpu_q8_block(int64_t cols) { return cols % 64 == 0 ? 64 : 32; }
static inline size_t bp_cpu_q8_prep_bytes(int64_t T, int64_t cols) {
    return (size_t)(T * cols) + sizeof(float) * (size_t)(T * (cols / bp_cpu_q8_block(cols)));
}
/* The GEMM panels' fast dequantizer of kind k on ISA path isa; NULL when that path uses the
 * reference (or is not available here). For test_cpu_dequant. */
bp_dequant_fn bp_cpu_fast_dequant(bp_cpu_isa isa, bp_kind k);
/* For test_cpu_dequant: kind k's direct int8 panel decoder (avx512/gemm_int8.c) over nblocks blocks
 * (at most BP_CPU_KC columns), written out as floats s q (+ o), so each weight can be checked
 * against the reference dequantizer. False where the kind has none (or AVX-512 was not built);
 * the caller checks the AVX-512 path is available here. */
bool bp_cpu_avx512_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out);
/* The same for the AVX2 int8 GEMM's direct panels (avx2/gemm_int8.c; unsigned q with offsets for
 * Q4_0 Q5_0 Q2_0, where the AVX-512 ones are signed). */
bool bp_cpu_avx2g8_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out);
/* avx2/gemm_int8_scale16.c: the AVX2 int8 GEMM's panels for the kinds with a scale per 16 columns (called
 * from avx2/gemm_int8.c's gemm_q8; false for other kinds), and their decoders for the test above. */
bool bp_cpu_avx2g16_gemm(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
bool bp_cpu_avx2g16_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out);

/* Weights below this many bytes run on one thread (the wake-up costs more than it saves).
 * Tests set 0 so that small shapes exercise the row split too. */
void bp_cpu_set_min_parallel_bytes(size_t bytes);
/* false: never repack, run the plain-layout kernels (as when the copy cannot be allocated).
 * Tests use it to cover both. */
void bp_cpu_set_repack(bool on);
/* Tests: false runs the kernels without AVX512_VBMI (ops->vec_novbmi) where the CPU has it; true
 * (the default, unless BACKPLANE_CPU_VBMI=0) the VBMI ones. Not thread-safe against running calls. */
void bp_cpu_set_vbmi(bool on);
/* Whether kind k has a VBMI kernel on the current path (and the CPU has AVX512_VBMI). */
bool bp_cpu_has_vbmi_kernel(bp_kind k);
/* Tests: which of a kind's two decode kernels runs (0: as BACKPLANE_CPU_DECODE says, by
 * default ops->alt_first; 1: the main one, ops->vec; 2: ops->vec_alt where there is one). */
void bp_cpu_set_decode_pick(int pick);
/* Tests: whether BF16 batches (t >= 2, outside exact mode) may take the vdpbf16ps kernels where
 * the CPU has AVX512_BF16: 0 by the CPU's maker (bp_cpu_bf16_dot_used), 1 always, 2 never. */
void bp_cpu_set_bf16_dot(int mode);
/* Whether kind k has an alternative decode kernel on the current ISA path. */
bool bp_cpu_has_decode_alt(bp_kind k);

/* ---- hook for the op layer's batched jobs (cpu_jobs.c; defined at the end of cpu.c) ----- */
typedef enum bp_cpu_job_mode {
    BP_CPU_JOB_DECODE = 0,       /* vk->fn once per input, activations in vk->act */
    BP_CPU_JOB_DECODE_MULTI = 1, /* vk->fn once for all inputs (xq_stride apart) */
    BP_CPU_JOB_GEMM_F32 = 2,     /* ops->gemm over row panels, reads x */
    BP_CPU_JOB_GEMM_Q8 = 3,      /* ops->gemm_q8 over row panels, x prepared by gemm_q8_prep */
    BP_CPU_JOB_GEMM_BF16R = 4,   /* ops->gemm_bf16r over row panels, every input in vk->act (BP_ACT_BF16) */
} bp_cpu_job_mode;
/* job as bp_cpu_gemm would run w at batch t (kernel, repacked copy made, dequantizer), not run;
 * *abytes: activation bytes per input (decode, GEMM_BF16R) or for all of x (GEMM_Q8). x, y, xq, scratch
 * are the caller's to set. */
bp_status bp_cpu_job_setup(bp_weight *w, int64_t t, bp_cpu_job *job, bp_cpu_job_mode *mode, size_t *abytes);
const bp_cpu_ops *bp_cpu_ops_current(void);
/* Tests: the decode kernel (or GEMM) the last bp_cpu_gemm on this thread ran, the other NULL. */
void bp_cpu_last_run(bp_cpu_vec_fn *vec, void (**gemm)(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1));
void bp_cpu_quantize_act(const bp_cpu_ops *ops, bp_cpu_act act, const float *x, int64_t cols, void *buf);
/* Weights below this many bytes run on one thread (bp_cpu_set_min_parallel_bytes). */
size_t bp_cpu_min_parallel_bytes(void);

/* ---- thread pool ----------------------------------------------------------------------- */
/* Chunks 0..n-1 of one pool call as per-thread runs (chunk_runs.c says why): thread ith takes
 * its own run front to back, then helps the others from their backs. Every chunk is handed out
 * exactly once, whatever threads run. Objects of this type need 64-byte alignment. */
enum { BP_CHUNK_RUNS = 64 };
typedef struct bp_chunk_runs {
    int nruns;
    struct {
        _Alignas(64) _Atomic uint64_t v; /* [lo, hi) as hi << 32 | lo */
    } run[BP_CHUNK_RUNS];
} bp_chunk_runs;
/* Units (rows / unit) per chunk for about 8 chunks per thread, chunk numbers within 32 bits. */
int64_t bp_chunk_rows_per(int64_t units, int nth);
void bp_chunk_runs_init(bp_chunk_runs *cr, int64_t nchunks, int nth);
/* Thread ith's next chunk, -1 when none is left; *k starts at 0 for each thread's call. */
int64_t bp_chunk_runs_next(bp_chunk_runs *cr, int ith, int *k);

typedef void (*bp_pool_fn)(void *ctx, int ith, int nth);

/* Take the pool for one call. False when another thread holds it (the caller then runs on its
 * own thread with its own scratch): two user threads never share workers or scratch. */
bool bp_pool_acquire(void);
void bp_pool_release(void);
/* Run fn(ctx, i, n) for i in [0, n) (the caller is thread 0) and wait; the pool must be held,
 * n <= bp_pool_size(). A worker that has not started by the time the caller has finished its
 * own call is cancelled, never waited for: fn must share work out dynamically (an atomic
 * chunk counter, or bp_chunk_runs, whose idle threads help the others), so that the caller alone
 * can finish it. On a shared machine a worker may
 * not be scheduled for milliseconds, and a static split would stall the whole call on it. */
void bp_pool_run(bp_pool_fn fn, void *ctx, int n);
int bp_pool_size(void);
bp_status bp_pool_resize(int n);
/* While held: per-thread scratch of BP_CPU_SCRATCH_FLOATS floats, and one buffer of at least
 * `bytes` for quantized activations (grown only when a call needs more than any before). */
float **bp_pool_scratch(void);
void *bp_pool_act_buffer(size_t bytes);

#endif
