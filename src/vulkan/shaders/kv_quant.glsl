// The KV cache's element kinds (-DKV_<KIND>): how kv_append.comp stores a head's row of
// head_dim values and how attention.comp reads element d back. A row is one token of one head,
// ROWB bytes (the host passes it); rows of the quantized kinds are whole words, since head_dim
// is a multiple of 64 for them (an even number of 32-element blocks of an even byte count...
// checked on the host). Block layouts as the CPU's (src/kinds/ref_legacy.c, ggml-common.h).
#if defined(KV_F32) || defined(KV_F16) || defined(KV_BF16)
#define KV_IS_BLOCK 0
#else
#define KV_IS_BLOCK 1
#endif
#if defined(KV_Q8_0)
#define KV_QB 34u
#elif defined(KV_Q4_0)
#define KV_QB 18u
#elif defined(KV_Q4_1)
#define KV_QB 20u
#elif defined(KV_Q5_0)
#define KV_QB 22u
#elif defined(KV_Q5_1)
#define KV_QB 24u
#endif

// Byte access to a uint[] buffer named B.
#define KV_RD8(B, o) ((B[(o) >> 2] >> (((o) & 3u) << 3)) & 0xFFu)
#define KV_RD16(B, o) (KV_RD8(B, o) | (KV_RD8(B, (o) + 1u) << 8))
#define KV_RD32(B, o) (KV_RD16(B, o) | (KV_RD16(B, (o) + 2u) << 16))
#define KV_H16(B, o) unpackHalf2x16(KV_RD16(B, o)).x

// Element d of the row starting at byte o of buffer B.
#if defined(KV_F32)
#define KV_AT(B, o, d) uintBitsToFloat(B[((o) >> 2) + (d)])
#elif defined(KV_F16)
#define KV_AT(B, o, d) unpackHalf2x16(B[((o) >> 2) + ((d) >> 1)])[(d) & 1u]
#elif defined(KV_BF16)
#define KV_AT(B, o, d) uintBitsToFloat(((B[((o) >> 2) + ((d) >> 1)] >> (((d) & 1u) << 4)) & 0xFFFFu) << 16)
#elif defined(KV_Q8_0)
#define KV_AT(B, o, d) (KV_H16(B, (o) + ((d) >> 5) * KV_QB) * float(int(KV_RD8(B, (o) + ((d) >> 5) * KV_QB + 2u + ((d) & 31u)) << 24) >> 24))
#elif defined(KV_Q4_0) || defined(KV_Q4_1)
#if defined(KV_Q4_0)
#define KV_QS 2u
#else
#define KV_QS 4u
#endif
#define KV_NIB(B, bo, j) ((KV_RD8(B, (bo) + KV_QS + ((j) & 15u)) >> (((j) >> 4) << 2)) & 15u)
#if defined(KV_Q4_0)
#define KV_AT(B, o, d) (KV_H16(B, (o) + ((d) >> 5) * KV_QB) * (float(KV_NIB(B, (o) + ((d) >> 5) * KV_QB, (d) & 31u)) - 8.0))
#else
#define KV_AT(B, o, d) (KV_H16(B, (o) + ((d) >> 5) * KV_QB) * float(KV_NIB(B, (o) + ((d) >> 5) * KV_QB, (d) & 31u)) + KV_H16(B, (o) + ((d) >> 5) * KV_QB + 2u))
#endif
#elif defined(KV_Q5_0) || defined(KV_Q5_1)
#if defined(KV_Q5_0)
#define KV_QH 2u
#else
#define KV_QH 4u
#endif
#define KV_Q5(B, bo, j) (((KV_RD8(B, (bo) + KV_QH + 4u + ((j) & 15u)) >> (((j) >> 4) << 2)) & 15u) | (((KV_RD32(B, (bo) + KV_QH) >> (j)) & 1u) << 4))
#if defined(KV_Q5_0)
#define KV_AT(B, o, d) (KV_H16(B, (o) + ((d) >> 5) * KV_QB) * (float(KV_Q5(B, (o) + ((d) >> 5) * KV_QB, (d) & 31u)) - 16.0))
#else
#define KV_AT(B, o, d) (KV_H16(B, (o) + ((d) >> 5) * KV_QB) * float(KV_Q5(B, (o) + ((d) >> 5) * KV_QB, (d) & 31u)) + KV_H16(B, (o) + ((d) >> 5) * KV_QB + 2u))
#endif
#endif
