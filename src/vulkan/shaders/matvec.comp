#version 450
// y[row] = sum_c W[row][c] * x[c] for one weight kind (-DKIND_<NAME>).
// One workgroup per row, sized to one subgroup by the host (specialisation constant 0); its
// threads stride over the row's sub-blocks, dequantise each into registers, and reduce with
// subgroupAdd. Should a driver run the workgroup as several subgroups anyway, their partial
// sums meet in shared memory. The grid is 2-D because a vocabulary-sized weight has more rows
// than the 65535 workgroups one dimension guarantees.
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#define EMIT(j, val) dq_acc += (val) * xv[pc.x_off + ctx + (j)]
#include "dequant.glsl"

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

shared float partial[128];

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= pc.rows) return; // uniform across the workgroup, so no barrier is skipped unevenly
    uint tid = gl_LocalInvocationID.x;
    uint nth = gl_WorkGroupSize.x;
    const uint spb = QK / uint(SUBN); // sub-blocks per block
    uint rbase = pc.w_off + row * pc.row_bytes;
    float acc = 0.0;
    for (uint idx = tid; idx < pc.nsub; idx += nth) {
        uint blk = idx / spb;
        acc += dq_sub(rbase + blk * QB, idx - blk * spb, idx * uint(SUBN));
    }
    acc = subgroupAdd(acc);
    if (gl_NumSubgroups == 1u) {
        if (subgroupElect()) yv[pc.y_row0 + row] = acc;
        return;
    }
    if (subgroupElect()) partial[gl_SubgroupID] = acc;
    barrier();
    if (tid == 0u) {
        float s = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) s += partial[i];
        yv[pc.y_row0 + row] = s;
    }
}
