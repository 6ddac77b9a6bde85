/* backplane info FILE.gguf [--json]: metadata keys and values (long arrays and strings
 * summarized), tensors with name, kind, shape and bytes, and totals per kind. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"

/* Arrays longer than this print their first elements and a count: a 150k-entry vocabulary
 * would otherwise bury everything else. */
enum { SHOW_ELEMS = 8, SHOW_CHARS = 120 };

/* A string as a quoted literal, truncated to SHOW_CHARS bytes; control bytes and quotes are
 * escaped so a hostile key cannot forge output lines (or break the JSON). */
static void put_str(const char *s, size_t n, int json) {
    size_t shown = n > SHOW_CHARS ? SHOW_CHARS : n;
    putchar('"');
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20 || c == 0x7f) printf(json ? "\\u%04x" : "\\x%02x", c);
        else if (c < 0x80) putchar(c);
        else {
            /* Pass a whole valid UTF-8 sequence through; a stray byte (or a sequence cut by the
             * truncation) is escaped, so --json output is always valid UTF-8. */
            size_t len = bp_cli_utf8_seq((const unsigned char *)s + i, shown - i); /* RFC 3629 */
            if (len) {
                fwrite(s + i, 1, len, stdout);
                i += len - 1;
            } else {
                printf(json ? "\\ufffd" : "\\x%02x", c);
            }
        }
    }
    putchar('"');
}

/* JSON cannot carry a truncation note inside a string: a truncated string value gets a
 * "truncated" field beside it instead. */
static void put_str_json(const char *s, size_t n) {
    size_t shown = n > SHOW_CHARS ? SHOW_CHARS : n;
    put_str(s, shown, 1);
}

/* Shortest decimal that reads back as the same value (as float when is_f32): 1.5, not
 * 1.50000000000000000; -2.25e+100, not -2.2500000000000002e+100. */
static void put_number(double d, int is_f32, int json) {
    if (!isfinite(d)) {
        printf(json ? "null" : "%g", d);
        return;
    }
    char buf[40];
    for (int prec = is_f32 ? 6 : 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        double back = strtod(buf, NULL);
        if (is_f32 ? (float)back == (float)d : back == d) break;
    }
    printf("%s", buf);
}

