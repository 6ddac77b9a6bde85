/* A backend written outside the library: a toy device in host memory implementing the public
 * device interface (<backplane.h> -> backplane_device.h) and nothing else, registered with
 * bp_backend_register, running a model's matmuls. tests/install/device_backend.sh builds it
 * against an installed prefix only (no source tree on the include path).
 *
 *     toy_backend MODEL.gguf
 *
 * Checks, each a FAIL line and exit 1:
 *   - the toy's matmul_<KIND> kernels (dequantize a row, dot product in double: arithmetic of
 *     its own, not the library's kernels) are proven and claimed at registration, and listed in
 *     bp_backend_info;
 *   - a prefill and three decode steps with the toy forced give the logits of the same tokens on
 *     the CPU reference path (BACKPLANE_CPU_ISA=scalar, set before the first call: float
 *     activations, no 8-bit rounding) within NMSE 1e-8, the same best id at every position;
 *   - every weight of a kind the toy claims was last run by "toy" (bp_weight_last_record), the
 *     context's decode and prefill records of those kinds name it, and the toy's own launch
 *     count covers the weights;
 *   - a "liar" device whose kernels are wrong for every kind but F32 gets only F32 claimed (the
 *     proof refuses the rest), a device with no matmul kernel and a taken name are refused;
 *   - unregistering and closing leave the device memory where it started. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <backplane.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define FAIL(...) (printf("FAIL: " __VA_ARGS__), printf("\n"), fails++)

/* ---- the toy device: buffers are structs (handles, not addresses), kernels by name ---------- */

typedef struct toy_buf {
    size_t n;
    unsigned char *data;
} toy_buf;

typedef struct toy_kernel {
    bp_kind kind;
} toy_kernel;

typedef struct toy {
    int liar;          /* wrong results for every kind but F32 */
    int no_kernels;    /* no matmul kernel at all */
    long launches;
} toy;

static toy *T(bp_device *dev) { return dev->impl; }

static const char *kname(bp_kind k) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    return ki ? ki->name : "?";
}

static bp_status t_alloc(bp_device *dev, size_t bytes, void **buf) {
    (void)dev;
    toy_buf *b = calloc(1, sizeof *b);
    if (b) b->data = malloc(bytes);
    if (!b || !b->data) {
        free(b);
        return bp_device_fail(BP_E_NOMEM, "toy: no host memory for %zu bytes", bytes);
    }
    b->n = bytes;
    *buf = b;
    return BP_OK;
}

static void t_free(bp_device *dev, void *buf) {
    (void)dev;
    toy_buf *b = buf;
    if (b) free(b->data);
    free(b);
}

static bp_status t_h2d(bp_device *dev, void *dst, size_t off, const void *src, size_t n) {
    (void)dev;
    memcpy(((toy_buf *)dst)->data + off, src, n);
    return BP_OK;
}

static bp_status t_d2h(bp_device *dev, void *dst, const void *src, size_t off, size_t n) {
    (void)dev;
    memcpy(dst, ((const toy_buf *)src)->data + off, n);
    return BP_OK;
}

static bp_status t_kernel_lookup(bp_device *dev, const char *name, bp_kernel **out) {
    if (!T(dev)->no_kernels && !strncmp(name, "matmul_", 7))
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind_info *ki = bp_kind_at(i);
            if (strcmp(ki->name, name + 7) || ki->role != BP_ROLE_W) continue;
            toy_kernel *k = malloc(sizeof *k);
            if (!k) return bp_device_fail(BP_E_NOMEM, "toy: no memory for kernel %s", name);
            k->kind = ki->kind;
            *out = (bp_kernel *)(void *)k;
            return BP_OK;
        }
    return bp_device_fail(BP_E_NOT_FOUND, "toy: no kernel called '%s'", name);
}

static void t_kernel_release(bp_device *dev, bp_kernel *k) {
    (void)dev;
    free(k);
}

