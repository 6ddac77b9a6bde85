/* The reference dot / matvec / GEMM against NumPy float64 (tests/vectors/matmul_<KIND>.bin:
 * W of random valid blocks, odd row counts 7 and 13, X with t = 3 rows, Y = X W^T computed in
 * float64 from the gguf package's dequantization of W), and against each other.
 *
 * Tolerance: bp_ref_* multiply float weights by float inputs in double (each product exact:
 * 24 + 24 bits < 53), add the products in double, and round the sum to float once. NumPy adds
 * the same exact products in float64 in another order. So the two doubles differ by at most
 * about 2 * cols * 2^-53 * sum|w x| (both summation errors; A = |X||W|^T is in the file), and
 * the final rounding to float adds at most half an ulp: 2^-24 * |Y|. A kernel that drops a
 * block, swaps rows or uses a wrong scale misses by far more than this (~1e-7 relative).
 *
 * dot, matvec and gemm run the same loop in the same order, so they must agree bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kinds_vectors.h"

static int check_kind(const bp_kind_info *k) {
    bp_vec v;
    if (!bp_vec_load(&v, "matmul", "BPMM", k)) return 0;
    const int64_t rows = v.a, cols = v.b, t = v.c;
    size_t rb = 0;
    if (bp_kind_row_bytes((bp_kind)k->gguf_id, cols, &rb) != BP_OK || rows <= 0 || t <= 0 ||
        v.body_len != (size_t)rows * rb + (size_t)(t * cols) * 4 + (size_t)(t * rows) * 16) {
        CHECK(0, "%s: matmul vector shape %lld x %lld, t=%lld does not fit", k->name, (long long)rows,
              (long long)cols, (long long)t);
        bp_vec_free(&v);
        return 0;
    }
    const size_t wbytes = (size_t)rows * rb;
    unsigned char *w = malloc(wbytes + 1);
    float *x = malloc((size_t)(t * cols) * sizeof *x), *y = malloc((size_t)(t * rows) * sizeof *y);
    float *y1 = malloc((size_t)rows * sizeof *y1);
    double *yref = malloc((size_t)(t * rows) * sizeof *yref), *aref = malloc((size_t)(t * rows) * sizeof *aref);
    if (!w || !x || !y || !y1 || !yref || !aref) abort();
    memcpy(w + 1, v.body, wbytes); /* odd address on purpose */
    bp_vec_floats(v.body + wbytes, x, (size_t)(t * cols));
    bp_vec_doubles(v.body + wbytes + (size_t)(t * cols) * 4, yref, (size_t)(t * rows));
    bp_vec_doubles(v.body + wbytes + (size_t)(t * cols) * 4 + (size_t)(t * rows) * 8, aref, (size_t)(t * rows));

    int ok = 1;
    double worst = 0; /* largest error as a fraction of its bound */
    CHECK_OK(bp_ref_gemm((bp_kind)k->gguf_id, w + 1, wbytes, rows, cols, x, t, y));
    for (int64_t j = 0; j < t; j++)
        for (int64_t r = 0; r < rows; r++) {
            const double want = yref[j * rows + r], got = y[j * rows + r];
            const double tol = 0x1p-24 * fabs(want) + 2.0 * (double)cols * 0x1p-53 * aref[j * rows + r] + 1e-38;
            const double err = fabs(got - want);
            if (err / tol > worst) worst = err / tol;
            if (!(err <= tol)) ok = 0;
            CHECK(err <= tol, "%s gemm y[%lld][%lld] = %.9g, float64 reference %.17g (error %.3g > bound %.3g)",
                  k->name, (long long)j, (long long)r, got, want, err, tol);
        }
    for (int64_t j = 0; j < t; j++) {
        /* matvec on each input row, and gemm with t = 1, equal the t = 3 gemm bit for bit */
        CHECK_OK(bp_ref_matvec((bp_kind)k->gguf_id, w + 1, wbytes, rows, cols, x + j * cols, y1));
        CHECK(!memcmp(y1, y + j * rows, (size_t)rows * sizeof *y1), "%s: matvec on input %lld differs from gemm",
              k->name, (long long)j);
        CHECK_OK(bp_ref_gemm((bp_kind)k->gguf_id, w + 1, wbytes, rows, cols, x + j * cols, 1, y1));
        CHECK(!memcmp(y1, y + j * rows, (size_t)rows * sizeof *y1), "%s: gemm t=1 on input %lld differs from t=3",
              k->name, (long long)j);
        for (int64_t r = 0; r < rows; r++) {
            float d = NAN;
            CHECK_OK(bp_ref_dot((bp_kind)k->gguf_id, w + 1 + (size_t)r * rb, rb, x + j * cols, cols, &d));
            CHECK(!memcmp(&d, &y[j * rows + r], sizeof d), "%s: dot row %lld input %lld = %.9g, gemm %.9g", k->name,
                  (long long)r, (long long)j, d, y[j * rows + r]);
        }
    }
    printf("%-7s %2lld x %3lld, t=%lld: worst error %.2f of its bound vs NumPy float64\n", k->name, (long long)rows,
           (long long)cols, (long long)t, worst);
    free(w);
    free(x);
    free(y);
    free(y1);
    free(yref);
    free(aref);
    bp_vec_free(&v);
    return ok;
}

int main(void) {
    int files = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *k = bp_kind_at(i);
        if (!bp_vec_exists("matmul", k->name)) continue;
        files++;
        check_kind(k);
    }
    /* The generator writes 11 kinds; losing the files must not turn this into an empty pass. */
    CHECK(files >= 8, "only %d matmul vector files found in tests/vectors (run gen_vectors.py)", files);
    return bp_test_finish();
}