/* A name as is when it is plain printable text, quoted and escaped otherwise. */
static void put_name(const char *s, int width) {
    int plain = *s != 0;
    for (const char *p = s; *p; p++) plain &= (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f && *p != '"' && *p != '|';
    if (plain) printf("%-*s", width, s);
    else put_str(s, strlen(s), 0);
}

static void put_value(const bp_gguf_value *v, int json, int depth) {
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    const char *s;
    size_t n;
    switch (v->type) {
    case BP_GGUF_BOOL:
        bp_gguf_value_bool(v, &b);
        printf(b ? "true" : "false");
        return;
    case BP_GGUF_F32:
        bp_gguf_value_f64(v, &d);
        put_number(d, 1, json);
        return;
    case BP_GGUF_F64:
        bp_gguf_value_f64(v, &d);
        put_number(d, 0, json);
        return;
    case BP_GGUF_STRING:
        bp_gguf_value_str(v, &s, &n);
        if (json) put_str_json(s, n);
        else {
            put_str(s, n, 0);
            if (n > SHOW_CHARS) printf("... (%zu bytes)", n);
        }
        return;
    case BP_GGUF_ARRAY: {
        putchar('[');
        bp_gguf_value e, prev;
        uint64_t k = 0;
        for (bp_status st = bp_gguf_array_next(v, NULL, &e); st == BP_OK && k < SHOW_ELEMS;
             st = bp_gguf_array_next(v, &prev, &e), k++) {
            if (k) printf(", ");
            put_value(&e, json, depth + 1);
            prev = e;
        }
        if (!json && v->len > SHOW_ELEMS) printf(", ... %llu more", (unsigned long long)(v->len - SHOW_ELEMS));
        putchar(']');
        return;
    }
    default:
        if (bp_gguf_value_u64(v, &u) == BP_OK) printf("%llu", (unsigned long long)u);
        else if (bp_gguf_value_i64(v, &i) == BP_OK) printf("%lld", (long long)i);
        else printf(json ? "null" : "?");
        return;
    }
}

static void put_type(const bp_gguf_value *v) {
    if (v->type == BP_GGUF_ARRAY)
        printf("%s[%llu]", bp_gguf_type_name(v->elem_type), (unsigned long long)v->len);
    else
        printf("%s", bp_gguf_type_name(v->type));
}

typedef struct kind_total {
    int64_t tensors, elems;
    uint64_t bytes;
} kind_total;

static void shape_str(const bp_gguf_tensor *t, char *buf, size_t cap) {
    size_t used = 0;
    used += (size_t)snprintf(buf + used, cap - used, "[");
    for (uint32_t d = 0; d < t->n_dims && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

int bp_cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") || argv[i][0] == '-' || path) {
            int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            fprintf(help ? stdout : stderr,
                    "usage: backplane info FILE.gguf [--json]\n"
                    "  metadata keys and values (long arrays summarized), tensors (name, kind, shape,\n"
                    "  bytes, offset) and totals per kind\n");
            return help ? 0 : 2;
        } else path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "usage: backplane info FILE.gguf [--json]\n");
        return 2;
    }
    bp_gguf *f = NULL;
    bp_status s = bp_gguf_open(path, &f);
    if (s) return bp_cli_error("info", s);

    int nk = bp_kind_table_size();
    kind_total totals[64] = {{0}};
    uint64_t all_bytes = 0;
    int64_t all_elems = 0;
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        kind_total *k = &totals[(unsigned)t->kind % 64];
        k->tensors++;
        k->elems += t->n_elems;
        k->bytes += t->bytes;
        all_bytes += t->bytes;
        all_elems += t->n_elems;
    }

    if (json) {
        printf("{\n  \"file\": ");
        put_str_json(path, strlen(path));
        printf(",\n  \"version\": %u,\n  \"size\": %llu,\n  \"alignment\": %u,\n  \"data_offset\": %llu,\n",
               bp_gguf_version(f), (unsigned long long)bp_gguf_file_size(f), bp_gguf_alignment(f),
               (unsigned long long)bp_gguf_data_offset(f));
        printf("  \"metadata\": [");
        for (int64_t i = 0; i < bp_gguf_kv_count(f); i++) {
            bp_gguf_value v;
            bp_gguf_kv_value(f, i, &v);
            const char *key = bp_gguf_kv_key(f, i);
            printf("%s\n    {\"key\": ", i ? "," : "");
            put_str_json(key, strlen(key));
            printf(", \"type\": \"%s\"", bp_gguf_type_name(v.type));
            if (v.type == BP_GGUF_ARRAY)
                printf(", \"elem_type\": \"%s\", \"count\": %llu, \"truncated\": %s", bp_gguf_type_name(v.elem_type),
                       (unsigned long long)v.len, v.len > SHOW_ELEMS ? "true" : "false");
            if (v.type == BP_GGUF_STRING)
                printf(", \"bytes\": %llu, \"truncated\": %s", (unsigned long long)v.len,
                       v.len > SHOW_CHARS ? "true" : "false");
            printf(", \"value\": ");
            put_value(&v, 1, 0);
            printf("}");
        }
        printf("\n  ],\n  \"tensors\": [");
        for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
            const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
            char shape[128];
            shape_str(t, shape, sizeof shape);
            printf("%s\n    {\"name\": ", i ? "," : "");
            put_str_json(t->name, strlen(t->name));
            printf(", \"kind\": \"%s\", \"shape\": %s, \"elements\": %lld, \"bytes\": %zu, \"offset\": %llu}",
                   t->kind_info->name, shape, (long long)t->n_elems, t->bytes, (unsigned long long)t->offset);
        }
        printf("\n  ],\n  \"totals\": [");
        int first = 1;
        for (int i = 0; i < nk; i++) {
            const bp_kind_info *k = bp_kind_at(i);
            const kind_total *kt = &totals[k->gguf_id % 64];
            if (!kt->tensors) continue;
            printf("%s\n    {\"kind\": \"%s\", \"tensors\": %lld, \"elements\": %lld, \"bytes\": %llu}",
                   first ? "" : ",", k->name, (long long)kt->tensors, (long long)kt->elems,
                   (unsigned long long)kt->bytes);
            first = 0;
        }
        printf("\n  ],\n  \"tensor_count\": %lld,\n  \"tensor_bytes\": %llu\n}\n", (long long)bp_gguf_tensor_count(f),
               (unsigned long long)all_bytes);
        bp_gguf_close(f);
        return 0;
    }

    printf("%s: GGUF v%u, %llu bytes, alignment %u, tensor data at offset %llu\n\n", path, bp_gguf_version(f),
           (unsigned long long)bp_gguf_file_size(f), bp_gguf_alignment(f), (unsigned long long)bp_gguf_data_offset(f));
    printf("metadata (%lld keys):\n", (long long)bp_gguf_kv_count(f));
    for (int64_t i = 0; i < bp_gguf_kv_count(f); i++) {
        bp_gguf_value v;
        bp_gguf_kv_value(f, i, &v);
        printf("  ");
        const char *key = bp_gguf_kv_key(f, i);
        put_name(key, 40);
        printf(" ");
        put_type(&v);
        printf(" = ");
        put_value(&v, 0, 0);
        printf("\n");
    }
    printf("\ntensors (%lld):\n", (long long)bp_gguf_tensor_count(f));
    printf("| name | kind | shape | bytes | offset |\n|---|---|---|---:|---:|\n");
    for (int64_t i = 0; i < bp_gguf_tensor_count(f); i++) {
        const bp_gguf_tensor *t = bp_gguf_tensor_at(f, i);
        char shape[128];
        shape_str(t, shape, sizeof shape);
        printf("| ");
        put_name(t->name, 0);
        printf(" | %s | %s | %zu | %llu |\n", t->kind_info->name, shape, t->bytes, (unsigned long long)t->offset);
    }
    printf("\ntotals per kind:\n| kind | tensors | elements | bytes |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < nk; i++) {
        const bp_kind_info *k = bp_kind_at(i);
        const kind_total *kt = &totals[k->gguf_id % 64];
        if (kt->tensors)
            printf("| %s | %lld | %lld | %llu |\n", k->name, (long long)kt->tensors, (long long)kt->elems,
                   (unsigned long long)kt->bytes);
    }
    printf("| all | %lld | %lld | %llu |\n", (long long)bp_gguf_tensor_count(f), (long long)all_elems,
           (unsigned long long)all_bytes);
    bp_gguf_close(f);
    return 0;
}
