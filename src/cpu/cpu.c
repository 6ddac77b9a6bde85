/* The CPU backend's entry points: pick the instruction-set path once (CPUID, or
 * BACKPLANE_CPU_ISA), plan each call from the kernel table (kernels.def: the decode kernel up to
 * its batch limit, else the path's GEMM; plan_call serves the run, the batched jobs and the name
 * reports alike), quantize activations once per call, repack a weight at first use when its
 * kernel reads a copy, and share rows out over the pool. The kernels live under scalar/, avx2/
 * and avx512/, each folder built with its own -m flags (backend.cmake), so one binary runs on
 * any x86-64. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/cpu_internal.h"

static bp_cpu_ops g_ops[BP_CPU_ISA_COUNT];
static bool g_have[BP_CPU_ISA_COUNT];
static bp_cpu_isa g_isa;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* BF16 batches round x to bf16 for vdpbf16ps only on AMD CPUs (g_bf16_dot, from CPUID): on the
 * AMD CPU vdpbf16ps did twice an FMA's f32 FLOPs, on the Intel one the exact f32 kernels were
 * faster, so there rounding x buys nothing and costs precision (figures, and why a timed choice
 * was dropped: docs/cpu-kernels.md). */
static bool g_bf16_dot;
/* BACKPLANE_CPU_VBMI=0 or bp_cpu_set_vbmi(false): ops->vec_novbmi where a kind has one. */
static bool g_vbmi_off;
static int g_bf16_mode; /* bp_cpu_set_bf16_dot */
/* "CPU avx2 Q4_K panel GEMM (...)": built once per ISA and kind so reports get stable strings. */
static char g_gemm_names[BP_CPU_ISA_COUNT][BP_CPU_MAX_KIND][96];
/* The same for BF16's rounded-activation GEMM (ops->gemm_bf16r), where the path has one. */
static char g_bf16r_gemm_names[BP_CPU_ISA_COUNT][112];

static const char *const isa_names[BP_CPU_ISA_COUNT] = {"scalar", "avx2", "avx512"};
/* BACKPLANE_CPU_DECODE (read once, in init_once): 0 auto (timed), 1 the main kernel, 2 the
 * alternative. */
static int g_env_pick;
static const char *g_env_pick_text;

/* CPUID and XGETBV directly, not __builtin_cpu_supports: compilers disagree on its feature
 * names (clang 14 has no "f16c"), and the OS must have enabled the wide registers (XCR0) or
 * the first AVX instruction faults even on a CPU that has it. */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static bool cpu_has(bp_cpu_isa isa) {
    if (isa == BP_CPU_ISA_SCALAR) return true;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12), f16c = c & (1u << 29);
    if (!osxsave || !avx) return false;
    uint64_t xcr = xcr0();
    if ((xcr & 0x6) != 0x6) return false; /* XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    bool avx2 = b & (1u << 5);
    bool base = avx2 && fma && f16c;
    if (isa == BP_CPU_ISA_AVX2) return base;
    /* DQ and BMI2 too: the AVX-512 files are built with -mavx512dq -mbmi2 (every CPU with VNNI
     * has both; avx512/decode_repacked.c's IQ4_XS scales come from pdep). */
    bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31), vnni = c & (1u << 11);
    bool bmi2 = b & (1u << 8);
    bool zmm_state = (xcr & 0xe0) == 0xe0; /* opmask, ZMM0-15 upper halves, ZMM16-31 */
    return isa == BP_CPU_ISA_AVX512 && base && f && dq && bw && vl && vnni && bmi2 && zmm_state;
}

/* AVX512_BF16 (vcvtne2ps2bf16, vdpbf16ps): CPUID leaf 7 subleaf 1, EAX bit 5. Asked only once
 * cpu_has(BP_CPU_ISA_AVX512) holds (the OS state checks are the same). */
static bool cpu_has_avx512bf16(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return false; /* a: the last subleaf */
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return a & (1u << 5);
}
/* AVX512_VBMI (vpermb): CPUID leaf 7 subleaf 0, ECX bit 1; asked as cpu_has_avx512bf16. */
static bool cpu_has_avx512vbmi(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return c & (1u << 1);
}
/* CPUID leaf 0's vendor string is "AuthenticAMD". */
static bool cpu_is_amd(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
}
#else
static bool cpu_has(bp_cpu_isa isa) { return isa == BP_CPU_ISA_SCALAR; }
static bool cpu_has_avx512bf16(void) { return false; }
static bool cpu_has_avx512vbmi(void) { return false; }
static bool cpu_is_amd(void) { return false; }
#endif

/* x into activation format act (BP_ACT_F32: nothing to do, the kernel reads x). */
static void quantize_act(const bp_cpu_ops *ops, bp_cpu_act act, const float *x, int64_t cols, void *buf) {
    if (ops->quant[act]) ops->quant[act](x, cols, buf);
}

/* The int8 GEMM quantizes the weights a second time; the float kinds are promised float accuracy. */
static bool use_gemm_q8(const bp_cpu_ops *ops, bp_kind k) {
    return ops->gemm_q8 && k != BP_KIND_F32 && k != BP_KIND_F16 && k != BP_KIND_BF16;
}

