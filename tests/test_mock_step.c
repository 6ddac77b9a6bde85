/* The device step code (src/gpu/gpu_step.c) on the mock device, whose step kernels are plain C
 * (src/mock/mock_step_kernels.c), so placement, the launch list, record and replay and the KV
 * hand-back run here with real numbers and under fault injection, on the tiny models:
 *
 * - every step ran on the mock, logits against the CPU reference path (scalar kernels, F32 KV)
 *   NMSE <= 1e-10 decode and batch (the batch's logits in buffers of 5 rows), one upload + one
 *   download + one submission per replayed step;
 * - a failure injected at the n-th alloc, copy, launch, sync or graph call of a decode step is a
 *   fallback the step's record names (the CPU ran it, taking the cache back from the device),
 *   and every later logit is still the reference's; under strict mode the same failure is the
 *   eval's error, naming the injected call;
 * - a device lost mid-sequence: the step falls back, and the CPU cannot take the cache back --
 *   a clean error, never wrong logits;
 * - batches of other lengths in one context: a capture with the same kernels updates the slot's
 *   graph in place (graph_update), another topology records a new one, the logits the reference's;
 * - the ledger holds nothing after the context is freed, and the guard bands are intact. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"
#include "mock/mock_backend.h"
#include "model/context_internal.h"
#include "model/model_ref.h"
#include "ops/ops_internal.h"
#include "seam/mock_install.h"

enum { P = 24, NCTX = 64 };


static bool cuda_shape; /* the step run as CUDA runs it: prefixed kernels on a created stream */
/* Submissions of a replayed decode step: the replay, and with a stream the sync the blocking
 * read-back of the logits waits on (the mock counts both, as CUDA's default count does). */
#define WANT_SUBMITS (cuda_shape ? 2u : 1u)

static void install(void) {
    bp_mock_backend_config cfg;
    memset(&cfg, 0, sizeof cfg);
    bp_kind all[64];
    int n = 0;
    for (int i = 0; i < bp_kind_table_size() && n < 64; i++)
        if (bp_op_kind_in_domain(BP_OP_JOBS, bp_kind_at(i)->kind)) all[n++] = bp_kind_at(i)->kind;
    bp_mock_backend_config_for(&cfg, all, n, true);
    const bp_kind kv[2] = {BP_KIND_F32, BP_KIND_F16};
    bp_mock_claim(&cfg, BP_OP_STEP, kv, 2);
    cfg.step_logits_rows = 5; /* a batch's logits over several buffers */
    cfg.step_cuda_shape = cuda_shape;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    bp_ledger_set_redzone(bp_mock_backend_device(), 64, true);
}

/* The CPU reference path's logits, one token at a time. */
static void reference(bp_model *m, const int32_t *tok, float *ref, int64_t V) {
    CHECK_OK(bp_set_backend_preference("cpu", BP_FORCE));
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = NCTX, cp.kv_kind = BP_KIND_F32;
    bp_context *c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    for (int p = 0; c && p < P; p++) {
        CHECK_OK(bp_context_eval(c, tok + p, 1, 1));
        if (bp_context_logits(c, 0)) memcpy(ref + (size_t)p * V, bp_context_logits(c, 0), (size_t)V * 4);
    }
    bp_context_free(c);
}

/* Decode P tokens on the mock, arming `arm` (a call kind, n) before token 8; returns the worst
 * NMSE, and in *fell whether token 8's step fell back. strict: the failing eval's status. */
