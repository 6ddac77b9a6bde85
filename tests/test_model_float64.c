/* The architectures added in issue 33 on their tiny random-weight models (tests/model/gen_tiny.py),
 * held to the float64 NumPy forward pass (tests/model/ref/tiny-<arch>.f64.logits.bin,
 * np_forward.py), by more routes than test_model_tiny.c, which holds them (and the dense ones) to
 * llama.cpp's logits too. qwen3moe (q/k norm, 8 experts
 * top 2, expert_feed_forward_length), llama-moe (Mixtral-style experts in a llama file, 6 top 2),
 * phi3 (fused attn_qkv in layer 0, fused gate-up ffn_up, NeoX RoPE), phi3-longrope and
 * phi3-longrope-short (LongRoPE: long and short factors at the context of 64, and both on one
 * file by its context, run_longrope_choice), mistral3 (llama's layer, NORM
 * RoPE, rope_freqs), gpt-oss (alternating sliding window, attention sinks, q/k/v/o biases, YaRN,
 * 6 MXFP4 experts top 3 with router and expert biases, the clamped SwiGLU); 32 fixed token ids,
 * every vocabulary entry:
 *
 * 1. the CPU reference kernels with an F32 KV cache: NMSE <= 1e-9 per position. The routing is
 *    inside this: a different expert for one token of one layer moves that position's logits by
 *    far more (layer 0 of qwen3moe has router rows 2 and 3 equal -- an exact tie at the top-k
 *    boundary for 6 tokens, which llama.cpp's rule gives to the lower index -- and row 6 = row 5
 *    x (1 + 1e-3), a near-tie the larger logit wins, for 6 tokens the higher index);
 * 2. the fast kernels (8-bit activations, as llama.cpp's), by a 32-token batch, one token at a
 *    time, a truncated, refilled cache and two sequences interleaved in one bp_context_decode: NMSE <= 1e-3 (the dense models' bound against
 *    llama.cpp, tests/test_model_tiny.c) and the same best id or a near-tie; and with MoE offload off
 *    (bp_set_moe_offload(false), BACKPLANE_MOE_OFFLOAD=0), whose path the MoE op's record names.
 * The file's constructed ties are checked first, so a regenerated model without them fails. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "harness.h"
#include "model/model_ref.h"

static const double NMSE_MAX = 1e-3;
static const double NMSE_EXACT = 1e-9;

static double worst_nmse(const model_ref_logits *r, const bp_context *c, int p0, int n, int *argmax_bad) {
    double worst = 0;
    for (int j = 0; j < n; j++) {
        const float *lg = bp_context_logits(c, j);
        if (!lg) return INFINITY;
        double e = model_ref_nmse(r, p0 + j, lg);
        if (!(e <= worst)) worst = e;
        if (argmax_bad) *argmax_bad += !model_ref_same_or_tie(r, p0 + j, lg);
    }
    return worst;
}

/* Layer 0's router in tiny-qwen3moe.gguf holds the constructed ties (F32 rows of n_embd). */
static void check_ties(const char *path) {
    bp_gguf *f = NULL;
    CHECK_OK(bp_gguf_open(path, &f));
    if (!f) return;
    const bp_gguf_tensor *t = bp_gguf_find_tensor(f, "blk.0.ffn_gate_inp.weight");
    CHECK(t && t->kind == BP_KIND_F32 && t->ne[1] == 8, "qwen3moe: layer 0's router is not an F32 [8][E]");
    if (t && t->kind == BP_KIND_F32 && t->ne[1] == 8) {
        const float *r = t->data;
        const int64_t E = t->ne[0];
        int same = 0, scaled = 0;
        for (int64_t i = 0; i < E; i++) {
            same += r[3 * E + i] == r[2 * E + i];
            scaled += fabs(r[6 * E + i] - r[5 * E + i] * (1 + 1e-3)) <= 1e-6 * fabs(r[5 * E + i]) + 1e-30;
        }
        CHECK(same == E, "qwen3moe: router rows 2 and 3 differ at %lld of %lld", (long long)(E - same), (long long)E);
        CHECK(scaled == E, "qwen3moe: router row 6 is not row 5 x (1 + 1e-3) at %lld of %lld", (long long)(E - scaled),
              (long long)E);
    }
    bp_gguf_close(f);
}

