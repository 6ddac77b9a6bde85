/* A mock op backend: a seam backend on its own mock device that claims a configurable set of
 * (op, kind) pairs and no matvec. Its op launch computes the CPU reference (src/ops) into host
 * scratch, uploads it to a device buffer and reads it back into the outputs (the read-back is
 * the last step, so a failure never leaves an in-place input half written) -- alloc and copies
 * go through the device interface, so fault injection on the device reaches the op seam's
 * fallback. Tests insert it with bp_mock_ops_install. */
#ifndef BP_MOCK_OPS_H
#define BP_MOCK_OPS_H

#include "mock/mock_backend.h"
#include "ops/op_call.h"

typedef struct bp_mock_ops_config {
    bool claim[BP_OP_COUNT][BP_MOCK_MAX_KIND];  /* caps.op_kernel claims (op, GGUF id) */
    bool launch[BP_OP_COUNT][BP_MOCK_MAX_KIND]; /* has_op_launch; normally equal to claim: set it
                                                   apart to build an over- or under-claiming table */
    bool misname;                               /* name claimed kernels "<KIND> <op>" (wrong) */
    bool no_launch_entry;                       /* dispatch table without op_launch */
} bp_mock_ops_config;

/* claim = launch = true for op on each of kinds[0..n). Adds to cfg (zero it first). */
void bp_mock_ops_claim(bp_mock_ops_config *cfg, bp_op op, const bp_kind *kinds, int n);
/* Open a mock device and insert the backend "mockops" at position pos of the order (past the
 * end: just before the CPU). One at a time, and not together with bp_mock_backend_install. */
bp_status bp_mock_ops_install(const bp_mock_ops_config *cfg, int pos);
void bp_mock_ops_uninstall(void);
bp_device *bp_mock_ops_device(void);
const bp_backend_caps *bp_mock_ops_caps(void);
const bp_backend_dispatch *bp_mock_ops_dispatch(void);
/* Op calls it ran to completion since install. */
int bp_mock_ops_runs(void);

#endif
