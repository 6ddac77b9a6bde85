/* GGUF v3 writer: metadata is serialized as it is added; tensors are referenced and written,
 * each padded to the alignment, when the file is written. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "gguf/gguf_internal.h"

typedef struct wtensor {
    char *name;
    bp_kind kind;
    uint32_t n_dims;
    int64_t ne[BP_GGUF_MAX_DIMS];
    const void *data;
    size_t bytes;
} wtensor;

struct bp_gguf_writer {
    uint8_t *kv;
    size_t kv_len, kv_cap;
    char **keys;
    uint64_t n_kv;
    size_t keys_cap;
    wtensor *t;
    uint64_t n_t;
    size_t t_cap;
    uint32_t alignment;
};

bp_status bp_gguf_writer_create(bp_gguf_writer **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_gguf_writer_create: out is NULL");
    *out = bp_calloc(1, sizeof **out);
    if (!*out) return bp_fail(BP_E_NOMEM, "GGUF writer: out of memory");
    (*out)->alignment = BP_GGUF_DEFAULT_ALIGNMENT;
    return BP_OK;
}

void bp_gguf_writer_free(bp_gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) bp_free(w->keys[i]);
    for (uint64_t i = 0; i < w->n_t; i++) bp_free(w->t[i].name);
    bp_free(w->keys);
    bp_free(w->t);
    bp_free(w->kv);
    bp_free(w);
}

static bp_status put(bp_gguf_writer *w, const void *p, size_t n) {
    if (n > w->kv_cap - w->kv_len) {
        size_t cap = w->kv_cap ? w->kv_cap : 256;
        while (cap - w->kv_len < n) {
            if (!bp_mul_size(cap, 2, &cap)) return bp_fail(BP_E_NOMEM, "GGUF writer: metadata too large");
        }
        uint8_t *nk = bp_realloc(w->kv, cap);
        if (!nk) return bp_fail(BP_E_NOMEM, "GGUF writer: out of memory for %zu bytes of metadata", cap);
        w->kv = nk;
        w->kv_cap = cap;
    }
    if (n) memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return BP_OK;
}

static bp_status put_u32(bp_gguf_writer *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    return put(w, b, 4);
}
static bp_status put_u64(bp_gguf_writer *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return put(w, b, 8);
}
static bp_status put_str(bp_gguf_writer *w, const char *s, size_t len) {
    bp_status st = put_u64(w, len);
    return st ? st : put(w, s, len);
}

/* Little-endian bytes of one fixed-size element given as its C type. */
static void encode(bp_gguf_type t, const void *v, uint8_t *b) {
    uint64_t n = bp_gguf_fixed_size(t), bits = 0;
    switch (n) {
    case 1: bits = t == BP_GGUF_BOOL ? (uint64_t)(*(const bool *)v ? 1 : 0) : *(const uint8_t *)v; break;
    case 2: bits = *(const uint16_t *)v; break;
    case 4: { uint32_t u; memcpy(&u, v, 4); bits = u; break; }
    case 8: memcpy(&bits, v, 8); break;
    }
    for (uint64_t i = 0; i < n; i++) b[i] = (uint8_t)(bits >> (8 * i));
}
/* Size of one element of type t as a C object (bool may not be one byte everywhere). */
static size_t c_size(bp_gguf_type t) { return t == BP_GGUF_BOOL ? sizeof(bool) : (size_t)bp_gguf_fixed_size(t); }

