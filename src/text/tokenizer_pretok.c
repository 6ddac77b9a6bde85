/* The word scanners of byte-level BPE pre-tokenizers: split code points into words the way
 * one of the single big regexes does (tokenizer_internal.h quotes them), and the table of
 * pre-tokenizer names (tokenizer_pre.def). One scanner covers the four families; they differ
 * in five places, switched by `kind`:
 *   contractions    GPT2 case-sensitive; the others case-insensitive
 *   letter run      GPT2 " ?\p{L}+"; others "[^\r\n\p{L}\p{N}]?\p{L}+"; QWEN35 [\p{L}\p{M}]+
 *   digit run       GPT2 " ?\p{N}+"; LLAMA3 up to 3 digits; QWEN2/QWEN35 1 digit
 *   newlines        not GPT2: punctuation takes trailing [\r\n]*, and "\s*[\r\n]+"
 *   marks           QWEN35: punctuation runs stop at marks too ([^\s\p{L}\p{M}\p{N}]+)
 * The behaviour at the edges follows llama.cpp's hand-written matchers, which the reference
 * ids come from (e.g. a lone space before a digit is its own word). The multi-regex chains
 * that use the GPT2 scanner as one step are in tokenizer_pretok_chain.c; the gpt-4o scanner,
 * whose regex llama.cpp hands to std::regex, is tokenizer_pretok_o200k.c. */
#include <string.h>

#include "text/tokenizer_internal.h"
#include "text/unicode.h"

static const struct {
    const char *name;
    bp_pretok_kind kind;
    bool ignore_merges, add_bos;
} pre_table[] = {
#define BP_PRE(NAME, KIND, IGN, BOS) {NAME, BP_PRETOK_##KIND, IGN, BOS},
#include "text/tokenizer_pre.def"
#undef BP_PRE
};

bool bp_pretok_lookup(const char *name, bp_pretok_kind *kind, bool *ignore_merges, bool *add_bos) {
    for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++) {
        if (strcmp(pre_table[i].name, name) == 0) {
            *kind = pre_table[i].kind;
            *ignore_merges = pre_table[i].ignore_merges;
            *add_bos = pre_table[i].add_bos;
            return true;
        }
    }
    return false;
}

const char *bp_tokenizer_pre_names(void) {
    return ""
#define BP_PRE(NAME, KIND, IGN, BOS) NAME ", "
#include "text/tokenizer_pre.def"
#undef BP_PRE
        ;
}

enum { LNW = BP_UC_LETTER | BP_UC_NUMBER | BP_UC_WHITESPACE };

size_t bp_pretok_contraction(bp_pretok_fold fold, const uint32_t *c, size_t i, size_t n) {
    if (i + 1 >= n || c[i] != '\'') return 0; /* i may be n (the o200k scanner asks at a word's end) */
    uint32_t a = c[i + 1], b = i + 2 < n ? c[i + 2] : 0;
    if (fold == BP_FOLD_ASCII) {
        /* non-ASCII never matches; ASCII letters fold (0x20 is the case bit) */
        a = a < 0x80 ? a | 0x20 : 0, b = b < 0x80 ? b | 0x20 : 0;
    } else if (fold == BP_FOLD_TO_ASCII) {
        a = bp_unicode_lower_to_ascii(a);
        b = bp_unicode_lower_to_ascii(b);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 < n && ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')))
        return 3;
    return 0;
}

static inline bool is_nl(uint32_t c) { return c == '\r' || c == '\n'; }

/* End of the word starting at i (> i). fl(j) is 0 past the end, as llama.cpp's out-of-range
 * flags are, which is what stops every run. */
static size_t word_end(bp_pretok_kind kind, const uint32_t *c, const uint16_t *flags, size_t i,
                       size_t n) {
#define FL(j) ((j) < n ? flags[j] : 0u)
    size_t k = bp_pretok_contraction(kind == BP_PRETOK_GPT2 ? BP_FOLD_EXACT : BP_FOLD_TO_ASCII, c, i, n);
    if (k) return i + k;
    unsigned f = flags[i];
    size_t j;
    if (kind == BP_PRETOK_GPT2) {
        /* " ?X+" for X = letters, digits, then "other": the optional space joins the run. */
        unsigned f2 = c[i] == ' ' ? FL(i + 1) : f;
        j = i + (c[i] == ' ');
        if (f2 & BP_UC_LETTER) {
            while (FL(j) & BP_UC_LETTER) j++;
            return j;
        }
        if (f2 & BP_UC_NUMBER) {
            while (FL(j) & BP_UC_NUMBER) j++;
            return j;
        }
        if (f2 && !(f2 & LNW)) {
            while (FL(j) && !(FL(j) & LNW)) j++;
            return j;
        }
    } else {
        /* "[^\r\n\p{L}\p{N}]?\p{L}+": any one such character may lead a letter run. */
        unsigned let = kind == BP_PRETOK_QWEN35 ? BP_UC_LETTER | BP_UC_MARK : BP_UC_LETTER;
        if (!is_nl(c[i]) && !(f & BP_UC_NUMBER) && ((f & let) || (FL(i + 1) & let))) {
            j = i + 1;
            while (FL(j) & let) j++;
            return j;
        }
        if (f & BP_UC_NUMBER) {
            size_t max = kind == BP_PRETOK_LLAMA3 ? 3 : 1;
            j = i + 1;
            while (j - i < max && (FL(j) & BP_UC_NUMBER)) j++;
            return j;
        }
        /* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
        unsigned stop = LNW | (let & BP_UC_MARK);
        unsigned f2 = c[i] == ' ' ? FL(i + 1) : f;
        if (!(f2 & stop)) {
            j = i + (c[i] == ' ');
            while (FL(j) && !(FL(j) & stop)) j++;
            while (j < n && is_nl(c[j])) j++;
            return j;
        }
    }
    /* Whitespace: "\s*[\r\n]+" (not GPT2), then "\s+(?!\S)", then "\s+". */
    size_t ws = 0, last_nl = 0;
    while (FL(i + ws) & BP_UC_WHITESPACE) {
        if (kind != BP_PRETOK_GPT2 && is_nl(c[i + ws])) last_nl = i + ws + 1;
        ws++;
    }
    if (last_nl) return last_nl;
    if (ws > 1 && i + ws < n) return i + ws - 1; /* leave the last space to the next word */
    if (ws > 0) return i + ws;
    return i + 1;
#undef FL
}

size_t bp_pretok_words(bp_pretok_kind kind, const uint32_t *c, const uint16_t *flags, size_t n,
                       uint32_t base, uint32_t *ends) {
    if (kind == BP_PRETOK_GPT4O) return bp_pretok_words_o200k(c, flags, n, base, ends);
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        size_t e = word_end(kind, c, flags, i, n);
        ends[count++] = base + (uint32_t)e;
        i = e;
    }
    return count;
}
