/* The seam's table rules, over the whole table (not just the kinds a run happens to reach):
 * ids distinct and none is the CPU's, counts match the enum, and for every compiled backend and
 * every kind: claims matvec <=> has_launch, a claimed kernel is named as the kind, a claimed
 * GEMM has a matvec and an entry point. Then proof that the check bites: mock tables that
 * over-claim, under-claim or claim a GEMM without a matvec are reported -- exactly the kind
 * that is wrong, nothing else. */
#include <string.h>

#include "harness.h"
#include "mock/mock_backend.h"

/* The gating macro, checked directly: 1 only for a macro defined to 1. */
#define T_ONE 1
#define T_ZERO 0
#define T_EMPTY
_Static_assert(BP_IS_ONE(T_ONE) == 1, "defined to 1");
_Static_assert(BP_IS_ONE(T_ZERO) == 0, "defined to 0");
_Static_assert(BP_IS_ONE(T_UNDEFINED_MACRO) == 0, "undefined");

static void test_ids(void) {
    int rows = 0;
#define BP_BACKEND(ENUM, name, display) rows++;
#include "seam/backends.def"
#undef BP_BACKEND
    CHECK(rows == BP_BACKEND_CPU, "backends.def has %d rows, the enum %d before the CPU", rows, (int)BP_BACKEND_CPU);
    CHECK(BP_BACKEND_COUNT == BP_BACKEND_CPU + 1, "the CPU is the last enum value");
    CHECK(bp_seam_slot_count() == rows, "dispatch order has %d slots, want %d", bp_seam_slot_count(), rows);
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        const bp_backend_caps *c = bp_backend_caps_of((bp_backend_id)i);
        CHECK(c != NULL, "row %d has capabilities on every build", i);
        if (!c) continue;
        CHECK(c->id == (bp_backend_id)i, "%s: caps id %d at row %d", c->name, (int)c->id, i);
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
#define BP_BACKEND(ENUM, name, display) BP_IS_ONE(BP_HAVE_##ENUM),
#include "seam/backends.def"
#undef BP_BACKEND
    };
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        const bp_backend_dispatch *d = bp_backend_dispatch_of((bp_backend_id)i);
        CHECK(!!d == !!have[i], "%s: dispatch table %s but BP_HAVE is %d", bp_backend_name((bp_backend_id)i),
              d ? "present" : "absent", have[i]);
        if (d) CHECK(d->probe && d->has_launch && d->matvec, "%s: required dispatch members set", bp_backend_name((bp_backend_id)i));
        fprintf(stderr, "note: %s %s\n", bp_backend_name((bp_backend_id)i), d ? "compiled in" : "not compiled in");
    }
}

static void test_claims_whole_table(void) {
    for (int i = 0; i < BP_BACKEND_CPU; i++) {
        const bp_backend_caps *c = bp_backend_caps_of((bp_backend_id)i);
        const bp_backend_dispatch *d = bp_backend_dispatch_of((bp_backend_id)i);
        bp_kind bad[64];
        int nbad = bp_seam_check_claims(c, d, bad, 64, stderr);
        CHECK(nbad == 0, "%s: %d kinds break the claim rule (listed above)", c->name, nbad);
        /* The same rule spelled out here, independent of the checker. */
        for (int k = 0; k < bp_kind_table_size(); k++) {
            const bp_kind_info *ki = bp_kind_at(k);
            const char *kn = c->matvec_kernel(ki->kind);
            if (d) CHECK(!!kn == d->has_launch(ki->kind), "%s %s: claim %d, launch %d", c->name, ki->name, !!kn,
                         d->has_launch(ki->kind));
            if (kn) CHECK(!strcmp(kn, ki->name), "%s %s: kernel named '%s'", c->name, ki->name, kn);
            if (c->has_gemm(ki->kind)) CHECK(kn && (!d || d->gemm), "%s %s: GEMM without matvec", c->name, ki->name);
        }
    }
}

static void test_guard_bites(void) {
    bp_mock_backend_config cfg;
    const bp_kind ok[] = {BP_KIND_F32, BP_KIND_Q8_0, BP_KIND_Q4_K};
    bp_kind bad[64];

    /* Installed, so the mock's tables read this config (the checker reads through them). */
    bp_mock_backend_config_for(&cfg, ok, 3, true);
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    CHECK(bp_mock_backend_caps()->matvec_kernel(BP_KIND_Q4_K) != NULL, "the mock claims Q4_K");
    CHECK(bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad, 64, NULL) == 0,
          "a consistent mock table passes");
    bp_mock_backend_uninstall();

    cfg.launch[BP_KIND_Q4_K] = false; /* over-claim: caps says Q4_K, nothing launches it */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    FILE *f = tmpfile();
    int n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad, 64, f);
    CHECK(n == 1 && bad[0] == BP_KIND_Q4_K, "over-claim reports exactly Q4_K (n=%d, first=%d)", n, n ? (int)bad[0] : -1);
    char line[256] = "";
    rewind(f);
    CHECK(fgets(line, sizeof line, f) && strstr(line, "mock: Q4_K claims a matvec but has_launch is false"),
          "report line: %s", line);
    fclose(f);
    bp_mock_backend_uninstall();

    bp_mock_backend_config_for(&cfg, ok, 3, false);
    cfg.launch[BP_KIND_Q6_K] = true; /* under-claim: a launch the caps never admit to */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad, 64, NULL);
    CHECK(n == 1 && bad[0] == BP_KIND_Q6_K, "under-claim reports exactly Q6_K (n=%d)", n);
    bp_mock_backend_uninstall();

    bp_mock_backend_config_for(&cfg, ok, 3, false);
    cfg.gemm[BP_KIND_F32] = true; /* claims a GEMM, but the dispatch table has no gemm entry */
    cfg.gemm[BP_KIND_Q5_0] = true; /* and a GEMM with no matvec at all */
    CHECK_OK(bp_mock_backend_install(&cfg, 0));
    n = bp_seam_check_claims(bp_mock_backend_caps(), bp_mock_backend_dispatch(), bad, 64, NULL);
    CHECK(n == 2 && bad[0] == BP_KIND_F32 && bad[1] == BP_KIND_Q5_0, "GEMM claims without backing: F32, Q5_0 (n=%d)", n);
    bp_mock_backend_uninstall();
    CHECK(bp_seam_slot_count() == BP_BACKEND_CPU, "uninstall restores the order");
}

int main(void) {
    test_ids();
    test_gating();
    test_claims_whole_table();
    test_guard_bites();
    CHECK(bp_ledger_live_count(NULL) == 0, "ledger empty at the end");
    return bp_test_finish();
}
