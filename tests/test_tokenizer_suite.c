/* llama.cpp's own tokenizer test suite: every ggml-vocab-<name>.gguf that llama.cpp ships with
 * an .inp/.out pair (tests/tokenizer/llama-suite/, read as its tests/test-tokenizer-0.cpp reads
 * them: strings split at "\n__ggml_vocab_test__\n", one line of space-separated ids per string,
 * add_special and parse_special off), each string's ids compared exactly. Prints, per
 * vocabulary, the cases that passed; any mismatch fails, naming the string and both id lists.
 *
 * The vocabularies come from scripts/fetch-vocab.sh (run by scripts/install-deps.sh); a missing
 * one FAILS this test and says how to fetch it: CI must not pass without them. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The 15 vocabularies of the suite, as llama.cpp names the files, and gpt-4o: llama.cpp's qwen2
 * vocabulary with tokenizer.ggml.pre = "gpt-4o" (tests/tokenizer/derive_vocab.py), its pair made
 * by llama.cpp (tests/tokenizer/gen_suite_gpt4o.py). */
static const char *const vocabs[] = {
    "bert-bge",  "command-r", "deepseek-coder", "deepseek-llm", "falcon",
    "gemma-4",   "gpt-2",     "llama-bpe",      "llama-spm",    "mpt",
    "phi-3",     "qwen2",     "qwen35",         "refact",       "starcoder",
    "gpt-4o",
};

static const char sep[] = "\n__ggml_vocab_test__\n";

/* Next test string of inp[*pos..len): test-tokenizer-0's rule (nothing after the last
 * separator is a string). false at the end. */
static bool next_input(const char *inp, size_t len, size_t *pos, const char **s, size_t *n) {
    if (*pos >= len) return false;
    const char *start = inp + *pos, *hit = NULL;
    size_t m = sizeof sep - 1;
    for (const char *p = start; p + m <= inp + len; p++)
        if (*p == sep[0] && memcmp(p, sep, m) == 0) {
            hit = p;
            break;
        }
    *s = start;
    *n = hit ? (size_t)(hit - start) : len - *pos;
    *pos = hit ? (size_t)(hit - inp) + m : len;
    return true;
}

/* Next line of out[*pos..len) parsed as ids (at most cap); false at the end. */
static bool next_ids(const char *out, size_t len, size_t *pos, bp_token *ids, size_t cap, size_t *n) {
    if (*pos >= len) return false;
    const char *p = out + *pos, *end = memchr(p, '\n', len - *pos);
    if (!end) end = out + len;
    *pos = (size_t)(end - out) + 1;
    *n = 0;
    while (p < end) {
        char *q;
        long v = strtol(p, &q, 10);
        if (q == p) {
            p++;
            continue;
        }
        if (*n < cap) ids[*n] = (bp_token)v;
        ++*n;
        p = q;
    }
    return true;
}

static void print_ids(const char *what, const bp_token *ids, size_t n) {
    fprintf(stderr, "    %s (%zu):", what, n);
    for (size_t i = 0; i < n && i < 48; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, n > 48 ? " ...\n" : "\n");
}

static void print_text(const char *s, size_t n) {
    fprintf(stderr, "    text (%zu bytes): \"", n);
    for (size_t i = 0; i < n && i < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stderr);
        else if (c == '\t') fputs("\\t", stderr);
        else if (c == '\r') fputs("\\r", stderr);
        else if (c < 0x20) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    fputs(n > 160 ? "...\"\n" : "\"\n", stderr);
}

/* Random byte strings drawn from pieces that stress the rules: encode OK, ids in range, decode OK. */
static void hostile(const char *name, const bp_tokenizer *t) {
    static const char *const parts[] = {"\xff", "\xc3", "\xa9", "\xe2\x96", "\xf0\x9f\x98", "\x00", "\x01",
                                        " ", "\n", "\r\n", "\t", "\xe3\x80\x80", "\xc2\x85", "a", "Z", "9",
                                        "'s", "##", "\xe4\xb8\xad", "\xcc\x81", "<0x41>", "[UNK]", "!!", "\xe2\x96\x81"};
    static const size_t lens[] = {1, 1, 1, 2, 3, 1, 1, 1, 1, 2, 1, 3, 2, 1, 1, 1, 2, 2, 3, 2, 6, 5, 2, 3};
    uint64_t rng = 33;
    int bad = 0;
    for (int k = 0; k < 200; k++) {
        char text[512];
        size_t n = 0, parts_n = 1 + bp_test_rand(&rng) % 40;
        for (size_t p = 0; p < parts_n; p++) {
            size_t which = bp_test_rand(&rng) % (sizeof lens / sizeof *lens);
            memcpy(text + n, parts[which], lens[which]);
            n += lens[which];
        }
        bp_token *ids = NULL;
        size_t n_ids = 0, dec = 0;
        bp_status rc = bp_tokenizer_encode_alloc(t, text, n, k & 1, k & 2, &ids, &n_ids);
        bool ok = rc == BP_OK;
        for (size_t i = 0; ok && i < n_ids; i++) ok = ids[i] >= 0 && ids[i] < bp_tokenizer_vocab_size(t);
        if (ok) {
            bp_tokenizer_decode(t, ids, n_ids, BP_DECODE_SPECIAL, NULL, 0, &dec); /* the size */
            char *buf = malloc(dec + 1);
            size_t got = 0;
            ok = buf && bp_tokenizer_decode(t, ids, n_ids, BP_DECODE_SPECIAL, buf, dec + 1, &got) == BP_OK && got == dec;
            free(buf);
        }
        bad += !ok;
        bp_tokens_free(ids);
    }
    CHECK(bad == 0, "%s: %d of 200 hostile strings failed to encode/decode: %s", name, bad, bp_last_error());
}

