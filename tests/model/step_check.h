/* The whole forward step on a device backend against the CPU reference path (scalar kernels,
 * float activations) on the tiny random-weight models (tests/model/gen_tiny.py): shared by the
 * per-backend step tests (test_vulkan_step.c, test_opencl_step.c; header-only, as model_ref.h).
 *
 * step_check_arch(arch, backend, npos, kvs, bounds, nkv), for each KV kind:
 * - one npos-token batch (prefill GEMMs, every row's logits), and one token at a time (decode: the
 *   recorded step replayed); worst NMSE per position within the kind's bound, the best id equal
 *   at every position;
 * - the decode steps ran on the backend (the step's run record), with no fallback;
 * - the traffic of one replayed decode step: one upload (ids and positions), one download (the
 *   logits' bytes), one queue submission; the first step of a shape records it once;
 * and then the CPU taking over a sequence the device held (the device hands its KV cache back)
 * gives the reference logits. */
#ifndef BP_TEST_STEP_CHECK_H
#define BP_TEST_STEP_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"
#include "model/context_internal.h"
#include "model/model_ref.h"

enum { STEP_MAX_POS = 32, STEP_NCTX = 64 };

typedef struct step_traffic_view {
    bp_step_traffic first, last;
    bp_run_record rec;
} step_traffic_view;

static inline void step_force(const char *b) { CHECK_OK(bp_set_backend_preference(b, BP_FORCE)); }

/* Logits of every position for tokens[0..npos): one batch (t = npos), or one token at a time. */
static inline bool step_run(bp_model *m, bp_kind kv, const int32_t *tokens, int npos, bool batch, float *out,
                            int64_t V, step_traffic_view *tr) {
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = STEP_NCTX, cp.kv_kind = kv;
    bp_context *c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    if (!c) return false;
    bool ok = true;
    if (batch) {
        ok = bp_context_eval(c, tokens, npos, npos) == BP_OK;
        for (int p = 0; ok && p < npos; p++) memcpy(out + (size_t)p * V, bp_context_logits(c, p), (size_t)V * 4);
    } else {
        for (int p = 0; ok && p < npos; p++) {
            ok = bp_context_eval(c, tokens + p, 1, 1) == BP_OK;
            if (ok) memcpy(out + (size_t)p * V, bp_context_logits(c, 0), (size_t)V * 4);
            if (ok && tr && p == 0) tr->first = c->last_traffic[0];
            if (ok && tr && p == npos - 1) tr->last = c->last_traffic[0], tr->rec = c->step_rec[0];
        }
    }
    CHECK(ok, "eval failed: %s", bp_last_error());
    bp_context_free(c);
    return ok;
}

/* The worst NMSE over npos rows of logits, and how many rows have the reference's best id. */
static inline double step_worst(const float *got, const float *ref, int npos, int64_t V, int *same) {
    double worst = 0;
    *same = 0;
    for (int p = 0; p < npos; p++) {
        double e = model_nmse(got + (size_t)p * V, ref + (size_t)p * V, V);
        if (!(e <= worst)) worst = e;
        *same += model_argmax(got + (size_t)p * V, V) == model_argmax(ref + (size_t)p * V, V);
    }
    return worst;
}

static inline void step_check_arch(const char *arch, const char *backend, int npos, const bp_kind *kvs,
                                   const double *bound, int nkv) {
    model_ref_logits r;
    bp_model *m;
    if (npos > STEP_MAX_POS || !model_tiny_open_ref(arch, "f64.", &r, &m)) return; /* its token ids */
    const int64_t V = r.n_vocab;
    float *ref = malloc((size_t)npos * V * 4), *got = malloc((size_t)npos * V * 4);
    for (int ki = 0; ki < nkv && ref && got; ki++) {
        for (int batch = 0; batch < 2; batch++) {
            step_force("cpu");
            CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
            if (!step_run(m, kvs[ki], r.tokens, npos, batch, ref, V, NULL)) continue;
            step_force(backend);
            step_traffic_view tv = {0};
            if (!step_run(m, kvs[ki], r.tokens, npos, batch, got, V, batch ? NULL : &tv)) continue;
            int same = 0;
            const double worst = step_worst(got, ref, npos, V, &same);
            const char *route = batch ? "batch" : "decode";
            const char *kvn = bp_kind_lookup((uint32_t)kvs[ki])->name;
            CHECK(worst <= bound[ki], "%s %s %s %s KV: worst NMSE %.3e > %.0e against the CPU reference path", backend,
                  arch, route, kvn, worst, bound[ki]);
            CHECK(same == npos, "%s %s %s %s KV: best id differs at %d of %d positions", backend, arch, route, kvn,
                  npos - same, npos);
            if (getenv("BP_TEST_VERBOSE"))
                fprintf(stderr, "%s %s %s %s KV: worst NMSE %.3e\n", backend, arch, route, kvn, worst);
            if (!batch) {
                CHECK(!strcmp(tv.rec.backend, backend) && !tv.rec.fallback_from[0], "%s: the decode step ran on %s (%s)",
                      arch, tv.rec.backend, tv.rec.cause);
                CHECK(tv.first.recorded && !tv.last.recorded, "%s: the first decode step records, later ones replay",
                      arch);
                CHECK(tv.last.h2d == 1 && tv.last.d2h == 1 && tv.last.submits == 1,
                      "%s %s: one replayed decode step moved %llu uploads, %llu downloads, %llu submissions (want 1, 1, 1)",
                      backend, arch, (unsigned long long)tv.last.h2d, (unsigned long long)tv.last.d2h,
                      (unsigned long long)tv.last.submits);
                CHECK(tv.last.d2h_bytes == (uint64_t)V * 4, "%s: the decode step read back %llu bytes, the logits are %lld",
                      arch, (unsigned long long)tv.last.d2h_bytes, (long long)V * 4);
            }
        }
    }
    /* The device holds the first positions; the CPU takes the rest over. */
    const int held = npos * 5 / 8;
    if (ref && got) {
        step_force("cpu");
        CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
        step_run(m, BP_KIND_F32, r.tokens, npos, false, ref, V, NULL);
        bp_context_params cp = bp_context_default_params();
        cp.n_ctx = STEP_NCTX, cp.kv_kind = BP_KIND_F32;
        bp_context *c = NULL;
        CHECK_OK(bp_context_create(m, &cp, &c));
        step_force(backend);
        if (c) CHECK_OK(bp_context_eval(c, r.tokens, held, 0));
        step_force("cpu");
        double worst = 0;
        for (int p = held; c && p < npos; p++) {
            CHECK_OK(bp_context_eval(c, r.tokens + p, 1, 1));
            const float *lg = bp_context_logits(c, 0);
            double e = lg ? model_nmse(lg, ref + (size_t)p * V, V) : INFINITY;
            if (!(e <= worst)) worst = e;
        }
        CHECK(worst <= 1e-6, "%s %s: the CPU continuing the device's sequence: worst NMSE %.3e", backend, arch, worst);
        bp_context_free(c);
    }
    free(ref);
    free(got);
    bp_model_free(m);
    model_ref_free(&r);
}

/* Whether the backend called name is compiled in and has a device (forced on by the caller). */
static inline void step_backend_state(const char *name, bool *built, bool *on) {
    bp_backend_info bi;
    *built = *on = false;
    for (int i = 0; i < bp_backend_count(); i++)
        if (bp_backend_info_at(i, &bi) == BP_OK && !strcmp(bi.name, name)) *built = bi.compiled, *on = bi.enabled;
}

#endif
