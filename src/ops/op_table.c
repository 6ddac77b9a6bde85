/* The op layer's side of the seam: every op call goes through the one walk (bp_seam_run) with
 * the CPU's implementation last, and the reference of every op (the oracle tests compare with). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "ops/conv2d_internal.h"
#include "ops/moe_internal.h"
#include "ops/ops_internal.h"

bool bp_kv_kind_supported(bp_kind k) { return bp_kv_kind_in_table(k); }

bp_status bp_op_run(bp_op_call *c) { return bp_seam_run(c, bp_op_cpu, NULL); }

/* One backend only (bp_conv2d_on, bp_moe_run_on; `verify`). */
bp_status bp_op_run_on(bp_op_call *c, const char *backend) { return bp_seam_run_on(c, backend, bp_op_cpu, NULL); }

bp_status bp_op_reference(const bp_op_call *c) {
    switch (c->op) {
    case BP_OP_MATVEC:
    case BP_OP_GEMM: {
        const bp_weight *w = c->u.mm.w;
        return bp_ref_gemm(w->kind, w->data, w->row_bytes * (size_t)w->rows, w->rows, w->cols, c->u.mm.x, c->u.mm.t,
                           c->u.mm.y);
    }
    case BP_OP_JOBS:
        for (int i = 0; i < c->u.jobs.n_jobs; i++) {
            const bp_weight *w = c->u.jobs.jobs[i].w;
            bp_status s = bp_ref_gemm(w->kind, w->data, w->row_bytes * (size_t)w->rows, w->rows, w->cols,
                                      c->u.jobs.x, c->u.jobs.t, c->u.jobs.jobs[i].y);
            if (s) return s;
        }
        return BP_OK;
    case BP_OP_ATTENTION:
        return bp_ref_attention(c->u.attn.d, c->u.attn.q, c->u.attn.t, c->u.attn.positions, c->u.attn.cache,
                                c->u.attn.layer, c->u.attn.out);
    case BP_OP_NORM: bp_ref_norm(c->u.norm.d, c->u.norm.x, c->u.norm.t, c->u.norm.y); return BP_OK;
    case BP_OP_ROPE: bp_ref_rope(c->u.rope.d, c->u.rope.x, c->u.rope.t, c->u.rope.positions); return BP_OK;
    case BP_OP_ACT: bp_ref_act(c->u.act.a, c->u.act.x, c->u.act.n, c->u.act.y); return BP_OK;
    case BP_OP_GLU: bp_ref_glu(c->u.act.a, c->u.act.x, c->u.act.up, c->u.act.n, c->u.act.y); return BP_OK;
    case BP_OP_SOFTMAX:
        bp_ref_softmax(c->u.softmax.x, c->u.softmax.t, c->u.softmax.n, c->u.softmax.scale, c->u.softmax.softcap,
                       c->u.softmax.mask, c->u.softmax.y);
        return BP_OK;
    case BP_OP_CONV2D:
    case BP_OP_CONV2D_GN:
    case BP_OP_CONV2D_LN: return bp_conv2d_ref(c->u.conv.w, c->u.conv.p, c->u.conv.x, c->u.conv.y);
    case BP_OP_MOE:
        return bp_moe_ref(c->u.moe.m, c->u.moe.x, c->u.moe.t, c->u.moe.top_k, c->u.moe.ids, c->u.moe.route_w,
                          c->u.moe.y);
    case BP_OP_STEP: return bp_step_cpu(c, (char[8]){0}, 8); /* its nodes' ops are the references */
    case BP_OP_COUNT: break;
    }
    return bp_fail(BP_E_UNSUPPORTED, "op %d has no reference", (int)c->op);
}
