/* Holes in a sequence's positions (bp_context_seq_rm of any range, a batch whose positions jump
 * forward) against independent references, on a dense (llama) and a sliding-window (gemma3:
 * window 8 on layers 0 and 2) tiny model, every KV kind:
 *
 * 1. attention over cells with a hole, each query (causal, windowed) against attention over a
 *    cache holding only the cells its position may see, the reference and the fast path;
 * 2. a tail removed, then positions that jump past it: the next-token logits of a fresh context
 *    given the same tokens at the same positions in one batch, within the batch bound of
 *    test_model_batch (the two runs split the rows into other GEMM steps), the greedy token equal;
 * 3. a middle range removed: the cells kept hold the K/V rows they held (bit for bit), their
 *    positions and ids, the sequence continues at its end; seq_cp of it and its state restored
 *    into another context continue with the same logits, bit for bit, on the CPU;
 * 4. p0 > p1, a range past the end, an unknown sequence: BP_E_INVAL, nothing changed;
 * 5. (a child process, Vulkan forced on) a prefill on the device, a middle range removed: the
 *    device hands the cells back, the next step runs on the CPU and the step report says so;
 *    the logits match a CPU-only run within the batch bound; once a truncation closes the hole
 *    the device runs the step again. Skipped loudly without a Vulkan that runs here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "model/context_internal.h"
#include "model/model_ref.h"
#include "ops/ops_internal.h"
#include "seam/seam.h"

enum { N = 20, P0 = 6, P1 = 12 };
static const double NMSE_BATCH = 1e-3, NMSE_BATCH_Q4 = 5e-3; /* test_model_batch's bounds */

/* The 4-bit caches round the two runs' slightly different keys to different steps. */
static double batch_bound(bp_kind kv) {
    return kv == BP_KIND_Q4_0 || kv == BP_KIND_Q4_1 || kv == BP_KIND_IQ4_NL ? NMSE_BATCH_Q4 : NMSE_BATCH;
}

/* ---- 1. the op: attention over cells with a hole ---------------------------------------- */

