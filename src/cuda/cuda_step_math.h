/* The per-op arithmetic of the device step (src/gpu/gpu_step.h), written once for the OpenCL and
 * the CUDA kernels as cuda_kind_math.h is for the weight kinds: the OpenCL program embeds this
 * file (src/opencl/backend.cmake), the CUDA step kernels include it (cuda_step.cu), so what PoCL
 * runs in the tests here is the arithmetic a GPU will run. Only the work decomposition (threads,
 * reductions, shared memory) differs between the two.
 *
 * What it holds: RMSNorm's scale, RoPE's rotation, the GLU activations, the soft-cap, the scaled
 * and capped attention score and the online softmax's rescale, and for every KV kind the step
 * stores (BP_SM_KV_KINDS) a quantizer of a head's row -- the same float operations, in the same
 * order, as the CPU's reference quantizers (src/kinds/ref_legacy.c, half.c), so the cache bytes
 * agree -- and a reader of element d of a row.
 *
 * And the kernels' bodies where they do not depend on the weight kind (RMSNorm's row, the
 * elementwise items, RoPE's pair, KV append, attention's row): each a function of one work-item
 * (or one work-group's thread, with its group's local arrays passed in), so the OpenCL and CUDA
 * kernels are only their signatures, grids and local-memory declarations.
 *
 * Dialect: BP_SM is the function qualifier, BP_SMG the address space of device buffers
 * (__global in OpenCL C 1.2, which has no generic one; nothing in CUDA and C), BP_SML that of a
 * work-group's local / shared memory, BP_SM_SYNC() its barrier. Pointers without a qualifier are
 * private (OpenCL) / thread-local values. The math names are C's (expf, ...); OpenCL spells them
 * without the suffix, mapped below. Work-groups are 64 wide (BP_SM_WG). */
#ifndef BP_CUDA_STEP_MATH_H
#define BP_CUDA_STEP_MATH_H

#include "cuda/cuda_kind_math.h"
#include "gpu/step_args.h"

#define BP_SM_WG 64

#if defined(__OPENCL_C_VERSION__)
#define BP_SM static inline
#define BP_SMG __global
#define BP_SML __local
#define BP_SM_SYNC() barrier(CLK_LOCAL_MEM_FENCE)
#define bp_sm_exp(x) exp(x)
#define bp_sm_tanh(x) tanh(x)
#define bp_sm_sqrt(x) sqrt(x)
#define bp_sm_erf(x) erf(x)
#define bp_sm_trunc(x) trunc(x)
#define bp_sm_round(x) round(x)
#define bp_sm_cos(x) cos(x)
#define bp_sm_sin(x) sin(x)
#elif defined(__CUDACC__)
#define BP_SM static __device__ __forceinline__
#define BP_SMG
#define BP_SML
#define BP_SM_SYNC() __syncthreads()
#else
#define BP_SM static inline
#define BP_SMG
#define BP_SML
#define BP_SM_SYNC() ((void)0) /* the host build has one thread: a barrier is nothing */
#endif
#if !defined(__OPENCL_C_VERSION__)
#define bp_sm_exp(x) expf(x)
#define bp_sm_tanh(x) tanhf(x)
#define bp_sm_sqrt(x) sqrtf(x)
#define bp_sm_erf(x) erff(x)
#define bp_sm_trunc(x) truncf(x)
#define bp_sm_round(x) roundf(x)
#define bp_sm_cos(x) cosf(x)
#define bp_sm_sin(x) sinf(x)
#endif

/* The KV kinds the step's kv_append and attention kernels exist for: (NAME, block elements,
 * block bytes). */
#define BP_SM_KV_KINDS(X) \
    X(F32, 1, 4) X(F16, 1, 2) X(BF16, 1, 2) X(Q8_0, 32, 34) X(Q4_0, 32, 18) X(Q4_1, 32, 20) X(Q5_0, 32, 22) X(Q5_1, 32, 24)

/* ---- norms, RoPE, activations ------------------------------------------------------------- */

/* RMSNorm: x * this (* gain) from the row's sum of squares over n. */
BP_SM float bp_sm_rms_scale(float sumsq, uint32_t n, float eps) { return 1.0f / bp_sm_sqrt(sumsq / (float)n + eps); }

