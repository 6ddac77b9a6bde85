/* The Vulkan half of the backend interface (src/backend/backend.h): probe, launch table, and
 * the launch of matvec, gemm and matmul jobs (one input upload and one submission for all the
 * jobs of a call).
 *
 * A weight is uploaded once, on first use, into device buffers of at most maxStorageBufferRange
 * bytes each (split by rows: lavapipe's 128 MiB is less than one vocabulary-sized F16 matrix),
 * and cached in bp_weight.backend_state. Activations go through two scratch buffers of the op
 * cache, reused across calls. Pipelines come from the op cache: built once per (kind, op).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "kinds/kinds_internal.h"
#include "backend/backend.h"
#include "vulkan/vk_internal.h"
#include "vulkan/vk_spirv.h"
#include "gpu/gpu_step.h"

enum { VK_SLOT_X = 0, VK_SLOT_Y = 1, VK_MAX_JOBS = 16 };
#define VK_GEMM_TM 32 /* tile sizes of shaders/gemm.comp */
#define VK_GEMM_TN 32

/* ---- the process-wide device ---------------------------------------------------------------- */

static pthread_mutex_t vk_init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool vk_tried;
static char vk_why[256];
static bp_vk_ctx vk_ctx;
static bp_device *vk_dev;
static size_t vk_test_range;
/* Serialises launches: they share the scratch buffers. */
static pthread_mutex_t vk_run_lock = PTHREAD_MUTEX_INITIALIZER;
/* The IQ grids, uploaded once per device; bound as the fourth argument of every kernel. */
static void *vk_iq_buf;

static bool vk_ctx_ok, vk_atexit; /* the context works; the teardown is registered */

static void vk_teardown(void) {
    pthread_mutex_lock(&vk_init_lock);
    if (vk_dev) {
        if (vk_iq_buf) bp_dev_free(vk_dev, vk_iq_buf);
        vk_iq_buf = NULL;
        /* Weights still alive are swept by the ledger; their state is freed later without
         * touching the device (see weight_free). */
        bp_device_close(vk_dev);
        vk_dev = NULL;
        vk_ctx_ok = false; /* torn down: nothing reopens it during exit */
        /* The instance is left to the process exit: vkDestroyInstance makes the loader unload
         * the driver, and lavapipe then leaves a 128-byte block LeakSanitizer reports from an
         * "unknown module" (TOOLCHAINS.md) in every sanitized program that used Vulkan. */
        VkInstance keep = vk_ctx.instance;
        vk_ctx.instance = VK_NULL_HANDLE;
        bp_vk_ctx_destroy(&vk_ctx);
        vk_ctx.instance = keep;
    }
    pthread_mutex_unlock(&vk_init_lock);
}

bp_device *bp_vk_device(char *why, size_t why_len) {
    pthread_mutex_lock(&vk_init_lock);
    if (!vk_tried) {
        vk_tried = true;
        vk_ctx_ok = bp_vk_ctx_create(&vk_ctx, vk_why, sizeof vk_why);
    }
    /* Over a context that works, the device is opened at first use, and again at the next use
     * when that failed: bp_device_open fails only for memory, and a transient out-of-memory must
     * not take Vulkan away for the rest of the process (the cold allocation-failure campaign,
     * tests/test_alloc_campaign.c, found that it did). The context is kept meanwhile. */
    if (vk_ctx_ok && !vk_dev) {
        char name[32];
        snprintf(name, sizeof name, "vulkan:%.24s", vk_ctx.name);
        if (bp_device_open(&bp_vk_methods, &vk_ctx, name, &vk_dev) != BP_OK) {
            snprintf(vk_why, sizeof vk_why, "bp_device_open: %s", bp_last_error());
            vk_dev = NULL;
        } else if (!vk_atexit) {
            vk_atexit = true;
            atexit(vk_teardown);
        }
    }
    bp_device *d = vk_dev;
    if (!d && why) snprintf(why, why_len, "%s", vk_why);
    pthread_mutex_unlock(&vk_init_lock);
    return d;
}

bp_vk_ctx *bp_vk_ctx_of(bp_device *dev) { return dev ? (bp_vk_ctx *)dev->impl : NULL; }

void bp_vk_test_set_max_range(size_t bytes) { vk_test_range = bytes; }

