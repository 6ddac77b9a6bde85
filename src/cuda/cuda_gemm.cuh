// The GEMM kernel templates, shared by cuda_gemm.cu (the default prefill: f16 tensor cores for
// the quantized kinds and F16, f32 for F32/BF16) and cuda_gemm_exact.cu (exact mode: f32 for
// every kind, compiled with --fmad=false). UNRUN ON HARDWARE: compiled and linked here (no GPU on
// the build machine); the per-kind dequant they call is tested on the host
// (tests/test_cuda_host_math.c), the tiling only by tools/gpu_check.sh.
//
// One 64 x 64 output tile per block. Tensor-core path: K in steps of 4 chunks (128); each step
// every thread dequantizes one (row, chunk) of W and loads one (token, chunk) of X into shared
// memory as f16; f32 path: K steps of one chunk, 64 threads per operand. Then
//   - tensor cores (wmma 16x16x16, f16 inputs, f32 accumulate) for every quantized kind and F16:
//     their dequantized values are small multiples of an f16 scale, so f16 holds them -- except
//     when a scale times a quant, or an activation, exceeds 65504: f16 rounds it to inf and the
//     tile's result becomes inf/NaN. The kernel flags that (BP_CU_F16_OVERFLOWS, *ovf) and the
//     dispatch reruns the op on the exact f32 kernel, so an overflow never returns as success;
//   - plain f32 FMA for F32 and BF16, whose range or precision f16 would not keep.
// Launch: grid (ceil(rows/64), ceil(t/64)); gridDim.y is at most 65535, so the dispatch splits t
// into slices of at most BP_CU_GEMM_MAX_T tokens (cuda_kernels.h).
// The tile load is simple (no double buffering, no cp.async); faster staging is future work
// that a GPU run must measure first.
#ifndef BP_CUDA_GEMM_CUH
#define BP_CUDA_GEMM_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_kind_math.h"
#include "cuda/cuda_traits.cuh"

namespace bp_cu {

constexpr int T = BP_CU_GEMM_TILE;

// Chunk kc (32 weights) of one row of a quantized kind, dequantized.
template <class K>
struct QLoad {
    static __device__ __forceinline__ void load(const uint8_t *wr, int kc, int cols, float out[32]) {
        (void)cols;
        bp_cu_chunk c;
        K::unpack(wr + (kc / K::cpb) * K::bb, kc % K::cpb, &c);
        bp_cu_chunk_dequant(&c, K::has_min, out);
    }
};

// Elements 32*kc .. 32*kc+31 of a float-kind row; zero past cols (any cols is allowed).
template <int ES, bool BF>
struct FLoad {
    static __device__ __forceinline__ void load(const uint8_t *wr, int kc, int cols, float out[32]) {
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const int e = 32 * kc + i;
            out[i] = e < cols ? bp_cu_float_elem(ES, BF, wr, e) : 0.0f;
        }
    }
};

__device__ __forceinline__ float x_at(const float *x, int t, int cols, int tok, int e) {
    return tok < t && e < cols ? x[(size_t)tok * cols + e] : 0.0f;
}

}  // namespace bp_cu

