/* The tables of a registered device's backend (gpu_extern.h): claims proven by running each
 * kind's "matmul_<KIND>" on a small weight against the CPU reference, and the launch of matvec,
 * gemm and jobs through the device interface. */
#include "gpu/gpu_extern.h"

#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

enum { EXT_KINDS = 64 }; /* GGUF ids of weight kinds are below this */

typedef struct ext {
    bp_device *dev;
    char name[16], display[16], prefill[48];
    char kname[EXT_KINDS][32]; /* "matmul_Q4_K" */
    bool proven[EXT_KINDS];
    bp_backend_caps caps;
    bp_backend_dispatch dispatch;
} ext;

static ext exts[BP_GPU_EXTERN_MAX];

static bool claimed_op(bp_op op) { return op == BP_OP_MATVEC || op == BP_OP_GEMM || op == BP_OP_JOBS; }

static bool proven(const ext *e, bp_kind k) { return e->dev && (unsigned)k < EXT_KINDS && e->proven[k]; }

static const char *ext_kernel(int i, bp_op op, bp_kind k) {
    return claimed_op(op) && proven(&exts[i], k) ? bp_claim_name_static(op, k) : NULL;
}

/* What the device holds (its kernel is there) and has shown (it ran and matched). */
static bool ext_has_launch(int i, bp_op op, bp_kind k) {
    const ext *e = &exts[i];
    return claimed_op(op) && proven(e, k) && bp_dev_has_kernel(e->dev, e->kname[k]);
}

static bool ext_probe(int i, char *why, size_t len) {
    const ext *e = &exts[i];
    if (e->dev) snprintf(why, len, "registered device %s", e->dev->name);
    else snprintf(why, len, "not registered");
    return e->dev != NULL;
}

/* Y = X W^T for every job through the device: X up once, then per job W up, the kernel, Y down. */
static bp_status run_jobs(const ext *e, const bp_matmul_job *jobs, int n, const float *x, int64_t t) {
    bp_device *dev = e->dev;
    const size_t xb = (size_t)(t * jobs[0].w->cols) * sizeof(float);
    void *dx = NULL;
    bp_status s = bp_dev_alloc(dev, xb, &dx);
    if (!s) s = bp_dev_h2d(dev, dx, 0, x, xb);
    for (int j = 0; j < n && !s; j++) {
        const bp_weight *w = jobs[j].w;
        const size_t wb = w->row_bytes * (size_t)w->rows, yb = (size_t)(t * w->rows) * sizeof(float);
        bp_kernel *k = NULL;
        void *dw = NULL, *dy = NULL;
        s = bp_dev_kernel(dev, e->kname[w->kind], &k);
        if (!s) s = bp_dev_alloc(dev, wb, &dw);
        if (!s) s = bp_dev_alloc(dev, yb, &dy);
        if (!s) s = bp_dev_h2d(dev, dw, 0, w->data, wb);
        if (!s) {
            const bp_kernel_arg args[6] = {bp_arg_buf(dw, 0),     bp_arg_buf(dx, 0),      bp_arg_buf(dy, 0),
                                           bp_arg_i64(w->rows), bp_arg_i64(w->cols), bp_arg_i64(t)};
            const bp_launch_dims dims = {{(uint32_t)w->rows, (uint32_t)t, 1}, {1, 1, 1}, 0};
            s = bp_dev_launch(dev, NULL, k, &dims, args, 6);
        }
        if (!s) s = bp_dev_stream_sync(dev, NULL);
        if (!s) s = bp_dev_d2h(dev, jobs[j].y, dy, 0, yb);
        bp_dev_free(dev, dw);
        bp_dev_free(dev, dy);
    }
    bp_dev_free(dev, dx);
    return s;
}

static bp_launch ext_launch(int i, const bp_op_call *c, char *err, size_t err_len) {
    const ext *e = &exts[i];
    if (!e->dev || !claimed_op(c->op)) return BP_LAUNCH_NO_KERNEL;
    /* every part's kind, however many jobs: an unproven kernel never runs */
    for (int j = 0; j < bp_op_call_parts(c); j++)
        if (!proven(e, bp_op_call_kind(c, j))) return BP_LAUNCH_NO_KERNEL;
    bp_status s;
    if (c->op == BP_OP_JOBS) {
        s = run_jobs(e, c->u.jobs.jobs, c->u.jobs.n_jobs, c->u.jobs.x, c->u.jobs.t);
    } else {
        const bp_matmul_job one = {c->u.mm.w, c->u.mm.y};
        s = run_jobs(e, &one, 1, c->u.mm.x, c->u.mm.t);
    }
    if (s) snprintf(err, err_len, "%s", bp_last_error());
    return s ? bp_launch_of_status(s) : BP_LAUNCH_OK;
}

