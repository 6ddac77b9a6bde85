// Per-kind compile-time traits shared by the .cu files: each quantized kind of
// BP_CU_QUANT_KINDS becomes a struct K_<NAME> (chunks per block, min flag, block bytes, unpack)
// that the kernel templates are instantiated with; block bytes come from backplane_kinds.def, the one
// place they are written.
#ifndef BP_CUDA_TRAITS_CUH
#define BP_CUDA_TRAITS_CUH

#include "cuda/cuda_kind_math.h"

namespace bp_cu {

enum {
#define BP_KIND(NAME, ID, BE, BB, ROLE, Q) BB_##NAME = BB,
#include "backplane_kinds.def"
#undef BP_KIND
};

#define BP_CU_TRAIT(NAME, CPB, MIN)                                                            \
    struct K_##NAME {                                                                          \
        static constexpr int cpb = CPB, has_min = MIN, bb = BB_##NAME;                         \
        static __device__ __forceinline__ void unpack(const uint8_t *b, int c, bp_cu_chunk *o) { \
            bp_cu_unpack_##NAME(b, c, o);                                                      \
        }                                                                                      \
    };
BP_CU_QUANT_KINDS(BP_CU_TRAIT)
#undef BP_CU_TRAIT

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

}  // namespace bp_cu

#endif
