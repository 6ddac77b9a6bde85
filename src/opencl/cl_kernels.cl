/* The OpenCL kernels: a matvec and a GEMM for every weight kind, all in ONE program built once
 * per process (cl_device.c). The per-kind block arithmetic is cuda_kind_math.h's, compiled here
 * through cl_prelude.cl; this file only adds the OpenCL work decomposition.
 *
 * Address spaces: OpenCL C 1.2 has no generic address space (PoCL 3.1 reports none), and the
 * header's unpackers take plain (= __private) pointers. So each work-item first copies the
 * block it works on from __global into a private array and unpacks from there.
 *
 * Kernel names and arguments (the device step's, src/gpu/gpu_step.h; cl_dispatch.c fills the
 * block for a plain matmul too): name(w, x, y, bp_gpu_mm_args a), in work-groups of 64:
 *   matvec_<KIND>   y[y_row0 + r] = W[r] . x for the a.rows rows of W (from byte w_off, row_bytes
 *       apart) and x from float x_off; BP_CL_MV_LANES work-items per row, BP_CL_MV_ROWS rows a
 *       group (grid = ceil(rows / BP_CL_MV_ROWS), folding into y), local tree reduction per row.
 *   gemm_<KIND>     Y[tok][y_row0 + r] (rows y_stride apart) = X[tok] . W[r] for a.t tokens of X
 *       (rows cols apart from x_off). A tile of BP_CL_TILE W rows x BP_CL_TILE tokens a group,
 *       each work-item four tokens of one row; W dequantized into local memory BP_CL_KC chunks
 *       (of 32 columns) at a time; grid = (ceil(rows/TILE), ceil(t/TILE)).
 * x and y are float32. */
#define BP_CL_MV_LS 64
/* Work-items per row and rows per matvec work-group. Several rows per group: with one row per
 * 64-wide group a 4096 x 4096 Q4_0 decode on PoCL took ~24 ms of a full CPU, with 8 rows ~7 ms
 * (PoCL pays per work-group and the rows are only 128 blocks long). */
#define BP_CL_MV_LANES 8
#define BP_CL_MV_ROWS (BP_CL_MV_LS / BP_CL_MV_LANES)
#define BP_CL_TILE 16
#define BP_CL_KC 4
#define BP_CL_MAX_BLOCK 224 /* largest block: Q6_K, 210 bytes */

static inline void bp_cl_copy_block(uchar *dst, __global const uchar *src, const int n) {
    for (int i = 0; i < n; i++) dst[i] = src[i];
}

