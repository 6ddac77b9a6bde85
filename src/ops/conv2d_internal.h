/* conv2d inside the op layer: the checks every path shares, the float64 reference and the CPU
 * fast path (include/backplane_ops_conv_moe.h has the public side). */
#ifndef BP_OPS_CONV2D_INTERNAL_H
#define BP_OPS_CONV2D_INTERNAL_H

#include "backend/op_call.h"
#include "seam/seam.h"

/* The ops.def row a conv2d call is claimed and counted under: conv2d, conv2d_gn or
 * conv2d_ln, by its input norm. */
bp_op bp_conv2d_op_of(const bp_conv2d_params *p);

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
/* Tests: the tile size in bytes (0: the default, 4 MiB), so small images still take many tiles,
 * tiles shorter than a row and one-pixel tiles. Not safe while a conv2d runs. */
void bp_conv2d_cpu_set_tile_bytes(size_t bytes);
/* Output pixels per tile (one GEMM's batch) for p on the CPU path. */
int64_t bp_conv2d_cpu_tile_pixels(const bp_conv2d_params *p);
/* The CPU's conv2d for the op layer (bp_op_cpu): the fast path, naming what ran in label. */
bp_status bp_conv2d_cpu_op(const bp_op_call *c, char *label, size_t label_len);

#endif