/* RoPE: the pair (x0, x1) turned by theta = position * inverse frequency. */
BP_SM void bp_sm_rope(float x0, float x1, float theta, float *y0, float *y1) {
    const float c = bp_sm_cos(theta), s = bp_sm_sin(theta);
    *y0 = x0 * c - x1 * s;
    *y1 = x0 * s + x1 * c;
}

/* act(g) * u: act 0 SiLU, 1 GELU (tanh form), 2 GELU (erf) -- bp_activation's order. */
BP_SM float bp_sm_glu(float g, float u, uint32_t act) {
    float a;
    if (act == 0u) a = g / (1.0f + bp_sm_exp(-g));
    else if (act == 1u) a = 0.5f * g * (1.0f + bp_sm_tanh(0.7978845608028654f * (g + 0.044715f * g * g * g)));
    else a = 0.5f * g * (1.0f + bp_sm_erf(g * 0.7071067811865476f));
    return a * u;
}

BP_SM float bp_sm_softcap(float v, float cap) { return cap * bp_sm_tanh(v / cap); }

/* ---- attention ----------------------------------------------------------------------------- */

/* A key's score: scale * q.k, soft-capped when softcap > 0. */
BP_SM float bp_sm_score(float dot, float scale, float softcap) {
    const float s = scale * dot;
    return softcap > 0.0f ? bp_sm_softcap(s, softcap) : s;
}

/* Online softmax: a running max m and sum l of exp(s - m) meet a chunk whose largest score is cm.
 * Returns the factor that rescales l and the weighted values so far (0 at the first chunk,
 * where m is -inf) and moves *m to the new max. */
BP_SM float bp_sm_softmax_rescale(float *m, float cm) {
    const float mn = *m > cm ? *m : cm;
    const float corr = bp_sm_exp(*m - mn);
    *m = mn;
    return corr;
}

/* ---- float conversions, as the CPU's (src/kinds/half.c) ------------------------------------ */

