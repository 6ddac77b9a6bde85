/* The op section of `backplane probe`: per op (ops.def) the route a call of a decode step's
 * shape really takes here, kinds with the same route on one line (bp_op_route_label: the seam's
 * own rule, at that shape). With --all, which backends claim each op for which kinds. */
#include "probe_ops.h"

#include <string.h>

#include "cli_common.h"
#include "ops/ops_internal.h"
#include "seam/seam_internal.h"

/* The shape op is routed at (probe_ops.h). */
static bp_op_shape op_shape(bp_op op, int64_t rows, int64_t cols) {
    switch (bp_op_domain_of(op)) {
    case BP_OP_DOMAIN_W: return (bp_op_shape){rows, cols, 1};
    case BP_OP_DOMAIN_KV: return (bp_op_shape){rows / 128 > 0 ? rows / 128 : 1, 128 * 1024, 1};
    case BP_OP_DOMAIN_F32: break;
    }
    return (bp_op_shape){1, cols, 1};
}

/* The route's label, with the backend's UNVERIFIED/UNRUN mark where it has one. */
static const char *route_label(bp_op op, bp_kind k, const bp_op_shape *s, char *buf, size_t len) {
    bp_run_record r;
    bp_op_route_label(op, k, s, buf, len, &r);
    const int i = bp_seam_slot_find(r.backend);
    const char *mark = i >= 0 ? bp_seam_slot_at(i)->caps->unverified : NULL;
    size_t n = strlen(buf);
    if (mark && n + 1 < len) snprintf(buf + n, len - n, " %s", mark);
    return buf;
}

/* Kinds of op's domain with the same label as kind index i, from i on (done[] marks them). */
static void group(bp_op op, const bp_op_shape *s, int i, bool *done, char *kinds, size_t len, char *label, size_t llen) {
    char other[400];
    route_label(op, bp_kind_at(i)->kind, s, label, llen);
    kinds[0] = 0;
    for (int j = i; j < bp_kind_table_size(); j++) {
        const bp_kind_info *kj = bp_kind_at(j);
        if (done[j] || !bp_op_kind_in_domain(op, kj->kind)) continue;
        if (strcmp(route_label(op, kj->kind, s, other, sizeof other), label)) continue;
        done[j] = true;
        size_t n = strlen(kinds);
        snprintf(kinds + n, len - n, "%s%s", n ? " " : "", kj->name);
    }
}

void bp_probe_ops(bool json, bool all, int64_t rows, int64_t cols) {
    bool first = true;
    if (json) printf("  \"ops\": [\n");
    else printf("\nops (src/backend/ops.def): the route a call of a decode step takes here (weight ops on the %lld x %lld "
                "weight, activation ops over a row of %lld, attention over %lld heads x 1024 keys)\n\n| op | kinds | route "
                "|%s\n|---|---|---|%s\n",
                (long long)rows, (long long)cols, (long long)cols, (long long)(rows / 128 > 0 ? rows / 128 : 1),
                all ? " claimed by |" : "", all ? "---|" : "");
    for (int op = 0; op < bp_op_count(); op++) {
        const bp_op_shape sh = op_shape((bp_op)op, rows, cols);
        bool done[256] = {0};
        for (int i = 0; i < bp_kind_table_size() && i < 256; i++) {
            if (done[i] || !bp_op_kind_in_domain((bp_op)op, bp_kind_at(i)->kind)) continue;
            char kinds[512], label[400];
            group((bp_op)op, &sh, i, done, kinds, sizeof kinds, label, sizeof label);
            char claims[256] = "";
            for (int s = 0; s < bp_seam_slot_count(); s++) {
                const bp_seam_slot *sl = bp_seam_slot_at(s);
                if (!sl->caps->kernel((bp_op)op, bp_kind_at(i)->kind)) continue;
                size_t n = strlen(claims);
                snprintf(claims + n, sizeof claims - n, "%s%s", n ? ", " : "", sl->caps->name);
            }
            if (json) {
                printf("%s    {\"op\": \"%s\", \"kinds\": ", first ? "" : ",\n", bp_op_name(op));
                bp_cli_json_str(stdout, kinds);
                printf(", \"route\": ");
                bp_cli_json_str(stdout, label);
                printf(", \"shape\": {\"rows\": %lld, \"cols\": %lld, \"batch\": %lld}, \"claimed_by\": ",
                       (long long)sh.rows, (long long)sh.cols, (long long)sh.t);
                bp_cli_json_str(stdout, claims);
                printf("}");
            } else {
                printf("| %s | %s | %s |", bp_op_name(op), kinds, label);
                if (all) printf(" %s |", claims[0] ? claims : "none (CPU only)");
                printf("\n");
            }
            first = false;
        }
    }
    if (json) printf("\n  ]\n");
}
