/* Reader for the kind test vectors written by tests/vectors/gen_vectors.py (format documented
 * at the top of that script). Shared by the test_kinds_* programs. */
#ifndef BP_TEST_KINDS_VECTORS_H
#define BP_TEST_KINDS_VECTORS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { BP_VEC_HEADER = 64 };

typedef struct bp_vec {
    unsigned char *data; /* whole file */
    size_t len;
    uint32_t kind, a, b, c; /* dequant/quant: nblocks, block_bytes, block_elems; matmul: rows, cols, t */
    char source[41];
    const unsigned char *body; /* after the header */
    size_t body_len;
} bp_vec;

static inline uint32_t bp_vec_u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline void bp_vec_path(char *buf, size_t n, const char *prefix, const char *kind) {
    snprintf(buf, n, "tests/vectors/%s_%s.bin", prefix, kind);
}

static inline int bp_vec_exists(const char *prefix, const char *kind) {
    char path[256];
    bp_vec_path(path, sizeof path, prefix, kind);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Load prefix_KIND.bin and check its header (magic, version, kind id). Returns 0 and records a
 * failure when the file is missing or malformed. */
static inline int bp_vec_load(bp_vec *v, const char *prefix, const char *magic, const bp_kind_info *k) {
    char path[256];
    memset(v, 0, sizeof *v);
    bp_vec_path(path, sizeof path, prefix, k->name);
    v->data = bp_test_read_file(path, &v->len);
    if (!v->data) return 0;
    if (v->len < BP_VEC_HEADER || memcmp(v->data, magic, 4) != 0 || bp_vec_u32(v->data + 4) != 1) {
        bp_test_fail_at(__FILE__, __LINE__, "%s: bad header (want magic %s, version 1)", path, magic);
        free(v->data);
        v->data = NULL;
        return 0;
    }
    v->kind = bp_vec_u32(v->data + 8);
    v->a = bp_vec_u32(v->data + 12);
    v->b = bp_vec_u32(v->data + 16);
    v->c = bp_vec_u32(v->data + 20);
    memcpy(v->source, v->data + 24, 40);
    v->source[40] = 0;
    v->body = v->data + BP_VEC_HEADER;
    v->body_len = v->len - BP_VEC_HEADER;
    if (v->kind != k->gguf_id) {
        bp_test_fail_at(__FILE__, __LINE__, "%s: kind id %u, table says %u", path, v->kind, k->gguf_id);
        free(v->data);
        v->data = NULL;
        return 0;
    }
    return 1;
}

static inline void bp_vec_free(bp_vec *v) {
    free(v->data);
    v->data = NULL;
}

/* Read n little-endian float32 / float64 values (file bytes have no alignment guarantee). */
static inline void bp_vec_floats(const unsigned char *p, float *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = bp_vec_u32(p + 4 * i);
        memcpy(&out[i], &u, 4);
    }
}
static inline void bp_vec_doubles(const unsigned char *p, double *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t u = (uint64_t)bp_vec_u32(p + 8 * i) | ((uint64_t)bp_vec_u32(p + 8 * i + 4) << 32);
        memcpy(&out[i], &u, 8);
    }
}

#endif
