/* libFuzzer target over the tokenizers: the input is text, encoded with every vocabulary found
 * in $BACKPLANE_VOCAB_DIR (default ~/.cache/backplane/vocab: scripts/fetch-vocab.sh) with
 * parse_special on and off, then decoded. ASan/UBSan catch bad reads; the target aborts when
 * decode(encode(s)) != s where the tokenizer is lossless for s (strict UTF-8 for byte-level
 * BPE; SPM unless the text holds U+2581 or an invalid lead byte swallows part of a space's
 * U+2581), or when an id is out of range. A second mode: an input starting with "GGUF" is
 * opened as a file and, if it opens, a tokenizer is built from it and used, so hostile
 * metadata is fuzzed too.
 *
 * Build: cmake -S . -B build-fuzz -DBP_FUZZ=ON -DCMAKE_C_COMPILER=clang ...
 * Run:   build-fuzz/fuzz_tokenizer -max_total_time=300 corpus-dir
 * (seed the corpus with tests/tokenizer/strings.py's strings; 300 s, ~48k inputs x 5
 * vocabularies, found nothing on the day after the U+2581 rule above was added). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane.h"
#include "../tokenizer/lossless.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bp_tokenizer *toks[8];
static int n_toks = -1;

static void load(void) {
    static const char *const names[] = {"llama-spm", "llama-bpe", "qwen2", "gpt-2", "gpt-neox"};
    const char *dir = getenv("BACKPLANE_VOCAB_DIR");
    char path[1024];
    n_toks = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (dir) snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, names[i]);
        else snprintf(path, sizeof path, "%s/.cache/backplane/vocab/ggml-vocab-%s.gguf", getenv("HOME"), names[i]);
        bp_gguf *f = NULL;
        if (bp_gguf_open(path, &f) == BP_OK && bp_tokenizer_create(f, &toks[n_toks]) == BP_OK) n_toks++;
        bp_gguf_close(f);
    }
    if (!n_toks) {
        fprintf(stderr, "fuzz_tokenizer: no vocabulary found; run scripts/fetch-vocab.sh\n");
        abort();
    }
}

/* Encode both ways; the round trip is checked on the pass without add_special and with
 * parse_special, where every control-token text is a matched special (without it, SPM merges
 * can form a control token out of plain text, after which decode cannot know whether encode
 * put a space prefix there). */
static void exercise(bp_tokenizer *t, const uint8_t *data, size_t size, bool check) {
    for (int parse = 0; parse < 2; parse++) {
        bp_token *ids = NULL;
        size_t n = 0, len = 0, got = 0;
        if (bp_tokenizer_encode_alloc(t, (const char *)data, size, !parse, parse, &ids, &n) != BP_OK) continue;
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= bp_tokenizer_vocab_size(t)) abort();
        bp_tokenizer_decode(t, ids, n, BP_DECODE_SPECIAL, NULL, 0, &len);
        char *out = malloc(len + 1);
        bool lossless = bp_tokenizer_get_type(t) == BP_TOKENIZER_SPM ? spm_lossless(data, size) : valid_utf8(data, size);
        if (out && bp_tokenizer_decode(t, ids, n, BP_DECODE_SPECIAL, out, len + 1, &got) == BP_OK && check && parse &&
            lossless && (got != size || memcmp(out, data, size) != 0))
            abort();
        free(out);
        bp_tokens_free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (n_toks < 0) load();
    if (size >= 4 && !memcmp(data, "GGUF", 4)) {
        bp_gguf *f = NULL;
        bp_tokenizer *t = NULL;
        if (bp_gguf_open_memory(data, size, &f) == BP_OK && bp_tokenizer_create(f, &t) == BP_OK) {
            bp_gguf_close(f);
            f = NULL;
            exercise(t, (const uint8_t *)"Hello <s> world\n\n 123", 22, false);
        }
        bp_tokenizer_free(t);
        bp_gguf_close(f);
        return 0;
    }
    for (int i = 0; i < n_toks; i++) exercise(toks[i], data, size, true);
    return 0;
}
