#version 450
// Embedding rows of one weight kind (-DKIND_<NAME>): Y[i][c] = W[ids[i]][c] * fscale for the
// ids whose row falls in this chunk of the weight (rows y_row0 .. y_row0 + rows - 1).
// One workgroup per token; its threads stride over the row's sub-blocks. Set 1 holds the
// step's int32 inputs, read as the float buffer common.glsl declares (bit for bit).
#include "common.glsl"
#define EMIT(j, val) yv[ctx + (j)] = (val) * pc.fscale
#include "dequant.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

void main() {
    uint i = gl_WorkGroupID.x;
    if (i >= pc.t) return;
    int id = floatBitsToInt(xv[pc.x_off + 2u * i]); // (position, id) pairs
    if (id < int(pc.y_row0) || id >= int(pc.y_row0 + pc.rows)) return;
    uint rbase = pc.w_off + uint(id - int(pc.y_row0)) * pc.row_bytes;
    const uint spb = QK / uint(SUBN);
    for (uint idx = gl_LocalInvocationID.x; idx < pc.nsub; idx += 64u) {
        uint blk = idx / spb;
        dq_sub(rbase + blk * QB, idx - blk * spb, pc.y_stride + i * pc.cols + idx * uint(SUBN));
    }
}
