/* Accessors of an opened GGUF file: metadata lookup, typed getters, array elements, tensors.
 * Everything here reads bytes that gguf_read.c already validated at open. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gguf/gguf_internal.h"

const char *bp_gguf_type_name(bp_gguf_type t) {
    switch (t) {
    case BP_GGUF_U8: return "u8";
    case BP_GGUF_I8: return "i8";
    case BP_GGUF_U16: return "u16";
    case BP_GGUF_I16: return "i16";
    case BP_GGUF_U32: return "u32";
    case BP_GGUF_I32: return "i32";
    case BP_GGUF_F32: return "f32";
    case BP_GGUF_BOOL: return "bool";
    case BP_GGUF_STRING: return "string";
    case BP_GGUF_ARRAY: return "array";
    case BP_GGUF_U64: return "u64";
    case BP_GGUF_I64: return "i64";
    case BP_GGUF_F64: return "f64";
    }
    return "?";
}

uint32_t bp_gguf_version(const bp_gguf *f) { return f ? f->version : 0; }
uint32_t bp_gguf_alignment(const bp_gguf *f) { return f ? f->alignment : 0; }
uint64_t bp_gguf_data_offset(const bp_gguf *f) { return f ? f->data_offset : 0; }
uint64_t bp_gguf_file_size(const bp_gguf *f) { return f ? f->size : 0; }
int64_t bp_gguf_kv_count(const bp_gguf *f) { return f ? f->n_kv : 0; }
int64_t bp_gguf_tensor_count(const bp_gguf *f) { return f ? f->n_tensors : 0; }

const char *bp_gguf_kv_key(const bp_gguf *f, int64_t i) {
    if (!f || i < 0 || i >= f->n_kv) return NULL;
    return f->kv[i].key;
}

bp_status bp_gguf_kv_value(const bp_gguf *f, int64_t i, bp_gguf_value *v) {
    if (!f || !v) return bp_fail(BP_E_INVAL, "bp_gguf_kv_value: NULL argument");
    if (i < 0 || i >= f->n_kv)
        return bp_fail(BP_E_NOT_FOUND, "metadata index %lld out of range (%lld entries)", (long long)i,
                       (long long)f->n_kv);
    *v = f->kv[i].value;
    return BP_OK;
}

int64_t bp_gguf_find_key(const bp_gguf *f, const char *key) {
    if (!f || !key) return -1;
    int64_t lo = 0, hi = f->n_kv;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->kv_sorted[mid]->key, key);
        if (c == 0) return f->kv_sorted[mid] - f->kv;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

bp_status bp_gguf_get(const bp_gguf *f, const char *key, bp_gguf_value *v) {
    if (!f || !key || !v) return bp_fail(BP_E_INVAL, "bp_gguf_get: NULL argument");
    int64_t i = bp_gguf_find_key(f, key);
    if (i < 0) return bp_fail(BP_E_NOT_FOUND, "no metadata key '%s'", key);
    *v = f->kv[i].value;
    return BP_OK;
}

static bp_status not_a(const bp_gguf_value *v, const char *want) {
    return bp_fail(BP_E_FORMAT, "GGUF offset %llu: value is %s, not %s", (unsigned long long)v->offset,
                   bp_gguf_type_name(v->type), want);
}

/* Raw integer of an integer-typed value: *is_signed tells how to read *bits. */
static int int_bits(const bp_gguf_value *v, uint64_t *bits, int *is_signed) {
    const uint8_t *p = v->data;
    switch (v->type) {
    case BP_GGUF_U8: *bits = p[0]; *is_signed = 0; return 1;
    case BP_GGUF_I8: *bits = (uint64_t)(int64_t)(int8_t)p[0]; *is_signed = 1; return 1;
    case BP_GGUF_U16: *bits = (uint64_t)(p[0] | (p[1] << 8)); *is_signed = 0; return 1;
    case BP_GGUF_I16: *bits = (uint64_t)(int64_t)(int16_t)(uint16_t)(p[0] | (p[1] << 8)); *is_signed = 1; return 1;
    case BP_GGUF_U32: *bits = bp_gguf_le32(p); *is_signed = 0; return 1;
    case BP_GGUF_I32: *bits = (uint64_t)(int64_t)(int32_t)bp_gguf_le32(p); *is_signed = 1; return 1;
    case BP_GGUF_U64: *bits = bp_gguf_le64(p); *is_signed = 0; return 1;
    case BP_GGUF_I64: *bits = bp_gguf_le64(p); *is_signed = 1; return 1;
    default: return 0;
    }
}

