/* The seam: what every backend provides, in two halves kept apart on purpose (DESIGN.md).
 *
 * 1. bp_backend_caps -- compiled on every build, no SDK needed. Answers "what would Vulkan run
 *    for IQ4_XS" on a CPU-only build.
 * 2. bp_backend_dispatch -- compiled only when the backend is built (BP_HAVE_<ENUM>).
 *
 * Invariant, tested over the whole table: for every compiled backend and every kind,
 * caps.matvec_kernel(k) != NULL  <=>  dispatch.has_launch(k), and the kernel name equals the
 * kind's name.
 */
#ifndef BP_SEAM_H
#define BP_SEAM_H

#include "backplane.h"

typedef enum bp_backend_id {
#define BP_BACKEND(ENUM, name, display) BP_BACKEND_##ENUM,
#include "seam/backends.def"
#undef BP_BACKEND
    BP_BACKEND_CPU,   /* always last, always able */
    BP_BACKEND_COUNT
} bp_backend_id;

struct bp_op_call; /* src/ops/op_call.h */

/* Result of one launch attempt. */
typedef enum bp_launch {
    BP_LAUNCH_NO_KERNEL = 0, /* this backend has nothing for the kind/shape: try the next, log nothing */
    BP_LAUNCH_OK = 1,
    BP_LAUNCH_ERROR = 2,     /* tried and failed: the seam logs the cause once, names the
                                fallback, counts it, and tries the next backend */
    BP_LAUNCH_LOST = 3,      /* failed, and the device is unusable for the rest of the process
                                (a sticky CUDA error, VK_ERROR_DEVICE_LOST): as ERROR, and the
                                seam disables the backend, so every later op it would have taken
                                is a counted fallback naming this cause */
} bp_launch;

/* The launch result for a backend's status: BP_E_DEVICE_LOST -> LOST, other errors -> ERROR. */
static inline bp_launch bp_launch_of_status(bp_status s) {
    return s == BP_OK ? BP_LAUNCH_OK : s == BP_E_DEVICE_LOST ? BP_LAUNCH_LOST : BP_LAUNCH_ERROR;
}

/* ---- the device a backend found, and what an op costs there (issue 17) ------------------ */

/* A CPU implementation of a GPU API (Mesa's lavapipe/llvmpipe for Vulkan, PoCL's CPU device)
 * computes on the same cores as the native CPU backend, 10-100x slower (README, benchmarks):
 * the probe finding only such a device does not enable the backend. */
typedef enum bp_device_class {
    BP_DEVICE_ACCELERATOR = 0, /* a GPU or another real accelerator (the default) */
    BP_DEVICE_CPU_IMPL = 1,    /* a CPU implementation of the backend's API */
} bp_device_class;

/* Time of one op on a device, as `wants` models it (src/seam/cost.c, where the numbers and how
 * to re-measure them are written down):
 *     overhead_us + activation bytes / link_gbps + max(weight bytes / mem_gbps, flops / gflops)
 * All zero: no model (the backend then takes every shape unless its wants() declines). */
typedef struct bp_cost_model {
    double overhead_us; /* per call: submit, copies' fixed cost, wait for the result */
    double link_gbps;   /* activations in and results out, GB/s (1e9 bytes/s) */
    double mem_gbps;    /* weight bytes read per second by the kernels */
    double gflops;      /* arithmetic rate of the GEMM kernels, GFLOP/s */
    const char *source; /* where the numbers come from ("measured ...", "estimate ...") */
} bp_cost_model;

/* What a backend's describe() reports about its device. */
typedef struct bp_device_desc {
    bp_device_class cls;
    char name[96];      /* "llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H200 (sm_90, 132 SMs)" */
    bp_cost_model cost;
} bp_device_desc;

/* A weight as the seam sees it: the GGUF bytes (never modified) plus whatever each backend
 * made of them (a device copy, a repacked CPU layout), created lazily on first use and freed
 * with the weight. */
struct bp_weight {
    bp_kind kind;
    int64_t rows, cols;
    size_t row_bytes;
    const uint8_t *data;     /* rows * row_bytes bytes; owned by the caller */
    void *backend_state[BP_BACKEND_COUNT];
    void (*backend_free[BP_BACKEND_COUNT])(void *state);
    char last_path[128];     /* "Vulkan Q4_K matvec", "CPU (fallback from Vulkan: ...)" */
};

/* ---- capabilities: compiled on every build --------------------------------------------- */
typedef struct bp_backend_caps {
    bp_backend_id id;
    const char *name;           /* "vulkan": env alias and CLI name */
    const char *display_name;   /* "Vulkan" */
    /* What a prefill runs on when the kind has a matvec but no GEMM:
     * "Vulkan per-position matvec". */
    const char *prefill_fallback_name;
    /* Name of the matvec kernel for k (equal to the kind's name), or NULL when none. */
    const char *(*matvec_kernel)(bp_kind k);
    /* Whether a GEMM kernel exists for k. Implies matvec_kernel(k) != NULL. */
    bool (*has_gemm)(bp_kind k);
    /* NULL when this backend's kernels have been built and run against the reference; else
     * the label `backplane probe` prints beside every claim, saying why they are not proven:
     * "UNVERIFIED: kernels cannot be built here" (Metal off macOS), "UNRUN ON HARDWARE" (CUDA
     * compiled but never run on a GPU). A claim is never shown without it. */
    const char *unverified;
    /* Ops (src/ops/ops.def; seam/op_dispatch.h). Name of this backend's kernel for op (a
     * bp_op) on kind k, spelled "<op> <KIND>" ("attention Q8_0"), or NULL when it claims none.
     * NULL member: claims no op (the CPU runs them). */
    const char *(*op_kernel)(int op, bp_kind k);
} bp_backend_caps;

