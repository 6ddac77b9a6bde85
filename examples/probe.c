/* Which backend and kernel really run each weight kind on this machine, for a decode (matvec)
 * and a prefill (GEMM over 8 positions): each kind's op is run once on a small weight and the
 * library is asked what ran (bp_weight_last_path), so the answer cannot differ from what a model
 * would get. Then how many ops fell back, and why. Build against an installed backplane:
 *     cc probe.c -o probe $(pkg-config --cflags --libs backplane)     */
#include <stdio.h>
#include <stdlib.h>

#include <backplane.h>

enum { ROWS = 64, COLS = 256, BATCH = 8 }; /* 256 columns: a whole number of blocks of every kind */

int main(void) {
    printf("backplane %s\n\n| kind | decode (matvec) | prefill (gemm, t=%d) |\n|---|---|---|\n",
           bp_version(), BATCH);
    static float x[BATCH * COLS], y[BATCH * ROWS];
    for (int i = 0; i < BATCH * COLS; i++) x[i] = (float)(i % 7) - 3.0f;
    int failed = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *k = bp_kind_at(i);
        if (k->role != BP_ROLE_W) continue; /* activation and plain data kinds are not weights */
        size_t row_bytes;
        bp_weight *w = NULL;
        void *data = NULL;
        bp_status s = bp_kind_row_bytes(k->kind, COLS, &row_bytes);
        if (!s) s = (data = calloc(ROWS, row_bytes)) ? BP_OK : BP_E_NOMEM; /* zeros: valid blocks */
        if (!s) s = bp_weight_create(k->kind, data, ROWS * row_bytes, ROWS, COLS, &w);
        char decode[160] = "", prefill[160] = "";
        if (!s && !(s = bp_matvec(w, x, y))) snprintf(decode, sizeof decode, "%s", bp_weight_last_path(w));
        if (!s && !(s = bp_gemm(w, x, BATCH, y))) snprintf(prefill, sizeof prefill, "%s", bp_weight_last_path(w));
        if (s) {
            fprintf(stderr, "probe: %s: %s (%s)\n", k->name, bp_last_error(), bp_status_name(s));
            failed = 1;
        }
        printf("| %s | %s | %s |\n", k->name, decode, prefill);
        bp_weight_free(w);
        free(data);
    }
    printf("\n");
    bp_fallback_report(stdout);
    return failed;
}
