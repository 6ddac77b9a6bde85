/* The backend interface: what a backend fills in, and the seam (src/seam, above every backend)
 * reads. Two halves per backend, kept apart on purpose (DESIGN.md):
 *
 * 1. bp_backend_caps -- compiled on every build, no SDK needed. Answers "what would Vulkan run
 *    for IQ4_XS" on a CPU-only build.
 * 2. bp_backend_dispatch -- compiled only when the backend is built (BP_HAVE_<ENUM>).
 *
 * Every call a backend receives is one bp_op_call (src/backend/op_call.h): matvec and GEMM are
 * rows of the op table like attention or a norm, so there is one claim, one launch table, one
 * launch entry point and one rule over all of them.
 *
 * The rule the guard holds over the whole op x kind table, for every compiled backend:
 * caps.kernel(op, k) != NULL  <=>  dispatch.has_launch(op, k); a claim only for a kind in the
 * op's domain; a matvec/gemm claim named by the kind, every other "<op> <KIND>"; a gemm claim
 * only beside a matvec claim. (bp_seam_check_claims, tests/test_seam_table.c.)
 */
#ifndef BP_BACKEND_BACKEND_H
#define BP_BACKEND_BACKEND_H

#include "backend/op_call.h"
#include "backend/weight.h"
#include "backplane.h"

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

/* ---- the device a backend found, and what an op costs there ------------------------------ */

/* A CPU implementation of a GPU API (Mesa's lavapipe/llvmpipe for Vulkan, PoCL's CPU device)
 * computes on the same cores as the native CPU backend, 10-100x slower: the probe finding only
 * such a device does not enable the backend. */
typedef enum bp_device_class {
    BP_DEVICE_ACCELERATOR = 0, /* a GPU or another real accelerator (the default) */
    BP_DEVICE_CPU_IMPL = 1,    /* a CPU implementation of the backend's API */
} bp_device_class;

/* Time of one call on a device, as the rule models it (src/backend/cost.c):
 *     overhead_us + activation bytes / link_gbps + max(weight bytes / mem_gbps, flops / gflops)
 * All zero: no model (the backend then takes every shape unless its wants() declines). */
typedef struct bp_cost_model {
    double overhead_us; /* per call: submit, copies' fixed cost, wait for the result */
    double link_gbps;   /* activations in and results out, GB/s (1e9 bytes/s) */
    double mem_gbps;    /* weight bytes read per second by the kernels */
    double gflops;      /* arithmetic rate of the kernels, GFLOP/s */
    const char *source; /* where the numbers come from ("measured ...", "estimate ...") */
} bp_cost_model;

/* What a backend's describe() reports about its device. */
typedef struct bp_device_desc {
    bp_device_class cls;
    char name[96];      /* "llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H200 (sm_90, 132 SMs)" */
    bp_cost_model cost;
} bp_device_desc;

/* What a call costs, from its op, kinds and shape alone (bp_op_call_shape), so a route asked by
 * shape and the walk over a real call decide alike. */
typedef struct bp_op_work {
    double weight_bytes; /* read from device-resident weights */
    double act_bytes;    /* activations in and results out (over the link on a discrete GPU) */
    double flops;
    double units;        /* rows x cols x batch: what BACKPLANE_<B>_MIN_WORK compares */
} bp_op_work;
bp_op_work bp_op_work_of(bp_op op, bp_kind k, const bp_op_shape *s);
/* Modelled microseconds of work w on a device with model m (link term where link_gbps > 0). */
double bp_cost_us(const bp_cost_model *m, const bp_op_work *w);
/* The default model for backend id's device of class cls (backends.def's columns, else the
 * generic row for a discrete or integrated GPU or a CPU implementation). Fills out; false when
 * there is no row. */
bool bp_cost_default(int backend_id, bp_device_class cls, bool integrated, bp_cost_model *out);

/* ---- capabilities: compiled on every build --------------------------------------------- */
typedef struct bp_backend_caps {
    int id;                     /* bp_backend_id (src/seam/seam.h), or BP_BACKEND_COUNT for a
                                   test backend that is not a row */
    const char *name;           /* "vulkan": env alias and CLI name */
    const char *display_name;   /* "Vulkan" */
    /* What a prefill (gemm) runs on when the kind has a matvec but no gemm claim:
     * "Vulkan per-position matvec". */
    const char *prefill_fallback_name;
    /* NULL when this backend's kernels have been built and run against the reference; else
     * the label `backplane probe` prints beside every claim, saying why they are not proven:
     * "UNVERIFIED: kernels cannot be built here" (Metal off macOS), "UNRUN ON HARDWARE" (CUDA
     * compiled but never run on a GPU). A claim is never shown without it. */
    const char *unverified;
    /* Required. Name of this backend's kernel for (op, k), or NULL when it claims none: the
     * kind's name for matvec and gemm ("Q4_K"), "<op> <KIND>" for every other op. */
    const char *(*kernel)(bp_op op, bp_kind k);
} bp_backend_caps;

