// Dequantisation of the grid-based IQ kinds (see dequant.glsl for the contract). The grids
// are read from a storage buffer (set 3) through the accessors of iq_tables.glsl, generated at
// build time from src/kinds/iq_tables.h by src/vulkan/gen_iq_glsl.c, so shader and CPU
// reference read the same numbers. All of these
// kinds have 256-element blocks made of eight 32-element sub-blocks with their own scale.
#include "iq_tables.glsl"

#define QK 256u
#define SUBN 32

// Byte j (0..7) of a 64-bit grid entry stored as (low word, high word).
uint grid_byte(uvec2 g, uint j) { return ((j < 4u ? g.x : g.y) >> (8u * (j & 3u))) & 0xFFu; }
float sgn(uint signs, uint j) { return ((signs >> j) & 1u) != 0u ? -1.0 : 1.0; }

#if defined(KIND_IQ2_XXS)
// d, then per sub-block 8 bytes: 4 grid indices, and a word of 4x7 sign-set indices + 4-bit scale.
#define QB 66u
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    uint a0 = rd32(bo + 2u + 8u * s), a1 = rd32(bo + 6u + 8u * s);
    float db = d * (0.5 + float(a1 >> 28)) * 0.25;
    for (uint l = 0u; l < 4u; l++) {
        uvec2 g = iq2xxs_grid(byte_of(a0, l));
        uint signs = ksigns_iq2xs((a1 >> (7u * l)) & 127u);
        for (uint j = 0u; j < 8u; j++) EMIT(8u * l + j, db * float(grid_byte(g, j)) * sgn(signs, j));
    }
    return dq_acc;
}

#elif defined(KIND_IQ2_XS)
// d, qs[32] (u16: 9-bit grid index | 7-bit sign-set index), scales[8] (two 4-bit per sub-block).
#define QB 74u
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    uint sc = rd8(bo + 66u + s);
    float db0 = d * (0.5 + float(sc & 15u)) * 0.25, db1 = d * (0.5 + float(sc >> 4)) * 0.25;
    for (uint l = 0u; l < 4u; l++) {
        uint q = rd16(bo + 2u + 2u * (4u * s + l));
        uvec2 g = iq2xs_grid(q & 511u);
        uint signs = ksigns_iq2xs(q >> 9);
        float dl = l < 2u ? db0 : db1;
        for (uint j = 0u; j < 8u; j++) EMIT(8u * l + j, dl * float(grid_byte(g, j)) * sgn(signs, j));
    }
    return dq_acc;
}

#elif defined(KIND_IQ2_S)
// d, qs[32] grid low bits, signs[32], qh[8] (2 high index bits per group), scales[8].
#define QB 82u
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    uint sc = rd8(bo + 74u + s), qh = rd8(bo + 66u + s);
    float db0 = d * (0.5 + float(sc & 15u)) * 0.25, db1 = d * (0.5 + float(sc >> 4)) * 0.25;
    uint qs = rd32(bo + 2u + 4u * s), sg = rd32(bo + 34u + 4u * s);
    for (uint l = 0u; l < 4u; l++) {
        uvec2 g = iq2s_grid(byte_of(qs, l) | ((qh << (8u - 2u * l)) & 0x300u));
        float dl = l < 2u ? db0 : db1;
        for (uint j = 0u; j < 8u; j++) EMIT(8u * l + j, dl * float(grid_byte(g, j)) * sgn(byte_of(sg, l), j));
    }
    return dq_acc;
}

#elif defined(KIND_IQ3_XXS)
// d, qs[64] grid indices (8 per sub-block), then per sub-block a word: 4x7 sign-set indices +
// 4-bit scale.
#define QB 98u
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    uint aux = rd32(bo + 66u + 4u * s);
    float db = d * (0.5 + float(aux >> 28)) * 0.5;
    for (uint l = 0u; l < 4u; l++) {
        uint signs = ksigns_iq2xs((aux >> (7u * l)) & 127u);
        uint g1 = iq3xxs_grid(rd8(bo + 2u + 8u * s + 2u * l));
        uint g2 = iq3xxs_grid(rd8(bo + 3u + 8u * s + 2u * l));
        for (uint j = 0u; j < 4u; j++) {
            EMIT(8u * l + j, db * float(byte_of(g1, j)) * sgn(signs, j));
            EMIT(8u * l + 4u + j, db * float(byte_of(g2, j)) * sgn(signs, j + 4u));
        }
    }
    return dq_acc;
}

