/* Test data for the CUDA tests: random block bytes for any weight kind with every scale field
 * made a finite, moderate value (NaN or inf scales would compare unequal to themselves and say
 * nothing about the arithmetic). Float kinds get one 32-element group per "block". */
#ifndef BP_CUDA_TEST_DATA_H
#define BP_CUDA_TEST_DATA_H

#include <math.h>
#include <string.h>

#include "harness.h"

/* A finite half of moderate size (2^-10 .. 2^2) with a random sign. */
static uint16_t bp_cu_test_rand_half(uint64_t *st) {
    const float mag = ldexpf(1.0f + 0.5f * (bp_test_randf(st) + 1.0f), (int)(bp_test_rand(st) % 13) - 10);
    return bp_f32_to_f16(bp_test_rand(st) & 1 ? -mag : mag);
}

static void bp_cu_test_put_half(uint8_t *p, uint16_t h) { p[0] = (uint8_t)h; p[1] = (uint8_t)(h >> 8); }

/* One block of kind (32 elements for a float kind) at blk. */
static void bp_cu_test_fill_block(bp_kind kind, uint8_t *blk, uint64_t *st) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)kind);
    const uint32_t nbytes = ki->block_elems == 1 ? 32 * ki->block_bytes : ki->block_bytes;
    for (uint32_t i = 0; i < nbytes; i++) blk[i] = (uint8_t)bp_test_rand(st);
    static const struct { bp_kind k; int off[2]; } halves[] = {
        {BP_KIND_Q4_0, {0, -1}}, {BP_KIND_Q4_1, {0, 2}}, {BP_KIND_Q5_0, {0, -1}},
        {BP_KIND_Q5_1, {0, 2}}, {BP_KIND_Q8_0, {0, -1}}, {BP_KIND_Q2_K, {80, 82}},
        {BP_KIND_Q3_K, {108, -1}}, {BP_KIND_Q4_K, {0, 2}}, {BP_KIND_Q5_K, {0, 2}},
        {BP_KIND_Q6_K, {208, -1}}, {BP_KIND_IQ2_XXS, {0, -1}}, {BP_KIND_IQ2_XS, {0, -1}},
        {BP_KIND_IQ2_S, {0, -1}}, {BP_KIND_IQ3_XXS, {0, -1}}, {BP_KIND_IQ3_S, {0, -1}},
        {BP_KIND_IQ1_S, {0, -1}}, {BP_KIND_IQ4_NL, {0, -1}}, {BP_KIND_IQ4_XS, {0, -1}},
        {BP_KIND_TQ1_0, {52, -1}}, {BP_KIND_TQ2_0, {64, -1}}, {BP_KIND_Q1_0, {0, -1}},
        {BP_KIND_Q2_0, {0, -1}},
    };
    for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++)
        if (halves[i].k == kind)
            for (int j = 0; j < 2; j++)
                if (halves[i].off[j] >= 0) bp_cu_test_put_half(blk + halves[i].off[j], bp_cu_test_rand_half(st));
    if (kind == BP_KIND_IQ1_M) {
        /* The super-scale is the top nibble of each of the four u16 scale words. */
        const uint16_t h = bp_cu_test_rand_half(st);
        for (int j = 0; j < 4; j++) {
            uint8_t *p = blk + 48 + 2 * j;
            p[1] = (uint8_t)((p[1] & 0x0f) | (((h >> (4 * j)) & 15) << 4));
        }
    }
    if (kind == BP_KIND_MXFP4) blk[0] = (uint8_t)(110 + bp_test_rand(st) % 30);
    if (kind == BP_KIND_F16)
        for (uint32_t i = 0; i < nbytes; i += 2) bp_cu_test_put_half(blk + i, bp_cu_test_rand_half(st));
    if (kind == BP_KIND_BF16)
        for (uint32_t i = 0; i < nbytes; i += 2)
            bp_cu_test_put_half(blk + i, bp_f32_to_bf16(bp_test_randf(st) * 8.0f));
    if (kind == BP_KIND_F32)
        for (uint32_t i = 0; i < nbytes; i += 4) {
            const float f = bp_test_randf(st) * 8.0f;
            memcpy(blk + i, &f, 4);
        }
}

#endif
