/* GGUF reader: open by mmap (or over a caller's buffer) and validate the whole file up front.
 *
 * Every length, count, offset and dimension is checked against the bytes that remain before it
 * is used, with overflow-checked arithmetic, so a file that lies gets an error naming the byte
 * offset and what was wrong -- never a read past the end, a hang, or an allocation larger than
 * the file could describe. After a successful open every pointer handed out is inside the file.
 */
#include "core/alloc.h"
#include "gguf/gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* Smallest possible encodings, used to bound counts before anything is allocated or walked:
 * a metadata entry is key length (8) + type (4) + at least one value byte; a tensor info is
 * name length (8) + n_dims (4) + type (4) + offset (8); a string is its length (8); a nested
 * array is its element type (4) + count (8). Without these bounds a count of 2^63 would be a
 * giant calloc or a walk that never ends. */
enum { MIN_KV = 13, MIN_TENSOR = 24, MIN_STRING = 8, MIN_ARRAY = 12 };

typedef struct cur {
    const uint8_t *b;
    size_t size;
    size_t pos;
} cur;

static size_t left(const cur *c) { return c->size - c->pos; }

static bp_status need(const cur *c, uint64_t n, const char *what) {
    if (n > left(c))
        return bp_fail(BP_E_FORMAT, "GGUF offset %zu: %s needs %llu bytes, but only %zu remain (file size %zu)",
                       c->pos, what, (unsigned long long)n, left(c), c->size);
    return BP_OK;
}

static bp_status rd_u32(cur *c, const char *what, uint32_t *v) {
    bp_status s = need(c, 4, what);
    if (s) return s;
    *v = bp_gguf_le32(c->b + c->pos);
    c->pos += 4;
    return BP_OK;
}

static bp_status rd_u64(cur *c, const char *what, uint64_t *v) {
    bp_status s = need(c, 8, what);
    if (s) return s;
    *v = bp_gguf_le64(c->b + c->pos);
    c->pos += 8;
    return BP_OK;
}

/* A GGUF string: u64 length, then that many bytes. *off is where the bytes start. */
static bp_status rd_str(cur *c, const char *what, size_t *off, uint64_t *len) {
    size_t at = c->pos;
    bp_status s = rd_u64(c, what, len);
    if (s) return s;
    if (*len > left(c))
        return bp_fail(BP_E_FORMAT, "GGUF offset %zu: %s has length %llu, past the end of the file (%zu bytes remain)",
                       at, what, (unsigned long long)*len, left(c));
    *off = c->pos;
    c->pos += (size_t)*len;
    return BP_OK;
}

static bp_status check_bools(const cur *c, size_t at, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (c->b[at + i] > 1)
            return bp_fail(BP_E_FORMAT, "GGUF offset %zu: bool value %u is neither 0 nor 1",
                           (size_t)(at + i), c->b[at + i]);
    return BP_OK;
}

/* Validate one value of `type` at the cursor and describe it in *v (may be NULL for nested
 * elements nobody keeps). depth counts enclosing arrays. */
