/* Ops under the seam's guard. Over the whole table: for every compiled backend, op (ops.def) and
 * kind: claims (op, kind) <=> has_op_launch, claims only in the op's domain, kernels named
 * "<op> <KIND>". Then proof that the check bites (a mock that over-claims attention for Q5_1
 * is reported by name, exactly that pair), that the route report is the walk's choice, and that
 * a failed launch on attention falls back to the CPU with the right numbers, one logged line
 * naming backend, kind, op, cause and fallback, and a counted fallback in the stats; in strict
 * mode the failure is the op's error instead; a lost device disables the backend for ops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "seam/mock_install.h"
#include "ops/ops_internal.h"
#include "seam/seam_internal.h"

static void test_tables(void) {
    static const char *const want[] = {
#define BP_OP(ENUM, name, domain, doc) #name,
#include "backend/ops.def"
#undef BP_OP
    };
    CHECK(bp_op_count() == BP_OP_COUNT && bp_op_count() == (int)(sizeof want / sizeof want[0]), "op count");
    for (int i = 0; i < bp_op_count(); i++) {
        CHECK(bp_op_name(i) && !strcmp(bp_op_name(i), want[i]), "op %d named %s", i, want[i]);
        for (int j = 0; j < i; j++) CHECK(strcmp(bp_op_name(i), bp_op_name(j)), "op names distinct");
    }
    CHECK(bp_op_name(BP_OP_COUNT) == NULL && bp_op_name(-1) == NULL, "out of range op name is NULL");
    int nkv = 0;
#define BP_KV_KIND(NAME)                                                                               \
    do {                                                                                               \
        const bp_kind_info *ki = bp_kind_lookup(BP_KIND_##NAME);                                       \
        CHECK(ki && ki->can_quantize && ki->role == BP_ROLE_W, #NAME ": a weight kind with a quantizer"); \
        CHECK(bp_kv_kind_supported(BP_KIND_##NAME), #NAME ": supported");                              \
        nkv++;                                                                                         \
    } while (0);
#include "backend/kv_kinds.def"
#undef BP_KV_KIND
    int n = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) n += bp_kv_kind_supported(bp_kind_at(i)->kind);
    CHECK(n == nkv && nkv == 9, "exactly the kv_kinds.def rows are supported (%d of %d)", n, nkv);
    CHECK(bp_op_kind_in_domain(BP_OP_ATTENTION, BP_KIND_Q5_1) && !bp_op_kind_in_domain(BP_OP_ATTENTION, BP_KIND_Q4_K),
          "attention domain is the KV kinds");
    CHECK(bp_op_kind_in_domain(BP_OP_JOBS, BP_KIND_IQ2_XXS) && !bp_op_kind_in_domain(BP_OP_JOBS, BP_KIND_Q8_K) &&
              !bp_op_kind_in_domain(BP_OP_JOBS, BP_KIND_I32),
          "jobs domain is the weight kinds");
    CHECK(bp_op_kind_in_domain(BP_OP_NORM, BP_KIND_F32) && !bp_op_kind_in_domain(BP_OP_NORM, BP_KIND_F16),
          "norm domain is F32");
}

static void test_claims_whole_table(void) {
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        const bp_backend_caps *c = bp_backend_caps_of((bp_backend_id)i);
        const bp_backend_dispatch *d = bp_backend_dispatch_of((bp_backend_id)i);
        int nbad = bp_seam_check_claims(c, d, NULL, NULL, 0, stderr);
        CHECK(nbad == 0, "%s: %d (op, kind) pairs break the claim rule (listed above)", c->name, nbad);
        int claims = 0;
        for (int op = 0; op < BP_OP_COUNT; op++)
            for (int k = 0; k < bp_kind_table_size(); k++) {
                bp_kind kind = bp_kind_at(k)->kind;
                const char *kn = (c)->kernel((bp_op)op, kind);
                bool launch = d && d->has_launch((bp_op)op, kind);
                if (d) CHECK(!!kn == launch, "%s %s %s: claim %d, launch %d", c->name, bp_op_name(op),
                             bp_kind_at(k)->name, !!kn, launch);
                if (kn) CHECK(bp_op_kind_in_domain((bp_op)op, kind), "%s %s: claim in domain", c->name, kn);
                claims += !!kn;
            }
        fprintf(stderr, "note: %s claims %d (op, kind) pairs%s\n", c->name, claims, d ? "" : " (not compiled in)");
    }
}

static void test_guard_bites(void) {
    bp_mock_backend_config cfg;
    bp_op bop[16];
    bp_kind bk[16];
    const bp_kind kv[] = {BP_KIND_F16, BP_KIND_Q8_0, BP_KIND_Q5_1};

    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim(&cfg, BP_OP_ATTENTION, kv, 3);
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    CHECK(bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bop, bk, 16, NULL) == 0,
          "a consistent mock op table passes");
    bp_mock_backend_uninstall();

    cfg.launch[BP_OP_ATTENTION][BP_KIND_Q5_1] = false; /* over-claim: attention on a Q5_1 cache */
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    FILE *f = tmpfile();
    int n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bop, bk, 16, f);
    CHECK(n == 1 && bop[0] == BP_OP_ATTENTION && bk[0] == BP_KIND_Q5_1, "over-claim reports exactly attention Q5_1 (n=%d)", n);
    char line[256] = "";
    rewind(f);
    CHECK(fgets(line, sizeof line, f) && strstr(line, "mock: attention Q5_1 claimed but has_launch is false"),
          "report line: %s", line);
    fclose(f);
    bp_mock_backend_uninstall();

    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim(&cfg, BP_OP_ATTENTION, kv, 3);
    cfg.launch[BP_OP_NORM][BP_KIND_F32] = true;         /* under-claim: a launch the caps hide */
    cfg.claim[BP_OP_ATTENTION][BP_KIND_Q4_K] = true;    /* out of domain: Q4_K is no KV kind */
    cfg.launch[BP_OP_ATTENTION][BP_KIND_Q4_K] = true;
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bop, bk, 16, NULL);
    CHECK(n == 2 && bop[0] == BP_OP_ATTENTION && bk[0] == BP_KIND_Q4_K && bop[1] == BP_OP_NORM && bk[1] == BP_KIND_F32,
          "out-of-domain attention Q4_K and unclaimed norm F32 (n=%d)", n);
    bp_mock_backend_uninstall();

    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim(&cfg, BP_OP_ATTENTION, kv, 1);
    cfg.misname = true;
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bop, bk, 16, NULL);
    CHECK(n == 1 && bk[0] == BP_KIND_F16, "a kernel named \"F16 attention\" is caught (n=%d)", n);
    bp_mock_backend_uninstall();

    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim(&cfg, BP_OP_SOFTMAX, (const bp_kind[]){BP_KIND_F32}, 1);
    cfg.no_launch_entry = true;
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bop, bk, 16, NULL);
    CHECK(n == 1 && bop[0] == BP_OP_SOFTMAX, "a claim without an op_launch entry is caught (n=%d)", n);
    bp_mock_backend_uninstall();
    CHECK(bp_seam_slot_count() == BP_BACKEND_CPU, "uninstall restores the order");
}

