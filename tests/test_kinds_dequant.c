/* Every kind dequantizes BIT-EXACTLY like the reference that made tests/vectors/dequant_*.bin:
 * the gguf package's NumPy dequantize (gguf.quants.dequantize) where it has one, else an
 * independent NumPy reference written from the published block layout (the file header says
 * which; today that is Q8_1, Q8_K, Q1_0, Q2_0 and the plain data kinds). Regenerate the
 * vectors with tests/vectors/gen_vectors.py.
 *
 * Bit for bit means memcmp of the float bit patterns: -0.0 vs 0.0 or a different NaN payload
 * is a failure, because every backend is later judged against these exact values.
 * Every W/A kind in backplane_kinds.def must have a vector file, so a kind added without vectors fails.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kinds_vectors.h"

/* Returns 1 when the kind's vectors match bit for bit; sets *from_gguf by the file's source. */
static int check_kind(const bp_kind_info *k, int *from_gguf) {
    bp_vec v;
    if (!bp_vec_load(&v, "dequant", "BPDQ", k)) return 0;
    *from_gguf = strncmp(v.source, "gguf ", 5) == 0;
    const size_t nb = v.a, n = (size_t)nb * k->block_elems, bytes = (size_t)nb * k->block_bytes;
    int ok = 1;
    if (v.b != k->block_bytes || v.c != k->block_elems || nb == 0 || v.body_len != bytes + 4 * n) {
        CHECK(0, "%s: vector file shape (%u blocks of %u B / %u elems, %zu body bytes) does not fit the table (%u B / %u elems)",
              k->name, v.a, v.b, v.c, v.body_len, k->block_bytes, k->block_elems);
        bp_vec_free(&v);
        return 0;
    }
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    /* Copy the blocks to an odd address: kernels must not assume any alignment. */
    unsigned char *odd = malloc(bytes + 1);
    if (!want || !got || !odd) abort();
    bp_vec_floats(v.body + bytes, want, n);
    memcpy(odd + 1, v.body, bytes);
    memset(got, 0xA5, n * sizeof *got);
    bp_status s = bp_dequantize((bp_kind)k->gguf_id, odd + 1, bytes, got, (int64_t)n);
    CHECK(s == BP_OK, "%s: bp_dequantize -> %s: %s", k->name, bp_status_name(s), bp_last_error());
    if (s != BP_OK) ok = 0;
    size_t bad = 0;
    for (size_t i = 0; s == BP_OK && i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
        if (bad++ < 3) {
            uint32_t g, w;
            memcpy(&g, &got[i], 4);
            memcpy(&w, &want[i], 4);
            fprintf(stderr, "  %s element %zu (block %zu): got %.9g (0x%08x), want %.9g (0x%08x)\n", k->name, i,
                    i / k->block_elems, (double)got[i], g, (double)want[i], w);
        }
    }
    CHECK(bad == 0, "%s: %zu of %zu values differ from %s", k->name, bad, n, v.source);
    if (bad) ok = 0;
    free(want);
    free(got);
    free(odd);
    bp_vec_free(&v);
    return ok;
}

static void append(char *list, size_t cap, const char *name) {
    size_t l = strlen(list);
    snprintf(list + l, cap - l, "%s%s", l ? " " : "", name);
}

int main(void) {
    int w_total = 0, w_ok = 0, a_total = 0, a_ok = 0, d_total = 0, d_ok = 0, n_gguf = 0, n_layout = 0;
    char gguf_list[1024] = "", layout_list[1024] = "", failed[1024] = "";
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *k = bp_kind_at(i);
        const int has = bp_vec_exists("dequant", k->name);
        if (k->role == BP_ROLE_D && !has) continue; /* data kinds: checked when vectors exist */
        CHECK(has, "%s: no tests/vectors/dequant_%s.bin: run tests/vectors/gen_vectors.py", k->name, k->name);
        int from_gguf = 0;
        const int ok = has && check_kind(k, &from_gguf);
        if (!ok) append(failed, sizeof failed, k->name);
        if (k->role == BP_ROLE_W) {
            w_total++;
            w_ok += ok;
            if (ok && from_gguf) n_gguf++, append(gguf_list, sizeof gguf_list, k->name);
            if (ok && !from_gguf) n_layout++, append(layout_list, sizeof layout_list, k->name);
        } else if (k->role == BP_ROLE_A) {
            a_total++;
            a_ok += ok;
        } else {
            d_total++;
            d_ok += ok;
        }
    }
    CHECK(w_total == 28, "the table has %d weight kinds, the issue names 28", w_total);
    printf("bit-exact: %d/%d weight kinds (%d vs gguf package: %s; %d vs layout reference: %s)\n", w_ok, w_total,
           n_gguf, gguf_list, n_layout, layout_list);
    printf("bit-exact: %d/%d activation kinds, %d/%d data kinds\n", a_ok, a_total, d_ok, d_total);
    if (failed[0]) printf("not bit-exact: %s\n", failed);
    return bp_test_finish();
}
