/* The mock backend on the mock device (see mock_backend.h). Process-wide single instance:
 * the seam's tables are const function tables, so the configuration they read is global. */
#include "mock/mock_backend.h"

#include <stdatomic.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "gpu/gpu_step.h"
#include "mock/mock_step_kernels.h"

static bp_mock_backend_config cfg;
static bp_device *dev;
static bp_stream *step_stream; /* cfg.step_cuda_shape: the stream the step runs on */
static bp_stream *upload_stream; /* cfg.step_cuda_shape: the weights' upload stream, as CUDA's */
static atomic_int probe_calls, ops, attempts;
static char names[BP_OP_COUNT][BP_MOCK_MAX_KIND][48];

static bool in_range(int op, bp_kind k) { return (unsigned)op < BP_OP_COUNT && (unsigned)k < BP_MOCK_MAX_KIND; }

static const char *mock_kernel(bp_op op, bp_kind k) {
    if (!in_range((int)op, k) || !cfg.claim[op][k]) return NULL;
    return names[op][k];
}

static bool mock_has_launch(bp_op op, bp_kind k) { return in_range((int)op, k) && cfg.launch[op][k]; }

static const bp_backend_caps mock_caps = {
    .id = BP_BACKEND_COUNT, /* not a row of backends.def: no id of its own */
    .name = "mock",
    .display_name = "Mock",
    .prefill_fallback_name = "Mock per-position matvec",
    .kernel = mock_kernel,
    .unverified = NULL,
};

static bool mock_probe(char *why, size_t len) {
    atomic_fetch_add(&probe_calls, 1);
    snprintf(why, len, "%s", cfg.probe_result ? "the mock device" : "mock probe says no device");
    return cfg.probe_result;
}

static bool mock_wants(bp_op op, bp_kind k, const bp_op_shape *s) {
    (void)op, (void)k;
    return (double)s->rows * (double)s->cols * (double)s->t >= (double)cfg.min_work;
}

static bool mock_describe(bp_device_desc *out) {
    if (!cfg.describe) return false;
    out->cls = cfg.device_class;
    snprintf(out->name, sizeof out->name, "%s",
             cfg.device_class == BP_DEVICE_CPU_IMPL ? "mockpipe (a fake CPU implementation)" : "mock accelerator");
    out->cost = cfg.cost;
    return true;
}

/* ---- matvec, gemm, jobs: the device's "gemm" kernel ------------------------------------------ */

/* Launch the kernel for one weight (captured into a graph and replayed, when so configured) and
 * wait for it (on an event, when so configured). */
static bp_status launch_gemm(bp_kernel *k, void *dw, void *dx, void *dy, const bp_weight *w, int64_t t) {
    bp_kernel_arg args[7] = {bp_arg_buf(dw, 0), bp_arg_buf(dx, 0), bp_arg_buf(dy, 0), bp_arg_i32((int32_t)w->kind),
                             bp_arg_i64(w->rows), bp_arg_i64(w->cols), bp_arg_i64(t)};
    bp_launch_dims dims = {{(uint32_t)w->rows, (uint32_t)t, 1}, {1, 1, 1}, 0};
    bp_status s;
    if (cfg.graph) { /* capture, end, replay: every graph entry point on a call's path */
        s = bp_dev_graph_begin(dev, NULL);
        if (!s) s = bp_dev_launch(dev, NULL, k, &dims, args, 7);
        bp_graph *g = NULL;
        if (!s) s = bp_dev_graph_end(dev, NULL, &g);
        else bp_dev_graph_abort(dev, NULL);
        if (!s) s = bp_dev_graph_replay(dev, g, NULL);
        bp_dev_graph_destroy(dev, g);
    } else
        s = bp_dev_launch(dev, NULL, k, &dims, args, 7);
    if (!s && cfg.events) {
        bp_event *ev = NULL;
        s = bp_dev_event_create(dev, &ev);
        if (!s) s = bp_dev_event_record(dev, ev, NULL);
        if (!s) s = bp_dev_event_sync(dev, ev);
        bp_dev_event_destroy(dev, ev);
    } else if (!s)
        s = bp_dev_stream_sync(dev, NULL);
    return s;
}

