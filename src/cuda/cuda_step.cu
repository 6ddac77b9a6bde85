/* The device step's kernels for CUDA (src/gpu/gpu_step.h names them; here each carries the
 * prefix "step_", since the plain matmul path's matvec_<KIND> take other arguments). The per-op
 * arithmetic is cuda_step_math.h and the per-kind block math cuda_kind_math.h, the very code the
 * OpenCL step kernels run on PoCL in the tests; this file holds only the CUDA work decomposition,
 * which mirrors the OpenCL one (src/opencl/cl_step.cl, cl_kernels.cl): blocks of 64 threads, a
 * block index linear over a grid that folds into y past 65535 blocks.
 *
 * UNRUN ON HARDWARE: compiled for sm_80 / sm_90 (+ PTX) here; no GPU has run it. */
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_step_math.h"
#include "cuda/cuda_traits.cuh"
#include "gpu/step_args.h"

#define BP_ST_THREADS 64
#define BP_ST_TILE 16 /* GEMM: rows and tokens of a block's tile (cuda_dispatch.c's mm_tile) */
#define BP_ST_KC 4    /* GEMM: chunks of 32 columns staged at a time; TILE * KC == THREADS */
#define BP_ST_MV_ROWS 2 /* matvec: a warp per row, two per block (cuda_dispatch.c's mv_rows) */

static __device__ __forceinline__ unsigned bp_st_group() { return blockIdx.x + blockIdx.y * gridDim.x; }


/* ---- weights: dot of a row, a chunk dequantized, an element of a float kind ----------------- */
#define BP_ST_LOAD_F32(p, i) (((const float *)(p))[i])
#define BP_ST_LOAD_F16(p, i) bp_cu_f16(((const uint16_t *)(p))[i])
#define BP_ST_LOAD_BF16(p, i) bp_cu_bf16(((const uint16_t *)(p))[i])

/* matvec: lane l of the row's warp takes chunks l, l + 32, ... */
#define BP_ST_MV_HEAD()                                                                            \
    const unsigned lane = threadIdx.x & 31u;                                                       \
    const unsigned row = bp_st_group() * BP_ST_MV_ROWS + threadIdx.x / 32u;                        \
    const uint8_t *wr = w + a.w_off + (size_t)row * a.row_bytes;                                   \
    x += a.x_off;                                                                                  \
    float acc = 0.0f;
#define BP_ST_MV_TAIL()                                                                            \
    acc = bp_cu::warp_sum(acc);                                                                     \
    if (lane == 0 && row < a.rows) y[a.y_row0 + row] = acc;

/* GEMM: a tile of TILE rows x TILE tokens, each thread four tokens of one row. */
#define BP_ST_GEMM_HEAD()                                                                          \
    __shared__ float ws[BP_ST_KC * 32][BP_ST_TILE];                                                \
    __shared__ float xs[BP_ST_KC * 32][BP_ST_TILE];                                                \
    const int lin = threadIdx.x, lx = lin % BP_ST_TILE, ly = lin / BP_ST_TILE;                     \
    const int r0 = blockIdx.x * BP_ST_TILE, t0 = blockIdx.y * BP_ST_TILE;                          \
    const int rows = (int)a.rows, cols = (int)a.cols, t = (int)a.t;                                \
    w += a.w_off;                                                                                  \
    x += a.x_off;                                                                                  \
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#define BP_ST_GEMM_FMA(K)                                                                          \
    __syncthreads();                                                                               \
    for (int k = 0; k < (K); k++) {                                                                \
        const float wv = ws[k][lx];                                                                \
        for (int j = 0; j < 4; j++) acc[j] += wv * xs[k][ly + 4 * j];                              \
    }                                                                                              \
    __syncthreads();
#define BP_ST_GEMM_TAIL()                                                                          \
    for (int j = 0; j < 4; j++)                                                                    \
        if (r0 + lx < rows && t0 + ly + 4 * j < t)                                                 \
            y[(size_t)(t0 + ly + 4 * j) * a.y_stride + a.y_row0 + r0 + lx] = acc[j];
#define BP_ST_XS(KCOLS, K0)                                                                        \
    for (int i = lin; i < BP_ST_TILE * BP_ST_KC * 32; i += BP_ST_THREADS) {                        \
        const int tt = i / (BP_ST_KC * 32), k = i % (BP_ST_KC * 32);                               \
        xs[k][tt] = (t0 + tt < t && k < (KCOLS)) ? x[(size_t)(t0 + tt) * cols + (K0) + k] : 0.0f;  \
    }

/* Chunk c of a row from its first block: unpacked and dequantized into v[32]. */
#define BP_ST_DEQUANT(NAME, CPB, HAS_MIN, ROW, C, V)                                               \
    {                                                                                              \
        bp_cu_chunk ch_;                                                                           \
        bp_cu_unpack_##NAME((ROW) + (size_t)((C) / CPB) * bp_cu::BB_##NAME, (int)((C) % CPB), &ch_); \
        bp_cu_chunk_dequant(&ch_, HAS_MIN, V);                                                     \
    }

