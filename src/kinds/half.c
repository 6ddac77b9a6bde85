/* Half-precision conversions: IEEE binary16 (F16) and bfloat16 (BF16).
 *
 * Both directions are bit-exact with the references the kinds are judged against:
 * - F16: numpy's astype(float16) / astype(float32) (what the gguf package uses), checked over
 *   all 2^32 float inputs and all 2^16 half inputs; round to nearest even, subnormals kept,
 *   overflow to inf, NaN payload truncated (never turned into inf).
 * - BF16: the gguf package's BF16 quantizer (= ggml's fp32->bf16): NaN is forced quiet
 *   keeping its top payload bits, everything else (subnormals included) rounds to nearest
 *   even with the carry allowed to run into the exponent (large values become inf).
 * Bits move through memcpy, never pointer casts, so no strict-aliasing UB.
 */
#include <string.h>

#include "backplane.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float bp_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / NaN, payload kept */
    if (exp == 0) {
        /* Subnormal (or zero): man * 2^-24 is exact in float. */
        float v = (float)man * 0x1p-24f;
        return bits_f32(sign | f32_bits(v));
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13)); /* rebias 15 -> 127 */
}

uint16_t bp_f32_to_f16(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
        /* NaN: keep the top 10 payload bits; a payload that truncates to 0 would read as inf,
         * so numpy sets the lowest bit instead. */
        uint16_t r = (uint16_t)(0x7c00u | ((ax & 0x7fffffu) >> 13));
        if (r == 0x7c00u) r++;
        return (uint16_t)(sign | r);
    }
    /* 65520 = halfway between 65504 (odd mantissa) and 2^16: ties to even go to inf. */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        /* Below 2^-14: a half subnormal in units of 2^-24. 2^-25 itself is a tie that rounds
         * to the even value 0. */
        if (ax <= 0x33000000u) return sign;
        const uint32_t e = ax >> 23;                   /* 102..112 */
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e;               /* 14..24 */
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++; /* may carry into the min normal */
        return (uint16_t)(sign | q);
    }
    uint32_t bits = ((ax >> 13) - (112u << 10)) & 0xffffu; /* rebias 127 -> 15, truncated */
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (bits & 1u))) bits++; /* carry may bump the exponent */
    return (uint16_t)(sign | bits);
}

float bp_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t bp_f32_to_bf16(float f) {
    uint32_t n = f32_bits(f);
    /* NaN: force quiet (bit 22) so rounding cannot carry a NaN into inf or a signalling one
     * into something else. */
    if ((n & 0x7fffffffu) > 0x7f800000u) n = (n & 0xffff0000u) | 0x00400000u;
    const uint64_t r = ((uint64_t)n + 0x7fffu + ((n >> 16) & 1u)) >> 16;
    return (uint16_t)r;
}
