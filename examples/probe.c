/* The route query: which backends this machine has and why each is on or off, then, for every
 * weight kind, what a decode (matvec, batch 1) and a prefill (GEMM, batch T) of an R x C weight
 * would run on -- the rule bp_matvec / bp_gemm apply, asked through bp_route().
 *     cc probe.c -o probe $(pkg-config --cflags --libs backplane)
 *     ./probe [ROWS COLS BATCH]        (default 4096 4096 512, as `backplane probe`) */
#include <stdio.h>
#include <stdlib.h>

#include <backplane.h>

int main(int argc, char **argv) {
    int64_t rows = 4096, cols = 4096, batch = 512;
    if (argc == 4) rows = atoll(argv[1]), cols = atoll(argv[2]), batch = atoll(argv[3]);
    else if (argc != 1) {
        fprintf(stderr, "usage: %s [ROWS COLS BATCH]\n", argv[0]);
        return 2;
    }
    printf("backplane %s\n\n| backend | compiled | enabled | device | why |\n|---|---|---|---|---|\n", bp_version());
    for (int i = 0; i < bp_backend_count(); i++) {
        bp_backend_info b;
        if (bp_backend_info_at(i, &b) != BP_OK) continue;
        printf("| %s | %s | %s | %s | %s |\n", b.display, b.compiled ? "yes" : "no", b.enabled ? "yes" : "no",
               b.device, b.reason);
    }
    printf("\nRoute for a %lld x %lld weight:\n\n| kind | decode (batch 1) | prefill (batch %lld) |\n|---|---|---|\n",
           (long long)rows, (long long)cols, (long long)batch);
    int failed = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *k = bp_kind_at(i);
        if (k->role != BP_ROLE_W) continue; /* activation and plain data kinds are not weights */
        bp_route_info decode, prefill;
        if (bp_route(k->kind, rows, cols, 1, &decode) != BP_OK ||
            bp_route(k->kind, rows, cols, batch, &prefill) != BP_OK) {
            fprintf(stderr, "probe: %s: %s\n", k->name, bp_last_error());
            failed = 1;
            continue;
        }
        printf("| %s | %s | %s |\n", k->name, decode.path, prefill.path);
    }
    return failed;
}