/* The weight kernels' signatures: W, X (embed: the step input), Y, the argument block. */
#define BP_ST_MM_KERNEL(OP, NAME)                                                                  \
    extern "C" __global__ void __launch_bounds__(BP_ST_THREADS) step_##OP##_##NAME(                \
        const uint8_t *w, const float *x, float *y, bp_gpu_mm_args a)
#define BP_ST_EMBED_KERNEL(NAME)                                                                   \
    extern "C" __global__ void __launch_bounds__(BP_ST_THREADS) step_embed_##NAME(                 \
        const uint8_t *w, const int *io, float *y, bp_gpu_mm_args a)

/* embed: a block per token, its threads striding over the row. */
#define BP_ST_EMBED_ROW()                                                                          \
    const unsigned i = bp_st_group();                                                              \
    if (i >= a.t) return;                                                                          \
    const int id = io[a.x_off + 2 * i];                                                            \
    if (id < (int)a.y_row0 || id >= (int)(a.y_row0 + a.rows)) return;                              \
    const uint8_t *wr = w + a.w_off + (size_t)(id - (int)a.y_row0) * a.row_bytes;                  \
    float *o = y + a.y_stride + (size_t)i * a.cols;

#define BP_ST_QUANT(NAME, CPB, HAS_MIN)                                                            \
    BP_ST_MM_KERNEL(matvec, NAME) {                                                                \
        BP_ST_MV_HEAD()                                                                            \
        const unsigned nch = a.cols / 32u;                                                         \
        for (unsigned c = lane; c < nch && row < a.rows; c += 32u) {                               \
            float v[32];                                                                           \
            BP_ST_DEQUANT(NAME, CPB, HAS_MIN, wr, c, v)                                            \
            for (int j = 0; j < 32; j++) acc += v[j] * x[c * 32u + j];                             \
        }                                                                                          \
        BP_ST_MV_TAIL()                                                                            \
    }                                                                                              \
    BP_ST_MM_KERNEL(gemm, NAME) {                                                                  \
        BP_ST_GEMM_HEAD()                                                                          \
        const int nch = cols / 32;                                                                 \
        for (int ch0 = 0; ch0 < nch; ch0 += BP_ST_KC) {                                            \
            const int kc = min(BP_ST_KC, nch - ch0), r = lin / BP_ST_KC, cc = lin % BP_ST_KC;      \
            if (r0 + r < rows && cc < kc) {                                                        \
                float v[32];                                                                       \
                BP_ST_DEQUANT(NAME, CPB, HAS_MIN, w + (size_t)(r0 + r) * a.row_bytes, ch0 + cc, v) \
                for (int i = 0; i < 32; i++) ws[cc * 32 + i][r] = v[i];                            \
            } else {                                                                               \
                for (int i = 0; i < 32; i++) ws[cc * 32 + i][r] = 0.0f;                            \
            }                                                                                      \
            BP_ST_XS(kc * 32, ch0 * 32)                                                            \
            BP_ST_GEMM_FMA(kc * 32)                                                                \
        }                                                                                          \
        BP_ST_GEMM_TAIL()                                                                          \
    }                                                                                              \
    BP_ST_EMBED_KERNEL(NAME) {                                                                     \
        BP_ST_EMBED_ROW()                                                                          \
        for (unsigned c = threadIdx.x; c < a.nsub; c += BP_ST_THREADS) {                           \
            float v[32];                                                                           \
            BP_ST_DEQUANT(NAME, CPB, HAS_MIN, wr, c, v)                                            \
            for (int j = 0; j < 32; j++) o[c * 32u + j] = v[j] * a.fscale;                         \
        }                                                                                          \
    }
BP_CU_QUANT_KINDS(BP_ST_QUANT)

#define BP_ST_FLOAT(NAME, ESIZE)                                                                   \
    BP_ST_MM_KERNEL(matvec, NAME) {                                                                \
        BP_ST_MV_HEAD()                                                                            \
        for (unsigned c = lane; c < a.cols && row < a.rows; c += 32u) acc += BP_ST_LOAD_##NAME(wr, c) * x[c]; \
        BP_ST_MV_TAIL()                                                                            \
    }                                                                                              \
    BP_ST_MM_KERNEL(gemm, NAME) {                                                                  \
        BP_ST_GEMM_HEAD()                                                                          \
        for (int k0 = 0; k0 < cols; k0 += BP_ST_KC * 32) {                                         \
            for (int i = lin; i < BP_ST_TILE * BP_ST_KC * 32; i += BP_ST_THREADS) {                \
                const int rr = i / (BP_ST_KC * 32), k = i % (BP_ST_KC * 32);                       \
                ws[k][rr] = (r0 + rr < rows && k0 + k < cols)                                      \
                                ? BP_ST_LOAD_##NAME(w + (size_t)(r0 + rr) * a.row_bytes, k0 + k)   \
                                : 0.0f;                                                            \
            }                                                                                      \
            BP_ST_XS(cols - k0, k0)                                                                \
            BP_ST_GEMM_FMA(BP_ST_KC * 32)                                                          \
        }                                                                                          \
        BP_ST_GEMM_TAIL()                                                                          \
    }                                                                                              \
    BP_ST_EMBED_KERNEL(NAME) {                                                                     \
        BP_ST_EMBED_ROW()                                                                          \
        for (unsigned c = threadIdx.x; c < a.cols; c += BP_ST_THREADS) o[c] = BP_ST_LOAD_##NAME(wr, c) * a.fscale; \
    }
