/* The CLI's JSON string writer (tools/backplane/cli_text.c, compiled in here) on any bytes
 * (issue 36): 3000 random byte strings, biased towards what breaks writers (NUL, control
 * characters, UTF-8 lead bytes without their continuations, overlong forms, surrogates, code
 * points above U+10FFFF, whole valid sequences) go through bp_cli_json_bytes and
 * bp_cli_json_hex into one JSON line each; Python's json.loads must accept every line, the
 * string must equal the bytes decoded with errors="replace" (the stated policy: one U+FFFD per
 * maximal ill-formed subpart), and the hex must give the bytes back. Before, the writer stopped
 * at the first NUL and passed bytes >= 0x80 through unchecked. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/backplane/cli_text.c"
#include "harness.h"

static void random_bytes(uint64_t *rng, unsigned char *b, size_t n) {
    static const unsigned char pieces[][4] = {
        {0x00}, {0x01}, {0x1f}, {0x7f}, {'"'}, {'\\'}, {'\n'}, {0x80}, {0xbf}, {0xc0}, {0xc1}, {0xc2},
        {0xe0}, {0xe0, 0x80}, {0xe0, 0xa0}, {0xed, 0xa0, 0x80}, {0xed, 0x9f, 0xbf}, {0xef, 0xbf, 0xbf},
        {0xf0, 0x8f}, {0xf0, 0x90, 0x80}, {0xf0, 0x9f, 0x99, 0x82}, {0xf4, 0x8f, 0xbf, 0xbf},
        {0xf4, 0x90, 0x80, 0x80}, {0xf5}, {0xff}, {0xc3, 0xa9}, {'a'}};
    const size_t np = sizeof pieces / sizeof pieces[0];
    for (size_t i = 0; i < n;) {
        uint64_t r = bp_test_rand(rng);
        if (r % 3 == 0) {
            b[i++] = (unsigned char)(r >> 8);
            continue;
        }
        const unsigned char *p = pieces[(r >> 8) % np];
        size_t len = p[0] == 0 ? 1 : p[1] == 0 ? 1 : p[2] == 0 ? 2 : p[3] == 0 ? 3 : 4;
        for (size_t k = 0; k < len && i < n; k++) b[i++] = p[k];
    }
}

int main(void) {
    char path[] = "/tmp/bp_cli_json_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        BP_SKIP("cannot make a temporary file");
        return bp_test_finish();
    }
    uint64_t rng = 0x15036;
    unsigned char b[96];
    int cases = bp_test_quick() ? 300 : 3000, valid = 0;
    for (int c = 0; c < cases; c++) {
        size_t n = (size_t)(bp_test_rand(&rng) % sizeof b);
        random_bytes(&rng, b, n);
        valid += bp_cli_utf8_valid((const char *)b, n);
        fputs("{\"s\": ", f);
        bp_cli_json_bytes(f, (const char *)b, n);
        fputs(", \"hex\": ", f);
        bp_cli_json_hex(f, (const char *)b, n);
        fprintf(f, ", \"utf8\": %s}\n", bp_cli_utf8_valid((const char *)b, n) ? "true" : "false");
    }
    fputs("{\"s\": ", f);
    bp_cli_json_str(f, NULL); /* NULL is null */
    fputs(", \"hex\": \"\", \"utf8\": true}\n", f);
    CHECK(fclose(f) == 0, "writing %s", path);
    /* fixed seed: 4 of the 300 quick cases are valid UTF-8, about 40 of the 3000 */
    CHECK(valid >= 3 && cases - valid >= 3, "the mix is not mixed: %d of %d valid", valid, cases);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c '\n"
             "import json, sys\n"
             "bad = 0\n"
             "lines = open(sys.argv[1], \"rb\").read().decode(\"utf-8\").splitlines()\n"
             "for i, line in enumerate(lines):\n"
             "    d = json.loads(line)\n"
             "    b = bytes.fromhex(d[\"hex\"])\n"
             "    want = None if i == len(lines) - 1 else b.decode(\"utf-8\", \"replace\")\n"
             "    ok = d[\"s\"] == want\n"
             "    try: b.decode(\"utf-8\"); u = True\n"
             "    except UnicodeDecodeError: u = False\n"
             "    if not ok or u != d[\"utf8\"]:\n"
             "        bad += 1; print(\"line\", i, repr(b), repr(d[\"s\"]), repr(want), u, d[\"utf8\"])\n"
             "sys.exit(1 if bad else 0)' %s",
             path);
    int rc = system(cmd);
    CHECK(rc == 0, "json.loads / errors=\"replace\" disagreed with the writer (rc %d; lines above)", rc);
    unlink(path);
    return bp_test_finish();
}
