/* Building a tokenizer from a GGUF's tokenizer.ggml.* metadata, and its accessors.
 *
 * What is read, and the defaults when a key is absent, follow llama.cpp's vocabulary loader
 * (llama-vocab.cpp, commit 0c1e570), because the ids we produce must equal its ids:
 *   SPM ("llama"): bos 1, eos 2, unk 0, add_bos true, add_space_prefix true;
 *   BPE ("gpt2"):  bos 11, eos 11, add_bos per pre-tokenizer (tokenizer_pre.def), no prefix;
 *   BPE ("gemma4"): no default ids, pre-tokenizer "gemma4" whatever the file says, add_bos
 *                  forced on (llama.cpp's workaround for Gemma 4 files that say false);
 *   WPM ("bert"):  bos (CLS) 101, unk 100, sep 102, pad 0; with add_special always [CLS] first
 *                  and [SEP] last (whatever add_bos_token says), no prefix;
 * a default id outside the vocabulary is dropped; a file's id outside it keeps the default.
 * An empty token text becomes "[EMPTY_<id>]" as there. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "text/tokenizer_internal.h"

static const char *const eot_texts[] = {
#define BP_EOT(S) S,
#define BP_EOG(S)
#include "text/tokenizer_marks.def"
#undef BP_EOT
#undef BP_EOG
};
static const char *const eog_texts[] = {
#define BP_EOT(S)
#define BP_EOG(S) S,
#include "text/tokenizer_marks.def"
#undef BP_EOT
#undef BP_EOG
};

void bp_tokenizer_free(bp_tokenizer *t) {
    if (!t) return;
    bp_free(t->model_name);
    bp_free(t->pre_name);
    bp_free(t->text_blob);
    bp_free(t->text_off);
    bp_free(t->scores);
    bp_free(t->attr);
    bp_tok_hash_free(&t->tok_hash);
    bp_free(t->merge_blob);
    bp_free(t->merge_off);
    bp_free(t->merge_split);
    bp_tok_hash_free(&t->merge_hash);
    bp_free(t->eog);
    bp_free(t->specials);
    bp_free(t->special_rank);
    bp_free(t->trie);
    bp_free(t);
}

static char *dup_n(const char *s, size_t n) {
    char *d = bp_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* An array value of key with the given element type and exactly len elements (0: any count);
 * absent is BP_E_NOT_FOUND (no error recorded unless required). A per-token array longer than
 * the token list disagrees with it, and is refused like a shorter one (issue 36). */
static bp_status get_array(const bp_gguf *f, const char *key, bp_gguf_type elem, uint64_t len,
                           bool required, bp_gguf_value *v) {
    if (bp_gguf_find_key(f, key) < 0) {
        if (required) return bp_fail(BP_E_NOT_FOUND, "tokenizer: the GGUF has no %s", key);
        return BP_E_NOT_FOUND;
    }
    bp_status rc = bp_gguf_get(f, key, v);
    if (rc != BP_OK) return rc;
    if (v->type != BP_GGUF_ARRAY || v->elem_type != elem)
        return bp_fail(BP_E_FORMAT, "tokenizer: %s is %s of %s, expected array of %s", key,
                       bp_gguf_type_name(v->type),
                       v->type == BP_GGUF_ARRAY ? bp_gguf_type_name(v->elem_type) : "-",
                       bp_gguf_type_name(elem));
    if (len && v->len != len)
        return bp_fail(BP_E_FORMAT, "tokenizer: %s has %llu entries for %llu tokens", key,
                       (unsigned long long)v->len, (unsigned long long)len);
    return BP_OK;
}

/* Copy every string of arr into one blob with offsets (n + 1 of them); split[i] = index of
 * the first ' ' at or after byte 1 when split is wanted (merges), else unused. */
