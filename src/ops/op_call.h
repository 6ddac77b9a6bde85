/* One op call as the seam sees it: the op (a row of ops.def), the kind its claim is keyed on,
 * and the op's arguments, already validated by the op layer. A backend's op launch entry point
 * (bp_backend_dispatch.op_launch) receives this and either runs it, says it has no kernel, or
 * fails (a named, counted fallback); the CPU runs every op. */
#ifndef BP_OPS_OP_CALL_H
#define BP_OPS_OP_CALL_H

#include "backplane.h"

typedef enum bp_op {
#define BP_OP(ENUM, name, domain, doc) BP_OP_##ENUM,
#include "ops/ops.def"
#undef BP_OP
    BP_OP_COUNT
} bp_op;

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
    } u;
    /* For the stats: bytes read + written and FLOPs of this call (set by the op layer). */
    double bytes, flops;
} bp_op_call;

#endif