/* matmul_<KIND>(buf W, buf X, buf Y, i64 rows, i64 cols, i64 t): Y[t][rows] = X[t][cols] W^T. */
static bp_status t_launch(bp_device *dev, bp_stream *s, bp_kernel *kh, const bp_launch_dims *dims,
                          const bp_kernel_arg *a, int nargs) {
    (void)s, (void)dims;
    const toy_kernel *k = (const toy_kernel *)(const void *)kh;
    if (nargs != 6 || a[0].type != BP_ARG_BUF || a[1].type != BP_ARG_BUF || a[2].type != BP_ARG_BUF ||
        a[3].type != BP_ARG_I64 || a[4].type != BP_ARG_I64 || a[5].type != BP_ARG_I64)
        return bp_device_fail(BP_E_INVAL, "toy: matmul takes (buf, buf, buf, i64, i64, i64), got %d arguments", nargs);
    const int64_t rows = a[3].v.i64, cols = a[4].v.i64, t = a[5].v.i64;
    const unsigned char *w = ((toy_buf *)a[0].v.buf.buf)->data + a[0].v.buf.offset;
    const float *x = (const float *)(void *)(((toy_buf *)a[1].v.buf.buf)->data + a[1].v.buf.offset);
    float *y = (float *)(void *)(((toy_buf *)a[2].v.buf.buf)->data + a[2].v.buf.offset);
    size_t rb = 0;
    bp_status st = bp_kind_row_bytes(k->kind, cols, &rb);
    float *row = malloc((size_t)cols * sizeof *row);
    if (!st && !row) st = bp_device_fail(BP_E_NOMEM, "toy: no memory for a row");
    for (int64_t r = 0; r < rows && !st; r++) {
        st = bp_dequantize(k->kind, w + (size_t)r * rb, rb, row, cols);
        for (int64_t i = 0; i < t && !st; i++) {
            double acc = 0;
            for (int64_t c = 0; c < cols; c++) acc += (double)row[c] * x[i * cols + c];
            y[i * rows + r] = (float)(T(dev)->liar && k->kind != BP_KIND_F32 ? 0.5 * acc : acc);
        }
    }
    free(row);
    T(dev)->launches++;
    return st;
}

static const bp_device_methods toy_methods = {
    .version = BP_DEVICE_METHODS_VERSION,
    .name = "toy",
    .alloc = t_alloc,
    .free = t_free,
    .h2d = t_h2d,
    .d2h = t_d2h,
    .kernel_lookup = t_kernel_lookup,
    .kernel_release = t_kernel_release,
    .launch = t_launch,
};

/* ---- the model, on one backend ----------------------------------------------------------------- */

enum { NTOK = 8, NDEC = 3 };
static const int32_t tokens[NTOK + NDEC] = {1, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108};

/* Logits of every prefill position and each decode step: (NTOK + NDEC) rows of V. */
static int run_model(bp_model *m, const char *backend, float *out, int64_t V, bp_context **keep) {
    if (bp_set_backend_preference(backend, BP_FORCE)) {
        FAIL("forcing %s: %s", backend, bp_last_error());
        return 0;
    }
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = 32;
    bp_context *c = NULL;
    if (bp_context_create(m, &cp, &c)) {
        FAIL("context: %s", bp_last_error());
        return 0;
    }
    int ok = bp_context_eval(c, tokens, NTOK, NTOK) == BP_OK;
    for (int p = 0; ok && p < NTOK; p++) memcpy(out + (size_t)p * V, bp_context_logits(c, p), (size_t)V * 4);
    for (int d = 0; ok && d < NDEC; d++) {
        ok = bp_context_eval(c, tokens + NTOK + d, 1, 1) == BP_OK;
        if (ok) memcpy(out + (size_t)(NTOK + d) * V, bp_context_logits(c, 0), (size_t)V * 4);
    }
    if (!ok) FAIL("eval on %s: %s", backend, bp_last_error());
    *keep = c;
    return ok;
}

static int argmax(const float *v, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return (int)b;
}