static void name_gemms(bp_cpu_isa isa) {
    for (int k = 0; k < BP_CPU_MAX_KIND; k++) {
        const bp_kind_traits *t = bp_kind_traits_of((bp_kind)k);
        if (!t) continue;
        bool q8 = use_gemm_q8(&g_ops[isa], (bp_kind)k);
        snprintf(g_gemm_names[isa][k], sizeof g_gemm_names[isa][k], "CPU %s %s %s", q8 ? isa_names[isa] : g_ops[isa].gemm_isa,
                 t->info.name, q8 ? g_ops[isa].gemm_q8_name : g_ops[isa].gemm_name);
    }
    if (g_ops[isa].gemm_bf16r)
        snprintf(g_bf16r_gemm_names[isa], sizeof g_bf16r_gemm_names[isa], "CPU %s BF16 %s", isa_names[isa],
                 g_ops[isa].gemm_bf16r_name);
}

static void init_once(void) {
    /* A path needs the one below it: the AVX512 rows name AVX2 kernels too. */
    for (int i = 0; i < BP_CPU_ISA_COUNT; i++) {
        const bp_cpu_isa isa = (bp_cpu_isa)i;
        if (!cpu_has(isa) || (i > 0 && !g_have[i - 1])) break;
        const bool avx512 = isa == BP_CPU_ISA_AVX512;
        /* A CPU without AVX512_BF16 keeps the exact BF16 kernels at every batch. */
        const bool bf16r = avx512 && cpu_has_avx512bf16();
        if (!bp_cpu_ops_build(isa, &g_ops[i], avx512 && cpu_has_avx512vbmi(), bf16r)) break;
        bp_cpu_setup_tables(isa);
        g_have[i] = true;
        if (bf16r && g_ops[i].vec_bf16r.fn) g_bf16_dot = cpu_is_amd();
    }
    for (int i = 0; i < BP_CPU_ISA_COUNT; i++)
        if (g_have[i]) name_gemms((bp_cpu_isa)i);
    g_isa = BP_CPU_ISA_SCALAR;
    for (int i = 0; i < BP_CPU_ISA_COUNT; i++)
        if (g_have[i]) g_isa = (bp_cpu_isa)i;
    const char *vb = getenv("BACKPLANE_CPU_VBMI");
    if (vb && *vb) {
        if (!strcmp(vb, "0")) g_vbmi_off = true;
        else if (strcmp(vb, "1")) fprintf(stderr, "backplane: BACKPLANE_CPU_VBMI=%s is not 0|1; using 1 (VBMI kernels where the CPU has AVX512_VBMI)\n", vb);
    }
    const char *dp = getenv("BACKPLANE_CPU_DECODE");
    if (dp && *dp && strcmp(dp, "auto")) {
        if (!strcmp(dp, "avx512") || !strcmp(dp, "main")) g_env_pick = 1;
        else if (!strcmp(dp, "avx2") || !strcmp(dp, "alt")) g_env_pick = 2;
        else if (!strcmp(dp, "time")) g_env_pick = 3;
        else fprintf(stderr, "backplane: BACKPLANE_CPU_DECODE=%s is not auto|avx512|avx2|time; using auto\n", dp);
        g_env_pick_text = dp;
    }
    const char *e = getenv("BACKPLANE_CPU_ISA");
    if (e && *e) {
        int want = -1;
        for (int i = 0; i < BP_CPU_ISA_COUNT; i++)
            if (!strcmp(e, isa_names[i])) want = i;
        if (want < 0) fprintf(stderr, "backplane: BACKPLANE_CPU_ISA=%s is not scalar|avx2|avx512; using %s\n", e, isa_names[g_isa]);
        else if (!g_have[want]) fprintf(stderr, "backplane: BACKPLANE_CPU_ISA=%s is not available on this machine or build; using %s\n", e, isa_names[g_isa]);
        else g_isa = (bp_cpu_isa)want;
    }
}

const char *bp_cpu_isa_name(bp_cpu_isa isa) {
    return (unsigned)isa < BP_CPU_ISA_COUNT ? isa_names[isa] : "unknown";
}

bool bp_cpu_isa_available(bp_cpu_isa isa) {
    pthread_once(&g_once, init_once);
    return (unsigned)isa < BP_CPU_ISA_COUNT && g_have[isa];
}

bp_dequant_fn bp_cpu_fast_dequant(bp_cpu_isa isa, bp_kind k) {
    pthread_once(&g_once, init_once);
    if ((unsigned)isa >= BP_CPU_ISA_COUNT || !g_have[isa] || (unsigned)k >= BP_CPU_MAX_KIND) return NULL;
    return g_ops[isa].dequant[k];
}

bp_cpu_isa bp_cpu_isa_current(void) {
    pthread_once(&g_once, init_once);
    return g_isa;
}

bp_status bp_cpu_isa_force(bp_cpu_isa isa) {
    if (!bp_cpu_isa_available(isa))
        return bp_fail(BP_E_UNSUPPORTED, "CPU ISA path %s is not available on this machine or build",
                       bp_cpu_isa_name(isa));
    g_isa = isa;
    return BP_OK;
}

int bp_cpu_threads(void) { return bp_pool_size(); }
bp_status bp_cpu_set_threads(int n) { return bp_pool_resize(n); }

