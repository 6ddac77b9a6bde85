/* The op section of `backplane probe`: per op (ops.def) the route a call really takes here, kinds
 * with the same route on one line (bp_op_route_label: the seam's own rule). With --all, which
 * backends claim each op for which kinds. */
#include "probe_ops.h"

#include <string.h>

#include "cli_common.h"
#include "ops/ops_internal.h"
#include "seam/op_dispatch.h"

/* Kinds of op's domain with the same label as kind index i, from i on (done[] marks them). */
static void group(bp_op op, int i, bool *done, char *kinds, size_t len, char *label, size_t llen) {
    char other[192];
    bp_op_route_label(op, bp_kind_at(i)->kind, label, llen);
    kinds[0] = 0;
    for (int j = i; j < bp_kind_table_size(); j++) {
        const bp_kind_info *kj = bp_kind_at(j);
        if (done[j] || !bp_op_kind_in_domain(op, kj->kind)) continue;
        if (strcmp(bp_op_route_label(op, kj->kind, other, sizeof other), label)) continue;
        done[j] = true;
        size_t n = strlen(kinds);
        snprintf(kinds + n, len - n, "%s%s", n ? " " : "", kj->name);
    }
}

void bp_probe_ops(bool json, bool all) {
    bool first = true;
    if (json) printf("  \"ops\": [\n");
    else printf("\nops (src/ops/ops.def): the route a call takes here\n\n| op | kinds | route |%s\n|---|---|---|%s\n",
                all ? " claimed by |" : "", all ? "---|" : "");
    for (int op = 0; op < bp_op_count(); op++) {
        bool done[256] = {0};
        for (int i = 0; i < bp_kind_table_size() && i < 256; i++) {
            if (done[i] || !bp_op_kind_in_domain((bp_op)op, bp_kind_at(i)->kind)) continue;
            char kinds[512], label[192];
            group((bp_op)op, i, done, kinds, sizeof kinds, label, sizeof label);
            char claims[256] = "";
            for (int s = 0; s < bp_seam_slot_count(); s++) {
                const bp_seam_slot *sl = bp_seam_slot_at(s);
                if (!bp_seam_op_kernel(sl->caps, (bp_op)op, bp_kind_at(i)->kind)) continue;
                size_t n = strlen(claims);
                snprintf(claims + n, sizeof claims - n, "%s%s", n ? ", " : "", sl->caps->name);
            }
            if (json) {
                printf("%s    {\"op\": \"%s\", \"kinds\": ", first ? "" : ",\n", bp_op_name(op));
                bp_cli_json_str(stdout, kinds);
                printf(", \"route\": ");
                bp_cli_json_str(stdout, label);
                printf(", \"claimed_by\": ");
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
