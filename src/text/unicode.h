/* Unicode facts for the tokenizers: UTF-8 decoding as llama.cpp does it (the token ids we must
 * reproduce depend on its exact leniency), the category flags of a code point, its simple
 * lowercase and the first code point of its NFD, from the generated tables in unicode_data.c,
 * unicode_lower_data.c and unicode_nfd_data.c (src/text/unicode_gen.py, Unicode 15.1). */
#ifndef BP_MODEL_UNICODE_H
#define BP_MODEL_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Flag bits of a code point: one general-category class, plus White_Space. The generator
 * writes the same values (test_unicode_tables checks a sample against known characters). */
enum {
    BP_UC_UNDEFINED = 0x001,  /* Cn, and anything past U+10FFFF */
    BP_UC_NUMBER = 0x002,     /* \p{N} */
    BP_UC_LETTER = 0x004,     /* \p{L} */
    BP_UC_SEPARATOR = 0x008,  /* \p{Z} */
    BP_UC_MARK = 0x010,       /* \p{M} */
    BP_UC_PUNCT = 0x020,      /* \p{P} */
    BP_UC_SYMBOL = 0x040,     /* \p{S} */
    BP_UC_CONTROL = 0x080,    /* \p{C} except Cn */
    BP_UC_WHITESPACE = 0x100, /* the White_Space property: what \s matches */
};

extern const uint32_t bp_unicode_ranges[];
extern const size_t bp_unicode_ranges_count;
extern const uint32_t bp_unicode_lower[][2];
extern const size_t bp_unicode_lower_count;
extern const uint32_t bp_unicode_nfd[][3];
extern const size_t bp_unicode_nfd_count;

/* Flags of a code point (never 0). */
unsigned bp_unicode_flags(uint32_t cpt);
/* ASCII lowercase of cpt when cpt is an ASCII letter or a code point whose lowercase is one
 * (U+0130 -> 'i', U+212A KELVIN SIGN -> 'k'); otherwise cpt unchanged. */
uint32_t bp_unicode_lower_to_ascii(uint32_t cpt);
/* Simple lowercase of cpt (one code point; cpt itself when it has none). */
uint32_t bp_unicode_tolower(uint32_t cpt);
/* First code point of cpt's canonical decomposition (U+00E9 -> 'e'; cpt when it has none). */
uint32_t bp_unicode_nfd_first(uint32_t cpt);

/* Bytes in the UTF-8 sequence that byte b starts, from its top four bits alone (1 for a
 * continuation byte): how SentencePiece-style tokenizers split text into symbols. */
static inline size_t bp_utf8_len(uint8_t b) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[b >> 4];
}

/* Decode one code point at s[*pos] (pos < n) and advance *pos. Lenient the way llama.cpp is:
 * overlong forms and surrogates decode; a bad lead byte, a missing or wrong continuation byte
 * or a value past U+10FFFF gives U+FFFD and advances one byte. */
uint32_t bp_utf8_decode(const uint8_t *s, size_t n, size_t *pos);
/* Encode cpt (<= 0x10FFFF) into out[0..3]; returns the byte count. */
size_t bp_utf8_encode(uint32_t cpt, uint8_t out[4]);

#endif
