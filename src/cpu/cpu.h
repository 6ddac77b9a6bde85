/* The CPU backend: the seam's last stop, always able. Optimized kernels per kind and ISA, with
 * the reference kernels (src/kinds) as their oracle. */
#ifndef BP_CPU_H
#define BP_CPU_H

#include "backend/backend.h"

/* y = W x on the CPU. Never returns "no kernel": every kind runs here. */
bp_status bp_cpu_matvec(bp_weight *w, const float *x, float *y);
/* Y = X W^T for t inputs on the CPU. */
bp_status bp_cpu_gemm(bp_weight *w, const float *x, int64_t t, float *y);
/* Name of the CPU kernel that runs kind k at batch t, e.g. "CPU avx2 Q4_K" (for reports). */
const char *bp_cpu_kernel_name(bp_kind k, int64_t t);
/* What a call of a rows x cols weight of kind k (row_bytes a row) at batch t holds on this path,
 * from the same choice the run makes (`backplane plan`): *copy the repacked copy its kernel
 * reads (0: the file's bytes; made at first use, kept with the weight), *act the activation
 * buffer of the call (the pool keeps the largest, rounded to 4 KiB). Reads no weight data. */
void bp_cpu_call_memory(bp_kind k, int64_t rows, int64_t cols, size_t row_bytes, int64_t t, size_t *copy, size_t *act);
/* The table one bp_cpu_jobs call allocates for its duration. */
size_t bp_cpu_jobs_call_bytes(void);
/* The pool's per-thread scratch over its threads (made when the pool starts). */
size_t bp_cpu_pool_scratch_bytes(void);
/* For a kind with two batch-1 kernels on the current path (an AVX-512 one and the AVX2 one it
 * replaced): how the one bp_cpu_kernel_name(k, 1) names was chosen (the kind's fixed default,
 * timed at first use under BACKPLANE_CPU_DECODE=time with the other's relative time, or pinned
 * by BACKPLANE_CPU_DECODE=avx512|avx2) into buf; false, buf untouched, for a kind with one. */
bool bp_cpu_decode_choice(bp_kind k, char *buf, size_t len);
/* Whether BF16 batches (t >= 2, outside exact mode) run the vdpbf16ps kernels here: the CPU has
 * AVX512_BF16 and is an AMD one (on Intel the exact f32 kernels were faster). */
bool bp_cpu_bf16_dot_used(void);

/* The CPU's cost model (src/cpu/cpu_cost.c): per-thread rates times bp_cpu_threads(), or the
 * test override. */
void bp_cost_cpu(bp_cost_model *out);
/* Tests: replace the CPU estimate (NULL restores it). */
void bp_cost_test_set_cpu(const bp_cost_model *m);

/* ---- instruction-set paths and threads (tests and `backplane bench` force these) ------- */

/* The kernel families, chosen once per process from CPUID; BACKPLANE_CPU_ISA=scalar|avx2|
 * avx512 forces one (a forced path the machine lacks falls back to the best it has, with a
 * line on stderr). Every path gives results within the tests' tolerance of the reference. */
typedef enum bp_cpu_isa {
    BP_CPU_ISA_SCALAR = 0, /* portable C, any machine */
    BP_CPU_ISA_AVX2 = 1,   /* x86-64 AVX2 + FMA + F16C */
    BP_CPU_ISA_AVX512 = 2, /* AVX2 path plus AVX-512 F/BW/VL/VNNI kernels where they exist */
    BP_CPU_ISA_COUNT
} bp_cpu_isa;

const char *bp_cpu_isa_name(bp_cpu_isa isa);
/* Whether this build has the path and this machine can run it. */
bool bp_cpu_isa_available(bp_cpu_isa isa);
/* The path in use (decided on first use). */
bp_cpu_isa bp_cpu_isa_current(void);
/* Force a path for the rest of the process (tests); BP_E_UNSUPPORTED when unavailable. Not
 * safe while another thread is running a CPU kernel. */
bp_status bp_cpu_isa_force(bp_cpu_isa isa);

/* Threads used per call: the machine's online CPUs, or BACKPLANE_THREADS. */
int bp_cpu_threads(void);
/* Resize the pool (1..256). Results are identical for every count: each output element is
 * computed by one thread, in the same order. Not safe while a CPU kernel runs. */
bp_status bp_cpu_set_threads(int n);

/* The machine's read bandwidth in 1e9 bytes/s with all pool threads and the current ISA
 * path: the median over `passes` sweeps of a `bytes` buffer read one `segment` at a time, each
 * segment timed on its own, as `backplane bench` times one decode call. `bytes` should be
 * several times the last-level cache so every segment comes from DRAM; short timed segments
 * (a few MB, like one weight matrix) keep a shared machine's preemptions out of the median,
 * as they are kept out of the decode medians it is compared with. Negative when the buffer
 * cannot be allocated. */
double bp_cpu_read_bandwidth_gbps(size_t bytes, size_t segment, int passes);
/* The same over a caller's buffer of `bytes` (already touched, 4096-aligned), so a benchmark
 * can reuse one cold buffer for the bandwidth figure and its weight copies. */
double bp_cpu_read_bandwidth_on(const void *buf, size_t bytes, size_t segment, int passes);

#endif