static bp_status parse_value(cur *c, uint32_t type, int depth, bp_gguf_value *v) {
    size_t at = c->pos;
    bp_gguf_value tmp;
    if (!v) v = &tmp;
    memset(v, 0, sizeof *v);
    v->type = (bp_gguf_type)type;
    v->offset = at;
    uint64_t fixed = bp_gguf_fixed_size(type);
    bp_status s;
    if (fixed) {
        if ((s = need(c, fixed, "metadata value"))) return s;
        if (type == BP_GGUF_BOOL && (s = check_bools(c, c->pos, 1))) return s;
        v->data = c->b + c->pos;
        v->bytes = fixed;
        c->pos += fixed;
        return BP_OK;
    }
    if (type == BP_GGUF_STRING) {
        size_t off;
        if ((s = rd_str(c, "string value", &off, &v->len))) return s;
        v->data = c->b + off;
        v->bytes = v->len;
        return BP_OK;
    }
    if (type != BP_GGUF_ARRAY)
        return bp_fail(BP_E_FORMAT, "GGUF offset %zu: unknown metadata value type %u", at, type);
    if (depth >= BP_GGUF_MAX_DEPTH)
        return bp_fail(BP_E_FORMAT, "GGUF offset %zu: arrays nested deeper than %d levels", at, BP_GGUF_MAX_DEPTH);
    uint32_t et;
    uint64_t count;
    if ((s = rd_u32(c, "array element type", &et))) return s;
    if ((s = rd_u64(c, "array element count", &count))) return s;
    v->elem_type = (bp_gguf_type)et;
    v->len = count;
    v->data = c->b + c->pos;
    size_t start = c->pos;
    uint64_t esize = bp_gguf_fixed_size(et);
    if (esize) {
        uint64_t bytes;
        if (__builtin_mul_overflow(count, esize, &bytes) || bytes > left(c))
            return bp_fail(BP_E_FORMAT, "GGUF offset %zu: array of %llu %s elements does not fit in the %zu bytes that remain",
                           at, (unsigned long long)count, bp_gguf_type_name((bp_gguf_type)et), left(c));
        if (et == BP_GGUF_BOOL && (s = check_bools(c, c->pos, count))) return s;
        c->pos += (size_t)bytes;
    } else if (et == BP_GGUF_STRING || et == BP_GGUF_ARRAY) {
        uint64_t min = et == BP_GGUF_STRING ? MIN_STRING : MIN_ARRAY;
        if (count > left(c) / min)
            return bp_fail(BP_E_FORMAT, "GGUF offset %zu: array of %llu %ss cannot fit in the %zu bytes that remain",
                           at, (unsigned long long)count, bp_gguf_type_name((bp_gguf_type)et), left(c));
        for (uint64_t i = 0; i < count; i++) {
            if ((s = parse_value(c, et, depth + 1, NULL))) return s;
        }
    } else {
        return bp_fail(BP_E_FORMAT, "GGUF offset %zu: array has unknown element type %u", at, et);
    }
    v->bytes = c->pos - start;
    return BP_OK;
}

static int cmp_kv(const void *a, const void *b) {
    return strcmp((*(bp_gguf_kv *const *)a)->key, (*(bp_gguf_kv *const *)b)->key);
}
static int cmp_tensor(const void *a, const void *b) {
    return strcmp((*(bp_gguf_tensor *const *)a)->name, (*(bp_gguf_tensor *const *)b)->name);
}

/* Copy a name out of the file into the arena, NUL-terminated. An embedded NUL would make two
 * different names compare equal (and print truncated), so it is refused. */
static bp_status copy_name(const cur *c, size_t off, uint64_t len, char **arena, const char *what,
                           const char **out) {
    if (memchr(c->b + off, 0, (size_t)len))
        return bp_fail(BP_E_FORMAT, "GGUF offset %zu: %s contains a NUL byte", off - 8, what);
    memcpy(*arena, c->b + off, (size_t)len);
    (*arena)[len] = '\0';
    *out = *arena;
    *arena += len + 1;
    return BP_OK;
}

