/* Stopping a generation (backplane_tokenizer.h): stop strings found across token boundaries,
 * max tokens, end-of-generation. The generated text that is not yet shown is kept in `pend`:
 * after each token, everything before the earliest stop string (if one is complete) or before
 * the longest tail that could still begin one (or an unfinished UTF-8 sequence) is shown. */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "backplane.h"

struct bp_stopper {
    char **stops;
    size_t *stop_len;
    int32_t n_stops;
    int64_t max_tokens, count;
    bp_stop_reason done;
    char *pend;          /* text held back */
    size_t pend_n, pend_cap;
    char *out;           /* what the last push shows */
    size_t out_cap;
};

void bp_stopper_free(bp_stopper *s) {
    if (!s) return;
    for (int32_t i = 0; s->stops && i < s->n_stops; i++) bp_free(s->stops[i]);
    bp_free(s->stops);
    bp_free(s->stop_len);
    bp_free(s->pend);
    bp_free(s->out);
    bp_free(s);
}

bp_status bp_stopper_create(const char *const *stops, int32_t n_stops, int64_t max_tokens, bp_stopper **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_stopper_create: out is NULL");
    *out = NULL;
    if (n_stops < 0 || (n_stops > 0 && !stops)) return bp_fail(BP_E_INVAL, "bp_stopper_create: %d stops", (int)n_stops);
    for (int32_t i = 0; i < n_stops; i++)
        if (!stops[i] || !stops[i][0]) return bp_fail(BP_E_INVAL, "bp_stopper_create: stop string %d is empty", (int)i);
    bp_stopper *s = bp_calloc(1, sizeof *s);
    if (!s) return bp_fail(BP_E_NOMEM, "bp_stopper_create: no memory");
    s->max_tokens = max_tokens;
    s->n_stops = n_stops;
    if (n_stops) {
        s->stops = bp_calloc((size_t)n_stops, sizeof *s->stops);
        s->stop_len = bp_calloc((size_t)n_stops, sizeof *s->stop_len);
        if (!s->stops || !s->stop_len) goto nomem;
        for (int32_t i = 0; i < n_stops; i++) {
            s->stop_len[i] = strlen(stops[i]);
            if (!(s->stops[i] = bp_malloc(s->stop_len[i] + 1))) goto nomem;
            memcpy(s->stops[i], stops[i], s->stop_len[i] + 1);
        }
    }
    *out = s;
    return BP_OK;
nomem:
    bp_stopper_free(s);
    return bp_fail(BP_E_NOMEM, "bp_stopper_create: no memory");
}

static bool grow(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    char *q = bp_realloc(*p, n);
    if (!q) return false;
    *p = q, *cap = n;
    return true;
}

/* Bytes at the end of p[0..n) that start a UTF-8 sequence not yet complete. */
static size_t utf8_unfinished(const char *p, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)p[n - back];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return want > back ? back : 0;
    }
    return 0;
}

/* Show p[0..k) and keep p[k..pend_n). */
static void show(bp_stopper *s, size_t k, const char **emit, size_t *emit_len) {
    if (!grow(&s->out, &s->out_cap, k + 1)) k = 0; /* no memory: show nothing now, keep it */
    if (k) memcpy(s->out, s->pend, k);
    if (s->pend_n > k) memmove(s->pend, s->pend + k, s->pend_n - k);
    s->pend_n -= k;
    *emit = s->out ? s->out : "";
    *emit_len = k;
}

bp_stop_reason bp_stopper_push(bp_stopper *s, const char *piece, size_t n, bool eog, const char **emit,
                               size_t *emit_len) {
    static const char empty[] = "";
    *emit = empty, *emit_len = 0;
    if (!s) return BP_STOP_NONE;
    if (s->done) return s->done;
    s->count++;
    if (!eog && n && piece) {
        if (!grow(&s->pend, &s->pend_cap, s->pend_n + n)) {
            s->done = BP_STOP_LENGTH; /* out of memory: end the generation rather than lose text silently */
            return s->done;
        }
        memcpy(s->pend + s->pend_n, piece, n);
        s->pend_n += n;
    }
    /* the earliest complete stop string ends it; the text before it is shown */
    size_t first = SIZE_MAX;
    for (int32_t i = 0; i < s->n_stops; i++) {
        const size_t L = s->stop_len[i];
        for (size_t at = 0; L <= s->pend_n && at + L <= s->pend_n && at < first; at++)
            if (!memcmp(s->pend + at, s->stops[i], L)) {
                first = at;
                break;
            }
    }
    if (first != SIZE_MAX) {
        show(s, first, emit, emit_len);
        s->pend_n = 0;
        return s->done = BP_STOP_STRING;
    }
    if (eog || (s->max_tokens > 0 && s->count >= s->max_tokens)) {
        show(s, s->pend_n, emit, emit_len);
        return s->done = eog ? BP_STOP_EOG : BP_STOP_LENGTH;
    }
    /* hold the longest tail that is a proper prefix of some stop string */
    size_t hold = 0;
    for (int32_t i = 0; i < s->n_stops; i++)
        for (size_t k = s->stop_len[i] - 1; k > hold; k--)
            if (k <= s->pend_n && !memcmp(s->pend + s->pend_n - k, s->stops[i], k)) {
                hold = k;
                break;
            }
    size_t u = utf8_unfinished(s->pend, s->pend_n);
    if (u > hold) hold = u;
    show(s, s->pend_n - hold, emit, emit_len);
    return BP_STOP_NONE;
}

int64_t bp_stopper_count(const bp_stopper *s) { return s ? s->count : 0; }

const char *bp_stop_reason_name(bp_stop_reason r) {
    switch (r) {
    case BP_STOP_EOG:
    case BP_STOP_STRING: return "stop";
    case BP_STOP_LENGTH: return "length";
    case BP_STOP_NONE: break;
    }
    return NULL;
}
