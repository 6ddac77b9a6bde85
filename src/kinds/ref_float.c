/* Reference kernels for the plain kinds: floats (F32, F16, BF16, F64) and integers (I8..I64).
 *
 * Loads go byte by byte in little-endian order (GGUF files are little-endian) and never
 * through a cast pointer: block bytes sit at any alignment inside a mapped file, and an
 * unaligned `*(const float *)p` is UB that UBSan flags and some CPUs trap on.
 * Conversions to float use C's round-to-nearest-even, which is what numpy's astype(float32)
 * does for every one of these kinds.
 */
#include <string.h>

#include "kinds/kinds_internal.h"

void bp_dequant_F32(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; i++) {
        const uint32_t u = bp_load_u32(p + 4 * i);
        memcpy(&dst[i], &u, sizeof u); /* bit copy: NaN payloads survive */
    }
}

void bp_dequant_F16(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; i++) dst[i] = bp_f16_to_f32(bp_load_u16(p + 2 * i));
}

void bp_dequant_BF16(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; i++) dst[i] = bp_bf16_to_f32(bp_load_u16(p + 2 * i));
}

void bp_dequant_I8(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; i++) dst[i] = (float)(int8_t)p[i];
}

void bp_dequant_I16(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; i++) dst[i] = (float)(int16_t)bp_load_u16(p + 2 * i);
}

void bp_dequant_I32(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; i++) dst[i] = (float)(int32_t)bp_load_u32(p + 4 * i);
}

void bp_dequant_I64(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; i++) dst[i] = (float)(int64_t)bp_load_u64(p + 8 * i);
}

void bp_dequant_F64(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; i++) {
        const uint64_t u = bp_load_u64(p + 8 * i);
        double d;
        memcpy(&d, &u, sizeof d);
        dst[i] = (float)d;
    }
}

void bp_quantize_F32(const float *src, void *dst, int64_t nblocks) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < nblocks; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        p[4 * i + 0] = (uint8_t)u;
        p[4 * i + 1] = (uint8_t)(u >> 8);
        p[4 * i + 2] = (uint8_t)(u >> 16);
        p[4 * i + 3] = (uint8_t)(u >> 24);
    }
}

void bp_quantize_F16(const float *src, void *dst, int64_t nblocks) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < nblocks; i++) bp_store_u16(p + 2 * i, bp_f32_to_f16(src[i]));
}

void bp_quantize_BF16(const float *src, void *dst, int64_t nblocks) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < nblocks; i++) bp_store_u16(p + 2 * i, bp_f32_to_bf16(src[i]));
}