/* ---- dispatch ---------------------------------------------------------------------------- */

static const bp_cpu_vec_kernel *vec_kernel(const bp_cpu_ops *ops, bp_kind k) {
    if ((unsigned)k < BP_CPU_MAX_KIND && g_vbmi_off && ops->vec_novbmi[k].fn) return &ops->vec_novbmi[k];
    if ((unsigned)k < BP_CPU_MAX_KIND && ops->vec[k].fn) return &ops->vec[k];
    return &ops->vec_generic;
}

/* A specialized decode kernel repeated per input beats dequantizing a panel only for a few
 * inputs: it streams the weights t times but never writes them out as floats. */
enum { SMALL_BATCH = 4 };

void bp_cpu_set_bf16_dot(int mode) { g_bf16_mode = mode; }
bool bp_cpu_bf16_dot_used(void) {
    pthread_once(&g_once, init_once);
    return g_ops[g_isa].vec_bf16r.fn && g_bf16_dot;
}

/* BF16 at t >= 2 outside exact mode, where the path has the rounded-activation kernels
 * (avx512/bf16_dot.c). Each entry point reads it once per call and passes it on as `lo`:
 * bp_set_exact_mode may flip it at any time, and one call must not mix the two. */
static bool use_bf16r(const bp_cpu_ops *ops, bp_kind k, int64_t t) {
    const bool dot = g_bf16_mode == 1 || (g_bf16_mode == 0 && g_bf16_dot);
    return k == BP_KIND_BF16 && t >= 2 && ops->vec_bf16r.fn && dot && !bp_exact_mode();
}

static bool use_vec_for_batch(const bp_cpu_ops *ops, bp_kind k, int64_t t, bool lo) {
    const bp_cpu_vec_kernel *vk = lo ? &ops->vec_bf16r : vec_kernel(ops, k);
    return t <= 1 || (vk != &ops->vec_generic && t <= (vk->max_batch ? vk->max_batch : SMALL_BATCH));
}

static bool g_repack = true;
void bp_cpu_set_repack(bool on) { g_repack = on; }

void bp_cpu_set_vbmi(bool on) {
    pthread_once(&g_once, init_once);
    g_vbmi_off = !on;
}
bool bp_cpu_has_vbmi_kernel(bp_kind k) {
    pthread_once(&g_once, init_once);
    return (unsigned)k < BP_CPU_MAX_KIND && g_ops[g_isa].vec_novbmi[k].fn != NULL;
}

/* ---- first-use choice between two decode kernels ------------------------------------------ */

static int g_force_pick;
void bp_cpu_set_decode_pick(int pick) { g_force_pick = pick; }
/* Per ISA path and kind: 0 not timed yet, 1 main kernel, 2 the alternative; and the timing
 * behind it, the alternative's time per 1000 of the main kernel's (0: none). */
static _Atomic int g_pick[BP_CPU_ISA_COUNT][BP_CPU_MAX_KIND];
static _Atomic int g_pick_permille[BP_CPU_ISA_COUNT][BP_CPU_MAX_KIND];

static double now_s(void);
static int cmp_dbl(const void *a, const void *b);

/* BACKPLANE_CPU_DECODE=time: the alternative must be this much faster (the median over TRIES
 * back-to-back pairs of its time / the main kernel's) to replace the main kernel. The two
 * kernels sum in different orders, so their results differ in the last bits: a pick that flips
 * between processes changes a program's output on the same machine, and under load it did at
 * every margin (docs/cpu-kernels.md). A timed choice is only as stable as the kernels are
 * far apart, so it is not the default: the table's ALT rows fix the choice per kind.
 * BACKPLANE_CPU_DECODE=avx512|avx2 pins it outright. */
#define PICK_MARGIN 0.90

/* Under AddressSanitizer or ThreadSanitizer the two kernels' times say nothing about the machine
 * (the instrumentation slows them unequally: the AVX2 kernel "won" by 10-20% there while it
 * takes 1.6x the AVX-512 one's time in a plain build), and with two processes landing on either
 * side of the margin, `make sanitize`'s cross-process comparisons (the installed probe example
 * against `backplane probe --json`, the Python binding against the C library) saw different
 * kernels. Such builds take the main kernel without timing; probe says why. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define BP_CPU_SANITIZED 1
#endif
#endif
#if !defined(BP_CPU_SANITIZED) && (defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__))
#define BP_CPU_SANITIZED 1
#endif
#ifndef BP_CPU_SANITIZED
#define BP_CPU_SANITIZED 0
#endif

/* Times both kernels on a synthetic 32 x 4096 weight (zero bytes: the kernels' speed does not
 * depend on the values), hot in L2: TRIES pairs of back-to-back calls (which goes first
 * alternates), the median of the pairs' time ratios. About 1-5 ms, once per kind and path.
 * Returns 1 or 2 (and the ratio in *permille); 0 when memory is short: the default kernel serves
 * this call and the choice is not stored (a stored 1 would pin a possibly slower kernel for the
 * life of the process because one allocation failed once). */