static bp_status load_strings(const bp_gguf_value *arr, const char *key, char **blob_out,
                              uint32_t **off_out, uint32_t **split_out, bool empty_names) {
    uint64_t n = arr->len;
    size_t total = 0;
    bp_gguf_value e, *prev = NULL;
    for (uint64_t i = 0; i < n; i++, prev = &e) {
        bp_status rc = bp_gguf_array_next(arr, prev, &e);
        if (rc != BP_OK) return rc;
        total += e.len ? e.len : 24; /* room for "[EMPTY_<id>]" */
    }
    if (total > UINT32_MAX) return bp_fail(BP_E_FORMAT, "tokenizer: %s holds %zu bytes", key, total);
    char *blob = bp_malloc(total ? total : 1);
    uint32_t *off = bp_malloc((n + 1) * sizeof *off);
    uint32_t *split = split_out ? bp_malloc((n ? n : 1) * sizeof *split) : NULL;
    if (!blob || !off || (split_out && !split)) {
        bp_free(blob);
        bp_free(off);
        bp_free(split);
        return bp_fail(BP_E_NOMEM, "tokenizer: %s (%llu strings)", key, (unsigned long long)n);
    }
    size_t w = 0;
    prev = NULL;
    for (uint64_t i = 0; i < n; i++, prev = &e) {
        bp_gguf_array_next(arr, prev, &e);
        off[i] = (uint32_t)w;
        if (e.len == 0 && empty_names) {
            w += (size_t)snprintf(blob + w, 24, "[EMPTY_%llu]", (unsigned long long)i);
        } else {
            memcpy(blob + w, e.data, e.len);
            if (split) {
                const char *sp = e.len > 1 ? memchr((const char *)e.data + 1, ' ', e.len - 1) : NULL;
                split[i] = sp ? (uint32_t)(sp - (const char *)e.data) : UINT32_MAX;
            }
            w += e.len;
        }
    }
    off[n] = (uint32_t)w;
    *blob_out = blob;
    *off_out = off;
    if (split_out) *split_out = split;
    return BP_OK;
}

static unsigned attr_of_type(int32_t type) {
    switch (type) {
    case 1: return BP_TOKEN_ATTR_NORMAL;
    case 2: return BP_TOKEN_ATTR_UNKNOWN;
    case 3: return BP_TOKEN_ATTR_CONTROL;
    case 4: return BP_TOKEN_ATTR_USER_DEFINED;
    case 5: return BP_TOKEN_ATTR_UNUSED;
    case 6: return BP_TOKEN_ATTR_BYTE;
    default: return BP_TOKEN_ATTR_UNDEFINED;
    }
}

static bp_status load_vocab(bp_tokenizer *t, const bp_gguf *f) {
    bp_gguf_value tokens, scores, types;
    bp_status rc = get_array(f, "tokenizer.ggml.tokens", BP_GGUF_STRING, 0, true, &tokens);
    if (rc != BP_OK) return rc;
    if (tokens.len == 0 || tokens.len > INT32_MAX)
        return bp_fail(BP_E_FORMAT, "tokenizer: tokenizer.ggml.tokens has %llu entries",
                       (unsigned long long)tokens.len);
    t->n_vocab = (int32_t)tokens.len;
    size_t n = (size_t)t->n_vocab;
    rc = load_strings(&tokens, "tokenizer.ggml.tokens", &t->text_blob, &t->text_off, NULL, true);
    if (rc != BP_OK) return rc;
    t->scores = bp_calloc(n, sizeof *t->scores);
    t->attr = bp_malloc(n * sizeof *t->attr);
    t->eog = bp_calloc(n, 1);
    if (!t->scores || !t->attr || !t->eog) return bp_fail(BP_E_NOMEM, "tokenizer: %zu tokens", n);

    /* Scores: f32 or i32, optional (0 when absent). */
    bool have_scores = bp_gguf_find_key(f, "tokenizer.ggml.scores") >= 0;
    if (have_scores) {
        rc = bp_gguf_get(f, "tokenizer.ggml.scores", &scores);
        if (rc != BP_OK) return rc;
        bp_gguf_type et = scores.type == BP_GGUF_ARRAY ? scores.elem_type : BP_GGUF_STRING;
        rc = get_array(f, "tokenizer.ggml.scores", et == BP_GGUF_I32 ? BP_GGUF_I32 : BP_GGUF_F32,
                       n, true, &scores);
        if (rc != BP_OK) return rc;
        for (size_t i = 0; i < n; i++) {
            if (et == BP_GGUF_I32) {
                int32_t v;
                memcpy(&v, (const char *)scores.data + 4 * i, 4);
                t->scores[i] = (float)v;
            } else {
                memcpy(&t->scores[i], (const char *)scores.data + 4 * i, 4);
            }
        }
    }
    rc = get_array(f, "tokenizer.ggml.token_type", BP_GGUF_I32, n, false, &types);
    if (rc != BP_OK && rc != BP_E_NOT_FOUND) return rc;
    for (size_t i = 0; i < n; i++) {
        int32_t ty = 1;
        if (rc == BP_OK) memcpy(&ty, (const char *)types.data + 4 * i, 4);
        t->attr[i] = (uint16_t)attr_of_type(ty);
    }
    rc = bp_tok_hash_init(&t->tok_hash, n);
    if (rc != BP_OK) return rc;
    for (bp_token i = 0; i < t->n_vocab; i++) bp_tok_hash_put_token(t, &t->tok_hash, i);
    return BP_OK;
}