BP_CU_FLOAT_KINDS(BP_ST_FLOAT)

/* ---- norms, elementwise, RoPE, the KV cache: the shared bodies (cuda_step_math.h) ----------- */

extern "C" __global__ void __launch_bounds__(BP_ST_THREADS) step_rms_norm(const float *x, const float *g, float *y,
                                                                         bp_gpu_norm_args a) {
    __shared__ float part[BP_SM_WG];
    const unsigned r = bp_st_group();
    if (r < a.rows) bp_sm_rms_norm_row(x, g, y, a, r, threadIdx.x, part); /* the whole block alike */
}

/* 256 elements a block (gpu_step's grid), four per thread. */
#define BP_ST_ITEMS4(CALL)                                                                         \
    const unsigned i0 = bp_st_group() * 256u + threadIdx.x;                                        \
    for (unsigned k = 0; k < 4 && i0 + 64u * k < a.count; k++) CALL(i0 + 64u * k);
extern "C" __global__ void __launch_bounds__(BP_ST_THREADS) step_eltwise(float *y, const float *x, bp_gpu_elt_args a) {
#define BP_ST_ELT(i) bp_sm_eltwise_item(y, x, a, i)
    BP_ST_ITEMS4(BP_ST_ELT)
}
extern "C" __global__ void __launch_bounds__(BP_ST_THREADS) step_glu(float *gt, const float *u, bp_gpu_glu_args a) {
#define BP_ST_GLU(i) bp_sm_glu_item(gt, u, a, i)
    BP_ST_ITEMS4(BP_ST_GLU)
}

extern "C" __global__ void __launch_bounds__(BP_ST_THREADS) step_rope(float *x, const int *io, const float *f,
                                                                     bp_gpu_rope_args a) {
    bp_sm_rope_item(x, io, f, a, bp_st_group() * BP_ST_THREADS + threadIdx.x);
}

#define BP_ST_KV(NAME, BE, BB)                                                                     \
    extern "C" __global__ void __launch_bounds__(BP_ST_THREADS) step_kv_append_##NAME(             \
        const float *src, uint8_t *cache, const int *io, bp_gpu_kv_args a) {                       \
        bp_sm_kv_append_##NAME(src, cache, io, a, bp_st_group() * BP_ST_THREADS + threadIdx.x);    \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(BP_ST_THREADS) step_attention_##NAME(             \
        const float *q, const uint8_t *kc, const uint8_t *vc, float *o, const int *io, bp_gpu_attn_args a) { \
        __shared__ float qs[256];                                                                  \
        __shared__ float ss[BP_SM_WG];                                                             \
        bp_sm_attention_##NAME(q, kc, vc, o, io, a, blockIdx.x, blockIdx.y, threadIdx.x, qs, ss);  \
    }
BP_SM_KV_KINDS(BP_ST_KV)

/* ---- the registry ------------------------------------------------------------------------------ */
#define BP_ST_ROW_W(NAME, ...)                                                                     \
    {"step_matvec_" #NAME, (const void *)step_matvec_##NAME}, {"step_gemm_" #NAME, (const void *)step_gemm_##NAME}, \
        {"step_embed_" #NAME, (const void *)step_embed_##NAME},
#define BP_ST_ROW_KV(NAME, BE, BB)                                                                 \
    {"step_kv_append_" #NAME, (const void *)step_kv_append_##NAME},                                \
        {"step_attention_" #NAME, (const void *)step_attention_##NAME},

extern "C" const bp_cu_kernel_entry bp_cu_step_kernels[] = {
    BP_CU_QUANT_KINDS(BP_ST_ROW_W) BP_CU_FLOAT_KINDS(BP_ST_ROW_W) BP_SM_KV_KINDS(BP_ST_ROW_KV)
    {"step_rms_norm", (const void *)step_rms_norm},
    {"step_eltwise", (const void *)step_eltwise},
    {"step_glu", (const void *)step_glu},
    {"step_rope", (const void *)step_rope},
    {NULL, NULL},
};