static void attention_holes(bp_kind kind) {
    enum { H = 4, HKV = 2, D = 32, CELLS = 14, T = 5 };
    static const int32_t pos[CELLS] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 18, 19};
    static const int32_t qpos[T] = {3, 9, 12, 16, 19}; /* 12: inside the hole */
    uint64_t rng = 42 + (uint64_t)kind;
    float *k = malloc(sizeof(float) * CELLS * HKV * D), *v = malloc(sizeof(float) * CELLS * HKV * D);
    float *q = malloc(sizeof(float) * T * H * D);
    for (int i = 0; i < CELLS * HKV * D; i++) k[i] = bp_test_randf(&rng), v[i] = bp_test_randf(&rng);
    for (int i = 0; i < T * H * D; i++) q[i] = bp_test_randf(&rng);
    bp_kv_cache_desc cd = {.n_layers = 1, .n_kv_heads = HKV, .head_dim_k = D, .head_dim_v = D, .capacity = 32,
                           .kind_k = kind, .kind_v = kind};
    bp_kv_cache *holed = NULL;
    CHECK_OK(bp_kv_cache_create(&cd, &holed));
    CHECK_OK(bp_kv_cache_append_pos(holed, 0, k, v, CELLS, pos));
    CHECK(bp_kv_has_holes(holed), "cells at positions 0..9, 16..19: no hole recorded");
    CHECK(bp_kv_cache_append(holed, 0, k, v, 1, CELLS) == BP_E_INVAL, "the plain append took a cache with a hole");
    const int64_t windows[] = {0, 8, 3};
    for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++) {
        bp_attn_desc d = {.n_heads = H, .n_kv_heads = HKV, .scale = 0.2f, .causal = true, .window = windows[wi]};
        float got[T][H * D], got_ref[T][H * D];
        CHECK_OK(bp_attention(&d, q, T, qpos, holed, 0, &got[0][0]));
        CHECK_OK(bp_ref_attention(&d, q, T, qpos, holed, 0, &got_ref[0][0]));
        for (int i = 0; i < T; i++) {
            /* the cells query i may see, by their positions, in a cache of their own */
            float ks[CELLS * HKV * D], vs[CELLS * HKV * D];
            int n = 0;
            for (int j = 0; j < CELLS; j++)
                if (pos[j] <= qpos[i] && (d.window == 0 || qpos[i] - pos[j] < d.window)) {
                    memcpy(ks + n * HKV * D, k + j * HKV * D, sizeof(float) * HKV * D);
                    memcpy(vs + n * HKV * D, v + j * HKV * D, sizeof(float) * HKV * D);
                    n++;
                }
            if (n == 0) { /* a query that sees no key gets zeros */
                float zero[H * D] = {0};
                CHECK(!memcmp(got[i], zero, sizeof zero) && !memcmp(got_ref[i], zero, sizeof zero),
                      "attention %s, window %lld, query at %d sees no cell: not zeros",
                      bp_kind_lookup((uint32_t)kind)->name, (long long)d.window, (int)qpos[i]);
                continue;
            }
            bp_kv_cache *sub = NULL;
            CHECK_OK(bp_kv_cache_create(&cd, &sub));
            CHECK_OK(bp_kv_cache_append(sub, 0, ks, vs, n, 0));
            bp_attn_desc all = d;
            all.window = 0;
            const int32_t last = n - 1;
            float want[H * D], want_ref[H * D];
            CHECK_OK(bp_attention(&all, q + i * H * D, 1, &last, sub, 0, want));
            CHECK_OK(bp_ref_attention(&all, q + i * H * D, 1, &last, sub, 0, want_ref));
            double e = bp_test_nmse(got[i], want, H * D), er = bp_test_nmse(got_ref[i], want_ref, H * D);
            CHECK(e < 1e-10 && er < 1e-12, "attention %s, window %lld, query at %d over %d cells: NMSE %.3e (fast), "
                  "%.3e (reference) against the cells it sees alone",
                  bp_kind_lookup((uint32_t)kind)->name, (long long)d.window, (int)qpos[i], n, e, er);
            bp_kv_cache_free(sub);
        }
    }
    /* remove cells [2, 11): the rest keep their positions and rows */
    CHECK_OK(bp_kv_cache_remove(holed, 2, 11));
    CHECK(bp_kv_cache_length(holed, 0) == 5 && bp_kv_cell_pos(holed, 1) == 1 && bp_kv_cell_pos(holed, 2) == 17 &&
              bp_kv_next_pos(holed, 5) == 20, "remove [2, 11): %lld cells, positions %lld %lld, next %lld",
          (long long)bp_kv_cache_length(holed, 0), (long long)bp_kv_cell_pos(holed, 1),
          (long long)bp_kv_cell_pos(holed, 2), (long long)bp_kv_next_pos(holed, 5));
    float after[5 * HKV * D], before[CELLS * HKV * D];
    bp_kv_cache *plain = NULL;
    CHECK_OK(bp_kv_cache_create(&cd, &plain));
    CHECK_OK(bp_kv_cache_append(plain, 0, k, v, CELLS, 0)); /* the rows as stored, no hole */
    CHECK_OK(bp_kv_cache_read(plain, 0, false, 0, CELLS, before));
    CHECK_OK(bp_kv_cache_read(holed, 0, false, 0, 5, after));
    CHECK(!memcmp(after, before, sizeof(float) * 2 * HKV * D) &&
              !memcmp(after + 2 * HKV * D, before + 11 * HKV * D, sizeof(float) * 3 * HKV * D),
          "remove: the K rows kept are not the rows stored");
    CHECK_OK(bp_kv_cache_truncate(holed, -1, 2));
    CHECK(!bp_kv_has_holes(holed), "truncated to cells at positions 0, 1: the hole is still recorded");
    bp_kv_cache_free(plain);
    bp_kv_cache_free(holed);
    free(k), free(v), free(q);
}

/* ---- 2. a tail removed, then a jump, against the gap given directly ----------------------- */

