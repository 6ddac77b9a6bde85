/* Hostile GGUF files: truncation at every offset of a valid file, lying counts and lengths,
 * data offsets past EOF or misaligned, overflowing dimension products, duplicate names, unknown
 * kind ids, deep nesting, big-endian and bad versions. Each must be an error naming the byte
 * offset (and the tensor, where there is one) -- never a crash, hang or giant allocation. Every
 * buffer is a malloc of exactly the file's size, so under ASan a read one byte past the end is a
 * failure here, not a silent pass. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- a little GGUF byte builder ---------------------------------------------------------- */
typedef struct buf {
    uint8_t d[4096];
    size_t n;
} buf;

static void b_raw(buf *b, const void *p, size_t n) {
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void b_u32(buf *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b->d[b->n++] = (uint8_t)(v >> (8 * i));
}
static void b_u64(buf *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b->d[b->n++] = (uint8_t)(v >> (8 * i));
}
static void b_str(buf *b, const char *s) {
    b_u64(b, strlen(s));
    b_raw(b, s, strlen(s));
}
static void b_header(buf *b, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    b_raw(b, "GGUF", 4);
    b_u32(b, 3);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
/* A tensor info: name, dims, kind id, offset. */
static void b_tensor(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t kind, uint64_t off) {
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) b_u64(b, ne[i]);
    b_u32(b, kind);
    b_u64(b, off);
}
static void b_pad(buf *b, size_t align) {
    while (b->n % align) b->d[b->n++] = 0;
}
static void b_zeros(buf *b, size_t n) {
    memset(b->d + b->n, 0, n);
    b->n += n;
}

/* Open a copy of exactly b->n bytes; expect status `want` and every string in `subs` (NULL
 * terminated) inside the message. */
static void expect(const char *what, const uint8_t *data, size_t n, bp_status want, const char *const *subs) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    bp_gguf *f = (bp_gguf *)(uintptr_t)1; /* must be reset to NULL on failure */
    bp_status s = bp_gguf_open_memory(copy, n, &f);
    CHECK(s == want, "%s: got %s (%s), want %s", what, bp_status_name(s), bp_last_error(), bp_status_name(want));
    if (s != BP_OK) CHECK(f == NULL, "%s: *out not NULL after failure", what);
    for (; subs && *subs; subs++)
        CHECK(strstr(bp_last_error(), *subs) != NULL, "%s: message '%s' lacks '%s'", what, bp_last_error(), *subs);
    if (s == BP_OK) bp_gguf_close(f);
    free(copy);
}
#define EXPECT(what, b, want, ...) expect(what, (b)->d, (b)->n, want, (const char *const[]){__VA_ARGS__, NULL})

/* ---- truncation ----------------------------------------------------------------------------- */
static void truncation(const char *path) {
    size_t n = 0;
    uint8_t *full = bp_test_read_file(path, &n);
    if (!full) return;
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open_memory(full, n, &f));
    if (!f) {
        free(full);
        return;
    }
    /* Past the end of the last tensor's data there is only padding: cutting it leaves a valid
     * file. Every shorter prefix must be refused. */
    uint64_t need = bp_gguf_data_offset(f);
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        if (t->offset + t->bytes > need) need = t->offset + t->bytes;
    }
    bp_gguf_close(f);
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, full, len);
        bp_status s = bp_gguf_open_memory(copy, len, &f);
        int ok = len < need ? (s == BP_E_FORMAT && f == NULL && strstr(bp_last_error(), "offset") != NULL) : s == BP_OK;
        if (!ok && bad++ < 5)
            CHECK(0, "%s cut to %zu bytes (valid needs %llu): %s %s", path, len, (unsigned long long)need,
                  bp_status_name(s), bp_last_error());
        if (s == BP_OK) bp_gguf_close(f);
        free(copy);
    }
    CHECK(bad == 0, "%s: %d of %zu truncations misjudged", path, bad, n);
    free(full);
}