/* A small Q8_0 cache and queries: the attention case the fallback tests run. */
typedef struct setup {
    bp_kv_cache *cache;
    float q[3 * 4 * 64];
    int32_t pos[3];
    bp_attn_desc d;
} setup;

static void make_setup(setup *s, bp_kind kk, bp_kind kv) {
    uint64_t rng = 77;
    float k[20 * 2 * 64], v[20 * 2 * 64];
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) k[i] = bp_test_randf(&rng), v[i] = bp_test_randf(&rng);
    for (size_t i = 0; i < sizeof s->q / sizeof s->q[0]; i++) s->q[i] = bp_test_randf(&rng);
    bp_kv_cache_desc cd = {.n_layers = 1, .n_kv_heads = 2, .head_dim_k = 64, .head_dim_v = 64, .capacity = 32,
                           .kind_k = kk, .kind_v = kv};
    CHECK_OK(bp_kv_cache_create(&cd, &s->cache));
    CHECK_OK(bp_kv_cache_append(s->cache, 0, k, v, 20, 0));
    s->pos[0] = 17, s->pos[1] = 18, s->pos[2] = 19;
    s->d = (bp_attn_desc){.n_heads = 4, .n_kv_heads = 2, .scale = 0.125f, .causal = true, .window = 0, .softcap = 0};
}

static FILE *logf_;
static int log_lines(void) {
    char line[512];
    int n = 0;
    rewind(logf_);
    while (fgets(line, sizeof line, logf_)) n++;
    fseek(logf_, 0, SEEK_END);
    return n;
}

static unsigned long long stat_calls(const char *op, const char *backend) {
    bp_op_stat st[64];
    int n = bp_stats_get(st, 64);
    for (int i = 0; i < n && i < 64; i++)
        if (!strcmp(st[i].op, op) && !strcmp(st[i].backend, backend)) return st[i].calls;
    return 0;
}