/* Context-free entry points, one set per index. */
#define EXT_ENTRY(I)                                                                                  \
    static const char *kernel_##I(bp_op op, bp_kind k) { return ext_kernel(I, op, k); }             \
    static bool has_launch_##I(bp_op op, bp_kind k) { return ext_has_launch(I, op, k); }            \
    static bool probe_##I(char *why, size_t len) { return ext_probe(I, why, len); }                 \
    static bp_launch launch_##I(const bp_op_call *c, char *err, size_t len) { return ext_launch(I, c, err, len); }
EXT_ENTRY(0)
EXT_ENTRY(1)
EXT_ENTRY(2)
EXT_ENTRY(3)
_Static_assert(BP_GPU_EXTERN_MAX == 4, "one EXT_ENTRY per index");
static const char *(*const kernel_of[])(bp_op, bp_kind) = {kernel_0, kernel_1, kernel_2, kernel_3};
static bool (*const has_launch_of[])(bp_op, bp_kind) = {has_launch_0, has_launch_1, has_launch_2, has_launch_3};
static bool (*const probe_of[])(char *, size_t) = {probe_0, probe_1, probe_2, probe_3};
static bp_launch (*const launch_of[])(const bp_op_call *, char *, size_t) = {launch_0, launch_1, launch_2, launch_3};

/* ---- the proof ------------------------------------------------------------------------------- */

enum { PROOF_ROWS = 5, PROOF_COLS = 512, PROOF_T = 3 }; /* 512: a whole number of every kind's blocks */

static float lcg_unit(uint32_t *st) {
    *st = *st * 1664525u + 1013904223u;
    return (float)((*st >> 8) & 0xFFFFFF) / (float)0x800000 - 1.0f; /* [-1, 1) */
}

/* A weight of kind k both sides decode alike: quantized from random floats where the kind has a
 * quantizer; else random blocks, each redrawn until it decodes to finite, moderate values (a
 * random f16 scale can be Inf or NaN; a block never made finite is left zero). */
static bp_status proof_weight(const bp_kind_info *ki, uint8_t *w, size_t row_bytes, uint32_t *st) {
    float row[PROOF_COLS];
    for (int r = 0; r < PROOF_ROWS; r++) {
        uint8_t *dst = w + (size_t)r * row_bytes;
        if (ki->can_quantize) {
            for (int c = 0; c < PROOF_COLS; c++) row[c] = lcg_unit(st);
            bp_status s = bp_quantize(ki->kind, row, PROOF_COLS, dst, row_bytes);
            if (s) return s;
            continue;
        }
        for (uint32_t b = 0; b < PROOF_COLS / ki->block_elems; b++) {
            uint8_t *blk = dst + (size_t)b * ki->block_bytes;
            bool ok = false;
            for (int tries = 0; tries < 16 && !ok; tries++) {
                for (uint32_t j = 0; j < ki->block_bytes; j++) blk[j] = (uint8_t)(lcg_unit(st) * 127.0f + 128.0f);
                ok = bp_dequantize(ki->kind, blk, ki->block_bytes, row, ki->block_elems) == BP_OK;
                for (uint32_t j = 0; ok && j < ki->block_elems; j++) ok = isfinite(row[j]) && fabsf(row[j]) < 1e3f;
            }
            if (!ok) memset(blk, 0, ki->block_bytes);
        }
    }
    return BP_OK;
}

