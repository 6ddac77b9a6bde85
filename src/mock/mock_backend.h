/* The mock backend: one backend on the mock device that claims a configurable set of (op, kind)
 * pairs -- matvec, gemm and jobs as well as attention or a norm -- so every route, fallback,
 * record and report of the seam is testable without hardware. Matvec, gemm and jobs upload the
 * weights and input, launch the mock device's "gemm" kernel (the CPU reference over device
 * memory), sync and read back; every other op computes the reference given at install (the op
 * layer's, from above) into host scratch and moves it through a device buffer. Every step goes
 * through the device interface, so fault injection on the device reaches the seam's fallback.
 * Tests insert it with bp_mock_backend_install; `backplane` does with BACKPLANE_TEST_MOCK. */
#ifndef BP_MOCK_BACKEND_H
#define BP_MOCK_BACKEND_H

#include "backend/backend.h"
#include "mock/mock_device.h"

enum { BP_MOCK_MAX_KIND = 64 };

typedef struct bp_mock_backend_config {
    bool claim[BP_OP_COUNT][BP_MOCK_MAX_KIND];  /* caps.kernel claims (op, GGUF id) */
    bool launch[BP_OP_COUNT][BP_MOCK_MAX_KIND]; /* has_launch; normally equal to claim: set it
                                                   apart to build an over- or under-claiming table */
    bool misname;                               /* name claims wrongly ("<KIND> <op>", "<kind>") */
    bool no_launch_entry;                       /* dispatch table without a launch entry */
    bool probe_result;                          /* what the device probe says */
    int64_t cols_multiple;  /* matvec/gemm/jobs honour only cols % this == 0 (0: any); other
                               shapes are a launch error naming the shape */
    int64_t min_work;       /* wants() declines rows*cols*t below this (0: wants all) */
    bool graph;             /* launch by capturing a graph and replaying it */
    bool events;            /* wait for the kernel on an event instead of a stream sync */
    int fail_op;            /* 1 + a bp_op whose every launch is an error ("mock: injected launch
                               error on <op>"); 0: none */
    /* A fake device for the routing rules: with describe, the dispatch table's describe()
     * reports this class, name and cost model (the seam then turns a CPU implementation away
     * unless BACKPLANE_MOCK=1, and routes by the model instead of min_work); without it,
     * describe() says "no device" and the mock is an accelerator without a model. */
    bool describe;
    bp_device_class device_class;
    bp_cost_model cost;
    /* The result of every op but matvec/gemm/jobs (the op layer's bp_op_reference): the mock
     * sits below the op layer and cannot call it. NULL: such a launch is an error. */
    bp_status (*reference)(const bp_op_call *c);
    int64_t step_logits_rows; /* the device step keeps at most this many logit rows per buffer
                                 (0: a binding's worth), so a test can exercise the split */
    bool step_cuda_shape;     /* run the device step as CUDA does (src/cuda/cuda_dispatch.c): its
                                 kernel prefix, tiles and a created stream to capture and replay */
} bp_mock_backend_config;

/* claim = launch = true for op on each of kinds[0..n). Adds to cfg (zero it first). */
void bp_mock_claim(bp_mock_backend_config *cfg, bp_op op, const bp_kind *kinds, int n);
/* A config claiming matvec, jobs and (when gemm) gemm for each kind in kinds[0..n), with a
 * matching launch table and probe true: a GPU backend's claims. */
void bp_mock_backend_config_for(bp_mock_backend_config *cfg, const bp_kind *kinds, int n, bool gemm);
/* Claim every pair of the op table the domain allows: the mock takes a whole model. */
void bp_mock_claim_all(bp_mock_backend_config *cfg);

/* Take cfg and open the mock device (the seam's bp_mock_backend_install, src/seam/mock_install.c,
 * then inserts the tables into the dispatch order: this layer is below the seam). */
bp_status bp_mock_open(const bp_mock_backend_config *cfg);
/* Close the device (leaks in it are swept and named on stderr). */
void bp_mock_close(void);
/* The installed backend's device (NULL when none), for fault injection and ledger checks. */
bp_device *bp_mock_backend_device(void);
/* Its tables, e.g. for bp_seam_check_claims. */
const bp_backend_caps *bp_mock_backend_caps(void);
const bp_backend_dispatch *bp_mock_backend_dispatch(void);
/* Calls of its probe since install. */
int bp_mock_backend_probe_calls(void);
/* Calls it ran to completion since install. */
int bp_mock_backend_ops(void);
/* Calls it attempted (launch entry point called, failures included) since install. */
int bp_mock_backend_attempts(void);

#endif
