/* bench_insn_count KIND T N ROWS COLS: N calls of bp_gemm_on(w, "cpu", x, T, y) on a ROWS x COLS
 * weight of KIND, for counting a call's instructions under valgrind (docs/benchmarks.md: the
 * count at N = 3 minus the count at N = 1, halved). Public API only, so the same source links
 * against two versions of the library. Weights are quantized from fixed pseudo-random floats;
 * a kind without a quantizer gets small random bytes (the work per call does not depend on them). */
#include <stdio.h>
#include <stdlib.h>
#include "backplane.h"
int main(int argc, char **argv) {
    if (argc != 6) return fprintf(stderr, "usage: bench_insn_count KIND T N ROWS COLS\n"), 2;
    const bp_kind_info *ki = bp_kind_by_name(argv[1]);
    int64_t t = atoll(argv[2]), n = atoll(argv[3]), rows = atoll(argv[4]), cols = atoll(argv[5]);
    size_t rb; if (!ki || bp_kind_row_bytes(ki->kind, cols, &rb)) return 2;
    float *f = malloc(sizeof(float) * (size_t)cols), *x = malloc(sizeof(float) * (size_t)(cols * t)),
          *y = malloc(sizeof(float) * (size_t)(rows * t));
    unsigned char *w = malloc(rb * (size_t)rows);
    unsigned s = 12345;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) s = s * 1103515245u + 12345u, f[c] = ((s >> 8) & 0xffff) / 32768.0f - 1.0f;
        if (bp_quantize(ki->kind, f, cols, w + rb * (size_t)r, rb)) for (size_t b = 0; b < rb; b++) s = s * 1103515245u + 12345u, w[rb * (size_t)r + b] = (unsigned char)((s >> 16) & 0x3f); /* no quantizer: small random bytes */
    }
    for (int64_t i = 0; i < cols * t; i++) s = s * 1103515245u + 12345u, x[i] = ((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    bp_weight *wt; if (bp_weight_create(ki->kind, w, rb * (size_t)rows, rows, cols, &wt)) return 4;
    for (int64_t i = 0; i < n; i++) if (bp_gemm_on(wt, "cpu", x, t, y)) { fprintf(stderr, "%s\n", bp_last_error()); return 5; }
    printf("%s %g\n", bp_weight_last_path(wt), y[0]);
    bp_weight_free(wt);
    return 0;
}
