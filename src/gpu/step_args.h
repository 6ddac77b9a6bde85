/* The argument blocks of the step's kernels (gpu_step.h lists the kernels), one struct per
 * kernel family, passed by value as the launch's last argument. Written in the C subset that C,
 * CUDA and OpenCL C all read (the OpenCL program embeds this file after cl_prelude.cl, which
 * supplies the <stdint.h> names), so the host code that fills a block and every backend's
 * kernels that read it see one definition. Every member is 4 bytes: no padding anywhere. */
#ifndef BP_GPU_STEP_ARGS_H
#define BP_GPU_STEP_ARGS_H

#include <stdint.h>

typedef struct bp_gpu_mm_args {
    uint32_t rows, cols, row_bytes, nsub, t, y_row0, y_stride, x_off, w_off;
    float fscale;
    uint32_t pad0, pad1;
} bp_gpu_mm_args;
typedef struct bp_gpu_norm_args { uint32_t rows, n, x_off, y_off, g_off; float eps; } bp_gpu_norm_args;
typedef struct bp_gpu_elt_args { uint32_t count, mode, y_off, x_off, n; float f; } bp_gpu_elt_args;
typedef struct bp_gpu_glu_args { uint32_t count, act, g_off, u_off; } bp_gpu_glu_args;
typedef struct bp_gpu_rope_args {
    uint32_t rows, n_heads, head_dim, n_rot, neox, x_off, pos_idx, f_off;
} bp_gpu_rope_args;
typedef struct bp_gpu_kv_args { uint32_t rows, n_kv_heads, head_dim, cap, src_off, row_bytes; } bp_gpu_kv_args;
typedef struct bp_gpu_attn_args {
    uint32_t rows, n_heads, n_kv_heads, head_dim, cap, q_off, o_off, pos_idx;
    float scale, softcap;
    uint32_t window, row_bytes;
} bp_gpu_attn_args;

#endif