static bool open_ref(const char *arch, model_ref_logits *r, bp_model **m, bp_context **c, bp_kind kv) {
    const char *path = model_tiny_path(arch);
    if (!path) return false;
    char ref_path[256];
    snprintf(ref_path, sizeof ref_path, "tests/model/ref/tiny-%s.f64.logits.bin", arch);
    if (!model_ref_load(ref_path, r)) return false;
    if (!strcmp(arch, "qwen3moe")) check_ties(path);
    *m = NULL, *c = NULL;
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = 64;
    cp.kv_kind = kv;
    CHECK_OK(bp_model_load(path, NULL, m));
    if (*m) CHECK_OK(bp_context_create(*m, &cp, c));
    if (*c) return true;
    bp_model_free(*m);
    model_ref_free(r);
    return false;
}

static void run_exact(const char *arch) {
    model_ref_logits r;
    bp_model *m;
    bp_context *c;
    if (!open_ref(arch, &r, &m, &c, BP_KIND_F32)) return;
    bp_model_info info;
    CHECK_OK(bp_model_get_info(m, &info));
    CHECK(info.n_vocab == r.n_vocab && r.n_ent == r.n_vocab, "%s: vocabulary %lld, reference %d", arch,
          (long long)info.n_vocab, r.n_vocab);
    CHECK_OK(bp_context_eval(c, r.tokens, r.n_pos, r.n_pos));
    double w = worst_nmse(&r, c, 0, r.n_pos, NULL);
    CHECK(w <= NMSE_EXACT, "%s exact: worst NMSE %.3e > %.0e against float64", arch, w, NMSE_EXACT);
    fprintf(stderr, "%s exact (reference kernels): worst NMSE %.3e against float64\n", arch, w);
    bp_context_free(c);
    bp_model_free(m);
    model_ref_free(&r);
}

static void check(const char *arch, const char *route, double w, int bad) {
    CHECK(w <= NMSE_MAX, "%s %s: worst NMSE %.3e > %.0e against float64", arch, route, w, NMSE_MAX);
    CHECK(bad == 0, "%s %s: best id differs from float64's (not a near-tie) at %d positions", arch, route, bad);
    fprintf(stderr, "%s %s: worst NMSE %.3e against float64\n", arch, route, w);
}

static void run_fast(const char *arch) {
    model_ref_logits r;
    bp_model *m;
    bp_context *c;
    if (!open_ref(arch, &r, &m, &c, BP_KIND_F16)) return;
    const int P = r.n_pos;
    int bad = 0;
    CHECK_OK(bp_context_eval(c, r.tokens, P, P));
    check(arch, "batch", worst_nmse(&r, c, 0, P, &bad), bad);

    CHECK_OK(bp_context_truncate(c, 0));
    double w = 0;
    bad = 0;
    for (int p = 0; p < P; p++) {
        CHECK_OK(bp_context_eval(c, r.tokens + p, 1, 1));
        double e = worst_nmse(&r, c, p, 1, &bad);
        if (!(e <= w)) w = e;
    }
    check(arch, "decode", w, bad);

    CHECK_OK(bp_context_truncate(c, 0));
    CHECK_OK(bp_context_eval(c, r.tokens, 11, 0));
    CHECK_OK(bp_context_truncate(c, 5));
    CHECK_OK(bp_context_eval(c, r.tokens + 5, 6, 6));
    bad = 0;
    check(arch, "refill", worst_nmse(&r, c, 5, 6, &bad), bad);

    /* Two sequences interleaved in one bp_context_decode (the CPU's multi-sequence step, as the
     * server runs it): sequence 0 holds the reference's first 16 tokens, sequence 1 the next 16
     * from position 0, so each MoE call groups both sequences' tokens by expert. */
    {
        bp_context *c2 = NULL;
        bp_context_params cp = bp_context_default_params();
        cp.n_ctx = 64, cp.n_seq_max = 2;
        CHECK_OK(bp_context_create(m, &cp, &c2));
        enum { H = 16 };
        int32_t tok[2 * H], pos[2 * H], seq[2 * H];
        int8_t want[2 * H];
        for (int i = 0; i < 2 * H; i++)
            tok[i] = r.tokens[(i % 2) * H + i / 2], pos[i] = i / 2, seq[i] = i % 2, want[i] = 1;
        bp_batch bt = {.n = 2 * H, .tokens = tok, .pos = pos, .seq = seq, .logits = want};
        if (c2) CHECK_OK(bp_context_decode(c2, &bt));
        double w2 = 0;
        bad = 0;
        for (int i = 0; c2 && i < 2 * H; i += 2) {
            const float *lg = bp_context_batch_logits(c2, i);
            CHECK(lg != NULL, "%s: no logits for batch row %d", arch, i);
            if (!lg) break;
            double e = model_ref_nmse(&r, i / 2, lg);
            if (!(e <= w2)) w2 = e;
            bad += !model_ref_same_or_tie(&r, i / 2, lg);
        }
        check(arch, "two sequences interleaved", w2, bad);
        bp_context_free(c2);
    }

    /* MoE offload off: the experts on the CPU kernels, and the op's record says so */
    if (strstr(arch, "moe") || !strcmp(arch, "gpt-oss")) {
        bp_set_moe_offload(false);
        CHECK_OK(bp_context_truncate(c, 0));
        CHECK_OK(bp_context_eval(c, r.tokens, P, P));
        bad = 0;
        check(arch, "batch, MoE offload off", worst_nmse(&r, c, 0, P, &bad), bad);
        bp_run_record rec;
        CHECK_OK(bp_op_last_record("moe", &rec));
        CHECK(strstr(rec.kernel, "MoE offload off") != NULL, "%s: the MoE record does not name offload off: %s", arch,
              rec.kernel);
        bp_set_moe_offload(true);
        CHECK_OK(bp_context_truncate(c, 0));
        CHECK_OK(bp_context_eval(c, r.tokens, 2, 1));
        CHECK_OK(bp_op_last_record("moe", &rec));
        CHECK(strstr(rec.kernel, "CPU MoE") != NULL && strstr(rec.kernel, "offload off") == NULL,
              "%s: the MoE record with offload on: %s", arch, rec.kernel);
    }
    bp_context_free(c);
    bp_model_free(m);
    model_ref_free(&r);
}

