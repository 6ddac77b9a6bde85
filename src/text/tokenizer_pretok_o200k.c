/* The gpt-4o (o200k) pre-tokenizer as llama.cpp runs it (llama-vocab.cpp, commit 0c1e570, the
 * names gpt-4o, llama4, kanana2, talkie). The file's regex needs \p{Lu}/\p{Ll}, which llama.cpp
 * cannot match, so it splits with an approximation instead:
 *
 *   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?
 *  |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|...|'[dD])?
 *  |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * No hand-written matcher of llama.cpp takes it, so std::regex runs it on the "collapsed" text
 * (unicode.cpp): ASCII stays itself and each other code point becomes one byte for its class
 * (White_Space first, as \v; then letter, number, or one byte for everything else), and \p{L} in
 * the regex becomes [<letter byte>A-Za-z]. So for the ids to be llama.cpp's:
 *   "upper" ((?=\p{L})[^a-z])  is A-Z or any non-ASCII letter,
 *   "lower" ((?=\p{L})[^A-Z])  is a-z or any non-ASCII letter (so those are both),
 *   \s is ASCII \t..\r and space, plus non-ASCII White_Space; contractions are ASCII only.
 * ECMAScript takes the first alternative that matches, each quantifier greedy with
 * backtracking; scan() below is the outcome of that search, worked out per alternative (no
 * regex engine): see the comments at each step. */
#include "text/tokenizer_internal.h"
#include "text/unicode.h"

/* The classes a code point falls in, as the collapsed text shows it to the regex. */
enum { LOW = 1, UP = 2, NL = 4, DIG = 8, WS = 16, OTHER = 32 };
enum { LETTER = LOW | UP | NL, UPPER = UP | NL, LOWER = LOW | NL };

static unsigned cls(uint32_t c, unsigned f) {
    if (c < 0x80) {
        if (c >= 'a' && c <= 'z') return LOW;
        if (c >= 'A' && c <= 'Z') return UP;
        if (c >= '0' && c <= '9') return DIG;
        return (c >= 0x09 && c <= 0x0D) || c == ' ' ? WS : OTHER;
    }
    if (f & BP_UC_WHITESPACE) return WS;
    if (f & BP_UC_LETTER) return NL;
    return f & BP_UC_NUMBER ? DIG : OTHER;
}

static inline bool is_nl(uint32_t c) { return c == '\r' || c == '\n'; }

/* End of the word starting at i (< n, so the result is > i). */
static size_t scan(const uint32_t *c, const uint16_t *flags, size_t i, size_t n) {
#define K(j) cls(c[j], flags[j])
    /* The two letter alternatives. The optional lead [^\r\n\p{L}\p{N}] is taken when a letter
     * follows it; without one after it neither alternative can match from i. */
    size_t p = i;
    if (!is_nl(c[i]) && !(K(i) & (LETTER | DIG)) && i + 1 < n && (K(i + 1) & LETTER)) p = i + 1;
    if (K(p) & LETTER) {
        size_t u = 0;
        while (p + u < n && (K(p + u) & UPPER)) u++;
        /* First alternative, upper* lower+: the greedy upper* gives back code points until a
         * lower one can start lower+: a-z right after the upper run, else the last non-ASCII
         * letter inside it (both classes at once). lower+ then runs as far as it goes. */
        size_t q = n;
        if (p + u < n && K(p + u) == LOW) q = p + u;
        for (size_t j = u; q == n && j-- > 0;)
            if (K(p + j) == NL) q = p + j;
        size_t e;
        if (q < n) {
            e = q;
            while (e < n && (K(e) & LOWER)) e++;
        } else {
            /* Second alternative, upper+ lower*: reached only when the run holds no non-ASCII
             * letter and no a-z follows it, so lower* is empty and the word is the run. */
            e = p + u;
        }
        return e + bp_pretok_contraction(BP_FOLD_ASCII, c, e, n); /* a non-ASCII code point: one collapsed byte */
    }
    if (K(i) == DIG) { /* \p{N}{1,3} */
        size_t j = i + 1;
        while (j < n && j - i < 3 && K(j) == DIG) j++;
        return j;
    }
    /* " ?[^\s\p{L}\p{N}]+[\r\n/]*": the space joins only when such a code point follows it. */
    size_t j = i + (c[i] == ' ' && i + 1 < n && K(i + 1) == OTHER);
    if (K(j) == OTHER) {
        while (j < n && K(j) == OTHER) j++;
        while (j < n && (is_nl(c[j]) || c[j] == '/')) j++;
        return j;
    }
    /* Whitespace (K(i) == WS here): "\s*[\r\n]+" ends after the run's last newline; else
     * "\s+(?!\S)" leaves the run's last code point to the word after it; "\s+" a lone one. */
    size_t w = 0, last_nl = 0;
    while (i + w < n && K(i + w) == WS) {
        if (is_nl(c[i + w])) last_nl = i + w + 1;
        w++;
    }
    if (last_nl) return last_nl;
    if (w > 1 && i + w < n) return i + w - 1;
    return i + (w ? w : 1);
#undef K
}

size_t bp_pretok_words_o200k(const uint32_t *c, const uint16_t *flags, size_t n, uint32_t base, uint32_t *ends) {
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        size_t e = scan(c, flags, i, n);
        ends[count++] = base + (uint32_t)e;
        i = e;
    }
    return count;
}