BP_SM uint32_t bp_sm_f32_bits(float f) {
#if defined(__OPENCL_C_VERSION__)
    return as_uint(f);
#elif defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

/* f32 -> f16, round to nearest even; inf and NaN as numpy (a NaN keeps its top payload bits). */
BP_SM uint16_t bp_sm_f16_of(float f) {
    const uint32_t x = bp_sm_f32_bits(f), ax = x & 0x7fffffffu;
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if (ax >= 0x7f800000u) {
        uint16_t r = (uint16_t)(0x7c00u | ((ax & 0x7fffffu) >> 13));
        if (ax != 0x7f800000u && r == 0x7c00u) r++;
        return (uint16_t)(sign | (ax == 0x7f800000u ? 0x7c00u : r));
    }
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* a half subnormal, in units of 2^-24 */
        if (ax <= 0x33000000u) return sign;
        const uint32_t shift = 126u - (ax >> 23), m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
        if (rem > tie || (rem == tie && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t bits = ((ax >> 13) - (112u << 10)) & 0xffffu;
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (bits & 1u))) bits++;
    return (uint16_t)(sign | bits);
}

/* f32 -> bf16, round to nearest even, a NaN made quiet. */
BP_SM uint16_t bp_sm_bf16_of(float f) {
    uint32_t n = bp_sm_f32_bits(f);
    if ((n & 0x7fffffffu) > 0x7f800000u) n = (n & 0xffff0000u) | 0x00400000u;
    return (uint16_t)((n + 0x7fffu + ((n >> 16) & 1u)) >> 16);
}

BP_SM void bp_sm_put16(BP_SMG uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
BP_SM uint16_t bp_sm_get16(BP_SMG const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* trunc(v) clamped to [0, hi], and 1/d or 0: the reference quantizers' helpers. */
BP_SM int bp_sm_trunc_clamp(float v, int hi) {
    const float t = bp_sm_trunc(v);
    return !(t >= 0.0f) ? 0 : t >= (float)hi ? hi : (int)t;
}
BP_SM float bp_sm_inverse(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

/* ---- KV rows: store n values of a head's row (blocks of 32 for the quantized kinds) --------- */

BP_SM void bp_sm_kv_store_F32(BP_SMG const float *x, BP_SMG uint8_t *b, int n) {
    for (int j = 0; j < n; j++) ((BP_SMG float *)b)[j] = x[j];
}
BP_SM void bp_sm_kv_store_F16(BP_SMG const float *x, BP_SMG uint8_t *b, int n) {
    for (int j = 0; j < n; j++) bp_sm_put16(b + 2 * j, bp_sm_f16_of(x[j]));
}
BP_SM void bp_sm_kv_store_BF16(BP_SMG const float *x, BP_SMG uint8_t *b, int n) {
    for (int j = 0; j < n; j++) bp_sm_put16(b + 2 * j, bp_sm_bf16_of(x[j]));
}

BP_SM void bp_sm_kv_store_Q8_0(BP_SMG const float *x, BP_SMG uint8_t *b, int n) {
    for (int k = 0; k < n; k += 32, x += 32, b += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float d = amax / 127.0f, id = bp_sm_inverse(d);
        for (int j = 0; j < 32; j++) {
            const float v = x[j] * id;
            const int q = v >= 127.0f ? 127 : v <= -127.0f ? -127 : v == v ? (int)bp_sm_round(v) : 0;
            b[2 + j] = (uint8_t)(int8_t)q;
        }
        bp_sm_put16(b, bp_sm_f16_of(d));
    }
}

/* The value of largest magnitude, the first of ties, starting from x[0] (its sign of zero). */
BP_SM float bp_sm_signed_absmax(BP_SMG const float *x) {
    float amax = fabsf(x[0]), mx = x[0];
    for (int j = 1; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), mx = x[j];
    return mx;
}

/* Q4_0 (levels 16) and Q5_0 (32): d = signed absmax / -levels/2, q = trunc(x/d + levels/2 + .5). */
BP_SM void bp_sm_quant_type0(BP_SMG const float *x, int half_levels, int *q, float *d_out) {
    const float d = bp_sm_signed_absmax(x) / (float)-half_levels, id = bp_sm_inverse(d);
    for (int j = 0; j < 32; j++) q[j] = bp_sm_trunc_clamp(x[j] * id + ((float)half_levels + 0.5f), 2 * half_levels - 1);
    *d_out = d;
}
/* Q4_1 (levels 15) and Q5_1 (31): d = (max - min) / levels, q = trunc((x - min)/d + .5). */
BP_SM void bp_sm_quant_type1(BP_SMG const float *x, int levels, int *q, float *d_out, float *m_out) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < 32; j++) {
        if (x[j] < mn) mn = x[j];
        if (x[j] > mx) mx = x[j];
    }
    const float d = (mx - mn) / (float)levels, id = bp_sm_inverse(d);
    for (int j = 0; j < 32; j++) q[j] = bp_sm_trunc_clamp((x[j] - mn) * id + 0.5f, levels);
    *d_out = d, *m_out = mn;
}
/* 32 quants of 4 bits at qs (element j low nibble of byte j, j + 16 the high one); with 5 bits
 * the fifth bits as a little-endian u32 at qh first. */
BP_SM void bp_sm_pack4(const int *q, BP_SMG uint8_t *qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 15) | ((q[j + 16] & 15) << 4));
}
BP_SM void bp_sm_pack5(const int *q, BP_SMG uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 32; j++) h |= (uint32_t)(q[j] >> 4) << j;
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
    bp_sm_pack4(q, qh + 4);
}

