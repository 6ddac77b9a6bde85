/* The CUDA backend's seam entry points (bp_dispatch_cuda): probe, the device-free launch table,
 * matvec and GEMM. UNRUN ON HARDWARE until tools/gpu_check.sh runs on a GPU.
 *
 * Without a GPU or driver the binary still starts (cudart is linked statically and dlopens
 * libcuda.so.1 at the first call); the probe then reports cudaGetDeviceCount's error code
 * and text and the seam moves on to the next backend.
 *
 * One lock serializes every CUDA op of the process: the op cache's scratch slots are not for
 * concurrent users, and a weight's first upload must happen once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "kinds/kinds_internal.h"

bool bp_cu_probe(char *why, size_t why_len) {
    int n = 0; /* cudaGetDeviceCount leaves it unchanged on failure (TOOLCHAINS.md) */
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, why_len, "CUDA unavailable: cudaGetDeviceCount -> %d %s (%s)", (int)e, cudaGetErrorName(e),
                 cudaGetErrorString(e));
        return false;
    }
    if (n <= 0) {
        snprintf(why, why_len, "CUDA unavailable: cudaGetDeviceCount -> 0 devices");
        return false;
    }
    struct cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, why_len, "CUDA unavailable: cudaGetDeviceProperties(0) -> %d %s", (int)e, cudaGetErrorName(e));
        return false;
    }
    /* The build carries sm_90 SASS and compute_90 PTX: nothing older can load it. */
    if (p.major < 9) {
        snprintf(why, why_len, "CUDA unavailable: %s is sm_%d%d; this build has sm_90 code and compute_90 PTX only",
                 p.name, p.major, p.minor);
        return false;
    }
    snprintf(why, why_len, "%s (sm_%d%d, %d SMs, %.0f GiB); CUDA kernels UNRUN ON HARDWARE before tools/gpu_check.sh",
             p.name, p.major, p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024 * 1024));
    return true;
}

static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;
static bp_device *cu_dev;
static bp_stream *cu_stream;
static bool cu_tried;
static char cu_open_error[256];

static bp_status open_locked(void) {
    if (cu_dev) return BP_OK;
    if (cu_tried) return bp_fail(BP_E_UNSUPPORTED, "%s", cu_open_error);
    cu_tried = true;
    char why[256];
    bp_status s;
    if (!bp_cu_probe(why, sizeof why)) {
        s = bp_fail(BP_E_UNSUPPORTED, "%s", why);
    } else if ((s = bp_device_open(&bp_cu_device_methods, NULL, "cuda:0", &cu_dev)) == BP_OK &&
               (s = bp_dev_stream_create(cu_dev, &cu_stream)) != BP_OK) {
        bp_device_close(cu_dev);
        cu_dev = NULL;
    }
    if (s) snprintf(cu_open_error, sizeof cu_open_error, "%s", bp_last_error());
    return s;
}

bp_status bp_cu_device(bp_device **dev, bp_stream **stream) {
    pthread_mutex_lock(&cu_lock);
    bp_status s = open_locked();
    pthread_mutex_unlock(&cu_lock);
    if (s == BP_OK) {
        *dev = cu_dev;
        *stream = cu_stream;
    }
    return s;
}

static bool cu_has_launch(bp_kind k) {
    const bp_kind_traits *t = bp_kind_traits_of(k);
    if (!t || t->info.role != BP_ROLE_W) return false;
    char name[48];
    snprintf(name, sizeof name, "matvec_%s", t->info.name);
    return bp_cu_kernel_find(name) != NULL;
}

/* The device copy of a weight: rows padded to a 16-byte pitch (the kernels' vector loads). */
typedef struct cu_weight {
    bp_device *dev;
    void *buf;
    size_t pitch;
} cu_weight;

static void cu_weight_free(void *p) {
    cu_weight *cw = p;
    pthread_mutex_lock(&cu_lock);
    bp_dev_free(cw->dev, cw->buf);
    pthread_mutex_unlock(&cu_lock);
    bp_free(cw);
}

static bp_status upload_locked(bp_weight *w, cu_weight **out) {
    cu_weight *cw = w->backend_state[BP_BACKEND_CUDA];
    if (cw) {
        *out = cw;
        return BP_OK;
    }
    const size_t pitch = (w->row_bytes + 15) & ~(size_t)15;
    size_t bytes;
    /* + 16: the kernels' unaligned u32 reads (bp_cu_u32) may read up to 4 bytes past a row. */
    if (!bp_mul_size(pitch, (size_t)w->rows, &bytes) || !bp_add_size(bytes, 16, &bytes))
        return bp_fail(BP_E_SHAPE, "CUDA upload: %lld rows of %zu bytes overflow", (long long)w->rows, pitch);
    cw = bp_calloc(1, sizeof *cw);
    if (!cw) return bp_fail(BP_E_NOMEM, "CUDA upload: no memory");
    cw->dev = cu_dev;
    cw->pitch = pitch;
    bp_status s = bp_dev_alloc(cu_dev, bytes, &cw->buf);
    if (!s) s = bp_dev_memset_on(cu_dev, cu_stream, cw->buf, 0, 0, bytes); /* defined padding */
    if (!s)
        s = bp_dev_copy_2d(cu_dev, cu_stream, BP_COPY_H2D, cw->buf, 0, pitch, w->data, 0, w->row_bytes, w->row_bytes,
                           (size_t)w->rows);
    if (!s) s = bp_dev_stream_sync(cu_dev, cu_stream);
    if (s) {
        if (cw->buf) bp_dev_free(cu_dev, cw->buf);
        bp_free(cw);
        return s;
    }
    w->backend_state[BP_BACKEND_CUDA] = cw;
    w->backend_free[BP_BACKEND_CUDA] = cu_weight_free;
    *out = cw;
    return BP_OK;
}

