/* The GGUF reader against files written by the gguf PyPI package (tests/gguf/gen_gguf.py):
 * every metadata value type, arrays of each, nested arrays, general.alignment, tensors of 1..4
 * dimensions and one tensor of every kind the package can write. The expected values are the
 * ones the script writes (its META table), not anything our reader produced. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static int str_is(const bp_gguf *f, const char *key, const char *want) {
    const char *s;
    size_t n;
    if (bp_gguf_get_str(f, key, &s, &n) != BP_OK) return 0;
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

static int elem_str_is(const bp_gguf_value *e, const char *want) {
    const char *s;
    size_t n;
    if (bp_gguf_value_str(e, &s, &n) != BP_OK) return 0;
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

static void check_scalars(const bp_gguf *f) {
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    CHECK_OK(bp_gguf_get_u64(f, "test.u8", &u));
    CHECK(u == 200, "u8 %llu", (unsigned long long)u);
    CHECK_OK(bp_gguf_get_i64(f, "test.i8", &i));
    CHECK(i == -100, "i8 %lld", (long long)i);
    CHECK_OK(bp_gguf_get_u64(f, "test.u16", &u));
    CHECK(u == 65000, "u16 %llu", (unsigned long long)u);
    CHECK_OK(bp_gguf_get_i64(f, "test.i16", &i));
    CHECK(i == -32000, "i16 %lld", (long long)i);
    CHECK_OK(bp_gguf_get_u64(f, "test.u32", &u));
    CHECK(u == 4000000000u, "u32 %llu", (unsigned long long)u);
    CHECK_OK(bp_gguf_get_i64(f, "test.i32", &i));
    CHECK(i == -2000000000, "i32 %lld", (long long)i);
    CHECK_OK(bp_gguf_get_f64(f, "test.f32", &d));
    CHECK(d == 1.5, "f32 %g", d);
    CHECK_OK(bp_gguf_get_bool(f, "test.bool_true", &b));
    CHECK(b, "bool_true");
    CHECK_OK(bp_gguf_get_bool(f, "test.bool_false", &b));
    CHECK(!b, "bool_false");
    CHECK(str_is(f, "test.string", "h\xc3\xa9llo, gguf"), "string");
    CHECK(str_is(f, "test.empty_string", ""), "empty string");
    CHECK(str_is(f, "general.architecture", "testarch"), "general.architecture");
    CHECK_OK(bp_gguf_get_u64(f, "test.u64", &u));
    CHECK(u == 18000000000000000000ull, "u64 %llu", (unsigned long long)u);
    CHECK_OK(bp_gguf_get_i64(f, "test.i64", &i));
    CHECK(i == -9000000000000000000ll, "i64 %lld", (long long)i);
    CHECK_OK(bp_gguf_get_f64(f, "test.f64", &d));
    CHECK(d == -2.25e100, "f64 %g", d);

    /* Exact value types, not just converted values. */
    bp_gguf_value v;
    static const struct { const char *key; bp_gguf_type t; } types[] = {
        {"test.u8", BP_GGUF_U8}, {"test.i8", BP_GGUF_I8}, {"test.u16", BP_GGUF_U16}, {"test.i16", BP_GGUF_I16},
        {"test.u32", BP_GGUF_U32}, {"test.i32", BP_GGUF_I32}, {"test.f32", BP_GGUF_F32},
        {"test.bool_true", BP_GGUF_BOOL}, {"test.string", BP_GGUF_STRING}, {"test.u64", BP_GGUF_U64},
        {"test.i64", BP_GGUF_I64}, {"test.f64", BP_GGUF_F64}, {"test.nested", BP_GGUF_ARRAY},
        {"general.alignment", BP_GGUF_U32},
    };
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        CHECK_OK(bp_gguf_get(f, types[k].key, &v));
        CHECK(v.type == types[k].t, "%s has type %s", types[k].key, bp_gguf_type_name(v.type));
    }

    /* Conversions that do not fit are errors naming the key, not silent wraps. */
    CHECK(bp_gguf_get_u64(f, "test.i8", &u) == BP_E_FORMAT, "negative i8 as u64");
    CHECK(strstr(bp_last_error(), "test.i8") != NULL, "message names the key: %s", bp_last_error());
    CHECK(bp_gguf_get_i64(f, "test.u64", &i) == BP_E_FORMAT, "u64 > INT64_MAX as i64");
    CHECK(bp_gguf_get_u64(f, "test.string", &u) == BP_E_FORMAT, "string as u64");
    CHECK(bp_gguf_get_bool(f, "test.u8", &b) == BP_E_FORMAT, "u8 as bool");
    const char *s;
    CHECK(bp_gguf_get_str(f, "test.u8", &s, NULL) == BP_E_FORMAT, "u8 as string");
    CHECK(bp_gguf_get_u64(f, "no.such.key", &u) == BP_E_NOT_FOUND, "missing key");
    CHECK(bp_gguf_find_key(f, "no.such.key") == -1, "find_key missing");
}