/* ---- dispatch: compiled only with the backend ------------------------------------------ */
typedef struct bp_backend_dispatch {
    /* Required. Is a usable device present? Called at most once per process, and never when
     * the environment forced the backend on or off. On false, write the reason to why; on
     * true, it may write the device's name there ("llvmpipe (LLVM 15.0.6)") for the report. */
    bool (*probe)(char *why, size_t why_len);
    /* Required. Device-free: is there a launchable kernel for k in this build? */
    bool (*has_launch)(bp_kind k);
    /* Optional (NULL: every shape). False for shapes too small to repay the launch cost. */
    bool (*wants)(int64_t n_out, int64_t n_in, int64_t t);
    /* Required. y[rows] = W x. On BP_LAUNCH_ERROR write the cause to err. */
    bp_launch (*matvec)(bp_weight *w, const float *x, float *y, char *err, size_t err_len);
    /* Optional (NULL: the seam runs t matvecs and reports prefill_fallback_name).
     * Y[t][rows] = X[t][cols] W^T. */
    bp_launch (*gemm)(bp_weight *w, const float *x, int64_t t, float *y, char *err, size_t err_len);
    /* Optional (NULL: an accelerator without a cost model). Open the backend's device if it is
     * not open yet and describe it: class, name, cost model. false when there is no device.
     * The seam calls it once per process: after a successful probe (a CPU implementation is
     * then not enabled unless the env forces it), or at the first shape question when the env
     * forced the backend on. */
    bool (*describe)(bp_device_desc *out);
    /* Ops. Device-free: is there a launchable kernel for op on kind k? (NULL: none.) Tested
     * against caps.op_kernel over op x kind, as has_launch is against matvec_kernel. */
    bool (*has_op_launch)(int op, bp_kind k);
    /* Run one validated op call (src/ops/op_call.h). On BP_LAUNCH_ERROR write the cause to err;
     * outputs may then be partly written (the CPU rewrites them). */
    bp_launch (*op_launch)(const struct bp_op_call *call, char *err, size_t err_len);
} bp_backend_dispatch;

#define BP_BACKEND(ENUM, name, display) extern const bp_backend_caps bp_caps_##name;
#include "seam/backends.def"
#undef BP_BACKEND

/* ---- gating: which dispatch tables exist in this build ---------------------------------- *
 * A backend is compiled in when its backend.cmake does
 *     target_compile_definitions(backplane PUBLIC BP_HAVE_<ENUM>=1)
 * and defines `const bp_backend_dispatch bp_dispatch_<name>`. BP_IS_ONE(BP_HAVE_X) is 1 when
 * BP_HAVE_X is defined to 1 and 0 otherwise (undefined included), so one X-macro row expands to
 * &bp_dispatch_<name> or NULL without an #if per backend (the Linux IS_ENABLED trick). */
#define BP_SEAM_PLACEHOLDER_1 0,
#define BP_SEAM_SECOND(ignored, val, ...) val
#define BP_SEAM_IS_ONE_(junk) BP_SEAM_SECOND(junk 1, 0, 0)
#define BP_SEAM_IS_ONE_X(val) BP_SEAM_IS_ONE_(BP_SEAM_PLACEHOLDER_##val)
#define BP_IS_ONE(macro) BP_SEAM_IS_ONE_X(macro)
#define BP_SEAM_SEL_1(yes, no) yes
#define BP_SEAM_SEL_0(yes, no) no
#define BP_SEAM_SEL_(flag, yes, no) BP_SEAM_SEL_##flag(yes, no)
#define BP_SEAM_SEL(flag, yes, no) BP_SEAM_SEL_(flag, yes, no)
#define BP_DISPATCH_OF(ENUM, name) BP_SEAM_SEL(BP_IS_ONE(BP_HAVE_##ENUM), &bp_dispatch_##name, NULL)

#define BP_BACKEND(ENUM, name, display) extern const bp_backend_dispatch bp_dispatch_##name;
#include "seam/backends.def"
#undef BP_BACKEND

/* ---- the registry (src/seam/registry.c) ------------------------------------------------- */

/* "cuda", ..., "cpu" for BP_BACKEND_CPU; NULL out of range. */
const char *bp_backend_name(bp_backend_id id);
/* "CUDA", ..., "CPU". */
const char *bp_backend_display_name(bp_backend_id id);
/* Capabilities of a table row (every row, every build); NULL for the CPU and out of range. */
const bp_backend_caps *bp_backend_caps_of(bp_backend_id id);
/* Dispatch table when the backend is compiled in, else NULL. */
const bp_backend_dispatch *bp_backend_dispatch_of(bp_backend_id id);
/* Id by name ("vulkan", "cpu"); BP_E_NOT_FOUND for an unknown name. */
bp_status bp_backend_by_name(const char *name, bp_backend_id *id);
/* Whether the backend runs in this process: compiled in, and BACKPLANE_<ENUM> or the probe
 * (decided once, cached, thread-safe). The CPU is always enabled. reason (may be NULL) gets
 * a sentence for `backplane probe`: "BACKPLANE_VULKAN=0 forces it off". */
bool bp_backend_enabled(bp_backend_id id, const char **reason);

#endif
