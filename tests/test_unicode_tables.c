/* The generated Unicode flags (src/text/unicode_data.c) on characters whose categories are
 * known from the Unicode standard, the table's shape, the lowercase and NFD tables
 * (unicode_lower_data.c, unicode_nfd_data.c) on known characters, and UTF-8 decoding with llama.cpp's
 * leniency (what the BPE pre-tokenizers see). The table itself is checked against its
 * generator by cli_tok_unicode_tables. */
#include "harness.h"
#include "text/unicode.h"

static void flags_are(uint32_t cpt, unsigned want, const char *what) {
    unsigned got = bp_unicode_flags(cpt);
    CHECK(got == want, "U+%04X (%s): flags 0x%03x, want 0x%03x", (unsigned)cpt, what, got, want);
}

int main(void) {
    flags_are('A', BP_UC_LETTER, "Lu");
    flags_are('z', BP_UC_LETTER, "Ll");
    flags_are('7', BP_UC_NUMBER, "Nd");
    flags_are(' ', BP_UC_SEPARATOR | BP_UC_WHITESPACE, "Zs, White_Space");
    flags_are('\n', BP_UC_CONTROL | BP_UC_WHITESPACE, "Cc, White_Space");
    flags_are(0x1C, BP_UC_CONTROL, "Cc, not White_Space");
    flags_are(0x85, BP_UC_CONTROL | BP_UC_WHITESPACE, "NEL");
    flags_are(0xA0, BP_UC_SEPARATOR | BP_UC_WHITESPACE, "NBSP");
    flags_are(0x200B, BP_UC_CONTROL, "ZWSP is Cf, not White_Space");
    flags_are(0x3000, BP_UC_SEPARATOR | BP_UC_WHITESPACE, "ideographic space");
    flags_are('!', BP_UC_PUNCT, "Po");
    flags_are('$', BP_UC_SYMBOL, "Sc");
    flags_are(0x0301, BP_UC_MARK, "Mn");
    flags_are(0x00B2, BP_UC_NUMBER, "No");
    flags_are(0x2165, BP_UC_NUMBER, "Nl");
    flags_are(0x4E00, BP_UC_LETTER, "CJK");
    flags_are(0x1F642, BP_UC_SYMBOL, "emoji So");
    flags_are(0x2EBF0, BP_UC_LETTER, "CJK Ext I, new in 15.1");
    flags_are(0x1C89, BP_UC_UNDEFINED, "new in 16.0: unassigned in 15.1");
    flags_are(0xD800, BP_UC_CONTROL, "Cs");
    flags_are(0xE000, BP_UC_CONTROL, "Co");
    flags_are(0x10FFFF, BP_UC_UNDEFINED, "noncharacter");
    flags_are(0x110000, BP_UC_UNDEFINED, "past the code space");
    CHECK(bp_unicode_ranges_count > 1000 && (bp_unicode_ranges[0] >> 10) == 0, "ranges start at U+0000");
    for (size_t i = 1; i < bp_unicode_ranges_count; i++)
        CHECK((bp_unicode_ranges[i] >> 10) > (bp_unicode_ranges[i - 1] >> 10) &&
                  (bp_unicode_ranges[i] & 0x3FF) != (bp_unicode_ranges[i - 1] & 0x3FF),
              "range %zu ascending and distinct", i);
    CHECK(bp_unicode_lower_to_ascii('Q') == 'q' && bp_unicode_lower_to_ascii(0x130) == 'i' &&
              bp_unicode_lower_to_ascii(0x212A) == 'k' && bp_unicode_lower_to_ascii(0xC9) == 0xC9,
          "lowercase to ASCII");
    CHECK(bp_unicode_tolower('Q') == 'q' && bp_unicode_tolower(0xC9) == 0xE9 && bp_unicode_tolower(0x391) == 0x3B1 &&
              bp_unicode_tolower(0x130) == 'i' && bp_unicode_tolower(0x10400) == 0x10428 &&
              bp_unicode_tolower(0xE9) == 0xE9 && bp_unicode_tolower(0x110000) == 0x110000,
          "simple lowercase");
    CHECK(bp_unicode_nfd_first(0xE9) == 'e' && bp_unicode_nfd_first(0x1E69) == 's' && bp_unicode_nfd_first(0xAC00) == 0x1100 &&
              bp_unicode_nfd_first(0xD7A3) == 0x1112 && bp_unicode_nfd_first('a') == 'a' &&
              bp_unicode_nfd_first(0x4E2D) == 0x4E2D && bp_unicode_nfd_first(0x110000) == 0x110000,
          "first code point of NFD");
    for (size_t i = 1; i < bp_unicode_lower_count; i++)
        CHECK(bp_unicode_lower[i][0] > bp_unicode_lower[i - 1][0], "lowercase pair %zu ascending", i);
    for (size_t i = 1; i < bp_unicode_nfd_count; i++)
        CHECK(bp_unicode_nfd[i][0] > bp_unicode_nfd[i - 1][1] && bp_unicode_nfd[i][0] <= bp_unicode_nfd[i][1],
              "NFD range %zu ascending and disjoint", i);

    static const struct { const char *s; size_t n; uint32_t cpt; size_t adv; } dec[] = {
        {"A", 1, 'A', 1},
        {"\xc3\xa9", 2, 0xE9, 2},
        {"\xe2\x82\xac", 3, 0x20AC, 3},
        {"\xf0\x9f\x99\x82", 4, 0x1F642, 4},
        {"\xc0\xaf", 2, '/', 2},          /* overlong: decoded, as llama.cpp does */
        {"\xed\xa0\x80", 3, 0xD800, 3},   /* surrogate: decoded, as llama.cpp does */
        {"\x80", 1, 0xFFFD, 1},           /* continuation byte as lead */
        {"\xc3(", 2, 0xFFFD, 1},          /* bad continuation */
        {"\xe2\x82", 2, 0xFFFD, 1},       /* truncated */
        {"\xf4\x90\x80\x80", 4, 0xFFFD, 1}, /* past U+10FFFF */
        {"\xf8\x88\x80\x80\x80", 5, 0xFFFD, 1},
    };
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) {
        size_t pos = 0;
        uint32_t c = bp_utf8_decode((const uint8_t *)dec[i].s, dec[i].n, &pos);
        CHECK(c == dec[i].cpt && pos == dec[i].adv, "decode case %zu: U+%04X advancing %zu", i, (unsigned)c, pos);
    }
    uint8_t u[4];
    CHECK(bp_utf8_encode(0x1F642, u) == 4 && u[0] == 0xF0 && u[3] == 0x82, "encode 4 bytes");
    CHECK(bp_utf8_encode(0xE9, u) == 2 && u[0] == 0xC3 && u[1] == 0xA9, "encode 2 bytes");
    return bp_test_finish();
}
