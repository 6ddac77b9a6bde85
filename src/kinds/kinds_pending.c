/* TEMPORARY during bring-up: weak placeholders so the tree links while the per-kind reference
 * files are being written. Each real bp_dequant_X / bp_quantize_X overrides its placeholder.
 * This file must be deleted before the foundation issue is called done; the bit-exact test
 * fails on the NaNs these write. */
#include <math.h>
#include <string.h>

#include "kinds/kinds_internal.h"

#define BP_KIND(NAME, ID, BE, BB, ROLE, Q)                                                       \
    __attribute__((weak)) void bp_dequant_##NAME(const void *src, float *dst, int64_t nb) {      \
        (void)src;                                                                               \
        for (int64_t i = 0; i < nb * (BE); i++) dst[i] = NAN;                                    \
    }                                                                                            \
    PENDING_Q_##Q(NAME, BB)
#define PENDING_Q_1(NAME, BB)                                                                    \
    __attribute__((weak)) void bp_quantize_##NAME(const float *src, void *dst, int64_t nb) {     \
        (void)src;                                                                               \
        memset(dst, 0xff, (size_t)nb * (BB));                                                    \
    }
#define PENDING_Q_0(NAME, BB)
#include "kinds.def"
#undef BP_KIND
