/* y = W x for one 2-D tensor of a GGUF file, through the seam, printing which backend and kernel
 * really ran. Build against an installed backplane:
 *     cc matvec.c -o matvec $(pkg-config --cflags --libs backplane)
 * Run: ./matvec MODEL.gguf TENSOR [X.f32]   (X: raw float32, one per column; default all ones) */
#include <stdio.h>
#include <stdlib.h>

#include <backplane.h>

static int fail(const char *what, bp_status s) {
    fprintf(stderr, "matvec: %s: %s (%s)\n", what, bp_last_error(), bp_status_name(s));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf TENSOR [X.f32]\n", argv[0]);
        return 2;
    }
    bp_gguf *f;
    bp_status s = bp_gguf_open(argv[1], &f);
    if (s) return fail(argv[1], s);

    int rc = 1;
    bp_weight *w = NULL;
    float *x = NULL, *y = NULL;
    const bp_gguf_tensor *t = bp_gguf_find_tensor(f, argv[2]);
    if (!t) {
        rc = fail(argv[2], BP_E_NOT_FOUND);
        goto out;
    }
    if (t->n_dims != 2) {
        fprintf(stderr, "matvec: %s has %u dimensions, not 2\n", t->name, t->n_dims);
        goto out;
    }
    int64_t cols = t->ne[0], rows = t->ne[1]; /* GGUF order: ne0 = elements per row */
    x = malloc((size_t)cols * sizeof *x);
    y = malloc((size_t)rows * sizeof *y);
    if (!x || !y) goto out;
    for (int64_t c = 0; c < cols; c++) x[c] = 1.0f;
    if (argc > 3) {
        FILE *fx = fopen(argv[3], "rb");
        size_t got = fx ? fread(x, sizeof *x, (size_t)cols, fx) : 0;
        if (fx) fclose(fx);
        if (got != (size_t)cols) {
            fprintf(stderr, "matvec: %s: need %lld floats\n", argv[3], (long long)cols);
            goto out;
        }
    }
    /* The weight borrows the tensor's bytes inside the file mapping: keep the file open. */
    s = bp_weight_create(t->kind, t->data, t->bytes, rows, cols, &w);
    if (s) {
        rc = fail("bp_weight_create", s);
        goto out;
    }
    s = bp_matvec(w, x, y);
    if (s) {
        rc = fail("bp_matvec", s);
        goto out;
    }
    printf("%s %s [%lld x %lld] ran on: %s\n", t->name, t->kind_info->name, (long long)rows,
           (long long)cols, bp_weight_last_path(w));
    for (int64_t r = 0; r < rows; r++) printf("y[%lld] = %.9g\n", (long long)r, y[r]);
    rc = 0;
out:
    bp_weight_free(w);
    free(x);
    free(y);
    bp_gguf_close(f);
    return rc;
}
