/* ops.def and kv_kinds.def expanded: names, domains, the run path every op takes (seam walk,
 * stats, last path), and the per-op switch to the CPU implementation and the reference. */
#include <string.h>

#include "core/error.h"
#include "kinds_internal.h"
#include "ops/ops_internal.h"
#include "seam/op_dispatch.h"

static const char *const names[BP_OP_COUNT] = {
#define BP_OP(ENUM, name, domain, doc) #name,
#include "ops/ops.def"
#undef BP_OP
};

static const bp_op_domain domains[BP_OP_COUNT] = {
#define BP_OP(ENUM, name, domain, doc) BP_OP_DOMAIN_##domain,
#include "ops/ops.def"
#undef BP_OP
};

int bp_op_count(void) { return BP_OP_COUNT; }
const char *bp_op_name(int op) { return (unsigned)op < BP_OP_COUNT ? names[op] : NULL; }
bp_op_domain bp_op_domain_of(bp_op op) { return (unsigned)op < BP_OP_COUNT ? domains[op] : BP_OP_DOMAIN_F32; }

bool bp_kv_kind_in_table(bp_kind k) {
    switch (k) {
#define BP_KV_KIND(NAME) case BP_KIND_##NAME:
#include "ops/kv_kinds.def"
#undef BP_KV_KIND
        return true;
    default: return false;
    }
}

bool bp_kv_kind_supported(bp_kind k) { return bp_kv_kind_in_table(k); }

bool bp_op_kind_in_domain(bp_op op, bp_kind k) {
    if ((unsigned)op >= BP_OP_COUNT) return false;
    switch (domains[op]) {
    case BP_OP_DOMAIN_W: {
        const bp_kind_traits *kt = bp_kind_traits_of(k);
        return kt && kt->info.role == BP_ROLE_W;
    }
    case BP_OP_DOMAIN_KV: return bp_kv_kind_in_table(k);
    case BP_OP_DOMAIN_F32: return k == BP_KIND_F32;
    }
    return false;
}

/* ---- last path, per thread ------------------------------------------------------------------ */

static _Thread_local char last_path[BP_OP_COUNT][160];

const char *bp_op_last_path(const char *op) {
    for (int i = 0; op && i < BP_OP_COUNT; i++)
        if (!strcmp(op, names[i])) return last_path[i];
    return "";
}

bp_status bp_op_run(bp_op_call *c) {
    double t0 = bp_ops_now();
    const char *on = "cpu";
    char path[sizeof last_path[0]];
    bp_status s = bp_seam_op_run(c, bp_op_cpu, path, sizeof path, &on);
    if (s) return s;
    bp_stats_add(c->op, on, bp_ops_now() - t0, c->bytes, c->flops);
    memcpy(last_path[c->op], path, sizeof path);
    return BP_OK;
}

bp_status bp_op_reference(const bp_op_call *c) {
    switch (c->op) {
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
    case BP_OP_COUNT: break;
    }
    return bp_fail(BP_E_UNSUPPORTED, "op %d has no reference", (int)c->op);
}
