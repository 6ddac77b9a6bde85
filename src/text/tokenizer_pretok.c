/* Pre-tokenizers of byte-level BPE vocabularies: split a fragment's code points into words
 * the way the regex the vocabulary names does (tokenizer_internal.h quotes them). One scanner
 * covers the three families; they differ in four places, switched by `kind`:
 *   contractions    GPT2 case-sensitive; LLAMA3/QWEN2 case-insensitive
 *   letter run      GPT2 " ?\p{L}+"; others "[^\r\n\p{L}\p{N}]?\p{L}+"
 *   digit run       GPT2 " ?\p{N}+"; LLAMA3 up to 3 digits; QWEN2 1 digit
 *   newlines        LLAMA3/QWEN2: punctuation takes trailing [\r\n]*, and "\s*[\r\n]+"
 * The behaviour at the edges follows llama.cpp's hand-written matchers, which the reference
 * ids come from (e.g. a lone space before a digit is its own word). */
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

/* Length of a contraction ('s 't 'm 'd 're 've 'll) starting at i, or 0. */
static size_t contraction(bp_pretok_kind kind, const uint32_t *c, size_t i, size_t n) {
    if (c[i] != '\'' || i + 1 >= n) return 0;
    uint32_t a = c[i + 1], b = i + 2 < n ? c[i + 2] : 0;
    if (kind == BP_PRETOK_LLAMA3 || kind == BP_PRETOK_QWEN2) {
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
    size_t k = contraction(kind, c, i, n);
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
        if (!is_nl(c[i]) && !(f & BP_UC_NUMBER) && ((f & BP_UC_LETTER) || (FL(i + 1) & BP_UC_LETTER))) {
            j = i + 1;
            while (FL(j) & BP_UC_LETTER) j++;
            return j;
        }
        if (f & BP_UC_NUMBER) {
            size_t max = kind == BP_PRETOK_LLAMA3 ? 3 : 1;
            j = i + 1;
            while (j - i < max && (FL(j) & BP_UC_NUMBER)) j++;
            return j;
        }
        /* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
        unsigned f2 = c[i] == ' ' ? FL(i + 1) : f;
        if (!(f2 & LNW)) {
            j = i + (c[i] == ' ');
            while (FL(j) && !(FL(j) & LNW)) j++;
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

/* Split [0, n) into words of `kind` (GPT2 / LLAMA3 / QWEN2), appending their ends. */
static size_t split_words(bp_pretok_kind kind, const uint32_t *c, const uint16_t *flags, size_t n,
                          uint32_t base, uint32_t *ends) {
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        size_t e = word_end(kind, c, flags, i, n);
        ends[count++] = base + (uint32_t)e;
        i = e;
    }
    return count;
}

/* ---- llama.cpp's "default" BPE pre-tokenizer: four regexes in turn, each splitting every
 * segment so far into its matches and the gaps between them (both kept):
 *   1. [\p{P}\$\+<=>\^~\|]+   2. the GPT-2 regex   3. \p{N}+   4. [0-9][0-9][0-9]
 * llama.cpp runs 1, 3 and 4 through std::regex on a copy of the text where each non-ASCII code
 * point is replaced by a byte standing for its category (whitespace first), so a non-ASCII
 * code point matches \p{P} (\p{N}) only when its one category class is P (N) and it is not
 * White_Space; ASCII characters match by their own class lists. ---- */

static bool default_punct(uint32_t c, unsigned f) {
    if (c < 0x80) return c > 0x20 && c < 0x7F && !(c >= '0' && c <= '9') && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && c != '`';
    return !(f & BP_UC_WHITESPACE) && (f & 0xFF) == BP_UC_PUNCT;
}

static bool default_number(uint32_t c, unsigned f) {
    if (c < 0x80) return c >= '0' && c <= '9';
    return !(f & BP_UC_WHITESPACE) && (f & 0xFF) == BP_UC_NUMBER;
}

/* Matches of a run class within [s, e) and the gaps between them, as ends. */
static size_t split_runs(bool (*in)(uint32_t, unsigned), const uint32_t *c, const uint16_t *flags, size_t s,
                         size_t e, uint32_t *ends) {
    size_t count = 0;
    for (size_t i = s; i < e;) {
        bool m = in(c[i], flags[i]);
        size_t j = i + 1;
        while (j < e && in(c[j], flags[j]) == m) j++;
        ends[count++] = (uint32_t)j;
        i = j;
    }
    return count;
}

/* Matches of [0-9][0-9][0-9] (leftmost, non-overlapping) within [s, e) and the gaps. */
static size_t split_digit3(const uint32_t *c, size_t s, size_t e, uint32_t *ends) {
    size_t count = 0, gap = s;
    for (size_t i = s; i < e;) {
        bool m = i + 2 < e;
        for (size_t k = 0; m && k < 3; k++) m = c[i + k] >= '0' && c[i + k] <= '9';
        if (!m) {
            i++;
            continue;
        }
        if (i > gap) ends[count++] = (uint32_t)i;
        ends[count++] = (uint32_t)(i + 3);
        gap = i = i + 3;
    }
    if (e > gap) ends[count++] = (uint32_t)e;
    return count;
}

static size_t split_default(const uint32_t *c, const uint16_t *flags, size_t n, uint32_t *ends, uint32_t *tmp) {
    size_t k = split_runs(default_punct, c, flags, 0, n, tmp), m = 0;
    for (size_t i = 0, s = 0; i < k; s = tmp[i++])
        m += split_words(BP_PRETOK_GPT2, c + s, flags + s, tmp[i] - s, (uint32_t)s, ends + m);
    k = 0;
    for (size_t i = 0, s = 0; i < m; s = ends[i++]) k += split_runs(default_number, c, flags, s, ends[i], tmp + k);
    m = 0;
    for (size_t i = 0, s = 0; i < k; s = tmp[i++]) m += split_digit3(c, s, tmp[i], ends + m);
    return m;
}

size_t bp_pretok_split(bp_pretok_kind kind, const uint32_t *cpts, const uint16_t *flags, size_t n,
                       uint32_t *ends, uint32_t *scratch) {
    if (kind == BP_PRETOK_DEFAULT) return split_default(cpts, flags, n, ends, scratch);
    return split_words(kind, cpts, flags, n, 0, ends);
}