size_t bp_vk_max_range(void) {
    /* Capped at 1 GiB: NVIDIA reports 4 GiB - 1, more than one allocation may hold
     * (maxMemoryAllocationSize), and the shaders index bytes with 32-bit integers. */
    size_t r = vk_ctx.max_range < ((size_t)1 << 30) ? vk_ctx.max_range : ((size_t)1 << 30);
    return vk_test_range && (vk_test_range < r || !r) ? vk_test_range : r;
}

/* ---- launch table ----------------------------------------------------------------------------- */

static const bp_vk_spirv *spirv_of(bp_kind k) {
    for (int i = 0; i < bp_vk_spirv_count; i++) {
        if (bp_vk_spirv_table[i].kind == k) return &bp_vk_spirv_table[i];
    }
    return NULL;
}

/* Both shaders of k are embedded and really SPIR-V. */
static bool vk_has_kernels(bp_kind k) {
    const bp_vk_spirv *sp = spirv_of(k);
    return sp && sp->code[BP_VK_OP_MATVEC] && sp->bytes[BP_VK_OP_MATVEC] >= 20 &&
           sp->code[BP_VK_OP_GEMM] && sp->bytes[BP_VK_OP_GEMM] >= 20 &&
           sp->code[BP_VK_OP_MATVEC][0] == 0x07230203u; /* the SPIR-V magic number */
}

static bool vk_probe(char *why, size_t why_len) {
    bp_device *d = bp_vk_device(why, why_len);
    if (d && why_len) snprintf(why, why_len, "%s", vk_ctx.name); /* the report names the device */
    return d != NULL;
}

/* ---- weights ---------------------------------------------------------------------------------- */

typedef struct vk_chunk {
    void *buf;
    int64_t row0, rows;
} vk_chunk;

typedef struct vk_weight {
    bp_device *dev;
    int n;
    vk_chunk chunk[];
} vk_weight;

static void weight_free(void *state) {
    vk_weight *vw = state;
    if (!vw) return;
    pthread_mutex_lock(&vk_init_lock);
    bool alive = vk_dev == vw->dev; /* after teardown the ledger has swept these buffers */
    pthread_mutex_unlock(&vk_init_lock);
    for (int i = 0; alive && i < vw->n; i++) bp_dev_free(vw->dev, vw->chunk[i].buf);
    bp_free(vw);
}

/* Upload w in row chunks that each fit one storage-buffer binding, with 4 bytes to spare for
 * the shaders' unaligned 32-bit reads at the very end. */
static bp_status weight_upload(bp_device *dev, bp_weight *w, vk_weight **out) {
    size_t range = bp_vk_max_range();
    if (w->row_bytes + 4 > range)
        return bp_fail(BP_E_SHAPE, "Vulkan: one row of %s weight (%zu bytes) exceeds maxStorageBufferRange (%zu bytes)",
                       w->traits->info.name, w->row_bytes, range);
    int64_t per = (int64_t)((range - 4) / w->row_bytes);
    if (per > (int64_t)VK_GEMM_TM * 65535) per = (int64_t)VK_GEMM_TM * 65535; /* grid limit */
    int64_t n = (w->rows + per - 1) / per;
    vk_weight *vw = bp_calloc(1, sizeof *vw + (size_t)n * sizeof(vk_chunk));
    if (!vw) return bp_fail(BP_E_NOMEM, "Vulkan weight upload: out of host memory");
    vw->dev = dev;
    bp_status st = BP_OK;
    for (int64_t i = 0; i < n && !st; i++) {
        vk_chunk *ch = &vw->chunk[i];
        ch->row0 = i * per;
        ch->rows = w->rows - ch->row0 < per ? w->rows - ch->row0 : per;
        size_t bytes = (size_t)ch->rows * w->row_bytes;
        st = bp_dev_alloc(dev, bytes + 4, &ch->buf);
        if (!st) {
            vw->n++;
            st = bp_dev_h2d(dev, ch->buf, 0, w->data + (size_t)ch->row0 * w->row_bytes, bytes);
        }
        if (!st) st = bp_dev_memset(dev, ch->buf, bytes, 0, 4);
    }
    if (st) {
        weight_free(vw);
        return st;
    }
    *out = vw;
    return BP_OK;
}

/* ---- matvec and GEMM -------------------------------------------------------------------------- */

