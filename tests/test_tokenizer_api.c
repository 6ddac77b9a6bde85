/* The tokenizer on small vocabularies written here, where every expected id is worked out by
 * hand from the algorithm's definition (comments show the steps): SPM score order and its
 * leftmost tie rule, byte fallback, the space prefix, special-token priority, BPE rank order;
 * decode flags; and the error paths: unsupported model / pre-tokenizer named with the list,
 * malformed keys, short buffers, out-of-range ids, and every allocation failing in turn. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/alloc.h"

typedef struct vocab {
    const char *model, *pre;
    const char **tokens;
    float *scores;
    int32_t *types;
    int n;
    const char **merges;
    int n_merges;
    int add_space_prefix; /* -1: key absent */
} vocab;

/* A GGUF in memory holding v; *buf must outlive the returned file. */
static bp_gguf *make(const vocab *v, void **buf) {
    bp_gguf_writer *w = NULL;
    size_t len = 0;
    bp_gguf *f = NULL;
    *buf = NULL;
    if (bp_gguf_writer_create(&w) != BP_OK) return NULL;
    if (v->model) bp_gguf_writer_add_string(w, "tokenizer.ggml.model", v->model, strlen(v->model));
    if (v->pre) bp_gguf_writer_add_string(w, "tokenizer.ggml.pre", v->pre, strlen(v->pre));
    if (v->tokens) bp_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", v->tokens, (uint64_t)v->n);
    if (v->scores) bp_gguf_writer_add_array(w, "tokenizer.ggml.scores", BP_GGUF_F32, v->scores, (uint64_t)v->n);
    if (v->types) bp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", BP_GGUF_I32, v->types, (uint64_t)v->n);
    if (v->merges)
        bp_gguf_writer_add_string_array(w, "tokenizer.ggml.merges", v->merges, (uint64_t)v->n_merges);
    if (v->add_space_prefix >= 0) {
        bool b = v->add_space_prefix;
        bp_gguf_writer_add_scalar(w, "tokenizer.ggml.add_space_prefix", BP_GGUF_BOOL, &b);
    }
    if (bp_gguf_writer_write_memory(w, buf, &len) == BP_OK) bp_gguf_open_memory(*buf, len, &f);
    bp_gguf_writer_free(w);
    return f;
}

/* ---- a small SentencePiece vocabulary ---------------------------------------------------- */
enum { S_UNK = 0, S_BOS = 1, S_EOS = 2, S_BYTE0 = 3, S_SPACE = 259, S_A, S_B, S_C, S_SA, S_AB, S_BC,
       S_ABC, S_CA, S_XY, S_YZW, S_N };

static char spm_text[S_N][8];
static const char *spm_tokens[S_N];
static float spm_scores[S_N];
static int32_t spm_types[S_N];

static void spm_vocab(vocab *v, int add_space_prefix) {
    static const struct { int id; const char *s; float score; int type; } rows[] = {
        {S_UNK, "<unk>", 0, 2}, {S_BOS, "<s>", 0, 3}, {S_EOS, "</s>", 0, 3},
        {S_SPACE, "\xe2\x96\x81", -1.0f, 1}, {S_A, "a", -2, 1}, {S_B, "b", -2, 1}, {S_C, "c", -2, 1},
        {S_SA, "\xe2\x96\x81" "a", -0.5f, 1}, {S_AB, "ab", -0.3f, 1}, {S_BC, "bc", -0.1f, 1},
        {S_ABC, "abc", -0.05f, 1}, {S_CA, "ca", -0.3f, 1}, {S_XY, "xy", 0, 4}, {S_YZW, "yzw", 0, 4},
    };
    for (int b = 0; b < 256; b++) {
        snprintf(spm_text[S_BYTE0 + b], 8, "<0x%02X>", b);
        spm_tokens[S_BYTE0 + b] = spm_text[S_BYTE0 + b];
        spm_scores[S_BYTE0 + b] = 0;
        spm_types[S_BYTE0 + b] = 6;
    }
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        spm_tokens[rows[i].id] = rows[i].s;
        spm_scores[rows[i].id] = rows[i].score;
        spm_types[rows[i].id] = rows[i].type;
    }
    *v = (vocab){"llama", "default", spm_tokens, spm_scores, spm_types, S_N, NULL, 0, add_space_prefix};
}