static bp_status launch(const char *name, const bp_launch_dims *dims, void **params, int n) {
    bp_kernel *k;
    bp_status s = bp_dev_kernel(cu_dev, name, &k);
    return s ? s : bp_dev_launch_raw(cu_dev, cu_stream, k, dims, params, n);
}

/* Exact mode (bp_exact_mode: BACKPLANE_EXACT or bp_set_exact_mode) keeps prefill off the f16
 * tensor cores (weights and activations rounded to f16, activations above 65504 overflow) and
 * on the f32 kernels. The decode kernels are unaffected (q8 activations, f32 accumulation). */

/* Y[t][rows] = X[t][cols] W^T; t == 1 runs the decode kernels. Called under cu_lock. */
static bp_status run_locked(bp_weight *w, const float *x, int64_t t, float *y) {
    bp_status s = open_locked();
    if (s) return s;
    const bp_kind_traits *kt = bp_kind_traits_of(w->kind);
    if (w->rows > INT32_MAX || w->cols > INT32_MAX || t > INT32_MAX / 64 || t < 1)
        return bp_fail(BP_E_SHAPE, "CUDA %s: %lld x %lld, t=%lld exceeds the kernels' int range", kt->info.name,
                       (long long)w->rows, (long long)w->cols, (long long)t);
    cu_weight *cw = NULL;
    if ((s = upload_locked(w, &cw))) return s;
    int rows = (int)w->rows, cols = (int)w->cols, tt = (int)t;
    const bool quant = kt->info.block_elems > 1;
    int nch = cols / 32;
    size_t xbytes = (size_t)t * (size_t)cols * sizeof(float), ybytes = (size_t)t * (size_t)rows * sizeof(float);
    void *xb, *yb, *xqb = NULL;
    if ((s = bp_dev_scratch(cu_dev, 0, xbytes, &xb)) || (s = bp_dev_scratch(cu_dev, 2, ybytes, &yb))) return s;
    if ((s = bp_dev_h2d_on(cu_dev, cu_stream, xb, 0, x, xbytes))) return s;
    char name[48];
    const void *wp = cw->buf;
    size_t pitch = cw->pitch;
    if (t == 1) {
        if (quant) {
            if ((s = bp_dev_scratch(cu_dev, 1, (size_t)nch * BP_CU_XQ_BYTES, &xqb))) return s;
            bp_launch_dims qd = {{(uint32_t)((nch + 3) / 4), 1, 1}, {BP_CU_QUANT_THREADS, 1, 1}, 0};
            void *qp[] = {&xb, &xqb, &nch};
            if ((s = launch("quantize_q8", &qd, qp, 3))) return s;
        }
        bp_launch_dims md = {{(uint32_t)((rows + BP_CU_MV_ROWS - 1) / BP_CU_MV_ROWS), 1, 1}, {BP_CU_MV_THREADS, 1, 1}, 0};
        void *mp[] = {&wp, &pitch, &rows, &cols, &xb, &xqb, &yb};
        snprintf(name, sizeof name, "matvec_%s", kt->info.name);
        if ((s = launch(name, &md, mp, 7))) return s;
    } else {
        bp_launch_dims gd = {{(uint32_t)((rows + BP_CU_GEMM_TILE - 1) / BP_CU_GEMM_TILE),
                              (uint32_t)((tt + BP_CU_GEMM_TILE - 1) / BP_CU_GEMM_TILE), 1},
                             {BP_CU_GEMM_THREADS, 1, 1}, 0};
        void *gp[] = {&wp, &pitch, &rows, &cols, &xb, &tt, &yb};
        snprintf(name, sizeof name, bp_exact_mode() ? "gemm_exact_%s" : "gemm_%s", kt->info.name);
        if ((s = launch(name, &gd, gp, 7))) return s;
    }
    if ((s = bp_dev_d2h_on(cu_dev, cu_stream, y, yb, 0, ybytes))) return s;
    return bp_dev_stream_sync(cu_dev, cu_stream);
}

static bp_launch run(bp_weight *w, const float *x, int64_t t, float *y, char *err, size_t err_len) {
    if (!cu_has_launch(w->kind)) return BP_LAUNCH_NO_KERNEL;
    pthread_mutex_lock(&cu_lock);
    bp_status s = run_locked(w, x, t, y);
    if (s && cu_dev) bp_dev_graph_abort(cu_dev, cu_stream); /* never leave the stream capturing */
    pthread_mutex_unlock(&cu_lock);
    if (s == BP_OK) return BP_LAUNCH_OK;
    snprintf(err, err_len, "%s", bp_last_error());
    return BP_LAUNCH_ERROR;
}

static bp_launch cu_matvec(bp_weight *w, const float *x, float *y, char *err, size_t err_len) {
    return run(w, x, 1, y, err, err_len);
}

static bp_launch cu_gemm(bp_weight *w, const float *x, int64_t t, float *y, char *err, size_t err_len) {
    return run(w, x, t, y, err, err_len);
}

const bp_backend_dispatch bp_dispatch_cuda = {
    .probe = bp_cu_probe,
    .has_launch = cu_has_launch,
    .wants = NULL,
    .matvec = cu_matvec,
    .gemm = cu_gemm,
};
