/* The forward step on a device (src/backend/step.h): common code of the GPU backends, over the
 * device interface alone (include/backplane_device.h). A backend hands over its device and the few
 * facts that differ; this code places the model (weights in arenas, once), keeps the KV cache
 * and the activations in device memory, turns the program into kernel launches, records them
 * once as a graph where the device has graphs and replays that graph per step.
 *
 * The kernels it launches, by name, each with buffers (in order) and one by-value argument block
 * (the structs below; a backend's kernels must read exactly these):
 *   matvec_<KIND>, gemm_<KIND>   W, X, Y, extra            bp_gpu_mm_args
 *   embed_<KIND>                 W, IO, Y, extra           bp_gpu_mm_args (t ids at IO[x_off])
 *   rms_norm                     X, G, Y                   bp_gpu_norm_args
 *   eltwise                      Y, X                      bp_gpu_elt_args
 *   glu                          G, U                      bp_gpu_glu_args
 *   rope                         X, IO, F                  bp_gpu_rope_args
 *   kv_append_<KV>               SRC, CACHE, IO            bp_gpu_kv_args
 *   attention_<KV>               Q, K, V, OUT, IO          bp_gpu_attn_args
 * (KV: the cache kinds of bp_gpu_step_kv_kind; a cache row is one token of one head, row_bytes.)
 * IO is the step's int32 input: [0] pos0, [1] pos0 + t, then (position, token id) of each row:
 * [2 + 2i] and [3 + 2i], so a step's input is one copy of 8 + 8t bytes. Offsets are in elements of the buffer (floats, ints),
 * w_off in bytes. */
#ifndef BP_GPU_STEP_H
#define BP_GPU_STEP_H

#include "backend/backend.h"
#include "backend/step.h"
#include "backplane_device.h"
#include "gpu/step_args.h" /* the kernels' argument blocks */

/* What a backend tells the step code. */
typedef struct bp_gpu_backend {
    int id;                       /* bp_backend_id */
    const char *name, *display;   /* "vulkan", "Vulkan" */
    size_t max_binding;           /* bytes one buffer argument may span (lavapipe: 128 MiB) */
    void *extra;                  /* the weight kernels' fourth buffer (Vulkan's IQ grids) */
    uint32_t mm_tile;             /* rows and tokens per GEMM workgroup (grid = ceil / tile) */
    uint32_t mv_rows;             /* rows per matvec workgroup (0 read as 1: a workgroup a row) */
    int64_t logits_rows;          /* at most this many rows of logits per buffer (0: what a binding
                                     holds; tests set it to exercise the split) */
    const char *kprefix;          /* put before every kernel name ("step_": CUDA, whose matvec_<KIND>
                                     kernels of the plain matmul path take other arguments); NULL none */
    bp_stream *stream;            /* where the launches, the capture and the replay go (CUDA cannot
                                     capture the default stream); NULL the default one */
    bp_stream *upload;            /* where the weights go up when the model is placed, overlapping
                                     the rest of the placement and the host's work up to the first
                                     step, which waits on an event for them (CUDA); NULL: blocking
                                     copies */
} bp_gpu_backend;

/* The KV kinds the step kernels store: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 (not IQ4_NL, whose
 * quantizer searches scales). */
bool bp_gpu_step_kv_kind(bp_kind k);

/* Whether a backend has the step's kernels for a KV kind: kv_append_<KV>, attention_<KV> and the
 * kind-free ones, each name (after prefix, NULL none) asked of has(name). Device-free. */
bool bp_gpu_step_has_kernels(bp_kind kv, const char *prefix, bool (*has)(const char *name));

/* Whether every weight kind of p has the backend's embedding and matmul kernels (has(kind));
 * BP_E_UNSUPPORTED naming the first kind without them. */
bp_status bp_gpu_step_check_weights(const bp_gpu_backend *b, const bp_step_prog *p, bool (*has)(bp_kind));

/* What bp_gpu_step_run places for p on b's device (its first step), from the same layout
 * (extra left 0 for the backend to add). Device-free; BP_E_SHAPE where the placement would fail
 * (a row or a layer's cache larger than a binding). */
bp_status bp_gpu_step_bytes(const bp_gpu_backend *b, const bp_step_prog *p, bp_step_bytes *out);

/* Run the step of call c (op `step`) on dev: place the model on first use (the state lives in
 * io->state[b->id]), record or replay, read the logits back. The label names what ran. On an
 * error nothing is reported as done; the KV positions the device held before the step stay
 * valid there, for hand_back. */
bp_status bp_gpu_step_run(const bp_gpu_backend *b, bp_device *dev, const bp_op_call *c, char *label, size_t len);

#endif