static void expect(bp_tokenizer *t, const char *text, bool add, bool parse, const bp_token *want,
                   size_t n_want, const char *why) {
    bp_token got[64];
    size_t n = 0;
    bp_status s = bp_tokenizer_encode(t, text, strlen(text), add, parse, got, 64, &n);
    bool same = s == BP_OK && n == n_want && (n == 0 || !memcmp(got, want, n * sizeof *got));
    CHECK(same, "encode(\"%s\", add=%d, parse=%d): %s (%zu tokens, first %d)", text, add, parse, why, n,
          n ? (int)got[0] : -1);
}

static void test_spm(void) {
    vocab v;
    void *buf;
    spm_vocab(&v, 0);
    bp_gguf *f = make(&v, &buf);
    bp_tokenizer *t = NULL;
    CHECK(f != NULL, "spm vocab: %s", bp_last_error());
    if (f) CHECK_OK(bp_tokenizer_create(f, &t));
    bp_gguf_close(f);
    free(buf);
    if (!t) return;
    CHECK(bp_tokenizer_special(t, BP_SPECIAL_BOS) == S_BOS && bp_tokenizer_special(t, BP_SPECIAL_EOS) == S_EOS &&
              bp_tokenizer_special(t, BP_SPECIAL_UNK) == S_UNK, "SPM default special ids 1/2/0");
    CHECK(bp_tokenizer_add_bos(t) && !bp_tokenizer_add_eos(t) && !bp_tokenizer_add_space_prefix(t),
          "SPM add_bos default on, add_space_prefix from the file (off)");
    CHECK(bp_tokenizer_is_eog(t, S_EOS) && !bp_tokenizer_is_eog(t, S_BOS), "EOS is an end of generation");
    /* a,b,c: pairs "ab" (-0.3), "bc" (-0.1); bc merges first, then "abc" (-0.05) beats "ab". */
    expect(t, "abc", false, true, (bp_token[]){S_ABC}, 1, "highest score first");
    /* c,a,b: "ca" and "ab" tie at -0.3: the leftmost pair merges, then "cab" is no token. */
    expect(t, "cab", false, true, (bp_token[]){S_CA, S_B}, 2, "ties merge leftmost");
    /* U+00E9 is one 2-byte symbol and no token: one <0xNN> per byte. */
    expect(t, "\xc3\xa9", false, true, (bp_token[]){S_BYTE0 + 0xC3, S_BYTE0 + 0xA9}, 2, "byte fallback");
    expect(t, "", true, true, (bp_token[]){S_BOS}, 1, "empty text with add_special is [BOS]");
    expect(t, "", false, true, NULL, 0, "empty text is []");
    /* "yzw" (3 bytes) is matched before "xy" (2) although "xy" starts first: llama.cpp order. */
    expect(t, "xyzw", false, false, (bp_token[]){S_BYTE0 + 'x', S_YZW}, 2, "longer special first");
    /* <s> is a control token: matched only with parse_special. */
    expect(t, "<s>a", false, true, (bp_token[]){S_BOS, S_A}, 2, "control token parsed");
    expect(t, "<s>a", false, false,
           (bp_token[]){S_BYTE0 + '<', S_BYTE0 + 's', S_BYTE0 + '>', S_A}, 4, "control text as text");

    bp_token small[1];
    size_t n = 99;
    CHECK(bp_tokenizer_encode(t, "cab", 3, false, true, small, 1, &n) == BP_E_INVAL && n == 2,
          "a short buffer is BP_E_INVAL with the size needed (%zu)", n);
    CHECK(bp_tokenizer_encode(t, "cab", 3, false, true, NULL, 0, &n) == BP_E_INVAL && n == 2,
          "cap 0 asks for the size");
    CHECK(bp_tokenizer_find(t, "abc", 3) == S_ABC && bp_tokenizer_find(t, "zz", 2) == BP_TOKEN_NULL, "find");
    bp_tokenizer_free(t);

    /* With add_space_prefix (the SPM default when the key is absent). */
    spm_vocab(&v, -1);
    f = make(&v, &buf);
    t = NULL;
    if (f) CHECK_OK(bp_tokenizer_create(f, &t));
    bp_gguf_close(f);
    free(buf);
    if (!t) return;
    CHECK(bp_tokenizer_add_space_prefix(t), "SPM add_space_prefix defaults on");
    /* " a" prefix: U+2581 a -> "▁a"; after the special <s> the next fragment gets one too. */
    expect(t, "a", true, true, (bp_token[]){S_BOS, S_SA}, 2, "space prefix and BOS");
    expect(t, "<s>a", false, true, (bp_token[]){S_BOS, S_SA}, 2, "space prefix after a special");
    char out[64];
    size_t len = 0;
    bp_token ids[] = {S_BOS, S_SA, S_BYTE0 + 0xC3, S_BYTE0 + 0xA9, S_EOS};
    CHECK_OK(bp_tokenizer_decode(t, ids, 5, 0, out, sizeof out, &len));
    CHECK(len == 3 && !memcmp(out, "a\xc3\xa9", 3), "decode skips control tokens, strips the prefix space");
    CHECK_OK(bp_tokenizer_decode(t, ids, 5, BP_DECODE_SPECIAL, out, sizeof out, &len));
    CHECK(len == 10 && !memcmp(out, "<s>a\xc3\xa9</s>", 10), "BP_DECODE_SPECIAL renders them");
    CHECK_OK(bp_tokenizer_decode(t, ids, 5, BP_DECODE_SPECIAL | BP_DECODE_KEEP_PREFIX_SPACE, out, sizeof out, &len));
    CHECK(len == 11 && !memcmp(out, "<s> a\xc3\xa9</s>", 11), "BP_DECODE_KEEP_PREFIX_SPACE keeps it");
    CHECK(bp_tokenizer_decode(t, ids, 5, 0, out, 2, &len) == BP_E_INVAL && len == 3, "short decode buffer");
    bp_token bad[] = {S_A, S_N};
    CHECK(bp_tokenizer_decode(t, bad, 2, 0, out, sizeof out, &len) == BP_E_INVAL &&
              strstr(bp_last_error(), "ids[1]"), "an out-of-range id is named: %s", bp_last_error());
    CHECK_OK(bp_tokenizer_token_to_piece(t, S_SA, false, out, sizeof out, &len));
    CHECK(len == 2 && !memcmp(out, " a", 2), "piece: U+2581 is a space");
    CHECK_OK(bp_tokenizer_token_to_piece(t, S_BOS, false, out, sizeof out, &len));
    CHECK(len == 0, "piece of a control token without special is empty");
    CHECK(bp_tokenizer_token_to_piece(t, -1, true, out, sizeof out, &len) == BP_E_INVAL, "piece of id -1");
    bp_tokenizer_free(t);
}

