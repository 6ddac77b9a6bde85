/* The BPE pre-tokenizers as llama.cpp runs them: a chain of regexes, each splitting every
 * piece left by the ones before it into its matches and the gaps between them (both kept as
 * pieces). The chains, from llama-vocab.cpp (commit 0c1e570), are the `chains` table below;
 * a chain of one big regex is one of the word scanners of tokenizer_pretok.c.
 *
 * How llama.cpp matches a regex decides the classes here. The big GPT-2/Llama-3/Qwen regexes
 * run through its hand-written matchers (our scanners). The others go to std::regex:
 *   - one with \p{..} runs on a copy of the text where each non-ASCII code point is one byte
 *     standing for its category (non-ASCII whitespace first, as \v), so a non-ASCII code point
 *     is in \p{X} only when it is not White_Space and its category is X, and ASCII matches by
 *     the category lists, which agree with Unicode's for ASCII;
 *   - one without runs on the code points (std::wregex), non-ASCII whitespace again replaced
 *     by \v: a class of explicit ranges (the DeepSeek ones) never holds U+3000 or U+2028.
 * \s is then White_Space exactly (ASCII \t..\r and space, and the \v stand-ins). ECMAScript
 * semantics: leftmost match, greedy quantifiers; for the shapes here ("X+", "X", "\s?X+",
 * "\s+$", "[0-9]{3}") that is what the scans below do, within the piece (a regex never sees
 * past a piece's ends). */
#include <string.h>

#include "text/tokenizer_internal.h"
#include "text/unicode.h"

static inline bool ws(unsigned f) { return f & BP_UC_WHITESPACE; }
/* The category of c as \p{X} sees it (0 for non-ASCII whitespace: the \v stand-in). */
static inline unsigned cat(uint32_t c, unsigned f) { return c >= 0x80 && ws(f) ? 0 : f & 0xFF; }
/* c as std::wregex sees it. */
static inline uint32_t wide(uint32_t c, unsigned f) { return c >= 0x80 && ws(f) ? 0x0B : c; }

typedef bool (*cls_fn)(uint32_t c, unsigned f);

static bool in_ranges(uint32_t c, const uint32_t (*r)[2], size_t n) {
    for (size_t i = 0; i < n; i++)
        if (c >= r[i][0] && c <= r[i][1]) return true;
    return false;
}

/* [\p{P}\$\+<=>\^~\|] (default) and the same with ` (falcon): every printable ASCII
 * character that is not a letter or digit, less ` for default; non-ASCII \p{P}. */
static bool punct_default(uint32_t c, unsigned f) {
    if (c < 0x80) return c > 0x20 && c < 0x7F && !(f & (BP_UC_LETTER | BP_UC_NUMBER)) && c != '`';
    return cat(c, f) == BP_UC_PUNCT;
}
static bool punct_falcon(uint32_t c, unsigned f) { return c == '`' || punct_default(c, f); }
static bool number(uint32_t c, unsigned f) { return cat(c, f) == BP_UC_NUMBER; }  /* \p{N} */
static bool letter(uint32_t c, unsigned f) { return cat(c, f) == BP_UC_LETTER; }  /* \p{L} */
static bool punct(uint32_t c, unsigned f) { return cat(c, f) == BP_UC_PUNCT; }    /* \p{P} */
static bool cr_lf(uint32_t c, unsigned f) { (void)f; return c == '\r' || c == '\n'; } /* [\r\n] */
static bool lf(uint32_t c, unsigned f) { (void)f; return c == '\n'; }                 /* [\n] */