static int time_pick(const bp_cpu_ops *ops, bp_kind k, int *permille) {
    enum { ROWS = 32, COLS = 4096, TRIES = 31 };
    const bp_kind_traits *kt = bp_kind_traits_of(k);
    const bp_cpu_vec_kernel *v[2] = {vec_kernel(ops, k), &ops->vec_alt[k]};
    size_t rb;
    if (!kt || bp_kind_row_bytes(k, COLS, &rb) != BP_OK) return 1;
    size_t ab = bp_cpu_act_bytes(v[0]->act, COLS);
    uint8_t *w = bp_calloc(ROWS, rb);
    float *x = bp_malloc(sizeof(float) * (COLS + ROWS));
    void *xq = ab ? bp_aligned_alloc(64, ab) : NULL;
    int pick = 0;
    if (!w || !x || (ab && !xq)) goto out;
    for (int i = 0; i < COLS; i++) x[i] = (float)(i % 7) - 3.0f;
    quantize_act(ops, v[0]->act, x, COLS, xq);
    bp_cpu_job job = {.kt = kt, .w = w, .row_bytes = rb, .rows = ROWS, .cols = COLS, .batch = 1, .x = x, .xq = xq,
                      .xq_stride = ab, .y = x + COLS};
    double ratio[TRIES];
    for (int i = 0; i < 2; i++) { /* warm both: weight, activations and code in cache */
        job.vk = v[i];
        v[i]->fn(&job, 0, ROWS);
    }
    for (int t = 0; t < TRIES; t++) {
        double dt[2];
        for (int n = 0; n < 2; n++) {
            const int i = (t + n) & 1;
            job.vk = v[i];
            double t0 = now_s();
            v[i]->fn(&job, 0, ROWS);
            dt[i] = now_s() - t0;
        }
        ratio[t] = dt[0] > 0 ? dt[1] / dt[0] : 1.0;
    }
    qsort(ratio, TRIES, sizeof *ratio, cmp_dbl);
    const double med = ratio[TRIES / 2];
    pick = med < PICK_MARGIN ? 2 : 1;
    *permille = (int)(1000.0 * med + 0.5);
    if (*permille < 1) *permille = 1;
out:
    bp_free(w);
    bp_free(x);
    bp_free(xq);
    return pick;
}

/* The kernel a batch-1 call of kind k runs on this path. */
static const bp_cpu_vec_kernel *decode_kernel(const bp_cpu_ops *ops, bp_kind k) {
    const bp_cpu_vec_kernel *main = vec_kernel(ops, k);
    if ((unsigned)k >= BP_CPU_MAX_KIND || !ops->vec_alt[k].fn || main->pack) return main;
    int pick = g_force_pick ? g_force_pick : g_env_pick;
    if (pick == 3 && BP_CPU_SANITIZED) pick = 0;
    if (!pick) pick = ops->alt_first[k] ? 2 : 1;
    if (pick == 3) {
        pick = 0;
        _Atomic int *slot = &g_pick[ops - g_ops][k];
        pick = atomic_load_explicit(slot, memory_order_acquire);
        if (!pick) {
            /* Two threads may both time it: each stores a valid choice (and its ratio first). */
            int permille = 0;
            pick = time_pick(ops, k, &permille);
            if (pick) {
                atomic_store_explicit(&g_pick_permille[ops - g_ops][k], permille, memory_order_relaxed);
                atomic_store_explicit(slot, pick, memory_order_release);
            }
        }
        if (!pick) pick = ops->alt_first[k] ? 2 : 1; /* no memory to time: the default */
    }
    return pick == 2 ? &ops->vec_alt[k] : main;
}

/* Bytes bp_cpu_packed_alloc asks for: copies of 2 MiB and more in whole huge pages. */
static size_t packed_bytes(size_t n) {
    const size_t huge = (size_t)2 << 20;
    return n < huge ? (n ? n : 1) : (n + huge - 1) / huge * huge;
}

/* What a call of kind k at batch t runs on this path: the one place that decides it, so the
 * run, the batched jobs (bp_cpu_job_setup) and the name every report prints cannot disagree.
 * copy: whether the kernel may read a repacked copy (false where none can be made); a kernel
 * that reads one is then replaced by the kind's plain one (plan->vk NULL if it has none). */
typedef struct plan {
    bp_cpu_job_mode mode;
    const bp_cpu_vec_kernel *vk; /* decode modes, and GEMM_BF16R's activation format */
    void (*gemm)(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1); /* GEMM modes */
    const char *name;
    size_t abytes; /* activations: per input (decode, GEMM_BF16R) or for all of x (GEMM_Q8) */
    size_t abuf;   /* the whole activation buffer of the call */
} plan;