/* ---- a small byte-level BPE vocabulary --------------------------------------------------- */
enum { B_AB = 256, B_BC, B_ABC, B_GA, B_EOT, B_12, B_34, B_123, B_QS, B_N };
static char bpe_text[256][4];
static const char *bpe_tokens[B_N];
static int32_t bpe_types[B_N];
/* GPT-2's bytes_to_unicode, written out from its definition. */
static void byte_char(int b, char *out) {
    int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    int cpt = b, extra = 0;
    if (!printable) {
        for (int k = 0; k < b; k++)
            extra += !((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE);
        cpt = 256 + extra;
    }
    if (cpt < 0x80) out[0] = (char)cpt, out[1] = 0;
    else out[0] = (char)(0xC0 | (cpt >> 6)), out[1] = (char)(0x80 | (cpt & 0x3F)), out[2] = 0;
}

static void bpe_vocab(vocab *v, const char *pre) {
    /* ranks 0..7; Ġ = U+0120 */
    static const char *merges[] = {"b c", "a b", "ab c", "\xc4\xa0 a", "3 4", "1 2", "12 3", "' S"};
    for (int b = 0; b < 256; b++) {
        byte_char(b, bpe_text[b]);
        bpe_tokens[b] = bpe_text[b];
        bpe_types[b] = 1;
    }
    bpe_tokens[B_AB] = "ab", bpe_tokens[B_BC] = "bc", bpe_tokens[B_ABC] = "abc";
    bpe_tokens[B_GA] = "\xc4\xa0" "a", bpe_tokens[B_EOT] = "<|endoftext|>";
    bpe_tokens[B_12] = "12", bpe_tokens[B_34] = "34", bpe_tokens[B_123] = "123", bpe_tokens[B_QS] = "'S";
    for (int i = B_AB; i < B_N; i++) bpe_types[i] = i == B_EOT ? 3 : 1;
    *v = (vocab){"gpt2", pre, bpe_tokens, NULL, bpe_types, B_N, merges, 8, -1};
}

static void test_bpe(void) {
    vocab v;
    void *buf;
    bpe_vocab(&v, "gpt-2");
    bp_gguf *f = make(&v, &buf);
    bp_tokenizer *t = NULL;
    if (f) CHECK_OK(bp_tokenizer_create(f, &t));
    bp_gguf_close(f);
    free(buf);
    if (!t) return;
    CHECK(!bp_tokenizer_add_bos(t) && bp_tokenizer_special(t, BP_SPECIAL_BOS) == 11,
          "BPE defaults: no BOS added, bos id 11 (llama.cpp's default)");
    CHECK(bp_tokenizer_special(t, BP_SPECIAL_EOT) == B_EOT && bp_tokenizer_is_eog(t, B_EOT), "EOT found by text");
    /* a,b,c: "b c" has rank 0 < "a b" rank 1: bc first, then no "a bc" merge. */
    expect(t, "abc", false, true, (bp_token[]){'a', B_BC}, 2, "lowest rank first");
    /* " a": one pre-token (" ?\p{L}+"), bytes Ġ a, merge rank 3. */
    expect(t, " a", false, true, (bp_token[]){B_GA}, 1, "space joins the word");
    /* "a1": letters and digits are separate words (token b is byte b here). */
    expect(t, "a1", false, true, (bp_token[]){'a', '1'}, 2, "pre-tokenizer split");
    expect(t, "a<|endoftext|>", false, true, (bp_token[]){'a', B_EOT}, 2, "control token parsed");
    /* gpt-2: "1234" is one word; "3 4" (rank 4) before "1 2" (5), then no "12 34" merge. */
    expect(t, "1234", false, true, (bp_token[]){B_12, B_34}, 2, "gpt-2 digit run");
    /* gpt-2 contractions are case-sensitive: "'S" is not one, "'" and "S" are separate words. */
    expect(t, "'S", false, true, (bp_token[]){'\'', 'S'}, 2, "gpt-2 'S is no contraction");
    char out[16];
    size_t len;
    bp_token ids[] = {B_GA, B_BC};
    CHECK_OK(bp_tokenizer_decode(t, ids, 2, 0, out, sizeof out, &len));
    CHECK(len == 4 && !memcmp(out, " abc", 4), "byte-level decode");
    bp_tokenizer_free(t);

    /* No pre at all: llama.cpp's "default" chain. "a1234+b": punctuation runs split "+" off;
     * GPT-2 splits "a" | "1234"; digit runs keep "1234"; [0-9]{3} splits "123" | "4". The word
     * "123" merges "1 2" then "12 3". (gpt-2 above gave "12" "34" for the same digits.) */
    bpe_vocab(&v, NULL);
    f = make(&v, &buf);
    t = NULL;
    if (f) CHECK_OK(bp_tokenizer_create(f, &t));
    bp_gguf_close(f);
    free(buf);
    if (t) {
        CHECK(!strcmp(bp_tokenizer_pre_name(t), "default"), "a gpt2 file without pre is 'default'");
        expect(t, "a1234+b", false, true, (bp_token[]){'a', B_123, '4', '+', 'b'}, 5, "default chain");
        bp_tokenizer_free(t);
    }

    /* The same vocabulary under the other pre-tokenizers. */
    static const struct { const char *pre; bp_token digits[4]; size_t n_digits; bp_token qs[2]; size_t n_qs; } pres[] = {
        /* llama3: digits in words of <= 3, "123" then "4"; "123" is a whole token (ignore_merges);
         * "'S" is a contraction (case-insensitive) and merges by "' S". */
        {"llama-bpe", {B_123, '4'}, 2, {B_QS}, 1},
        /* qwen2: one digit per word; contractions as llama3. */
        {"qwen2", {'1', '2', '3', '4'}, 4, {B_QS}, 1},
    };
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        bpe_vocab(&v, pres[i].pre);
        f = make(&v, &buf);
        t = NULL;
        if (f) CHECK_OK(bp_tokenizer_create(f, &t));
        bp_gguf_close(f);
        free(buf);
        if (!t) continue;
        expect(t, "1234", false, true, pres[i].digits, pres[i].n_digits, pres[i].pre);
        expect(t, "'S", false, true, pres[i].qs, pres[i].n_qs, pres[i].pre);
        bp_tokenizer_free(t);
    }
}

