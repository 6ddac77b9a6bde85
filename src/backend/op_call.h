/* One op call as the seam sees it: the op (a row of ops.def), the kinds its claim is keyed on,
 * and the op's arguments, already validated by the caller (the weight API in src/seam, the op
 * layer in src/ops). A backend's launch entry point (bp_backend_dispatch.launch) receives this
 * and either runs it, says it has no kernel, or fails (a named, counted fallback); the CPU runs
 * every op. */
#ifndef BP_BACKEND_OP_CALL_H
#define BP_BACKEND_OP_CALL_H

#include "backplane.h"
#include "backend/step.h"

typedef enum bp_op {
#define BP_OP(ENUM, name, domain, doc) BP_OP_##ENUM,
#include "backend/ops.def"
#undef BP_OP
    BP_OP_COUNT
} bp_op;

/* "matvec", ..., "moe"; NULL out of range. */
const char *bp_op_name_of(bp_op op);

/* The kinds an op is claimed for (the DOMAIN column of ops.def). */
typedef enum bp_op_domain {
    BP_OP_DOMAIN_W = 0,   /* weight kinds */
    BP_OP_DOMAIN_KV = 1,  /* KV-cache kinds (kv_kinds.def) */
    BP_OP_DOMAIN_F32 = 2, /* F32 only */
} bp_op_domain;

bp_op_domain bp_op_domain_of(bp_op op);
/* Whether (op, k) is a pair a backend may claim: k is in the op's domain. */
bool bp_op_kind_in_domain(bp_op op, bp_kind k);
/* Whether k is one of kv_kinds.def's rows. */
bool bp_kv_kind_in_table(bp_kind k);

typedef struct bp_op_call {
    bp_op op;
    bp_kind kind;  /* the claim's kind: the weight kind (jobs: all jobs share it), the K cache
                      kind (attention), F32 (activation ops) */
    bp_kind kind2; /* attention: the V cache kind (a backend must claim both); else = kind */
    union {
        /* matvec (t = 1) and gemm: y[t][rows] = x[t][cols] W^T */
        struct { bp_weight *w; const float *x; int64_t t; float *y; } mm;
        struct { const float *x; int64_t t; const bp_matmul_job *jobs; int n_jobs; } jobs;
        struct {
            const bp_attn_desc *d;
            const float *q;
            int64_t t;
            const int32_t *positions;
            const bp_kv_cache *cache;
            int layer;
            float *out;
        } attn;
        struct { const bp_norm_desc *d; const float *x; int64_t t; float *y; } norm;
        struct { const bp_rope_desc *d; float *x; int64_t t; const int32_t *positions; } rope;
        /* act: y = act(x); glu: y = act(x) * up. */
        struct { bp_activation a; const float *x; const float *up; int64_t n; float *y; } act;
        struct { const float *x; int64_t t, n; float scale, softcap; const float *mask; float *y; } softmax;
        /* conv2d, conv2d_gn, conv2d_ln (the row follows p->norm). */
        struct { bp_weight *w; const bp_conv2d_params *p; const float *x; float *y; } conv;
        /* moe: y is accumulated (y += ...), so a backend must leave it untouched when it fails. */
        struct {
            bp_moe *m;
            const float *x;
            int64_t t, top_k;
            const int32_t *ids;
            const float *route_w;
            float *y;
        } moe;
        /* step: kind = kind2 = the KV cache's kind. */
        struct { const bp_step_prog *prog; bp_step_io *io; } step;
    } u;
    /* The size the rule and the cost model see (bp_op_shape below): set by the op layer for
     * every op but matvec, gemm and jobs, whose shapes come from their weights. */
    struct bp_op_shape_s { int64_t rows, cols, t; } shape;
    /* Run on the CPU without walking the backends (MoE with offload off). */
    bool cpu_only;
} bp_op_call;

/* The size of a call, all the rule (src/seam/route.c) and the cost model (src/backend/cost.c)
 * look at, so a route asked by shape and the walk over a real call decide alike. Weight ops:
 * the weight's rows x cols and the batch t (conv2d: cout x k*k*cin, t = output pixels; MoE:
 * the experts' rows x h, t = routes). Activation ops: rows 1, cols the row length, t rows.
 * Attention: rows = heads, cols = head dim x keys, t = queries. */
typedef struct bp_op_shape_s bp_op_shape;

/* The kinds call c carries, each of which a backend must claim to take it (jobs: every job's
 * weight kind; attention: K and V; MoE: gate/up and down). Writes up to max, returns the count. */
int bp_op_call_kinds(const bp_op_call *c, bp_kind *kinds, int max);
/* The kind of part i (jobs: job i's weight kind; matvec/gemm: the weight's; else the call's
 * kind, i ignored). */
bp_kind bp_op_call_kind(const bp_op_call *c, int i);
/* The call's shape (jobs: job i's; i is ignored by the other ops). */
bp_op_shape bp_op_call_shape(const bp_op_call *c, int i);
/* Jobs in the call: n_jobs for jobs, 1 for every other op. */
int bp_op_call_parts(const bp_op_call *c);

#endif
