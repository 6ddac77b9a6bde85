/* UTF-8 and code point flags for the tokenizers (see unicode.h). */
#include "unicode.h"

unsigned bp_unicode_flags(uint32_t cpt) {
    if (cpt >= 0x110000) return BP_UC_UNDEFINED;
    /* Last range whose start <= cpt; entry 0 starts at U+0000. */
    size_t lo = 0, hi = bp_unicode_ranges_count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((bp_unicode_ranges[mid] >> 10) <= cpt) lo = mid;
        else hi = mid;
    }
    return bp_unicode_ranges[lo] & 0x3FF;
}

uint32_t bp_unicode_tolower(uint32_t cpt) {
    if (cpt < 0x80) return cpt >= 'A' && cpt <= 'Z' ? cpt + 32 : cpt;
    size_t lo = 0, hi = bp_unicode_lower_count; /* first pair with code point >= cpt */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (bp_unicode_lower[mid][0] < cpt) lo = mid + 1;
        else hi = mid;
    }
    return lo < bp_unicode_lower_count && bp_unicode_lower[lo][0] == cpt ? bp_unicode_lower[lo][1] : cpt;
}

uint32_t bp_unicode_lower_to_ascii(uint32_t cpt) {
    uint32_t low = bp_unicode_tolower(cpt);
    return low >= 'a' && low <= 'z' ? low : cpt;
}

uint32_t bp_unicode_nfd_first(uint32_t cpt) {
    if (cpt < 0xC0) return cpt; /* nothing below U+00C0 decomposes */
    size_t lo = 0, hi = bp_unicode_nfd_count; /* first range ending at or after cpt */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (bp_unicode_nfd[mid][1] < cpt) lo = mid + 1;
        else hi = mid;
    }
    return lo < bp_unicode_nfd_count && bp_unicode_nfd[lo][0] <= cpt ? bp_unicode_nfd[lo][2] : cpt;
}

static inline int cont(uint8_t b) { return (b & 0xC0) == 0x80; }

uint32_t bp_utf8_decode(const uint8_t *s, size_t n, size_t *pos) {
    size_t i = *pos;
    uint8_t b = s[i];
    uint32_t c;
    size_t len;
    if (b < 0x80) { *pos = i + 1; return b; }
    if (b < 0xC0) goto bad; /* a continuation byte cannot start a sequence */
    if (b < 0xE0) {
        if (i + 1 >= n || !cont(s[i + 1])) goto bad;
        c = ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
        len = 2;
    } else if (b < 0xF0) {
        if (i + 2 >= n || !cont(s[i + 1]) || !cont(s[i + 2])) goto bad;
        c = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        len = 3;
    } else if (b < 0xF8) {
        if (i + 3 >= n || !cont(s[i + 1]) || !cont(s[i + 2]) || !cont(s[i + 3])) goto bad;
        c = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
            ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        /* llama.cpp decodes these too but then cannot re-encode them (it throws); we treat
         * them as invalid bytes instead. */
        if (c > 0x10FFFF) goto bad;
        len = 4;
    } else {
        goto bad;
    }
    *pos = i + len;
    return c;
bad:
    *pos = i + 1;
    return 0xFFFD;
}

size_t bp_utf8_encode(uint32_t c, uint8_t out[4]) {
    if (c < 0x80) { out[0] = (uint8_t)c; return 1; }
    if (c < 0x800) {
        out[0] = (uint8_t)(0xC0 | (c >> 6));
        out[1] = (uint8_t)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (c >> 12));
        out[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (c >> 18));
    out[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}
