/* The seam's table rules, over the whole table (not just the pairs a run happens to reach):
 * ids distinct and none is the CPU's, counts match the enum, and for every compiled backend and
 * every (op, kind) of the op table: claims <=> has_launch, a claim named as bp_claim_name says,
 * a gemm claim beside a matvec claim, a launch entry. Then proof that the guard bites: mock
 * tables that over-claim, under-claim, misname or claim a gemm without a matvec are reported --
 * exactly the pair that is wrong, nothing else -- and an over-claim planted in every real
 * backend's own table is named (its launch table answers from what the build holds). */
#include <string.h>

#include "harness.h"
#include "seam/mock_install.h"

/* The gating macro, checked directly: 1 only for a macro defined to 1. */
#define T_ONE 1
#define T_ZERO 0
#define T_EMPTY
_Static_assert(BP_IS_ONE(T_ONE) == 1, "defined to 1");
_Static_assert(BP_IS_ONE(T_ZERO) == 0, "defined to 0");
_Static_assert(BP_IS_ONE(T_UNDEFINED_MACRO) == 0, "undefined");

static void test_ids(void) {
    int rows = 0;
#define BP_BACKEND(ENUM, name, display, ...) rows++;
#include "backend/backends.def"
#undef BP_BACKEND
    CHECK(rows == BP_BACKEND_CPU, "backends.def has %d rows, the enum %d before the CPU", rows, (int)BP_BACKEND_CPU);
    CHECK(BP_BACKEND_COUNT == BP_BACKEND_CPU + 1, "the CPU is the last enum value");
    CHECK(bp_seam_slot_count() == rows, "dispatch order has %d slots, want %d", bp_seam_slot_count(), rows);
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        const bp_backend_caps *c = bp_backend_caps_of((bp_backend_id)i);
        CHECK(c != NULL, "row %d has capabilities on every build", i);
        if (!c) continue;
        CHECK(c->id == i, "%s: caps id %d at row %d", c->name, (int)c->id, i);
        CHECK(c->id != BP_BACKEND_CPU, "%s: id is not the CPU's", c->name);
        CHECK(!strcmp(c->name, bp_backend_name((bp_backend_id)i)), "%s: name matches backends.def", c->name);
        CHECK(!strcmp(c->display_name, bp_backend_display_name((bp_backend_id)i)), "%s: display name", c->name);
        char want[64];
        snprintf(want, sizeof want, "%s per-position matvec", c->display_name);
        CHECK(c->prefill_fallback_name && !strcmp(c->prefill_fallback_name, want), "%s: prefill name '%s'", c->name,
              c->prefill_fallback_name ? c->prefill_fallback_name : "(null)");
        CHECK(bp_seam_slot_at(i)->caps == c, "slot %d is row %d (order kept)", i, i);
        for (int j = 0; j < i; j++) {
            const bp_backend_caps *o = bp_backend_caps_of((bp_backend_id)j);
            CHECK(o->id != c->id && strcmp(o->name, c->name), "%s and %s distinct", o->name, c->name);
            CHECK(strcmp(bp_seam_slot_at(i)->env_name, bp_seam_slot_at(j)->env_name), "env names distinct");
        }
        bp_backend_id back;
        CHECK(bp_backend_by_name(c->name, &back) == BP_OK && back == (bp_backend_id)i, "%s: by_name", c->name);
    }
    bp_backend_id id;
    CHECK(bp_backend_by_name("cpu", &id) == BP_OK && id == BP_BACKEND_CPU, "cpu by name");
    CHECK(bp_backend_by_name("rocm", &id) == BP_E_NOT_FOUND, "unknown backend is NOT_FOUND");
    CHECK(bp_backend_name(BP_BACKEND_COUNT) == NULL, "out of range name is NULL");
    /* The expected order is the one DESIGN.md fixes. */
    CHECK(!strcmp(bp_backend_name(0), "cuda") && !strcmp(bp_backend_name(1), "metal") &&
              !strcmp(bp_backend_name(2), "vulkan") && !strcmp(bp_backend_name(3), "opencl") &&
              !strcmp(bp_backend_name(BP_BACKEND_CPU), "cpu"),
          "precedence CUDA, Metal, Vulkan, OpenCL, CPU");
}