/* Q4_0 and Q5_0 rows (five: the 5-bit kind), Q4_1 and Q5_1 rows. */
BP_SM void bp_sm_kv_store_type0(BP_SMG const float *x, BP_SMG uint8_t *b, int n, int five) {
    for (int k = 0; k < n; k += 32, x += 32, b += five ? 22 : 18) {
        int q[32];
        float d;
        bp_sm_quant_type0(x, five ? 16 : 8, q, &d);
        bp_sm_put16(b, bp_sm_f16_of(d));
        if (five) bp_sm_pack5(q, b + 2);
        else bp_sm_pack4(q, b + 2);
    }
}
BP_SM void bp_sm_kv_store_type1(BP_SMG const float *x, BP_SMG uint8_t *b, int n, int five) {
    for (int k = 0; k < n; k += 32, x += 32, b += five ? 24 : 20) {
        int q[32];
        float d, m;
        bp_sm_quant_type1(x, five ? 31 : 15, q, &d, &m);
        bp_sm_put16(b, bp_sm_f16_of(d));
        bp_sm_put16(b + 2, bp_sm_f16_of(m));
        if (five) bp_sm_pack5(q, b + 4);
        else bp_sm_pack4(q, b + 4);
    }
}
BP_SM void bp_sm_kv_store_Q4_0(BP_SMG const float *x, BP_SMG uint8_t *b, int n) { bp_sm_kv_store_type0(x, b, n, 0); }
BP_SM void bp_sm_kv_store_Q5_0(BP_SMG const float *x, BP_SMG uint8_t *b, int n) { bp_sm_kv_store_type0(x, b, n, 1); }
BP_SM void bp_sm_kv_store_Q4_1(BP_SMG const float *x, BP_SMG uint8_t *b, int n) { bp_sm_kv_store_type1(x, b, n, 0); }
BP_SM void bp_sm_kv_store_Q5_1(BP_SMG const float *x, BP_SMG uint8_t *b, int n) { bp_sm_kv_store_type1(x, b, n, 1); }

/* ---- KV rows: element d of a row ------------------------------------------------------------ */

BP_SM float bp_sm_kv_at_F32(BP_SMG const uint8_t *r, int d) { return ((BP_SMG const float *)r)[d]; }
BP_SM float bp_sm_kv_at_F16(BP_SMG const uint8_t *r, int d) { return bp_cu_f16(bp_sm_get16(r + 2 * d)); }
BP_SM float bp_sm_kv_at_BF16(BP_SMG const uint8_t *r, int d) { return bp_cu_bf16(bp_sm_get16(r + 2 * d)); }
BP_SM float bp_sm_kv_at_Q8_0(BP_SMG const uint8_t *r, int d) {
    BP_SMG const uint8_t *b = r + (d >> 5) * 34;
    return bp_cu_f16(bp_sm_get16(b)) * (float)(int8_t)b[2 + (d & 31)];
}
/* The 4-bit quant of element j (0..31) of the nibbles at qs. */
BP_SM int bp_sm_nib(BP_SMG const uint8_t *qs, int j) { return (qs[j & 15] >> ((j >> 4) << 2)) & 15; }
BP_SM int bp_sm_q5(BP_SMG const uint8_t *qh, int j) { return bp_sm_nib(qh + 4, j) | (((qh[j >> 3] >> (j & 7)) & 1) << 4); }
/* Q4_0, Q4_1, Q5_0, Q5_1: blocks of bb bytes, d @0 (and the min @2), the quants after them. */
BP_SM float bp_sm_kv_at_legacy(BP_SMG const uint8_t *r, int d, int bb, int has_min, int five) {
    BP_SMG const uint8_t *b = r + (d >> 5) * bb;
    BP_SMG const uint8_t *qs = b + (has_min ? 4 : 2);
    const int q = five ? bp_sm_q5(qs, d & 31) : bp_sm_nib(qs, d & 31);
    const float scale = bp_cu_f16(bp_sm_get16(b));
    return has_min ? scale * (float)q + bp_cu_f16(bp_sm_get16(b + 2)) : scale * (float)(q - (five ? 16 : 8));
}
BP_SM float bp_sm_kv_at_Q4_0(BP_SMG const uint8_t *r, int d) { return bp_sm_kv_at_legacy(r, d, 18, 0, 0); }
BP_SM float bp_sm_kv_at_Q4_1(BP_SMG const uint8_t *r, int d) { return bp_sm_kv_at_legacy(r, d, 20, 1, 0); }
BP_SM float bp_sm_kv_at_Q5_0(BP_SMG const uint8_t *r, int d) { return bp_sm_kv_at_legacy(r, d, 22, 0, 1); }
BP_SM float bp_sm_kv_at_Q5_1(BP_SMG const uint8_t *r, int d) { return bp_sm_kv_at_legacy(r, d, 24, 1, 1); }

/* ---- the kernels' bodies ------------------------------------------------------------------- */