static bp_status parse(bp_gguf *f) {
    cur c = {f->base, f->size, 0};
    bp_status s;
    if (f->size < 4 || memcmp(f->base, "GGUF", 4) != 0)
        return bp_fail(BP_E_FORMAT, "GGUF offset 0: not a GGUF file (magic is not \"GGUF\")");
    c.pos = 4;
    uint32_t version;
    if ((s = rd_u32(&c, "version", &version))) return s;
    if (version != 2 && version != 3) {
        uint32_t swapped = __builtin_bswap32(version);
        if (swapped >= 1 && swapped <= 3)
            return bp_fail(BP_E_FORMAT, "GGUF offset 4: big-endian GGUF (version %u byte-swapped) is not supported; "
                                        "convert the file to little-endian", swapped);
        if (version == 1)
            return bp_fail(BP_E_FORMAT, "GGUF offset 4: GGUF version 1 (32-bit counts) is not supported; only v2 and v3");
        return bp_fail(BP_E_FORMAT, "GGUF offset 4: unsupported GGUF version %u (only 2 and 3)", version);
    }
    f->version = version;
    uint64_t n_tensors, n_kv;
    if ((s = rd_u64(&c, "tensor count", &n_tensors))) return s;
    if ((s = rd_u64(&c, "metadata count", &n_kv))) return s;
    if (n_tensors > left(&c) / MIN_TENSOR)
        return bp_fail(BP_E_FORMAT, "GGUF offset 8: tensor count %llu cannot fit in the %zu bytes that remain",
                       (unsigned long long)n_tensors, left(&c));
    if (n_kv > left(&c) / MIN_KV)
        return bp_fail(BP_E_FORMAT, "GGUF offset 16: metadata count %llu cannot fit in the %zu bytes that remain",
                       (unsigned long long)n_kv, left(&c));
    /* Both lists share the same bytes: each bound alone would let a file claim a full set of
     * each, doubling what is allocated below. */
    if (n_kv * MIN_KV > left(&c) - n_tensors * MIN_TENSOR)
        return bp_fail(BP_E_FORMAT, "GGUF offset 8: %llu tensor infos and %llu metadata entries cannot fit in the %zu bytes that remain",
                       (unsigned long long)n_tensors, (unsigned long long)n_kv, left(&c));
    f->n_tensors = (int64_t)n_tensors;
    f->n_kv = (int64_t)n_kv;
    /* calloc(0) may return NULL; ask for at least one element so NULL always means failure. */
    f->kv = bp_calloc(n_kv ? n_kv : 1, sizeof *f->kv);
    f->tensors = bp_calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    size_t *name_off = bp_calloc(n_kv + n_tensors + 1, sizeof *name_off);
    uint64_t *name_len = bp_calloc(n_kv + n_tensors + 1, sizeof *name_len);
    if (!f->kv || !f->tensors || !name_off || !name_len) {
        bp_free(name_off);
        bp_free(name_len);
        return bp_fail(BP_E_NOMEM, "GGUF: out of memory for %llu metadata entries and %llu tensors",
                       (unsigned long long)n_kv, (unsigned long long)n_tensors);
    }
    uint64_t names_total = 0;
    char what[96];
    for (uint64_t i = 0; i < n_kv; i++) {
        bp_gguf_kv *kv = &f->kv[i];
        kv->key_offset = c.pos;
        snprintf(what, sizeof what, "key of metadata entry %llu", (unsigned long long)i);
        if ((s = rd_str(&c, what, &name_off[i], &name_len[i]))) goto out;
        names_total += name_len[i] + 1;
        uint32_t type;
        if ((s = rd_u32(&c, "metadata value type", &type))) goto out;
        if ((s = parse_value(&c, type, 0, &kv->value))) goto out;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        bp_gguf_tensor *t = &f->tensors[i];
        uint64_t j = n_kv + i;
        t->info_offset = c.pos;
        snprintf(what, sizeof what, "name of tensor %llu", (unsigned long long)i);
        if ((s = rd_str(&c, what, &name_off[j], &name_len[j]))) goto out;
        names_total += name_len[j] + 1;
        int nl = name_len[j] > 64 ? 64 : (int)name_len[j];
        const char *nm = (const char *)c.b + name_off[j];
        size_t at = c.pos;
        if ((s = rd_u32(&c, "tensor n_dims", &t->n_dims))) goto out;
        if (t->n_dims > BP_GGUF_MAX_DIMS) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %zu: tensor '%.*s' has %u dimensions (at most %d)", at, nl, nm,
                        t->n_dims, BP_GGUF_MAX_DIMS);
            goto out;
        }
        for (int d = 0; d < BP_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne;
            at = c.pos;
            if ((s = rd_u64(&c, "tensor dimension", &ne))) goto out;
            if (ne > (uint64_t)INT64_MAX) {
                s = bp_fail(BP_E_FORMAT, "GGUF offset %zu: tensor '%.*s' dimension %u is negative (%lld)", at, nl,
                            nm, d, (long long)ne);
                goto out;
            }
            t->ne[d] = (int64_t)ne;
        }
        uint32_t kind_id;
        at = c.pos;
        if ((s = rd_u32(&c, "tensor kind", &kind_id))) goto out;
        t->kind_info = bp_kind_lookup(kind_id);
        if (!t->kind_info) {
            s = bp_fail(BP_E_KIND, "GGUF offset %zu: tensor '%.*s' has unknown kind id %u", at, nl, nm, kind_id);
            goto out;
        }
        t->kind = t->kind_info->kind;
        if ((s = rd_u64(&c, "tensor data offset", &t->offset))) goto out;
    }

    /* general.alignment decides where the data section starts; it must be found before any
     * tensor offset is checked. */
    f->alignment = BP_GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (name_len[i] != 17 || memcmp(c.b + name_off[i], "general.alignment", 17) != 0) continue;
        const bp_gguf_value *v = &f->kv[i].value;
        if (v->type != BP_GGUF_U32) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: general.alignment has type %s, not u32",
                        (unsigned long long)v->offset, bp_gguf_type_name(v->type));
            goto out;
        }
        uint32_t a = bp_gguf_le32(v->data);
        if (a == 0 || (a & (a - 1))) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: general.alignment %u is not a power of two",
                        (unsigned long long)v->offset, a);
            goto out;
        }
        f->alignment = a;
    }
    uint64_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    f->data_offset = (uint64_t)c.pos + pad;
    if (f->data_offset > f->size && n_tensors > 0) {
        s = bp_fail(BP_E_FORMAT, "GGUF offset %zu: tensor data section would start at %llu (aligned to %u), past the end of the file (%zu bytes)",
                    c.pos, (unsigned long long)f->data_offset, f->alignment, f->size);
        goto out;
    }
    /* A file without tensors may end before the padding: its (empty) data section is the end. */
    if (f->data_offset > f->size) f->data_offset = f->size;
    uint64_t data_size = f->size - f->data_offset;
    for (uint64_t i = 0; i < n_tensors; i++) {
        bp_gguf_tensor *t = &f->tensors[i];
        const char *nm = (const char *)c.b + name_off[n_kv + i];
        int nl = name_len[n_kv + i] > 64 ? 64 : (int)name_len[n_kv + i];
        unsigned long long io = (unsigned long long)t->info_offset;
        int64_t n = 1;
        for (int d = 0; d < BP_GGUF_MAX_DIMS; d++) {
            if (__builtin_mul_overflow(n, t->ne[d], &n)) {
                s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: tensor '%.*s': element count %lld x %lld x %lld x %lld overflows",
                            io, nl, nm, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
                goto out;
            }
        }
        t->n_elems = n;
        const bp_kind_info *k = t->kind_info;
        if (t->ne[0] % k->block_elems) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: tensor '%.*s': row of %lld elements is not a whole number of %s blocks (%u)",
                        io, nl, nm, (long long)t->ne[0], k->name, k->block_elems);
            goto out;
        }
        /* n fits in int64 and block_bytes / block_elems <= 8, so this cannot overflow 64 bits,
         * but say so with a check rather than a proof in a comment. */
        uint64_t bytes;
        if (__builtin_mul_overflow((uint64_t)(n / k->block_elems), (uint64_t)k->block_bytes, &bytes) ||
            bytes > SIZE_MAX) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: tensor '%.*s': byte size overflows", io, nl, nm);
            goto out;
        }
        t->bytes = (size_t)bytes;
        if (t->offset % f->alignment) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: tensor '%.*s': data offset %llu is not a multiple of the alignment %u",
                        io, nl, nm, (unsigned long long)t->offset, f->alignment);
            goto out;
        }
        if (t->offset > data_size || bytes > data_size - t->offset) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: tensor '%.*s': data [%llu, +%llu) at file offset %llu runs past the end of the file (%zu bytes)",
                        io, nl, nm, (unsigned long long)t->offset, (unsigned long long)bytes,
                        (unsigned long long)(f->data_offset + t->offset), f->size);
            goto out;
        }
        t->offset += f->data_offset;
        t->data = f->base + t->offset;
    }

    /* Names: total bytes are bounded by the file size plus one NUL per name. */
    f->names = bp_malloc(names_total ? names_total : 1);
    if (!f->names) {
        s = bp_fail(BP_E_NOMEM, "GGUF: out of memory for %llu bytes of names", (unsigned long long)names_total);
        goto out;
    }
    char *arena = f->names;
    for (uint64_t i = 0; i < n_kv; i++)
        if ((s = copy_name(&c, name_off[i], name_len[i], &arena, "metadata key", &f->kv[i].key))) goto out;
    for (uint64_t i = 0; i < n_tensors; i++)
        if ((s = copy_name(&c, name_off[n_kv + i], name_len[n_kv + i], &arena, "tensor name", &f->tensors[i].name)))
            goto out;

    /* Sorted indexes: lookup by name in O(log n), and duplicates found in O(n log n) -- a
     * pairwise check would let a file of many tensors hang the reader. */
    f->kv_sorted = bp_malloc((n_kv ? n_kv : 1) * sizeof *f->kv_sorted);
    f->tensor_sorted = bp_malloc((n_tensors ? n_tensors : 1) * sizeof *f->tensor_sorted);
    if (!f->kv_sorted || !f->tensor_sorted) {
        s = bp_fail(BP_E_NOMEM, "GGUF: out of memory for the name index");
        goto out;
    }
    for (uint64_t i = 0; i < n_kv; i++) f->kv_sorted[i] = &f->kv[i];
    for (uint64_t i = 0; i < n_tensors; i++) f->tensor_sorted[i] = &f->tensors[i];
    qsort(f->kv_sorted, n_kv, sizeof *f->kv_sorted, cmp_kv);
    qsort(f->tensor_sorted, n_tensors, sizeof *f->tensor_sorted, cmp_tensor);
    for (uint64_t i = 1; i < n_kv; i++) {
        const bp_gguf_kv *a = f->kv_sorted[i - 1], *b = f->kv_sorted[i];
        if (!strcmp(a->key, b->key)) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: duplicate metadata key '%.64s' (also at offset %llu)",
                        (unsigned long long)(a->key_offset > b->key_offset ? a->key_offset : b->key_offset), a->key,
                        (unsigned long long)(a->key_offset < b->key_offset ? a->key_offset : b->key_offset));
            goto out;
        }
    }
    for (uint64_t i = 1; i < n_tensors; i++) {
        const bp_gguf_tensor *a = f->tensor_sorted[i - 1], *b = f->tensor_sorted[i];
        if (!strcmp(a->name, b->name)) {
            s = bp_fail(BP_E_FORMAT, "GGUF offset %llu: duplicate tensor name '%.64s' (also at offset %llu)",
                        (unsigned long long)(a->info_offset > b->info_offset ? a->info_offset : b->info_offset), a->name,
                        (unsigned long long)(a->info_offset < b->info_offset ? a->info_offset : b->info_offset));
            goto out;
        }
    }
    s = BP_OK;
