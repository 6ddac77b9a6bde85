#version 450
// Elementwise pieces of a step over count elements of Y from y_off:
//   mode 0  Y[i] += X[x_off + i]              (the residual add)
//   mode 1  Y[i] += X[x_off + i % n]          (a bias per row of n)
//   mode 2  Y[i] = f * tanh(Y[i] / f)         (the final soft-cap)
layout(std430, set = 0, binding = 0) buffer YBuf { float yv[]; };
layout(std430, set = 1, binding = 0) readonly buffer XBuf { float xv[]; };
layout(push_constant) uniform Push { uint count, mode, y_off, x_off, n; float f; } pc;
layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i >= pc.count) return;
    float y = yv[pc.y_off + i];
    if (pc.mode == 0u) y += xv[pc.x_off + i];
    else if (pc.mode == 1u) y += xv[pc.x_off + i % pc.n];
    else y = pc.f * tanh(y / pc.f);
    yv[pc.y_off + i] = y;
}
