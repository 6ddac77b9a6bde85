/* ops.def and kv_kinds.def expanded: op names and domains, the kinds and shape of a call, and
 * the name a claim must carry. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "kinds/kinds_internal.h"

static const char *const names[BP_OP_COUNT] = {
#define BP_OP(ENUM, name, domain, doc) #name,
#include "backend/ops.def"
#undef BP_OP
};

static const bp_op_domain domains[BP_OP_COUNT] = {
#define BP_OP(ENUM, name, domain, doc) BP_OP_DOMAIN_##domain,
#include "backend/ops.def"
#undef BP_OP
};

const char *bp_op_name_of(bp_op op) { return (unsigned)op < BP_OP_COUNT ? names[op] : NULL; }
int bp_op_count(void) { return BP_OP_COUNT; }
const char *bp_op_name(int op) { return bp_op_name_of((bp_op)op); }
bp_op_domain bp_op_domain_of(bp_op op) { return (unsigned)op < BP_OP_COUNT ? domains[op] : BP_OP_DOMAIN_F32; }

bool bp_kv_kind_in_table(bp_kind k) {
    switch (k) {
#define BP_KV_KIND(NAME) case BP_KIND_##NAME:
#include "backend/kv_kinds.def"
#undef BP_KV_KIND
        return true;
    default: return false;
    }
}

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

const char *bp_claim_name(bp_op op, bp_kind k, char *buf, size_t len) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    const char *kn = ki ? ki->name : "?";
    if (op == BP_OP_MATVEC || op == BP_OP_GEMM) snprintf(buf, len, "%s", kn);
    else snprintf(buf, len, "%s %s", bp_op_name_of(op) ? bp_op_name_of(op) : "?", kn);
    return buf;
}

int bp_op_call_parts(const bp_op_call *c) { return c->op == BP_OP_JOBS ? c->u.jobs.n_jobs : 1; }

int bp_op_call_kinds(const bp_op_call *c, bp_kind *kinds, int max) {
    int n = 0;
    for (int i = 0; i < bp_op_call_parts(c); i++) {
        const bp_kind k = bp_op_call_kind(c, i);
        int j = 0;
        while (j < n && kinds[j] != k) j++;
        if (j == n && n < max) kinds[n++] = k;
    }
    if ((c->op == BP_OP_ATTENTION || c->op == BP_OP_MOE || c->op == BP_OP_STEP) && c->kind2 != c->kind && n < max)
        kinds[n++] = c->kind2;
    return n;
}

const bp_weight *bp_step_next_weight(const bp_step_prog *p, int *it) {
    while (p) {
        const int i = *it / 4 - 1, j = *it % 4; /* node i (-1: the program's embedding), its job j */
        if (i >= p->n_nodes) return NULL;
        const bp_step_node *nd = i >= 0 ? &p->nodes[i] : NULL;
        const int m = !nd ? 1 : nd->kind == BP_STEP_MATMUL ? nd->n_jobs : nd->kind == BP_STEP_EMBED ? 1 : 0;
        if (j >= m) {
            *it = (i + 2) * 4;
            continue;
        }
        (*it)++;
        const bp_weight *w = !nd ? p->embed : nd->kind == BP_STEP_EMBED ? nd->w : nd->job[j].w;
        if (w) return w;
    }
    return NULL;
}

void bp_step_split(const bp_step_prog *p, int n_dev, bp_step_prog *first, bp_step_prog *last) {
    const int l0 = p->n_layers - n_dev;
    int cut = 0;
    while (cut < p->n_nodes && p->nodes[cut].layer < l0) cut++; /* the embedding's layer is -1 */
    *first = *p, *last = *p;
    first->cap = last->cap = 0; /* views: the nodes are p's */
    first->n_nodes = cut, first->n_out = 0, first->n_layers = l0, first->part = 1;
    last->nodes = p->nodes + cut, last->n_nodes = p->n_nodes - cut;
    last->n_layers = n_dev, last->layer0 = p->layer0 + l0, last->part = 2, last->embed = NULL;
}

bool bp_step_has_node(const bp_step_prog *p, bp_step_kind k) {
    for (int i = 0; p && i < p->n_nodes; i++)
        if (p->nodes[i].kind == k) return true;
    return false;
}

int bp_step_weight_kinds(const bp_step_prog *p, bp_kind *kinds, int max) {
    int n = 0, it = 0;
    for (const bp_weight *w; (w = bp_step_next_weight(p, &it));) {
        int k = 0;
        while (k < n && kinds[k] != w->kind) k++;
        if (k == n && n < max) kinds[n++] = w->kind;
    }
    return n;
}

bp_kind bp_op_call_kind(const bp_op_call *c, int i) {
    if (c->op == BP_OP_JOBS) return c->u.jobs.jobs[i].w->kind;
    if (c->op <= BP_OP_GEMM) return c->u.mm.w->kind;
    return c->kind;
}

bp_op_shape bp_op_call_shape(const bp_op_call *c, int i) {
    switch (c->op) {
    case BP_OP_MATVEC:
    case BP_OP_GEMM: return (bp_op_shape){c->u.mm.w->rows, c->u.mm.w->cols, c->u.mm.t};
    case BP_OP_JOBS: {
        const bp_weight *w = c->u.jobs.jobs[i].w;
        return (bp_op_shape){w->rows, w->cols, c->u.jobs.t};
    }
    default: return c->shape;
    }
}

/* Every claim name, made once: caps tables return these (they must outlive the call). */
enum { MAX_ID = 64, NAME_LEN = 32 };
static char claim_names[BP_OP_COUNT][MAX_ID][NAME_LEN];
static pthread_once_t claim_once = PTHREAD_ONCE_INIT;

static void make_claim_names(void) {
    for (int op = 0; op < BP_OP_COUNT; op++)
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind_info *ki = bp_kind_at(i);
            if ((int)ki->kind < MAX_ID) bp_claim_name((bp_op)op, ki->kind, claim_names[op][ki->kind], NAME_LEN);
        }
}

const char *bp_claim_name_static(bp_op op, bp_kind k) {
    if ((unsigned)op >= BP_OP_COUNT || (unsigned)k >= MAX_ID) return NULL;
    pthread_once(&claim_once, make_claim_names);
    return claim_names[op][k][0] ? claim_names[op][k] : NULL;
}

/* Planted claims (tests only): a claim added to a backend's table at run time, to prove the
 * guard catches a claim its launch table does not back. */
static bool planted[BP_BACKEND_COUNT + 1][BP_OP_COUNT][MAX_ID];

void bp_claim_test_plant(int backend_id, bp_op op, bp_kind k, bool on) {
    if (backend_id < 0 || backend_id > BP_BACKEND_COUNT || (unsigned)op >= BP_OP_COUNT || (unsigned)k >= MAX_ID) return;
    __atomic_store_n(&planted[backend_id][op][k], on, __ATOMIC_RELAXED);
}

const char *bp_claim_answer(int backend_id, bp_op op, bp_kind k, bool claimed) {
    if ((unsigned)op >= BP_OP_COUNT || (unsigned)k >= MAX_ID) return NULL;
    const bool p = backend_id >= 0 && backend_id <= BP_BACKEND_COUNT &&
                   __atomic_load_n(&planted[backend_id][op][k], __ATOMIC_RELAXED);
    return claimed || p ? bp_claim_name_static(op, k) : NULL;
}
