/* Our pre-tokenizer's word splits against llama.cpp's, exactly, where token ids cannot show
 * them (a vocabulary without a merge across a split gives the same ids either way): every
 * record of tests/tokenizer/splits-<pre>.txt is a string and the code-point end of each word
 * llama.cpp's unicode_regex_split cut it into (made by tests/tokenizer/gen_suite_gpt4o.py). Also
 * the name table: the four names llama.cpp maps to its GPT4O pre-type, with its flags. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "text/tokenizer_internal.h"
#include "text/unicode.h"

/* ignore_merges and add_bos are false for all four in llama-vocab.cpp (0c1e570), which sets
 * only clean_spaces = false for them (our decoder never cleans spaces). */
static void names(void) {
    static const char *const gpt4o[] = {"gpt-4o", "llama4", "kanana2", "talkie"};
    for (size_t i = 0; i < sizeof gpt4o / sizeof *gpt4o; i++) {
        bp_pretok_kind kind = BP_PRETOK_NONE;
        bool ign = true, bos = true;
        CHECK(bp_pretok_lookup(gpt4o[i], &kind, &ign, &bos), "%s: not a known pre-tokenizer", gpt4o[i]);
        CHECK(kind == BP_PRETOK_GPT4O && !ign && !bos, "%s: kind %d ignore_merges %d add_bos %d", gpt4o[i],
              (int)kind, ign, bos);
    }
}

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

/* Returns the records that matched; *total the records read. */
static int run_file(const char *path, bp_pretok_kind kind, int *total) {
    size_t len = 0;
    char *data = bp_test_read_file(path, &len);
    CHECK(data != NULL, "%s: cannot read", path);
    int passed = 0;
    *total = 0;
    for (char *line = data; data && line < data + len;) {
        char *eol = memchr(line, '\n', (size_t)(data + len - line));
        if (!eol) eol = data + len;
        *eol = 0;
        char *sp = strchr(line, ' ');
        if (line[0] != '#' && sp) {
            ++*total;
            size_t nb = (size_t)(sp - line) / 2, n = 0;
            uint8_t *bytes = malloc(nb + 1);
            uint32_t *cpts = malloc((nb + 1) * sizeof *cpts), *ends = malloc((nb + 1) * sizeof *ends);
            uint32_t *scratch = malloc((nb + 1) * sizeof *scratch), *want = malloc((nb + 1) * sizeof *want);
            uint16_t *flags = malloc((nb + 1) * sizeof *flags);
            for (size_t i = 0; i < nb; i++) bytes[i] = (uint8_t)(hexval(line[2 * i]) << 4 | hexval(line[2 * i + 1]));
            for (size_t pos = 0; pos < nb; n++) {
                cpts[n] = bp_utf8_decode(bytes, nb, &pos);
                flags[n] = (uint16_t)bp_unicode_flags(cpts[n]);
            }
            size_t n_want = 0;
            for (char *p = sp + 1; *p && n_want <= nb;) {
                char *q;
                want[n_want++] = (uint32_t)strtoul(p, &q, 10);
                p = *q == ',' ? q + 1 : q + (*q != 0);
            }
            size_t got = bp_pretok_split(kind, cpts, flags, n, ends, scratch);
            bool same = got == n_want && memcmp(ends, want, got * sizeof *ends) == 0;
            CHECK(same, "%s: record %d (%.*s): %zu words, llama.cpp %zu", path, *total, (int)(sp - line), line,
                  got, n_want);
            if (!same) {
                fprintf(stderr, "    llama.cpp ends %s\n    ours          ", sp + 1);
                for (size_t i = 0; i < got; i++) fprintf(stderr, i ? ",%u" : "%u", (unsigned)ends[i]);
                fprintf(stderr, "\n");
            }
            passed += same;
            free(bytes), free(cpts), free(ends), free(scratch), free(want), free(flags);
        }
        line = eol + 1;
    }
    free(data);
    return passed;
}

int main(void) {
    names();
    int total, passed = run_file("tests/tokenizer/splits-gpt-4o.txt", BP_PRETOK_GPT4O, &total);
    CHECK(total > 0, "no records");
    printf("gpt-4o splits equal to llama.cpp's: %d/%d\n", passed, total);
    return bp_test_finish();
}
