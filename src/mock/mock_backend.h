/* The mock backend: a seam backend on the mock device, claiming a configurable set of kinds.
 * Its matvec uploads the weight and input, launches the mock device's "gemm" kernel (the CPU
 * reference over device memory), syncs and reads back -- alloc, copy, launch and sync all go
 * through the device interface, so fault injection on the device reaches the seam's fallback.
 * Tests insert it into the dispatch order with bp_mock_backend_install. */
#ifndef BP_MOCK_BACKEND_H
#define BP_MOCK_BACKEND_H

#include "mock/mock_device.h"
#include "seam/seam_internal.h"

enum { BP_MOCK_MAX_KIND = 64 };

typedef struct bp_mock_backend_config {
    bool matvec[BP_MOCK_MAX_KIND];  /* caps claims a matvec for this GGUF id */
    bool gemm[BP_MOCK_MAX_KIND];    /* caps claims a GEMM */
    bool launch[BP_MOCK_MAX_KIND];  /* has_launch; normally equal to matvec: set it apart to
                                       build an over- or under-claiming table */
    bool gemm_entry;                /* dispatch table has a gemm entry point */
    bool probe_result;              /* what the device probe says */
    int64_t cols_multiple;          /* the "kernel" honours only cols % this == 0 (0: any);
                                       other shapes are a launch error naming the shape */
    int64_t min_work;               /* wants() declines rows*cols*t below this (0: wants all) */
    /* A fake device for the routing rules (issue 17): with describe, the dispatch table's
     * describe() reports this class, name and cost model (the seam then turns a CPU
     * implementation away unless BACKPLANE_MOCK=1, and routes by the model instead of
     * min_work); without it, describe() says "no device" and the mock is an accelerator
     * without a model. */
    bool describe;
    bp_device_class device_class;
    bp_cost_model cost;
} bp_mock_backend_config;

/* A config claiming matvec (and GEMM when gemm) for each kind in kinds[0..n), with a matching
 * launch table, gemm entry when gemm, probe true. */
void bp_mock_backend_config_for(bp_mock_backend_config *cfg, const bp_kind *kinds, int n, bool gemm);

/* Open a mock device, and insert the backend "mock" at position pos of the dispatch order
 * (past the end: just before the CPU). Resets cached enable decisions. */
bp_status bp_mock_backend_install(const bp_mock_backend_config *cfg, int pos);
/* Remove it and close its device (leaks in the device are swept and named on stderr). */
void bp_mock_backend_uninstall(void);
/* The installed backend's device (NULL when none), for fault injection and ledger checks. */
bp_device *bp_mock_backend_device(void);
/* Its tables, e.g. for bp_seam_check_claims. */
const bp_backend_caps *bp_mock_backend_caps(void);
const bp_backend_dispatch *bp_mock_backend_dispatch(void);
/* Calls of its probe since install. */
int bp_mock_backend_probe_calls(void);
/* Ops it ran to completion since install. */
int bp_mock_backend_ops(void);
/* Ops it attempted (launch entry points called, failures included) since install. */
int bp_mock_backend_attempts(void);

#endif