static void check_arrays(const bp_gguf *f) {
    bp_gguf_value a, e, prev;
    uint64_t u;
    int64_t i;
    double d;
    bool b;

    CHECK_OK(bp_gguf_get(f, "test.arr_u8", &a));
    CHECK(a.type == BP_GGUF_ARRAY && a.elem_type == BP_GGUF_U8 && a.len == 3, "arr_u8 shape");
    CHECK_OK(bp_gguf_array_at(&a, 2, &e));
    CHECK(bp_gguf_value_u64(&e, &u) == BP_OK && u == 255, "arr_u8[2]");
    CHECK(bp_gguf_array_at(&a, 3, &e) == BP_E_NOT_FOUND, "arr_u8[3] is out of range");

    CHECK_OK(bp_gguf_get(f, "test.arr_i8", &a));
    CHECK(a.elem_type == BP_GGUF_I8 && a.len == 3, "arr_i8 shape");
    CHECK(bp_gguf_array_at(&a, 0, &e) == BP_OK && bp_gguf_value_i64(&e, &i) == BP_OK && i == -128, "arr_i8[0]");

    CHECK_OK(bp_gguf_get(f, "test.arr_u16", &a));
    CHECK(bp_gguf_array_at(&a, 1, &e) == BP_OK && bp_gguf_value_u64(&e, &u) == BP_OK && u == 65535, "arr_u16[1]");
    CHECK_OK(bp_gguf_get(f, "test.arr_i16", &a));
    CHECK(bp_gguf_array_at(&a, 0, &e) == BP_OK && bp_gguf_value_i64(&e, &i) == BP_OK && i == -32768, "arr_i16[0]");
    CHECK_OK(bp_gguf_get(f, "test.arr_u32", &a));
    CHECK(a.len == 4 && bp_gguf_array_at(&a, 3, &e) == BP_OK && bp_gguf_value_u64(&e, &u) == BP_OK &&
              u == 4294967295u, "arr_u32[3]");
    CHECK_OK(bp_gguf_get(f, "test.arr_i32", &a));
    CHECK(bp_gguf_array_at(&a, 0, &e) == BP_OK && bp_gguf_value_i64(&e, &i) == BP_OK && i == -1, "arr_i32[0]");
    CHECK_OK(bp_gguf_get(f, "test.arr_f32", &a));
    CHECK(a.elem_type == BP_GGUF_F32 && bp_gguf_array_at(&a, 1, &e) == BP_OK && bp_gguf_value_f64(&e, &d) == BP_OK &&
              d == -0.25, "arr_f32[1]");
    CHECK_OK(bp_gguf_get(f, "test.arr_bool", &a));
    CHECK(bp_gguf_array_at(&a, 1, &e) == BP_OK && bp_gguf_value_bool(&e, &b) == BP_OK && !b, "arr_bool[1]");
    CHECK(bp_gguf_array_at(&a, 2, &e) == BP_OK && bp_gguf_value_bool(&e, &b) == BP_OK && b, "arr_bool[2]");
    CHECK_OK(bp_gguf_get(f, "test.arr_u64", &a));
    CHECK(bp_gguf_array_at(&a, 0, &e) == BP_OK && bp_gguf_value_u64(&e, &u) == BP_OK && u == UINT64_MAX, "arr_u64[0]");
    CHECK_OK(bp_gguf_get(f, "test.arr_i64", &a));
    CHECK(bp_gguf_array_at(&a, 0, &e) == BP_OK && bp_gguf_value_i64(&e, &i) == BP_OK && i == INT64_MIN, "arr_i64[0]");
    CHECK(bp_gguf_array_at(&a, 1, &e) == BP_OK && bp_gguf_value_i64(&e, &i) == BP_OK && i == INT64_MAX, "arr_i64[1]");
    CHECK_OK(bp_gguf_get(f, "test.arr_f64", &a));
    CHECK(bp_gguf_array_at(&a, 1, &e) == BP_OK && bp_gguf_value_f64(&e, &d) == BP_OK && d == -1e300, "arr_f64[1]");

    CHECK_OK(bp_gguf_get(f, "test.arr_str", &a));
    CHECK(a.elem_type == BP_GGUF_STRING && a.len == 3, "arr_str shape");
    static const char *const want_str[] = {"alpha", "", "gamma"};
    uint64_t k = 0;
    for (bp_status s = bp_gguf_array_next(&a, NULL, &e); s == BP_OK; s = bp_gguf_array_next(&a, &prev, &e), k++) {
        CHECK(k < 3 && elem_str_is(&e, want_str[k]), "arr_str[%llu]", (unsigned long long)k);
        prev = e;
    }
    CHECK(k == 3, "arr_str walked %llu elements", (unsigned long long)k);
    CHECK(bp_gguf_array_at(&a, 2, &e) == BP_OK && elem_str_is(&e, "gamma"), "arr_str[2] by index");

    /* [[1, 2], [3], [4, 5, 6]] */
    CHECK_OK(bp_gguf_get(f, "test.nested", &a));
    CHECK(a.elem_type == BP_GGUF_ARRAY && a.len == 3, "nested shape");
    static const int want_len[] = {2, 1, 3};
    int next_val = 1;
    k = 0;
    for (bp_status s = bp_gguf_array_next(&a, NULL, &e); s == BP_OK; s = bp_gguf_array_next(&a, &prev, &e), k++) {
        CHECK(k < 3 && e.type == BP_GGUF_ARRAY && e.elem_type == BP_GGUF_I32 && e.len == (uint64_t)want_len[k],
              "nested[%llu] is i32[%d]", (unsigned long long)k, k < 3 ? want_len[k] : -1);
        for (uint64_t j = 0; j < e.len; j++) {
            bp_gguf_value x;
            CHECK(bp_gguf_array_at(&e, j, &x) == BP_OK && bp_gguf_value_i64(&x, &i) == BP_OK && i == next_val,
                  "nested[%llu][%llu] = %lld, want %d", (unsigned long long)k, (unsigned long long)j, (long long)i,
                  next_val);
            next_val++;
        }
        prev = e;
    }
    CHECK(k == 3 && next_val == 7, "nested walk");
    CHECK(bp_gguf_array_at(&a, 2, &e) == BP_OK && e.len == 3, "nested[2] by index");

    /* [["a", "bc"], ["def"]] */
    CHECK_OK(bp_gguf_get(f, "test.nested_str", &a));
    CHECK(a.len == 2 && bp_gguf_array_at(&a, 1, &e) == BP_OK && e.elem_type == BP_GGUF_STRING && e.len == 1, "nested_str[1]");
    bp_gguf_value x;
    CHECK(bp_gguf_array_at(&e, 0, &x) == BP_OK && elem_str_is(&x, "def"), "nested_str[1][0]");
    CHECK(bp_gguf_array_at(&a, 0, &e) == BP_OK && bp_gguf_array_at(&e, 1, &x) == BP_OK && elem_str_is(&x, "bc"),
          "nested_str[0][1]");

    CHECK_OK(bp_gguf_get(f, "test.vocab", &a));
    CHECK(a.len == 300 && bp_gguf_array_at(&a, 299, &e) == BP_OK && elem_str_is(&e, "tok299"), "vocab[299]");
    CHECK(bp_gguf_array_next(&a, &e, &x) == BP_E_NOT_FOUND, "walk stops after the last element");
}