/* Each row's BP_CL_MV_LANES partial sums (consecutive in part[]) -> its first lane's slot. */
static inline void bp_cl_reduce(__local float *part, int lid) {
    for (int s = BP_CL_MV_LANES / 2; s > 0; s >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid % BP_CL_MV_LANES < s) part[lid] += part[lid + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* dot(chunk, x[0..32)) in the chunk form of cuda_kind_math.h:
 *     d0 * S0 + d1 * S1 (+ m0 * X0 + m1 * X1),  S_h = sum q*x, X_h = sum x over half h,
 * four weights per step (the packed int8 quadruples as char4: element i is byte i%4, and
 * OpenCL's as_char4 keeps memory order). The decode path; the GEMM dequantizes exactly. */
static inline float bp_cl_chunk_dot(const bp_cu_chunk *ch, int has_min, __global const float *xc) {
    float4 s0 = 0.0f, s1 = 0.0f, x0 = 0.0f, x1 = 0.0f;
    for (int k = 0; k < 4; k++) {
        const float4 xa = vload4(k, xc), xb = vload4(k + 4, xc);
        s0 += convert_float4(as_char4(ch->q[k])) * xa;
        s1 += convert_float4(as_char4(ch->q[k + 4])) * xb;
        x0 += xa;
        x1 += xb;
    }
    float r = ch->d[0] * (s0.x + s0.y + s0.z + s0.w) + ch->d[1] * (s1.x + s1.y + s1.z + s1.w);
    if (has_min) r += ch->m[0] * (x0.x + x0.y + x0.z + x0.w) + ch->m[1] * (x1.x + x1.y + x1.z + x1.w);
    return r;
}

/* The argument block's shape as locals: a matvec's row, a GEMM's tile. */
#define BP_CL_MV_HEAD()                                                                            \
    __local float part[BP_CL_MV_LS];                                                               \
    const int lid = get_local_id(0), lane = lid % BP_CL_MV_LANES;                                  \
    const int row = (get_group_id(0) + get_group_id(1) * get_num_groups(0)) * BP_CL_MV_ROWS + lid / BP_CL_MV_LANES; \
    const int rows = (int)a.rows, cols = (int)a.cols;                                              \
    __global const uchar *wr = w + a.w_off + (ulong)row * a.row_bytes;                             \
    x += a.x_off;                                                                                  \
    float acc = 0.0f;
#define BP_CL_MV_TAIL()                                                                            \
    part[lid] = acc;                                                                               \
    bp_cl_reduce(part, lid);                                                                       \
    if (lane == 0 && row < rows) y[a.y_row0 + row] = part[lid];
#define BP_CL_GEMM_HEAD()                                                                          \
    __local float ws[BP_CL_KC * 32][BP_CL_TILE];                                                   \
    __local float xs[BP_CL_KC * 32][BP_CL_TILE];                                                   \
    const int lin = get_local_id(0), lx = lin % BP_CL_TILE, ly = lin / BP_CL_TILE;                 \
    const int r0 = get_group_id(0) * BP_CL_TILE, t0 = get_group_id(1) * BP_CL_TILE;                \
    const int rows = (int)a.rows, cols = (int)a.cols, t = (int)a.t;                                \
    w += a.w_off;                                                                                  \
    x += a.x_off;                                                                                  \
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
/* After a tile's k columns are staged: each work-item's four tokens ly, ly + 4, ... of row lx. */
#define BP_CL_GEMM_FMA(K)                                                                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    for (int k = 0; k < (K); k++) {                                                                \
        const float wv = ws[k][lx];                                                                \
        for (int j = 0; j < 4; j++) acc[j] += wv * xs[k][ly + 4 * j];                              \
    }                                                                                              \
    barrier(CLK_LOCAL_MEM_FENCE);
#define BP_CL_GEMM_TAIL()                                                                          \
    for (int j = 0; j < 4; j++)                                                                    \
        if (r0 + lx < rows && t0 + ly + 4 * j < t)                                                 \
            y[(ulong)(t0 + ly + 4 * j) * a.y_stride + a.y_row0 + r0 + lx] = acc[j];

/* ---- quantized kinds: (NAME, chunks per block, has min) from BP_CU_QUANT_KINDS ------------- */
#define BP_CL_QUANT(NAME, CPB, HAS_MIN)                                                            \
    __kernel __attribute__((reqd_work_group_size(BP_CL_MV_LS, 1, 1))) void matvec_##NAME(          \
        __global const uchar *w, __global const float *x, __global float *y, bp_gpu_mm_args a) {   \
        BP_CL_MV_HEAD()                                                                            \
        const int nblocks = cols / (32 * CPB);                                                     \
        for (int bi = lane; bi < nblocks && row < rows; bi += BP_CL_MV_LANES) {                    \
            uchar blk[BP_CL_MAX_BLOCK];                                                            \
            bp_cl_copy_block(blk, wr + (ulong)bi * BP_CL_BB_##NAME, BP_CL_BB_##NAME);               \
            for (int c = 0; c < CPB; c++) {                                                        \
                bp_cu_chunk ch;                                                                    \
                bp_cu_unpack_##NAME(blk, c, &ch);                                                  \
                acc += bp_cl_chunk_dot(&ch, HAS_MIN, x + (bi * CPB + c) * 32);                     \
            }                                                                                      \
        }                                                                                          \
        BP_CL_MV_TAIL()                                                                            \
    }                                                                                              \
    __kernel __attribute__((reqd_work_group_size(BP_CL_TILE * BP_CL_KC, 1, 1))) void gemm_##NAME(  \
        __global const uchar *w, __global const float *x, __global float *y, bp_gpu_mm_args a) {   \
        BP_CL_GEMM_HEAD()                                                                          \
        const int nch = cols / 32;                                                                 \
        for (int ch0 = 0; ch0 < nch; ch0 += BP_CL_KC) {                                            \
            const int kc = min(BP_CL_KC, nch - ch0);                                               \
            {   /* one (row, chunk) of the tile per work-item: TILE x KC of them */                \
                const int r = lin / BP_CL_KC, cc = lin % BP_CL_KC;                                 \
                if (r0 + r < rows && cc < kc) {                                                    \
                    const int gch = ch0 + cc, bi = gch / CPB;                                      \
                    uchar blk[BP_CL_MAX_BLOCK];                                                    \
                    bp_cu_chunk ch;                                                                \
                    float v[32];                                                                   \
                    bp_cl_copy_block(blk, w + (ulong)(r0 + r) * a.row_bytes + (ulong)bi * BP_CL_BB_##NAME, \
                                     BP_CL_BB_##NAME);                                             \
                    bp_cu_unpack_##NAME(blk, gch % CPB, &ch);                                      \
                    bp_cu_chunk_dequant(&ch, HAS_MIN, v);                                          \
                    for (int i = 0; i < 32; i++) ws[cc * 32 + i][r] = v[i];                        \
                } else {                                                                           \
                    for (int i = 0; i < 32; i++) ws[cc * 32 + i][r] = 0.0f;                        \
                }                                                                                  \
            }                                                                                      \
            for (int i = lin; i < BP_CL_TILE * BP_CL_KC * 32; i += BP_CL_TILE * BP_CL_KC) {        \
                const int tt = i / (BP_CL_KC * 32), k = i % (BP_CL_KC * 32);                       \
                xs[k][tt] = (t0 + tt < t && k < kc * 32) ? x[(ulong)(t0 + tt) * cols + ch0 * 32 + k] : 0.0f; \
            }                                                                                      \
            BP_CL_GEMM_FMA(kc * 32)                                                                \
        }                                                                                          \
        BP_CL_GEMM_TAIL()                                                                          \
    }
BP_CU_QUANT_KINDS(BP_CL_QUANT)

/* ---- float kinds: element loads through the header's converters -------------------------- */
#define BP_CL_LOAD_F32(p, i) (((__global const float *)(p))[i])
#define BP_CL_LOAD_F16(p, i) bp_cu_f16(((__global const ushort *)(p))[i])
#define BP_CL_LOAD_BF16(p, i) bp_cu_bf16(((__global const ushort *)(p))[i])

#define BP_CL_FLOAT(NAME, ESIZE)                                                                   \
    __kernel __attribute__((reqd_work_group_size(BP_CL_MV_LS, 1, 1))) void matvec_##NAME(          \
        __global const uchar *w, __global const float *x, __global float *y, bp_gpu_mm_args a) {   \
        BP_CL_MV_HEAD()                                                                            \
        for (int i = lane; i < cols && row < rows; i += BP_CL_MV_LANES) acc += BP_CL_LOAD_##NAME(wr, i) * x[i]; \
        BP_CL_MV_TAIL()                                                                            \
    }                                                                                              \
    __kernel __attribute__((reqd_work_group_size(BP_CL_TILE * BP_CL_KC, 1, 1))) void gemm_##NAME(  \
        __global const uchar *w, __global const float *x, __global float *y, bp_gpu_mm_args a) {   \
        BP_CL_GEMM_HEAD()                                                                          \
        for (int k0 = 0; k0 < cols; k0 += BP_CL_KC * 32) {                                         \
            for (int i = lin; i < BP_CL_TILE * BP_CL_KC * 32; i += BP_CL_TILE * BP_CL_KC) {        \
                const int rr = i / (BP_CL_KC * 32), k = i % (BP_CL_KC * 32);                       \
                const bool in = k0 + k < cols;                                                     \
                ws[k][rr] = (r0 + rr < rows && in) ? BP_CL_LOAD_##NAME(w + (ulong)(r0 + rr) * a.row_bytes, k0 + k) \
                                                   : 0.0f;                                         \
                xs[k][rr] = (t0 + rr < t && in) ? x[(ulong)(t0 + rr) * cols + k0 + k] : 0.0f;      \
            }                                                                                      \
            BP_CL_GEMM_FMA(BP_CL_KC * 32)                                                          \
        }                                                                                          \
        BP_CL_GEMM_TAIL()                                                                          \
    }
BP_CU_FLOAT_KINDS(BP_CL_FLOAT)
