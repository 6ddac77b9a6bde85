/* The mock backend on the mock device (see mock_backend.h). Process-wide single instance:
 * the seam's tables are const function tables, so the configuration they read is global. */
#include "mock/mock_backend.h"

#include <stdatomic.h>
#include <string.h>

#include "core/error.h"

static bp_mock_backend_config cfg;
static bp_device *dev;
static atomic_int probe_calls, ops, attempts;

static bool in_range(bp_kind k) { return (unsigned)k < BP_MOCK_MAX_KIND; }

static const char *mock_matvec_kernel(bp_kind k) {
    if (!in_range(k) || !cfg.matvec[k]) return NULL;
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    return ki ? ki->name : NULL;
}

static bool mock_has_gemm(bp_kind k) { return in_range(k) && cfg.gemm[k]; }

static const bp_backend_caps mock_caps = {
    .id = BP_BACKEND_COUNT, /* not a row of backends.def: no id of its own */
    .name = "mock",
    .display_name = "Mock",
    .prefill_fallback_name = "Mock per-position matvec",
    .matvec_kernel = mock_matvec_kernel,
    .has_gemm = mock_has_gemm,
    .unverified = NULL,
};

static bool mock_probe(char *why, size_t len) {
    atomic_fetch_add(&probe_calls, 1);
    snprintf(why, len, "%s", cfg.probe_result ? "the mock device" : "mock probe says no device");
    return cfg.probe_result;
}

static bool mock_has_launch(bp_kind k) { return in_range(k) && cfg.launch[k]; }

static bool mock_wants(int64_t n_out, int64_t n_in, int64_t t) {
    return (double)n_out * (double)n_in * (double)t >= (double)cfg.min_work;
}

/* One op on the device: upload W and X, launch, sync, read Y back, free everything. */
static bp_launch run(bp_weight *w, const float *x, int64_t t, float *y, char *err, size_t err_len) {
    atomic_fetch_add(&attempts, 1);
    if (!dev) {
        snprintf(err, err_len, "mock device not open");
        return BP_LAUNCH_ERROR;
    }
    if (!mock_has_launch(w->kind)) return BP_LAUNCH_NO_KERNEL;
    if (cfg.cols_multiple > 0 && w->cols % cfg.cols_multiple) {
        snprintf(err, err_len, "shape %lld x %lld not supported: cols must be a multiple of %lld",
                 (long long)w->rows, (long long)w->cols, (long long)cfg.cols_multiple);
        return BP_LAUNCH_ERROR;
    }
    size_t wb = w->row_bytes * (size_t)w->rows;
    size_t xb = (size_t)(t * w->cols) * sizeof(float), yb = (size_t)(t * w->rows) * sizeof(float);
    void *dw = NULL, *dx = NULL, *dy = NULL;
    bp_kernel *k = NULL;
    bp_status s = bp_dev_alloc(dev, wb, &dw);
    if (!s) s = bp_dev_alloc(dev, xb, &dx);
    if (!s) s = bp_dev_alloc(dev, yb, &dy);
    if (!s) s = bp_dev_h2d(dev, dw, 0, w->data, wb);
    if (!s) s = bp_dev_h2d(dev, dx, 0, x, xb);
    if (!s) s = bp_dev_kernel(dev, "gemm", &k);
    if (!s) {
        bp_kernel_arg args[7] = {bp_arg_buf(dw, 0), bp_arg_buf(dx, 0), bp_arg_buf(dy, 0),
                                 bp_arg_i32((int32_t)w->kind), bp_arg_i64(w->rows), bp_arg_i64(w->cols),
                                 bp_arg_i64(t)};
        bp_launch_dims dims = {{(uint32_t)w->rows, (uint32_t)t, 1}, {1, 1, 1}, 0};
        s = bp_dev_launch(dev, NULL, k, &dims, args, 7);
    }
    if (!s) s = bp_dev_stream_sync(dev, NULL);
    if (!s) s = bp_dev_d2h(dev, y, dy, 0, yb);
    if (s) snprintf(err, err_len, "%s", bp_last_error());
    bp_dev_free(dev, dw);
    bp_dev_free(dev, dx);
    bp_dev_free(dev, dy);
    if (s) return bp_launch_of_status(s); /* a lost device (sticky fault) is BP_LAUNCH_LOST */
    atomic_fetch_add(&ops, 1);
    return BP_LAUNCH_OK;
}

static bp_launch mock_matvec(bp_weight *w, const float *x, float *y, char *err, size_t err_len) {
    return run(w, x, 1, y, err, err_len);
}

static bp_launch mock_gemm(bp_weight *w, const float *x, int64_t t, float *y, char *err, size_t err_len) {
    return run(w, x, t, y, err, err_len);
}

static bool mock_describe(bp_device_desc *out) {
    if (!cfg.describe) return false;
    out->cls = cfg.device_class;
    snprintf(out->name, sizeof out->name, "%s",
             cfg.device_class == BP_DEVICE_CPU_IMPL ? "mockpipe (a fake CPU implementation)" : "mock accelerator");
    out->cost = cfg.cost;
    return true;
}

static const bp_backend_dispatch mock_dispatch_with_gemm = {
    .probe = mock_probe,
    .has_launch = mock_has_launch,
    .wants = mock_wants,
    .matvec = mock_matvec,
    .gemm = mock_gemm,
    .describe = mock_describe,
};

static const bp_backend_dispatch mock_dispatch_no_gemm = {
    .probe = mock_probe,
    .has_launch = mock_has_launch,
    .wants = mock_wants,
    .matvec = mock_matvec,
    .gemm = NULL,
    .describe = mock_describe,
};

void bp_mock_backend_config_for(bp_mock_backend_config *c, const bp_kind *kinds, int n, bool gemm) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < n; i++) {
        if (!in_range(kinds[i])) continue;
        c->matvec[kinds[i]] = c->launch[kinds[i]] = true;
        c->gemm[kinds[i]] = gemm;
    }
    c->gemm_entry = gemm;
    c->probe_result = true;
}

const bp_backend_caps *bp_mock_backend_caps(void) { return &mock_caps; }

const bp_backend_dispatch *bp_mock_backend_dispatch(void) {
    return cfg.gemm_entry ? &mock_dispatch_with_gemm : &mock_dispatch_no_gemm;
}

bp_status bp_mock_backend_install(const bp_mock_backend_config *c, int pos) {
    if (!c) return bp_fail(BP_E_INVAL, "bp_mock_backend_install: config is NULL");
    if (dev) return bp_fail(BP_E_INVAL, "bp_mock_backend_install: already installed");
    cfg = *c;
    atomic_store(&probe_calls, 0);
    atomic_store(&ops, 0);
    atomic_store(&attempts, 0);
    bp_status s = bp_mock_device_open(&dev);
    if (s) return s;
    s = bp_seam_test_install(&mock_caps, bp_mock_backend_dispatch(), pos);
    if (s) {
        bp_device_close(dev);
        dev = NULL;
        return s;
    }
    bp_seam_test_reset_enabled();
    return BP_OK;
}

void bp_mock_backend_uninstall(void) {
    if (!dev) return;
    bp_seam_test_uninstall();
    bp_seam_test_reset_enabled();
    bp_device_close(dev);
    dev = NULL;
}

bp_device *bp_mock_backend_device(void) { return dev; }
int bp_mock_backend_probe_calls(void) { return atomic_load(&probe_calls); }
int bp_mock_backend_ops(void) { return atomic_load(&ops); }
int bp_mock_backend_attempts(void) { return atomic_load(&attempts); }
