/* The GGUF writer: (1) copying a file the gguf package wrote, key by key and tensor by tensor,
 * reproduces it byte for byte; (2) a file written from scratch reads back identically through
 * our reader and loads, with the same values, in the gguf package's GGUFReader
 * (tests/gguf/check_writer.py; skipped loudly when python3 + gguf are missing); (3) misuse is an
 * error, not a corrupt file. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void copy_roundtrip(const char *path) {
    size_t n = 0;
    uint8_t *orig = bp_test_read_file(path, &n);
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open(path, &f));
    if (!f || !orig) {
        free(orig);
        bp_gguf_close(f);
        return;
    }
    bp_gguf_writer *w = NULL;
    CHECK_OK(bp_gguf_writer_create(&w));
    for (int64_t i = 0; i < bp_gguf_kv_count(f); i++) {
        bp_gguf_value v;
        CHECK_OK(bp_gguf_kv_value(f, i, &v));
        CHECK_OK(bp_gguf_writer_add_value(w, bp_gguf_kv_key(f, i), &v));
    }
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        CHECK_OK(bp_gguf_writer_add_tensor(w, t->name, t->kind, t->n_dims, t->ne, t->data, t->bytes));
    }
    void *out = NULL;
    size_t len = 0;
    CHECK_OK(bp_gguf_writer_write_memory(w, &out, &len));
    CHECK(len == n, "%s: copy is %zu bytes, original %zu", path, len, n);
    if (out && len == n) {
        size_t first = 0;
        while (first < n && ((uint8_t *)out)[first] == orig[first]) first++;
        CHECK(first == n, "%s: copy differs from the gguf package's file at byte %zu", path, first);
    }
    free(out);
    bp_gguf_writer_free(w);
    bp_gguf_close(f);
    free(orig);
}

/* Keep in step with EXPECT in tests/gguf/check_writer.py. */
static bp_status write_fresh(const char *path, float *f32_data, uint8_t *q8_data) {
    bp_gguf_writer *w = NULL;
    bp_status s = bp_gguf_writer_create(&w);
    if (s) return s;
    uint8_t u8 = 250;
    int8_t i8 = -7;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint32_t u32 = 4000000001u;
    int32_t i32 = -123456789;
    float f32 = 0.375f;
    bool bl = true;
    uint64_t u64 = 17000000000000000001ull;
    int64_t i64 = -8000000000000000001ll;
    double f64 = 1.0e-200;
    static const int32_t ai[] = {3, -1, 4, -1, 5};
    static const float af[] = {0.5f, 1.5f};
    static const char *const as[] = {"x", "", "yz"};
    const char *str = "backplane \xe2\x9c\x93";
    for (int k = 0; k < 12; k++) f32_data[k] = (float)k;
    for (int k = 0; k < 68; k++) q8_data[k] = (uint8_t)(k % 34);
    int64_t ne_f[2] = {4, 3}, ne_q[2] = {32, 2};
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.u8", BP_GGUF_U8, &u8);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.i8", BP_GGUF_I8, &i8);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.u16", BP_GGUF_U16, &u16);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.i16", BP_GGUF_I16, &i16);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.u32", BP_GGUF_U32, &u32);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.i32", BP_GGUF_I32, &i32);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.f32", BP_GGUF_F32, &f32);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.bool", BP_GGUF_BOOL, &bl);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.u64", BP_GGUF_U64, &u64);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.i64", BP_GGUF_I64, &i64);
    if (!s) s = bp_gguf_writer_add_scalar(w, "w.f64", BP_GGUF_F64, &f64);
    if (!s) s = bp_gguf_writer_add_string(w, "w.str", str, strlen(str));
    if (!s) s = bp_gguf_writer_add_array(w, "w.arr_i32", BP_GGUF_I32, ai, 5);
    if (!s) s = bp_gguf_writer_add_array(w, "w.arr_f32", BP_GGUF_F32, af, 2);
    if (!s) s = bp_gguf_writer_add_string_array(w, "w.arr_str", as, 3);
    if (!s) s = bp_gguf_writer_set_alignment(w, 64);
    if (!s) s = bp_gguf_writer_add_tensor(w, "w.f32", BP_KIND_F32, 2, ne_f, f32_data, 48);
    if (!s) s = bp_gguf_writer_add_tensor(w, "w.q8", BP_KIND_Q8_0, 2, ne_q, q8_data, 68);
    if (!s) s = bp_gguf_writer_write_file(w, path);
    bp_gguf_writer_free(w);
    return s;
}