/* Check the key and start its entry: key string and value type. */
static bp_status begin_kv(bp_gguf_writer *w, const char *key, bp_gguf_type type) {
    if (!w || !key) return bp_fail(BP_E_INVAL, "GGUF writer: NULL writer or key");
    /* Readers (ours, ggml's) refuse a file whose general.alignment is not a u32. */
    if (!strcmp(key, "general.alignment") && type != BP_GGUF_U32)
        return bp_fail(BP_E_INVAL, "GGUF writer: general.alignment must be u32, not %s", bp_gguf_type_name(type));
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key)) return bp_fail(BP_E_INVAL, "GGUF writer: duplicate metadata key '%s'", key);
    if (w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? 2 * w->keys_cap : 16;
        char **nk = bp_realloc(w->keys, cap * sizeof *nk);
        if (!nk) return bp_fail(BP_E_NOMEM, "GGUF writer: out of memory");
        w->keys = nk;
        w->keys_cap = cap;
    }
    char *k = bp_strdup(key);
    if (!k) return bp_fail(BP_E_NOMEM, "GGUF writer: out of memory");
    bp_status s = put_str(w, key, strlen(key));
    if (!s) s = put_u32(w, (uint32_t)type);
    if (s) {
        bp_free(k);
        return s;
    }
    w->keys[w->n_kv++] = k;
    return BP_OK;
}

bp_status bp_gguf_writer_add_scalar(bp_gguf_writer *w, const char *key, bp_gguf_type type, const void *value) {
    if (!value) return bp_fail(BP_E_INVAL, "GGUF writer: NULL value for '%s'", key ? key : "(null)");
    if (!bp_gguf_fixed_size(type))
        return bp_fail(BP_E_INVAL, "GGUF writer: '%s': type %d is not a fixed-size scalar", key ? key : "(null)", (int)type);
    if (key && !strcmp(key, "general.alignment")) {
        if (type != BP_GGUF_U32) return bp_fail(BP_E_INVAL, "GGUF writer: general.alignment must be u32");
        return bp_gguf_writer_set_alignment(w, *(const uint32_t *)value);
    }
    bp_status s = begin_kv(w, key, type);
    if (s) return s;
    uint8_t b[8];
    encode(type, value, b);
    return put(w, b, (size_t)bp_gguf_fixed_size(type));
}

bp_status bp_gguf_writer_set_alignment(bp_gguf_writer *w, uint32_t alignment) {
    if (!w) return bp_fail(BP_E_INVAL, "GGUF writer: NULL writer");
    if (alignment == 0 || (alignment & (alignment - 1)))
        return bp_fail(BP_E_INVAL, "GGUF writer: alignment %u is not a power of two", alignment);
    bp_status s = begin_kv(w, "general.alignment", BP_GGUF_U32);
    if (s) return s;
    w->alignment = alignment;
    return put_u32(w, alignment);
}

bp_status bp_gguf_writer_add_string(bp_gguf_writer *w, const char *key, const char *str, size_t len) {
    if (!str && len) return bp_fail(BP_E_INVAL, "GGUF writer: NULL string for '%s'", key ? key : "(null)");
    bp_status s = begin_kv(w, key, BP_GGUF_STRING);
    return s ? s : put_str(w, str, len);
}

bp_status bp_gguf_writer_add_array(bp_gguf_writer *w, const char *key, bp_gguf_type elem_type, const void *elems,
                                   uint64_t count) {
    if (!bp_gguf_fixed_size(elem_type))
        return bp_fail(BP_E_INVAL, "GGUF writer: '%s': array element type %d is not fixed-size (strings: use "
                                   "bp_gguf_writer_add_string_array)", key ? key : "(null)", (int)elem_type);
    if (!elems && count) return bp_fail(BP_E_INVAL, "GGUF writer: NULL elements for '%s'", key ? key : "(null)");
    bp_status s = begin_kv(w, key, BP_GGUF_ARRAY);
    if (!s) s = put_u32(w, (uint32_t)elem_type);
    if (!s) s = put_u64(w, count);
    const uint8_t *p = elems;
    for (uint64_t i = 0; i < count && !s; i++) {
        uint8_t b[8];
        encode(elem_type, p + i * c_size(elem_type), b);
        s = put(w, b, (size_t)bp_gguf_fixed_size(elem_type));
    }
    return s;
}