static void check_tensors(const bp_gguf *f) {
    CHECK(bp_gguf_tensor_count(f) == 4, "4 tensors, got %lld", (long long)bp_gguf_tensor_count(f));
    static const struct { const char *name; bp_kind kind; uint32_t nd; int64_t ne[4]; size_t bytes; } want[] = {
        {"t1.f32", BP_KIND_F32, 1, {16, 1, 1, 1}, 64},
        {"t2.f16", BP_KIND_F16, 2, {8, 3, 1, 1}, 48},
        {"t3.i32", BP_KIND_I32, 3, {4, 3, 2, 1}, 96},
        {"t4.f32", BP_KIND_F32, 4, {2, 3, 1, 2}, 48},
    };
    for (int k = 0; k < 4; k++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, k);
        CHECK(t && !strcmp(t->name, want[k].name), "tensor %d name %s", k, t ? t->name : "(null)");
        if (!t) continue;
        CHECK(t->kind == want[k].kind && t->n_dims == want[k].nd && t->bytes == want[k].bytes, "%s kind/dims/bytes",
              t->name);
        CHECK(!memcmp(t->ne, want[k].ne, sizeof t->ne), "%s ne", t->name);
        CHECK(t->offset % 64 == 0 && t->offset >= bp_gguf_data_offset(f), "%s offset %llu aligned to 64", t->name,
              (unsigned long long)t->offset);
        CHECK(bp_gguf_find_tensor(f, want[k].name) == t, "find %s", want[k].name);
    }
    /* Data is np.arange in the script: check values through the zero-copy pointer. */
    const bp_gguf_tensor *t3 = bp_gguf_find_tensor(f, "t3.i32");
    if (t3) {
        int32_t v[24];
        memcpy(v, t3->data, sizeof v);
        int ok = 1;
        for (int k = 0; k < 24; k++) ok &= v[k] == k;
        CHECK(ok, "t3.i32 data is 0..23");
    }
    const bp_gguf_tensor *t4 = bp_gguf_find_tensor(f, "t4.f32");
    if (t4) {
        float v[12];
        memcpy(v, t4->data, sizeof v);
        CHECK(v[0] == 0.0f && v[11] == 11.0f, "t4.f32 data");
    }
    CHECK(bp_gguf_find_tensor(f, "nope") == NULL, "missing tensor");
    CHECK(strstr(bp_last_error(), "nope") != NULL, "message names it: %s", bp_last_error());
    CHECK(bp_gguf_tensor_at(f, 4) == NULL && bp_gguf_tensor_at(f, -1) == NULL, "tensor_at range");
}

