#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kinds/kinds_internal.h"
#include "seam/seam.h"

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
    /* One byte more, a NUL: callers parse text files with string functions (strtok_r ran
     * past the end of kinds_list.txt when the buffer had no terminator). */
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    if (!buf) bp_test_fail_at(__FILE__, __LINE__, "cannot read %s", path);
    else if (len) *len = (size_t)n;
    return buf;
}

/* Test weights: real quantizations of random floats where the kind has a quantizer; random
 * blocks otherwise, with each block's scale fields overwritten by a small finite f16 (random
 * bytes there could be Inf/NaN, which would test nothing). */
uint8_t *bp_test_make_weight(bp_kind k, int64_t rows, int64_t cols, uint64_t *rng, size_t *bytes_out) {
    const bp_kind_info *info = bp_kind_lookup((uint32_t)k);
    size_t row_bytes;
    if (bp_kind_row_bytes(k, cols, &row_bytes) != BP_OK) return NULL;
    size_t bytes = row_bytes * (size_t)rows;
    uint8_t *w = malloc(bytes + 1);
    if (info->can_quantize) {
        float *f = malloc(sizeof(float) * (size_t)cols);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t c = 0; c < cols; c++) f[c] = bp_test_randf(rng);
            if (bp_quantize(k, f, cols, w + (size_t)r * row_bytes, row_bytes) != BP_OK) {
                free(f);
                free(w);
                return NULL;
            }
        }
        free(f);
    } else {
        for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)bp_test_rand(rng);
        size_t nb = bytes / info->block_bytes;
        for (size_t b = 0; b < nb; b++) {
            uint8_t *blk = w + b * info->block_bytes;
            uint16_t h = bp_f32_to_f16(0.002f + 0.03f * (float)(bp_test_rand(rng) % 1000) / 1000.0f);
            if (k == BP_KIND_IQ1_M) { /* the f16 scale lives in the top nibbles of 4 u16 */
                for (int j = 0; j < 4; j++) {
                    uint16_t sc = bp_load_u16(blk + 48 + 2 * j);
                    sc = (uint16_t)((sc & 0x0FFF) | (((h >> (4 * j)) & 0xF) << 12));
                    bp_store_u16(blk + 48 + 2 * j, sc);
                }
            } else if (k != BP_KIND_NVFP4) { /* NVFP4's UE4M3 scales are all finite */
                bp_store_u16(blk, h);
            }
        }
    }
    *bytes_out = bytes;
    return w;
}

bool bp_test_all_finite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

/* One (kind, rows, cols, t) case on a backend's dispatch table: its matvec (t == 1) or GEMM
 * against bp_ref_gemm on fresh random weights and inputs, NMSE <= tol. Returns whether the
 * case ran on the backend (false when the weight or the reference could not be made). */
bool bp_test_dispatch_case(const bp_backend_dispatch *d, bp_kind k, int64_t rows, int64_t cols, int64_t t,
                           double tol, uint64_t *rng) {
    const char *kn = bp_kind_lookup((uint32_t)k)->name;
    size_t bytes = 0;
    bool ran = false;
    uint8_t *wd = bp_test_make_weight(k, rows, cols, rng, &bytes);
    CHECK(wd != NULL, "%s: could not make a %lld x %lld weight: %s", kn, (long long)rows, (long long)cols,
          bp_last_error());
    if (!wd) return false;
    float *x = malloc(sizeof(float) * (size_t)(t * cols));
    float *ref = malloc(sizeof(float) * (size_t)(t * rows));
    float *got = malloc(sizeof(float) * (size_t)(t * rows));
    for (int64_t i = 0; i < t * cols; i++) x[i] = bp_test_randf(rng);
    for (int64_t i = 0; i < t * rows; i++) got[i] = NAN;
    bp_weight *w = NULL;
    CHECK_OK(bp_weight_create(k, wd, bytes, rows, cols, &w));
    CHECK_OK(bp_ref_gemm(k, wd, bytes, rows, cols, x, t, ref));
    if (w && bp_test_all_finite(ref, (size_t)(t * rows))) {
        char err[256] = "";
        bp_launch r = t == 1 ? d->matvec(w, x, got, err, sizeof err) : d->gemm(w, x, t, got, err, sizeof err);
        CHECK(r == BP_LAUNCH_OK, "%s %s rows %lld cols %lld t %lld: launch %d: %s", kn, t == 1 ? "matvec" : "gemm",
              (long long)rows, (long long)cols, (long long)t, (int)r, err);
        double e = bp_test_nmse(got, ref, (size_t)(t * rows));
        CHECK(e <= tol, "%s %s rows %lld cols %lld t %lld: NMSE %.3g > %.1g (got[0] %g ref[0] %g)", kn,
              t == 1 ? "matvec" : "gemm", (long long)rows, (long long)cols, (long long)t, e, tol, (double)got[0],
              (double)ref[0]);
        ran = true;
    } else if (w) {
        CHECK(0, "%s: the CPU reference gave non-finite output (reference kernel missing?)", kn);
    }
    bp_weight_free(w);
    free(wd);
    free(x);
    free(ref);
    free(got);
    return ran;
}

unsigned long long bp_test_op_calls(const char *op, const char *backend) {
    bp_op_stat st[64];
    int n = bp_stats_get(st, 64);
    for (int i = 0; i < n && i < 64; i++)
        if (!strcmp(st[i].op, op) && !strcmp(st[i].backend, backend)) return st[i].calls;
    return 0;
}