static void tail_then_jump(bp_model *m, bp_kind kv, const model_ref_logits *r, int64_t V, const char *what) {
    bp_context *x = model_ctx64(m, kv, 1), *f = model_ctx64(m, kv, 1);
    if (!x || !f) goto out;
    int32_t toks[N], pos[N];
    for (int i = 0; i < N; i++) toks[i] = r->tokens[i % r->n_pos];
    CHECK_OK(bp_context_eval(x, toks, P1, 0));    /* positions 0 .. P1 - 1 */
    CHECK_OK(bp_context_seq_rm(x, 0, P0, -1));    /* the tail [P0, P1) */
    CHECK(bp_context_seq_pos(x, 0) == P0, "%s: after the tail went, the sequence continues at %lld", what,
          (long long)bp_context_seq_pos(x, 0));
    for (int i = 0; i < N - P0; i++) pos[i] = P1 + i; /* the rest, at P1 .. */
    CHECK_OK(bp_context_decode(x, &(bp_batch){.n = N - P0, .tokens = toks + P0, .pos = pos}));
    bp_step_report rep;
    CHECK_OK(bp_context_step_report(x, true, &rep));
    CHECK(!strcmp(rep.record.backend, "cpu"), "%s: a batch with a jump ran on %s", what, rep.record.backend);
    /* the fresh context: tokens 0 .. P0 - 1 and P0 .. at positions 0 .. P0 - 1, P1 .., one batch */
    int32_t fpos[N];
    for (int i = 0; i < N; i++) fpos[i] = i < P0 ? i : P1 + i - P0;
    CHECK_OK(bp_context_decode(f, &(bp_batch){.n = N, .tokens = toks, .pos = fpos}));
    const int64_t end = P1 + N - P0;
    CHECK(bp_context_seq_pos(x, 0) == end && bp_context_seq_pos(f, 0) == end && bp_context_pos(x) == end,
          "%s: the sequences continue at %lld and %lld, want %lld", what, (long long)bp_context_seq_pos(x, 0),
          (long long)bp_context_seq_pos(f, 0), (long long)end);
    /* the next token through bp_context_eval: a sequence with a hole runs on the CPU */
    const int32_t next = r->tokens[3];
    CHECK_OK(bp_context_eval(x, &next, 1, 1));
    CHECK_OK(bp_context_eval(f, &next, 1, 1));
    const float *lx = bp_context_logits(x, 0), *lf = bp_context_logits(f, 0);
    if (lx && lf) {
        double e = model_nmse(lx, lf, V);
        CHECK(e <= batch_bound(kv) && model_argmax(lx, V) == model_argmax(lf, V),
              "%s: tail removed then a jump vs the gap given directly: NMSE %.3e (bound %.0e), greedy %d vs %d", what,
              e, batch_bound(kv), (int)model_argmax(lx, V), (int)model_argmax(lf, V));
        if (getenv("BP_TEST_VERBOSE")) fprintf(stderr, "%s: tail+jump vs gap NMSE %.3e\n", what, e);
    } else {
        CHECK(false, "%s: no logits", what);
    }
out:
    bp_context_free(x);
    bp_context_free(f);
}

/* ---- 3, 4. a middle range removed: the cells, the errors, seq_cp and state ----------------- */

/* Raw K/V rows of every layer and head of c's seq 0 cache, cells [0, n): layer, K/V, head, cell. */
static uint8_t *rows_of(const bp_kv_cache *kv, int64_t n, size_t *bytes) {
    size_t total = 0;
    for (int l = 0; l < kv->desc.n_layers; l++) total += (size_t)kv->desc.n_kv_heads * (size_t)n * (kv->row_k + kv->row_v);
    uint8_t *out = malloc(total ? total : 1), *p = out;
    for (int l = 0; l < kv->desc.n_layers; l++)
        for (int w = 0; w < 2; w++)
            for (int h = 0; h < kv->desc.n_kv_heads; h++) {
                const size_t row = w ? kv->row_v : kv->row_k;
                const uint8_t *src = (w ? kv->layers[l].v : kv->layers[l].k) + (size_t)h * (size_t)kv->layers[l].cap * row;
                memcpy(p, src, (size_t)n * row);
                p += (size_t)n * row;
            }
    *bytes = total;
    return out;
}