static bp_status load_merges(bp_tokenizer *t, const bp_gguf *f) {
    bp_gguf_value merges;
    bp_status rc = get_array(f, "tokenizer.ggml.merges", BP_GGUF_STRING, 0, true, &merges);
    if (rc != BP_OK) return rc;
    if (merges.len > INT32_MAX)
        return bp_fail(BP_E_FORMAT, "tokenizer: tokenizer.ggml.merges has %llu entries",
                       (unsigned long long)merges.len);
    t->n_merges = (uint32_t)merges.len;
    rc = load_strings(&merges, "tokenizer.ggml.merges", &t->merge_blob, &t->merge_off,
                      &t->merge_split, false);
    if (rc != BP_OK) return rc;
    rc = bp_tok_hash_init(&t->merge_hash, t->n_merges);
    if (rc != BP_OK) return rc;
    /* A merge without a space (at byte >= 1) can never match a pair of symbols: skipped. */
    for (uint32_t r = 0; r < t->n_merges; r++)
        if (t->merge_split[r] != UINT32_MAX) bp_tok_hash_put_merge(t, &t->merge_hash, r);
    return BP_OK;
}

static bp_status get_flag(const bp_gguf *f, const char *key, bool *v) {
    if (bp_gguf_find_key(f, key) < 0) return BP_OK;
    return bp_gguf_get_bool(f, key, v);
}

static bp_status get_id(const bp_tokenizer *t, const bp_gguf *f, const char *key, bp_token *id) {
    if (bp_gguf_find_key(f, key) < 0) return BP_OK;
    int64_t v;
    uint64_t u;
    /* An id outside the vocabulary (negative, or too large) leaves the default, as llama.cpp;
     * a value that is not an integer at all is an error. */
    if (bp_gguf_get_i64(f, key, &v) == BP_OK) {
        if (v >= 0 && v < t->n_vocab) *id = (bp_token)v;
        return BP_OK;
    }
    return bp_gguf_get_u64(f, key, &u);
}

/* EOT / EOG by text, CONTROL for those found, and per-model strip rules. */
static void mark_special_texts(bp_tokenizer *t, const bp_gguf *f) {
    bool eot_given = bp_gguf_find_key(f, "tokenizer.ggml.eot_token_id") >= 0 &&
                     t->special[BP_SPECIAL_EOT] != BP_TOKEN_NULL;
    for (size_t i = 0; !eot_given && i < sizeof eot_texts / sizeof *eot_texts; i++) {
        bp_token id = bp_tok_lookup(t, eot_texts[i], strlen(eot_texts[i]));
        if (id != BP_TOKEN_NULL) {
            t->special[BP_SPECIAL_EOT] = id;
            t->attr[id] |= BP_TOKEN_ATTR_CONTROL;
            break;
        }
    }
    for (size_t i = 0; i < sizeof eog_texts / sizeof *eog_texts; i++) {
        bp_token id = bp_tok_lookup(t, eog_texts[i], strlen(eog_texts[i]));
        if (id == BP_TOKEN_NULL) continue;
        t->eog[id] = 1;
        t->attr[id] |= BP_TOKEN_ATTR_CONTROL;
    }
    bp_token eom = BP_TOKEN_NULL;
    get_id(t, f, "tokenizer.ggml.eom_token_id", &eom);
    bp_token stop[3] = {t->special[BP_SPECIAL_EOS], t->special[BP_SPECIAL_EOT], eom};
    for (int i = 0; i < 3; i++)
        if (stop[i] != BP_TOKEN_NULL) t->eog[stop[i]] = 1;
}

