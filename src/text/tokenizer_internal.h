/* Tokenizer internals shared by tokenizer*.c (see include/backplane_tokenizer.h for the API).
 *
 * Layout: every token text lives in one blob (text_off[i]..text_off[i+1]); lookups by text go
 * through an open-addressing hash of ids; BPE merges are a second blob with a hash keyed by the
 * merge string "left right". Special tokens are found by a byte trie. All built once in
 * bp_tokenizer_create; encode allocates only per-call scratch. */
#ifndef BP_MODEL_TOKENIZER_INTERNAL_H
#define BP_MODEL_TOKENIZER_INTERNAL_H

#include "backplane.h"

/* Internal attribute bits beyond the public ones: strip whitespace left/right of a special
 * token when it is matched in text (llama.cpp sets these by model name; see tokenizer.c). */
enum { BP_TOKEN_ATTR_LSTRIP = 1 << 6, BP_TOKEN_ATTR_RSTRIP = 1 << 7 };

/* How a BPE vocabulary splits text into words before merging: the regexes llama.cpp's
 * llama-vocab.cpp gives each pre-tokenizer (commit 0c1e570), each splitting every piece the
 * ones before it left into its matches and the gaps between them. tokenizer_pre.def maps
 * tokenizer.ggml.pre names to these; the chains are written out in tokenizer_pretok_chain.c. */
typedef enum bp_pretok_kind {
    BP_PRETOK_NONE = 0, /* SPM: no pre-splitting */
    BP_PRETOK_GPT2,     /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    BP_PRETOK_LLAMA3,   /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    BP_PRETOK_QWEN2,    /* the same with \p{N} (one digit per word) */
    BP_PRETOK_QWEN35,   /* QWEN2 with marks in letter runs: [\p{L}\p{M}]+, ?[^\s\p{L}\p{M}\p{N}]+ */
    BP_PRETOK_DEFAULT,  /* llama.cpp's "default": punctuation runs, GPT2, \p{N}+, [0-9]{3} */
    BP_PRETOK_FALCON,   /* punctuation runs (with `), GPT2, [0-9]{3} */
    BP_PRETOK_STARCODER, /* \p{N}, then GPT2 (also refact, command-r, ...) */
    BP_PRETOK_DEEPSEEK_LLM,   /* [\r\n], \s?[Latin/Greek/... letters]+, \s?[punct]+, \s+$, [CJK]+, \p{N}+ */
    BP_PRETOK_DEEPSEEK_CODER, /* [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N} */
    BP_PRETOK_GEMMA4,   /* [^\n]+|[\n]+ on text with spaces as U+2581; merges on raw UTF-8 */
    BP_PRETOK_GPT4O,    /* o200k as llama.cpp approximates it (tokenizer_pretok_o200k.c): a word is
                         * [^\r\n\p{L}\p{N}]? then upper-then-lower or upper-only letters, with a
                         * contraction; \p{N}{1,3}; ?[^\s\p{L}\p{N}]+[\r\n/]*; whitespace as LLAMA3 */
} bp_pretok_kind;

/* GPT-2's byte alphabet: 188 printable bytes map to themselves, the other 68 to U+0100..U+0143. */
#define BP_BYTE_ALPHABET_END 0x144

typedef struct bp_tok_hash {
    uint64_t *slots; /* (hash bits << 32) | (id + 1); 0 = empty */
    size_t mask;     /* slots - 1, a power of two minus one */
} bp_tok_hash;

typedef struct bp_trie_node {
    int32_t child;    /* first child, -1 none */
    int32_t sibling;  /* next sibling, -1 none */
    int32_t tok_all;  /* special token ending here, any kind (parse_special), or -1 */
    int32_t tok_user; /* user-defined token ending here (matched without parse_special), or -1 */
    uint8_t byte;
} bp_trie_node;

struct bp_tokenizer {
    bp_tokenizer_type type;
    char *model_name;
    char *pre_name;
    bp_pretok_kind pretok;
    bool ignore_merges; /* BPE: a pre-token that is itself a token skips merging */
    bool raw_utf8;      /* BPE: merge raw UTF-8 (gemma4), not GPT-2's byte alphabet */
    bool escape_spaces; /* ' ' is U+2581 in token texts (SPM, WPM, gemma4) */
    bool add_bos, add_eos, add_space_prefix;
    bool wpm_lowercase, wpm_strip_accents; /* WordPiece normalizer (tokenizer.ggml.normalizer.*) */
    uint32_t max_token_len; /* bytes of the longest token text (WordPiece's longest match) */