static void test_gating(void) {
    /* Which rows are compiled is decided by BP_HAVE_<ENUM>; the registry must agree. */
    int have[] = {
#define BP_BACKEND(ENUM, name, display, ...) BP_IS_ONE(BP_HAVE_##ENUM),
#include "backend/backends.def"
#undef BP_BACKEND
    };
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        const bp_backend_dispatch *d = bp_backend_dispatch_of((bp_backend_id)i);
        CHECK(!!d == !!have[i], "%s: dispatch table %s but BP_HAVE is %d", bp_backend_name((bp_backend_id)i),
              d ? "present" : "absent", have[i]);
        if (d) CHECK(d->probe && d->has_launch && d->launch, "%s: required dispatch members set", bp_backend_name((bp_backend_id)i));
        fprintf(stderr, "note: %s %s\n", bp_backend_name((bp_backend_id)i), d ? "compiled in" : "not compiled in");
    }
}

static void test_claims_whole_table(void) {
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        const bp_backend_caps *c = bp_backend_caps_of((bp_backend_id)i);
        const bp_backend_dispatch *d = bp_backend_dispatch_of((bp_backend_id)i);
        int nbad = bp_seam_check_claims(c, d, NULL, NULL, 0, stderr);
        CHECK(nbad == 0, "%s: %d pairs break the claim rule (listed above)", c->name, nbad);
        /* The same rule spelled out here, independent of the checker. */
        for (int op = 0; op < BP_OP_COUNT; op++)
            for (int k = 0; k < bp_kind_table_size(); k++) {
                const bp_kind_info *ki = bp_kind_at(k);
                const char *kn = c->kernel((bp_op)op, ki->kind);
                if (d) CHECK(!!kn == d->has_launch((bp_op)op, ki->kind), "%s %s %s: claim %d, launch %d", c->name,
                             bp_op_name(op), ki->name, !!kn, d->has_launch((bp_op)op, ki->kind));
                char want[64];
                if (op <= BP_OP_GEMM) snprintf(want, sizeof want, "%s", ki->name);
                else snprintf(want, sizeof want, "%s %s", bp_op_name(op), ki->name);
                if (kn) CHECK(!strcmp(kn, want), "%s %s %s: kernel named '%s'", c->name, bp_op_name(op), ki->name, kn);
                if (kn && op == BP_OP_GEMM) CHECK(c->kernel(BP_OP_MATVEC, ki->kind), "%s %s: gemm without matvec", c->name, ki->name);
            }
    }
}

static void test_guard_bites(void) {
    bp_mock_backend_config cfg;
    const bp_kind ok[] = {BP_KIND_F32, BP_KIND_Q8_0, BP_KIND_Q4_K};
    bp_op bad_op[64];
    bp_kind bad[64];

    /* Installed, so the mock's tables read this config (the checker reads through them). */
    bp_mock_backend_config_for(&cfg, ok, 3, true);
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    CHECK(bp_mock_backend_caps()->kernel(BP_OP_MATVEC, BP_KIND_Q4_K) != NULL, "the mock claims Q4_K");
    CHECK(bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad_op, bad, 64, NULL) == 0,
          "a consistent mock table passes");
    bp_mock_backend_uninstall();

    cfg.launch[BP_OP_MATVEC][BP_KIND_Q4_K] = false; /* over-claim: caps says Q4_K, nothing launches it */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    FILE *f = tmpfile();
    int n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad_op, bad, 64, f);
    CHECK(n == 1 && bad_op[0] == BP_OP_MATVEC && bad[0] == BP_KIND_Q4_K, "over-claim reports exactly matvec Q4_K (n=%d)", n);
    char line[256] = "";
    rewind(f);
    CHECK(fgets(line, sizeof line, f) && strstr(line, "mock: matvec Q4_K claimed but has_launch is false"),
          "report line: %s", line);
    fclose(f);
    bp_mock_backend_uninstall();

    bp_mock_backend_config_for(&cfg, ok, 3, false);
    cfg.launch[BP_OP_MATVEC][BP_KIND_Q6_K] = true; /* under-claim: a launch the caps never admit to */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad_op, bad, 64, NULL);
    CHECK(n == 1 && bad[0] == BP_KIND_Q6_K, "under-claim reports exactly Q6_K (n=%d)", n);
    bp_mock_backend_uninstall();

    bp_mock_backend_config_for(&cfg, ok, 3, false);
    cfg.claim[BP_OP_GEMM][BP_KIND_Q5_0] = cfg.launch[BP_OP_GEMM][BP_KIND_Q5_0] = true; /* a gemm without a matvec */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad_op, bad, 64, NULL);
    CHECK(n == 1 && bad_op[0] == BP_OP_GEMM && bad[0] == BP_KIND_Q5_0, "gemm without matvec: Q5_0 (n=%d)", n);
    bp_mock_backend_uninstall();

    bp_mock_backend_config_for(&cfg, ok, 3, true);
    cfg.no_launch_entry = true; /* claims, but the dispatch table cannot launch anything */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad_op, bad, 64, NULL);
    CHECK(n == 9, "no launch entry: every one of the 9 claims named (n=%d)", n);
    bp_mock_backend_uninstall();

    bp_mock_backend_config_for(&cfg, ok, 3, true);
    cfg.misname = true; /* "Q4_K_" for matvec/gemm, "Q4_K jobs" for jobs */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad_op, bad, 64, NULL);
    CHECK(n == 9, "misnamed claims: all 9 named (n=%d)", n);
    bp_mock_backend_uninstall();
    CHECK(bp_seam_slot_count() == BP_BACKEND_CPU, "uninstall restores the order");
}

