/* The whole forward step on Vulkan (lavapipe here, forced on), on the tiny random-weight models
 * of every architecture (tests/model/gen_tiny.py), against the CPU reference path (scalar
 * kernels: no activation rounding) over the same token ids:
 *
 * - one 32-token batch (prefill GEMMs, every row's logits), one token at a time (decode: the
 *   recorded step replayed); NMSE per position <= 1e-10 with an F32 cache and <= 1e-7 with F16
 *   (the kernels sum in another order, nothing else differs), the best id equal at every position;
 * - every step ran on Vulkan (the step's run record), with no fallback;
 * - the traffic of one replayed decode step: one upload (ids and positions), one download (the
 *   logits), one queue submission; the first step of a shape records it once;
 * - the CPU taking over a sequence the device held (BACKPLANE_BACKEND switched mid-way) gives the
 *   same logits: the device hands its KV cache back;
 * - with bindings of 40 KiB (as if the device's maxStorageBufferRange were that small) the same
 *   decode logits: the qwen3 model's embedding and output weights split into pieces over arenas.
 * Skips loudly when Vulkan is not built or has no device; both are failures on CI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"
#include "model/context_internal.h"
#include "model/model_ref.h"
#if BP_HAVE_VULKAN
#include "vulkan/vk_internal.h"
#endif

enum { P = 32, NCTX = 64 };

static double nmse(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d, den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static int argmax(const float *x, int64_t n) {
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int)i;
    return best;
}

typedef struct traffic_view {
    bp_step_traffic first, last;
    bp_run_record rec;
} traffic_view;

static void force(const char *b) { CHECK_OK(bp_set_backend_preference(b, BP_FORCE)); }

/* Logits of every position for tokens[0..P): one batch (t = P), or one token at a time. */
static bool run(bp_model *m, bp_kind kv, const int32_t *tokens, bool batch, float *out, int64_t V,
                struct traffic_view *tr) {
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = NCTX, cp.kv_kind = kv;
    bp_context *c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    if (!c) return false;
    bool ok = true;
    if (batch) {
        ok = bp_context_eval(c, tokens, P, P) == BP_OK;
        for (int p = 0; ok && p < P; p++) memcpy(out + (size_t)p * V, bp_context_logits(c, p), (size_t)V * 4);
    } else {
        for (int p = 0; ok && p < P; p++) {
            ok = bp_context_eval(c, tokens + p, 1, 1) == BP_OK;
            if (ok) memcpy(out + (size_t)p * V, bp_context_logits(c, 0), (size_t)V * 4);
            if (ok && tr && p == 0) tr->first = c->last_traffic[0];
            if (ok && tr && p == P - 1) tr->last = c->last_traffic[0], tr->rec = c->step_rec[0];
        }
    }
    CHECK(ok, "eval failed: %s", bp_last_error());
    bp_context_free(c);
    return ok;
}