static void counts_and_lengths(void) {
    buf b;
    b_header(&b, 1ull << 63, 0);
    EXPECT("tensor count 2^63", &b, BP_E_FORMAT, "offset 8", "tensor count 9223372036854775808");
    b_header(&b, 0, 1ull << 63);
    EXPECT("kv count 2^63", &b, BP_E_FORMAT, "offset 16", "metadata count");
    b_header(&b, 0, UINT64_MAX);
    EXPECT("kv count 2^64-1", &b, BP_E_FORMAT, "offset 16");

    b_header(&b, 1, 1);
    b_zeros(&b, 24); /* room for one tensor info or one entry, not both */
    EXPECT("counts that fit alone but not together", &b, BP_E_FORMAT, "offset 8", "cannot fit");

    b_header(&b, 0, 1);
    b_u64(&b, 1000); /* key length past EOF */
    b_raw(&b, "general.x", 9);
    EXPECT("key length past EOF", &b, BP_E_FORMAT, "offset 24", "length 1000");
    b_header(&b, 0, 1);
    b_u64(&b, UINT64_MAX);
    b_zeros(&b, 32);
    EXPECT("key length 2^64-1", &b, BP_E_FORMAT, "offset 24", "key of metadata entry 0");

    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, BP_GGUF_STRING);
    b_u64(&b, 1ull << 62);
    b_raw(&b, "abc", 3);
    EXPECT("string value length past EOF", &b, BP_E_FORMAT, "offset 37", "string value");

    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, BP_GGUF_ARRAY);
    b_u32(&b, BP_GGUF_U8);
    b_u64(&b, 1ull << 63);
    b_zeros(&b, 16);
    EXPECT("u8 array count 2^63", &b, BP_E_FORMAT, "offset 37", "array of 9223372036854775808 u8");

    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, BP_GGUF_ARRAY);
    b_u32(&b, BP_GGUF_U64);
    b_u64(&b, 1ull << 61); /* 2^61 * 8 = 2^64: the byte count itself overflows */
    b_zeros(&b, 16);
    EXPECT("u64 array count overflows bytes", &b, BP_E_FORMAT, "offset 37");

    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, BP_GGUF_ARRAY);
    b_u32(&b, BP_GGUF_STRING);
    b_u64(&b, 1ull << 63);
    b_zeros(&b, 64);
    EXPECT("string array count 2^63", &b, BP_E_FORMAT, "offset 37", "string");

    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, BP_GGUF_ARRAY);
    b_u32(&b, BP_GGUF_STRING);
    b_u64(&b, 2);
    b_str(&b, "ok");
    b_u64(&b, 99); /* second string runs past EOF */
    b_raw(&b, "xy", 2);
    EXPECT("string in array past EOF", &b, BP_E_FORMAT, "offset 59");

    /* Nested arrays: 8 levels are fine, 9 are refused (a file of nothing but array headers
     * would otherwise recurse until the stack runs out). */
    for (int depth = 8; depth <= 9; depth++) {
        b_header(&b, 0, 1);
        b_str(&b, "k");
        b_u32(&b, BP_GGUF_ARRAY);
        for (int d = 1; d < depth; d++) {
            b_u32(&b, BP_GGUF_ARRAY);
            b_u64(&b, 1);
        }
        b_u32(&b, BP_GGUF_U8);
        b_u64(&b, 1);
        b_u32(&b, 7);
        b.n -= 3; /* the innermost array holds one u8: 7 */
        if (depth == 8) EXPECT("8 nested arrays", &b, BP_OK, "");
        else EXPECT("9 nested arrays", &b, BP_E_FORMAT, "nested deeper");
    }

    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, 13);
    b_u32(&b, 0);
    EXPECT("unknown value type", &b, BP_E_FORMAT, "offset 37", "unknown metadata value type 13");
    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, BP_GGUF_ARRAY);
    b_u32(&b, 99);
    b_u64(&b, 1);
    b_u32(&b, 0);
    EXPECT("unknown array element type", &b, BP_E_FORMAT, "offset 37", "element type 99");
    b_header(&b, 0, 1);
    b_str(&b, "k");
    b_u32(&b, BP_GGUF_BOOL);
    b_raw(&b, "\x02", 1);
    EXPECT("bool 2", &b, BP_E_FORMAT, "offset 37", "bool value 2");

    b_header(&b, 0, 2);
    b_str(&b, "dup");
    b_u32(&b, BP_GGUF_U8);
    b_raw(&b, "\x01", 1);
    b_str(&b, "dup");
    b_u32(&b, BP_GGUF_U8);
    b_raw(&b, "\x02", 1);
    EXPECT("duplicate key", &b, BP_E_FORMAT, "duplicate metadata key 'dup'", "offset 40", "offset 24");

    b_header(&b, 0, 1);
    b_u64(&b, 3);
    b_raw(&b, "a\0b", 3);
    b_u32(&b, BP_GGUF_U8);
    b_raw(&b, "\x01", 1);
    EXPECT("NUL inside a key", &b, BP_E_FORMAT, "offset 24", "NUL");
}

