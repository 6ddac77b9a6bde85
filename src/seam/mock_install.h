/* Tests (and `backplane` under BACKPLANE_TEST_MOCK): the mock backend in the dispatch order. */
#ifndef BP_SEAM_MOCK_INSTALL_H
#define BP_SEAM_MOCK_INSTALL_H

#include "mock/mock_backend.h"
#include "seam/seam_internal.h"

/* Open a mock device with cfg, and insert the backend "mock" at position pos of the dispatch
 * order (past the end: just before the CPU). Resets cached enable decisions. */
bp_status bp_mock_backend_install(const bp_mock_backend_config *cfg, int pos);
/* Remove it and close its device (leaks in the device are swept and named on stderr). */
void bp_mock_backend_uninstall(void);

#endif
