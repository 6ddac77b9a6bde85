/* libFuzzer target over the CLI's JSON writers (tools/backplane/cli_text.c, compiled in here;
 * issue 36): any bytes in; the output must be one JSON string literal in well-formed UTF-8 (a
 * small checker of RFC 8259's string grammar below; tests/test_cli_json.c holds the same writer
 * to Python's json.loads and errors="replace" in every ctest run), and the hex writer must give
 * the bytes back.
 *
 * Build: cmake -S . -B build-fuzz -DBP_FUZZ=ON -DCMAKE_C_COMPILER=clang ...; target fuzz_json. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/backplane/cli_text.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* s[0..n) is exactly one JSON string: quotes, no raw control character, valid escapes. */
static int json_string_ok(const unsigned char *s, size_t n) {
    if (n < 2 || s[0] != '"' || s[n - 1] != '"') return 0;
    for (size_t i = 1; i < n - 1; i++) {
        if (s[i] < 0x20 || s[i] == '"') return 0;
        if (s[i] != '\\') continue;
        if (++i >= n - 1) return 0;
        if (strchr("\"\\/bfnrt", s[i])) continue;
        if (s[i] != 'u' || i + 4 >= n - 1) return 0;
        for (int k = 1; k <= 4; k++)
            if (!strchr("0123456789abcdefABCDEF", s[i + k])) return 0;
        i += 4;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *out = NULL, *hex = NULL;
    size_t n = 0, hn = 0;
    FILE *f = open_memstream(&out, &n), *h = open_memstream(&hex, &hn);
    if (!f || !h) abort();
    bp_cli_json_bytes(f, (const char *)data, size);
    bp_cli_json_hex(h, (const char *)data, size);
    fclose(f);
    fclose(h);
    if (!bp_cli_utf8_valid(out, n) || !json_string_ok((const unsigned char *)out, n)) abort();
    if (hn != 2 * size + 2) abort();
    for (size_t i = 0; i < size; i++) {
        unsigned v;
        if (sscanf(hex + 1 + 2 * i, "%2x", &v) != 1 || v != data[i]) abort();
    }
    free(out);
    free(hex);
    return 0;
}
