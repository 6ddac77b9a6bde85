/* The cost model behind the rule's shape test (src/seam/route.c): is one call faster on a
 * backend's device than on the native CPU backend? Both sides are modelled the same way, a
 * roofline plus a fixed cost, over the call's work (bp_op_work_of, from its op, kind and shape):
 *
 *     time = overhead_us + activation bytes / link_gbps + max(weight bytes / mem_gbps,
 *                                                             flops / gflops)
 *
 * For a weight op (matvec, gemm, a job, conv2d, MoE) activation bytes = 4 * (cols + rows) * t
 * (x in, y out; the CPU has no link term), weight bytes = rows * row_bytes(kind), flops =
 * 2 * rows * cols * t; for an activation op, its rows in and out, no weights; attention reads
 * its keys and values as the weights. A device is wanted when its time is below the CPU's. The weight's own
 * upload happens once per weight and is not in the model (a model's layers run many times). A
 * backend without a GEMM for the kind runs a prefill as t matvecs: t times the t = 1 cost.
 * Small matvecs and single-token decode of small matrices stay on the CPU wherever a device's
 * per-call overhead exceeds what the CPU needs for the whole op; large ones go to the device.
 *
 * THE NUMBERS. `backplane bench --crossover` measures every one of them on the machine it runs
 * on (per-call overhead from a tiny matvec, bandwidth from a large matvec, compute from a t=64
 * GEMM, through the same public calls the seam makes) and prints the model's crossover next to
 * the observed one; put its figures here when they move. BACKPLANE_<B>_MIN_WORK overrides the
 * model per backend. The runs behind each row: docs/cpu-kernels.md, Measurements behind the comments, backend/cost.c.
 *
 *  - CPU (per thread; times bp_cpu_threads(), src/cpu/cpu_cost.c), from a 2-vCPU AMD EPYC VM:
 *    5 us a call (thread pool wake-up); 15 GB/s per thread (memory-bound decode); 200 GFLOP/s per thread (prefill).
 *    The IQ1/IQ2/IQ3 kinds decode compute-bound, well under that bandwidth: the model overestimates the
 *    CPU there and keeps them on the CPU a little longer than necessary -- the safe direction.
 *  - Vulkan on lavapipe and OpenCL on PoCL (same VM): their rows, from such runs, never cross over with the
 *    CPU at any size. They only matter for `bench --crossover`: a CPU implementation is off unless
 *    forced, and forced it takes every shape (see bp_seam_takes).
 *  - GPUs (Vulkan/OpenCL discrete or integrated, CUDA): ESTIMATES, no GPU has timed this code yet
 *    (tools/gpu_check.sh step 2 measures CUDA's), conservative on purpose:
 *    50 us a call: a queue submit + fence wait (CUDA 25 us: two launches, two async copies, one stream sync);
 *    12 GB/s: activations through pageable host memory;
 *    300 GB/s, 5 TFLOP/s: a discrete GPU; 60 GB/s (the host's DRAM), 1 TFLOP/s: an integrated one;
 *    CUDA's memory bandwidth from the device's attributes where cudart reports them.
 *    With these, against a 2-thread CPU, a discrete Vulkan GPU gets a 4096 x 4096 Q4_K decode
 *    (9.4 MB) and weights below ~1.5 MB stay on the CPU (crossover 5 + W/30e3 = 50 + W/300e3 us).
 */
#include <string.h>

#include "backend/backend.h"

/* The generic rows, for a backend whose backends.def column is BP_COST_NONE. */
static const struct {
    bp_device_class cls;
    int integrated; /* -1: either */
    bp_cost_model m;
} generic[] = {
    {BP_DEVICE_ACCELERATOR, 0, {50, 12, 300, 5000, "estimate: discrete GPU"}},
    {BP_DEVICE_ACCELERATOR, 1, {50, 12, 60, 1000, "estimate: integrated GPU"}},
    {BP_DEVICE_CPU_IMPL, -1, {60, 10, 1, 3, "estimate: a CPU implementation"}},
};

/* backends.def's two cost columns per row; a zero source marks BP_COST_NONE. */
#define BP_COST(o, l, m, g, src) {o, l, m, g, src}
#define BP_COST_NONE {0, 0, 0, 0, NULL}
static const bp_cost_model per_backend[][2] = {
#define BP_BACKEND(ENUM, name, display, accel, cpu_impl) {accel, cpu_impl},
#include "backend/backends.def"
#undef BP_BACKEND
};
#undef BP_COST
#undef BP_COST_NONE

bool bp_cost_default(int backend_id, bp_device_class cls, bool integrated, bp_cost_model *out) {
    if (backend_id >= 0 && backend_id < (int)(sizeof per_backend / sizeof per_backend[0])) {
        const bp_cost_model *m = &per_backend[backend_id][cls == BP_DEVICE_CPU_IMPL];
        if (m->source) {
            *out = *m;
            return true;
        }
    }
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++) {
        if (generic[i].cls != cls) continue;
        if (generic[i].integrated >= 0 && generic[i].integrated != (int)integrated) continue;
        *out = generic[i].m;
        return true;
    }
    memset(out, 0, sizeof *out);
    return false;
}

bp_op_work bp_op_work_of(bp_op op, bp_kind k, const bp_op_shape *s) {
    const double rows = (double)s->rows, cols = (double)s->cols, t = (double)(s->t < 1 ? 1 : s->t);
    bp_op_work w = {0, 0, 0, rows * cols * t};
    switch (bp_op_domain_of(op)) {
    case BP_OP_DOMAIN_W: {
        size_t rb = 0;
        if (bp_kind_row_bytes(k, s->cols, &rb) == BP_OK) w.weight_bytes = (double)rb * rows;
        else {
            const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
            w.weight_bytes = rows * cols * (ki ? ki->bits_per_weight : 8.0) / 8.0;
        }
        w.act_bytes = 4.0 * (cols + rows) * t;
        w.flops = 2.0 * rows * cols * t;
        break;
    }
    case BP_OP_DOMAIN_KV: { /* rows heads, cols head dim x keys, t queries: K and V read once */
        const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
        w.weight_bytes = 2.0 * rows * cols * (ki ? ki->bits_per_weight : 32.0) / 8.0;
        w.act_bytes = 8.0 * rows * t * 128.0; /* q in, out back: heads x t x a head of 128 */
        w.flops = 4.0 * rows * cols * t;
        break;
    }
    case BP_OP_DOMAIN_F32: /* t rows of cols: read, write, a few operations per element */
        w.act_bytes = 8.0 * rows * cols * t;
        w.flops = 4.0 * rows * cols * t;
        break;
    }
    return w;
}

double bp_cost_us(const bp_cost_model *m, const bp_op_work *w) {
    double us = m->overhead_us;
    if (m->link_gbps > 0) us += w->act_bytes / (m->link_gbps * 1e3); /* gbps * 1e3 = bytes per us */
    const double mem = m->mem_gbps > 0 ? w->weight_bytes / (m->mem_gbps * 1e3) : 0;
    const double cmp = m->gflops > 0 ? w->flops / (m->gflops * 1e3) : 0;
    return us + (mem > cmp ? mem : cmp);
}