static void run_arch(const char *arch) {
    const char *path = model_tiny_path(arch);
    if (!path) return;
    char ref_path[256];
    snprintf(ref_path, sizeof ref_path, "tests/model/ref/tiny-%s.logits.bin", arch);
    model_ref_logits r;
    if (!model_ref_load(ref_path, &r)) return;
    bp_model *m = NULL;
    CHECK_OK(bp_model_load(path, NULL, &m));
    if (!m) {
        model_ref_free(&r);
        return;
    }
    const int64_t V = r.n_vocab;
    /* Every KV kind the step stores; the device quantizes as the CPU does, so only the summation
     * order differs (and a rounding tie, rarely): measured F32 8e-13, F16 5e-9, ... */
    const bp_kind kvs[] = {BP_KIND_F32, BP_KIND_F16, BP_KIND_BF16, BP_KIND_Q8_0,
                           BP_KIND_Q4_0, BP_KIND_Q4_1, BP_KIND_Q5_0, BP_KIND_Q5_1};
    const double bound[] = {1e-10, 1e-7, 1e-6, 1e-5, 1e-5, 1e-5, 1e-5, 1e-5};
    const int nkv = (int)(sizeof kvs / sizeof kvs[0]);
    float *ref = malloc((size_t)P * V * 4), *got = malloc((size_t)P * V * 4);
    for (int ki = 0; ki < nkv && ref && got; ki++) {
        for (int batch = 0; batch < 2; batch++) {
            force("cpu");
            CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
            if (!run(m, kvs[ki], r.tokens, batch, ref, V, NULL)) continue;
            force("vulkan");
            traffic_view tv = {0};
            if (!run(m, kvs[ki], r.tokens, batch, got, V, batch ? NULL : &tv)) continue;
            double worst = 0;
            int same = 0;
            for (int p = 0; p < P; p++) {
                double e = nmse(got + (size_t)p * V, ref + (size_t)p * V, V);
                if (!(e <= worst)) worst = e;
                same += argmax(got + (size_t)p * V, V) == argmax(ref + (size_t)p * V, V);
            }
            const char *route = batch ? "batch" : "decode";
            const char *kvn = bp_kind_lookup((uint32_t)kvs[ki])->name;
            CHECK(worst <= bound[ki], "%s %s %s KV: worst NMSE %.3e > %.0e against the CPU reference path", arch,
                  route, kvn, worst, bound[ki]);
            CHECK(same == P, "%s %s %s KV: best id differs at %d of %d positions", arch, route, kvn, P - same, P);
            if (getenv("BP_TEST_VERBOSE")) fprintf(stderr, "%s %s %s KV: worst NMSE %.3e\n", arch, route, kvn, worst);
            if (!batch) {
                CHECK(!strcmp(tv.rec.backend, "vulkan") && !tv.rec.fallback_from[0], "%s: the decode step ran on %s (%s)",
                      arch, tv.rec.backend, tv.rec.cause);
                CHECK(tv.first.recorded && !tv.last.recorded, "%s: the first decode step records, later ones replay",
                      arch);
                CHECK(tv.last.h2d == 1 && tv.last.d2h == 1 && tv.last.submits == 1,
                      "%s: one replayed decode step moved %llu uploads, %llu downloads, %llu submissions (want 1, 1, 1)",
                      arch, (unsigned long long)tv.last.h2d, (unsigned long long)tv.last.d2h,
                      (unsigned long long)tv.last.submits);
                CHECK(tv.last.d2h_bytes == (uint64_t)V * 4, "%s: the decode step read back %llu bytes, the logits are %lld",
                      arch, (unsigned long long)tv.last.d2h_bytes, (long long)V * 4);
            }
        }
    }
    /* The device holds the first 20 positions; the CPU takes the rest over. */
    if (ref && got) {
        force("cpu");
        CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
        run(m, BP_KIND_F32, r.tokens, false, ref, V, NULL);
        bp_context_params cp = bp_context_default_params();
        cp.n_ctx = NCTX, cp.kv_kind = BP_KIND_F32;
        bp_context *c = NULL;
        CHECK_OK(bp_context_create(m, &cp, &c));
        force("vulkan");
        if (c) CHECK_OK(bp_context_eval(c, r.tokens, 20, 0));
        force("cpu");
        double worst = 0;
        for (int p = 20; c && p < P; p++) {
            CHECK_OK(bp_context_eval(c, r.tokens + p, 1, 1));
            const float *lg = bp_context_logits(c, 0);
            double e = lg ? nmse(lg, ref + (size_t)p * V, V) : INFINITY;
            if (!(e <= worst)) worst = e;
        }
        CHECK(worst <= 1e-6, "%s: the CPU continuing the device's sequence: worst NMSE %.3e", arch, worst);
        bp_context_free(c);
    }
    free(ref);
    free(got);
    bp_model_free(m);
    model_ref_free(&r);
}

/* Every binding 40 KiB: the placement splits the larger weights into pieces. */
static void small_bindings(void) {
#if BP_HAVE_VULKAN
    const char *path = model_tiny_path("qwen3");
    model_ref_logits r;
    char ref_path[] = "tests/model/ref/tiny-qwen3.logits.bin";
    if (!path || !model_ref_load(ref_path, &r)) return;
    bp_model *m = NULL;
    CHECK_OK(bp_model_load(path, NULL, &m));
    const int64_t V = r.n_vocab;
    float *ref = malloc((size_t)P * V * 4), *got = malloc((size_t)P * V * 4);
    if (m && ref && got) {
        force("cpu");
        CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
        run(m, BP_KIND_F16, r.tokens, false, ref, V, NULL);
        bp_vk_test_set_max_range(40 << 10);
        force("vulkan");
        traffic_view tv = {0};
        if (run(m, BP_KIND_F16, r.tokens, false, got, V, &tv)) {
            double worst = 0;
            for (int p = 0; p < P; p++) {
                double e = nmse(got + (size_t)p * V, ref + (size_t)p * V, V);
                if (!(e <= worst)) worst = e;
            }
            CHECK(worst <= 1e-7, "40 KiB bindings: worst NMSE %.3e", worst);
            CHECK(!strcmp(tv.rec.backend, "vulkan"), "40 KiB bindings: the step ran on %s (%s)", tv.rec.backend, tv.rec.cause);
            CHECK(V * 272 > (40 << 10), "the Q8_0 output weight fits one binding: the split is not exercised");
        }
        bp_vk_test_set_max_range(0);
    }
    free(ref), free(got);
    bp_model_free(m);
    model_ref_free(&r);
#endif
}

int main(void) {
    setenv("BACKPLANE_VULKAN", "1", 1); /* lavapipe is a CPU implementation: on only when forced */
    bp_backend_info bi;
    bool built = false, on = false;
    for (int i = 0; i < bp_backend_count(); i++)
        if (bp_backend_info_at(i, &bi) == BP_OK && !strcmp(bi.name, "vulkan")) built = bi.compiled, on = bi.enabled;
    if (!built) {
        BP_SKIP("the Vulkan backend is not built (BP_VULKAN=OFF or no Vulkan SDK / glslc)");
        return bp_test_finish();
    }
    if (!on) {
        BP_SKIP("no Vulkan device (install mesa-vulkan-drivers for lavapipe)");
        return bp_test_finish();
    }
    const char *archs[] = {"llama", "qwen2", "qwen3", "gemma3"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) run_arch(archs[i]);
    small_bindings();
    return bp_test_finish();
}
