/* Internal error reporting: every failure path sets a per-thread message and returns a code. */
#ifndef BP_CORE_ERROR_H
#define BP_CORE_ERROR_H

#include "backplane.h"

#if defined(__GNUC__)
#define BP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define BP_PRINTF(a, b)
#endif

/* Record `s` with a formatted message for bp_last_error() and return `s`, so a failure path
 * is one line: `return bp_fail(BP_E_SHAPE, "row of %lld ...", n);` */
bp_status bp_fail(bp_status s, const char *fmt, ...) BP_PRINTF(2, 3);

/* Overflow-checked arithmetic on sizes; return false on overflow (result unspecified). */
static inline bool bp_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool bp_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

#endif