/* Every job's Y = X W^T: X uploaded once; per job W up, the kernel, Y down. */
static bp_status run_jobs(const bp_matmul_job *jobs, int n, const float *x, int64_t t, char *err, size_t err_len) {
    for (int j = 0; j < n; j++) {
        const bp_weight *w = jobs[j].w;
        if (cfg.cols_multiple > 0 && w->cols % cfg.cols_multiple) {
            snprintf(err, err_len, "shape %lld x %lld not supported: cols must be a multiple of %lld",
                     (long long)w->rows, (long long)w->cols, (long long)cfg.cols_multiple);
            return BP_E_SHAPE;
        }
    }
    size_t xb = (size_t)(t * jobs[0].w->cols) * sizeof(float);
    void *dx = NULL;
    bp_kernel *k = NULL;
    bp_status s = bp_dev_alloc(dev, xb, &dx);
    if (!s) s = bp_dev_h2d(dev, dx, 0, x, xb);
    if (!s) s = bp_dev_kernel(dev, "gemm", &k);
    for (int j = 0; j < n && !s; j++) {
        const bp_weight *w = jobs[j].w;
        size_t wb = w->row_bytes * (size_t)w->rows, yb = (size_t)(t * w->rows) * sizeof(float);
        void *dw = NULL, *dy = NULL;
        s = bp_dev_alloc(dev, wb, &dw);
        if (!s) s = bp_dev_alloc(dev, yb, &dy);
        if (!s) s = bp_dev_h2d(dev, dw, 0, w->data, wb);
        if (!s) s = launch_gemm(k, dw, dx, dy, w, t);
        if (!s) s = bp_dev_d2h(dev, jobs[j].y, dy, 0, yb);
        bp_dev_free(dev, dw);
        bp_dev_free(dev, dy);
    }
    bp_dev_free(dev, dx);
    if (s) snprintf(err, err_len, "%s", bp_last_error());
    return s;
}

/* ---- every other op: the reference, through a device buffer ------------------------------------ */

/* The outputs of a call: pointers and float counts. */
static int outputs(const bp_op_call *c, float **ptr, size_t *n) {
    switch (c->op) {
    case BP_OP_ATTENTION: {
        const bp_kv_cache_desc *cd = bp_kv_cache_info(c->u.attn.cache);
        ptr[0] = c->u.attn.out, n[0] = (size_t)c->u.attn.t * (size_t)c->u.attn.d->n_heads * (size_t)cd->head_dim_v;
        return 1;
    }
    case BP_OP_NORM: ptr[0] = c->u.norm.y, n[0] = (size_t)(c->u.norm.t * c->u.norm.d->n); return 1;
    case BP_OP_ROPE:
        ptr[0] = c->u.rope.x, n[0] = (size_t)c->u.rope.t * (size_t)c->u.rope.d->n_heads * (size_t)c->u.rope.d->head_dim;
        return 1;
    case BP_OP_ACT:
    case BP_OP_GLU: ptr[0] = c->u.act.y, n[0] = (size_t)c->u.act.n; return 1;
    case BP_OP_SOFTMAX: ptr[0] = c->u.softmax.y, n[0] = (size_t)(c->u.softmax.t * c->u.softmax.n); return 1;
    case BP_OP_CONV2D:
    case BP_OP_CONV2D_GN:
    case BP_OP_CONV2D_LN: {
        int64_t oh = 0, ow = 0;
        bp_conv2d_out_size(c->u.conv.p, &oh, &ow);
        ptr[0] = c->u.conv.y, n[0] = (size_t)(oh * ow * c->u.conv.p->cout);
        return 1;
    }
    case BP_OP_MOE: {
        int64_t h = 0;
        bp_moe_shape(c->u.moe.m, NULL, &h, NULL);
        ptr[0] = c->u.moe.y, n[0] = (size_t)(c->u.moe.t * h);
        return 1;
    }
    default: return -1;
    }
}

/* The same call with its output redirected to tmp (rope works in place: tmp holds x). */
static void redirect(const bp_op_call *c, bp_op_call *r, float *tmp) {
    *r = *c;
    switch (c->op) {
    case BP_OP_ATTENTION: r->u.attn.out = tmp; break;
    case BP_OP_NORM: r->u.norm.y = tmp; break;
    case BP_OP_ROPE: r->u.rope.x = tmp; break;
    case BP_OP_ACT:
    case BP_OP_GLU: r->u.act.y = tmp; break;
    case BP_OP_SOFTMAX: r->u.softmax.y = tmp; break;
    case BP_OP_CONV2D:
    case BP_OP_CONV2D_GN:
    case BP_OP_CONV2D_LN: r->u.conv.y = tmp; break;
    case BP_OP_MOE: r->u.moe.y = tmp; break;
    default: break;
    }
}