static void test_route_and_fallback(void) {
    bp_mock_backend_config cfg;
    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim(&cfg, BP_OP_ATTENTION, (const bp_kind[]){BP_KIND_Q8_0}, 1);
    bp_mock_claim(&cfg, BP_OP_ROPE, (const bp_kind[]){BP_KIND_F32}, 1);
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 99));
    int slot = bp_seam_slot_find("mock");
    CHECK(slot >= 0, "mock installed");
    CHECK(bp_test_route(BP_OP_ATTENTION, BP_KIND_Q8_0, BP_KIND_Q8_0) == slot, "Q8_0 attention routes to the mock");
    CHECK(bp_test_route(BP_OP_ATTENTION, BP_KIND_F16, BP_KIND_F16) == -1, "F16 attention routes to the CPU");
    CHECK(bp_test_route(BP_OP_ATTENTION, BP_KIND_Q8_0, BP_KIND_F16) == -1, "K Q8_0 / V F16 needs both claimed: CPU");
    CHECK(bp_test_route(BP_OP_NORM, BP_KIND_F32, BP_KIND_F32) == -1, "norm unclaimed: CPU");

    setup s;
    make_setup(&s, BP_KIND_Q8_0, BP_KIND_Q8_0);
    float ref[3 * 4 * 64], out[3 * 4 * 64];
    /* The reference, computed by the seam-free reference function. */
    bp_op_call rc = {.op = BP_OP_ATTENTION, .kind = BP_KIND_Q8_0, .kind2 = BP_KIND_Q8_0};
    rc.u.attn.d = &s.d, rc.u.attn.q = s.q, rc.u.attn.t = 3, rc.u.attn.positions = s.pos;
    rc.u.attn.cache = s.cache, rc.u.attn.layer = 0, rc.u.attn.out = ref;
    CHECK_OK(bp_op_reference(&rc));

    bp_fallback_reset();
    bp_stats_reset();
    logf_ = tmpfile();
    bp_seam_set_log(logf_);
    CHECK_OK(bp_attention(&s.d, s.q, 3, s.pos, s.cache, 0, out));
    CHECK(bp_mock_backend_ops() == 1, "the mock ran the attention");
    CHECK(!strcmp(bp_op_last_path("attention"), "Mock attention Q8_0"), "path: %s", bp_op_last_path("attention"));
    CHECK(!memcmp(out, ref, sizeof out), "mock result is the reference");

    /* A failed launch: alloc on the mock device fails. */
    bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_ALLOC, 1, BP_E_NOMEM);
    memset(out, 0, sizeof out);
    CHECK_OK(bp_attention(&s.d, s.q, 3, s.pos, s.cache, 0, out));
    CHECK(bp_mock_backend_ops() == 1, "the mock did not complete the second call");
    double e = bp_test_nmse(out, ref, sizeof out / sizeof out[0]);
    CHECK(e <= bp_test_tolerance(BP_KIND_Q8_0, "attention"), "fallback result NMSE %.3g vs the reference", e);
    CHECK(bp_fallback_total() == 1, "one fallback counted (%llu)", bp_fallback_total());
    bp_fallback_entry fe[4];
    int nf = bp_fallback_list(fe, 4);
    CHECK(nf == 1 && !strcmp(fe[0].backend, "mock") && !strcmp(fe[0].kind, "Q8_0") && !strcmp(fe[0].op, "attention") &&
              !strcmp(fe[0].to, "CPU") && strstr(fe[0].cause, "injected alloc failure"),
          "fallback row names backend, kind, op, cause, CPU");
    CHECK(log_lines() == 1, "one log line");
    CHECK(strstr(bp_op_last_path("attention"), "(fallback from Mock: mock: injected alloc failure)") != NULL,
          "path names the fallback: %s", bp_op_last_path("attention"));
    CHECK(stat_calls("attention", "mock") == 1 && stat_calls("attention", "cpu") == 1, "stats: one call each");

    /* The same cause again: counted, not logged again. */
    bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_ALLOC, 1, BP_E_NOMEM);
    CHECK_OK(bp_attention(&s.d, s.q, 3, s.pos, s.cache, 0, out));
    CHECK(bp_fallback_total() == 2 && log_lines() == 1, "second fallback counted, logged once");

    /* RoPE in place, the read-back copy fails: x must not be half written, the CPU result right. */
    float x[2 * 64], want[2 * 64];
    uint64_t rng = 5;
    for (int i = 0; i < 128; i++) x[i] = want[i] = bp_test_randf(&rng);
    int32_t rp[2] = {3, 1000};
    bp_rope_desc rd = {.n_heads = 1, .head_dim = 64, .n_rot = 64, .layout = BP_ROPE_NEOX, .freq_base = 10000, .freq_scale = 1};
    bp_ref_rope(&rd, want, 2, rp);
    bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_COPY, 2, BP_E_DEVICE); /* h2d ok, d2h fails */
    CHECK_OK(bp_rope(&rd, x, 2, rp));
    CHECK(bp_test_nmse(x, want, 128) <= 1e-12, "rope after a failed read-back is right (x rotated once)");
    CHECK(bp_fallback_total() == 3, "rope fallback counted");

    /* Strict mode: the failed launch is the op's error, named; nothing runs on the CPU. */
    bp_set_strict(true);
    bp_mock_fail_nth(bp_mock_backend_device(), BP_MOCK_ALLOC, 1, BP_E_NOMEM);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) out[i] = 12345.0f;
    unsigned long long before = bp_fallback_total();
    bp_status st = bp_attention(&s.d, s.q, 3, s.pos, s.cache, 0, out);
    CHECK(st == BP_E_FALLBACK && strstr(bp_last_error(), "strict mode: attention of Q8_0") && strstr(bp_last_error(), "on Mock failed") &&
              strstr(bp_last_error(), "injected alloc failure"),
          "strict: %s %s", bp_status_name(st), bp_last_error());
    CHECK(out[0] == 12345.0f && bp_fallback_total() == before, "strict: nothing ran in its place, nothing counted");
    bp_set_strict(false);

    /* A lost device: the backend is disabled, this and every later call fall back, counted. */
    bp_mock_lose_device(bp_mock_backend_device(), BP_MOCK_ALLOC, 1);
    CHECK_OK(bp_attention(&s.d, s.q, 3, s.pos, s.cache, 0, out));
    CHECK(bp_test_nmse(out, ref, sizeof out / sizeof out[0]) <= bp_test_tolerance(BP_KIND_Q8_0, "attention"),
          "after a lost device the CPU result is right");
    CHECK(bp_test_route(BP_OP_ATTENTION, BP_KIND_Q8_0, BP_KIND_Q8_0) == -1, "the lost backend no longer routes");
    unsigned long long after_loss = bp_fallback_total();
    CHECK_OK(bp_attention(&s.d, s.q, 3, s.pos, s.cache, 0, out));
    CHECK(bp_fallback_total() == after_loss + 1 && strstr(bp_op_last_path("attention"), "device"),
          "a later call is a counted fallback naming the loss: %s", bp_op_last_path("attention"));

    bp_seam_set_log(NULL);
    fclose(logf_);
    bp_kv_cache_free(s.cache);
    bp_mock_backend_uninstall();
}