/* RMSNorm of row r by the group's thread tid (part: BP_SM_WG floats of local memory). In place is
 * fine: each thread writes only what it read. */
BP_SM void bp_sm_rms_norm_row(BP_SMG const float *x, BP_SMG const float *g, BP_SMG float *y, bp_gpu_norm_args a,
                              uint32_t r, uint32_t tid, BP_SML float *part) {
    const uint32_t xb = a.x_off + r * a.n, yb = a.y_off + r * a.n;
    float s = 0.0f;
    for (uint32_t j = tid; j < a.n; j += BP_SM_WG) s += x[xb + j] * x[xb + j];
    part[tid] = s;
    BP_SM_SYNC();
    for (uint32_t k = BP_SM_WG / 2; k > 0; k >>= 1) {
        if (tid < k) part[tid] += part[tid + k];
        BP_SM_SYNC();
    }
    const float inv = bp_sm_rms_scale(part[0], a.n, a.eps);
    for (uint32_t j = tid; j < a.n; j += BP_SM_WG) y[yb + j] = x[xb + j] * inv * (a.g_off == 0xFFFFFFFFu ? 1.0f : g[a.g_off + j]);
}

/* Element i (< a.count) of the residual add (mode 0), the bias add (1), the soft-cap (2). */
BP_SM void bp_sm_eltwise_item(BP_SMG float *y, BP_SMG const float *x, bp_gpu_elt_args a, uint32_t i) {
    float v = y[a.y_off + i];
    if (a.mode == 0u) v += x[a.x_off + i];
    else if (a.mode == 1u) v += x[a.x_off + i % a.n];
    else v = bp_sm_softcap(v, a.f);
    y[a.y_off + i] = v;
}

BP_SM void bp_sm_glu_item(BP_SMG float *gt, BP_SMG const float *u, bp_gpu_glu_args a, uint32_t i) {
    gt[a.g_off + i] = bp_sm_glu(gt[a.g_off + i], u[a.u_off + i], a.act);
}

/* RoPE item gid: pair k of head h of row r, in place; positions from io, frequencies from f. */
BP_SM void bp_sm_rope_item(BP_SMG float *x, BP_SMG const int32_t *io, BP_SMG const float *f, bp_gpu_rope_args a,
                           uint32_t gid) {
    const uint32_t half_ = a.n_rot / 2;
    if (gid >= a.rows * a.n_heads * half_) return;
    const uint32_t k = gid % half_, h = (gid / half_) % a.n_heads, r = gid / (half_ * a.n_heads);
    const float theta = (float)io[a.pos_idx + 2 * r] * f[a.f_off + k];
    const uint32_t base = a.x_off + (r * a.n_heads + h) * a.head_dim;
    const uint32_t ia = a.neox ? k : 2 * k, ib = a.neox ? k + half_ : 2 * k + 1;
    float y0, y1;
    bp_sm_rope(x[base + ia], x[base + ib], theta, &y0, &y1);
    x[base + ia] = y0;
    x[base + ib] = y1;
}

/* KV append item gid into the cache [n_kv_heads][cap][row_bytes] at positions io[0] + r: a
 * (token, head) row of a block kind, a pair of values of a float kind (BE == 1). And attention
 * over it: query row i of head h by the group's thread tid (qs: 256 floats, ss: BP_SM_WG, local),
 * keys in chunks of BP_SM_WG (one a thread) with the online softmax, each thread owning output
 * dims tid + 64 e, e < 4 (head_dim <= 256). Causal: the query at position p sees keys j <= p,
 * with window > 0 only j > p - window. */