/* Run kind k's kernel on a proof weight and compare with bp_ref_gemm. */
static bp_status prove(const ext *e, const bp_kind_info *ki, char *why, size_t len) {
    size_t rb = 0;
    bp_status s = bp_kind_row_bytes(ki->kind, PROOF_COLS, &rb);
    if (s) return s;
    uint32_t st = 0x9E3779B9u ^ (uint32_t)ki->kind;
    uint8_t *w = bp_calloc(PROOF_ROWS, rb);
    float x[PROOF_T * PROOF_COLS], ref[PROOF_T * PROOF_ROWS], got[PROOF_T * PROOF_ROWS];
    if (!w) return bp_fail(BP_E_NOMEM, "no memory for a proof weight");
    s = proof_weight(ki, w, rb, &st);
    for (int i = 0; i < PROOF_T * PROOF_COLS; i++) x[i] = lcg_unit(&st);
    bp_weight wt;
    if (!s) s = bp_weight_init(&wt, ki->kind, w, rb * PROOF_ROWS, PROOF_ROWS, PROOF_COLS);
    if (!s) s = bp_ref_gemm(ki->kind, w, rb * PROOF_ROWS, PROOF_ROWS, PROOF_COLS, x, PROOF_T, ref);
    for (int i = 0; i < PROOF_T * PROOF_ROWS; i++) got[i] = NAN;
    if (!s) {
        const bp_matmul_job job = {&wt, got};
        s = run_jobs(e, &job, 1, x, PROOF_T);
        if (s) snprintf(why, len, "%s: %s", e->kname[ki->kind], bp_last_error());
    }
    bp_free(w);
    if (s) return s;
    double num = 0, den = 0;
    for (int i = 0; i < PROOF_T * PROOF_ROWS; i++) {
        const double d = (double)got[i] - (double)ref[i];
        num += d * d, den += (double)ref[i] * ref[i];
    }
    const double nmse = den > 0 ? num / den : num;
    if (!(nmse <= BP_GPU_EXTERN_PROOF_NMSE)) { /* NaN fails too */
        snprintf(why, len, "%s: NMSE %.3g against the CPU reference on %dx%d, t=%d (at most %g)", e->kname[ki->kind],
                 nmse, PROOF_ROWS, PROOF_COLS, PROOF_T, BP_GPU_EXTERN_PROOF_NMSE);
        return BP_E_DEVICE;
    }
    return BP_OK;
}

/* ---- set up and tear down -------------------------------------------------------------------- */

bp_status bp_gpu_extern_open(int i, bp_device *dev, const char *name, const char *display, int *n_proven) {
    if (i < 0 || i >= BP_GPU_EXTERN_MAX || exts[i].dev)
        return bp_fail(BP_E_INVAL, "registered backend slot %d is in use or out of range", i);
    if (n_proven) *n_proven = 0;
    ext *e = &exts[i];
    memset(e, 0, sizeof *e);
    e->dev = dev;
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->display, sizeof e->display, "%s", display);
    snprintf(e->prefill, sizeof e->prefill, "%s per-position matvec", display);
    int n = 0, found = 0;
    char first_bad[320] = "";
    for (int j = 0; j < bp_kind_table_size(); j++) {
        const bp_kind_info *ki = bp_kind_at(j);
        if ((unsigned)ki->kind >= EXT_KINDS || !bp_op_kind_in_domain(BP_OP_MATVEC, ki->kind)) continue;
        snprintf(e->kname[ki->kind], sizeof e->kname[0], "matmul_%s", ki->name);
        if (!bp_dev_has_kernel(dev, e->kname[ki->kind])) continue;
        found++;
        char why[320] = "";
        if (prove(e, ki, why, sizeof why) == BP_OK) {
            e->proven[ki->kind] = true;
            n++;
        } else if (!first_bad[0]) {
            snprintf(first_bad, sizeof first_bad, "%s", why[0] ? why : bp_last_error());
        }
    }
    if (!n) {
        e->dev = NULL;
        if (!found)
            return bp_fail(BP_E_NOT_FOUND, "backend '%s': device %s has no matmul_<KIND> kernel for any weight kind", name,
                           dev->name);
        return bp_fail(BP_E_NOT_FOUND, "backend '%s': no kernel passed its proof (%s)", name, first_bad);
    }
    e->caps = (bp_backend_caps){.id = BP_BACKEND_COUNT, .name = e->name, .display_name = e->display,
                                .prefill_fallback_name = e->prefill, .unverified = NULL, .kernel = kernel_of[i]};
    e->dispatch = (bp_backend_dispatch){.probe = probe_of[i], .has_launch = has_launch_of[i], .launch = launch_of[i]};
    if (n_proven) *n_proven = n;
    return BP_OK;
}

void bp_gpu_extern_close(int i) {
    if (i >= 0 && i < BP_GPU_EXTERN_MAX) memset(&exts[i], 0, sizeof exts[i]);
}

int bp_gpu_extern_free_index(void) {
    for (int i = 0; i < BP_GPU_EXTERN_MAX; i++)
        if (!exts[i].dev) return i;
    return -1;
}

const bp_backend_caps *bp_gpu_extern_caps(int i) {
    return i >= 0 && i < BP_GPU_EXTERN_MAX && exts[i].dev ? &exts[i].caps : NULL;
}

const bp_backend_dispatch *bp_gpu_extern_dispatch(int i) {
    return i >= 0 && i < BP_GPU_EXTERN_MAX && exts[i].dev ? &exts[i].dispatch : NULL;
}

bp_device *bp_gpu_extern_device(int i) { return i >= 0 && i < BP_GPU_EXTERN_MAX ? exts[i].dev : NULL; }
