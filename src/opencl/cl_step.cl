/* The device step's kernels in OpenCL C (src/gpu/gpu_step.h names them and their buffers; the
 * argument blocks are src/gpu/step_args.h, the arithmetic src/cuda/cuda_step_math.h, both embedded
 * before this file): embed_<KIND> for every weight kind the matvec covers, rms_norm, eltwise,
 * glu, rope, kv_append_<KV> and attention_<KV> for the KV kinds of BP_SM_KV_KINDS. matvec_<KIND>
 * and gemm_<KIND> are cl_kernels.cl's, which take the same argument block.
 *
 * Every kernel runs in work-groups of 64 (gpu_step's launches), its group index linear over a grid
 * that may fold into y past 65535 groups. */

#define BP_CL_GROUP() (get_group_id(0) + get_group_id(1) * get_num_groups(0))

/* ---- embedding rows: one work-group per token, its work-items striding over the row --------- */
#define BP_CL_EMBED_ROW()                                                                          \
    const uint i = BP_CL_GROUP();                                                                  \
    if (i >= a.t) return;                                                                          \
    const int id = io[a.x_off + 2 * i];                                                            \
    if (id < (int)a.y_row0 || id >= (int)(a.y_row0 + a.rows)) return;                              \
    __global const uchar *wr = w + a.w_off + (ulong)(id - (int)a.y_row0) * a.row_bytes;            \
    __global float *o = y + a.y_stride + (ulong)i * a.cols;

#define BP_CL_EMBED_Q(NAME, CPB, HAS_MIN)                                                           \
    __kernel __attribute__((reqd_work_group_size(64, 1, 1))) void embed_##NAME(                     \
        __global const uchar *w, __global const int *io, __global float *y, bp_gpu_mm_args a) {     \
        BP_CL_EMBED_ROW()                                                                          \
        for (uint c = get_local_id(0); c < a.nsub; c += 64) {                                      \
            uchar blk[BP_CL_MAX_BLOCK];                                                            \
            bp_cu_chunk ch;                                                                        \
            float v[32];                                                                           \
            bp_cl_copy_block(blk, wr + (ulong)(c / CPB) * BP_CL_BB_##NAME, BP_CL_BB_##NAME);        \
            bp_cu_unpack_##NAME(blk, (int)(c % CPB), &ch);                                         \
            bp_cu_chunk_dequant(&ch, HAS_MIN, v);                                                  \
            for (int j = 0; j < 32; j++) o[c * 32 + j] = v[j] * a.fscale;                          \
        }                                                                                          \
    }
BP_CU_QUANT_KINDS(BP_CL_EMBED_Q)

#define BP_CL_EMBED_F(NAME, ESIZE)                                                                  \
    __kernel __attribute__((reqd_work_group_size(64, 1, 1))) void embed_##NAME(                     \
        __global const uchar *w, __global const int *io, __global float *y, bp_gpu_mm_args a) {     \
        BP_CL_EMBED_ROW()                                                                          \
        for (uint c = get_local_id(0); c < a.cols; c += 64) o[c] = BP_CL_LOAD_##NAME(wr, c) * a.fscale; \
    }
BP_CU_FLOAT_KINDS(BP_CL_EMBED_F)

/* ---- RMSNorm, elementwise, RoPE: the shared bodies (cuda_step_math.h) ------------------------ */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void rms_norm(__global const float *x, __global const float *g,
                                                                       __global float *y, bp_gpu_norm_args a) {
    __local float part[BP_SM_WG];
    const uint r = BP_CL_GROUP();
    if (r < a.rows) bp_sm_rms_norm_row(x, g, y, a, r, get_local_id(0), part); /* the whole group alike */
}

/* 256 elements a group (gpu_step's grid), four per work-item. */
#define BP_CL_ITEMS4(CALL)                                                                         \
    const uint i0 = BP_CL_GROUP() * 256 + get_local_id(0);                                         \
    for (uint k = 0; k < 4 && i0 + 64 * k < a.count; k++) CALL(i0 + 64 * k);
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void eltwise(__global float *y, __global const float *x,
                                                                      bp_gpu_elt_args a) {
#define BP_CL_ELT(i) bp_sm_eltwise_item(y, x, a, i)
    BP_CL_ITEMS4(BP_CL_ELT)
}
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void glu(__global float *gt, __global const float *u,
                                                                  bp_gpu_glu_args a) {
#define BP_CL_GLU(i) bp_sm_glu_item(gt, u, a, i)
    BP_CL_ITEMS4(BP_CL_GLU)
}

__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void rope(__global float *x, __global const int *io,
                                                                   __global const float *f, bp_gpu_rope_args a) {
    bp_sm_rope_item(x, io, f, a, BP_CL_GROUP() * 64 + get_local_id(0));
}

/* ---- the KV cache: append (a work-item per row or pair), attention (a group per query row) -- */
#define BP_CL_KV(NAME, BE, BB)                                                                      \
    __kernel __attribute__((reqd_work_group_size(64, 1, 1))) void kv_append_##NAME(                 \
        __global const float *src, __global uchar *cache, __global const int *io, bp_gpu_kv_args a) { \
        bp_sm_kv_append_##NAME(src, cache, io, a, BP_CL_GROUP() * 64 + get_local_id(0));           \
    }                                                                                              \
    __kernel __attribute__((reqd_work_group_size(64, 1, 1))) void attention_##NAME(                 \
        __global const float *q, __global const uchar *kc, __global const uchar *vc, __global float *o, \
        __global const int *io, bp_gpu_attn_args a) {                                              \
        __local float qs[256];                                                                     \
        __local float ss[BP_SM_WG];                                                                \
        bp_sm_attention_##NAME(q, kc, vc, o, io, a, get_group_id(0), get_group_id(1), get_local_id(0), qs, ss); \
    }
BP_SM_KV_KINDS(BP_CL_KV)
