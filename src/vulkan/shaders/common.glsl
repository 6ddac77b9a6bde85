// Shared by every backplane Vulkan shader: bindings, push constants, and byte access to the
// packed GGUF blocks.
//
// Weights are bound as an array of 32-bit words and read byte-wise: block sizes (17, 18, 34,
// 110 bytes...) leave most fields unaligned, and 8-bit storage is an optional feature we do not
// want to require. The host pads every weight buffer by 4 bytes so rd32() at the last byte of the
// last block stays inside the buffer (robust buffer access is not guaranteed either).
// Kernel argument i is descriptor set i (binding 0): weights, x, y.
#extension GL_GOOGLE_include_directive : require

layout(std430, set = 0, binding = 0) readonly buffer WBuf { uint wq[]; };
layout(std430, set = 1, binding = 0) readonly buffer XBuf { float xv[]; };
layout(std430, set = 2, binding = 0) writeonly buffer YBuf { float yv[]; };

// Must match struct bp_vk_push in src/vulkan/vk_internal.h.
layout(push_constant) uniform Push {
    uint rows;      // rows of this weight chunk
    uint cols;      // elements per row
    uint row_bytes; // bytes per row
    uint nsub;      // sub-blocks (SUBN elements) per row
    uint t;         // batch size (GEMM); 1 for matvec
    uint y_row0;    // first output row of this chunk
    uint y_stride;  // rows of the whole weight: Y is t x y_stride, row-major
    uint x_off;     // first float of X (a row of a step's activation buffer); embed: of the ids
    uint w_off;     // first byte of the weight in its buffer (an arena)
    float fscale;   // embed: the embedding scale
    uint pad0, pad1;
} pc;

uint rd8(uint o) { return (wq[o >> 2] >> ((o & 3u) << 3)) & 0xFFu; }
uint rd32(uint o) {
    uint i = o >> 2;
    uint sh = (o & 3u) << 3;
    uint lo = wq[i];
    return sh == 0u ? lo : ((lo >> sh) | (wq[i + 1u] << (32u - sh)));
}
uint rd16(uint o) { return rd32(o) & 0xFFFFu; }
float rdf16(uint o) { return unpackHalf2x16(rd16(o)).x; }
// Byte b (0..3) of word q as unsigned / sign-extended.
uint byte_of(uint q, uint b) { return (q >> (b << 3)) & 0xFFu; }
int sbyte_of(uint q, uint b) { return bitfieldExtract(int(q), int(b << 3), 8); }
// E2M1 (FP4) value of nibble q, doubled as ggml's table has it (0 1 2 3 4 6 8 12, sign in
// bit 3; the kinds halve their scales to match). Computed, not looked up: small constant arrays
// are copied into every invocation's private memory by some drivers (llvmpipe among them).
float kv_fp4(uint q) {
    uint m = q & 7u;
    float mag = m < 4u ? float(m) : float((2u + (m & 1u)) << ((m >> 1) - 1u));
    return (q & 8u) != 0u ? -mag : mag;
}