/* Phi-3 LongRoPE's choice on one file (phi3-longrope-short, original context 256): a context of
 * 256 takes the short factors, one of 257 (llama.cpp rounds it to 512) the long ones; each held
 * to its own float64 reference (np_forward.py --ctx), and the two references far apart, so a
 * wrong choice could not pass. Reference kernels, F32 cache. */
static void run_longrope_choice(void) {
    const char *path = model_tiny_path("phi3-longrope-short");
    if (!path) return;
    model_ref_logits rs, rl;
    if (!model_ref_load("tests/model/ref/tiny-phi3-longrope-short.f64.logits.bin", &rs)) return;
    if (!model_ref_load("tests/model/ref/tiny-phi3-longrope-short.ctx257.f64.logits.bin", &rl)) {
        model_ref_free(&rs);
        return;
    }
    bp_model *m = NULL;
    CHECK_OK(bp_model_load(path, NULL, &m));
    for (int k = 0; m && k < 2; k++) {
        const model_ref_logits *want = k ? &rl : &rs, *other = k ? &rs : &rl;
        bp_context *c = NULL;
        bp_context_params cp = bp_context_default_params();
        cp.n_ctx = k ? 257 : 256;
        cp.kv_kind = BP_KIND_F32;
        CHECK_OK(bp_context_create(m, &cp, &c));
        if (!c) continue;
        CHECK_OK(bp_context_eval(c, want->tokens, want->n_pos, want->n_pos));
        /* the other reference's worst position (position 0 turns by nothing: the same there) */
        double w = worst_nmse(want, c, 0, want->n_pos, NULL), o = worst_nmse(other, c, 0, other->n_pos, NULL);
        CHECK(w <= NMSE_EXACT, "phi3-longrope-short n_ctx %lld (%s factors): worst NMSE %.3e > %.0e against float64",
              (long long)cp.n_ctx, k ? "long" : "short", w, NMSE_EXACT);
        CHECK(o > NMSE_MAX, "phi3-longrope-short n_ctx %lld: the other factors' reference is as near (worst %.3e)",
              (long long)cp.n_ctx, o);
        fprintf(stderr, "phi3-longrope-short n_ctx %lld (%s factors): worst NMSE %.3e against float64, the other "
                "factors' reference's worst %.3e\n", (long long)cp.n_ctx, k ? "long" : "short", w, o);
        bp_context_free(c);
    }
    bp_model_free(m);
    model_ref_free(&rs);
    model_ref_free(&rl);
}

int main(void) {
    static const char *const archs[] = {"qwen3moe", "llama-moe", "phi3", "phi3-longrope", "phi3-longrope-short",
                                        "mistral3", "gpt-oss"};
    enum { N = sizeof archs / sizeof archs[0] };
    for (int i = 0; i < N; i++) run_fast(archs[i]);
    bp_cpu_isa prev = bp_cpu_isa_current();
    CHECK_OK(bp_cpu_isa_force(BP_CPU_ISA_SCALAR));
    for (int i = 0; i < N; i++) run_exact(archs[i]);
    run_longrope_choice();
    CHECK_OK(bp_cpu_isa_force(prev));
    return bp_test_finish();
}
