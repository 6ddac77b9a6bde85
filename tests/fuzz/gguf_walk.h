/* One pass over everything an opened GGUF file hands out; shared by the fuzz target and the
 * crasher replay test, so a regression file exercises exactly what the fuzzer did. Returns the
 * status of the open; a checksum of the bytes read is kept in a volatile so nothing is elided. */
#ifndef BP_TEST_GGUF_WALK_H
#define BP_TEST_GGUF_WALK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backplane.h"

static volatile uint64_t bp_fuzz_sink;

static void bp_fuzz_touch_value(const bp_gguf_value *v, int depth) {
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    const char *s;
    size_t n;
    if (bp_gguf_value_u64(v, &u) == BP_OK) bp_fuzz_sink += u;
    if (bp_gguf_value_i64(v, &i) == BP_OK) bp_fuzz_sink += (uint64_t)i;
    if (bp_gguf_value_f64(v, &d) == BP_OK) bp_fuzz_sink += (d == d);
    if (bp_gguf_value_bool(v, &b) == BP_OK) bp_fuzz_sink += b;
    if (bp_gguf_value_str(v, &s, &n) == BP_OK && n) bp_fuzz_sink += (uint8_t)s[0] + (uint8_t)s[n - 1];
    if (v->type != BP_GGUF_ARRAY || depth > 16) return;
    bp_gguf_value e, prev;
    uint64_t k = 0;
    for (bp_status st = bp_gguf_array_next(v, NULL, &e); st == BP_OK; st = bp_gguf_array_next(v, &prev, &e)) {
        bp_fuzz_touch_value(&e, depth + 1);
        prev = e;
        k++;
    }
    bp_fuzz_sink += k;
    /* Random access: first, middle and last element, and one past the end (must be refused). */
    if (v->len) {
        if (bp_gguf_array_at(v, 0, &e) == BP_OK) bp_fuzz_touch_value(&e, depth + 1);
        if (bp_gguf_array_at(v, v->len / 2, &e) == BP_OK) bp_fuzz_touch_value(&e, depth + 1);
        if (bp_gguf_array_at(v, v->len - 1, &e) == BP_OK) bp_fuzz_touch_value(&e, depth + 1);
    }
    if (bp_gguf_array_at(v, v->len, &e) == BP_OK) __builtin_trap();
}

/* Whatever the reader accepts, the writer must copy (bp_gguf_writer_add_value for every key,
 * every tensor) into a file the reader accepts again with the same keys, values and tensors. */
static void bp_fuzz_copy_check(const bp_gguf *f) {
    bp_gguf_writer *w = NULL;
    if (bp_gguf_writer_create(&w) != BP_OK) return;
    for (int64_t i = 0; i < bp_gguf_kv_count(f); i++) {
        bp_gguf_value v;
        if (bp_gguf_kv_value(f, i, &v) != BP_OK || bp_gguf_writer_add_value(w, bp_gguf_kv_key(f, i), &v) != BP_OK)
            __builtin_trap();
    }
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        if (bp_gguf_writer_add_tensor(w, t->name, t->kind, t->n_dims, t->ne, t->data, t->bytes) != BP_OK)
            __builtin_trap();
    }
    void *buf = NULL;
    size_t len = 0;
    if (bp_gguf_writer_write_memory(w, &buf, &len) != BP_OK) __builtin_trap();
    bp_gguf_writer_free(w);
    bp_gguf *g = NULL;
    if (bp_gguf_open_memory(buf, len, &g) != BP_OK) __builtin_trap();
    if (bp_gguf_kv_count(g) != bp_gguf_kv_count(f) || bp_gguf_tensor_count(g) != bp_gguf_tensor_count(f) ||
        bp_gguf_alignment(g) != bp_gguf_alignment(f))
        __builtin_trap();
    for (int64_t i = 0; i < bp_gguf_kv_count(f); i++) {
        bp_gguf_value a, b;
        bp_gguf_kv_value(f, i, &a);
        bp_gguf_kv_value(g, i, &b);
        if (strcmp(bp_gguf_kv_key(f, i), bp_gguf_kv_key(g, i)) || a.type != b.type || a.len != b.len ||
            a.bytes != b.bytes || (a.bytes && memcmp(a.data, b.data, (size_t)a.bytes)))
            __builtin_trap();
    }
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *a = bp_gguf_tensor_at(f, i), *b = bp_gguf_tensor_at(g, i);
        if (strcmp(a->name, b->name) || a->kind != b->kind || a->n_dims != b->n_dims ||
            memcmp(a->ne, b->ne, sizeof a->ne) || a->bytes != b->bytes ||
            (a->bytes && memcmp(a->data, b->data, a->bytes)))
            __builtin_trap();
    }
    bp_gguf_close(g);
    free(buf);
}

static bp_status bp_fuzz_gguf_walk(const uint8_t *data, size_t size) {
    bp_gguf *f = NULL;
    bp_status s = bp_gguf_open_memory(data, size, &f);
    if (s != BP_OK) {
        if (f) __builtin_trap(); /* a failed open must leave nothing behind */
        return s;
    }
    for (int64_t i = 0; i < bp_gguf_kv_count(f); i++) {
        const char *key = bp_gguf_kv_key(f, i);
        bp_gguf_value v;
        if (!key || bp_gguf_kv_value(f, i, &v) != BP_OK) __builtin_trap();
        if (bp_gguf_find_key(f, key) != i) __builtin_trap(); /* keys are unique */
        bp_fuzz_touch_value(&v, 0);
    }
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        if (!t || bp_gguf_find_tensor(f, t->name) != t) __builtin_trap();
        const uint8_t *p = t->data;
        if (t->bytes) bp_fuzz_sink += p[0] + p[t->bytes - 1];
        bp_fuzz_sink += (uint64_t)t->ne[0] + t->n_dims + (uint64_t)t->kind;
    }
    bp_fuzz_copy_check(f);
    bp_gguf_close(f);
    return s;
}

#endif