#elif defined(KIND_IQ3_S)
// d, qs[64] grid low bits, qh[8] (9th index bits), signs[32], scales[4] (4 bits per sub-block).
#define QB 110u
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    uint sc = (rd8(bo + 106u + (s >> 1)) >> (4u * (s & 1u))) & 15u;
    float db = d * float(1u + 2u * sc);
    uint qh = rd8(bo + 66u + s);
    uint sg = rd32(bo + 74u + 4u * s);
    for (uint l = 0u; l < 4u; l++) {
        uint g1 = iq3s_grid(rd8(bo + 2u + 8u * s + 2u * l) | ((qh << (8u - 2u * l)) & 256u));
        uint g2 = iq3s_grid(rd8(bo + 3u + 8u * s + 2u * l) | ((qh << (7u - 2u * l)) & 256u));
        uint signs = byte_of(sg, l);
        for (uint j = 0u; j < 4u; j++) {
            EMIT(8u * l + j, db * float(byte_of(g1, j)) * sgn(signs, j));
            EMIT(8u * l + 4u + j, db * float(byte_of(g2, j)) * sgn(signs, j + 4u));
        }
    }
    return dq_acc;
}

#elif defined(KIND_IQ1_S)
// d, qs[32] grid low bits, qh[8] (u16: 4x3 high index bits, 3-bit scale, delta sign).
#define QB 50u
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    float d = rdf16(bo);
    uint qh = rd16(bo + 34u + 2u * s);
    float dl = d * float(2u * ((qh >> 12) & 7u) + 1u);
    float delta = (qh & 0x8000u) != 0u ? -IQ1S_DELTA : IQ1S_DELTA;
    uint qs = rd32(bo + 2u + 4u * s);
    for (uint l = 0u; l < 4u; l++) {
        uvec2 g = iq1s_grid(byte_of(qs, l) | (((qh >> (3u * l)) & 7u) << 8));
        for (uint j = 0u; j < 8u; j++) {
            int gv = bitfieldExtract(int(grid_byte(g, j)), 0, 8); // grid bytes are int8
            EMIT(8u * l + j, dl * (float(gv) + delta));
        }
    }
    return dq_acc;
}

#elif defined(KIND_IQ1_M)
// qs[32] grid low bits, qh[16] (per group of 8: 3 high index bits + delta sign), scales[8]
// (as four u16: 3-bit sub-scales, the f16 block scale spread over their top nibbles).
#define QB 56u
float dq_sub(uint bo, uint s, uint ctx) {
    float dq_acc = 0.0;
    uint sc0 = rd16(bo + 48u), sc1 = rd16(bo + 50u), sc2 = rd16(bo + 52u), sc3 = rd16(bo + 54u);
    uint dbits = (sc0 >> 12) | ((sc1 >> 8) & 0x00F0u) | ((sc2 >> 4) & 0x0F00u) | (sc3 & 0xF000u);
    float d = unpackHalf2x16(dbits).x;
    uint sc = rd16(bo + 48u + 2u * (s >> 1));
    uint shift = 6u * (s & 1u);
    float dl1 = d * float(2u * ((sc >> shift) & 7u) + 1u);
    float dl2 = d * float(2u * ((sc >> (shift + 3u)) & 7u) + 1u);
    uint qs = rd32(bo + 4u * s);
    uint qh0 = rd8(bo + 32u + 2u * s), qh1 = rd8(bo + 33u + 2u * s);
    for (uint l = 0u; l < 4u; l++) {
        uint qh = l < 2u ? qh0 : qh1;
        uint hi = (l & 1u) == 0u ? ((qh << 8) & 0x700u) : ((qh << 4) & 0x700u);
        uint dbit = (l & 1u) == 0u ? (qh & 0x08u) : (qh & 0x80u);
        float delta = dbit != 0u ? -IQ1M_DELTA : IQ1M_DELTA;
        float dl = l < 2u ? dl1 : dl2;
        uvec2 g = iq1s_grid(byte_of(qs, l) | hi);
        for (uint j = 0u; j < 8u; j++) {
            int gv = bitfieldExtract(int(grid_byte(g, j)), 0, 8);
            EMIT(8u * l + j, dl * (float(gv) + delta));
        }
    }
    return dq_acc;
}

#else
#error "no dequantisation for this kind"
#endif
