/* The mock op backend (see mock_ops.h). Process-wide single instance, like the mock backend:
 * the seam's tables are const function tables reading a global configuration. */
#include "mock/mock_ops.h"

#include <stdatomic.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "ops/ops_internal.h"

static bp_mock_ops_config cfg;
static bp_device *dev;
static atomic_int runs;
static char names[BP_OP_COUNT][BP_MOCK_MAX_KIND][48];

static bool in_range(int op, bp_kind k) { return (unsigned)op < BP_OP_COUNT && (unsigned)k < BP_MOCK_MAX_KIND; }

static const char *mock_op_kernel(int op, bp_kind k) {
    if (!in_range(op, k) || !cfg.claim[op][k]) return NULL;
    return names[op][k];
}

static bool mock_has_op_launch(int op, bp_kind k) { return in_range(op, k) && cfg.launch[op][k]; }

static const char *no_matvec(bp_kind k) {
    (void)k;
    return NULL;
}
static bool no_gemm(bp_kind k) {
    (void)k;
    return false;
}
static bool no_launch(bp_kind k) {
    (void)k;
    return false;
}
static bool probe(char *why, size_t len) {
    snprintf(why, len, "the mock op device");
    return true;
}
static bp_launch matvec(bp_weight *w, const float *x, float *y, char *err, size_t err_len) {
    (void)w, (void)x, (void)y, (void)err, (void)err_len;
    return BP_LAUNCH_NO_KERNEL;
}

static const bp_backend_caps caps = {
    .id = BP_BACKEND_COUNT,
    .name = "mockops",
    .display_name = "MockOps",
    .prefill_fallback_name = "MockOps per-position matvec",
    .matvec_kernel = no_matvec,
    .has_gemm = no_gemm,
    .op_kernel = mock_op_kernel,
};

/* The outputs of a call: pointers and float counts (jobs have one per job). */
enum { MAX_OUT = 16 };
static int outputs(const bp_op_call *c, float **ptr, size_t *n) {
    switch (c->op) {
    case BP_OP_JOBS: {
        int k = c->u.jobs.n_jobs < MAX_OUT ? c->u.jobs.n_jobs : MAX_OUT;
        for (int i = 0; i < k; i++)
            ptr[i] = c->u.jobs.jobs[i].y, n[i] = (size_t)(c->u.jobs.t * c->u.jobs.jobs[i].w->rows);
        return c->u.jobs.n_jobs <= MAX_OUT ? k : -1;
    }
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
    case BP_OP_COUNT: break;
    }
    return -1;
}

/* The same call with its outputs redirected to tmp[i] (rope works in place: tmp holds x). */
static void redirect(const bp_op_call *c, bp_op_call *r, float **tmp, bp_matmul_job *jobs) {
    *r = *c;
    switch (c->op) {
    case BP_OP_JOBS:
        for (int i = 0; i < c->u.jobs.n_jobs; i++) jobs[i] = c->u.jobs.jobs[i], jobs[i].y = tmp[i];
        r->u.jobs.jobs = jobs;
        break;
    case BP_OP_ATTENTION: r->u.attn.out = tmp[0]; break;
    case BP_OP_NORM: r->u.norm.y = tmp[0]; break;
    case BP_OP_ROPE: r->u.rope.x = tmp[0]; break;
    case BP_OP_ACT:
    case BP_OP_GLU: r->u.act.y = tmp[0]; break;
    case BP_OP_SOFTMAX: r->u.softmax.y = tmp[0]; break;
    case BP_OP_COUNT: break;
    }
}