static double decode(bp_model *m, const int32_t *tok, const float *ref, int64_t V, int kind, int n, bool strict,
                     bool *fell, bp_status *failed, char *msg, size_t msg_len) {
    CHECK_OK(bp_set_backend_preference("mock", BP_FORCE));
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = NCTX, cp.kv_kind = BP_KIND_F32;
    bp_context *c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    double worst = 0;
    *fell = false, *failed = BP_OK;
    for (int p = 0; c && p < P; p++) {
        if (p == 8 && kind >= 0) bp_mock_fail_nth(bp_mock_backend_device(), (bp_mock_call)kind, n, BP_E_DEVICE);
        if (p == 8 && kind == -2) bp_mock_lose_device(bp_mock_backend_device(), BP_MOCK_LAUNCH, n);
        bp_set_strict(strict && p == 8);
        bp_status s = bp_context_eval(c, tok + p, 1, 1);
        bp_set_strict(false);
        if (s) {
            *failed = s;
            snprintf(msg, msg_len, "%s", bp_last_error());
            break;
        }
        if (p == 8) *fell = c->step_rec[0].fallback_from[0] != '\0';
        if (p > 8 && !strcmp(c->step_rec[0].backend, "mock") && p == P - 1)
            CHECK(c->last_traffic[0].h2d >= 1 && c->last_traffic[0].d2h == 1, "a step after the fault moved %llu/%llu",
                  (unsigned long long)c->last_traffic[0].h2d, (unsigned long long)c->last_traffic[0].d2h);
        double e = model_nmse(bp_context_logits(c, 0), ref + (size_t)p * V, V);
        if (!(e <= worst)) worst = e;
        if (p == 3) {
            CHECK(!strcmp(c->step_rec[0].backend, "mock"), "step %d ran on %s (kind %d n %d strict %d: %s)", p, c->step_rec[0].backend, kind, n, strict, c->step_rec[0].cause);
            CHECK(c->last_traffic[0].h2d == 1 && c->last_traffic[0].d2h == 1 && c->last_traffic[0].submits == WANT_SUBMITS &&
                      !c->last_traffic[0].recorded,
                  "a replayed step moved %llu up, %llu down, %llu submissions", (unsigned long long)c->last_traffic[0].h2d,
                  (unsigned long long)c->last_traffic[0].d2h, (unsigned long long)c->last_traffic[0].submits);
        }
    }
    bp_mock_fail_nth(bp_mock_backend_device(), (bp_mock_call)(kind >= 0 ? kind : 0), 0, BP_OK);
    bp_context_free(c);
    uint64_t live = bp_ledger_live_bytes(bp_mock_backend_device());
    CHECK(live == 0, "%llu bytes live on the mock after the context was freed", (unsigned long long)live);
    CHECK(bp_ledger_scan(bp_mock_backend_device(), stderr) == 0, "a guard band was damaged");
    return worst;
}

