/* Internal view of the kind table: per-kind reference functions generated from backplane_kinds.def. */
#ifndef BP_KINDS_INTERNAL_H
#define BP_KINDS_INTERNAL_H

#include "backplane.h"

/* Dequantize nblocks whole blocks at src into nblocks * block_elems floats. */
typedef void (*bp_dequant_fn)(const void *src, float *dst, int64_t nblocks);
/* Quantize nblocks * block_elems floats into nblocks blocks. */
typedef void (*bp_quantize_fn)(const float *src, void *dst, int64_t nblocks);

/* Every kind has a reference dequantizer; kinds with QUANT=1 have a quantizer. A missing
 * function is a link error, so a row cannot be added without its kernel. */
#define BP_KIND(NAME, ID, BE, BB, ROLE, Q) \
    void bp_dequant_##NAME(const void *src, float *dst, int64_t nblocks); \
    BP_QUANT_DECL_##Q(NAME)
#define BP_QUANT_DECL_1(NAME) void bp_quantize_##NAME(const float *src, void *dst, int64_t nblocks);
#define BP_QUANT_DECL_0(NAME)
#include "backplane_kinds.def"
#undef BP_KIND

/* Block geometry as compile-time constants, for kernels that step through blocks:
 * BP_BLOCK_BYTES_Q4_K, BP_BLOCK_ELEMS_Q4_K, ... */
enum {
#define BP_KIND(NAME, ID, BE, BB, ROLE, Q) BP_BLOCK_BYTES_##NAME = BB, BP_BLOCK_ELEMS_##NAME = BE,
#include "backplane_kinds.def"
#undef BP_KIND
};

typedef struct bp_kind_traits {
    bp_kind_info info;
    bp_dequant_fn dequant;
    bp_quantize_fn quantize; /* NULL when the kind has none */
} bp_kind_traits;

/* The traits row for a kind; NULL for an unknown value. */
const bp_kind_traits *bp_kind_traits_of(bp_kind k);

/* Little-endian loads from unaligned block bytes. */
static inline uint16_t bp_load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t bp_load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t bp_load_u64(const uint8_t *p) { return bp_load_u32(p) | ((uint64_t)bp_load_u32(p + 4) << 32); }
static inline void bp_store_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

#define BP_QK_K 256

/* An unsigned E4M3 scale byte (NVFP4) as value / 2, the reference's decoding (ref_lowbit.c);
 * fast dequantizers build their tables from it rather than decoding E4M3 a second way. */
float bp_ue4m3_half(uint8_t x);

#endif