/* llama.cpp strips whitespace after every special token of Phi-3 models (chosen by
 * general.name), except <unk>, <s>, <|endoftext|>; the special set is taken before. */
static void phi3_strip(bp_tokenizer *t, const bp_gguf *f) {
    const char *name;
    size_t len;
    if (bp_gguf_find_key(f, "general.name") < 0 || bp_gguf_get_str(f, "general.name", &name, &len) != BP_OK)
        return;
    char low[256];
    size_t n = len < sizeof low - 1 ? len : sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[n] = 0;
    if (!strstr(low, "phi-3") && !strstr(low, "phi3")) return;
    for (int32_t r = 0; r < t->n_specials; r++) t->attr[t->specials[r]] |= BP_TOKEN_ATTR_RSTRIP;
    bp_token s = bp_tok_lookup(t, "</s>", 4);
    if (s != BP_TOKEN_NULL) t->attr[s] |= BP_TOKEN_ATTR_RSTRIP;
    static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (int i = 0; i < 3; i++) {
        bp_token id = bp_tok_lookup(t, keep[i], strlen(keep[i]));
        if (id != BP_TOKEN_NULL) t->attr[id] &= (uint16_t)~BP_TOKEN_ATTR_RSTRIP;
    }
}

static bp_status setup(bp_tokenizer *t, const bp_gguf *f) {
    const char *s;
    size_t n;
    if (bp_gguf_find_key(f, "tokenizer.ggml.model") < 0)
        return bp_fail(BP_E_NOT_FOUND, "tokenizer: the GGUF has no tokenizer.ggml.model");
    bp_status rc = bp_gguf_get_str(f, "tokenizer.ggml.model", &s, &n);
    if (rc != BP_OK) return rc;
    /* the names are compared as C strings: one with a NUL inside would pass as its prefix */
    if (memchr(s, 0, n)) return bp_fail(BP_E_FORMAT, "tokenizer: tokenizer.ggml.model holds a NUL byte");
    if (!(t->model_name = dup_n(s, n))) return bp_fail(BP_E_NOMEM, "tokenizer: model name");
    if (bp_gguf_find_key(f, "tokenizer.ggml.pre") >= 0) {
        rc = bp_gguf_get_str(f, "tokenizer.ggml.pre", &s, &n);
        if (rc != BP_OK) return rc;
        if (memchr(s, 0, n)) return bp_fail(BP_E_FORMAT, "tokenizer: tokenizer.ggml.pre holds a NUL byte");
        t->pre_name = dup_n(s, n);
    } else {
        t->pre_name = dup_n("default", 7);
    }
    if (!t->pre_name) return bp_fail(BP_E_NOMEM, "tokenizer: pre-tokenizer name");

    if (strcmp(t->model_name, "gemma4") == 0) {
        bp_free(t->pre_name);
        if (!(t->pre_name = dup_n("gemma4", 6))) return bp_fail(BP_E_NOMEM, "tokenizer: pre-tokenizer name");
    }

    bp_token def_bos, def_eos, def_unk, def_sep = BP_TOKEN_NULL, def_pad = BP_TOKEN_NULL;
    if (strcmp(t->model_name, "llama") == 0) {
        /* SPM ignores tokenizer.ggml.pre (llama.cpp does too): no pre-splitting. */
        t->type = BP_TOKENIZER_SPM;
        t->pretok = BP_PRETOK_NONE;
        t->add_bos = true;
        t->add_space_prefix = true;
        t->escape_spaces = true;
        def_bos = 1, def_eos = 2, def_unk = 0;
    } else if (strcmp(t->model_name, "gpt2") == 0 || strcmp(t->model_name, "gemma4") == 0) {
        t->type = BP_TOKENIZER_BPE;
        if (!bp_pretok_lookup(t->pre_name, &t->pretok, &t->ignore_merges, &t->add_bos))
            return bp_fail(BP_E_UNSUPPORTED,
                           "tokenizer: tokenizer.ggml.pre = '%s' is not a supported pre-tokenizer for "
                           "tokenizer.ggml.model '%s' (supported: %s)", t->pre_name, t->model_name,
                           bp_tokenizer_pre_names());
        /* Gemma 4's kind merges raw UTF-8 with spaces as U+2581 (tokenizer_bpe.c). */
        t->raw_utf8 = t->escape_spaces = t->pretok == BP_PRETOK_GEMMA4;
        if (strcmp(t->model_name, "gemma4") == 0) def_bos = def_eos = def_unk = BP_TOKEN_NULL;
        else def_bos = 11, def_eos = 11, def_unk = BP_TOKEN_NULL;
    } else if (strcmp(t->model_name, "bert") == 0) {
        t->type = BP_TOKENIZER_WPM;
        t->pretok = BP_PRETOK_NONE;
        t->add_bos = true;
        t->escape_spaces = true;
        def_bos = 101, def_eos = BP_TOKEN_NULL, def_unk = 100, def_sep = 102, def_pad = 0;
    } else {
        return bp_fail(BP_E_UNSUPPORTED,
                       "tokenizer: tokenizer.ggml.model = '%s' is not supported (supported: llama "
                       "(SentencePiece-style), gpt2 (byte-level BPE), gemma4 (BPE on UTF-8), bert "
                       "(WordPiece))", t->model_name);
    }
    rc = load_vocab(t, f);
    if (rc == BP_OK && t->type == BP_TOKENIZER_BPE) rc = load_merges(t, f);
    if (rc != BP_OK) return rc;

    for (int i = 0; i < BP_SPECIAL_COUNT; i++) t->special[i] = BP_TOKEN_NULL;
    t->special[BP_SPECIAL_BOS] = def_bos < t->n_vocab ? def_bos : BP_TOKEN_NULL;
    t->special[BP_SPECIAL_EOS] = def_eos < t->n_vocab ? def_eos : BP_TOKEN_NULL;
    t->special[BP_SPECIAL_UNK] = def_unk < t->n_vocab ? def_unk : BP_TOKEN_NULL;
    t->special[BP_SPECIAL_SEP] = def_sep < t->n_vocab ? def_sep : BP_TOKEN_NULL;
    t->special[BP_SPECIAL_PAD] = def_pad < t->n_vocab ? def_pad : BP_TOKEN_NULL;
    static const struct { bp_special_token which; const char *key; } ids[] = {
        {BP_SPECIAL_BOS, "tokenizer.ggml.bos_token_id"},
        {BP_SPECIAL_EOS, "tokenizer.ggml.eos_token_id"},
        {BP_SPECIAL_EOT, "tokenizer.ggml.eot_token_id"},
        {BP_SPECIAL_UNK, "tokenizer.ggml.unknown_token_id"},
        {BP_SPECIAL_SEP, "tokenizer.ggml.seperator_token_id"}, /* sic: the GGUF key's spelling */
        {BP_SPECIAL_PAD, "tokenizer.ggml.padding_token_id"},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0] && rc == BP_OK; i++)
        rc = get_id(t, f, ids[i].key, &t->special[ids[i].which]);
    if (rc == BP_OK) rc = get_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    if (rc == BP_OK) rc = get_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos);
    if (rc == BP_OK) rc = get_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos);
    /* WordPiece's normalizer: lowercase by default, accents stripped by default when lowercasing. */
    t->wpm_lowercase = true;
    if (rc == BP_OK) rc = get_flag(f, "tokenizer.ggml.normalizer.lowercase", &t->wpm_lowercase);
    t->wpm_strip_accents = t->wpm_lowercase;
    if (rc == BP_OK) rc = get_flag(f, "tokenizer.ggml.normalizer.strip_accents", &t->wpm_strip_accents);
    if (rc != BP_OK) return rc;
    if (t->pretok == BP_PRETOK_GEMMA4) t->add_bos = true;
    if (t->type == BP_TOKENIZER_WPM) { /* llama.cpp: [CLS] ... [SEP], whatever the flags say */
        t->add_bos = true;
        t->add_eos = false;
    }
    if (t->add_bos && t->special[BP_SPECIAL_BOS] == BP_TOKEN_NULL)
        return bp_fail(BP_E_FORMAT, "tokenizer: add_bos_token is set but there is no BOS token");
    if (t->add_eos && t->special[BP_SPECIAL_EOS] == BP_TOKEN_NULL)
        return bp_fail(BP_E_FORMAT, "tokenizer: add_eos_token is set but there is no EOS token");
    if (t->type == BP_TOKENIZER_WPM && t->special[BP_SPECIAL_SEP] == BP_TOKEN_NULL)
        return bp_fail(BP_E_FORMAT, "tokenizer: a bert (WordPiece) vocabulary needs a separator token "
                       "(tokenizer.ggml.seperator_token_id, default 102)");

    mark_special_texts(t, f);
    rc = bp_tok_build_specials(t);
    if (rc != BP_OK) return rc;
    phi3_strip(t, f);

    if (t->type == BP_TOKENIZER_SPM || t->raw_utf8) {
        /* Byte fallback: <0xNN>; SPM then tries the 1-byte token, then unk. */
        static const char hex[] = "0123456789ABCDEF";
        for (int b = 0; b < 256; b++) {
            char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            char raw = (char)b;
            bp_token id = bp_tok_lookup(t, name, 6);
            if (id == BP_TOKEN_NULL && !t->raw_utf8) id = bp_tok_lookup(t, &raw, 1);
            if (id == BP_TOKEN_NULL && !t->raw_utf8) id = t->special[BP_SPECIAL_UNK];
            t->byte_token[b] = id;
        }
    } else if (t->type == BP_TOKENIZER_BPE) {
        bp_tok_bpe_init_bytes(t);
    }
    for (bp_token i = 0; i < t->n_vocab; i++) {
        uint32_t n_i = t->text_off[i + 1] - t->text_off[i];
        if (n_i > t->max_token_len) t->max_token_len = n_i;
    }
    return BP_OK;
}