template <class L>
__global__ void __launch_bounds__(BP_CU_GEMM_THREADS)
bp_cu_gemm_tc(const uint8_t *__restrict__ w, size_t pitch, int rows, int cols, const float *__restrict__ x,
              int t, float *__restrict__ y, unsigned *__restrict__ ovf) {
    using namespace nvcuda;
    using bp_cu::T;
    // K step of 4 chunks (128): 64 rows x 4 chunks = one (row, chunk) unpack per thread, so all
    // 256 threads dequantize; the same threads then load 64 tokens x 128 activations.
    constexpr int KC = 4, BK = 32 * KC;
    constexpr int LD = BK + 8, LDC = T + 4; // padded strides (multiples of 8 halves / 4 floats)
    // ws and xs during the K loop; the f32 output tile (cs) reuses the same bytes afterwards.
    __shared__ __align__(32) unsigned char smem[2 * T * LD * sizeof(half)];
    static_assert(T * LDC * sizeof(float) <= sizeof(smem), "output tile must fit the staging space");
    half *ws = reinterpret_cast<half *>(smem), *xs = ws + T * LD;
    const int m0 = blockIdx.x * T, n0 = blockIdx.y * T;
    const int tid = threadIdx.x, warp = tid >> 5;
    const int tb = warp >> 1, wc = (warp & 1) * 32; // warp: tokens 16*tb.., weight rows wc..wc+31
    const int lr = tid / KC, lc = tid % KC;         // this thread's (row or token, chunk) to load
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    const int nch = (cols + 31) / 32;
    for (int k0 = 0; k0 < nch; k0 += KC) {
        {
            float v[32];
            const int r = m0 + lr, kc = k0 + lc;
            if (r < rows && kc < nch) L::load(w + (size_t)r * pitch, kc, cols, v);
            else
                for (int i = 0; i < 32; i++) v[i] = 0.0f;
            half *dst = ws + lr * LD + 32 * lc;
            bool big = false; // a finite value f16 rounds to inf: the result would be inf/NaN
            for (int i = 0; i < 32; i++) {
                big |= BP_CU_F16_OVERFLOWS(v[i]);
                dst[i] = __float2half(v[i]);
            }
            half *xd = xs + lr * LD + 32 * lc;
            const int e0 = 32 * (k0 + lc), tok = n0 + lr;
            if (tok < t && e0 + 32 <= cols && (cols & 3) == 0) { // 16-byte aligned: 8 float4 loads
                const float4 *xv = reinterpret_cast<const float4 *>(x + (size_t)tok * cols + e0);
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const float4 f = __ldg(xv + i);
                    big |= BP_CU_F16_OVERFLOWS(f.x) | BP_CU_F16_OVERFLOWS(f.y) | BP_CU_F16_OVERFLOWS(f.z) |
                           BP_CU_F16_OVERFLOWS(f.w);
                    xd[4 * i] = __float2half(f.x);
                    xd[4 * i + 1] = __float2half(f.y);
                    xd[4 * i + 2] = __float2half(f.z);
                    xd[4 * i + 3] = __float2half(f.w);
                }
            } else {
                for (int i = 0; i < 32; i++) {
                    const float f = bp_cu::x_at(x, t, cols, tok, e0 + i);
                    big |= BP_CU_F16_OVERFLOWS(f);
                    xd[i] = __float2half(f);
                }
            }
            // Rare: one relaxed store per offending thread; the host reruns on the f32 kernel.
            if (big) atomicOr(ovf, 1u);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
            wmma::load_matrix_sync(a, xs + tb * 16 * LD + kk, LD);
#pragma unroll
            for (int j = 0; j < 2; j++) {
                // B = W^T (k x rows): element (k, r) at ws[r * LD + k], i.e. column-major.
                wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
                wmma::load_matrix_sync(b, ws + (wc + 16 * j) * LD + kk, LD);
                wmma::mma_sync(acc[j], a, b, acc[j]);
            }
        }
        __syncthreads();
    }
    float *cs = reinterpret_cast<float *>(smem);
    for (int j = 0; j < 2; j++)
        wmma::store_matrix_sync(cs + tb * 16 * LDC + wc + 16 * j, acc[j], LDC, wmma::mem_row_major);
    __syncthreads();
    for (int i = tid; i < T * T; i += BP_CU_GEMM_THREADS) {
        const int tl = i / T, rl = i % T, tok = n0 + tl, r = m0 + rl;
        if (tok < t && r < rows) y[(size_t)tok * rows + r] = cs[tl * LDC + rl];
    }
}

template <class L>
__global__ void __launch_bounds__(BP_CU_GEMM_THREADS)
bp_cu_gemm_f32(const uint8_t *__restrict__ w, size_t pitch, int rows, int cols, const float *__restrict__ x,
               int t, float *__restrict__ y, unsigned *__restrict__ ovf) {
    (void)ovf; // f32 throughout: nothing can overflow a narrower type
    using bp_cu::T;
    __shared__ float ws[32][T + 1];
    __shared__ float xs[32][T + 1];
    const int m0 = blockIdx.x * T, n0 = blockIdx.y * T;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16; // 4 rows x 4 tokens each
    float acc[4][4] = {};
    const int nk = (cols + 31) / 32;
    for (int kc = 0; kc < nk; kc++) {
        if (tid < T) {
            float v[32];
            const int r = m0 + tid;
            if (r < rows) L::load(w + (size_t)r * pitch, kc, cols, v);
            else
                for (int i = 0; i < 32; i++) v[i] = 0.0f;
            for (int i = 0; i < 32; i++) ws[i][tid] = v[i];
        } else if (tid < 2 * T) {
            const int j = tid - T;
            for (int i = 0; i < 32; i++) xs[i][j] = bp_cu::x_at(x, t, cols, n0 + j, 32 * kc + i);
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < 32; k++) {
            float a[4], b[4];
            for (int i = 0; i < 4; i++) a[i] = xs[k][ty * 4 + i];
            for (int j = 0; j < 4; j++) b[j] = ws[k][tx * 4 + j];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const int tok = n0 + ty * 4 + i, r = m0 + tx * 4 + j;
            if (tok < t && r < rows) y[(size_t)tok * rows + r] = acc[i][j];
        }
}

#endif