static void header_cases(void) {
    buf b;
    b.n = 0;
    EXPECT("empty", &b, BP_E_FORMAT, "offset 0");
    b_raw(&b, "GGUX", 4);
    b_u32(&b, 3);
    b_zeros(&b, 16);
    EXPECT("bad magic", &b, BP_E_FORMAT, "offset 0", "magic");
    b_header(&b, 0, 0);
    b.d[4] = 1;
    EXPECT("version 1", &b, BP_E_FORMAT, "offset 4", "version 1");
    b.d[4] = 4;
    EXPECT("version 4", &b, BP_E_FORMAT, "offset 4", "version 4");
    b.d[4] = 0, b.d[7] = 3;
    EXPECT("big-endian v3", &b, BP_E_FORMAT, "offset 4", "big-endian");
    b_header(&b, 0, 0);
    b_pad(&b, 32);
    EXPECT("empty but valid v3", &b, BP_OK, "");
    b.d[4] = 2;
    EXPECT("empty but valid v2", &b, BP_OK, "");
}

static void alignment_cases(void) {
    const uint32_t bad[] = {0, 48, 3};
    for (int i = 0; i < 3; i++) {
        buf b;
        b_header(&b, 0, 1);
        b_str(&b, "general.alignment");
        b_u32(&b, BP_GGUF_U32);
        b_u32(&b, bad[i]);
        EXPECT("alignment not a power of two", &b, BP_E_FORMAT, "offset 53", "not a power of two");
    }
    buf b;
    b_header(&b, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, BP_GGUF_U64);
    b_u64(&b, 32);
    EXPECT("alignment as u64", &b, BP_E_FORMAT, "general.alignment has type u64");
}

/* One tensor file: header, one tensor info, padding to 32, then `data` bytes of data. */
static void one_tensor(buf *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t kind, uint64_t off,
                       size_t data) {
    b_header(b, 1, 0);
    b_tensor(b, name, nd, ne, kind, off);
    b_pad(b, 32);
    b_zeros(b, data);
}