bp_status bp_gguf_value_u64(const bp_gguf_value *v, uint64_t *out) {
    if (!v || !out) return bp_fail(BP_E_INVAL, "bp_gguf_value_u64: NULL argument");
    uint64_t bits;
    int sgn;
    if (!int_bits(v, &bits, &sgn)) return not_a(v, "an integer");
    if (sgn && (int64_t)bits < 0)
        return bp_fail(BP_E_FORMAT, "GGUF offset %llu: %s value %lld is negative", (unsigned long long)v->offset,
                       bp_gguf_type_name(v->type), (long long)bits);
    *out = bits;
    return BP_OK;
}

bp_status bp_gguf_value_i64(const bp_gguf_value *v, int64_t *out) {
    if (!v || !out) return bp_fail(BP_E_INVAL, "bp_gguf_value_i64: NULL argument");
    uint64_t bits;
    int sgn;
    if (!int_bits(v, &bits, &sgn)) return not_a(v, "an integer");
    if (!sgn && bits > (uint64_t)INT64_MAX)
        return bp_fail(BP_E_FORMAT, "GGUF offset %llu: u64 value %llu does not fit in i64",
                       (unsigned long long)v->offset, (unsigned long long)bits);
    *out = (int64_t)bits;
    return BP_OK;
}

bp_status bp_gguf_value_f64(const bp_gguf_value *v, double *out) {
    if (!v || !out) return bp_fail(BP_E_INVAL, "bp_gguf_value_f64: NULL argument");
    uint64_t bits;
    int sgn;
    if (v->type == BP_GGUF_F32) {
        uint32_t u = bp_gguf_le32(v->data);
        float x;
        memcpy(&x, &u, 4);
        *out = x;
    } else if (v->type == BP_GGUF_F64) {
        uint64_t u = bp_gguf_le64(v->data);
        memcpy(out, &u, 8);
    } else if (int_bits(v, &bits, &sgn)) {
        *out = sgn ? (double)(int64_t)bits : (double)bits;
    } else {
        return not_a(v, "a number");
    }
    return BP_OK;
}

bp_status bp_gguf_value_bool(const bp_gguf_value *v, bool *out) {
    if (!v || !out) return bp_fail(BP_E_INVAL, "bp_gguf_value_bool: NULL argument");
    if (v->type != BP_GGUF_BOOL) return not_a(v, "bool");
    *out = ((const uint8_t *)v->data)[0] != 0;
    return BP_OK;
}

bp_status bp_gguf_value_str(const bp_gguf_value *v, const char **s, size_t *len) {
    if (!v || !s) return bp_fail(BP_E_INVAL, "bp_gguf_value_str: NULL argument");
    if (v->type != BP_GGUF_STRING) return not_a(v, "string");
    *s = v->data;
    if (len) *len = (size_t)v->len;
    return BP_OK;
}

/* Typed get by key: look up, convert, and put the key in front of a conversion error. */
#define BP_GGUF_GETTER(NAME, T, CONV)                                                             \
    bp_status bp_gguf_get_##NAME(const bp_gguf *f, const char *key, T *out) {                      \
        bp_gguf_value v = {0};                                                                    \
        bp_status s = bp_gguf_get(f, key, &v);                                                    \
        if (s) return s;                                                                          \
        if ((s = CONV(&v, out))) {                                                                \
            char msg[512];                                                                        \
            snprintf(msg, sizeof msg, "%s", bp_last_error());                                     \
            return bp_fail(s, "metadata '%s': %s", key, msg);                                     \
        }                                                                                         \
        return BP_OK;                                                                             \
    }
BP_GGUF_GETTER(u64, uint64_t, bp_gguf_value_u64)
BP_GGUF_GETTER(i64, int64_t, bp_gguf_value_i64)
BP_GGUF_GETTER(f64, double, bp_gguf_value_f64)
BP_GGUF_GETTER(bool, bool, bp_gguf_value_bool)
#undef BP_GGUF_GETTER

bp_status bp_gguf_get_str(const bp_gguf *f, const char *key, const char **s, size_t *len) {
    bp_gguf_value v = {0};
    bp_status st = bp_gguf_get(f, key, &v);
    if (st) return st;
    if (v.type != BP_GGUF_STRING)
        return bp_fail(BP_E_FORMAT, "metadata '%s' is %s, not string", key, bp_gguf_type_name(v.type));
    return bp_gguf_value_str(&v, s, len);
}

