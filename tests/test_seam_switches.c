/* Process-wide switches: the environment gives the default, read once at first use; the setter
 * overrides it for the whole process, from any thread. */
#include <stdlib.h>

#include "harness.h"

int main(void) {
    /* Before the first use: the environment decides. */
    setenv("BACKPLANE_EXACT", "on", 1);
    CHECK(bp_exact_mode(), "BACKPLANE_EXACT=on must turn exact mode on");
    /* Read once: a later change of the environment does not flip it under running code. */
    setenv("BACKPLANE_EXACT", "0", 1);
    CHECK(bp_exact_mode(), "the environment must be read once, not per call");
    bp_set_exact_mode(false);
    CHECK(!bp_exact_mode(), "the setter must override the environment default");
    bp_set_exact_mode(true);
    CHECK(bp_exact_mode(), "the setter must turn it back on");
    return bp_test_finish();
}