/* The reference into host scratch, up to a device buffer and back into the output: the read-back
 * is the last step, so a failure never leaves an in-place input half written. */
static bp_status run_op(const bp_op_call *c, char *err, size_t err_len) {
    float *ptr[1], *tmp = NULL;
    size_t n[1];
    void *dbuf = NULL;
    if (!cfg.reference) {
        snprintf(err, err_len, "the mock has no reference for %s (bp_mock_backend_config.reference)", bp_op_name_of(c->op));
        return BP_E_UNSUPPORTED;
    }
    if (outputs(c, ptr, n) != 1) {
        snprintf(err, err_len, "the mock cannot run %s", bp_op_name_of(c->op));
        return BP_E_UNSUPPORTED;
    }
    bp_status s = BP_OK;
    tmp = bp_malloc(n[0] * sizeof(float) + 4);
    if (!tmp) s = bp_fail(BP_E_NOMEM, "mock: no host memory");
    else if (c->op == BP_OP_ROPE || c->op == BP_OP_MOE) /* in place, or accumulated into */
        memcpy(tmp, ptr[0], n[0] * sizeof(float));
    if (!s) s = bp_dev_alloc(dev, n[0] * sizeof(float) + 4, &dbuf);
    if (!s) {
        bp_op_call r;
        redirect(c, &r, tmp);
        s = cfg.reference(&r);
    }
    if (!s) s = bp_dev_h2d(dev, dbuf, 0, tmp, n[0] * sizeof(float));
    if (!s) s = bp_dev_stream_sync(dev, NULL);
    if (!s) s = bp_dev_d2h(dev, ptr[0], dbuf, 0, n[0] * sizeof(float));
    if (s) snprintf(err, err_len, "%s", bp_last_error());
    bp_free(tmp);
    bp_dev_free(dev, dbuf);
    return s;
}

/* The device step code over the mock device and its C step kernels. */
static bp_gpu_backend mock_step_backend(void) {
    bp_gpu_backend b = {.id = BP_BACKEND_COUNT, .name = "mock", .display = "Mock", .max_binding = (size_t)1 << 30,
                        .extra = NULL, .mm_tile = 32, .logits_rows = cfg.step_logits_rows};
    if (cfg.step_cuda_shape)
        b.mm_tile = 16, b.mv_rows = 2, b.kprefix = "step_", b.stream = step_stream, b.upload = upload_stream;
    return b;
}

static bp_launch mock_launch(const bp_op_call *c, char *err, size_t err_len) {
    atomic_fetch_add(&attempts, 1);
    if (!dev) {
        snprintf(err, err_len, "mock device not open");
        return BP_LAUNCH_ERROR;
    }
    bp_kind kinds[16];
    const int nk = bp_op_call_kinds(c, kinds, 16);
    for (int i = 0; i < nk; i++)
        if (!mock_has_launch(c->op, kinds[i])) return BP_LAUNCH_NO_KERNEL;
    if (cfg.fail_op == (int)c->op + 1) {
        snprintf(err, err_len, "mock: injected launch error on %s", bp_op_name_of(c->op));
        return BP_LAUNCH_ERROR;
    }
    bp_status s;
    if (c->op == BP_OP_MATVEC || c->op == BP_OP_GEMM) {
        const bp_matmul_job one = {c->u.mm.w, c->u.mm.y};
        s = run_jobs(&one, 1, c->u.mm.x, c->u.mm.t, err, err_len);
    } else if (c->op == BP_OP_JOBS)
        s = run_jobs(c->u.jobs.jobs, c->u.jobs.n_jobs, c->u.jobs.x, c->u.jobs.t, err, err_len);
    else if (c->op == BP_OP_STEP) {
        const bp_gpu_backend b = mock_step_backend();
        bp_mock_step_begin();
        s = bp_gpu_step_run(&b, dev, c, err, err_len);
        if (s) snprintf(err, err_len, "%s", bp_last_error());
    } else
        s = run_op(c, err, err_len);
    if (s) return bp_launch_of_status(s); /* a lost device (sticky fault) is BP_LAUNCH_LOST */
    atomic_fetch_add(&ops, 1);
    return BP_LAUNCH_OK;
}