static bp_launch launch_error(bp_status st, char *err, size_t err_len) {
    snprintf(err, err_len, "%s", bp_last_error());
    return bp_launch_of_status(st); /* VK_ERROR_DEVICE_LOST disables the backend */
}

/* Shapes checked before anything is queued: whole blocks per row, 32-bit indexing. */
static bp_status check_shape(const bp_weight *w, int64_t t) {
    const bp_kind_traits *tr = w->traits;
    if (!tr) return bp_fail(BP_E_KIND, "Vulkan: unknown kind %d", (int)w->kind);
    if (w->rows <= 0 || w->cols <= 0 || t <= 0 || w->cols % tr->info.block_elems)
        return bp_fail(BP_E_SHAPE, "Vulkan %s: bad shape rows %lld cols %lld t %lld", tr->info.name,
                       (long long)w->rows, (long long)w->cols, (long long)t);
    size_t range = bp_vk_max_range();
    if ((size_t)w->cols * 4 > range || (size_t)w->rows * 4 > range)
        return bp_fail(BP_E_SHAPE, "Vulkan %s: %lld x %lld activations exceed maxStorageBufferRange (%zu bytes)",
                       tr->info.name, (long long)w->rows, (long long)w->cols, range);
    return BP_OK;
}

/* The weight's device copy, uploaded on first use (under vk_run_lock). */
static bp_status weight_of(bp_device *dev, bp_weight *w, vk_weight **out) {
    vk_weight *vw = w->backend_state[BP_BACKEND_VULKAN];
    bp_status st;
    if (!vw) {
        if ((st = weight_upload(dev, w, &vw))) return st;
        w->backend_state[BP_BACKEND_VULKAN] = vw;
        w->backend_free[BP_BACKEND_VULKAN] = weight_free;
    }
    *out = vw;
    return BP_OK;
}

/* Record W's kernels over the tn inputs already in xb (batch offset t0 of the call) and the
 * copy of their outputs into y: no wait, the caller syncs once. */
static bp_status record_part(bp_device *dev, bp_weight *w, vk_weight *vw, bp_kernel *k, void *xb, void *yb, int64_t t0,
                             int64_t tn, float *y, bool gemm) {
    const bp_kind_traits *tr = w->traits;
    uint32_t nsub_per_blk = tr->info.block_elems == 1 ? 1 : tr->info.block_elems / 32;
    bp_status st;
    for (int i = 0; i < vw->n; i++) {
        const vk_chunk *ch = &vw->chunk[i];
        bp_vk_push pc = {
            .rows = (uint32_t)ch->rows, .cols = (uint32_t)w->cols, .row_bytes = (uint32_t)w->row_bytes,
            .nsub = (uint32_t)(w->cols / tr->info.block_elems) * nsub_per_blk, .t = (uint32_t)tn,
            .y_row0 = (uint32_t)ch->row0, .y_stride = (uint32_t)w->rows,
        };
        bp_launch_dims d = {{0, 0, 1}, {64, 1, 1}, 0};
        if (gemm) {
            d.grid[0] = (uint32_t)((ch->rows + VK_GEMM_TM - 1) / VK_GEMM_TM);
            d.grid[1] = (uint32_t)((tn + VK_GEMM_TN - 1) / VK_GEMM_TN);
        } else { /* one workgroup per row, folded into 2-D past 65535 rows */
            d.grid[0] = (uint32_t)(ch->rows < 65535 ? ch->rows : 65535);
            d.grid[1] = (uint32_t)((ch->rows + 65534) / 65535);
        }
        bp_kernel_arg args[5] = {bp_arg_buf(ch->buf, 0), bp_arg_buf(xb, 0), bp_arg_buf(yb, 0),
                                 bp_arg_buf(vk_iq_buf, 0), bp_arg_bytes(&pc, sizeof pc)};
        if ((st = bp_dev_launch(dev, NULL, k, &d, args, 5))) return st;
    }
    return bp_dev_d2h_on(dev, NULL, y + (size_t)t0 * (size_t)w->rows, yb, 0, (size_t)tn * (size_t)w->rows * 4);
}

/* The IQ grids, uploaded once per device. */
static bp_status iq_upload(bp_device *dev) {
    if (vk_iq_buf) return BP_OK;
    void *b;
    bp_status st = bp_dev_alloc(dev, bp_vk_iq_nwords * 4, &b);
    if (st) return st;
    if ((st = bp_dev_h2d(dev, b, 0, bp_vk_iq_words, bp_vk_iq_nwords * 4))) {
        bp_dev_free(dev, b);
        return st;
    }
    vk_iq_buf = b;
    return BP_OK;
}