bp_status bp_gguf_writer_add_string_array(bp_gguf_writer *w, const char *key, const char *const *strs, uint64_t count) {
    if (!strs && count) return bp_fail(BP_E_INVAL, "GGUF writer: NULL strings for '%s'", key ? key : "(null)");
    for (uint64_t i = 0; i < count; i++)
        if (!strs[i]) return bp_fail(BP_E_INVAL, "GGUF writer: '%s': string %llu is NULL", key ? key : "(null)",
                                     (unsigned long long)i);
    bp_status s = begin_kv(w, key, BP_GGUF_ARRAY);
    if (!s) s = put_u32(w, BP_GGUF_STRING);
    if (!s) s = put_u64(w, count);
    for (uint64_t i = 0; i < count && !s; i++) s = put_str(w, strs[i], strlen(strs[i]));
    return s;
}

bp_status bp_gguf_writer_add_value(bp_gguf_writer *w, const char *key, const bp_gguf_value *v) {
    if (!v) return bp_fail(BP_E_INVAL, "GGUF writer: NULL value for '%s'", key ? key : "(null)");
    uint64_t fixed = bp_gguf_fixed_size(v->type);
    if (fixed) {
        /* The view's bytes are already little-endian GGUF encoding; decode through the C type
         * only for general.alignment, which the writer must also remember. */
        if (key && !strcmp(key, "general.alignment") && v->type == BP_GGUF_U32)
            return bp_gguf_writer_set_alignment(w, bp_gguf_le32(v->data));
        bp_status s = begin_kv(w, key, v->type);
        return s ? s : put(w, v->data, (size_t)fixed);
    }
    if (v->type == BP_GGUF_STRING) return bp_gguf_writer_add_string(w, key, v->data, (size_t)v->len);
    if (v->type != BP_GGUF_ARRAY)
        return bp_fail(BP_E_INVAL, "GGUF writer: '%s': unknown value type %d", key ? key : "(null)", (int)v->type);
    /* An array view's bytes (elements, nested headers included) are copied as they are. */
    bp_status s = begin_kv(w, key, BP_GGUF_ARRAY);
    if (!s) s = put_u32(w, (uint32_t)v->elem_type);
    if (!s) s = put_u64(w, v->len);
    if (!s) s = put(w, v->data, (size_t)v->bytes);
    return s;
}

bp_status bp_gguf_writer_add_tensor(bp_gguf_writer *w, const char *name, bp_kind kind, uint32_t n_dims,
                                    const int64_t *ne, const void *data, size_t bytes) {
    if (!w || !name || (!ne && n_dims) || (!data && bytes))
        return bp_fail(BP_E_INVAL, "GGUF writer: NULL argument for tensor '%s'", name ? name : "(null)");
    if (n_dims > BP_GGUF_MAX_DIMS)
        return bp_fail(BP_E_SHAPE, "GGUF writer: tensor '%s' has %u dimensions (at most %d)", name, n_dims,
                       BP_GGUF_MAX_DIMS);
    const bp_kind_info *k = bp_kind_lookup((uint32_t)kind);
    if (!k) return bp_fail(BP_E_KIND, "GGUF writer: tensor '%s': unknown kind %d", name, (int)kind);
    for (uint64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return bp_fail(BP_E_INVAL, "GGUF writer: duplicate tensor name '%s'", name);
    wtensor t = {.kind = kind, .n_dims = n_dims, .data = data, .bytes = bytes};
    int64_t n = 1;
    for (int d = 0; d < BP_GGUF_MAX_DIMS; d++) {
        t.ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0 || __builtin_mul_overflow(n, t.ne[d], &n))
            return bp_fail(BP_E_SHAPE, "GGUF writer: tensor '%s': bad dimension %d (%lld)", name, d, (long long)t.ne[d]);
    }
    if (t.ne[0] % k->block_elems)
        return bp_fail(BP_E_SHAPE, "GGUF writer: tensor '%s': row of %lld is not a whole number of %s blocks", name,
                       (long long)t.ne[0], k->name);
    uint64_t want;
    if (__builtin_mul_overflow((uint64_t)(n / k->block_elems), (uint64_t)k->block_bytes, &want) || want != bytes)
        return bp_fail(BP_E_SHAPE, "GGUF writer: tensor '%s': %zu bytes given, %s of %lld elements needs %llu", name,
                       bytes, k->name, (long long)n, (unsigned long long)want);
    if (w->n_t == w->t_cap) {
        size_t cap = w->t_cap ? 2 * w->t_cap : 16;
        wtensor *nt = bp_realloc(w->t, cap * sizeof *nt);
        if (!nt) return bp_fail(BP_E_NOMEM, "GGUF writer: out of memory");
        w->t = nt;
        w->t_cap = cap;
    }
    t.name = bp_strdup(name);
    if (!t.name) return bp_fail(BP_E_NOMEM, "GGUF writer: out of memory");
    w->t[w->n_t++] = t;
    return BP_OK;
}

