// Per-kind dequantisation, selected at compile time by -DKIND_<NAME>. Every kind defines
//   QK    elements per block        QB   bytes per block
//   SUBN  elements per sub-block    (QK is a multiple of SUBN)
//   float dq_sub(uint bo, uint s, uint ctx)
//         dequantises sub-block s of the block starting at byte bo, handing element j (value
//         val) to EMIT(j, val), a macro the including shader defines with `ctx` and `dq_acc`
//         in scope: the matvec accumulates val * x[ctx + j] into dq_acc (which dq_sub
//         returns), the GEMM stores val to shared memory at ctx + j. Values never sit in an
//         array: a dynamically indexed private array lives in scratch memory on many drivers,
//         and on llvmpipe it made the matvec several times slower.
// Quantized kinds use SUBN = 32 (every block size is a multiple of 32, and 32 is the
// granularity of most scales); the plain float kinds use SUBN = 1 so any column count works.
// The math follows the published block layouts (ggml-common.h); the CPU reference kernels in
// src/kinds are the oracle the tests compare against.

#if defined(KIND_F32)
#define QK 1u
#define QB 4u
#define SUBN 1
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    EMIT(0u, uintBitsToFloat(wq[bo >> 2]));
    return dq_acc;
}

#elif defined(KIND_F16)
#define QK 1u
#define QB 2u
#define SUBN 1
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    EMIT(0u, rdf16(bo));
    return dq_acc;
}

#elif defined(KIND_BF16)
#define QK 1u
#define QB 2u
#define SUBN 1
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    EMIT(0u, uintBitsToFloat(rd16(bo) << 16));
    return dq_acc;
}

#elif defined(KIND_Q4_0) || defined(KIND_Q4_1) || defined(KIND_IQ4_NL) || defined(KIND_MXFP4)
// 32 elements: a scale (and a min), then 16 bytes of nibbles; element j < 16 in the low
// nibble of byte j, element j + 16 in its high nibble.
#define QK 32u
#define SUBN 32
#if defined(KIND_Q4_0)
#define QB 18u
#define QS_OFF 2u
#elif defined(KIND_Q4_1)
#define QB 20u
#define QS_OFF 4u
#elif defined(KIND_IQ4_NL)
#define QB 18u
#define QS_OFF 2u
#include "iq_tables.glsl"
#define kv_nl(q) float(kvalues_iq4nl(q))
#else
#define QB 17u
#define QS_OFF 1u

#endif
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
#if defined(KIND_MXFP4)
    uint e = rd8(bo);
    // 2^(e-127) / 2, with the two smallest exponents as denormals
    float d = uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23));
    float m = 0.0;
#else
    float d = rdf16(bo);
#if defined(KIND_Q4_1)
    float m = rdf16(bo + 2u);
#else
    float m = 0.0;
#endif
#endif
    for (uint i = 0u; i < 4u; i++) {
        uint q = rd32(bo + QS_OFF + 4u * i);
        for (uint b = 0u; b < 4u; b++) {
            uint lo = byte_of(q, b) & 15u, hi = byte_of(q, b) >> 4;
#if defined(KIND_IQ4_NL)
            EMIT(4u * i + b, d * kv_nl(lo));
            EMIT(16u + 4u * i + b, d * kv_nl(hi));
#elif defined(KIND_MXFP4)
            EMIT(4u * i + b, d * kv_fp4(lo));
            EMIT(16u + 4u * i + b, d * kv_fp4(hi));
#elif defined(KIND_Q4_0)
            EMIT(4u * i + b, d * (float(lo) - 8.0));
            EMIT(16u + 4u * i + b, d * (float(hi) - 8.0));
#else
            EMIT(4u * i + b, d * float(lo) + m);
            EMIT(16u + 4u * i + b, d * float(hi) + m);
#endif
        }
    }
    return dq_acc;
}

#elif defined(KIND_Q5_0) || defined(KIND_Q5_1)
#define QK 32u
#define SUBN 32
#if defined(KIND_Q5_0)
#define QB 22u
#define QH_OFF 2u
#else
#define QB 24u
#define QH_OFF 4u
#endif
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
#if defined(KIND_Q5_1)
    float m = rdf16(bo + 2u);