/* DeepSeek-LLM's letter class, as its regex writes it: A-Za-zµÀ-ÖØ-öø-ƺ ... 𞤀-𞥃. */
static const uint32_t deepseek_letters[][2] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6}, {0x00F8, 0x01BA},
    {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373}, {0x0376, 0x0376}, {0x0377, 0x0377},
    {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A}, {0x038C, 0x038C}, {0x038E, 0x03A1},
    {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F}, {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5},
    {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A},
    {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4},
    {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D},
    {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139},
    {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2183}, {0x2184, 0x2184}, {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF2}, {0x2CF3, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B},
    {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
/* DeepSeek-LLM's punctuation class: !-/ :-~ (which holds the ASCII letters too) ！-／ ：-～ ‘-‟ 　-。 */
static const uint32_t deepseek_punct[][2] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
/* Both DeepSeeks' CJK class: 一-龥 ࠀ-一 가-퟿ (the second range really starts at U+0800). */
static const uint32_t deepseek_cjk[][2] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
static bool ds_letter(uint32_t c, unsigned f) { return in_ranges(wide(c, f), deepseek_letters, N_OF(deepseek_letters)); }
static bool ds_punct(uint32_t c, unsigned f) { return in_ranges(wide(c, f), deepseek_punct, N_OF(deepseek_punct)); }
static bool ds_cjk(uint32_t c, unsigned f) { return in_ranges(wide(c, f), deepseek_cjk, N_OF(deepseek_cjk)); }

/* The shapes of regex a chain is made of. */
typedef enum step_op {
    RUNS,     /* X+ */
    ONE,      /* X: each match one code point */
    WS_RUNS,  /* \s?X+ (no X holds whitespace, so the optional space never has to give way) */
    TRAIL_WS, /* \s+$: the whitespace that ends the piece */
    DIGIT3,   /* [0-9][0-9][0-9] */
    WORDS,    /* one big regex: a word scanner of tokenizer_pretok.c */
} step_op;

typedef struct step {
    step_op op;
    cls_fn in;            /* X */
    bp_pretok_kind words; /* WORDS: which scanner */
} step;

typedef struct chain {
    bp_pretok_kind kind;
    int n;
    step steps[6];
} chain;

#define S(OP, IN) {OP, IN, BP_PRETOK_NONE}
#define W(KIND) {WORDS, NULL, BP_PRETOK_##KIND}
static const chain chains[] = {
    {BP_PRETOK_DEFAULT, 4, {S(RUNS, punct_default), W(GPT2), S(RUNS, number), S(DIGIT3, NULL)}},
    {BP_PRETOK_FALCON, 3, {S(RUNS, punct_falcon), W(GPT2), S(DIGIT3, NULL)}},
    {BP_PRETOK_STARCODER, 2, {S(ONE, number), W(GPT2)}},
    {BP_PRETOK_DEEPSEEK_LLM, 6,
     {S(ONE, cr_lf), S(WS_RUNS, ds_letter), S(WS_RUNS, ds_punct), S(TRAIL_WS, NULL), S(RUNS, ds_cjk), S(RUNS, number)}},
    {BP_PRETOK_DEEPSEEK_CODER, 5,
     {S(ONE, cr_lf), S(WS_RUNS, letter), S(WS_RUNS, punct), S(RUNS, ds_cjk), S(ONE, number)}},
    {BP_PRETOK_GEMMA4, 1, {S(RUNS, lf)}},
};
#undef S
#undef W

/* Matches of X+ (or of X one at a time) in [s, e) and the gaps between them, as ends. */
static size_t split_class(cls_fn in, bool one, const uint32_t *c, const uint16_t *fl, size_t s, size_t e,
                          uint32_t *ends) {
    size_t count = 0;
    for (size_t i = s; i < e;) {
        bool m = in(c[i], fl[i]);
        size_t j = i + 1;
        if (!m || !one)
            while (j < e && in(c[j], fl[j]) == m) j++;
        ends[count++] = (uint32_t)j;
        i = j;
    }
    return count;
}

/* Matches of \s?X+ in [s, e) and the gaps. */
static size_t split_ws_runs(cls_fn in, const uint32_t *c, const uint16_t *fl, size_t s, size_t e, uint32_t *ends) {
    size_t count = 0, gap = s;
    for (size_t i = s; i < e;) {
        size_t j = i + (ws(fl[i]) && i + 1 < e && in(c[i + 1], fl[i + 1]));
        if (!in(c[j], fl[j])) {
            i++;
            continue;
        }
        if (i > gap) ends[count++] = (uint32_t)i;
        while (j < e && in(c[j], fl[j])) j++;
        ends[count++] = (uint32_t)j;
        gap = i = j;
    }
    if (e > gap) ends[count++] = (uint32_t)e;
    return count;
}

/* \s+$ in [s, e): the piece before its trailing whitespace, then that whitespace. */
static size_t split_trail_ws(const uint16_t *fl, size_t s, size_t e, uint32_t *ends) {
    size_t q = e, count = 0;
    while (q > s && ws(fl[q - 1])) q--;
    if (q > s) ends[count++] = (uint32_t)q;
    if (q < e) ends[count++] = (uint32_t)e;
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

static size_t split_step(const step *st, const uint32_t *c, const uint16_t *fl, size_t s, size_t e, uint32_t *ends) {
    switch (st->op) {
    case RUNS: return split_class(st->in, false, c, fl, s, e, ends);
    case ONE: return split_class(st->in, true, c, fl, s, e, ends);
    case WS_RUNS: return split_ws_runs(st->in, c, fl, s, e, ends);
    case TRAIL_WS: return split_trail_ws(fl, s, e, ends);
    case DIGIT3: return split_digit3(c, s, e, ends);
    case WORDS: return bp_pretok_words(st->words, c + s, fl + s, e - s, (uint32_t)s, ends);
    }
    return 0;
}

size_t bp_pretok_split(bp_pretok_kind kind, const uint32_t *cpts, const uint16_t *flags, size_t n,
                       uint32_t *ends, uint32_t *scratch) {
    if (n == 0) return 0;
    const chain *ch = NULL;
    for (size_t i = 0; i < N_OF(chains); i++)
        if (chains[i].kind == kind) ch = &chains[i];
    if (!ch) return bp_pretok_words(kind, cpts, flags, n, 0, ends);
    /* Each step reads the pieces of the one before from one buffer and writes the other; a
     * step never makes more pieces than code points, so each buffer's room for n is enough. */
    uint32_t *cur = scratch, *next = ends;
    size_t m = 1;
    cur[0] = (uint32_t)n;
    for (int k = 0; k < ch->n; k++) {
        size_t w = 0;
        for (size_t i = 0, s = 0; i < m; s = cur[i++]) w += split_step(&ch->steps[k], cpts, flags, s, cur[i], next + w);
        uint32_t *t = cur;
        cur = next;
        next = t;
        m = w;
    }
    if (cur != ends) memcpy(ends, cur, m * sizeof *ends);
    return m;
}