static void plan_call(const bp_cpu_ops *ops, bp_kind k, int64_t t, int64_t cols, bool copy, plan *p) {
    /* Exact mode is read once here: it may flip at any time, and one call must not mix the
     * rounded-activation BF16 kernels with the exact ones. */
    const bool lo = use_bf16r(ops, k, t);
    *p = (plan){0};
    if (use_vec_for_batch(ops, k, t, lo)) {
        /* batch 1 takes the first-use choice between the two decode kernels */
        p->vk = t == 1 ? decode_kernel(ops, k) : lo ? &ops->vec_bf16r : vec_kernel(ops, k);
        if (p->vk->pack && !copy) p->vk = ops->vec_plain[k].fn ? &ops->vec_plain[k] : NULL;
        if (!p->vk) return;
        p->mode = p->vk->multi ? BP_CPU_JOB_DECODE_MULTI : BP_CPU_JOB_DECODE;
        p->name = p->vk->name;
        p->abytes = bp_cpu_act_bytes(p->vk->act, cols);
        p->abuf = p->vk->multi ? p->abytes * (size_t)t : p->abytes;
    } else if (lo) { /* the rounded-activation GEMM: every input in BP_ACT_BF16 first */
        p->mode = BP_CPU_JOB_GEMM_BF16R;
        p->vk = &ops->vec_bf16r;
        p->gemm = ops->gemm_bf16r;
        p->name = g_bf16r_gemm_names[ops - g_ops];
        p->abytes = bp_cpu_act_bytes(p->vk->act, cols);
        p->abuf = p->abytes * (size_t)t;
    } else if (use_gemm_q8(ops, k)) {
        p->mode = BP_CPU_JOB_GEMM_Q8;
        p->gemm = ops->gemm_q8;
        p->name = g_gemm_names[ops - g_ops][k];
        p->abuf = p->abytes = cols ? ops->gemm_q8_bytes(t, cols) : 0;
    } else {
        p->mode = BP_CPU_JOB_GEMM_F32;
        p->gemm = ops->gemm;
        p->name = g_gemm_names[ops - g_ops][k];
    }
}

bool bp_cpu_has_decode_alt(bp_kind k) {
    pthread_once(&g_once, init_once);
    return (unsigned)k < BP_CPU_MAX_KIND && g_ops[g_isa].vec_alt[k].fn != NULL;
}

bool bp_cpu_decode_choice(bp_kind k, char *buf, size_t len) {
    pthread_once(&g_once, init_once);
    const bp_cpu_ops *ops = &g_ops[g_isa];
    if ((unsigned)k >= BP_CPU_MAX_KIND || !ops->vec_alt[k].fn || vec_kernel(ops, k)->pack) return false;
    const bp_cpu_vec_kernel *vk = decode_kernel(ops, k); /* times it, unless pinned */
    const char *other = vk == &ops->vec_alt[k] ? vec_kernel(ops, k)->name : ops->vec_alt[k].name;
    int pm = atomic_load_explicit(&g_pick_permille[g_isa][k], memory_order_relaxed);
    const bool alt = vk == &ops->vec_alt[k];
    if (g_force_pick) snprintf(buf, len, "pinned by bp_cpu_set_decode_pick; other: %s", other);
    else if (g_env_pick == 1 || g_env_pick == 2)
        snprintf(buf, len, "pinned by BACKPLANE_CPU_DECODE=%s; other: %s", g_env_pick_text, other);
    else if (g_env_pick == 3 && BP_CPU_SANITIZED)
        snprintf(buf, len, "the default (sanitizer build: timings distorted, not timed); other: %s", other);
    else if (g_env_pick == 3 && pm)
        snprintf(buf, len, "timed at first use (BACKPLANE_CPU_DECODE=time), %s: %s took %.2fx its time (a switch needs < %.2fx)",
                 alt ? "switched" : "kept", other, alt ? 1000.0 / pm : pm / 1000.0, PICK_MARGIN);
    else if (g_env_pick == 3) snprintf(buf, len, "the default (not timed: no memory for the timing); other: %s", other);
    else
        snprintf(buf, len, "the default for this kind (%s), the same in every process; "
                           "BACKPLANE_CPU_DECODE=time times both; other: %s", alt ? "the AVX2 kernel" : "the main kernel", other);
    return true;
}

const char *bp_cpu_kernel_name(bp_kind k, int64_t t) {
    pthread_once(&g_once, init_once);
    if (!bp_kind_traits_of(k)) return "CPU (unknown kind)";
    plan p;
    plan_call(&g_ops[g_isa], k, t, 0, g_repack, &p);
    return p.vk || p.gemm ? p.name : "CPU (no kernel)";
}

void bp_cpu_call_memory(bp_kind k, int64_t rows, int64_t cols, size_t row_bytes, int64_t t, size_t *copy, size_t *act) {
    pthread_once(&g_once, init_once);
    *copy = *act = 0;
    if (!bp_kind_traits_of(k) || rows < 1 || cols < 1 || t < 1) return;
    plan p;
    plan_call(&g_ops[g_isa], k, t, cols, g_repack, &p);
    *act = p.abuf ? (p.abuf + 4095) & ~(size_t)4095 : 0;
    if (!p.vk || !p.vk->pack) return;
    /* The pack function over zero rows sets the copy's row stride and reads nothing. */
    static const uint8_t none[1];
    bp_cpu_packed pk = {0};
    /* A copy of 2 MiB or more is 2 MiB-aligned: the C library may hand back up to that much more
     * than asked (an aligned block mapped on its own keeps the alignment's slack), which the
     * heap's count sees; counted here as the most it can be. */
    if (p.vk->pack(none, 0, cols, row_bytes, &pk)) {
        const size_t n = packed_bytes((size_t)rows * pk.row_stride);
        *copy = n + (n >= ((size_t)2 << 20) ? ((size_t)2 << 20) : 0) + sizeof pk;
    }
    bp_free(pk.data);
}