bp_status bp_tokenizer_create(const bp_gguf *f, bp_tokenizer **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_tokenizer_create: out is NULL");
    *out = NULL;
    if (!f) return bp_fail(BP_E_INVAL, "bp_tokenizer_create: the GGUF is NULL");
    bp_tokenizer *t = bp_calloc(1, sizeof *t);
    if (!t) return bp_fail(BP_E_NOMEM, "tokenizer: %zu bytes", sizeof *t);
    bp_status rc = setup(t, f);
    if (rc != BP_OK) {
        bp_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return BP_OK;
}

/* ---- accessors ---------------------------------------------------------------------------- */

bp_tokenizer_type bp_tokenizer_get_type(const bp_tokenizer *t) { return t->type; }
const char *bp_tokenizer_model_name(const bp_tokenizer *t) { return t->model_name; }
const char *bp_tokenizer_pre_name(const bp_tokenizer *t) { return t->pre_name; }
int32_t bp_tokenizer_vocab_size(const bp_tokenizer *t) { return t->n_vocab; }
bool bp_tokenizer_add_bos(const bp_tokenizer *t) { return t->add_bos; }
bool bp_tokenizer_add_eos(const bp_tokenizer *t) { return t->add_eos; }
bool bp_tokenizer_add_space_prefix(const bp_tokenizer *t) { return t->add_space_prefix; }

bp_token bp_tokenizer_special(const bp_tokenizer *t, bp_special_token which) {
    return (unsigned)which < BP_SPECIAL_COUNT ? t->special[which] : BP_TOKEN_NULL;
}

bool bp_tokenizer_is_eog(const bp_tokenizer *t, bp_token id) {
    return id >= 0 && id < t->n_vocab && t->eog[id];
}

unsigned bp_tokenizer_token_attr(const bp_tokenizer *t, bp_token id) {
    if (id < 0 || id >= t->n_vocab) return 0;
    return t->attr[id] & (BP_TOKEN_ATTR_BYTE * 2 - 1); /* the public bits only */
}

const char *bp_tokenizer_token_text(const bp_tokenizer *t, bp_token id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    size_t n;
    const char *s = bp_tok_text(t, id, &n);
    if (len) *len = n;
    return s;
}

float bp_tokenizer_token_score(const bp_tokenizer *t, bp_token id) {
    return id >= 0 && id < t->n_vocab ? t->scores[id] : 0.0f;
}

bp_token bp_tokenizer_find(const bp_tokenizer *t, const char *text, size_t len) {
    if (!text && len) return BP_TOKEN_NULL;
    return bp_tok_lookup(t, text ? text : "", len);
}
