#version 450
// RoPE in place on rows of n_heads x head_dim: pair k of a head turns by pos * inv_freq[k]
// (inv_freq = freq_scale * base^(-2k/n_rot) / factor_k, made by the host in double). NORMAL
// rotates (2k, 2k + 1), NEOX (k, k + n_rot/2). One thread per (row, head, pair).
layout(std430, set = 0, binding = 0) buffer XBuf { float xv[]; };
layout(std430, set = 1, binding = 0) readonly buffer IOBuf { int io[]; };
layout(std430, set = 2, binding = 0) readonly buffer FBuf { float fv[]; };
layout(push_constant) uniform Push { uint rows, n_heads, head_dim, n_rot, neox, x_off, pos_idx, f_off; } pc;
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

void main() {
    uint half_ = pc.n_rot / 2u;
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (gid >= pc.rows * pc.n_heads * half_) return;
    uint k = gid % half_, h = (gid / half_) % pc.n_heads, r = gid / (half_ * pc.n_heads);
    float theta = float(io[pc.pos_idx + 2u * r]) * fv[pc.f_off + k];
    float c = cos(theta), s = sin(theta);
    uint base = pc.x_off + (r * pc.n_heads + h) * pc.head_dim;
    uint a = pc.neox != 0u ? k : 2u * k, b = pc.neox != 0u ? k + half_ : 2u * k + 1u;
    float x0 = xv[base + a], x1 = xv[base + b];
    xv[base + a] = x0 * c - x1 * s;
    xv[base + b] = x0 * s + x1 * c;
}
