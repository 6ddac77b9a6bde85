/* The route report for ops: for (op, kind), what a call runs on this machine -- the first
 * enabled backend claiming the pair (seam/op_dispatch.c's rule, the walk's own), else the CPU's
 * implementation by name. `backplane probe` prints it; it cannot say "GPU" while the CPU runs. */
#include <stdio.h>

#include "ops/op_kern.h"
#include "ops/ops_internal.h"
#include "seam/op_dispatch.h"

const char *bp_op_route_label(bp_op op, bp_kind k, char *buf, size_t len) {
    int i = bp_seam_op_route(op, k, k);
    if (i >= 0) {
        const bp_seam_slot *s = bp_seam_slot_at(i);
        snprintf(buf, len, "%s %s%s%s", s->caps->display_name, bp_seam_op_kernel(s->caps, op, k),
                 s->caps->unverified ? " " : "", s->caps->unverified ? s->caps->unverified : "");
        return buf;
    }
    const bp_op_kern *kn = bp_op_kern_current();
    switch (op) {
    case BP_OP_JOBS:
        i = bp_seam_route(k); /* shape-free: a backend's cost model may still leave small shapes to the CPU */
        if (i >= 0) snprintf(buf, len, "per job through the weight seam: %s %s matvec/gemm", bp_seam_slot_at(i)->caps->display_name,
                             bp_kind_lookup(k)->name);
        else snprintf(buf, len, "CPU jobs, one submission (each kind's CPU matvec/GEMM kernel, as in the kinds table)");
        break;
    case BP_OP_ATTENTION:
        snprintf(buf, len, "CPU %s attention (head dims a multiple of %d; else the CPU reference)", kn->isa, kn->vl);
        break;
    default: snprintf(buf, len, "CPU %s %s", kn->isa, bp_op_name(op)); break;
    }
    return buf;
}