static uint64_t pad_to(uint64_t n, uint32_t a) { return (a - n % a) % a; }

static int wr(FILE *fp, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, fp) == n; }
static int wr_u32(FILE *fp, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    return wr(fp, b, 4);
}
static int wr_u64(FILE *fp, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return wr(fp, b, 8);
}
static int wr_zeros(FILE *fp, uint64_t n) {
    static const uint8_t z[64];
    while (n) {
        size_t k = n > sizeof z ? sizeof z : (size_t)n;
        if (!wr(fp, z, k)) return 0;
        n -= k;
    }
    return 1;
}

/* The whole file to fp; 1 on success. */
static int emit(const bp_gguf_writer *w, FILE *fp) {
    uint64_t pos = 0;
    int ok = wr(fp, "GGUF", 4) && wr_u32(fp, 3) && wr_u64(fp, w->n_t) && wr_u64(fp, w->n_kv) && wr(fp, w->kv, w->kv_len);
    pos = 24 + w->kv_len;
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_t && ok; i++) {
        const wtensor *t = &w->t[i];
        size_t nl = strlen(t->name);
        ok = wr_u64(fp, nl) && wr(fp, t->name, nl) && wr_u32(fp, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && ok; d++) ok = wr_u64(fp, (uint64_t)t->ne[d]);
        ok = ok && wr_u32(fp, (uint32_t)t->kind) && wr_u64(fp, off);
        pos += 8 + nl + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
        off += t->bytes + pad_to(t->bytes, w->alignment);
    }
    ok = ok && wr_zeros(fp, pad_to(pos, w->alignment)); /* as GGUFWriter: padded even with no tensors */
    for (uint64_t i = 0; i < w->n_t && ok; i++)
        ok = wr(fp, w->t[i].data, w->t[i].bytes) && wr_zeros(fp, pad_to(w->t[i].bytes, w->alignment));
    return ok;
}

bp_status bp_gguf_writer_write_file(bp_gguf_writer *w, const char *path) {
    if (!w || !path) return bp_fail(BP_E_INVAL, "bp_gguf_writer_write_file: NULL argument");
    FILE *fp = fopen(path, "wb");
    if (!fp) return bp_fail(BP_E_IO, "%s: cannot create: %s", path, strerror(errno));
    int ok = emit(w, fp);
    int e = errno;
    if (fclose(fp) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok) return bp_fail(BP_E_IO, "%s: write failed: %s", path, strerror(e));
    return BP_OK;
}

bp_status bp_gguf_writer_write_memory(bp_gguf_writer *w, void **buf, size_t *len) {
    if (!w || !buf || !len) return bp_fail(BP_E_INVAL, "bp_gguf_writer_write_memory: NULL argument");
    char *p = NULL;
    size_t n = 0;
    FILE *fp = open_memstream(&p, &n);
    if (!fp) return bp_fail(BP_E_NOMEM, "GGUF writer: cannot open a memory stream");
    int ok = emit(w, fp);
    if (fclose(fp) != 0) ok = 0;
    if (!ok) {
        free(p); /* open_memstream's buffer is the C library's, not through core/alloc.h */
        return bp_fail(BP_E_NOMEM, "GGUF writer: writing to memory failed");
    }
    *buf = p;
    *len = n;
    return BP_OK;
}