/* ---- WordPiece (bert) ------------------------------------------------------------------- */
/* The tokenizer of the GGUF w holds (w is freed); NULL, with a failure recorded, when none. */
static bp_tokenizer *tokenizer_of(bp_gguf_writer *w) {
    void *buf = NULL;
    size_t len = 0;
    bp_gguf *f = NULL;
    bp_tokenizer *t = NULL;
    if (bp_gguf_writer_write_memory(w, &buf, &len) == BP_OK) CHECK_OK(bp_gguf_open_memory(buf, len, &f));
    bp_gguf_writer_free(w);
    if (f) CHECK_OK(bp_tokenizer_create(f, &t));
    bp_gguf_close(f);
    free(buf);
    return t;
}

/* A tiny BERT vocabulary as the GGUF conversion writes one: word-initial pieces with U+2581 in
 * front, continuations without "##". lower/strip: the normalizer keys, -1 absent. */
static bp_tokenizer *wpm_tokenizer(int lower, int strip) {
    static const char *const tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xe2\x96\x81un", "aff", "able",
                                         "\xe2\x96\x81,", "\xe2\x96\x81" "cafe", "\xe2\x96\x81" "caf\xc3\xa9",
                                         "\xe2\x96\x81" "a", "\xe2\x96\x81!", "\xe2\x96\x81UN"};
    static const int32_t types[] = {3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    bp_gguf_writer *w = NULL;
    CHECK_OK(bp_gguf_writer_create(&w));
    if (!w) return NULL;
    bp_gguf_writer_add_string(w, "tokenizer.ggml.model", "bert", 4);
    bp_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", (const char **)tokens, 13);
    bp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", BP_GGUF_I32, types, 13);
    uint32_t unk = 1, cls = 2, sep = 3;
    bp_gguf_writer_add_scalar(w, "tokenizer.ggml.unknown_token_id", BP_GGUF_U32, &unk);
    bp_gguf_writer_add_scalar(w, "tokenizer.ggml.bos_token_id", BP_GGUF_U32, &cls);
    bp_gguf_writer_add_scalar(w, "tokenizer.ggml.seperator_token_id", BP_GGUF_U32, &sep);
    bool b;
    if (lower >= 0) b = lower, bp_gguf_writer_add_scalar(w, "tokenizer.ggml.normalizer.lowercase", BP_GGUF_BOOL, &b);
    if (strip >= 0) b = strip, bp_gguf_writer_add_scalar(w, "tokenizer.ggml.normalizer.strip_accents", BP_GGUF_BOOL, &b);
    return tokenizer_of(w);
}