/* Returns the cases that passed; *total the cases read. */
static int run_vocab(const char *name, int *total) {
    *total = 0;
    char path[1024], inp_path[256], out_path[256];
    const char *dir = getenv("BACKPLANE_VOCAB_DIR");
    const char *home = getenv("HOME") ? getenv("HOME") : "/root";
    if (dir) snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, name);
    else snprintf(path, sizeof path, "%s/.cache/backplane/vocab/ggml-vocab-%s.gguf", home, name);
    snprintf(inp_path, sizeof inp_path, "tests/tokenizer/llama-suite/ggml-vocab-%s.gguf.inp", name);
    snprintf(out_path, sizeof out_path, "tests/tokenizer/llama-suite/ggml-vocab-%s.gguf.out", name);
    size_t inp_len = 0, out_len = 0;
    char *inp = bp_test_read_file(inp_path, &inp_len), *out = bp_test_read_file(out_path, &out_len);
    FILE *probe = fopen(path, "rb");
    CHECK(probe != NULL, "%s: vocabulary %s is missing. Fetch it: bash scripts/fetch-vocab.sh "
          "(llama-cpp-python 0.3.36 sdist from PyPI), or run scripts/install-deps.sh; "
          "BACKPLANE_VOCAB_DIR overrides the folder", name, path);
    if (probe) fclose(probe);
    bp_gguf *f = NULL;
    bp_tokenizer *t = NULL;
    if (probe && inp && out) {
        CHECK_OK(bp_gguf_open(path, &f));
        if (f) {
            bp_status rc = bp_tokenizer_create(f, &t);
            CHECK(rc == BP_OK, "%s: bp_tokenizer_create -> %s: %s", name, bp_status_name(rc), bp_last_error());
        }
        bp_gguf_close(f);
    }
    int passed = 0;
    size_t ip = 0, op = 0, n_want;
    const char *s;
    size_t n;
    bp_token want[1024];
    while (t && next_input(inp, inp_len, &ip, &s, &n)) {
        ++*total;
        if (!next_ids(out, out_len, &op, want, 1024, &n_want)) {
            CHECK(false, "%s: %s has fewer lines than %s has strings", name, out_path, inp_path);
            break;
        }
        bp_token *got = NULL;
        size_t n_got = 0;
        bp_status rc = bp_tokenizer_encode_alloc(t, s, n, false, false, &got, &n_got);
        bool same = rc == BP_OK && n_got == n_want && n_want <= 1024 &&
                    (n_got == 0 || memcmp(got, want, n_got * sizeof *got) == 0);
        CHECK(same, "%s: case %d differs from llama.cpp's ids (encode: %s)", name, *total, bp_status_name(rc));
        if (same) {
            passed++;
        } else {
            print_text(s, n);
            print_ids("llama.cpp", want, n_want < 1024 ? n_want : 1024);
            print_ids("ours     ", got, n_got);
        }
        bp_tokens_free(got);
    }
    if (t) {
        hostile(name, t);
        size_t extra = op < out_len ? 1 : 0;
        CHECK(extra == 0, "%s: %s has more lines than %s has strings", name, out_path, inp_path);
    }
    bp_tokenizer_free(t);
    free(inp);
    free(out);
    return passed;
}

int main(void) {
    int all_passed = 0, all_total = 0, vocabs_ok = 0;
    size_t nv = sizeof vocabs / sizeof *vocabs;
    printf("| vocabulary | cases passed |\n|---|---:|\n");
    for (size_t i = 0; i < nv; i++) {
        int total, passed = run_vocab(vocabs[i], &total);
        CHECK(total > 0, "%s: no cases ran", vocabs[i]);
        printf("| %s | %d/%d |\n", vocabs[i], passed, total);
        all_passed += passed;
        all_total += total;
        vocabs_ok += total > 0 && passed == total;
    }
    printf("llama.cpp tokenizer suite: %d/%zu vocabularies pass every case, %d/%d cases\n", vocabs_ok, nv,
           all_passed, all_total);
    return bp_test_finish();
}
