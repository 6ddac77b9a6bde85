/* The route report for ops: for (op, kind) at a shape, what a call runs on this machine -- the
 * slot the seam's one rule picks (bp_seam_route, the walk's own), else the CPU's implementation
 * by name. `backplane probe` and bp_route_op print it; it cannot say "GPU" while the CPU runs. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "cpu/cpu.h"
#include "cpu/op_kern.h"
#include "ops/ops_internal.h"

const char *bp_op_route_label(bp_op op, bp_kind k, const bp_op_shape *s, char *buf, size_t len, bp_run_record *rec) {
    bp_run_record r;
    /* MoE offload off: the CPU runs MoE whoever claims it (src/ops/moe.c). */
    const bool cpu_only = op == BP_OP_MOE && !bp_moe_offload();
    const bp_op_shape one = {s->rows, s->cols, s->t < 1 ? 1 : s->t};
    int i = cpu_only ? -1 : bp_seam_route(op, k, k, &one, &r, NULL, 0);
    if (cpu_only) memset(&r, 0, sizeof r), r.op = (int)op, r.kind = r.kind2 = k, r.batch = one.t,
                  snprintf(r.backend, sizeof r.backend, "cpu"), snprintf(r.display, sizeof r.display, "CPU");
    if (i < 0) {
        const bp_op_kern *kn = bp_op_kern_current();
        switch (op) {
        case BP_OP_MATVEC:
        case BP_OP_GEMM:
        case BP_OP_JOBS: snprintf(r.kernel, sizeof r.kernel, "%s", bp_cpu_kernel_name(k, one.t)); break;
        case BP_OP_ATTENTION:
            snprintf(r.kernel, sizeof r.kernel, "CPU %s attention (head dims a multiple of %d; else the CPU reference)",
                     kn->isa, kn->vl);
            break;
        case BP_OP_CONV2D:
        case BP_OP_CONV2D_GN:
        case BP_OP_CONV2D_LN:
        case BP_OP_MOE: bp_conv_moe_cpu_label(op, k, r.kernel, sizeof r.kernel); break;
        case BP_OP_STEP: snprintf(r.kernel, sizeof r.kernel, "CPU, op by op (each op routed on its own)"); break;
        default: snprintf(r.kernel, sizeof r.kernel, "CPU %s %s", kn->isa, bp_op_name(op)); break;
        }
    }
    if (rec) *rec = r;
    return bp_run_record_label(&r, buf, len);
}

bp_status bp_route_op(const char *op, bp_kind k, int64_t rows, int64_t cols, int64_t batch, bp_run_record *record,
                      char *why, size_t why_len) {
    if (!record) return bp_fail(BP_E_INVAL, "bp_route_op: record is NULL");
    int o = -1;
    for (int i = 0; op && i < BP_OP_COUNT; i++)
        if (!strcmp(op, bp_op_name(i))) o = i;
    if (o < 0) return bp_fail(BP_E_NOT_FOUND, "bp_route_op: no op called '%s'", op ? op : "(null)");
    if (!bp_op_kind_in_domain((bp_op)o, k))
        return bp_fail(BP_E_KIND, "bp_route_op: %s is not a kind %s is claimed for", bp_kind_lookup((uint32_t)k)
                       ? bp_kind_lookup((uint32_t)k)->name : "(unknown)", op);
    if (rows <= 0 || cols <= 0 || batch <= 0)
        return bp_fail(BP_E_SHAPE, "bp_route_op: %lld x %lld, batch %lld: all must be positive", (long long)rows,
                       (long long)cols, (long long)batch);
    const bp_op_shape s = {rows, cols, batch};
    char label[8];
    if (why && why_len) why[0] = '\0';
    if (why && !(o == BP_OP_MOE && !bp_moe_offload())) bp_seam_route((bp_op)o, k, k, &s, NULL, why, why_len);
    bp_op_route_label((bp_op)o, k, &s, label, sizeof label, record);
    return BP_OK;
}