static void test_wpm(void) {
    bp_tokenizer *t = wpm_tokenizer(-1, -1); /* lowercase and strip accents by default */
    if (t) {
        CHECK(bp_tokenizer_get_type(t) == BP_TOKENIZER_WPM, "bert is WordPiece");
        /* "unaffable" is covered ▁un|aff|able (longest first); "," and "!" are words of their own;
         * "Café" lower-cases and loses its accent (NFD first code point). */
        expect(t, "UNaffable, Caf\xc3\xa9!", false, false, (bp_token[]){4, 5, 6, 7, 8, 11}, 6, "wordpiece");
        expect(t, "a", true, false, (bp_token[]){2, 10, 3}, 3, "[CLS] ... [SEP] with add_special");
        /* a word some position of which no token covers is [UNK] as a whole; CJK one by one. */
        expect(t, "unx a", false, false, (bp_token[]){1, 10}, 2, "uncovered word is [UNK]");
        expect(t, "\xe4\xb8\xad\xe6\x96\x87", false, false, (bp_token[]){1, 1}, 2, "CJK split");
        /* invalid UTF-8 (U+FFFD) and control characters are dropped; combining marks too. */
        expect(t, "\xff\x01" "a\xcc\x81", false, false, (bp_token[]){10}, 1, "dropped characters");
        bp_token id = 8;
        char out[16];
        size_t n = 0;
        CHECK(bp_tokenizer_decode(t, &id, 1, 0, out, sizeof out, &n) == BP_OK && n == 5 && !memcmp(out, " cafe", 5),
              "decode turns U+2581 into a space");
        bp_tokenizer_free(t);
    }
    t = wpm_tokenizer(1, 0); /* lowercase, keep accents */
    if (t) expect(t, "Caf\xc3\xa9", false, false, (bp_token[]){9}, 1, "accent kept");
    bp_tokenizer_free(t);
    t = wpm_tokenizer(0, -1); /* neither (strip_accents follows lowercase) */
    if (t) expect(t, "UN Un", false, false, (bp_token[]){12, 1}, 2, "case kept");
    bp_tokenizer_free(t);
}

