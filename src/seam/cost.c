/* The cost model behind `wants` (issue 17): is one op faster on a backend's device than on the
 * native CPU backend? Both sides are modelled the same way, a roofline plus a fixed cost:
 *
 *     time = overhead_us + activation bytes / link_gbps + max(weight bytes / mem_gbps,
 *                                                             2 * rows * cols * t / gflops)
 *
 * activation bytes = 4 * (cols + rows) * t (x in, y out; the CPU has no link term), weight bytes =
 * rows * row_bytes(kind). A device is wanted when its time is below the CPU's. The weight's own
 * upload happens once per weight and is not in the model (a model's layers run many times). A
 * backend without a GEMM for the kind runs a prefill as t matvecs: t times the t = 1 cost.
 * Small matvecs and single-token decode of small matrices stay on the CPU wherever a device's
 * per-call overhead exceeds what the CPU needs for the whole op; large ones go to the device.
 *
 * THE NUMBERS, and where they come from. `backplane bench --crossover` measures every one of
 * them on the machine it runs on (per-call overhead from a tiny matvec, GB/s from a large
 * matvec, GFLOP/s from a t=64 GEMM, each through the same public calls the seam makes) and
 * prints the model's crossover next to the measured one, so re-measuring is one command; put
 * its figures here when they move. BACKPLANE_<B>_MIN_WORK overrides the model per backend.
 *
 *  - CPU (per thread; times bp_cpu_threads()): measured on the 2-vCPU AMD EPYC Zen 5 dev VM
 *    (README benchmarks, `backplane bench` 4096 x 4096): decode 30-35 GB/s with 2 threads for the
 *    memory-bound kinds -> 15 GB/s per thread; prefill (t=512) 350-500 GFLOP/s -> 200 per
 *    thread; a call costs ~5 us (thread pool wake-up). The IQ1/IQ2/IQ3 kinds decode at 5-8 GB/s
 *    (compute-bound): the model overestimates the CPU there, so it keeps those on the CPU a
 *    little longer than necessary -- the safe direction.
 *  - Vulkan on lavapipe (llvmpipe LLVM 15, same VM), `BACKPLANE_VULKAN=1 BACKPLANE_OPENCL=1
 *    backplane bench --crossover` on 2026-11-30: 42 us per call, 0.18 GB/s (Q4_K 8192 x 8192
 *    decode), 1.1 GFLOP/s (t=64); earlier README runs saw 90 us and 0.3-0.95 GB/s. PoCL 3.1: 81
 *    us, 1.3 GB/s, 2.7 GFLOP/s. Crossover with the CPU: never, at any size up to 32768 x 32768.
 *    These rows only matter for `bench --crossover`: a CPU implementation is off unless forced,
 *    and forced it takes every shape (see bp_seam_slot_wants_kind).
 *  - GPUs (Vulkan/OpenCL discrete or integrated, CUDA): ESTIMATES, not yet measured on hardware
 *    (no GPU has run this code; tools/gpu_check.sh step 2 measures CUDA's). Conservative on
 *    purpose -- 50 us per call for a queue submit + fence wait, 12 GB/s for activations through
 *    pageable host memory, 300 GB/s and 5 TFLOP/s for a discrete GPU, 60 GB/s (the host's DRAM)
 *    and 1 TFLOP/s for an integrated one. CUDA: 25 us per call (two launches, two async copies,
 *    one stream sync), memory bandwidth from the device's attributes where cudart reports them.
 *    With these, against a 2-thread CPU, a discrete Vulkan GPU gets a 4096 x 4096 Q4_K decode
 *    (9.4 MB) and weights below ~1.5 MB stay on the CPU (crossover 5 + W/30e3 = 50 + W/300e3 us).
 */
#include <pthread.h>
#include <string.h>

#include "cpu/cpu.h"
#include "seam/seam_internal.h"

static const bp_cost_model cpu_per_thread = {
    .overhead_us = 5, .link_gbps = 0, .mem_gbps = 15, .gflops = 200,
    .source = "measured: 2-vCPU AMD EPYC Zen 5 VM, per thread",
};

static const struct {
    const char *backend; /* NULL: any */
    bp_device_class cls;
    int integrated;      /* -1: either */
    bp_cost_model m;
} defaults[] = {
    {"vulkan", BP_DEVICE_CPU_IMPL, -1, {42, 10, 0.18, 1.1, "measured: lavapipe (llvmpipe LLVM 15) on the dev VM"}},
    {"opencl", BP_DEVICE_CPU_IMPL, -1, {81, 10, 1.3, 2.7, "measured: PoCL 3.1 on the dev VM"}},
    {"cuda", BP_DEVICE_ACCELERATOR, -1, {25, 12, 1000, 20000, "estimate (UNRUN ON HARDWARE)"}},
    {NULL, BP_DEVICE_ACCELERATOR, 0, {50, 12, 300, 5000, "estimate: discrete GPU"}},
    {NULL, BP_DEVICE_ACCELERATOR, 1, {50, 12, 60, 1000, "estimate: integrated GPU"}},
    {NULL, BP_DEVICE_CPU_IMPL, -1, {60, 10, 1, 3, "estimate: a CPU implementation"}},
};

bool bp_cost_default(const char *backend, bp_device_class cls, bool integrated, bp_cost_model *out) {
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        if (defaults[i].backend && (!backend || strcmp(defaults[i].backend, backend))) continue;
        if (defaults[i].cls != cls) continue;
        if (defaults[i].integrated >= 0 && defaults[i].integrated != (int)integrated) continue;
        *out = defaults[i].m;
        return true;
    }
    memset(out, 0, sizeof *out);
    return false;
}

static pthread_mutex_t test_lock = PTHREAD_MUTEX_INITIALIZER;
static bool test_cpu_set;
static bp_cost_model test_cpu;

void bp_cost_test_set_cpu(const bp_cost_model *m) {
    pthread_mutex_lock(&test_lock);
    test_cpu_set = m != NULL;
    if (m) test_cpu = *m;
    pthread_mutex_unlock(&test_lock);
}

void bp_cost_cpu(bp_cost_model *out) {
    pthread_mutex_lock(&test_lock);
    bool set = test_cpu_set;
    if (set) *out = test_cpu;
    pthread_mutex_unlock(&test_lock);
    if (set) return;
    const double n = (double)bp_cpu_threads();
    *out = cpu_per_thread;
    out->mem_gbps *= n;
    out->gflops *= n;
}

double bp_cost_us(const bp_cost_model *m, bp_kind k, int64_t rows, int64_t cols, int64_t t) {
    if (t < 1) t = 1;
    size_t rb = 0;
    double wbytes;
    if (bp_kind_row_bytes(k, cols, &rb) == BP_OK) wbytes = (double)rb * (double)rows;
    else {
        const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
        wbytes = (double)rows * (double)cols * (ki ? ki->bits_per_weight : 8.0) / 8.0;
    }
    const double flops = 2.0 * (double)rows * (double)cols * (double)t;
    const double act = 4.0 * ((double)cols + (double)rows) * (double)t;
    double us = m->overhead_us;
    if (m->link_gbps > 0) us += act / (m->link_gbps * 1e3); /* GB/s = 1e3 bytes/us */
    const double mem = m->mem_gbps > 0 ? wbytes / (m->mem_gbps * 1e3) : 0;
    const double cmp = m->gflops > 0 ? flops / (m->gflops * 1e3) : 0;
    return us + (mem > cmp ? mem : cmp);
}
