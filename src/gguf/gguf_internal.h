/* Internal view of an opened GGUF file, shared by the reader (gguf_read.c) and the metadata
 * accessors (gguf_meta.c). */
#ifndef BP_GGUF_INTERNAL_H
#define BP_GGUF_INTERNAL_H

#include "backplane.h"

/* Nested arrays deeper than this are refused: the walk is recursive, and a hostile file of
 * nothing but array headers would otherwise be a stack overflow. The gguf package writes
 * nested lists, real files use at most one level. */
#define BP_GGUF_MAX_DEPTH 8
#define BP_GGUF_DEFAULT_ALIGNMENT 32u
#define BP_GGUF_MAX_DIMS 4

typedef struct bp_gguf_kv {
    const char *key; /* NUL-terminated copy in the name arena */
    uint64_t key_offset;
    bp_gguf_value value;
} bp_gguf_kv;

struct bp_gguf {
    const uint8_t *base;
    size_t size;
    int mapped; /* munmap on close */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    int64_t n_kv, n_tensors;
    bp_gguf_kv *kv;
    bp_gguf_tensor *tensors;
    bp_gguf_kv **kv_sorted;         /* sorted by key, for lookup and duplicate detection */
    bp_gguf_tensor **tensor_sorted; /* sorted by name */
    char *names;            /* arena of NUL-terminated keys and tensor names */
};

/* Bytes of one element of a fixed-size type; 0 for string, array or an unknown type. */
static inline uint64_t bp_gguf_fixed_size(uint32_t t) {
    switch (t) {
    case BP_GGUF_U8: case BP_GGUF_I8: case BP_GGUF_BOOL: return 1;
    case BP_GGUF_U16: case BP_GGUF_I16: return 2;
    case BP_GGUF_U32: case BP_GGUF_I32: case BP_GGUF_F32: return 4;
    case BP_GGUF_U64: case BP_GGUF_I64: case BP_GGUF_F64: return 8;
    default: return 0;
    }
}

static inline uint64_t bp_gguf_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint32_t bp_gguf_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

#endif