#endif
    uint qh = rd32(bo + QH_OFF);
    for (uint i = 0u; i < 4u; i++) {
        uint q = rd32(bo + QH_OFF + 4u + 4u * i);
        for (uint b = 0u; b < 4u; b++) {
            uint j = 4u * i + b;
            uint lo = (byte_of(q, b) & 15u) | (((qh >> j) & 1u) << 4);
            uint hi = (byte_of(q, b) >> 4) | (((qh >> (j + 16u)) & 1u) << 4);
#if defined(KIND_Q5_1)
            EMIT(j, d * float(lo) + m);
            EMIT(j + 16u, d * float(hi) + m);
#else
            EMIT(j, d * float(int(lo) - 16));
            EMIT(j + 16u, d * float(int(hi) - 16));
#endif
        }
    }
    return dq_acc;
}

#elif defined(KIND_Q8_0)
#define QK 32u
#define QB 34u
#define SUBN 32
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    for (uint i = 0u; i < 8u; i++) {
        uint q = rd32(bo + 2u + 4u * i);
        for (uint b = 0u; b < 4u; b++) EMIT(4u * i + b, d * float(sbyte_of(q, b)));
    }
    return dq_acc;
}

#elif defined(KIND_Q1_0)
// 128 elements: f16 scale, then one bit per element: +d when set, -d when clear.
#define QK 128u
#define QB 18u
#define SUBN 32
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    uint q = rd32(bo + 2u + 4u * s);
    for (uint j = 0u; j < 32u; j++) EMIT(j, ((q >> j) & 1u) != 0u ? d : -d);
    return dq_acc;
}

#elif defined(KIND_Q2_0)
// 64 elements: f16 scale, then 2 bits per element (lowest first): value (q - 1) * d.
#define QK 64u
#define QB 18u
#define SUBN 32
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    for (uint i = 0u; i < 2u; i++) {
        uint q = rd32(bo + 2u + 8u * s + 4u * i);
        for (uint j = 0u; j < 16u; j++) EMIT(16u * i + j, (float((q >> (2u * j)) & 3u) - 1.0) * d);
    }
    return dq_acc;
}

#elif defined(KIND_NVFP4)
// 64 elements: 4 UE4M3 scales (one per 16), then 32 bytes of E2M1 nibbles; within a group of
// 16, element j < 8 is the low nibble of byte j, element j + 8 its high nibble.
#define QK 64u
#define QB 36u
#define SUBN 32

float ue4m3_half(uint x) {
    if (x == 0u || x == 0x7Fu) return 0.0;
    uint e = (x >> 3) & 15u, man = x & 7u;
    float raw = e == 0u ? ldexp(float(man), -9) : ldexp(1.0 + float(man) / 8.0, int(e) - 7);
    return raw * 0.5;
}
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    for (uint g = 0u; g < 2u; g++) {
        uint grp = 2u * s + g;
        float d = ue4m3_half(rd8(bo + grp));
        for (uint i = 0u; i < 2u; i++) {
            uint q = rd32(bo + 4u + 8u * grp + 4u * i);
            for (uint b = 0u; b < 4u; b++) {
                EMIT(16u * g + 4u * i + b, d * kv_fp4(byte_of(q, b) & 15u));
                EMIT(16u * g + 8u + 4u * i + b, d * kv_fp4(byte_of(q, b) >> 4));
            }
        }
    }
    return dq_acc;
}

#elif defined(KIND_Q2_K)
// 256 elements: scales[16] (4-bit scale | 4-bit min), qs[64], d, dmin. Sub-block s = 32
// elements: half h = s/4 uses qs[32h..32h+32) shifted by 2*(s%4); scale index 8h + 2(s%4) + l/16.
#define QK 256u
#define QB 84u
#define SUBN 32
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo + 80u), dmin = rdf16(bo + 82u);
    uint h = s >> 2, sh = 2u * (s & 3u);
    uint sc0 = rd8(bo + 8u * h + 2u * (s & 3u)), sc1 = rd8(bo + 8u * h + 2u * (s & 3u) + 1u);
    for (uint i = 0u; i < 8u; i++) {
        uint q = rd32(bo + 16u + 32u * h + 4u * i);
        uint sc = i < 4u ? sc0 : sc1;
        float dl = d * float(sc & 15u), ml = dmin * float(sc >> 4);
        for (uint b = 0u; b < 4u; b++) EMIT(4u * i + b, dl * float((byte_of(q, b) >> sh) & 3u) - ml);
    }
    return dq_acc;
}