/* An over-claim planted in every real backend's own table: the guard names exactly it, because
 * each launch table answers from what the build holds (embedded SPIR-V, the OpenCL program's
 * kernel names, the CUDA kernel registry), never from the claims. A launch table that echoed
 * its caps would launch the planted pair too, and this test would fail. */
static void test_planted_overclaims(void) {
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        const bp_backend_caps *c = bp_backend_caps_of((bp_backend_id)i);
        const bp_backend_dispatch *d = bp_backend_dispatch_of((bp_backend_id)i);
        /* Plant one pair per op the backend does not claim: the first kind of its domain. */
        int planted = 0;
        bp_op pop[BP_OP_COUNT];
        bp_kind pk[BP_OP_COUNT];
        for (int op = 0; op < BP_OP_COUNT; op++)
            for (int k = 0; k < bp_kind_table_size(); k++) {
                const bp_kind kk = bp_kind_at(k)->kind;
                if (!bp_op_kind_in_domain((bp_op)op, kk) || c->kernel((bp_op)op, kk)) continue;
                if (op == BP_OP_GEMM && !c->kernel(BP_OP_MATVEC, kk)) continue; /* would also break gemm => matvec */
                bp_claim_test_plant(i, (bp_op)op, kk, true);
                pop[planted] = (bp_op)op, pk[planted] = kk, planted++;
                break;
            }
        bp_op bad_op[64];
        bp_kind bad[64];
        FILE *f = tmpfile();
        int n = bp_seam_check_claims(c, d, bad_op, bad, 64, f);
        for (int j = 0; j < planted; j++) bp_claim_test_plant(i, pop[j], pk[j], false);
        if (!d) {
            fprintf(stderr, "SKIP part: %s is not compiled in: its launch table cannot be asked\n", c->name);
            fclose(f);
            continue;
        }
        CHECK(n == planted, "%s: %d planted over-claims, the guard names %d", c->name, planted, n);
        for (int j = 0; j < planted && j < n; j++)
            CHECK(bad_op[j] == pop[j] && bad[j] == pk[j], "%s: planted %s %s, named %s %s", c->name, bp_op_name(pop[j]),
                  bp_kind_lookup(pk[j])->name, bp_op_name(bad_op[j]), bp_kind_lookup(bad[j])->name);
        char line[256] = "";
        rewind(f);
        CHECK(fgets(line, sizeof line, f) && strstr(line, "claimed but has_launch is false"), "%s: %s", c->name, line);
        fclose(f);
        CHECK(bp_seam_check_claims(c, d, NULL, NULL, 0, NULL) == 0, "%s: unplanted, the table passes again", c->name);
    }
}

int main(void) {
    test_ids();
    test_gating();
    test_claims_whole_table();
    test_guard_bites();
    test_planted_overclaims();
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty at the end");
    return bp_test_finish();
}