/* Y_j = X W_j^T for every job j, t inputs (jobs of one weight: a matvec or gemm call). The input
 * is uploaded once per batch chunk and every job's kernels and read-backs queue behind it on
 * the default stream: one submission, one wait per chunk (every command starts with a full
 * barrier, so the jobs may share the output scratch). */
static bp_status run_jobs(const bp_matmul_job *jobs, int n, const float *x, int64_t t, bool gemm) {
    char why[256];
    bp_device *dev = bp_vk_device(why, sizeof why);
    if (!dev) return bp_fail(BP_E_UNSUPPORTED, "Vulkan unavailable: %s", why);
    bp_status st;
    int64_t widest = 0, rows_max = 0;
    for (int j = 0; j < n; j++) {
        if ((st = check_shape(jobs[j].w, t))) return st;
        int64_t m = jobs[j].w->cols > jobs[j].w->rows ? jobs[j].w->cols : jobs[j].w->rows;
        if (m > widest) widest = m;
        if (jobs[j].w->rows > rows_max) rows_max = jobs[j].w->rows;
    }
    vk_weight *vw[VK_MAX_JOBS];
    bp_kernel *k[VK_MAX_JOBS];
    for (int j = 0; j < n; j++) {
        char kname[48];
        snprintf(kname, sizeof kname, "%s_%s", gemm ? "gemm" : "matvec", jobs[j].w->traits->info.name);
        if ((st = weight_of(dev, jobs[j].w, &vw[j])) || (st = bp_dev_kernel(dev, kname, &k[j]))) return st;
    }
    /* Batches of inputs whose x and y each fit one binding. */
    size_t range = bp_vk_max_range();
    int64_t tb = (int64_t)(range / ((size_t)widest * 4));
    if (tb > (int64_t)VK_GEMM_TN * 65535) tb = (int64_t)VK_GEMM_TN * 65535;
    if (tb > t) tb = t;
    if ((st = iq_upload(dev))) return st;
    const int64_t cols = jobs[0].w->cols;
    void *xb, *yb;
    if ((st = bp_dev_scratch(dev, VK_SLOT_X, (size_t)tb * (size_t)cols * 4, &xb))) return st;
    if ((st = bp_dev_scratch(dev, VK_SLOT_Y, (size_t)tb * (size_t)rows_max * 4, &yb))) return st;
    for (int64_t t0 = 0; t0 < t; t0 += tb) {
        int64_t tn = t - t0 < tb ? t - t0 : tb;
        if ((st = bp_dev_h2d_on(dev, NULL, xb, 0, x + (size_t)t0 * (size_t)cols, (size_t)tn * (size_t)cols * 4))) return st;
        for (int j = 0; j < n; j++)
            if ((st = record_part(dev, jobs[j].w, vw[j], k[j], xb, yb, t0, tn, jobs[j].y, gemm))) return st;
        if ((st = bp_dev_stream_sync(dev, NULL))) return st;
    }
    return BP_OK;
}

/* The step's kernels for a KV kind are embedded (backend.cmake's list). */
static bool vk_has_named(const char *name) {
    for (int i = 0; i < bp_vk_spirv_named_count; i++)
        if (!strcmp(bp_vk_spirv_named_table[i].name, name) && bp_vk_spirv_named_table[i].bytes >= 20 &&
            bp_vk_spirv_named_table[i].code[0] == 0x07230203u)
            return true;
    return false;
}

static bool vk_has_step(bp_kind kv) { return bp_gpu_step_has_kernels(kv, NULL, vk_has_named); }

static bool vk_has_launch(bp_op op, bp_kind k) {
    if (op == BP_OP_STEP) return vk_has_step(k);
    return (op == BP_OP_MATVEC || op == BP_OP_GEMM || op == BP_OP_JOBS) && vk_has_kernels(k);
}

/* A weight kind's embedding and matmul kernels, for the step. */
static bool vk_has_step_weight(bp_kind k) {
    char e[48];
    snprintf(e, sizeof e, "embed_%s", bp_kind_traits_of(k)->info.name);
    return vk_has_kernels(k) && vk_has_named(e);
}