/* ---- dispatch: compiled only with the backend ------------------------------------------ */
typedef struct bp_backend_dispatch {
    /* Required. Is a usable device present? Called at most once per process, and never when
     * the environment forced the backend on or off. On false, write the reason to why; on
     * true, it may write the device's name there ("llvmpipe (LLVM 15.0.6)") for the report. */
    bool (*probe)(char *why, size_t why_len);
    /* Required. Device-free: is there a launchable kernel for (op, k) in this build? Must be
     * answered from what the build really holds (the embedded SPIR-V, the program's kernel
     * names, the kernel registry), never from the caps table: the guard compares the two. */
    bool (*has_launch)(bp_op op, bp_kind k);
    /* Optional (NULL: every shape). False for shapes too small to repay the launch cost. Asked
     * only when neither BACKPLANE_<B>_MIN_WORK nor a device cost model decides. */
    bool (*wants)(bp_op op, bp_kind k, const bp_op_shape *s);
    /* Required. Run one validated call (src/backend/op_call.h) whose every kind this backend
     * claims. gemm and jobs come with any t >= 1. On BP_LAUNCH_ERROR write the cause to err;
     * outputs may then be partly written (whoever runs it next rewrites them), except MoE's
     * accumulated y, which must be left untouched. */
    bp_launch (*launch)(const bp_op_call *call, char *err, size_t err_len);
    /* Optional (NULL: an accelerator without a cost model). Open the backend's device if it is
     * not open yet and describe it: class, name, cost model. false when there is no device.
     * The seam calls it once per process: after a successful probe (a CPU implementation is
     * then not enabled unless the env forces it), or at the first shape question when the env
     * forced the backend on. */
    bool (*describe)(bp_device_desc *out);
    /* Members above are valid for version 1 of the interface. */

    /* Optional (NULL: the plan cannot say; `backplane plan` prints "unknown" for the device).
     * The device memory taking the step of program p would place (src/backend/step.h), from the
     * same arithmetic the placement runs, so a plan and the ledger after the run agree. May open
     * the device to read its limits; must not allocate on it or read weight data. */
    bp_status (*step_bytes)(const struct bp_step_prog *p, struct bp_step_bytes *out);
} bp_backend_dispatch;
/* Members above are valid for version 2 of the interface. */

/* The kernel name a claim of (op, k) must carry: the kind's name for matvec/gemm, "<op> <KIND>"
 * otherwise. Writes buf, returns it. */
const char *bp_claim_name(bp_op op, bp_kind k, char *buf, size_t len);
/* The same name, made once for every (op, kind) and valid for the process: what a caps table's
 * kernel member returns for a claim. NULL for an op or kind out of range. */
const char *bp_claim_name_static(bp_op op, bp_kind k);
/* What a caps table's kernel member returns: the claim's name when the backend (backend_id, a
 * bp_backend_id) claims (op, k) -- or a test planted the claim -- else NULL. Every backends.def
 * row's table answers through it, so a test can plant an over-claim in any backend's table and
 * see the guard name it: the launch tables must answer from what the build holds, never from
 * the claims. */
const char *bp_claim_answer(int backend_id, bp_op op, bp_kind k, bool claimed);
/* Tests: plant (on) or remove a claim of (op, k) in backend_id's table. */
void bp_claim_test_plant(int backend_id, bp_op op, bp_kind k, bool on);

/* ---- gating: which dispatch tables exist in this build ---------------------------------- *
 * BP_IS_ONE(BP_HAVE_X) is 1 when BP_HAVE_X is defined to 1 and 0 otherwise (undefined
 * included), so one X-macro row expands to &bp_dispatch_<name> or NULL without an #if per
 * backend (the Linux IS_ENABLED trick). */
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

#define BP_BACKEND(ENUM, name, display, ...)                                                    \
    extern const bp_backend_caps bp_caps_##name;                                                \
    extern const bp_backend_dispatch bp_dispatch_##name;
#include "backend/backends.def"
#undef BP_BACKEND

#endif