#elif defined(KIND_Q3_K)
// 256 elements: hmask[32], qs[64], scales[12] (16 six-bit scales), d. Sub-block s: half
// h = s/4, shift 2*(s%4), high-bit mask bit 4h + s%4 of hmask[l], scale 8h + 2(s%4) + l/16.
#define QK 256u
#define QB 110u
#define SUBN 32
int q3k_scale(uint bo, uint i) {
    uint lo = i < 8u ? (rd8(bo + 96u + i) & 15u) : (rd8(bo + 96u + i - 8u) >> 4);
    uint hi = (rd8(bo + 104u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
    return int(lo | (hi << 4)) - 32;
}
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo + 108u);
    uint h = s >> 2, j = s & 3u, sh = 2u * j, mbit = 4u * h + j;
    float dl0 = d * float(q3k_scale(bo, 8u * h + 2u * j));
    float dl1 = d * float(q3k_scale(bo, 8u * h + 2u * j + 1u));
    for (uint i = 0u; i < 8u; i++) {
        uint q = rd32(bo + 32u + 32u * h + 4u * i);
        uint hm = rd32(bo + 4u * i);
        float dl = i < 4u ? dl0 : dl1;
        for (uint b = 0u; b < 4u; b++) {
            int qv = int((byte_of(q, b) >> sh) & 3u) - (((byte_of(hm, b) >> mbit) & 1u) != 0u ? 0 : 4);
            EMIT(4u * i + b, dl * float(qv));
        }
    }
    return dq_acc;
}

#elif defined(KIND_Q4_K) || defined(KIND_Q5_K)
// 256 elements: d, dmin, scales[12] (8 six-bit scale/min pairs), [qh[32] for Q5_K], qs[128].
// Sub-block s: bytes qs[32(s/2)..+32), low nibble for even s, high for odd; Q5_K's fifth bit
// is bit s of qh[l].
#define QK 256u
#define SUBN 32
#if defined(KIND_Q4_K)
#define QB 144u
#define QS_OFF 16u
#else
#define QB 176u
#define QS_OFF 48u
#endif
void kq_scale_min(uint bo, uint j, out uint sc, out uint m) {
    if (j < 4u) {
        sc = rd8(bo + 4u + j) & 63u;
        m = rd8(bo + 8u + j) & 63u;
    } else {
        sc = (rd8(bo + 8u + j) & 15u) | ((rd8(bo + j) >> 6) << 4);
        m = (rd8(bo + 8u + j) >> 4) | ((rd8(bo + 4u + j) >> 6) << 4);
    }
}
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo), dmin = rdf16(bo + 2u);
    uint sc, m;
    kq_scale_min(bo, s, sc, m);
    float dl = d * float(sc), ml = dmin * float(m);
    uint sh = 4u * (s & 1u);
    for (uint i = 0u; i < 8u; i++) {
        uint q = rd32(bo + QS_OFF + 32u * (s >> 1) + 4u * i);
#if defined(KIND_Q5_K)
        uint qh = rd32(bo + 16u + 4u * i);
#endif
        for (uint b = 0u; b < 4u; b++) {
            uint qv = (byte_of(q, b) >> sh) & 15u;
#if defined(KIND_Q5_K)
            qv |= ((byte_of(qh, b) >> s) & 1u) << 4;
#endif
            EMIT(4u * i + b, dl * float(qv) - ml);
        }
    }
    return dq_acc;
}

