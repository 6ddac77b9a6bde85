/* The seam for ops: route, walk with named fallbacks, and the claim <=> launch rule over
 * op x kind (see op_dispatch.h). Kept apart from dispatch.c so the matvec walk stays as it is;
 * both share one fallback table, so `--fallbacks` and bp_fallback_report cover ops too. */
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

static bool slot_takes(int i, bp_op op, bp_kind k, bp_kind k2) {
    const bp_seam_slot *s = bp_seam_slot_at(i);
    return slot_has_op(s, op, k) && (k2 == k || slot_has_op(s, op, k2)) && bp_seam_slot_enabled(i, NULL);
}

int bp_seam_op_route(bp_op op, bp_kind k, bp_kind k2) {
    int n = bp_seam_slot_count();
    for (int i = 0; i < n; i++)
        if (slot_takes(i, op, k, k2)) return i;
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

bp_status bp_seam_op_run(const bp_op_call *c, bp_seam_op_cpu_fn cpu, char *path, size_t path_len,
                         const char **ran_on) {
    /* Failures of this call, logged once it has run so each line names who ran instead. */
    struct { const char *backend; char cause[200]; } fail[BP_BACKEND_COUNT + 1];
    int nfail = 0;
    const char *first_failed = NULL;
    const char *on = "cpu";
    char label[96] = "";
    int n = bp_seam_slot_count();
    const bp_seam_slot *ran = NULL;
    for (int i = 0; i < n && !ran; i++) {
        if (!slot_takes(i, c->op, c->kind, c->kind2)) continue;
        const bp_seam_slot *s = bp_seam_slot_at(i);
        char err[200] = "";
        bp_launch r = s->dispatch->op_launch(c, err, sizeof err);
        if (r == BP_LAUNCH_OK) {
            ran = s;
            put(label, sizeof label, "%s %s", s->caps->display_name, bp_seam_op_kernel(s->caps, c->op, c->kind));
        } else if (r == BP_LAUNCH_ERROR && nfail < (int)(sizeof fail / sizeof fail[0])) {
            fail[nfail].backend = s->caps->name;
            snprintf(fail[nfail].cause, sizeof fail[nfail].cause, "%s", err[0] ? err : "unspecified error");
            if (!first_failed) first_failed = s->caps->display_name;
            nfail++;
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
        put(path, path_len, "%s (fallback from %s: %s)", label, first_failed, fail[0].cause);
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
