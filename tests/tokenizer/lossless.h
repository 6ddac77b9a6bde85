/* When decode(encode(s)) == s must hold, for the tokenizer tests and the fuzz target. */
#ifndef BP_TEST_TOKENIZER_LOSSLESS_H
#define BP_TEST_TOKENIZER_LOSSLESS_H

#include <stdbool.h>
#include <stddef.h>

/* Strict UTF-8 (no overlong forms, no surrogates): byte-level BPE is lossless only on that,
 * since llama.cpp's decoding turns anything else into U+FFFD or re-encodes it. */
static inline bool valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!len || i + len > n) return false;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return false;
        if (len == 3 && c == 0xE0 && s[i + 1] < 0xA0) return false;
        if (len == 3 && c == 0xED && s[i + 1] >= 0xA0) return false;
        if (len == 4 && c == 0xF0 && s[i + 1] < 0x90) return false;
        if (len == 4 && c == 0xF4 && s[i + 1] >= 0x90) return false;
        i += len;
    }
    return true;
}

/* SPM keeps every byte, but two things do not come back: a U+2581 in the text (it is the
 * space marker, so it decodes to a space), and a space right after an invalid lead byte whose
 * sequence length swallows the first bytes of the space's U+2581 (those come back as byte
 * tokens, i.e. as U+2581's bytes). llama.cpp alike. */
static inline bool spm_lossless(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) return false; /* U+2581 itself */
        size_t len = s[i] >= 0xF0 ? 4 : s[i] >= 0xE0 ? 3 : s[i] >= 0xC0 ? 2 : 1;
        for (size_t k = 1; k < len && i + k < n; k++)
            if (s[i + k] == ' ') return false;
    }
    return true;
}

#endif
