#version 450
// Y[t][row] = sum_c X[t][c] * W[row][c] for one weight kind (-DKIND_<NAME>).
// A workgroup owns a tile of TM rows x TN batch positions. For each chunk of KC columns it
// dequantises the TM rows' sub-blocks once into shared memory and reuses them across the TN
// inputs, so the dequantisation cost is paid once per TN outputs instead of once per output.
#include "common.glsl"

#define TM 32u
#define TN 32u // each thread: 4 rows x 4 tokens, 16 FMAs per 8 shared loads
#define KC 64u // 64, not 32: half the barriers; on lavapipe each costs a coroutine switch per 8 lanes (GEMM 2x faster)
#define KS (KC + 1u) // row stride of the tiles: +1, no bank conflicts when threads walk a column
#define WG 64u
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

shared float ws[TM * KS];
shared float xs[TN][KS]; // 16.25 KiB in all: vk_context.c checks the device has it

#define EMIT(j, val) ws[ctx + (j)] = (val)
#include "dequant.glsl"

void store(uint row, uint tok, float v) {
    if (row < pc.rows && tok < pc.t) yv[tok * pc.y_stride + pc.y_row0 + row] = v;
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint row0 = gl_WorkGroupID.x * TM;
    uint tok0 = gl_WorkGroupID.y * TN;
    const uint spb = QK / uint(SUBN);
    const uint spc = KC / uint(SUBN); // sub-blocks per chunk
    uint tr = tid & 7u, tc = tid >> 3; // this thread: rows tr + 8i, tokens tc + 8j (i, j < 4)
    // Sixteen accumulators in vectors, not an array: see dequant.glsl on private arrays.
    vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0); // row tr + 8i, tokens tc + 8j
    for (uint k0 = 0u; k0 < pc.cols; k0 += KC) {
        for (uint task = tid; task < TM * spc; task += WG) {
            uint r = task / spc, sc = task - r * spc;
            uint row = row0 + r, k = k0 + sc * uint(SUBN);
            if (row < pc.rows && k < pc.cols) {
                uint sub = k / uint(SUBN), blk = sub / spb;
                dq_sub(pc.w_off + row * pc.row_bytes + blk * QB, sub - blk * spb, r * KS + sc * uint(SUBN));
            } else {
                for (uint j = 0u; j < uint(SUBN); j++) ws[r * KS + sc * uint(SUBN) + j] = 0.0;
            }
        }
        for (uint e = tid; e < TN * KC; e += WG) {
            uint tt = e / KC, kk = e - tt * KC;
            uint tok = tok0 + tt, k = k0 + kk;
            xs[tt][kk] = (tok < pc.t && k < pc.cols) ? xv[pc.x_off + tok * pc.cols + k] : 0.0;
        }
        barrier();
        for (uint kk = 0u; kk < KC; kk++) {
            vec4 x = vec4(xs[tc][kk], xs[tc + 8u][kk], xs[tc + 16u][kk], xs[tc + 24u][kk]);
            a0 += ws[tr * KS + kk] * x;
            a1 += ws[(tr + 8u) * KS + kk] * x;
            a2 += ws[(tr + 16u) * KS + kk] * x;
            a3 += ws[(tr + 24u) * KS + kk] * x;
        }
        barrier();
    }
    for (uint j = 0u; j < 4u; j++) {
        store(row0 + tr, tok0 + tc + 8u * j, a0[j]);
        store(row0 + tr + 8u, tok0 + tc + 8u * j, a1[j]);
        store(row0 + tr + 16u, tok0 + tc + 8u * j, a2[j]);
        store(row0 + tr + 24u, tok0 + tc + 8u * j, a3[j]);
    }
}
