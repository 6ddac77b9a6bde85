// Decode kernels: y = W x for one token, every weight kind. UNRUN ON HARDWARE: compiled and
// linked here (no GPU on the build machine); the per-kind arithmetic they call is tested on
// the host (tests/test_cuda_host_math.c), the launch geometry only by tools/gpu_check.sh.
//
// Quantized kinds: x is first quantized to q8 per chunk of 32 (quantize_q8), then one warp per
// weight row walks the row 32 chunks at a time: the warp stages the span of blocks those
// chunks live in to shared memory with coalesced 8-byte loads (blocks are 17..210 bytes, so
// per-lane loads straight from global would be unaligned byte loads), each lane unpacks one
// chunk and takes its dp4a dot against the q8 activations. Float kinds (F32/F16/BF16) read
// 16-byte vectors of the row and x directly.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_kind_math.h"

static_assert(sizeof(bp_cu_xq) == BP_CU_XQ_BYTES, "bp_cu_xq layout");

#include "cuda/cuda_traits.cuh"

// One warp per chunk: the same rounding as bp_cu_quantize_x32 (amax / 127, round to nearest
// even, clamp to +-127), so the host test of that function covers this kernel's numbers.
__global__ void __launch_bounds__(BP_CU_QUANT_THREADS)
bp_cu_quantize_q8(const float *__restrict__ x, bp_cu_xq *__restrict__ xq, int nchunks) {
    const int lane = threadIdx.x & 31;
    const int ch = blockIdx.x * (BP_CU_QUANT_THREADS / 32) + (threadIdx.x >> 5);
    if (ch >= nchunks) return;
    const float v = x[32 * ch + lane];
    float amax = fabsf(v);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    int q = __float2int_rn(v * id);
    q = q > 127 ? 127 : q < -127 ? -127 : q;
    reinterpret_cast<int8_t *>(xq[ch].q)[lane] = (int8_t)q;
    int s = q;
    for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o); // sums of each 16
    if (lane == 0) {
        xq[ch].d = d;
        xq[ch].s[0] = s;
        xq[ch].pad_ = 0;
    }
    if (lane == 16) xq[ch].s[1] = s;
}

template <class K>
__global__ void __launch_bounds__(BP_CU_MV_THREADS)
bp_cu_matvec_q(const uint8_t *__restrict__ w, size_t pitch, int rows, int cols,
               const float *__restrict__ x, const bp_cu_xq *__restrict__ xq, float *__restrict__ y) {
    (void)x;
    // Bytes of 32 chunks: a multiple of 8 for every kind (checked below), so each span starts
    // 8-byte aligned when the row does (pitch is a multiple of 16).
    constexpr int SPAN = 32 / K::cpb * K::bb;
    static_assert(SPAN % 8 == 0, "span of 32 chunks must be 8-byte aligned");
    __shared__ uint2 stage[BP_CU_MV_ROWS][SPAN / 8 + 1]; // + 8 bytes of slack for bp_cu_u32
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = blockIdx.x * BP_CU_MV_ROWS + warp;
    if (row >= rows) return; // whole warp leaves; only warp-level syncs below
    const uint8_t *wr = w + (size_t)row * pitch;
    const int nch = cols / 32;
    const uint8_t *sb = reinterpret_cast<const uint8_t *>(stage[warp]);
    float acc = 0.0f;
    for (int base = 0; base < nch; base += 32) {
        const int left = nch - base < 32 ? nch - base : 32;
        const int words = (left / K::cpb * K::bb + 7) / 8; // within the padded pitch
        const uint2 *src = reinterpret_cast<const uint2 *>(wr + (size_t)(base / K::cpb) * K::bb);
        for (int i = lane; i < words; i += 32) stage[warp][i] = __ldg(src + i);
        __syncwarp();
        if (lane < left) {
            bp_cu_chunk c;
            K::unpack(sb + (lane / K::cpb) * K::bb, lane % K::cpb, &c);
            bp_cu_xq xc = xq[base + lane];
            acc += bp_cu_chunk_dot_q8(&c, K::has_min, &xc);
        }
        __syncwarp();
    }
    acc = bp_cu::warp_sum(acc);
    if (lane == 0) y[row] = acc;
}

// ES bytes per element; BF selects bfloat16 over IEEE half for ES == 2.
template <int ES, bool BF>
__device__ __forceinline__ float half_bits_to_f32(uint32_t h) {
    return BF ? __uint_as_float(h << 16) : __half2float(__ushort_as_half((unsigned short)h));
}

template <int ES, bool BF>
__global__ void __launch_bounds__(BP_CU_MV_THREADS)
bp_cu_matvec_f(const uint8_t *__restrict__ w, size_t pitch, int rows, int cols,
               const float *__restrict__ x, const bp_cu_xq *__restrict__ xq, float *__restrict__ y) {
    (void)xq;
    constexpr int V = 16 / ES; // elements per 16-byte vector
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = blockIdx.x * BP_CU_MV_ROWS + warp;
    if (row >= rows) return;
    const uint8_t *wr = w + (size_t)row * pitch;
    const int nv = cols / V;
    float acc = 0.0f;
    for (int v = lane; v < nv; v += 32) {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(wr) + v);
        const float4 *xv = reinterpret_cast<const float4 *>(x + (size_t)v * V);
        if (ES == 4) {
            const float4 a = xv[0];
            acc += __uint_as_float(u.x) * a.x + __uint_as_float(u.y) * a.y + __uint_as_float(u.z) * a.z +
                   __uint_as_float(u.w) * a.w;
        } else {
            const uint32_t p[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int k = 0; k < 2; k++) {
                const float4 a = xv[k];
                acc += half_bits_to_f32<ES, BF>(p[2 * k] & 0xffffu) * a.x +
                       half_bits_to_f32<ES, BF>(p[2 * k] >> 16) * a.y +
                       half_bits_to_f32<ES, BF>(p[2 * k + 1] & 0xffffu) * a.z +
                       half_bits_to_f32<ES, BF>(p[2 * k + 1] >> 16) * a.w;
            }
        }
    }
    // Tail: cols not a multiple of the vector width.
    for (int i = nv * V + lane; i < cols; i += 32)
        acc += bp_cu_float_elem(ES, BF, wr, i) * x[i];
    acc = bp_cu::warp_sum(acc);
    if (lane == 0) y[row] = acc;
}

extern "C" const bp_cu_kernel_entry bp_cu_matvec_kernels[] = {
    {"quantize_q8", (const void *)bp_cu_quantize_q8},
#define BP_CU_ROW(NAME, CPB, MIN) {"matvec_" #NAME, (const void *)bp_cu_matvec_q<bp_cu::K_##NAME>},
    BP_CU_QUANT_KINDS(BP_CU_ROW)
#undef BP_CU_ROW
    {"matvec_F32", (const void *)bp_cu_matvec_f<4, false>},
    {"matvec_F16", (const void *)bp_cu_matvec_f<2, false>},
    {"matvec_BF16", (const void *)bp_cu_matvec_f<2, true>},
    {nullptr, nullptr},
};
