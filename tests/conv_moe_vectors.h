/* Reading the vector files of tests/vectors/conv_moe and regenerating what they do not store (inputs, norm
 * parameters, biases, weights from the stored block pool), exactly as gen_conv_moe.py does: see
 * its docstring for the layout. Shared by the conv2d and MoE vector tests. */
#ifndef BP_TEST_CONV_MOE_VECTORS_H
#define BP_TEST_CONV_MOE_VECTORS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The file header: magic, version, kind, ncases, pool_n, block_bytes, source. */
typedef struct cm_file {
    uint8_t *buf;
    size_t len, at;     /* read cursor */
    uint32_t kind, ncases, pool_n, block_bytes;
    const uint8_t *pool;
    char source[41];
    int bad;            /* a read ran past the end */
} cm_file;

static inline const void *cm_take(cm_file *f, size_t n) {
    if (f->bad || n > f->len - f->at) {
        f->bad = 1;
        return NULL;
    }
    const void *p = f->buf + f->at;
    f->at += n;
    return p;
}

/* n little-endian bytes at the cursor into out (zeros past the end, f->bad set). */
static inline void cm_read(cm_file *f, void *out, size_t n) {
    const void *p = cm_take(f, n);
    if (p) memcpy(out, p, n);
    else memset(out, 0, n);
}
static inline int32_t cm_i32(cm_file *f) { int32_t v; cm_read(f, &v, 4); return v; }
static inline uint64_t cm_u64(cm_file *f) { uint64_t v; cm_read(f, &v, 8); return v; }
static inline float cm_f32(cm_file *f) { float v; cm_read(f, &v, 4); return v; }

/* Open path and check its header against magic and the kind; NULL buf on failure (recorded). */
static inline cm_file cm_open(const char *path, const char *magic, const bp_kind_info *ki) {
    cm_file f = {0};
    f.buf = bp_test_read_file(path, &f.len);
    if (!f.buf) return f;
    const uint8_t *h = cm_take(&f, 64);
    uint32_t v[5] = {0};
    if (h) memcpy(v, h + 4, sizeof v);
    if (!h || memcmp(h, magic, 4) || v[0] != 1 || v[1] != ki->gguf_id || v[4] != ki->block_bytes) {
        CHECK(0, "%s: bad header (magic %.4s, version %u, kind %u, block bytes %u)", path, h ? (const char *)h : "?", v[0],
              v[1], v[4]);
        free(f.buf);
        f.buf = NULL;
        return f;
    }
    f.kind = v[1];
    f.ncases = v[2];
    f.pool_n = v[3];
    f.block_bytes = v[4];
    memcpy(f.source, h + 24, 40);
    f.pool = cm_take(&f, (size_t)f.pool_n * f.block_bytes);
    return f;
}

static inline uint64_t cm_fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

/* n floats a * randf + b, each computed in double and rounded once, as the generator's f32(). */
static inline void cm_fill(float *v, int64_t n, double a, double b, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) v[i] = (float)(a * (double)bp_test_randf(rng) + b);
}

/* nblocks weight blocks, each pool[rand() % pool_n]. */
static inline void cm_blocks(const cm_file *f, uint8_t *dst, int64_t nblocks, uint64_t *rng) {
    for (int64_t b = 0; b < nblocks; b++)
        memcpy(dst + (size_t)b * f->block_bytes, f->pool + (size_t)(bp_test_rand(rng) % f->pool_n) * f->block_bytes,
               f->block_bytes);
}

/* For every weight kind: open <dir>/<prefix>_<KIND>.bin, check its header against magic, run
 * fn over the file (it reads the cases), check the file was read exactly to its end; then check
 * that all 28 kinds had a file. BP_TEST_QUICK (valgrind): fn runs for every 4th kind only. */
static inline void cm_each_kind(const char *prefix, const char *magic, void (*fn)(const bp_kind_info *, cm_file *)) {
    int files = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
        char path[128];
        snprintf(path, sizeof path, "tests/vectors/conv_moe/%s_%s.bin", prefix, ki->name);
        cm_file f = cm_open(path, magic, ki);
        if (!f.buf) continue;
        if (bp_test_quick() && files % 4) { /* valgrind: every 4th kind's cases, the same code paths */
            free(f.buf);
            files++;
            continue;
        }
        fn(ki, &f);
        CHECK(!f.bad && f.at == f.len, "%s: truncated or trailing bytes (at %zu of %zu)", path, f.at, f.len);
        free(f.buf);
        files++;
    }
    CHECK(files == 28, "%s vectors for %d weight kinds, want all 28", prefix, files);
}

/* conv2d's bound from THE tolerance table (src/testing/tolerance.def): 1e-6 for weights that are
 * exact floats, 5e-4 for quantized ones. */
static inline double cm_tol(bp_kind k) { return bp_test_tolerance(k, "conv2d"); }

#endif
