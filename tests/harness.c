#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

int bp_test_passed, bp_test_failed, bp_test_skipped;

void bp_test_fail_at(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    bp_test_failed++;
    /* Cap the noise: the first 50 failures are enough to debug, the count says the rest. */
    if (bp_test_failed > 50) return;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void bp_test_skip(const char *fmt, ...) {
    va_list ap;
    bp_test_skipped++;
    fputs("SKIP: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int bp_test_finish(void) {
    if (bp_test_skipped)
        printf("%d passed, %d failed, %d skipped\n", bp_test_passed, bp_test_failed, bp_test_skipped);
    else
        printf("%d passed, %d failed\n", bp_test_passed, bp_test_failed);
    /* A program that checked nothing and skipped nothing is a broken test, not a pass. */
    if (bp_test_passed == 0 && bp_test_skipped == 0) {
        fprintf(stderr, "FAIL: test ran no checks\n");
        return 1;
    }
    /* 77 is ctest's SKIP_RETURN_CODE (CMakeLists.txt): a program that skipped part of its work
     * shows as "Skipped" in ctest's summary, not as a plain pass. Its checks still ran and
     * still fail it. */
    if (bp_test_failed) return 1;
    return bp_test_skipped ? 77 : 0;
}

uint64_t bp_test_rand(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

float bp_test_randf(uint64_t *s) { return (float)((bp_test_rand(s) >> 40) * (2.0 / 16777216.0) - 1.0); }

double bp_test_nmse(const float *got, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return num / den;
}

void *bp_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        bp_test_fail_at(__FILE__, __LINE__, "cannot open %s", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf) bp_test_fail_at(__FILE__, __LINE__, "cannot read %s", path);
    else if (len) *len = (size_t)n;
    return buf;
}