static void check_kinds_file(void) {
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open("tests/gguf/kinds.gguf", &f));
    if (!f) return;
    size_t n = 0;
    char *list = bp_test_read_file("tests/gguf/kinds_list.txt", &n);
    int count = 0;
    for (char *save = NULL, *name = list ? strtok_r(list, "\n", &save) : NULL; name; name = strtok_r(NULL, "\n", &save)) {
        const bp_gguf_tensor *t = bp_gguf_find_tensor(f, name);
        CHECK(t != NULL, "kinds.gguf has %s", name);
        if (!t) continue;
        count++;
        CHECK(!strcmp(t->kind_info->name, name), "%s has kind %s", name, t->kind_info->name);
        CHECK(t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 8, "%s is 8 x 256", name);
        size_t row;
        CHECK_OK(bp_kind_row_bytes(t->kind, 256, &row));
        CHECK(t->bytes == 8 * row, "%s bytes %zu", name, t->bytes);
    }
    CHECK(count >= 26 && count == bp_gguf_tensor_count(f), "%d kinds", count);
    free(list);
    bp_gguf_close(f);
}

int main(void) {
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open("tests/gguf/meta_all.gguf", &f));
    if (f) {
        CHECK(bp_gguf_version(f) == 3, "version %u", bp_gguf_version(f));
        CHECK(bp_gguf_alignment(f) == 64, "alignment %u", bp_gguf_alignment(f));
        CHECK(bp_gguf_data_offset(f) % 64 == 0, "data offset aligned");
        /* general.architecture and general.alignment, then the script's 29 keys, in order. */
        CHECK(bp_gguf_kv_count(f) == 31, "kv count %lld", (long long)bp_gguf_kv_count(f));
        CHECK(bp_gguf_kv_key(f, 0) && !strcmp(bp_gguf_kv_key(f, 0), "general.architecture"), "first key");
        CHECK(bp_gguf_kv_key(f, 30) && !strcmp(bp_gguf_kv_key(f, 30), "test.vocab"), "last key");
        CHECK(bp_gguf_kv_key(f, 31) == NULL, "key past the end");
        check_scalars(f);
        check_arrays(f);
        check_tensors(f);
        bp_gguf_close(f);
    }

    /* The same file written big-endian by the same package: a clear error, not garbage. */
    f = NULL;
    bp_status s = bp_gguf_open("tests/gguf/meta_all_be.gguf", &f);
    CHECK(s == BP_E_FORMAT && f == NULL, "big-endian refused: %s", bp_status_name(s));
    CHECK(strstr(bp_last_error(), "big-endian") != NULL && strstr(bp_last_error(), "meta_all_be.gguf") != NULL,
          "message: %s", bp_last_error());

    check_kinds_file();
    return bp_test_finish();
}