static void check_fresh(const char *path) {
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open(path, &f));
    if (!f) return;
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    const char *s;
    size_t n;
    CHECK(bp_gguf_kv_count(f) == 16, "16 keys, got %lld", (long long)bp_gguf_kv_count(f));
    CHECK(bp_gguf_get_u64(f, "w.u8", &u) == BP_OK && u == 250, "u8");
    CHECK(bp_gguf_get_i64(f, "w.i8", &i) == BP_OK && i == -7, "i8");
    CHECK(bp_gguf_get_u64(f, "w.u16", &u) == BP_OK && u == 60000, "u16");
    CHECK(bp_gguf_get_i64(f, "w.i16", &i) == BP_OK && i == -30000, "i16");
    CHECK(bp_gguf_get_u64(f, "w.u32", &u) == BP_OK && u == 4000000001u, "u32");
    CHECK(bp_gguf_get_i64(f, "w.i32", &i) == BP_OK && i == -123456789, "i32");
    CHECK(bp_gguf_get_f64(f, "w.f32", &d) == BP_OK && d == 0.375, "f32");
    CHECK(bp_gguf_get_bool(f, "w.bool", &b) == BP_OK && b, "bool");
    CHECK(bp_gguf_get_u64(f, "w.u64", &u) == BP_OK && u == 17000000000000000001ull, "u64");
    CHECK(bp_gguf_get_i64(f, "w.i64", &i) == BP_OK && i == -8000000000000000001ll, "i64");
    CHECK(bp_gguf_get_f64(f, "w.f64", &d) == BP_OK && d == 1.0e-200, "f64");
    CHECK(bp_gguf_get_str(f, "w.str", &s, &n) == BP_OK && n == 13 && !memcmp(s, "backplane \xe2\x9c\x93", 13), "str");
    bp_gguf_value a, e;
    CHECK(bp_gguf_get(f, "w.arr_i32", &a) == BP_OK && a.len == 5 && bp_gguf_array_at(&a, 4, &e) == BP_OK &&
              bp_gguf_value_i64(&e, &i) == BP_OK && i == 5, "arr_i32");
    CHECK(bp_gguf_get(f, "w.arr_str", &a) == BP_OK && a.len == 3 && bp_gguf_array_at(&a, 2, &e) == BP_OK &&
              bp_gguf_value_str(&e, &s, &n) == BP_OK && n == 2 && !memcmp(s, "yz", 2), "arr_str");
    CHECK(bp_gguf_alignment(f) == 64, "alignment %u", bp_gguf_alignment(f));
    const bp_gguf_tensor *t = bp_gguf_find_tensor(f, "w.f32");
    CHECK(t && t->ne[0] == 4 && t->ne[1] == 3 && t->offset % 64 == 0 && ((const float *)t->data)[11] == 11.0f, "w.f32");
    t = bp_gguf_find_tensor(f, "w.q8");
    CHECK(t && t->kind == BP_KIND_Q8_0 && t->bytes == 68 && ((const uint8_t *)t->data)[67] == 33, "w.q8");
    bp_gguf_close(f);
}

static void check_with_gguf_package(const char *path) {
    if (system("python3 -c 'import gguf, numpy' >/dev/null 2>&1") != 0) {
        BP_SKIP("python3 with the gguf package is not installed: our writer's output was NOT checked "
                "against GGUFReader (pip install gguf)");
        return;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 tests/gguf/check_writer.py '%s'", path);
    int rc = system(cmd);
    CHECK(rc == 0, "GGUFReader disagrees with our writer (exit %d)", rc);
}

static void misuse(void) {
    bp_gguf_writer *w = NULL;
    CHECK_OK(bp_gguf_writer_create(&w));
    uint32_t v = 1;
    CHECK_OK(bp_gguf_writer_add_scalar(w, "k", BP_GGUF_U32, &v));
    CHECK(bp_gguf_writer_add_scalar(w, "k", BP_GGUF_U32, &v) == BP_E_INVAL, "duplicate key");
    CHECK(bp_gguf_writer_add_scalar(w, "s", BP_GGUF_STRING, &v) == BP_E_INVAL, "string as scalar");
    CHECK(bp_gguf_writer_set_alignment(w, 48) == BP_E_INVAL, "alignment 48");
    CHECK(bp_gguf_writer_add_string(w, "general.alignment", "32", 2) == BP_E_INVAL, "alignment as a string");
    float x[32] = {0};
    int64_t ne[2] = {32, 1};
    CHECK_OK(bp_gguf_writer_add_tensor(w, "t", BP_KIND_F32, 2, ne, x, sizeof x));
    CHECK(bp_gguf_writer_add_tensor(w, "t", BP_KIND_F32, 2, ne, x, sizeof x) == BP_E_INVAL, "duplicate tensor");
    CHECK(bp_gguf_writer_add_tensor(w, "u", BP_KIND_F32, 2, ne, x, 64) == BP_E_SHAPE, "wrong byte count");
    CHECK(bp_gguf_writer_add_tensor(w, "u", BP_KIND_Q4_0, 2, (int64_t[]){33, 1}, x, 18) == BP_E_SHAPE, "partial block");
    CHECK(bp_gguf_writer_add_tensor(w, "u", (bp_kind)77, 2, ne, x, sizeof x) == BP_E_KIND, "unknown kind");
    CHECK(bp_gguf_writer_write_file(w, "/nonexistent-dir/x.gguf") == BP_E_IO, "unwritable path");
    /* Whatever was refused left the writer consistent: its output still reads back. */
    void *buf = NULL;
    size_t len = 0;
    CHECK_OK(bp_gguf_writer_write_memory(w, &buf, &len));
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open_memory(buf, len, &f));
    CHECK(f && bp_gguf_kv_count(f) == 1 && bp_gguf_tensor_count(f) == 1, "refused additions left no trace");
    bp_gguf_close(f);
    free(buf);
    bp_gguf_writer_free(w);
}

int main(void) {
    copy_roundtrip("tests/gguf/meta_all.gguf");
    copy_roundtrip("tests/gguf/kinds.gguf");

    char path[] = "/tmp/bp_gguf_write_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        close(fd);
        float f32_data[12];
        uint8_t q8_data[68];
        CHECK_OK(write_fresh(path, f32_data, q8_data));
        check_fresh(path);
        check_with_gguf_package(path);
        unlink(path);
    }
    misuse();
    return bp_test_finish();
}