/* ---- errors -------------------------------------------------------------------------------- */
static void expect_fail(const vocab *v, bp_status want, const char *needle1, const char *needle2) {
    void *buf;
    bp_gguf *f = make(v, &buf);
    bp_tokenizer *t = (bp_tokenizer *)&t;
    bp_status s = f ? bp_tokenizer_create(f, &t) : BP_E_IO;
    CHECK(s == want && t == NULL, "expected %s, got %s (%s)", bp_status_name(want), bp_status_name(s),
          bp_last_error());
    CHECK(!needle1 || strstr(bp_last_error(), needle1), "message names '%s': %s", needle1, bp_last_error());
    CHECK(!needle2 || strstr(bp_last_error(), needle2), "message names '%s': %s", needle2, bp_last_error());
    bp_gguf_close(f);
    free(buf);
}

static void test_errors(void) {
    vocab v;
    spm_vocab(&v, 0);
    v.model = "t5";
    expect_fail(&v, BP_E_UNSUPPORTED, "'t5'", "bert");
    v.model = NULL;
    expect_fail(&v, BP_E_NOT_FOUND, "tokenizer.ggml.model", NULL);
    bpe_vocab(&v, "mystery-pre");
    expect_fail(&v, BP_E_UNSUPPORTED, "'mystery-pre'", "llama-bpe");
    bpe_vocab(&v, "gpt-2");
    v.merges = NULL;
    expect_fail(&v, BP_E_NOT_FOUND, "tokenizer.ggml.merges", NULL);
    spm_vocab(&v, 0);
    v.tokens = NULL;
    expect_fail(&v, BP_E_NOT_FOUND, "tokenizer.ggml.tokens", NULL);
    {
        /* scores of a type that is neither f32 nor i32 (token_type is also short: the first
         * problem found is the one reported) */
        bp_gguf_writer *w = NULL;
        void *buf = NULL;
        size_t len = 0;
        bp_gguf *f = NULL;
        bp_tokenizer *t = NULL;
        CHECK_OK(bp_gguf_writer_create(&w));
        bp_gguf_writer_add_string(w, "tokenizer.ggml.model", "llama", 5);
        bp_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", spm_tokens, 10);
        bp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", BP_GGUF_I32, spm_types, 9);
        int32_t wrong[10] = {0};
        bp_gguf_writer_add_array(w, "tokenizer.ggml.scores", BP_GGUF_I16, wrong, 10);
        CHECK_OK(bp_gguf_writer_write_memory(w, &buf, &len));
        CHECK_OK(bp_gguf_open_memory(buf, len, &f));
        CHECK(bp_tokenizer_create(f, &t) == BP_E_FORMAT && strstr(bp_last_error(), "tokenizer.ggml.scores"),
              "scores of the wrong type: %s", bp_last_error());
        bp_gguf_close(f);
        free(buf);
        bp_gguf_writer_free(w);
    }
}

/* Every allocation of create + encode + decode fails in turn: a clean BP_E_NOMEM each time,
 * nothing leaked (the sanitizer build checks), and the run after the last injection works. */
static void test_alloc_failures(void) {
    vocab v;
    void *buf;
    bpe_vocab(&v, "llama-bpe");
    bp_gguf *f = make(&v, &buf);
    CHECK(f != NULL, "vocab");
    if (!f) return;
    int failures = 0;
    for (long long n = 1; n < 10000; n++) {
        bp_alloc_count_reset();
        bp_alloc_fail_after(n, false);
        bp_tokenizer *t = NULL;
        bp_token *ids = NULL;
        size_t n_ids = 0, len = 0;
        char out[64];
        bp_status s = bp_tokenizer_create(f, &t);
        /* llama-bpe: "abc" and " a" are whole tokens (ignore_merges), " x" merges nothing. */
        if (s == BP_OK) s = bp_tokenizer_encode_alloc(t, "abc a<|endoftext|> x", 20, false, true, &ids, &n_ids);
        if (s == BP_OK) s = bp_tokenizer_decode(t, ids, n_ids, 0, out, sizeof out, &len);
        bool injected = bp_alloc_injected() > 0;
        bp_alloc_fail_after(0, false);
        bp_tokens_free(ids);
        bp_tokenizer_free(t);
        if (!injected) {
            CHECK(s == BP_OK && len == 7 && !memcmp(out, "abc a x", 7), "clean run after %lld injections", n - 1);
            break;
        }
        failures++;
        CHECK(s == BP_E_NOMEM, "allocation %lld failing gives BP_E_NOMEM, got %s", n, bp_status_name(s));
    }
    CHECK(failures > 5, "the campaign failed %d allocations", failures);
    bp_gguf_close(f);
    free(buf);
}

int main(void) {
    test_spm();
    test_bpe();
    test_wpm();
    test_errors();
    test_alloc_failures();
    return bp_test_finish();
}
