#version 450
// Store `rows` tokens of K (or V) [rows][n_kv_heads * head_dim] (f32) at positions pos0 + r of a
// layer's cache [n_kv_heads][cap][head_dim] of kind F32 or F16 (-DKV_F16). One thread per
// element pair, so an F16 pair is one word.
layout(std430, set = 0, binding = 0) readonly buffer SBuf { float sv[]; };
layout(std430, set = 1, binding = 0) buffer CBuf { uint cv[]; };
layout(std430, set = 2, binding = 0) readonly buffer IOBuf { int io[]; };
layout(push_constant) uniform Push { uint rows, n_kv_heads, head_dim, cap, src_off; } pc;
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

void main() {
    uint hd2 = pc.head_dim / 2u;
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (gid >= pc.rows * pc.n_kv_heads * hd2) return;
    uint d2 = gid % hd2, h = (gid / hd2) % pc.n_kv_heads, r = gid / (hd2 * pc.n_kv_heads);
    uint pos = uint(io[0]) + r;
    uint s = pc.src_off + (r * pc.n_kv_heads + h) * pc.head_dim + 2u * d2;
    uint e = (h * pc.cap + pos) * pc.head_dim + 2u * d2; // element index in the cache
#ifdef KV_F16
    cv[e >> 1] = packHalf2x16(vec2(sv[s], sv[s + 1u]));
#else
    cv[e] = floatBitsToUint(sv[s]);
    cv[e + 1u] = floatBitsToUint(sv[s + 1u]);
#endif
}