size_t bp_cpu_pool_scratch_bytes(void) {
    return (size_t)bp_pool_size() * (((size_t)BP_CPU_SCRATCH_FLOATS * sizeof(float) + 63) & ~(size_t)63);
}

/* The weight's kind, shape and bytes were checked once, by bp_weight_init; a call checks its
 * own arguments. */
static bp_status check_weight(const bp_weight *w, const void *x, const void *y, int64_t t,
                              const bp_kind_traits **kt) {
    if (!w) return bp_fail(BP_E_INVAL, "CPU: weight is NULL");
    *kt = w->traits;
    if (!*kt) return bp_fail(BP_E_INVAL, "CPU: a weight of kind id %d not made by bp_weight_create", (int)w->kind);
    if (t < 0) return bp_fail(BP_E_SHAPE, "CPU %s: negative batch %lld", (*kt)->info.name, (long long)t);
    if (t && (!x || !y)) return bp_fail(BP_E_INVAL, "CPU %s: input or output is NULL", (*kt)->info.name);
    return BP_OK;
}

/* Threads worth using: below ~64 KiB of weights the wake-up costs more than it saves. */
static size_t g_min_parallel = 65536;
void bp_cpu_set_min_parallel_bytes(size_t bytes) { g_min_parallel = bytes; }

static int threads_for(const bp_cpu_job *job, int pool_n) {
    size_t bytes = job->row_bytes * (size_t)job->rows;
    size_t per = job->batch > 1 ? 4 : 1;
    if (bytes * per < g_min_parallel) return 1;
    int n = pool_n;
    if (n > job->rows) n = (int)job->rows;
    return n < 1 ? 1 : n;
}

/* Work is handed out in chunks, as per-thread runs (bp_chunk_runs, chunk_runs.c). Which thread
 * computes a row never changes the row's value: a row is always computed whole, by one thread,
 * with the same code. Decode chunks are multiples of 4 rows so threads do not share a line of y. */
typedef struct task {
    bp_chunk_runs runs; /* first: the 64-byte aligned part */
    const bp_cpu_job *job;
    void (*gemm)(const bp_cpu_job *, int, int64_t, int64_t);
    int64_t chunk_rows, nchunks;
} task;

static void task_init(task *tk, const bp_cpu_job *job, int nth, int64_t unit) {
    tk->job = job;
    tk->gemm = NULL;
    tk->chunk_rows = bp_chunk_rows_per((job->rows + unit - 1) / unit, nth) * unit;
    tk->nchunks = (job->rows + tk->chunk_rows - 1) / tk->chunk_rows;
    bp_chunk_runs_init(&tk->runs, tk->nchunks, nth);
}

static void run_task(void *ctx, int ith, int nth) {
    (void)nth;
    task *tk = ctx;
    const bp_cpu_job *job = tk->job;
    int k = 0;
    for (int64_t c; (c = bp_chunk_runs_next(&tk->runs, ith, &k)) >= 0;) {
        int64_t r0 = c * tk->chunk_rows, r1 = r0 + tk->chunk_rows;
        if (r1 > job->rows) r1 = job->rows;
        if (tk->gemm) tk->gemm(job, ith, r0, r1);
        else job->vk->fn(job, r0, r1);
    }
}

uint8_t *bp_cpu_packed_alloc(int64_t rows, size_t stride) {
    const size_t huge = (size_t)2 << 20;
    if (rows < 0 || (stride && (size_t)rows > SIZE_MAX / stride)) return NULL;
    size_t n = (size_t)rows * stride;
    if (n < huge) return bp_calloc(n ? n : 1, 1);
    n = packed_bytes(n);
    uint8_t *p = bp_aligned_alloc(huge, n);
    if (!p) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    memset(p, 0, n);
    return p;
}

static void free_packed(void *p) {
    bp_cpu_packed *pk = p;
    if (pk) bp_free(pk->data);
    bp_free(pk);
}

/* The weight's repacked copy for kernel vk, made at first use. Two threads racing here both
 * pack; one copy is published with a compare-and-swap and the other freed. A copy made for a
 * different layout (another ISA path was forced since) is replaced. */
