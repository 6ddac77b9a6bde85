#version 450
// Y[r] = X[r] / sqrt(mean(X[r]^2) + eps) * G (G absent: g_off = ~0), one workgroup per row of n.
// In place (Y the same buffer as X) is fine: every thread writes only what it read.
layout(std430, set = 0, binding = 0) readonly buffer XBuf { float xv[]; };
layout(std430, set = 1, binding = 0) readonly buffer GBuf { float gv[]; };
layout(std430, set = 2, binding = 0) buffer YBuf { float yv[]; };
layout(push_constant) uniform Push { uint rows, n, x_off, y_off, g_off; float eps; } pc;
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
shared float part[64];

void main() {
    uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (r >= pc.rows) return;
    uint tid = gl_LocalInvocationID.x;
    uint xb = pc.x_off + r * pc.n, yb = pc.y_off + r * pc.n;
    float s = 0.0;
    for (uint j = tid; j < pc.n; j += 64u) s += xv[xb + j] * xv[xb + j];
    part[tid] = s;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1) {
        if (tid < w) part[tid] += part[tid + w];
        barrier();
    }
    float inv = 1.0 / sqrt(part[0] / float(pc.n) + pc.eps);
    for (uint j = tid; j < pc.n; j += 64u) {
        float g = pc.g_off == 0xFFFFFFFFu ? 1.0 : gv[pc.g_off + j];
        yv[yb + j] = xv[xb + j] * inv * g;
    }
}