#elif defined(KIND_Q6_K)
// 256 elements: ql[128], qh[64], scales[16] (int8), d. Element 128n + 32k + l (sub-block
// s = 4n + k): low nibble of ql[64n + 32(k&1) + l] (high nibble for k >= 2), two high bits
// (qh[32n + l] >> 2k) & 3, scale scales[8n + 2k + l/16]; value d * scale * (q - 32).
#define QK 256u
#define QB 210u
#define SUBN 32
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo + 208u);
    uint n = s >> 2, k = s & 3u;
    float dl0 = d * float(bitfieldExtract(int(rd8(bo + 192u + 8u * n + 2u * k)), 0, 8));
    float dl1 = d * float(bitfieldExtract(int(rd8(bo + 192u + 8u * n + 2u * k + 1u)), 0, 8));
    uint nsh = 4u * (k >> 1);
    for (uint i = 0u; i < 8u; i++) {
        uint ql = rd32(bo + 64u * n + 32u * (k & 1u) + 4u * i);
        uint qh = rd32(bo + 128u + 32u * n + 4u * i);
        float dl = i < 4u ? dl0 : dl1;
        for (uint b = 0u; b < 4u; b++) {
            uint qv = ((byte_of(ql, b) >> nsh) & 15u) | (((byte_of(qh, b) >> (2u * k)) & 3u) << 4);
            EMIT(4u * i + b, dl * float(int(qv) - 32));
        }
    }
    return dq_acc;
}

#elif defined(KIND_TQ2_0)
// 256 elements: qs[64], d. Element 128j + 32l + m: (qs[32j + m] >> 2l) & 3, value (q - 1) * d.
#define QK 256u
#define QB 66u
#define SUBN 32
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo + 64u);
    uint j = s >> 2, sh = 2u * (s & 3u);
    for (uint i = 0u; i < 8u; i++) {
        uint q = rd32(bo + 32u * j + 4u * i);
        for (uint b = 0u; b < 4u; b++) EMIT(4u * i + b, (float((byte_of(q, b) >> sh) & 3u) - 1.0) * d);
    }
    return dq_acc;
}

#elif defined(KIND_TQ1_0)
// 256 elements: qs[48] (5 trits per byte), qh[4] (4 trits per byte), d. Trit n of byte q is
// ((uint8)(q * 3^n) * 3) >> 8. Elements 0..159: trit e/32 of qs[e%32]; 160..239: trit
// (e-160)/16 of qs[32 + (e-160)%16]; 240..255: trit (e-240)/4 of qh[(e-240)%4].
#define QK 256u
#define QB 54u
#define SUBN 32
uint pow3(uint n) { return n == 0u ? 1u : n == 1u ? 3u : n == 2u ? 9u : n == 3u ? 27u : n == 4u ? 81u : 243u; }
float tq1_trit(uint q, uint n) { return float(int((((q * pow3(n)) & 255u) * 3u) >> 8) - 1); }
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo + 52u);
    for (uint l = 0u; l < 32u; l++) {
        uint e = 32u * s + l;
        uint byte_off, n;
        if (e < 160u) { byte_off = e & 31u; n = e >> 5; }
        else if (e < 240u) { byte_off = 32u + ((e - 160u) & 15u); n = (e - 160u) >> 4; }
        else { byte_off = 48u + ((e - 240u) & 3u); n = (e - 240u) >> 2; }
        EMIT(l, tq1_trit(rd8(bo + byte_off), n) * d);
    }
    return dq_acc;
}

#elif defined(KIND_IQ4_XS)
// 256 elements: d, scales_h (u16), scales_l[4], qs[128]. Sub-block s: 6-bit scale
// (scales_l[s/2] >> 4(s%2)) & 15 | ((scales_h >> 2s) & 3) << 4, minus 32; 16 bytes of
// nibbles indexing the IQ4_NL values as in IQ4_NL.
#define QK 256u
#define QB 136u
#define SUBN 32
#include "iq_tables.glsl"
#define kv_nl(q) float(kvalues_iq4nl(q))
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    uint ls = ((rd8(bo + 4u + (s >> 1)) >> (4u * (s & 1u))) & 15u) | (((rd16(bo + 2u) >> (2u * s)) & 3u) << 4);
    float dl = d * float(int(ls) - 32);
    for (uint i = 0u; i < 4u; i++) {
        uint q = rd32(bo + 8u + 16u * s + 4u * i);
        for (uint b = 0u; b < 4u; b++) {
            EMIT(4u * i + b, dl * kv_nl(byte_of(q, b) & 15u));
            EMIT(16u + 4u * i + b, dl * kv_nl(byte_of(q, b) >> 4));
        }
    }
    return dq_acc;
}

#else
#include "dequant_iq.glsl"
#endif