static void run_arch(const char *arch) {
    model_ref_logits r;
    bp_model *m;
    if (!model_tiny_open(arch, &r, &m)) return;
    const int64_t V = r.n_vocab;
    float *ref = malloc((size_t)P * V * 4);
    if (!m || !ref) goto out;
    reference(m, r.tokens, ref, V);
    bool fell;
    bp_status failed;
    char msg[400];
    /* one batch of every position's logits (5 rows a buffer) against the decode reference */
    CHECK_OK(bp_set_backend_preference("mock", BP_FORCE));
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = NCTX, cp.kv_kind = BP_KIND_F32;
    bp_context *c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    if (c && !bp_context_eval(c, r.tokens, P, P)) {
        double worst = 0;
        for (int p = 0; p < P; p++) {
            double e = model_nmse(bp_context_logits(c, p), ref + (size_t)p * V, V);
            if (!(e <= worst)) worst = e;
        }
        CHECK(worst <= 1e-10 && !strcmp(c->step_rec[1].backend, "mock"), "%s batch on the mock (%s): NMSE %.3e", arch,
              c->step_rec[1].backend, worst);
    }
    bp_context_free(c);
    /* batches of 10, 7 and 6 tokens in one context: the 7's capture has the 10's kernels (its
     * logits in buffers of 5 rows and 2: GEMMs both) and updates that graph in place
     * (graph_update); the 6's last logit buffer holds one row, a matvec, so its topology differs
     * and it records a new graph. The logits are the reference's either way. */
    c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    const int len[3] = {10, 7, 6};
    const bool want_update[3] = {false, true, false};
    for (int b = 0, at = 0; c && b < 3; at += len[b], b++) {
        if (bp_context_eval(c, r.tokens + at, len[b], len[b])) {
            CHECK(false, "%s: batch %d: %s", arch, b, bp_last_error());
            break;
        }
        double worst = 0;
        for (int p = 0; p < len[b]; p++) {
            double e = model_nmse(bp_context_logits(c, p), ref + (size_t)(at + p) * V, V);
            if (!(e <= worst)) worst = e;
        }
        CHECK(worst <= 1e-10 && c->last_traffic[1].recorded && c->last_traffic[1].updated == want_update[b],
              "%s: batch of %d after %d: NMSE %.3e, recorded %d, updated in place %d (want %d)", arch, len[b], at, worst,
              c->last_traffic[1].recorded, c->last_traffic[1].updated, want_update[b]);
    }
    CHECK(c && bp_context_pos(c) == 23, "%s: three batches left %lld positions", arch, c ? (long long)bp_context_pos(c) : -1LL);
    bp_context_free(c);
    double e = decode(m, r.tokens, ref, V, -1, 0, false, &fell, &failed, msg, sizeof msg);
    CHECK(failed == BP_OK && e <= 1e-10, "%s on the mock: worst NMSE %.3e (%s)", arch, e, failed ? msg : "");
    if (getenv("BP_TEST_VERBOSE")) fprintf(stderr, "%s mock step: worst NMSE %.3e\n", arch, e);
    const int kinds[] = {BP_MOCK_ALLOC, BP_MOCK_COPY, BP_MOCK_LAUNCH, BP_MOCK_SYNC, BP_MOCK_GRAPH};
    const int nth[] = {1, 2, 7};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t j = 0; j < sizeof nth / sizeof nth[0]; j++) {
            const char *kn = bp_mock_call_name((bp_mock_call)kinds[k]);
            e = decode(m, r.tokens, ref, V, kinds[k], nth[j], false, &fell, &failed, msg, sizeof msg);
            CHECK(failed == BP_OK && e <= 1e-10, "%s, %s failure #%d: worst NMSE %.3e (%s)", arch, kn, nth[j], e,
                  failed ? msg : "");
            /* a replayed step makes one upload, one replay of many launches, one download */
            if (nth[j] == 1 && (kinds[k] == BP_MOCK_COPY || kinds[k] == BP_MOCK_LAUNCH || kinds[k] == BP_MOCK_GRAPH))
                CHECK(fell, "%s, %s failure #1: step 8 does not say it fell back", arch, kn);
            /* a step makes fewer than 7 allocs or graph calls once placed: then nothing fails */
            e = decode(m, r.tokens, ref, V, kinds[k], nth[j], true, &fell, &failed, msg, sizeof msg);
            if (failed) {
                char want[64];
                snprintf(want, sizeof want, "mock: injected %s failure", kn);
                CHECK(failed == BP_E_FALLBACK && strstr(msg, want), "%s strict, %s failure #%d: %s (%s)", arch, kn,
                      nth[j], bp_status_name(failed), msg);
            }
        }
    /* Lost at the next launch: the step falls back, and the CPU cannot take the cache back. */
    e = decode(m, r.tokens, ref, V, -2, 1, false, &fell, &failed, msg, sizeof msg);
    CHECK(failed != BP_OK && strstr(msg, "cannot continue the sequence"), "%s, device lost: %s (%s)", arch,
          bp_status_name(failed), msg);
    bp_mock_backend_uninstall();
    install();
out:
    free(ref);
    bp_model_free(m);
    model_ref_free(&r);
}

/* Phi-3 LongRoPE on the device step: the factors are frequencies, which the step's RoPE table
 * holds, so phi3-longrope-short (attn_factor 1) runs on the mock, its logits the CPU reference
 * path's, at a context of 64 (short factors) and of 257 (long); phi3-longrope's magnitude
 * (rope.scaling.attn_factor 1.26) no device kernel applies: its step is declined by that name
 * and the CPU runs it, the same logits. */
