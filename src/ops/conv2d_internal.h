/* conv2d inside the op layer: the checks every path shares, the float64 reference and the CPU
 * fast path (include/backplane_ops_conv_moe.h has the public side). */
#ifndef BP_OPS_CONV2D_INTERNAL_H
#define BP_OPS_CONV2D_INTERNAL_H

#include "seam/seam.h"

/* The norm variants a backend claims separately for (conv2d, kind, variant): the SiLU is part of
 * the variant because a kernel that fuses the norm may still lack the activation.
 * BP_CONV_VARIANT(ENUM, name, norm, silu) */
#define BP_CONV_VARIANTS(X)                                       \
    X(PLAIN, "plain", BP_CONV_NORM_NONE, false)                   \
    X(SILU, "silu", BP_CONV_NORM_NONE, true)                      \
    X(GROUPNORM, "groupnorm", BP_CONV_NORM_GROUP, false)          \
    X(GROUPNORM_SILU, "groupnorm+silu", BP_CONV_NORM_GROUP, true) \
    X(LAYERNORM, "layernorm", BP_CONV_NORM_LAYER, false)          \
    X(LAYERNORM_SILU, "layernorm+silu", BP_CONV_NORM_LAYER, true)

typedef enum bp_conv_variant {
#define BP_CONV_VARIANT_ENUM(E, name, norm, silu) BP_CONV_VARIANT_##E,
    BP_CONV_VARIANTS(BP_CONV_VARIANT_ENUM)
#undef BP_CONV_VARIANT_ENUM
    BP_CONV_VARIANT_COUNT
} bp_conv_variant;

/* The variant of a checked parameter set, and its name ("groupnorm+silu"). */
bp_conv_variant bp_conv_variant_of(const bp_conv2d_params *p);
const char *bp_conv_variant_name(bp_conv_variant v);

/* Every check of bp_conv2d (geometry, weight shape against it, GroupNorm groups, pointers,
 * sizes that overflow), named by `who`; *oh / *ow get the output size. */
bp_status bp_conv2d_check(const char *who, const bp_weight *w, const bp_conv2d_params *p, const float *x,
                          const float *y, int64_t *oh, int64_t *ow);

/* The float64 reference: weights dequantized whole by the reference dequantizer, the input
 * normalized whole, a direct six-deep loop accumulating in double. Extra memory:
 * cout*k*k*cin floats + h*w*cin doubles. Arguments already checked. */
bp_status bp_conv2d_ref(const bp_weight *w, const bp_conv2d_params *p, const float *x, float *y);

/* The CPU fast path (conv2d_cpu.c); arguments already checked. */
bp_status bp_conv2d_cpu(bp_weight *w, const bp_conv2d_params *p, const float *x, float *y);
/* Tests: the tile size in bytes (0: the default, 2 MiB), so small images still take many tiles,
 * tiles shorter than a row and one-pixel tiles. Not safe while a conv2d runs. */
void bp_conv2d_cpu_set_tile_bytes(size_t bytes);

#endif