static void tensor_cases(void) {
    buf b;
    uint64_t ne2[2] = {32, 2};
    one_tensor(&b, "w", 2, ne2, BP_KIND_Q4_0, 0, 36);
    EXPECT("valid Q4_0 tensor", &b, BP_OK, "");
    one_tensor(&b, "w", 2, ne2, BP_KIND_Q4_0, 0, 35);
    EXPECT("data one byte short", &b, BP_E_FORMAT, "tensor 'w'", "past the end", "offset 24");
    one_tensor(&b, "w", 2, ne2, BP_KIND_Q4_0, 64, 36);
    EXPECT("offset past EOF", &b, BP_E_FORMAT, "tensor 'w'", "past the end");
    one_tensor(&b, "w", 2, ne2, BP_KIND_Q4_0, UINT64_MAX - 31, 36);
    EXPECT("offset near 2^64 (aligned)", &b, BP_E_FORMAT, "tensor 'w'");
    one_tensor(&b, "w", 2, ne2, BP_KIND_Q4_0, 8, 64);
    EXPECT("misaligned offset", &b, BP_E_FORMAT, "tensor 'w'", "not a multiple of the alignment 32");

    uint64_t ne_ovf[4] = {1ull << 32, 1ull << 32, 2, 1};
    one_tensor(&b, "big", 4, ne_ovf, BP_KIND_F32, 0, 0);
    EXPECT("dimension product overflows", &b, BP_E_FORMAT, "tensor 'big'", "overflows");
    uint64_t ne_ovf2[2] = {1ull << 62, 3};
    one_tensor(&b, "big", 2, ne_ovf2, BP_KIND_F32, 0, 0);
    EXPECT("dimension product overflows (2 dims)", &b, BP_E_FORMAT, "tensor 'big'", "overflows");
    uint64_t ne_bytes[1] = {1ull << 62}; /* elements fit int64, bytes of F32 do not */
    one_tensor(&b, "big", 1, ne_bytes, BP_KIND_F32, 0, 0);
    EXPECT("byte size overflows", &b, BP_E_FORMAT, "tensor 'big'");
    uint64_t ne_neg[2] = {32, 1ull << 63};
    one_tensor(&b, "neg", 2, ne_neg, BP_KIND_F32, 0, 0);
    EXPECT("negative dimension", &b, BP_E_FORMAT, "tensor 'neg'", "negative");
    uint64_t ne5[5] = {1, 1, 1, 1, 1};
    one_tensor(&b, "five", 5, ne5, BP_KIND_F32, 0, 4);
    EXPECT("5 dimensions", &b, BP_E_FORMAT, "tensor 'five'", "5 dimensions");
    uint64_t ne_blk[2] = {33, 1};
    one_tensor(&b, "odd", 2, ne_blk, BP_KIND_Q4_0, 0, 64);
    EXPECT("row not whole blocks", &b, BP_E_FORMAT, "tensor 'odd'", "Q4_0");
    const uint32_t unknown[] = {4, 5, 31, 43, 99, 0xFFFFFFFFu};
    for (int i = 0; i < 6; i++) {
        uint64_t ne1[1] = {32};
        one_tensor(&b, "mystery", 1, ne1, unknown[i], 0, 128);
        char want[64];
        snprintf(want, sizeof want, "unknown kind id %u", unknown[i]);
        EXPECT("unknown kind", &b, BP_E_KIND, "tensor 'mystery'", want, "offset 51");
    }

    /* Duplicate tensor names, with distinct valid data. */
    b_header(&b, 2, 0);
    uint64_t ne1[1] = {8};
    b_tensor(&b, "same", 1, ne1, BP_KIND_F32, 0);
    b_tensor(&b, "same", 1, ne1, BP_KIND_F32, 32);
    b_pad(&b, 32);
    b_zeros(&b, 64);
    EXPECT("duplicate tensor name", &b, BP_E_FORMAT, "duplicate tensor name 'same'", "offset 24");

    /* Tensor name past EOF, and an n_dims cut short. */
    b_header(&b, 1, 0);
    b_u64(&b, 1ull << 40);
    b_zeros(&b, 32);
    EXPECT("tensor name past EOF", &b, BP_E_FORMAT, "offset 24", "name of tensor 0");
    b_header(&b, 1, 0);
    b_str(&b, "wwwwwwwwwwww");
    b_u32(&b, 2);
    b_u64(&b, 32);
    EXPECT("dims cut short", &b, BP_E_FORMAT, "offset 56", "tensor dimension");

    /* Zero-sized tensor at the very end of the file is fine; the data section may be empty. */
    uint64_t ne0[1] = {0};
    one_tensor(&b, "empty", 1, ne0, BP_KIND_F32, 0, 0);
    EXPECT("zero-element tensor", &b, BP_OK, "");
}

static void io_cases(void) {
    bp_gguf *f = NULL;
    CHECK(bp_gguf_open("tests/gguf/does-not-exist.gguf", &f) == BP_E_IO && !f, "missing file");
    CHECK(strstr(bp_last_error(), "does-not-exist.gguf") != NULL, "names the path: %s", bp_last_error());
    CHECK(bp_gguf_open("tests/gguf", &f) == BP_E_IO && !f, "directory");
    CHECK(bp_gguf_open_memory(NULL, 0, &f) == BP_E_FORMAT && !f, "NULL, 0");
    CHECK(bp_gguf_open_memory(NULL, 5, &f) == BP_E_INVAL && !f, "NULL, 5");
    CHECK(bp_gguf_open(NULL, &f) == BP_E_INVAL, "NULL path");
}

int main(void) {
    header_cases();
    counts_and_lengths();
    alignment_cases();
    tensor_cases();
    io_cases();
    truncation("tests/gguf/meta_all.gguf");
    truncation("tests/fuzz/corpus/tiny_q4_0.gguf");
    return bp_test_finish();
}