static void run_longrope(void) {
    static const char *const archs[] = {"phi3-longrope-short", "phi3-longrope-short", "phi3-longrope"};
    static const int64_t n_ctx[] = {NCTX, 257, NCTX};
    for (int i = 0; i < 3; i++) {
        model_ref_logits r;
        bp_model *m;
        if (!model_tiny_open(archs[i], &r, &m)) return;
        const int64_t V = r.n_vocab;
        float *ref = malloc((size_t)P * V * 4);
        bp_context *c = NULL;
        bp_context_params cp = bp_context_default_params();
        cp.n_ctx = n_ctx[i], cp.kv_kind = BP_KIND_F32;
        if (!m || !ref) goto next;
        /* the reference, one token at a time on the CPU, at this context */
        CHECK_OK(bp_set_backend_preference("cpu", BP_FORCE));
        CHECK_OK(bp_context_create(m, &cp, &c));
        for (int p = 0; c && p < P; p++) {
            CHECK_OK(bp_context_eval(c, r.tokens + p, 1, 1));
            if (bp_context_logits(c, 0)) memcpy(ref + (size_t)p * V, bp_context_logits(c, 0), (size_t)V * 4);
        }
        bp_context_free(c), c = NULL;
        CHECK_OK(bp_set_backend_preference("mock", BP_FORCE));
        CHECK_OK(bp_context_create(m, &cp, &c));
        double worst = 0;
        for (int p = 0; c && p < P; p++) {
            if (bp_context_eval(c, r.tokens + p, 1, 1)) {
                CHECK(false, "%s: step %d: %s", archs[i], p, bp_last_error());
                break;
            }
            double e = model_nmse(bp_context_logits(c, 0), ref + (size_t)p * V, V);
            if (!(e <= worst)) worst = e;
        }
        bp_step_report rep;
        char label[512] = "";
        if (c && !bp_context_step_report(c, false, &rep)) bp_run_record_label(&rep.record, label, sizeof label);
        const bool device = i < 2;
        CHECK(worst <= 1e-10, "%s n_ctx %lld: NMSE %.3e against the CPU reference path (%s)", archs[i],
              (long long)n_ctx[i], worst, label);
        if (device)
            CHECK(c && !strcmp(c->step_rec[0].backend, "mock"), "%s n_ctx %lld: the step ran on %s (%s)", archs[i],
                  (long long)n_ctx[i], c ? c->step_rec[0].backend : "-", label);
        else {
            /* the walk's answer for the decode program, as `backplane plan` reports it */
            char why[1024] = "";
            const int slot = c ? bp_step_route(&c->prog[0], why, sizeof why) : 0;
            CHECK(c && !strcmp(c->step_rec[0].backend, "cpu") && slot < 0 && strstr(why, "LongRoPE magnitude") &&
                      strstr(why, "rope.scaling.attn_factor"),
                  "%s: the step ran on %s, not declined by name: %s", archs[i], c ? c->step_rec[0].backend : "-", why);
            snprintf(label + strlen(label), sizeof label - strlen(label), " (%s)", why);
        }
        if (getenv("BP_TEST_VERBOSE"))
            fprintf(stderr, "%s n_ctx %lld: NMSE %.3e, %s\n", archs[i], (long long)n_ctx[i], worst, label);
    next:
        bp_context_free(c);
        free(ref);
        bp_model_free(m);
        model_ref_free(&r);
    }
}

int main(void) {
    CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
    install();
    /* BP_TEST_QUICK (valgrind, 50x slower: this test took 50 minutes there): gemma3 alone, the
     * family with every node kind (q/k norms, post-norms, sliding window, soft-cap) */
    const char *archs[] = {"gemma3", "llama", "qwen2", "qwen3"};
    const size_t n_archs = bp_test_quick() ? 1 : sizeof archs / sizeof archs[0];
    for (size_t i = 0; i < n_archs; i++) run_arch(archs[i]);
    run_longrope();
    bp_mock_backend_uninstall();
    /* CUDA's way (src/cuda/cuda_dispatch.c): "step_" kernels, 16-row GEMM tiles, two matvec rows
     * a workgroup, the capture and replay on a created stream; the same faults. */
    cuda_shape = true;
    install();
    run_arch("qwen3");
    bp_mock_backend_uninstall();
    return bp_test_finish();
}
