/* The CPU's implementation of every op: the fast path where one exists, else the reference.
 * One switch over ops.def's rows (the compiler's -Wswitch names a row without a case). */
#include <stdio.h>

#include "core/error.h"
#include "cpu/cpu_jobs.h"
#include "ops/conv2d_internal.h"
#include "ops/moe_internal.h"
#include "ops/ops_internal.h"

static const char *kind_name(bp_kind k) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    return ki ? ki->name : "?";
}

bp_status bp_op_cpu(const bp_op_call *c, char *label, size_t label_len) {
    switch (c->op) {
    case BP_OP_MATVEC:
    case BP_OP_GEMM: return bp_seam_cpu_mm(c, label, label_len);
    case BP_OP_JOBS: {
        /* The record names a job's kernel (the seam names each later job's), not the submission. */
        bp_status s = bp_cpu_jobs(c->u.jobs.x, c->u.jobs.t, c->u.jobs.jobs, c->u.jobs.n_jobs, NULL, 0);
        if (!s) snprintf(label, label_len, "%s", bp_cpu_kernel_name(c->u.jobs.jobs[0].w->kind, c->u.jobs.t));
        return s;
    }
    case BP_OP_ATTENTION:
        if (bp_attention_cpu_fast_ok(c)) return bp_attention_cpu(c, label, label_len);
        snprintf(label, label_len, "CPU reference attention K %s V %s%s", kind_name(c->kind), kind_name(c->kind2),
                 c->u.attn.d->sinks ? ", sinks" : "");
        return bp_op_reference(c);
    case BP_OP_NORM:
    case BP_OP_ROPE:
    case BP_OP_ACT:
    case BP_OP_GLU:
    case BP_OP_SOFTMAX: return bp_ops_cpu_rows(c, label, label_len);
    case BP_OP_CONV2D:
    case BP_OP_CONV2D_GN:
    case BP_OP_CONV2D_LN: return bp_conv2d_cpu_op(c, label, label_len);
    case BP_OP_MOE: return bp_moe_cpu_op(c, label, label_len);
    case BP_OP_STEP: return bp_step_cpu(c, label, label_len);
    case BP_OP_COUNT: break;
    }
    return bp_fail(BP_E_UNSUPPORTED, "CPU: op %d has no implementation", (int)c->op);
}
