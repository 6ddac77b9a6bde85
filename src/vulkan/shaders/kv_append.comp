#version 450
// Store `rows` tokens of K (or V) [rows][n_kv_heads * head_dim] (f32) at positions pos0 + r of a
// layer's cache [n_kv_heads][cap][row_bytes] in the cache's kind (-DKV_<KIND>, kv_quant.glsl).
// One thread per (token, head) row for the block kinds: it quantizes the row's blocks as the CPU
// does (src/kinds/ref_legacy.c) and writes whole words; one per value pair for the float kinds.
#include "kv_quant.glsl"
layout(std430, set = 0, binding = 0) readonly buffer SBuf { float sv[]; };
layout(std430, set = 1, binding = 0) buffer CBuf { uint cv[]; };
layout(std430, set = 2, binding = 0) readonly buffer IOBuf { int io[]; };
layout(push_constant) uniform Push { uint rows, n_kv_heads, head_dim, cap, src_off, row_bytes; } pc;
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

#if KV_IS_BLOCK
uint acc_word, acc_n, out_w;
void put(uint b) {
    acc_word |= (b & 0xFFu) << (acc_n << 3);
    if (++acc_n == 4u) { cv[out_w++] = acc_word; acc_word = 0u; acc_n = 0u; }
}
void put16(uint h) { put(h); put(h >> 8); }
uint half_of(float f) { return packHalf2x16(vec2(f, 0.0)) & 0xFFFFu; }
// trunc(v) clamped to [0, hi], as the CPU's trunc_clamp.
uint tc(float v, uint hi) { float t = trunc(v); return !(t >= 0.0) ? 0u : t >= float(hi) ? hi : uint(t); }
#endif

void main() {
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint pos0 = uint(io[0]);
#if KV_IS_BLOCK
    if (gid >= pc.rows * pc.n_kv_heads) return;
    uint h = gid % pc.n_kv_heads, r = gid / pc.n_kv_heads;
    uint s = pc.src_off + (r * pc.n_kv_heads + h) * pc.head_dim;
    out_w = ((h * pc.cap + pos0 + r) * pc.row_bytes) >> 2;
    acc_word = 0u; acc_n = 0u;
    for (uint b0 = 0u; b0 < pc.head_dim; b0 += 32u) {
        uint o = s + b0;
#if defined(KV_Q8_0)
        float amax = 0.0;
        for (uint j = 0u; j < 32u; j++) amax = max(amax, abs(sv[o + j]));
        float d = amax / 127.0, id = d != 0.0 ? 1.0 / d : 0.0;
        put16(half_of(d));
        for (uint j = 0u; j < 32u; j++) { float v = clamp(sv[o + j] * id, -127.0, 127.0); put(uint(int(sign(v) * floor(abs(v) + 0.5)))); } // half away from zero, as roundf
#elif defined(KV_Q4_0) || defined(KV_Q5_0)
        float mx = 0.0, amax = 0.0;
        for (uint j = 0u; j < 32u; j++) if (abs(sv[o + j]) > amax) { amax = abs(sv[o + j]); mx = sv[o + j]; }
#if defined(KV_Q4_0)
        float d = mx / -8.0;
#else
        float d = mx / -16.0;
#endif
        float id = d != 0.0 ? 1.0 / d : 0.0;
        put16(half_of(d));
#if defined(KV_Q4_0)
        for (uint j = 0u; j < 16u; j++) put(tc(sv[o + j] * id + 8.5, 15u) | (tc(sv[o + j + 16u] * id + 8.5, 15u) << 4));
#else
        uint qh = 0u;
        for (uint j = 0u; j < 32u; j++) qh |= (tc(sv[o + j] * id + 16.5, 31u) >> 4) << j;
        put16(qh); put16(qh >> 16);
        for (uint j = 0u; j < 16u; j++) put((tc(sv[o + j] * id + 16.5, 31u) & 15u) | ((tc(sv[o + j + 16u] * id + 16.5, 31u) & 15u) << 4));
#endif
#else // Q4_1, Q5_1
        float mn = sv[o], mx = sv[o];
        for (uint j = 1u; j < 32u; j++) { mn = min(mn, sv[o + j]); mx = max(mx, sv[o + j]); }
#if defined(KV_Q4_1)
        const uint lv = 15u;
#else
        const uint lv = 31u;
#endif
        float d = (mx - mn) / float(lv), id = d != 0.0 ? 1.0 / d : 0.0;
        put16(half_of(d)); put16(half_of(mn));
#if defined(KV_Q4_1)
        for (uint j = 0u; j < 16u; j++) put(tc((sv[o + j] - mn) * id + 0.5, lv) | (tc((sv[o + j + 16u] - mn) * id + 0.5, lv) << 4));
#else
        uint qh = 0u;
        for (uint j = 0u; j < 32u; j++) qh |= (tc((sv[o + j] - mn) * id + 0.5, lv) >> 4) << j;
        put16(qh); put16(qh >> 16);
        for (uint j = 0u; j < 16u; j++) put((tc((sv[o + j] - mn) * id + 0.5, lv) & 15u) | ((tc((sv[o + j + 16u] - mn) * id + 0.5, lv) & 15u) << 4));
#endif
#endif
    }
#else
    uint hd2 = pc.head_dim / 2u;
    if (gid >= pc.rows * pc.n_kv_heads * hd2) return;
    uint d2 = gid % hd2, h = (gid / hd2) % pc.n_kv_heads, r = gid / (hd2 * pc.n_kv_heads);
    uint s = pc.src_off + (r * pc.n_kv_heads + h) * pc.head_dim + 2u * d2;
    uint w = (((h * pc.cap + pos0 + r) * pc.row_bytes) >> 2);
#if defined(KV_F32)
    cv[w + 2u * d2] = floatBitsToUint(sv[s]);
    cv[w + 2u * d2 + 1u] = floatBitsToUint(sv[s + 1u]);
#elif defined(KV_F16)
    cv[w + d2] = packHalf2x16(vec2(sv[s], sv[s + 1u]));
#else // BF16: round to nearest even, as the CPU's conversion
    uint a = floatBitsToUint(sv[s]), b = floatBitsToUint(sv[s + 1u]);
    a = (a + 0x7FFFu + ((a >> 16) & 1u)) >> 16;
    b = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    cv[w + d2] = a | (b << 16);
#endif
#endif
}