/* The whole step (src/gpu/gpu_step.c), every weight kind's embedding and matmul kernels too. */
static bp_status run_step(const bp_op_call *c, char *label, size_t len) {
    char why[256];
    bp_device *dev = bp_vk_device(why, sizeof why);
    if (!dev) return bp_fail(BP_E_UNSUPPORTED, "Vulkan unavailable: %s", why);
    bp_gpu_backend b = {.id = BP_BACKEND_VULKAN, .name = "vulkan", .display = "Vulkan",
                        .max_binding = bp_vk_max_range(), .extra = NULL, .mm_tile = VK_GEMM_TM};
    bp_status st = bp_gpu_step_check_weights(&b, c->u.step.prog, vk_has_step_weight);
    if (!st) st = iq_upload(dev);
    if (st) return st;
    b.extra = vk_iq_buf; /* the IQ grids, uploaded now */
    return bp_gpu_step_run(&b, dev, c, label, len);
}

/* What run_step places for p: the step's layout, and the IQ grids. */
static bp_status vk_step_bytes(const bp_step_prog *p, bp_step_bytes *out) {
    char why[256];
    if (!bp_vk_device(why, sizeof why)) return bp_fail(BP_E_UNSUPPORTED, "Vulkan unavailable: %s", why);
    const bp_gpu_backend b = {.id = BP_BACKEND_VULKAN, .name = "vulkan", .display = "Vulkan",
                              .max_binding = bp_vk_max_range(), .mm_tile = VK_GEMM_TM};
    bp_status st = bp_gpu_step_bytes(&b, p, out);
    if (!st) out->extra = bp_vk_iq_nwords * 4; /* made once per process, at the first step */
    return st;
}

static bp_launch vk_launch(const bp_op_call *c, char *err, size_t err_len) {
    bp_kind kinds[16];
    const int nk = bp_op_call_kinds(c, kinds, 16);
    for (int i = 0; i < nk; i++)
        if (!vk_has_launch(c->op, kinds[i])) return BP_LAUNCH_NO_KERNEL;
    bp_status st;
    pthread_mutex_lock(&vk_run_lock);
    if (c->op == BP_OP_STEP) {
        char label[160]; /* the walk's record names the claim; the label is not kept */
        st = run_step(c, label, sizeof label);
    } else if (c->op == BP_OP_JOBS) {
        /* A job group larger than the kernel handle array runs in several passes. */
        st = BP_OK;
        for (int j0 = 0; j0 < c->u.jobs.n_jobs && !st; j0 += VK_MAX_JOBS) {
            int n = c->u.jobs.n_jobs - j0 < VK_MAX_JOBS ? c->u.jobs.n_jobs - j0 : VK_MAX_JOBS;
            st = run_jobs(c->u.jobs.jobs + j0, n, c->u.jobs.x, c->u.jobs.t, c->u.jobs.t > 1);
        }
    } else {
        const bp_matmul_job one = {c->u.mm.w, c->u.mm.y};
        st = run_jobs(&one, 1, c->u.mm.x, c->u.mm.t, c->op == BP_OP_GEMM && c->u.mm.t > 1);
    }
    pthread_mutex_unlock(&vk_run_lock);
    return st ? launch_error(st, err, err_len) : BP_LAUNCH_OK;
}

/* The device's class (lavapipe/llvmpipe is VK_PHYSICAL_DEVICE_TYPE_CPU: not enabled unless
 * forced) and its cost model (src/backend/cost.c). */
static bool vk_describe(bp_device_desc *out) {
    if (!bp_vk_device(NULL, 0)) return false;
    const VkPhysicalDeviceType ty = vk_ctx.props.deviceType;
    out->cls = ty == VK_PHYSICAL_DEVICE_TYPE_CPU ? BP_DEVICE_CPU_IMPL : BP_DEVICE_ACCELERATOR;
    snprintf(out->name, sizeof out->name, "%.95s", vk_ctx.name);
    bp_cost_default(BP_BACKEND_VULKAN, out->cls, ty == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, &out->cost);
    return true;
}

const bp_backend_dispatch bp_dispatch_vulkan = {
    .probe = vk_probe,
    .has_launch = vk_has_launch,
    .wants = NULL,
    .launch = vk_launch,
    .describe = vk_describe,
    .step_bytes = vk_step_bytes,
};