static const bp_cpu_packed *packed_for(bp_weight *w, const bp_cpu_vec_kernel *vk) {
    bp_cpu_packed *cur = __atomic_load_n((bp_cpu_packed **)&w->backend_state[BP_BACKEND_CPU], __ATOMIC_ACQUIRE);
    if (cur && cur->layout == vk->pack) return cur;
    bp_cpu_packed *pk = bp_calloc(1, sizeof *pk);
    if (!pk) return NULL;
    pk->kind = w->kind;
    pk->layout = vk->pack;
    if (!vk->pack(w->data, w->rows, w->cols, w->row_bytes, pk)) {
        bp_free(pk);
        return NULL;
    }
    __atomic_store_n(&w->backend_free[BP_BACKEND_CPU], free_packed, __ATOMIC_RELEASE);
    if (__atomic_compare_exchange_n((bp_cpu_packed **)&w->backend_state[BP_BACKEND_CPU], &cur, pk, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* Replacing a stale layout: nothing can be reading it (forcing an ISA is not safe while a
         * kernel runs, see bp_cpu_isa_force). */
        free_packed(cur);
        return pk;
    }
    free_packed(pk);
    return cur;
}

/* plan_call for weight w at batch t, its repacked copy made (job->packed) where the kernel
 * reads one, and job's kernel and panel dequantizer set from it. */
static bp_status plan_weight(const bp_cpu_ops *ops, bp_weight *w, const bp_kind_traits *kt, int64_t t, bp_cpu_job *job,
                             plan *p) {
    plan_call(ops, w->kind, t, w->cols, g_repack, p);
    /* No memory for a second copy: the plain-layout kernel reads the caller's bytes. */
    if (p->vk && p->vk->pack && !(job->packed = packed_for(w, p->vk))) plan_call(ops, w->kind, t, w->cols, false, p);
    if (!p->vk && !p->gemm)
        return bp_fail(BP_E_NOMEM, "CPU %s: no memory for the repacked %lld x %lld weight", kt->info.name,
                       (long long)w->rows, (long long)w->cols);
    job->vk = p->vk;
    job->dequant = (unsigned)w->kind < BP_CPU_MAX_KIND && ops->dequant[w->kind] ? ops->dequant[w->kind] : kt->dequant;
    return BP_OK;
}

/* Tests: what the last bp_cpu_gemm on this thread ran (kernel_name_test in test_cpu_table). */
static _Thread_local bp_cpu_vec_fn g_last_vec;
static _Thread_local void (*g_last_gemm)(const bp_cpu_job *, int, int64_t, int64_t);
void bp_cpu_last_run(bp_cpu_vec_fn *vec, void (**gemm)(const bp_cpu_job *, int, int64_t, int64_t)) {
    *vec = g_last_vec;
    *gemm = g_last_gemm;
}

/* One call with the pool held (or, when another thread holds it, on this thread alone with
 * scratch of its own). */
static bp_status run(bp_weight *w, const bp_kind_traits *kt, const float *x, int64_t t, float *y) {
    const bp_cpu_ops *ops = &g_ops[g_isa];
    bp_cpu_job job = {.kt = kt, .w = w->data, .row_bytes = w->row_bytes, .rows = w->rows,
                      .cols = w->cols, .batch = t, .x = x, .y = y};
    plan pl;
    bp_status ps = plan_weight(ops, w, kt, t, &job, &pl);
    if (ps) return ps;
    const bool vec = pl.mode == BP_CPU_JOB_DECODE || pl.mode == BP_CPU_JOB_DECODE_MULTI;
    const size_t abytes = pl.abytes, abuf = pl.abuf;
    g_last_vec = vec ? job.vk->fn : NULL;
    g_last_gemm = vec ? NULL : pl.gemm;

    bool held = bp_pool_acquire();
    float *own_scratch = NULL;
    void *own_act = NULL;
    void *act = NULL;
    if (held) {
        job.scratch = bp_pool_scratch();
        act = abuf ? bp_pool_act_buffer(abuf) : NULL;
    } else {
        own_scratch = bp_aligned_alloc(64, BP_CPU_SCRATCH_FLOATS * sizeof(float));
        job.scratch = &own_scratch;
        act = abuf ? (own_act = bp_aligned_alloc(64, abuf)) : NULL;
    }
    bp_status s = BP_OK;
    if ((abuf && !act) || !job.scratch[0]) {
        s = bp_fail(BP_E_NOMEM, "CPU %s: no memory for scratch", kt->info.name);
        goto out;
    }

    int nth = held ? threads_for(&job, bp_pool_size()) : 1;
    if (pl.mode == BP_CPU_JOB_DECODE_MULTI) {
        /* All inputs quantized up front, then one pass over the weights for all of them. */
        for (int64_t j = 0; j < t; j++) quantize_act(ops, job.vk->act, x + j * w->cols, w->cols, (char *)act + (size_t)j * abytes);
        job.xq = act;
        job.xq_stride = abytes;
        task tk;
        task_init(&tk, &job, nth, t > 1 && ops->vec_row_unit[w->kind] ? ops->vec_row_unit[w->kind] : 4);
        if (nth > 1) bp_pool_run(run_task, &tk, nth);
        else run_task(&tk, 0, 1);
    } else if (vec) {
        for (int64_t j = 0; j < t; j++) {
            job.x = x + j * w->cols;
            job.y = y + j * w->rows;
            job.xq = act;
            quantize_act(ops, job.vk->act, job.x, w->cols, act);
            task tk;
            task_init(&tk, &job, nth, 4);
            if (nth > 1) bp_pool_run(run_task, &tk, nth);
            else run_task(&tk, 0, 1);
        }
    } else {
        task tk;
        task_init(&tk, &job, nth, BP_CPU_NR);
        tk.gemm = pl.gemm;
        if (pl.mode == BP_CPU_JOB_GEMM_Q8) {
            ops->gemm_q8_prep(x, t, w->cols, act);
            job.xq = act;
        } else if (pl.mode == BP_CPU_JOB_GEMM_BF16R) {
            for (int64_t j = 0; j < t; j++) quantize_act(ops, job.vk->act, x + j * w->cols, w->cols, (char *)act + (size_t)j * abytes);
            job.xq = act;
            job.xq_stride = abytes;
        }
        if (nth > 1) bp_pool_run(run_task, &tk, nth);
        else run_task(&tk, 0, 1);
    }
out:
    if (held) bp_pool_release();
    bp_free(own_scratch);
    bp_free(own_act);
    return s;
}

bp_status bp_cpu_matvec(bp_weight *w, const float *x, float *y) { return bp_cpu_gemm(w, x, 1, y); }

bp_status bp_cpu_gemm(bp_weight *w, const float *x, int64_t t, float *y) {
    pthread_once(&g_once, init_once);
    const bp_kind_traits *kt = NULL;
    bp_status s = check_weight(w, x, y, t, &kt);
    if (s) return s;
    if (w->rows == 0 || t == 0) return BP_OK;
    if (w->cols == 0) {
        memset(y, 0, (size_t)(w->rows * t) * sizeof *y);
        return BP_OK;
    }
    return run(w, kt, x, t, y);
}

/* ---- read bandwidth ---------------------------------------------------------------------- */

typedef struct bw_ctx {
    const uint8_t *buf;
    size_t bytes;
    uint64_t (*read_sum)(const uint8_t *, size_t);
    _Atomic size_t next;
    uint64_t sink[256];
} bw_ctx;

enum { BW_CHUNK = 1 << 20 };

static void bw_task(void *ctx, int ith, int nth) {
    (void)nth;
    bw_ctx *c = ctx;
    for (;;) {
        size_t off = atomic_fetch_add_explicit(&c->next, BW_CHUNK, memory_order_relaxed);
        if (off >= c->bytes) return;
        size_t n = c->bytes - off < BW_CHUNK ? c->bytes - off : BW_CHUNK;
        c->sink[ith & 255] ^= c->read_sum(c->buf + off, n);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bp_cpu_read_bandwidth_gbps(size_t bytes, size_t segment, int passes) {
    segment &= ~(size_t)4095;
    if (segment == 0 || bytes < segment || passes < 1) return -1;
    bytes = bytes / segment * segment;
    void *buf = bp_aligned_alloc(4096, bytes);
    if (!buf) return -1;
    /* Touch every page first: the first pass would otherwise time page faults. */
    memset(buf, 1, bytes);
    double r = bp_cpu_read_bandwidth_on(buf, bytes, segment, passes);
    bp_free(buf);
    return r;
}

double bp_cpu_read_bandwidth_on(const void *buf, size_t bytes, size_t segment, int passes) {
    pthread_once(&g_once, init_once);
    segment &= ~(size_t)4095;
    if (!buf || segment == 0 || bytes < segment || passes < 1) return -1;
    size_t nseg = bytes / segment;
    int nt = (int)nseg * passes;
    double *times = bp_malloc(sizeof(double) * (size_t)nt);
    if (!times) return -1;
    bw_ctx c = {.bytes = segment, .read_sum = g_ops[g_isa].read_sum};
    bool held = bp_pool_acquire();
    int nth = held ? bp_pool_size() : 1;
    for (int i = 0; i < nt; i++) {
        c.buf = (const uint8_t *)buf + (size_t)(i % (int)nseg) * segment;
        atomic_store(&c.next, 0);
        double t0 = now_s();
        if (held) bp_pool_run(bw_task, &c, nth);
        else bw_task(&c, 0, 1);
        times[i] = now_s() - t0;
    }
    if (held) bp_pool_release();
    qsort(times, (size_t)nt, sizeof *times, cmp_dbl);
    double med = nt % 2 ? times[nt / 2] : 0.5 * (times[nt / 2 - 1] + times[nt / 2]);
    bp_free(times);
    return med > 0 ? (double)segment / med / 1e9 : -1;
}

/* ---- hook for the op layer's batched jobs (src/cpu/cpu_jobs.c) ------------------------------ */

/* Set job up exactly as bp_cpu_gemm would run w at batch t (kernel, repacked copy, dequantizer,
 * int8 GEMM or not), without running it; see cpu_internal.h. */
bp_status bp_cpu_job_setup(bp_weight *w, int64_t t, bp_cpu_job *job, bp_cpu_job_mode *mode, size_t *abytes) {
    pthread_once(&g_once, init_once);
    const bp_kind_traits *kt = NULL;
    bp_status s = check_weight(w, w, w, t, &kt);
    if (s) return s;
    *job = (bp_cpu_job){.kt = kt, .w = w->data, .row_bytes = w->row_bytes, .rows = w->rows, .cols = w->cols, .batch = t};
    plan p;
    s = plan_weight(&g_ops[g_isa], w, kt, t, job, &p);
    if (s) return s;
    *mode = p.mode;
    *abytes = p.abytes;
    return BP_OK;
}

const bp_cpu_ops *bp_cpu_ops_current(void) {
    pthread_once(&g_once, init_once);
    return &g_ops[g_isa];
}

void bp_cpu_quantize_act(const bp_cpu_ops *ops, bp_cpu_act act, const float *x, int64_t cols, void *buf) {
    quantize_act(ops, act, x, cols, buf);
}

size_t bp_cpu_min_parallel_bytes(void) { return g_min_parallel; }