    int32_t n_vocab;
    char *text_blob;
    uint32_t *text_off; /* n_vocab + 1 */
    float *scores;
    uint16_t *attr;
    bp_tok_hash tok_hash;

    /* BPE merges: merge i is merge_blob[merge_off[i]..merge_off[i+1]), the space at
     * merge_off[i] + merge_split[i]; rank = i. */
    uint32_t n_merges;
    char *merge_blob;
    uint32_t *merge_off;
    uint32_t *merge_split;
    bp_tok_hash merge_hash;

    bp_token special[BP_SPECIAL_COUNT];
    uint8_t *eog; /* n_vocab flags */

    /* Special tokens matched in raw text: in priority order (longer text first, then lower
     * id) and a trie of their texts; special_rank[id] is the position in that order. */
    bp_token *specials;
    int32_t n_specials;
    int32_t *special_rank;
    bp_trie_node *trie;
    int32_t trie_root[256]; /* first-byte index into trie, -1 none */
    int32_t n_trie;

    bp_token byte_token[256]; /* byte fallback. SPM: <0xNN>, else the 1-byte token, else unk;
                               * raw-UTF-8 BPE: <0xNN> or none */
    /* BPE byte-level mapping: byte b <-> one code point, UTF-8 in byte_utf8[b][0..byte_utf8_len[b]) */
    uint8_t byte_utf8[256][2];
    uint8_t byte_utf8_len[256];
    int16_t byte_of_cpt[BP_BYTE_ALPHABET_END]; /* the inverse; -1 for code points not used */
};

/* ---- tokenizer_vocab.c: the text -> id and merge hashes ---- */
uint64_t bp_tok_hash_bytes(uint64_t h, const void *p, size_t n);
#define BP_TOK_HASH_SEED 1469598103934665603ull
bp_status bp_tok_hash_init(bp_tok_hash *h, size_t n_items);
void bp_tok_hash_free(bp_tok_hash *h);
/* Insert id under the text of token id (a later duplicate text replaces the earlier id, as
 * llama.cpp's map assignment does). */
void bp_tok_hash_put_token(const bp_tokenizer *t, bp_tok_hash *h, bp_token id);
bp_token bp_tok_lookup(const bp_tokenizer *t, const char *s, size_t n);
/* Merge table: the first of duplicate merges keeps its rank. */
void bp_tok_hash_put_merge(const bp_tokenizer *t, bp_tok_hash *h, uint32_t rank);
/* Rank of merging a (na bytes) with b (nb bytes), or -1. */
int32_t bp_tok_merge_rank(const bp_tokenizer *t, const char *a, size_t na, const char *b, size_t nb);

static inline const char *bp_tok_text(const bp_tokenizer *t, bp_token id, size_t *n) {
    *n = t->text_off[id + 1] - t->text_off[id];
    return t->text_blob + t->text_off[id];
}

/* Double the capacity of the array *v (64 at first); BP_E_NOMEM recorded on failure, *v kept. */
bp_status bp_tok_grow(void **v, size_t *cap, size_t elem, const char *what);

/* ---- a growable id buffer for encode ---- */
typedef struct bp_tok_out {
    bp_token *ids;
    size_t n, cap;
} bp_tok_out;
bp_status bp_tok_out_push(bp_tok_out *o, bp_token id);

/* ---- tokenizer_special.c ---- */
bp_status bp_tok_build_specials(bp_tokenizer *t);
/* A fragment of the input: raw text [off, off+len) or a matched special token. */
typedef struct bp_tok_frag {
    size_t off, len;
    bp_token tok; /* BP_TOKEN_NULL for raw text */
    int32_t next; /* index of the next fragment, -1 at the end */
} bp_tok_frag;
/* Split text into fragments as llama.cpp's special-token partition does; *frags is allocated
 * (caller frees with bp_free), *first the head of the list. */
bp_status bp_tok_partition(const bp_tokenizer *t, const char *text, size_t len, bool parse_special,
                           bp_tok_frag **frags, int32_t *first);

