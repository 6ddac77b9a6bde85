/* BACKPLANE_TEST_MOCK=all: before the command runs, the mock backend (src/mock) goes first in
 * the dispatch order claiming every (op, kind) pair of the op table, computing with the op
 * layer's reference -- a stand-in GPU that takes a whole model, so `run`'s summary, --profile
 * and --fallbacks can be checked end to end without hardware (tests/cli_seam_mock.sh).
 * BACKPLANE_TEST_MOCK_FAIL=<op> makes every launch of that op an error (a named, counted
 * fallback; an error under --strict). For tests: the numbers are the reference's, not fast. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ops/ops_internal.h"
#include "seam/mock_install.h"

static void uninstall(void) { bp_mock_backend_uninstall(); }

int bp_cli_test_mock(void) {
    const char *v = getenv("BACKPLANE_TEST_MOCK");
    if (!v || !*v) return 0;
    if (strcmp(v, "all")) {
        fprintf(stderr, "backplane: BACKPLANE_TEST_MOCK=%s: the only value is 'all'\n", v);
        return 2;
    }
    static bp_mock_backend_config cfg;
    memset(&cfg, 0, sizeof cfg);
    bp_mock_claim_all(&cfg);
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
    fprintf(stderr, "backplane: BACKPLANE_TEST_MOCK=all: the mock backend takes every op%s%s\n",
            cfg.fail_op ? "; every launch fails for " : "", cfg.fail_op ? fail : "");
    return 0;
}