static bp_device *open_toy(toy *state) {
    bp_device *dev = NULL;
    if (bp_device_open(&toy_methods, state, "toy:0", &dev)) FAIL("bp_device_open: %s", bp_last_error());
    return dev;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: toy_backend MODEL.gguf\n");
        return 2;
    }
    setenv("BACKPLANE_CPU_ISA", "scalar", 1); /* the CPU reference path, chosen at first use */
    uint64_t live0 = 0, n0 = 0;
    bp_device_memory(&live0, &n0);
    bp_model *m = NULL;
    if (bp_model_load(argv[1], NULL, &m)) {
        printf("FAIL: load %s: %s\n", argv[1], bp_last_error());
        return 1;
    }
    bp_model_info mi;
    bp_model_get_info(m, &mi);
    const int64_t V = mi.n_vocab, rows = NTOK + NDEC;
    float *ref = malloc((size_t)(rows * V) * 4), *got = malloc((size_t)(rows * V) * 4);
    bp_context *cref = NULL, *ctoy = NULL;
    if (!ref || !got) return 1;
    run_model(m, "cpu", ref, V, &cref);

    /* Register the toy, before CUDA in the order. */
    toy state = {0, 0, 0};
    bp_device *dev = open_toy(&state);
    int proven = 0;
    if (dev && bp_backend_register(dev, "toy", "Toy", 0, &proven)) FAIL("register: %s", bp_last_error());
    printf("toy: %d weight kinds proven and claimed\n", proven);
    if (proven < 10) FAIL("only %d kinds proven (the toy has a kernel for every weight kind)", proven);
    int listed = 0;
    for (int i = 0; i < bp_backend_count(); i++) {
        bp_backend_info bi;
        if (!bp_backend_info_at(i, &bi) && !strcmp(bi.name, "toy"))
            listed = bi.compiled && bi.enabled && !strcmp(bi.display, "Toy") && i == 0;
    }
    if (!listed) FAIL("bp_backend_info does not list toy first, compiled and enabled");
    if (!bp_backend_register(dev, "toy", "Toy", 0, NULL)) FAIL("a second backend called toy was registered");

    if (run_model(m, "toy", got, V, &ctoy)) {
        double worst = 0;
        int same = 0;
        for (int64_t p = 0; p < rows; p++) {
            double num = 0, den = 0;
            for (int64_t i = 0; i < V; i++) {
                double d = (double)got[p * V + i] - ref[p * V + i];
                num += d * d, den += (double)ref[p * V + i] * ref[p * V + i];
            }
            double e = den > 0 ? num / den : num;
            if (!(e <= worst)) worst = e;
            same += argmax(got + p * V, V) == argmax(ref + p * V, V);
        }
        printf("toy vs CPU reference path: worst NMSE %.3g over %lld positions, best id equal at %d\n", worst,
               (long long)rows, same);
        if (!(worst <= 1e-8)) FAIL("worst NMSE %.3g > 1e-8 against the CPU reference path", worst);
        if (same != rows) FAIL("best id differs at %lld positions", (long long)(rows - same));
    }
    /* What the records say ran each weight. */
    int toy_w = 0;
    for (int64_t i = 0; i < bp_model_weight_count(m); i++) {
        const char *name = NULL;
        const bp_weight *w = bp_model_weight_at(m, i, &name);
        bp_run_record r;
        if (!w || bp_weight_last_record(w, &r)) continue; /* not a matmul (the embedding table) */
        if (strcmp(r.backend, "toy") || strcmp(r.display, "Toy"))
            FAIL("%s (%s) last ran on %s, not the toy", name, kname(r.kind), r.backend);
        else
            toy_w++;
    }
    if (toy_w == 0) FAIL("no weight's record names the toy");
    bp_kind seen[8];
    int nseen = 0;
    for (int64_t i = 0; i < bp_model_weight_count(m) && nseen < 8; i++) {
        bp_run_record r;
        const bp_weight *w = bp_model_weight_at(m, i, NULL);
        if (!w || bp_weight_last_record(w, &r)) continue;
        int dup = 0;
        for (int j = 0; j < nseen; j++) dup |= seen[j] == r.kind;
        if (!dup) seen[nseen++] = r.kind;
    }
    for (int j = 0; ctoy && j < nseen; j++)
        for (int prefill = 0; prefill < 2; prefill++) {
            bp_run_record r;
            if (bp_context_kind_record(ctoy, seen[j], prefill, &r) || strcmp(r.backend, "toy"))
                FAIL("the context's %s record of %s does not name the toy", prefill ? "prefill" : "decode",
                     kname(seen[j]));
        }
    printf("toy: %d weights last run on the toy, %d kinds, %ld launches\n", toy_w, nseen, state.launches);
    if (state.launches < toy_w) FAIL("the toy counted %ld launches for %d weights", state.launches, toy_w);
    bp_context_free(ctoy);
    bp_context_free(cref);
    bp_set_backend_preference(NULL, BP_PREFER);

    /* A liar: only F32 survives its proof. No kernels: refused. */
    toy liar = {1, 0, 0}, none = {0, 1, 0};
    bp_device *dl = open_toy(&liar), *dn = open_toy(&none);
    int pl = -1;
    if (dl && bp_backend_register(dl, "liar", "Liar", 99, &pl)) FAIL("register liar: %s", bp_last_error());
    if (pl != 1) FAIL("the liar got %d kinds claimed; only F32 computes right", pl);
    bp_route_info ri;
    if (!bp_route(BP_KIND_Q8_0, 64, 256, 1, &ri) && !strcmp(ri.backend, "liar"))
        FAIL("Q8_0 routes to the liar, whose kernel failed its proof");
    if (dn && bp_backend_register(dn, "none", "None", 0, NULL) != BP_E_NOT_FOUND)
        FAIL("a device without matmul kernels was registered or refused for another reason: %s", bp_last_error());
    if (bp_backend_register(dn, "Bad Name", "x", 0, NULL) != BP_E_INVAL) FAIL("a bad name was accepted");
    if (bp_backend_unregister("liar") || bp_backend_unregister("toy")) FAIL("unregister: %s", bp_last_error());
    if (bp_backend_unregister("toy") != BP_E_NOT_FOUND) FAIL("toy unregistered twice");
    bp_device_close(dl);
    bp_device_close(dn);
    bp_device_close(dev);
    bp_model_free(m);
    free(ref);
    free(got);
    uint64_t live1 = 0, n1 = 0;
    bp_device_memory(&live1, &n1);
    if (live1 != live0 || n1 != n0)
        FAIL("device memory %llu bytes in %llu allocations after, %llu in %llu before", (unsigned long long)live1,
             (unsigned long long)n1, (unsigned long long)live0, (unsigned long long)n0);
    if (!fails) printf("toy_backend: OK\n");
    return fails ? 1 : 0;
}
