/* backplane matvec FILE.gguf TENSOR --input X.f32 --output Y.f32 [--backend NAME] [--fallbacks]
 *
 * y = W x for one 2-D tensor (GGUF order: ne0 = columns, ne1 = rows). x and y are raw
 * little-endian float32 of length columns and rows. The path that really ran (backend and
 * kernel) is printed on stderr, so a fallback is never silent. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_common.h"

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: backplane matvec FILE.gguf TENSOR --input X.f32 --output Y.f32 [--backend NAME] [--fallbacks]\n"
               "  y = W x for the named 2-D tensor (ne0 = columns, ne1 = rows); X and Y are raw\n"
               "  little-endian float32 of length columns and rows.\n"
               "  --backend cpu-ref   the reference kernel; cpu, vulkan, cuda, opencl: that backend\n"
               "                      only (an error if it cannot run the kind); default: the seam's choice\n"
               "  --fallbacks         print how many ops fell back, from where and why\n"
               "  --strict            a fallback is an error (BACKPLANE_STRICT=1 does the same)\n");
    return rc;
}

/* Read exactly `want` floats; a file of any other length is an error that says both sizes
 * (a wrong-length x would otherwise be read past its end or silently zero-padded). */
static int read_input(const char *path, int64_t want, const char *tensor, float **out) {
    FILE *fp = bp_cli_open_regular("matvec", path, "input"); /* a FIFO is refused, not waited on */
    if (!fp) return 1;
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        fprintf(stderr, "backplane: matvec: cannot stat input '%s': %s\n", path, strerror(errno));
        fclose(fp);
        return 1;
    }
    if ((uint64_t)st.st_size != (uint64_t)want * 4) {
        fprintf(stderr,
                "backplane: matvec: input '%s' has %lld bytes (%lld floats%s); tensor '%s' has %lld columns, "
                "so it must have %lld bytes\n",
                path, (long long)st.st_size, (long long)(st.st_size / 4), st.st_size % 4 ? " and a partial one" : "",
                tensor, (long long)want, (long long)want * 4);
        fclose(fp);
        return 1;
    }
    float *x = malloc((size_t)want * sizeof *x + 1);
    if (!x || fread(x, 4, (size_t)want, fp) != (size_t)want) {
        fprintf(stderr, "backplane: matvec: cannot read input '%s'\n", path);
        free(x);
        fclose(fp);
        return 1;
    }
    fclose(fp);
    *out = x;
    return 0;
}

static int matvec_main(int argc, char **argv);

int bp_cmd_matvec(int argc, char **argv) {
    bp_cli_take_fallbacks(&argc, argv);
    bp_cli_take_strict(&argc, argv);
    int rc = matvec_main(argc, argv);
    bp_cli_print_fallbacks();
    return rc;
}

static int matvec_main(int argc, char **argv) {
    const char *file = NULL, *tensor = NULL, *in = NULL, *outp = NULL, *backend = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout, 0);
        if (!strcmp(a, "--input") || !strcmp(a, "--output") || !strcmp(a, "--backend")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "backplane: matvec: %s needs a value\n", a);
                return usage(stderr, 2);
            }
            const char **dst = !strcmp(a, "--input") ? &in : !strcmp(a, "--output") ? &outp : &backend;
            *dst = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "backplane: matvec: unknown option '%s'\n", a);
            return usage(stderr, 2);
        } else if (!file) file = a;
        else if (!tensor) tensor = a;
        else {
            fprintf(stderr, "backplane: matvec: unexpected argument '%s'\n", a);
            return usage(stderr, 2);
        }
    }
    if (!file || !tensor || !in || !outp) return usage(stderr, 2);
    if (bp_cli_dry_run) return 0; /* the CLI fuzz target: parsing only, no file written */

    bp_gguf *f = NULL;
    bp_status s = bp_gguf_open(file, &f);
    if (s) return bp_cli_error("matvec", s);
    int rc = 1;
    float *x = NULL, *y = NULL;
    bp_weight *w = NULL;
    const bp_gguf_tensor *t = bp_gguf_find_tensor(f, tensor);
    if (!t) {
        rc = bp_cli_error("matvec", BP_E_NOT_FOUND);
        goto done;
    }
    if (t->n_dims != 2) {
        fprintf(stderr, "backplane: matvec: tensor '%s' has %u dimension%s; matvec needs a 2-D tensor (ne0 = columns, ne1 = rows)\n",
                tensor, t->n_dims, t->n_dims == 1 ? "" : "s");
        goto done;
    }
    int64_t cols = t->ne[0], rows = t->ne[1];
    if (read_input(in, cols, tensor, &x)) goto done;
    y = malloc((size_t)rows * sizeof *y + 1);
    if (!y) {
        fprintf(stderr, "backplane: matvec: out of memory for %lld outputs\n", (long long)rows);
        goto done;
    }
    if ((s = bp_weight_create(t->kind, t->data, t->bytes, rows, cols, &w))) {
        rc = bp_cli_error("matvec", s);
        goto done;
    }
    if ((s = bp_matvec_on(w, backend, x, y))) {
        rc = bp_cli_error("matvec", s);
        goto done;
    }
    fprintf(stderr, "backplane: matvec: %s %s [%lld x %lld] ran on: %s\n", tensor, t->kind_info->name, (long long)rows,
            (long long)cols, bp_weight_last_path(w));
    FILE *fp = fopen(outp, "wb");
    if (!fp) {
        fprintf(stderr, "backplane: matvec: cannot create output '%s': %s\n", outp, strerror(errno));
        goto done;
    }
    size_t wrote = fwrite(y, 4, (size_t)rows, fp);
    if (fclose(fp) != 0 || wrote != (size_t)rows) {
        fprintf(stderr, "backplane: matvec: writing output '%s' failed\n", outp);
        goto done;
    }
    rc = 0;
done:
    bp_weight_free(w);
    free(x);
    free(y);
    bp_gguf_close(f);
    return rc;
}
