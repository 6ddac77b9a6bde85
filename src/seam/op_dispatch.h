/* The seam for ops (src/ops/ops.def): the same two halves and the same rule as for matvec.
 * A backend's caps.op_kernel claims (op, kind) pairs; its dispatch.has_op_launch says what it
 * can launch; claim <=> launch is checked over op x kind x backend (tests/test_ops_seam.c); a
 * call walks the order exactly like a matvec (compiled, enabled, claims the pair), a
 * BP_LAUNCH_ERROR is logged once per cause, counted in the fallback table and the next backend
 * runs; the CPU runs every op last. */
#ifndef BP_SEAM_OP_DISPATCH_H
#define BP_SEAM_OP_DISPATCH_H

#include <stdio.h>

#include "ops/op_call.h"
#include "seam/seam_internal.h"

/* The backend's kernel name for (op, k), or NULL (no op_kernel member, or no claim). */
const char *bp_seam_op_kernel(const bp_backend_caps *caps, bp_op op, bp_kind k);

/* The first slot that would run a call of op on kinds k (K) and k2 (V; = k for other ops):
 * compiled, enabled, claiming both. -1: the CPU. The walk uses the same rule, so the route
 * report (`backplane probe`) is the path that really runs. */
int bp_seam_op_route(bp_op op, bp_kind k, bp_kind k2);

/* The CPU's implementation of every op: runs c, writes what ran to label ("CPU avx512
 * attention F16"). */
typedef bp_status (*bp_seam_op_cpu_fn)(const bp_op_call *c, char *label, size_t label_len);

/* Run c: the walk, then cpu. On success path gets what ran ("Mock attention Q8_0 (fallback
 * from ...)" / "CPU ...") and *ran_on the backend's name ("cpu", "vulkan", "mock"). */
bp_status bp_seam_op_run(const bp_op_call *c, bp_seam_op_cpu_fn cpu, char *path, size_t path_len,
                         const char **ran_on);

/* For every op and every kind of the kind table: claims (op, k) <=> has_op_launch(op, k) (when
 * d is not NULL), a claim only for a kind in the op's domain, a claim named "<op> <KIND>", a
 * launch claim with an op_launch entry. Writes up to max_bad offending pairs (op, kind) to
 * bad_op/bad_kind, one line per violation to report ("mock: attention Q5_1 claimed but
 * has_op_launch is false"); returns the number of violations. */
int bp_seam_check_op_claims(const bp_backend_caps *caps, const bp_backend_dispatch *d, bp_op *bad_op,
                            bp_kind *bad_kind, int max_bad, FILE *report);

/* Defined in dispatch.c: one fallback row/log line, shared by matvec and ops. */
void bp_seam_record_fallback(const char *backend, bp_kind k, const char *op, const char *cause, const char *to);

#endif