static bp_launch launch(const bp_op_call *c, char *err, size_t err_len) {
    if (!dev) {
        snprintf(err, err_len, "mock op device not open");
        return BP_LAUNCH_ERROR;
    }
    if (!mock_has_op_launch((int)c->op, c->kind) || !mock_has_op_launch((int)c->op, c->kind2))
        return BP_LAUNCH_NO_KERNEL;
    float *ptr[MAX_OUT], *tmp[MAX_OUT] = {0};
    void *dbuf[MAX_OUT] = {0};
    size_t n[MAX_OUT];
    bp_matmul_job jobs[MAX_OUT];
    int no = outputs(c, ptr, n);
    if (no < 0) {
        snprintf(err, err_len, "more than %d outputs", MAX_OUT);
        return BP_LAUNCH_ERROR;
    }
    bp_status s = BP_OK;
    for (int i = 0; i < no && !s; i++) {
        tmp[i] = bp_malloc(n[i] * sizeof(float) + 4);
        if (!tmp[i]) s = bp_fail(BP_E_NOMEM, "mock ops: no host memory");
        else if (c->op == BP_OP_ROPE) memcpy(tmp[i], ptr[i], n[i] * sizeof(float));
        if (!s) s = bp_dev_alloc(dev, n[i] * sizeof(float) + 4, &dbuf[i]);
    }
    if (!s) {
        bp_op_call r;
        redirect(c, &r, tmp, jobs);
        s = bp_op_reference(&r);
    }
    for (int i = 0; i < no && !s; i++) s = bp_dev_h2d(dev, dbuf[i], 0, tmp[i], n[i] * sizeof(float));
    if (!s) s = bp_dev_stream_sync(dev, NULL);
    for (int i = 0; i < no && !s; i++) s = bp_dev_d2h(dev, ptr[i], dbuf[i], 0, n[i] * sizeof(float));
    if (s) snprintf(err, err_len, "%s", bp_last_error());
    for (int i = 0; i < no; i++) {
        bp_free(tmp[i]);
        bp_dev_free(dev, dbuf[i]);
    }
    if (s) return bp_launch_of_status(s); /* a lost device disables the backend (the seam's rule) */
    atomic_fetch_add(&runs, 1);
    return BP_LAUNCH_OK;
}

static const bp_backend_dispatch dispatch_full = {
    .probe = probe,
    .has_launch = no_launch,
    .matvec = matvec,
    .has_op_launch = mock_has_op_launch,
    .op_launch = launch,
};

static const bp_backend_dispatch dispatch_no_entry = {
    .probe = probe,
    .has_launch = no_launch,
    .matvec = matvec,
    .has_op_launch = mock_has_op_launch,
};

void bp_mock_ops_claim(bp_mock_ops_config *c, bp_op op, const bp_kind *kinds, int n) {
    for (int i = 0; i < n; i++)
        if (in_range((int)op, kinds[i])) c->claim[op][kinds[i]] = c->launch[op][kinds[i]] = true;
}

const bp_backend_caps *bp_mock_ops_caps(void) { return &caps; }
const bp_backend_dispatch *bp_mock_ops_dispatch(void) { return cfg.no_launch_entry ? &dispatch_no_entry : &dispatch_full; }

bp_status bp_mock_ops_install(const bp_mock_ops_config *c, int pos) {
    if (!c) return bp_fail(BP_E_INVAL, "bp_mock_ops_install: config is NULL");
    if (dev) return bp_fail(BP_E_INVAL, "bp_mock_ops_install: already installed");
    cfg = *c;
    for (int op = 0; op < BP_OP_COUNT; op++)
        for (int k = 0; k < BP_MOCK_MAX_KIND; k++) {
            const bp_kind_info *ki = cfg.claim[op][k] ? bp_kind_lookup((uint32_t)k) : NULL;
            if (!ki) continue;
            if (cfg.misname) snprintf(names[op][k], sizeof names[op][k], "%s %s", ki->name, bp_op_name(op));
            else snprintf(names[op][k], sizeof names[op][k], "%s %s", bp_op_name(op), ki->name);
        }
    atomic_store(&runs, 0);
    bp_status s = bp_mock_device_open(&dev);
    if (s) return s;
    s = bp_seam_test_install(&caps, bp_mock_ops_dispatch(), pos);
    if (s) {
        bp_device_close(dev);
        dev = NULL;
        return s;
    }
    bp_seam_test_reset_enabled();
    return BP_OK;
}

void bp_mock_ops_uninstall(void) {
    if (!dev) return;
    bp_seam_test_uninstall();
    bp_seam_test_reset_enabled();
    bp_device_close(dev);
    dev = NULL;
}

bp_device *bp_mock_ops_device(void) { return dev; }
int bp_mock_ops_runs(void) { return atomic_load(&runs); }
