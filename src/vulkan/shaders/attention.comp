#version 450
// out[i][h] = softmax(scale q K^T, capped, masked) V for query row i of head h over one layer's
// cache [n_kv_heads][cap][row_bytes] of the cache's kind (-DKV_<KIND>, kv_quant.glsl): one workgroup per (head,
// row), keys in chunks of 64 (one per thread) with an online softmax, each thread owning up to
// 4 output dims (head_dim <= 256). The query at position p sees keys j <= p (causal), and with
// window > 0 only j > p - window.
layout(std430, set = 0, binding = 0) readonly buffer QBuf { float qv[]; };
layout(std430, set = 1, binding = 0) readonly buffer KBuf { uint kc[]; };
layout(std430, set = 2, binding = 0) readonly buffer VBuf { uint vc[]; };
layout(std430, set = 3, binding = 0) writeonly buffer OBuf { float ov[]; };
layout(std430, set = 4, binding = 0) readonly buffer IOBuf { int io[]; };
layout(push_constant) uniform Push {
    uint rows, n_heads, n_kv_heads, head_dim, cap, q_off, o_off, pos_idx;
    float scale, softcap;
    uint window, row_bytes;
} pc;
#include "kv_quant.glsl"
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
shared float qs[256];
shared float ss[64];

void main() {
    uint h = gl_WorkGroupID.x, i = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint D = pc.head_dim;
    uint g = h / (pc.n_heads / pc.n_kv_heads);
    int p = io[pc.pos_idx + 2u * i];
    uint qb = pc.q_off + (i * pc.n_heads + h) * D;
    for (uint d = tid; d < D; d += 64u) qs[d] = qv[qb + d];
    barrier();
    int j0 = pc.window > 0u ? max(0, p - int(pc.window) + 1) : 0;
    int j1 = p + 1;
    float m = -1.0 / 0.0, l = 0.0;
    vec4 acc = vec4(0.0);
    uint kbase = g * pc.cap; // the head's first row
    for (int c0 = j0; c0 < j1; c0 += 64) {
        int j = c0 + int(tid);
        float s = -1.0 / 0.0;
        if (j < j1) {
            uint o = (kbase + uint(j)) * pc.row_bytes;
            float dot_ = 0.0;
            for (uint d = 0u; d < D; d++) dot_ += qs[d] * KV_AT(kc, o, d);
            s = pc.scale * dot_;
            if (pc.softcap > 0.0) s = pc.softcap * tanh(s / pc.softcap);
        }
        ss[tid] = s;
        barrier();
        float cm = -1.0 / 0.0;
        int nk = min(64, j1 - c0);
        for (int k = 0; k < nk; k++) cm = max(cm, ss[k]);
        float mn = max(m, cm);
        float corr = exp(m - mn);
        barrier();
        ss[tid] = j < j1 ? exp(s - mn) : 0.0;
        barrier();
        float ls = 0.0;
        vec4 add = vec4(0.0);
        for (int k = 0; k < nk; k++) {
            float pk = ss[k];
            ls += pk;
            uint o = (kbase + uint(c0 + k)) * pc.row_bytes;
            for (uint q = 0u; q < 4u; q++) {
                uint d = tid + 64u * q;
                if (d < D) add[q] += pk * KV_AT(vc, o, d);
            }
        }
        l = l * corr + ls;
        acc = acc * corr + add;
        m = mn;
        barrier();
    }
    uint ob = pc.o_off + (i * pc.n_heads + h) * D;
    for (uint q = 0u; q < 4u; q++) {
        uint d = tid + 64u * q;
        if (d < D) ov[ob + d] = l > 0.0 ? acc[q] / l : 0.0;
    }
}