static bp_status mock_step_bytes(const bp_step_prog *p, bp_step_bytes *out) {
    const bp_gpu_backend b = mock_step_backend();
    return bp_gpu_step_bytes(&b, p, out);
}

static const bp_backend_dispatch mock_dispatch = {
    .probe = mock_probe,
    .has_launch = mock_has_launch,
    .wants = mock_wants,
    .launch = mock_launch,
    .describe = mock_describe,
    .step_bytes = mock_step_bytes,
};

static const bp_backend_dispatch mock_dispatch_no_entry = {
    .probe = mock_probe,
    .has_launch = mock_has_launch,
    .wants = mock_wants,
    .describe = mock_describe,
    .step_bytes = mock_step_bytes,
};

/* ---- configuration and install --------------------------------------------------------------- */

void bp_mock_claim(bp_mock_backend_config *c, bp_op op, const bp_kind *kinds, int n) {
    for (int i = 0; i < n; i++)
        if (in_range((int)op, kinds[i])) c->claim[op][kinds[i]] = c->launch[op][kinds[i]] = true;
}

void bp_mock_backend_config_for(bp_mock_backend_config *c, const bp_kind *kinds, int n, bool gemm) {
    memset(c, 0, sizeof *c);
    bp_mock_claim(c, BP_OP_MATVEC, kinds, n);
    bp_mock_claim(c, BP_OP_JOBS, kinds, n);
    if (gemm) bp_mock_claim(c, BP_OP_GEMM, kinds, n);
    c->probe_result = true;
}

/* Every op but the whole step: the mock runs ops one by one (a step it would run is its nodes,
 * each an op it claims). */
void bp_mock_claim_all(bp_mock_backend_config *c) {
    for (int op = 0; op < BP_OP_COUNT; op++)
        if (op != BP_OP_STEP)
            for (int i = 0; i < bp_kind_table_size(); i++) {
                const bp_kind k = bp_kind_at(i)->kind;
                if (bp_op_kind_in_domain((bp_op)op, k)) bp_mock_claim(c, (bp_op)op, &k, 1);
            }
    c->probe_result = true;
}

const bp_backend_caps *bp_mock_backend_caps(void) { return &mock_caps; }

const bp_backend_dispatch *bp_mock_backend_dispatch(void) {
    return cfg.no_launch_entry ? &mock_dispatch_no_entry : &mock_dispatch;
}

bp_status bp_mock_open(const bp_mock_backend_config *c) {
    if (!c) return bp_fail(BP_E_INVAL, "bp_mock_backend_install: config is NULL");
    if (dev) return bp_fail(BP_E_INVAL, "bp_mock_backend_install: already installed");
    cfg = *c;
    for (int op = 0; op < BP_OP_COUNT; op++)
        for (int k = 0; k < BP_MOCK_MAX_KIND; k++) {
            const bp_kind_info *ki = cfg.claim[op][k] ? bp_kind_lookup((uint32_t)k) : NULL;
            names[op][k][0] = '\0';
            if (!ki) continue;
            if (cfg.misname && op > BP_OP_GEMM) snprintf(names[op][k], sizeof names[op][k], "%s %s", ki->name, bp_op_name(op));
            else if (cfg.misname) snprintf(names[op][k], sizeof names[op][k], "%s_", ki->name);
            else bp_claim_name((bp_op)op, ki->kind, names[op][k], sizeof names[op][k]);
        }
    atomic_store(&probe_calls, 0);
    atomic_store(&ops, 0);
    atomic_store(&attempts, 0);
    bp_status st = bp_mock_device_open(&dev);
    if (!st && cfg.step_cuda_shape &&
        ((st = bp_dev_stream_create(dev, &step_stream)) || (st = bp_dev_stream_create(dev, &upload_stream))))
        bp_mock_close();
    return st;
}

void bp_mock_close(void) {
    if (!dev) return;
    if (step_stream) bp_dev_stream_destroy(dev, step_stream);
    if (upload_stream) bp_dev_stream_destroy(dev, upload_stream);
    step_stream = upload_stream = NULL;
    bp_mock_step_inject(NULL, 0, 0);
    bp_device_close(dev);
    dev = NULL;
}

bp_device *bp_mock_backend_device(void) { return dev; }
int bp_mock_backend_probe_calls(void) { return atomic_load(&probe_calls); }
int bp_mock_backend_ops(void) { return atomic_load(&ops); }
int bp_mock_backend_attempts(void) { return atomic_load(&attempts); }
