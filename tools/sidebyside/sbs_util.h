/* Small helpers the ggml timing programs share (header-only: build.sh compiles each
 * ggml_<name>.c on its own, and #include "sbs_util.h" finds this file beside it). */
#ifndef BP_SBS_UTIL_H
#define BP_SBS_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ggml.h"

static inline double sbs_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int sbs_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorted in place). */
static inline double sbs_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, sbs_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* xorshift64, and a float uniform in [-1, 1) from it. */
static uint64_t sbs_rng = 0x2545F4914F6CDD1Dull;
static inline uint64_t sbs_u64(void) {
    sbs_rng ^= sbs_rng << 13;
    sbs_rng ^= sbs_rng >> 7;
    sbs_rng ^= sbs_rng << 17;
    return sbs_rng;
}
static inline float sbs_f(void) { return (float)((sbs_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }

/* ggml's type by our kind name ("Q4_K" = ggml's "q4_K"); GGML_TYPE_COUNT when none. */
static inline enum ggml_type sbs_type(const char *name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (ggml_blck_size((enum ggml_type)t) && ggml_type_name((enum ggml_type)t) &&
            !strcasecmp(ggml_type_name((enum ggml_type)t), name))
            return (enum ggml_type)t;
    return GGML_TYPE_COUNT;
}

/* A comma-separated list in place: up to max pieces into out[], their count. */
static inline int sbs_split(char *arg, char **out, int max) {
    int n = 0;
    for (char *tok = strtok(arg, ","); tok && n < max; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

#endif