/* ---- tokenizer_spm.c / tokenizer_bpe.c: one raw fragment ---- */
bp_status bp_tok_spm_encode(const bp_tokenizer *t, const char *text, size_t len, bool prefix_space,
                            bp_tok_out *out);
bp_status bp_tok_bpe_encode(const bp_tokenizer *t, const char *text, size_t len, bp_tok_out *out);
void bp_tok_bpe_init_bytes(bp_tokenizer *t);
/* ---- tokenizer_wpm.c: WordPiece (bert) on one raw fragment ---- */
bp_status bp_tok_wpm_encode(const bp_tokenizer *t, const char *text, size_t len, bp_tok_out *out);

/* ---- tokenizer_pretok.c: the word scanners, and the name table ---- */
/* Words of cpts[0..n) (flags[i] = bp_unicode_flags(cpts[i])) by one of the single-regex
 * scanners (GPT2, LLAMA3, QWEN2, QWEN35; GPT4O goes to tokenizer_pretok_o200k.c): appends
 * base + the end of each word to ends. */
size_t bp_pretok_words(bp_pretok_kind kind, const uint32_t *cpts, const uint16_t *flags, size_t n,
                       uint32_t base, uint32_t *ends);
/* Length of a contraction ('s 't 'm 'd 're 've 'll) at i, or 0, its letters compared exactly
 * (GPT-2's regex), lowercased to ASCII where a code point has an ASCII lowercase (the (?i:...)
 * regexes: U+0130 counts as 'i'), or ASCII-only case-insensitive (gpt-4o's '[sS]... classes,
 * which a non-ASCII code point never matches). */
typedef enum { BP_FOLD_EXACT, BP_FOLD_TO_ASCII, BP_FOLD_ASCII } bp_pretok_fold;
size_t bp_pretok_contraction(bp_pretok_fold fold, const uint32_t *c, size_t i, size_t n);
/* Look up a BPE pre-tokenizer name; false when unsupported. */
bool bp_pretok_lookup(const char *name, bp_pretok_kind *kind, bool *ignore_merges, bool *add_bos);

/* ---- tokenizer_pretok_o200k.c: the gpt-4o scanner (bp_pretok_words calls it for GPT4O) ---- */
size_t bp_pretok_words_o200k(const uint32_t *cpts, const uint16_t *flags, size_t n, uint32_t base,
                             uint32_t *ends);

/* ---- tokenizer_pretok_chain.c ---- */
/* Word boundaries of cpts[0..n) by kind's regexes: writes the end index of each word,
 * ascending, to ends (room for n) and returns the count; scratch: room for n. */
size_t bp_pretok_split(bp_pretok_kind kind, const uint32_t *cpts, const uint16_t *flags, size_t n,
                       uint32_t *ends, uint32_t *scratch);

/* ---- a binary heap of merge candidates (SPM and BPE) ---- */
typedef struct bp_tok_bigram {
    double key;    /* larger pops first: SPM score, -(BPE rank) */
    int32_t left;  /* symbol index; ties pop the lower left first */
    int32_t right;
    uint32_t size; /* bytes of left + right when pushed: stale when they changed */
} bp_tok_bigram;
typedef struct bp_tok_heap {
    bp_tok_bigram *v;
    size_t n, cap;
} bp_tok_heap;
bp_status bp_tok_heap_push(bp_tok_heap *h, bp_tok_bigram b);
bp_tok_bigram bp_tok_heap_pop(bp_tok_heap *h);

/* A symbol of the merge loop: bytes [off, off+n) of the word, n == 0 once merged away. */
typedef struct bp_tok_sym {
    uint32_t off, n;
    int32_t prev, next;
} bp_tok_sym;

/* Split s[0..n) into symbols of one UTF-8 character each (length from the lead byte, cut at the
 * end), linked in order; returns the count (sym has room for n). */
int32_t bp_tok_split_chars(const char *s, size_t n, bp_tok_sym *sym);
/* The merge loop both families share: queue every adjacent pair via pair(), then repeatedly
 * pop the best, skip it when stale (either side merged away or grown since), merge the right
 * symbol into the left, and queue the new symbol's pairs with its neighbours. */
typedef bp_status (*bp_tok_pair_fn)(void *ctx, int32_t left, int32_t right);
bp_status bp_tok_merge(bp_tok_sym *sym, int32_t n_sym, bp_tok_heap *heap, bp_tok_pair_fn pair, void *ctx);

#endif
