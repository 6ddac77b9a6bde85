#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* One buffer per thread: a worker's failure never overwrites the message another thread is
 * about to print. */
static _Thread_local char last_error[1024];

bp_status bp_fail(bp_status s, const char *fmt, ...) {
    /* Formatted aside first: callers pass bp_last_error() itself as an argument ("...: %s"), and
     * formatting a buffer into itself is undefined (valgrind: "source and destination overlap"). */
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    return s;
}

const char *bp_last_error(void) { return last_error; }

void bp_clear_error(void) { last_error[0] = '\0'; }

const char *bp_status_name(bp_status s) {
    switch (s) {
    case BP_OK: return "BP_OK";
    case BP_E_INVAL: return "BP_E_INVAL";
    case BP_E_KIND: return "BP_E_KIND";
    case BP_E_SHAPE: return "BP_E_SHAPE";
    case BP_E_NOMEM: return "BP_E_NOMEM";
    case BP_E_IO: return "BP_E_IO";
    case BP_E_FORMAT: return "BP_E_FORMAT";
    case BP_E_DEVICE: return "BP_E_DEVICE";
    case BP_E_UNSUPPORTED: return "BP_E_UNSUPPORTED";
    case BP_E_NOT_FOUND: return "BP_E_NOT_FOUND";
    case BP_E_DEVICE_LOST: return "BP_E_DEVICE_LOST";
    case BP_E_FALLBACK: return "BP_E_FALLBACK";
    }
    return "BP_E_UNKNOWN";
}