static void middle(bp_model *m, bp_kind kv, const model_ref_logits *r, int64_t V, const char *what) {
    bp_context *x = model_ctx64(m, kv, 2), *y = model_ctx64(m, kv, 2);
    if (!x || !y) goto out;
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = r->tokens[(i * 7) % r->n_pos];
    CHECK_OK(bp_context_eval(x, toks, N, 1));
    size_t nb_all, nb_kept;
    uint8_t *all = rows_of(x->kv, N, &nb_all);
    CHECK_OK(bp_context_seq_rm(x, 0, P0, P1));
    const int64_t kept = N - (P1 - P0);
    int64_t n_ids = 0;
    const int32_t *ids = bp_context_seq_tokens(x, 0, &n_ids);
    CHECK(bp_context_seq_pos(x, 0) == N && n_ids == kept, "%s: after [%d, %d) went: continues at %lld, %lld ids",
          what, P0, P1, (long long)bp_context_seq_pos(x, 0), (long long)n_ids);
    bool ok = n_ids == kept;
    for (int64_t i = 0; ok && i < kept; i++) {
        const int64_t p = i < P0 ? i : i + (P1 - P0);
        ok = ids[i] == toks[p] && bp_context_seq_token_pos(x, 0, i) == p;
    }
    CHECK(ok, "%s: the ids and positions kept are not tokens 0..%d, %d..%d", what, P0 - 1, P1, N - 1);
    /* every kept cell's K and V rows, as they were (the expected rows cut out of the saved ones) */
    uint8_t *kept_rows = rows_of(x->kv, kept, &nb_kept), *want = malloc(nb_kept);
    const uint8_t *s = all;
    uint8_t *d = want;
    for (int l = 0; l < x->kv->desc.n_layers; l++)
        for (int w = 0; w < 2; w++)
            for (int h = 0; h < x->kv->desc.n_kv_heads; h++) {
                const size_t row = w ? x->kv->row_v : x->kv->row_k;
                memcpy(d, s, P0 * row);
                memcpy(d + P0 * row, s + P1 * row, (size_t)(N - P1) * row);
                s += N * row, d += (size_t)kept * row;
            }
    CHECK(!memcmp(kept_rows, want, nb_kept), "%s: the K/V rows kept after a middle removal are not the rows before",
          what);
    free(all), free(kept_rows), free(want);

    /* 4: refused ranges change nothing */
    struct {
        int32_t seq;
        int64_t p0, p1;
    } bad[] = {{0, 8, 4}, {0, 0, N + 1}, {0, N + 3, -1}, {2, 0, 1}, {-1, 0, -1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bp_status st = bp_context_seq_rm(x, bad[i].seq, bad[i].p0, bad[i].p1);
        CHECK(st == BP_E_INVAL && *bp_last_error(), "%s: seq_rm(%d, %lld, %lld) -> %s: %s", what, (int)bad[i].seq,
              (long long)bad[i].p0, (long long)bad[i].p1, bp_status_name(st), bp_last_error());
    }
    bp_context_seq_tokens(x, 0, &n_ids);
    CHECK(bp_context_seq_pos(x, 0) == N && n_ids == kept, "%s: a refused seq_rm changed the sequence", what);
    CHECK_OK(bp_context_seq_rm(x, 0, P0 + 1, P1 - 1)); /* inside the hole: nothing there */
    bp_context_seq_tokens(x, 0, &n_ids);
    CHECK(n_ids == kept, "%s: a range inside the hole removed %lld tokens", what, (long long)(kept - n_ids));

    /* seq_cp of it, and its state in another context, continue as it does */
    size_t n = bp_context_seq_state_size(x, 0), len = 0;
    void *st = malloc(n);
    CHECK_OK(bp_context_seq_state_get(x, 0, st, n, &len));
    CHECK_OK(bp_context_seq_state_set(y, 1, st, len));
    free(st);
    CHECK_OK(bp_context_seq_cp(x, 0, 1, -1));
    CHECK(bp_context_seq_pos(x, 1) == N && bp_context_seq_pos(y, 1) == N, "%s: copy / state continue at %lld / %lld",
          what, (long long)bp_context_seq_pos(x, 1), (long long)bp_context_seq_pos(y, 1));
    const int32_t next = r->tokens[5];
    float *l0 = malloc((size_t)V * sizeof(float));
    CHECK_OK(bp_context_eval(x, &next, 1, 1));
    bp_step_report rep;
    CHECK_OK(bp_context_step_report(x, false, &rep));
    CHECK(!strcmp(rep.record.backend, "cpu"), "%s: a sequence with a hole ran on %s", what, rep.record.backend);
    if (bp_context_logits(x, 0)) memcpy(l0, bp_context_logits(x, 0), (size_t)V * sizeof(float));
    const int32_t one = 1;
    CHECK_OK(bp_context_decode(x, &(bp_batch){.n = 1, .tokens = &next, .seq = &one}));
    const float *lc = bp_context_batch_logits(x, 0);
    CHECK_OK(bp_context_decode(y, &(bp_batch){.n = 1, .tokens = &next, .seq = &one}));
    const float *ls = bp_context_batch_logits(y, 0);
    CHECK(lc && !memcmp(lc, l0, (size_t)V * sizeof(float)), "%s: seq_cp of a sequence with a hole: other logits", what);
    CHECK(ls && !memcmp(ls, l0, (size_t)V * sizeof(float)), "%s: its state restored: other logits", what);
    /* the tail after the hole goes: the hole closes, the sequence continues at P0 */
    CHECK_OK(bp_context_truncate(x, P1 - 2));
    CHECK(bp_context_pos(x) == P0 && !bp_seq_holed(x, 0), "%s: truncated below the hole: continues at %lld", what,
          (long long)bp_context_pos(x));
    free(l0);
out:
    bp_context_free(x);
    bp_context_free(y);
}

/* ---- 5. a device step: the hole goes back to the CPU -------------------------------------- */

static void device_holes(void) {
    model_ref_logits r;
    bp_model *m;
    if (!model_tiny_open("llama", &r, &m)) return;
    const int64_t V = r.n_vocab;
    bp_context *dv = model_ctx64(m, BP_KIND_F16, 1), *cpu = model_ctx64(m, BP_KIND_F16, 1);
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = r.tokens[(i * 3) % r.n_pos];
    bp_step_report rep;
    CHECK_OK(bp_context_eval(dv, toks, N, 1));
    if (bp_context_step_report(dv, true, &rep) || strcmp(rep.record.backend, "vulkan")) {
        BP_SKIP("holes on a device: the prefill ran on %s, not Vulkan (BACKPLANE_VULKAN forced on)",
                rep.record.backend[0] ? rep.record.backend : "nothing");
        goto out;
    }
    /* the CPU's run of the same: a decode batch that wants the first row's logits too */
    int8_t want[N] = {[0] = 1, [N - 1] = 1};
    CHECK_OK(bp_context_decode(cpu, &(bp_batch){.n = N, .tokens = toks, .logits = want}));
    CHECK_OK(bp_context_seq_rm(dv, 0, P0, P1));
    CHECK_OK(bp_context_seq_rm(cpu, 0, P0, P1));
    const int32_t next = r.tokens[1];
    CHECK_OK(bp_context_eval(dv, &next, 1, 1));
    CHECK_OK(bp_context_step_report(dv, false, &rep));
    CHECK(!strcmp(rep.record.backend, "cpu"), "device: the step after a middle removal ran on %s, want the CPU",
          rep.record.backend);
    CHECK_OK(bp_context_eval(cpu, &next, 1, 1));
    const float *a = bp_context_logits(dv, 0), *b = bp_context_logits(cpu, 0);
    double e = a && b ? model_nmse(a, b, V) : 1;
    CHECK(e <= NMSE_BATCH, "device: after the hand-back, NMSE %.3e against the CPU's run (bound %.0e)", e, NMSE_BATCH);
    if (getenv("BP_TEST_VERBOSE")) fprintf(stderr, "device hand-back vs CPU NMSE %.3e\n", e);
    /* the hole closed (truncated to P0): the device takes the step again */
    CHECK_OK(bp_context_truncate(dv, P0));
    CHECK_OK(bp_context_truncate(cpu, P0));
    CHECK_OK(bp_context_eval(dv, &next, 1, 1));
    CHECK_OK(bp_context_step_report(dv, false, &rep));
    CHECK(!strcmp(rep.record.backend, "vulkan"), "device: without the hole the step ran on %s", rep.record.backend);
out:
    bp_context_free(dv);
    bp_context_free(cpu);
    bp_model_free(m);
    model_ref_free(&r);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--vulkan")) {
        setenv("BACKPLANE_VULKAN", "1", 0); /* an explicit 0 (valgrind) wins, and the part skips */
        device_holes();
        return bp_test_finish();
    }
    bp_kind kinds[16];
    double bounds[16];
    const int nk = bp_context_kv_kinds(kinds, bounds, 16);
    for (int k = 0; k < nk; k++) attention_holes(kinds[k]);
    static const char *const archs[] = {"llama", "gemma3"};
    for (int a = 0; a < 2; a++) {
        model_ref_logits r;
        bp_model *m;
        if (!model_tiny_open(archs[a], &r, &m)) continue;
        for (int k = 0; k < nk && (!bp_test_quick() || k < 2); k++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s cache", archs[a], bp_kind_lookup((uint32_t)kinds[k])->name);
            tail_then_jump(m, kinds[k], &r, r.n_vocab, what);
            middle(m, kinds[k], &r, r.n_vocab, what);
        }
        bp_model_free(m);
        model_ref_free(&r);
    }
    /* part 5 in a child: a backend's switch is decided once per process */
    if (bp_backend_dispatch_of(BP_BACKEND_VULKAN)) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "'%s' --vulkan", argv[0]);
        int rc = system(cmd);
        rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
        if (rc == 77) BP_SKIP("holes on a device: the Vulkan part skipped (its reason above)");
        else CHECK(rc == 0, "the Vulkan part failed (exit %d)", rc);
    } else {
        BP_SKIP("holes on a device: no Vulkan backend in this build");
    }
    return bp_test_finish();
}