/* Describe the (already validated) element of type t starting at p, file offset off. */
static void decode_at(const uint8_t *p, uint32_t t, uint64_t off, bp_gguf_value *e);

/* Bytes a validated value of type t occupies from p, headers included. Recursion is bounded
 * by BP_GGUF_MAX_DEPTH, enforced at open. */
static uint64_t span(const uint8_t *p, uint32_t t) {
    bp_gguf_value e;
    decode_at(p, t, 0, &e);
    return (uint64_t)((const uint8_t *)e.data - p) + e.bytes;
}

static void decode_at(const uint8_t *p, uint32_t t, uint64_t off, bp_gguf_value *e) {
    memset(e, 0, sizeof *e);
    e->type = (bp_gguf_type)t;
    e->offset = off;
    uint64_t fixed = bp_gguf_fixed_size(t);
    if (fixed) {
        e->data = p;
        e->bytes = fixed;
    } else if (t == BP_GGUF_STRING) {
        e->len = bp_gguf_le64(p);
        e->data = p + 8;
        e->bytes = e->len;
    } else { /* array */
        e->elem_type = (bp_gguf_type)bp_gguf_le32(p);
        e->len = bp_gguf_le64(p + 4);
        e->data = p + 12;
        uint64_t es = bp_gguf_fixed_size(e->elem_type);
        if (es) {
            e->bytes = es * e->len;
        } else {
            const uint8_t *q = p + 12;
            for (uint64_t i = 0; i < e->len; i++) q += span(q, e->elem_type);
            e->bytes = (uint64_t)(q - (p + 12));
        }
    }
}

/* File offset of the byte at q inside array arr. The array's own offset is that of its
 * 12-byte header (element type, count), so its first element is at offset + 12. */
static uint64_t offset_in(const bp_gguf_value *arr, const uint8_t *q) {
    return arr->offset + 12 + (uint64_t)(q - (const uint8_t *)arr->data);
}

bp_status bp_gguf_array_next(const bp_gguf_value *arr, const bp_gguf_value *prev, bp_gguf_value *elem) {
    if (!arr || !elem) return bp_fail(BP_E_INVAL, "bp_gguf_array_next: NULL argument");
    if (arr->type != BP_GGUF_ARRAY) return not_a(arr, "array");
    const uint8_t *start = arr->data, *end = start + arr->bytes;
    const uint8_t *q = prev ? (const uint8_t *)prev->data + prev->bytes : start;
    if (q < start || q >= end || (arr->len == 0))
        return bp_fail(BP_E_NOT_FOUND, "GGUF offset %llu: past the last element of the array",
                       (unsigned long long)arr->offset);
    decode_at(q, arr->elem_type, offset_in(arr, q), elem);
    return BP_OK;
}

bp_status bp_gguf_array_at(const bp_gguf_value *arr, uint64_t i, bp_gguf_value *elem) {
    if (!arr || !elem) return bp_fail(BP_E_INVAL, "bp_gguf_array_at: NULL argument");
    if (arr->type != BP_GGUF_ARRAY) return not_a(arr, "array");
    if (i >= arr->len)
        return bp_fail(BP_E_NOT_FOUND, "GGUF offset %llu: array index %llu out of range (%llu elements)",
                       (unsigned long long)arr->offset, (unsigned long long)i, (unsigned long long)arr->len);
    const uint8_t *q = arr->data;
    uint64_t es = bp_gguf_fixed_size(arr->elem_type);
    if (es) q += i * es;
    else
        for (uint64_t j = 0; j < i; j++) q += span(q, arr->elem_type);
    decode_at(q, arr->elem_type, offset_in(arr, q), elem);
    return BP_OK;
}

const bp_gguf_tensor *bp_gguf_tensor_at(const bp_gguf *f, int64_t i) {
    if (!f || i < 0 || i >= f->n_tensors) return NULL;
    return &f->tensors[i];
}

const bp_gguf_tensor *bp_gguf_find_tensor(const bp_gguf *f, const char *name) {
    if (!f || !name) {
        bp_fail(BP_E_INVAL, "bp_gguf_find_tensor: NULL argument");
        return NULL;
    }
    int64_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensor_sorted[mid]->name, name);
        if (c == 0) return f->tensor_sorted[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    bp_fail(BP_E_NOT_FOUND, "no tensor named '%s' (the file has %lld tensors)", name, (long long)f->n_tensors);
    return NULL;
}
