/* The seam for ops: route, walk with named fallbacks, and the claim <=> launch rule over
 * op x kind (see op_dispatch.h). Kept apart from dispatch.c so the matvec walk stays as it is;
 * both share one fallback table, so `--fallbacks` and bp_fallback_report cover ops too. The
 * rules follow the matvec walk's: the preference order (bp_seam_order), strict mode, device
 * loss (a lost slot is a counted fallback; BP_LAUNCH_LOST disables the slot). */
#include <stdarg.h>
#include <string.h>

#include "core/error.h"
#include "seam/op_dispatch.h"

static const char *const op_names[BP_OP_COUNT] = {
#define BP_OP(ENUM, name, domain, doc) #name,
#include "ops/ops.def"
#undef BP_OP
};

const char *bp_seam_op_kernel(const bp_backend_caps *caps, bp_op op, bp_kind k) {
    if (!caps || !caps->op_kernel || (unsigned)op >= BP_OP_COUNT) return NULL;
    return caps->op_kernel((int)op, k);
}

static bool slot_has_op(const bp_seam_slot *s, bp_op op, bp_kind k) {
    return s->dispatch && s->dispatch->op_launch && bp_seam_op_kernel(s->caps, op, k);
}

typedef enum op_take { OP_NO = 0, OP_YES = 1, OP_LOST = 2 } op_take;

/* The matvec walk's rule (route.c) for ops: compiled, claims the pair (both kinds), enabled; a
 * slot disabled after a device loss is a counted fallback, not a silent change of route. */
static op_take slot_takes(int i, bp_op op, bp_kind k, bp_kind k2, const char **lost_why) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    if (!slot_has_op(s, op, k) || (k2 != k && !slot_has_op(s, op, k2))) return OP_NO;
    const char *reason = NULL;
    if (bp_seam_slot_enabled(i, &reason)) return OP_YES;
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == BP_SLOT_LOST) {
        *lost_why = reason;
        return OP_LOST;
    }
    return OP_NO;
}

int bp_seam_op_route(bp_op op, bp_kind k, bp_kind k2) {
    int order[BP_BACKEND_COUNT + 1];
    int n = bp_seam_order(order, BP_BACKEND_COUNT + 1);
    const char *why;
    for (int j = 0; j < n; j++)
        if (slot_takes(order[j], op, k, k2, &why) == OP_YES) return order[j];
    return -1;
}

static void put(char *buf, size_t len, const char *fmt, ...) BP_PRINTF(3, 4);
static void put(char *buf, size_t len, const char *fmt, ...) {
    if (!buf || !len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n >= (int)len && len > 4) memcpy(buf + len - 4, "...", 4);
}

/* Strict mode: what would have been a fallback is the op's error, and nothing runs instead. */
static bp_status strict_refuse(const bp_op_call *c, const bp_seam_slot *s, const char *cause) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)c->kind);
    return bp_fail(BP_E_FALLBACK, "strict mode: %s (%s) on %s failed: %s; not falling back (BACKPLANE_STRICT / bp_set_strict)",
                   op_names[c->op], ki ? ki->name : "?", s->caps->display_name, cause && *cause ? cause : "unspecified error");
}

bp_status bp_seam_op_run(const bp_op_call *c, bp_seam_op_cpu_fn cpu, char *path, size_t path_len,
                         const char **ran_on) {
    /* Failures of this call, logged once it has run so each line names who ran instead. */
    struct { const char *backend; char cause[200]; } fail[BP_BACKEND_COUNT + 1];
    int nfail = 0;
    const char *first_failed = NULL;
    const char *on = "cpu";
    char label[96] = "";
    int order[BP_BACKEND_COUNT + 1];
    int n = bp_seam_order(order, BP_BACKEND_COUNT + 1);
    const bp_seam_slot *ran = NULL;
    for (int j = 0; j < n && !ran; j++) {
        const int i = order[j];
        const bp_seam_slot *s = bp_seam_slot_at(i);
        const char *lost = NULL;
        op_take take = slot_takes(i, c->op, c->kind, c->kind2, &lost);
        char err[200] = "";
        bp_launch r;
        if (take == OP_NO) continue;
        if (take == OP_LOST) {
            snprintf(err, sizeof err, "%s", lost ? lost : "device lost");
            r = BP_LAUNCH_ERROR;
        } else {
            r = s->dispatch->op_launch(c, err, sizeof err);
            if (r == BP_LAUNCH_LOST) bp_seam_slot_mark_lost(i, err);
        }
        if (r == BP_LAUNCH_OK) {
            ran = s;
            put(label, sizeof label, "%s %s", s->caps->display_name, bp_seam_op_kernel(s->caps, c->op, c->kind));
        } else if (r == BP_LAUNCH_ERROR || r == BP_LAUNCH_LOST) {
            if (bp_strict_mode()) return strict_refuse(c, s, err);
            if (nfail < (int)(sizeof fail / sizeof fail[0])) {
                fail[nfail].backend = s->caps->name;
                snprintf(fail[nfail].cause, sizeof fail[nfail].cause, "%s", err[0] ? err : "unspecified error");
                nfail++;
            }
            if (!first_failed) first_failed = s->caps->display_name;
        }
    }
    bp_status st = BP_OK;
    if (ran) on = ran->caps->name;
    else st = cpu(c, label, sizeof label);
    for (int i = 0; i < nfail; i++)
        bp_seam_record_fallback(fail[i].backend, c->kind, op_names[c->op], fail[i].cause,
                                ran ? ran->caps->display_name : "CPU");
    if (st) return st;
    if (first_failed)
        put(path, path_len, "%s (fallback from %s: %s)", label, first_failed, nfail ? fail[0].cause : "");
    else
        put(path, path_len, "%s", label);
    if (ran_on) *ran_on = on;
    return BP_OK;
}

int bp_seam_check_op_claims(const bp_backend_caps *caps, const bp_backend_dispatch *d, bp_op *bad_op,
                            bp_kind *bad_kind, int max_bad, FILE *report) {
    int nbad = 0;
    for (int op = 0; op < BP_OP_COUNT; op++) {
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind_info *ki = bp_kind_at(i);
            const char *kn = bp_seam_op_kernel(caps, (bp_op)op, ki->kind);
            bool launch = d && d->has_op_launch && d->has_op_launch(op, ki->kind);
            char want[64];
            snprintf(want, sizeof want, "%s %s", op_names[op], ki->name);
            const char *why = NULL;
            if (d && !!kn != launch)
                why = kn ? "claimed but has_op_launch is false" : "launchable but not claimed";
            else if (kn && !bp_op_kind_in_domain((bp_op)op, ki->kind))
                why = "claimed for a kind outside the op's domain (ops.def)";
            else if (kn && strcmp(kn, want))
                why = "claimed with a kernel name that is not \"<op> <KIND>\"";
            else if (kn && d && !d->op_launch)
                why = "claimed but the dispatch table has no op_launch entry";
            if (!why) continue;
            if (report) fprintf(report, "%s: %s %s %s\n", caps->name, op_names[op], ki->name, why);
            if (nbad < max_bad) {
                if (bad_op) bad_op[nbad] = (bp_op)op;
                if (bad_kind) bad_kind[nbad] = ki->kind;
            }
            nbad++;
        }
    }
    return nbad;
}
