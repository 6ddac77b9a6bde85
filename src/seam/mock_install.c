/* The mock backend into the dispatch order and out again: here, above the backends, because
 * inserting a slot is the seam's business (the mock itself, src/mock, sits below it). */
#include "seam/mock_install.h"

bp_status bp_mock_backend_install(const bp_mock_backend_config *cfg, int pos) {
    bp_status s = bp_mock_open(cfg);
    if (s) return s;
    s = bp_seam_test_install(bp_mock_backend_caps(), bp_mock_backend_dispatch(), pos);
    if (s) {
        bp_mock_close();
        return s;
    }
    bp_seam_test_reset_enabled();
    return BP_OK;
}

void bp_mock_backend_uninstall(void) {
    if (!bp_mock_backend_device()) return;
    bp_seam_test_uninstall();
    bp_seam_test_reset_enabled();
    bp_mock_close();
}