#define BP_SM_KV_BODIES(NAME, BE, BB)                                                              \
    BP_SM void bp_sm_kv_append_##NAME(BP_SMG const float *src, BP_SMG uint8_t *cache, BP_SMG const int32_t *io, \
                                      bp_gpu_kv_args a, uint32_t gid) {                            \
        const uint32_t per = BE == 1 ? a.head_dim / 2 : 1, pos0 = (uint32_t)io[0];                 \
        if (gid >= a.rows * a.n_kv_heads * per) return;                                            \
        const uint32_t e = gid % per, h = (gid / per) % a.n_kv_heads, r = gid / (per * a.n_kv_heads); \
        BP_SMG const float *s = src + a.src_off + (r * a.n_kv_heads + h) * a.head_dim;             \
        BP_SMG uint8_t *row = cache + ((uint64_t)h * a.cap + pos0 + r) * a.row_bytes;              \
        if (BE == 1) bp_sm_kv_store_##NAME(s + 2 * e, row + 2 * e * BB, 2);                        \
        else bp_sm_kv_store_##NAME(s, row, (int)a.head_dim);                                       \
    }                                                                                              \
    BP_SM void bp_sm_attention_##NAME(BP_SMG const float *q, BP_SMG const uint8_t *kc, BP_SMG const uint8_t *vc, \
                                      BP_SMG float *o, BP_SMG const int32_t *io, bp_gpu_attn_args a, uint32_t h, \
                                      uint32_t i, uint32_t tid, BP_SML float *qs, BP_SML float *ss) { \
        const uint32_t D = a.head_dim, kbase = (h / (a.n_heads / a.n_kv_heads)) * a.cap;          \
        const int p = io[a.pos_idx + 2 * i];                                                       \
        const uint32_t qb = a.q_off + (i * a.n_heads + h) * D;                                     \
        for (uint32_t d = tid; d < D; d += BP_SM_WG) qs[d] = q[qb + d];                            \
        BP_SM_SYNC();                                                                              \
        const int j0 = a.window > 0 && p - (int)a.window + 1 > 0 ? p - (int)a.window + 1 : 0, j1 = p + 1; \
        float m = -INFINITY, l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};                           \
        for (int c0 = j0; c0 < j1; c0 += BP_SM_WG) {                                               \
            const int j = c0 + (int)tid, nk = j1 - c0 < BP_SM_WG ? j1 - c0 : BP_SM_WG;             \
            float s = -INFINITY;                                                                   \
            if (j < j1) {                                                                          \
                BP_SMG const uint8_t *kr = kc + (uint64_t)(kbase + (uint32_t)j) * a.row_bytes;     \
                float dot = 0.0f;                                                                  \
                for (uint32_t d = 0; d < D; d++) dot += qs[d] * bp_sm_kv_at_##NAME(kr, (int)d);     \
                s = bp_sm_score(dot, a.scale, a.softcap);                                          \
            }                                                                                      \
            ss[tid] = s;                                                                           \
            BP_SM_SYNC();                                                                          \
            float cm = -INFINITY;                                                                  \
            for (int k = 0; k < nk; k++) cm = ss[k] > cm ? ss[k] : cm;                             \
            const float corr = bp_sm_softmax_rescale(&m, cm);                                      \
            BP_SM_SYNC();                                                                          \
            ss[tid] = j < j1 ? bp_sm_exp(s - m) : 0.0f;                                            \
            BP_SM_SYNC();                                                                          \
            float ls = 0.0f, add[4] = {0.0f, 0.0f, 0.0f, 0.0f};                                     \
            for (int k = 0; k < nk; k++) {                                                         \
                const float pk = ss[k];                                                            \
                BP_SMG const uint8_t *vr = vc + (uint64_t)(kbase + (uint32_t)(c0 + k)) * a.row_bytes; \
                ls += pk;                                                                          \
                for (uint32_t e = 0; e < 4; e++)                                                   \
                    if (tid + BP_SM_WG * e < D) add[e] += pk * bp_sm_kv_at_##NAME(vr, (int)(tid + BP_SM_WG * e)); \
            }                                                                                      \
            l = l * corr + ls;                                                                     \
            for (uint32_t e = 0; e < 4; e++) acc[e] = acc[e] * corr + add[e];                      \
            BP_SM_SYNC();                                                                          \
        }                                                                                          \
        const uint32_t ob = a.o_off + (i * a.n_heads + h) * D;                                     \
        for (uint32_t e = 0; e < 4; e++)                                                           \
            if (tid + BP_SM_WG * e < D) o[ob + tid + BP_SM_WG * e] = l > 0.0f ? acc[e] / l : 0.0f; \
    }
BP_SM_KV_KINDS(BP_SM_KV_BODIES)

#endif /* BP_CUDA_STEP_MATH_H */