out:
    bp_free(name_off);
    bp_free(name_len);
    return s;
}

void bp_gguf_close(bp_gguf *f) {
    if (!f) return;
    if (f->mapped) munmap((void *)f->base, f->size);
    bp_free(f->kv);
    bp_free(f->tensors);
    bp_free(f->kv_sorted);
    bp_free(f->tensor_sorted);
    bp_free(f->names);
    bp_free(f);
}

bp_status bp_gguf_open_memory(const void *buf, size_t len, bp_gguf **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_gguf_open_memory: out is NULL");
    *out = NULL;
    if (!buf && len) return bp_fail(BP_E_INVAL, "bp_gguf_open_memory: buffer is NULL");
    bp_gguf *f = bp_calloc(1, sizeof *f);
    if (!f) return bp_fail(BP_E_NOMEM, "GGUF: out of memory");
    static const uint8_t empty[1];
    f->base = buf ? buf : empty;
    f->size = len;
    bp_status s = parse(f);
    if (s) {
        bp_gguf_close(f);
        return s;
    }
    *out = f;
    return BP_OK;
}

/* What a path that is not a regular file is, for the error. */
static const char *file_type(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a file";
}

bp_status bp_gguf_open(const char *path, bp_gguf **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_gguf_open: out is NULL");
    *out = NULL;
    if (!path) return bp_fail(BP_E_INVAL, "bp_gguf_open: path is NULL");
    /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer (`mkfifo f;
     * backplane info f` never returned); fstat below refuses it at once. The flag does not
     * matter to mmap. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return bp_fail(BP_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return bp_fail(BP_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return bp_fail(BP_E_IO, "%s: not a regular file (%s)", path, file_type(st.st_mode));
    }
    if (st.st_size == 0) {
        close(fd);
        return bp_fail(BP_E_FORMAT, "%s: GGUF offset 0: file is empty", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return bp_fail(BP_E_IO, "%s: cannot mmap %zu bytes: %s", path, size, strerror(e));
    bp_gguf *f = bp_calloc(1, sizeof *f);
    if (!f) {
        munmap(map, size);
        return bp_fail(BP_E_NOMEM, "GGUF: out of memory");
    }
    f->base = map;
    f->size = size;
    f->mapped = 1;
    bp_status s = parse(f);
    if (s) {
        /* Name the file in front of the parser's offset message. */
        char msg[900];
        snprintf(msg, sizeof msg, "%s", bp_last_error());
        bp_gguf_close(f);
        return bp_fail(s, "%s: %s", path, msg);
    }
    *out = f;
    return BP_OK;
}
