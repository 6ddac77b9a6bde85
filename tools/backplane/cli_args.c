/* Strict option values, text input read whole with every error checked, and the final check of
 * standard output (see cli_common.h). Before these, numbers went through atoi/atof (`-n abc`
 * was 0 and succeeded, `--ctx 100x` was 100, an overflow came out "negative"), `-f DIRECTORY`
 * read as an empty text, and a write to a full disk exited 0. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_common.h"

static bool bad_value(const char *cmd, const char *opt, const char *v, const char *want) {
    fprintf(stderr, "backplane %s: %s '%s': %s\n", cmd, opt, v ? v : "", want);
    return false;
}

bool bp_cli_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char want[96];
    snprintf(want, sizeof want, "expected an integer in %lld..%lld", lo, hi);
    /* strtoll skips leading space and takes a sign; the whole value must be the number */
    if (!v || !*v || !(v[0] == '-' || v[0] == '+' || (v[0] >= '0' && v[0] <= '9'))) return bad_value(cmd, opt, v, want);
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || end == v) return bad_value(cmd, opt, v, want);
    if (errno == ERANGE || x < lo || x > hi) return bad_value(cmd, opt, v, want);
    *out = x;
    return true;
}

bool bp_cli_u64(const char *cmd, const char *opt, const char *v, unsigned long long *out) {
    const char *want = "expected an integer in 0..18446744073709551615";
    /* no sign: strtoull would take "-1" as 2^64 - 1 */
    if (!v || !(v[0] >= '0' && v[0] <= '9')) return bad_value(cmd, opt, v, want);
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || errno == ERANGE) return bad_value(cmd, opt, v, want);
    *out = x;
    return true;
}

bool bp_cli_float(const char *cmd, const char *opt, const char *v, double lo, double hi, float *out) {
    char want[96];
    snprintf(want, sizeof want, "expected a finite number in %g..%g", lo, hi);
    if (!v || !*v || v[0] == ' ' || v[0] == '\t' || v[0] == '\n') return bad_value(cmd, opt, v, want);
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    /* ERANGE with a huge result is an overflow; an underflow (tiny but representable) is fine.
     * The float conversion must stay finite too. */
    if (*end || end == v || !isfinite(x) || (errno == ERANGE && fabs(x) > 1) || fabs(x) > FLT_MAX || x < lo ||
        x > hi)
        return bad_value(cmd, opt, v, want);
    *out = (float)x;
    return true;
}

char *bp_cli_read_text(const char *cmd, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb"); /* a FIFO or a pipe is read as a stream, as cat reads it */
    if (!f) {
        fprintf(stderr, "backplane %s: cannot open '%s': %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "backplane %s: '%s' is a directory, not a text file\n", cmd, path);
        fclose(f);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *b = cap < (SIZE_MAX - 1) / 2 ? realloc(buf, 2 * cap + 1) : NULL;
            if (!b) free(buf);
            buf = b;
            cap *= 2;
        }
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf) {
        fprintf(stderr, "backplane %s: no memory to read '%s' (%zu bytes so far)\n", cmd, path, n);
        return NULL;
    }
    if (err) {
        fprintf(stderr, "backplane %s: cannot read '%s': %s\n", cmd, path, strerror(err));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

FILE *bp_cli_open_regular(const char *cmd, const char *path, const char *what) {
    /* O_NONBLOCK: a FIFO would otherwise block the open until a writer comes */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        fprintf(stderr, "backplane %s: cannot open %s '%s': %s\n", cmd, what, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "backplane %s: %s '%s' is not a regular file\n", cmd, what, path);
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        fprintf(stderr, "backplane %s: cannot open %s '%s': %s\n", cmd, what, path, strerror(errno));
        close(fd);
    }
    return f;
}

int bp_cli_finish_output(int rc) {
    /* A write that failed (a full disk, a closed pipe with SIGPIPE ignored) is an error even when
     * the command itself succeeded: the output is not what was produced. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        fprintf(stderr, "backplane: writing standard output: %s\n", e ? strerror(e) : "write error");
        return rc ? rc : 1;
    }
    return rc;
}
