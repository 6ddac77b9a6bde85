/* BACKPLANE_TEST_MOCK=all: before the command runs, the mock backend (src/mock) goes first in
 * the dispatch order claiming every (op, kind) pair of the op table, computing with the op
 * layer's reference -- a stand-in GPU that takes a whole model, so `run`'s summary, --profile
 * and --fallbacks can be checked end to end without hardware (tests/cli_seam_mock.sh).
 *   =step        the same, and the whole step too (src/gpu/gpu_step.c over the mock device's
 *                C kernels): the mock runs every op of the step as a GPU backend does
 *   =OP[,OP...]  only those ops (every kind of their domain): a model split between the mock
 *                and the CPU, for the run report (tests/cli_run_report.sh)
 * BACKPLANE_TEST_MOCK_FAIL=<op> makes every launch of that op an error (a named, counted
 * fallback; an error under --strict). BACKPLANE_TEST_MOCK_SCALE=<kernel>:<n>:<factor> (with
 * =step) scales the output of the nth launch of that step kernel in every step: an error in one
 * op's kernel at one layer, for `verify --trace` (tests/cli_verify_trace.sh). For tests: the
 * numbers are the reference's, not fast. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpu/gpu_step.h"
#include "mock/mock_step_kernels.h"
#include "ops/ops_internal.h"
#include "seam/mock_install.h"

static void uninstall(void) { bp_mock_backend_uninstall(); }

static int op_by_name(const char *name, size_t len) {
    for (int op = 0; op < bp_op_count(); op++)
        if (strlen(bp_op_name(op)) == len && !strncmp(name, bp_op_name(op), len)) return op;
    return -1;
}

/* The claims for v: "all", "step", or a list of op names. */
static int claims(const char *v, bp_mock_backend_config *cfg) {
    if (!strcmp(v, "all") || !strcmp(v, "step")) {
        bp_mock_claim_all(cfg);
        if (!strcmp(v, "step"))
            for (int i = 0; i < bp_kind_table_size(); i++)
                if (bp_gpu_step_kv_kind(bp_kind_at(i)->kind)) bp_mock_claim(cfg, BP_OP_STEP, &bp_kind_at(i)->kind, 1);
        return 0;
    }
    for (const char *p = v; *p;) {
        const size_t len = strcspn(p, ",");
        const int op = op_by_name(p, len);
        if (op < 0 || op == BP_OP_STEP) {
            fprintf(stderr, "backplane: BACKPLANE_TEST_MOCK=%s: '%.*s' is not an op (all, step, or op names: %s ...)\n",
                    v, (int)len, p, bp_op_name(0));
            return 2;
        }
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind k = bp_kind_at(i)->kind;
            if (bp_op_kind_in_domain((bp_op)op, k)) bp_mock_claim(cfg, (bp_op)op, &k, 1);
        }
        p += len + (p[len] == ',');
    }
    cfg->probe_result = true;
    return 0;
}

/* BACKPLANE_TEST_MOCK_SCALE=<kernel>:<n>:<factor>. */
static int scale(const char *v) {
    char name[32];
    int nth = 0, used = 0;
    float f = 0;
    if (sscanf(v, "%31[^:]:%d:%f%n", name, &nth, &f, &used) != 3 || v[used] || nth < 1 || !(f > 0)) {
        fprintf(stderr, "backplane: BACKPLANE_TEST_MOCK_SCALE=%s: want <kernel>:<n>:<factor> (rms_norm:3:1.01)\n", v);
        return 2;
    }
    bp_mock_step_inject(name, nth, f);
    fprintf(stderr, "backplane: BACKPLANE_TEST_MOCK_SCALE: launch %d of %s in each step scaled by %g\n", nth, name, f);
    return 0;
}

int bp_cli_test_mock(void) {
    const char *v = getenv("BACKPLANE_TEST_MOCK");
    if (!v || !*v) return 0;
    static bp_mock_backend_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int rc = claims(v, &cfg);
    if (rc) return rc;
    cfg.reference = bp_op_reference;
    const char *fail = getenv("BACKPLANE_TEST_MOCK_FAIL");
    if (fail && *fail) {
        for (int op = 0; op < bp_op_count(); op++)
            if (!strcmp(fail, bp_op_name(op))) cfg.fail_op = op + 1;
        if (!cfg.fail_op) {
            fprintf(stderr, "backplane: BACKPLANE_TEST_MOCK_FAIL=%s: no op of that name\n", fail);
            return 2;
        }
    }
    bp_status s = bp_mock_backend_install(&cfg, 0);
    if (s) return bp_cli_error("BACKPLANE_TEST_MOCK", s);
    atexit(uninstall);
    const char *sc = getenv("BACKPLANE_TEST_MOCK_SCALE");
    if (sc && *sc && (rc = scale(sc))) return rc;
    fprintf(stderr, "backplane: BACKPLANE_TEST_MOCK=%s: the mock backend takes %s%s%s\n", v,
            !strcmp(v, "all") ? "every op" : !strcmp(v, "step") ? "every op and the whole step" : "these ops",
            cfg.fail_op ? "; every launch fails for " : "", cfg.fail_op ? fail : "");
    return 0;
}