/* A backend that claims the jobs op for one kind gets that kind's jobs in one call; the other
 * jobs of the same bp_matmul run on the CPU; every output is right. */
static void test_jobs_split(void) {
    bp_mock_backend_config cfg;
    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim(&cfg, BP_OP_JOBS, (const bp_kind[]){BP_KIND_Q8_0}, 1);
    cfg.probe_result = true, cfg.reference = bp_op_reference;
    CHECK_OK(bp_mock_backend_install(&cfg, 99));
    uint64_t rng = 21;
    const bp_kind kinds[3] = {BP_KIND_Q8_0, BP_KIND_Q4_K, BP_KIND_Q8_0};
    const int64_t rows[3] = {24, 16, 8}, cols = 256, t = 3;
    uint8_t *data[3];
    bp_weight *w[3] = {0};
    bp_matmul_job jobs[3];
    float x[3 * 256], y[3][3 * 24], ref[3][3 * 24];
    for (int i = 0; i < 3 * 256; i++) x[i] = bp_test_randf(&rng);
    for (int i = 0; i < 3; i++) {
        size_t bytes;
        data[i] = bp_test_make_weight(kinds[i], rows[i], cols, &rng, &bytes);
        CHECK_OK(bp_weight_create(kinds[i], data[i], bytes, rows[i], cols, &w[i]));
        CHECK_OK(bp_ref_gemm(kinds[i], data[i], bytes, rows[i], cols, x, t, ref[i]));
        jobs[i] = (bp_matmul_job){w[i], y[i]};
    }
    CHECK_OK(bp_matmul(x, t, jobs, 3));
    CHECK(bp_mock_backend_ops() == 1, "both Q8_0 jobs in one mock call (%d calls)", bp_mock_backend_ops());
    for (int i = 0; i < 3; i++) {
        double e = bp_test_nmse(y[i], ref[i], (size_t)(t * rows[i]));
        /* the mock computes the reference exactly; the CPU's Q4_K job rounds x to 8 bits */
        CHECK(i == 1 ? e <= bp_test_tolerance(kinds[i], "jobs") : e == 0, "job %d (%s): NMSE %.3g", i,
              bp_kind_lookup(kinds[i])->name, e);
    }
    for (int i = 0; i < 3; i++) bp_weight_free(w[i]), free(data[i]);
    bp_mock_backend_uninstall();
}

int main(void) {
    test_jobs_split();
    test_tables();
    test_claims_whole_table();
    test_guard_bites();
    test_route_and_fallback();
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty at the end");
    return bp_test_finish();
}
