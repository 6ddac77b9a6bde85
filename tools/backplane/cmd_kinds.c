/* backplane kinds [--json] [--all]: the kind table, one row per kind. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int bp_cmd_kinds(int argc, char **argv) {
    int json = 0, all = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--all")) all = 1;
        else {
            bool help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            fprintf(help ? stdout : stderr, "usage: backplane kinds [--json] [--all]\n"
                    "  --all  also list activation kinds (Q8_1, Q8_K) and plain data kinds\n");
            return help ? 0 : 2;
        }
    }
    if (json) printf("[\n");
    else printf("| id | kind | role | block elements | block bytes | bits/weight | quantize |\n"
                "|---:|---|---|---:|---:|---:|---|\n");
    int first = 1, weights = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *k = bp_kind_at(i);
        if (k->role == BP_ROLE_W) weights++;
        else if (!all) continue;
        const char *role = k->role == BP_ROLE_W ? "weight" : k->role == BP_ROLE_A ? "activation" : "data";
        if (json)
            printf("%s  {\"name\": \"%s\", \"id\": %u, \"role\": \"%s\", \"block_elements\": %u, "
                   "\"block_bytes\": %u, \"bits_per_weight\": %.4f, \"quantize\": %s}",
                   first ? "" : ",\n", k->name, k->gguf_id, role, k->block_elems, k->block_bytes,
                   k->bits_per_weight, k->can_quantize ? "true" : "false");
        else
            printf("| %u | %s | %s | %u | %u | %.4f | %s |\n", k->gguf_id, k->name, role, k->block_elems,
                   k->block_bytes, k->bits_per_weight, k->can_quantize ? "yes" : "no");
        first = 0;
    }
    if (json) printf("\n]\n");
    else printf("\n%d weight kinds\n", weights);
    return 0;
}
