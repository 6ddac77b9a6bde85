/* The CPU kernel table (src/cpu/kernels.def) against the kind table, and the names it reports
 * against what ran.
 *
 * 1. Every path with decode rows has exactly one for every weight kind; every row's functions
 *    are there (a repacking kernel has its plain one, an alternative names a row that exists and
 *    does not repack, every activation format has the path's quantizer, every quantized kind a
 *    GEMM); the bp_cpu_ops made from it carry the rows unchanged. Built for every path the build
 *    has, whether or not this CPU can run it (the AVX-512 table is checked on an AVX2 machine).
 * 2. On every path this CPU runs, for every weight kind and a spread of batches (each side of
 *    every batch limit in the table), with and without repacking and for both batch-1 picks:
 *    the name bp_cpu_kernel_name (what probe and the run records print) gives for (kind, t) is
 *    the name of the function bp_cpu_gemm then called.
 * 3. docs/cpu-kernel-table.md is the table as it is (test_cpu_table --write makes it anew). */
#include <stdlib.h>
#include <string.h>

#include "backend/weight.h"
#include "cpu/kernel_table.h"
#include "harness.h"

static bool is_weight_kind(bp_kind k) {
    for (int i = 0; i < bp_kind_table_size(); i++)
        if (bp_kind_at(i)->kind == k) return bp_kind_at(i)->role == BP_ROLE_W;
    return false;
}

static const bp_cpu_decode_row *row_of(const bp_cpu_decode_row *rows, bp_cpu_isa path, bp_kind k, int *count) {
    const bp_cpu_decode_row *hit = NULL;
    *count = 0;
    for (; rows->path != BP_CPU_ISA_COUNT; rows++)
        if (rows->path == path && rows->kind == k) hit = rows, (*count)++;
    return hit;
}

/* The name contains the kind as a word: "CPU avx2 Q4_K (...)" names Q4_K, not Q4_K_M or IQ4_K. */
static bool names_kind(const char *name, const char *kind) {
    const size_t n = strlen(kind);
    for (const char *p = strstr(name, kind); p; p = strstr(p + 1, kind))
        if ((p == name || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

static void check_kernel(const char *where, const bp_cpu_vec_kernel *k, const bp_cpu_ops *ops, const char *kind) {
    CHECK(k->fn != NULL, "%s: no function", where);
    CHECK(k->name && strncmp(k->name, "CPU ", 4) == 0 && names_kind(k->name, kind), "%s: name \"%s\" does not name %s",
          where, k->name ? k->name : "(null)", kind);
    CHECK((unsigned)k->act < BP_ACT_COUNT, "%s: activation format %d", where, (int)k->act);
    if ((unsigned)k->act < BP_ACT_COUNT && k->act != BP_ACT_F32)
        CHECK(ops->quant[k->act] != NULL, "%s: the path has no quantizer for activation format %d", where, (int)k->act);
    CHECK(k->max_batch >= 1, "%s: batch limit %d", where, k->max_batch);
}

static void check_table(void) {
    int paths = 0;
    for (int pi = 0; pi < BP_CPU_ISA_COUNT; pi++) {
        const bp_cpu_isa path = (bp_cpu_isa)pi;
        const char *pname = bp_cpu_isa_name(path);
        bp_cpu_ops ops;
        if (!bp_cpu_ops_build(path, &ops, true, true)) {
            fprintf(stderr, "path %s: not in this build\n", pname);
            continue;
        }
        paths++;
        CHECK(ops.vec_generic.fn && ops.gemm && ops.gemm_name && ops.gemm_isa, "%s: the PATH row is incomplete", pname);
        int rows = 0;
        for (const bp_cpu_decode_row *r = bp_cpu_table_decode(); r->path != BP_CPU_ISA_COUNT; r++) rows += r->path == path;
        if (!rows) {
            fprintf(stderr, "path %s: no decode rows (every kind runs the generic kernel)\n", pname);
            continue;
        }
        CHECK(ops.gemm_q8 && ops.gemm_q8_prep && ops.gemm_q8_bytes && ops.gemm_q8_name, "%s: no int8 GEMM", pname);
        int kinds = 0;
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind_info *ki = bp_kind_at(i);
            if (ki->role != BP_ROLE_W) continue;
            kinds++;
            char where[96];
            snprintf(where, sizeof where, "%s %s", pname, ki->name);
            int n = 0;
            const bp_cpu_decode_row *d = row_of(bp_cpu_table_decode(), path, ki->kind, &n);
            CHECK(n == 1, "%s: %d decode rows (one wanted)", where, n);
            if (!d) continue;
            check_kernel(where, &d->k, &ops, ki->name);
            /* the ops made from the table carry the row (VBMI rows replace the function only) */
            CHECK(ops.vec[ki->kind].max_batch == d->k.max_batch && ops.vec[ki->kind].act == d->k.act &&
                      ops.vec[ki->kind].pack == d->k.pack && ops.dequant[ki->kind] == d->dequant,
                  "%s: bp_cpu_ops_build changed the row", where);
            const bp_cpu_decode_row *p = row_of(bp_cpu_table_plain(), path, ki->kind, &n);
            if (d->k.pack) {
                CHECK(p != NULL, "%s: repacks but has no plain kernel for a weight too big to copy", where);
                if (p) check_kernel(where, &p->k, &ops, ki->name);
                if (p) CHECK(!p->k.pack, "%s: the plain kernel repacks", where);
            } else
                CHECK(p == NULL, "%s: a plain kernel for a kernel that does not repack", where);
            const bp_cpu_decode_row *v = row_of(bp_cpu_table_vbmi(), path, ki->kind, &n);
            if (v) CHECK(v->k.fn && names_kind(v->k.name, ki->name), "%s: VBMI row without a function or name", where);
        }
        for (const bp_cpu_alt_row *a = bp_cpu_table_alt(); a->path != BP_CPU_ISA_COUNT; a++) {
            if (a->path != path) continue;
            int n = 0;
            const bp_cpu_decode_row *from = row_of(bp_cpu_table_decode(), a->from, a->kind, &n);
            const bp_cpu_decode_row *d = row_of(bp_cpu_table_decode(), path, a->kind, &n);
            CHECK(from && !from->k.pack && d && a->from < path, "%s kind %d: the alternative names no usable row", pname,
                  (int)a->kind);
            CHECK(ops.vec_alt[a->kind].fn == (from ? from->k.fn : NULL), "%s kind %d: alternative not built", pname,
                  (int)a->kind);
        }
        for (const bp_cpu_decode_row *r = bp_cpu_table_decode(); r->path != BP_CPU_ISA_COUNT; r++)
            CHECK(is_weight_kind(r->kind), "%s: a row for kind %d, which is not a weight kind", pname, (int)r->kind);
        fprintf(stderr, "path %s: %d kinds, a row each\n", pname, kinds);
    }
    CHECK(paths >= 1, "no path in the table");
}

/* The name of the kernel that ran (vec or gemm) for kind k on the current path. */
static const char *ran_name(const bp_cpu_ops *ops, bp_kind k, bp_cpu_vec_fn vec,
                            void (*gemm)(const bp_cpu_job *, int, int64_t, int64_t), char *buf, size_t len) {
    if (vec) {
        const bp_cpu_vec_kernel *c[] = {&ops->vec[k], &ops->vec_plain[k], &ops->vec_alt[k], &ops->vec_novbmi[k],
                                        &ops->vec_generic, &ops->vec_bf16r};
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
            if (c[i]->fn == vec) return c[i]->name;
        return "(a decode function in no table slot)";
    }
    const char *kind = bp_kind_traits_of(k)->info.name, *isa = ops->isa_name;
    if (gemm && gemm == ops->gemm_q8) snprintf(buf, len, "CPU %s %s %s", isa, kind, ops->gemm_q8_name);
    else if (gemm && gemm == ops->gemm) snprintf(buf, len, "CPU %s %s %s", ops->gemm_isa, kind, ops->gemm_name);
    else if (gemm && gemm == ops->gemm_bf16r) snprintf(buf, len, "CPU %s %s %s", isa, kind, ops->gemm_bf16r_name);
    else snprintf(buf, len, "(nothing recorded)");
    return buf;
}

static void check_names(void) {
    enum { ROWS = 64, COLS = 512 };
    const int64_t batches[] = {1, 2, 3, 4, 5, 8, 9, 10, 11, 16, 17, 20, 21, 24, 25, 28, 29, 32, 33, 40, 41, 44, 45, 48, 49, 64, 65, 128, 129};
    enum { TMAX = 129 };
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    float *x = malloc(sizeof(float) * TMAX * COLS), *y = malloc(sizeof(float) * TMAX * ROWS);
    CHECK(x && y, "no memory");
    if (!x || !y) goto out;
    for (int i = 0; i < TMAX * COLS; i++) x[i] = bp_test_randf(&rng);
    bp_cpu_set_min_parallel_bytes(0);
    const bp_cpu_isa start = bp_cpu_isa_current();
    for (int pi = 0; pi < BP_CPU_ISA_COUNT; pi++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)pi)) {
            fprintf(stderr, "SKIP: names on path %s (this CPU has no %s path)\n", bp_cpu_isa_name((bp_cpu_isa)pi),
                    bp_cpu_isa_name((bp_cpu_isa)pi));
            continue;
        }
        bp_cpu_isa_force((bp_cpu_isa)pi);
        const bp_cpu_ops *ops = bp_cpu_ops_current();
        int calls = 0;
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind_info *ki = bp_kind_at(i);
            if (ki->role != BP_ROLE_W) continue;
            size_t bytes = 0;
            uint8_t *w = bp_test_make_weight(ki->kind, ROWS, COLS, &rng, &bytes);
            CHECK(w != NULL, "%s: no test weight", ki->name);
            if (!w) continue;
            bp_weight wt;
            memset(&wt, 0, sizeof wt);
            CHECK(bp_weight_init(&wt, ki->kind, w, bytes, ROWS, COLS) == BP_OK, "%s: %s", ki->name, bp_last_error());
            for (int repack = 1; repack >= 0; repack--)
                for (int pick = 1; pick <= 2; pick++) {
                    bp_cpu_set_repack(repack);
                    bp_cpu_set_decode_pick(pick);
                    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
                        const int64_t t = batches[b];
                        if (pick == 2 && t > 1) continue;
                        CHECK(bp_cpu_gemm(&wt, x, t, y) == BP_OK, "%s t=%lld: %s", ki->name, (long long)t, bp_last_error());
                        bp_cpu_vec_fn vec;
                        void (*gemm)(const bp_cpu_job *, int, int64_t, int64_t);
                        bp_cpu_last_run(&vec, &gemm);
                        char buf[256];
                        const char *ran = ran_name(ops, ki->kind, vec, gemm, buf, sizeof buf);
                        const char *named = bp_cpu_kernel_name(ki->kind, t);
                        CHECK(strcmp(ran, named) == 0, "%s %s t=%lld repack=%d pick=%d: named \"%s\", ran \"%s\"",
                              ops->isa_name, ki->name, (long long)t, repack, pick, named, ran);
                        calls++;
                    }
                }
            if (wt.backend_state[BP_BACKEND_CPU] && wt.backend_free[BP_BACKEND_CPU])
                wt.backend_free[BP_BACKEND_CPU](wt.backend_state[BP_BACKEND_CPU]);
            free(w);
        }
        fprintf(stderr, "path %s: %d calls, each named as it ran\n", ops->isa_name, calls);
    }
    bp_cpu_set_repack(true);
    bp_cpu_set_decode_pick(0);
    bp_cpu_isa_force(start);
out:
    free(x);
    free(y);
}

static const char *const act_names[BP_ACT_COUNT] = {"f32", "q8x32", "q8x256", "q8x32p", "q8x256p", "q8x32q", "bf16", "f32eo", "q8x16i"};

/* The table as markdown: one line per path and kind. */
static size_t table_markdown(char *buf, size_t len) {
    size_t n = 0;
#define OUT(...) (n += (size_t)snprintf(buf + (n < len ? n : len), n < len ? len - n : 0, __VA_ARGS__))
    OUT("# The CPU kernel table\n\nGenerated from `src/cpu/kernels.def` by `test_cpu_table --write` (the suite fails when this\n"
        "file and the table disagree). One line per path and weight kind: the decode kernel that a batch of up to *max\n"
        "batch* inputs runs (larger batches run the path's GEMM, below), the activation format it reads, whether one call\n"
        "serves every input (*multi*), the copy it repacks the weight into, the kernel run without that copy (*plain*),\n"
        "the second batch-1 kernel (*alt*, `*`: the default) and the GEMM panels' dequantizer (*ref*: the reference).\n"
        "Which kernel decodes Q4_K on AVX2 at batch 8: the avx2 Q4_K line, `bp_avx2_vec_q4_k` up to batch 16.\n\n");
    for (const bp_cpu_path_row *p = bp_cpu_table_path(); p->path != BP_CPU_ISA_COUNT; p++) {
        OUT("## %s\n\n", bp_cpu_isa_name(p->path));
        OUT("Generic decode `%s`; f32 GEMM (F32, F16, BF16 and kinds without rows): %s", p->generic.name, p->gemm_name);
        if (p->q8_name) OUT("; int8 GEMM (quantized kinds): %s", p->q8_name);
        OUT(".\n\n");
        bool any = false;
        for (const bp_cpu_decode_row *d = bp_cpu_table_decode(); d->path != BP_CPU_ISA_COUNT; d++) {
            if (d->path != p->path) continue;
            if (!any) OUT("| kind | decode kernel | act | multi | max batch | repacks | plain | alt | dequant | name |\n"
                          "|---|---|---|---|---|---|---|---|---|---|\n");
            any = true;
            int c = 0;
            const bp_cpu_decode_row *pl = row_of(bp_cpu_table_plain(), d->path, d->kind, &c);
            const bp_cpu_decode_row *vb = row_of(bp_cpu_table_vbmi(), d->path, d->kind, &c);
            const char *alt = "";
            bool first = false;
            for (const bp_cpu_alt_row *a = bp_cpu_table_alt(); a->path != BP_CPU_ISA_COUNT; a++)
                if (a->path == d->path && a->kind == d->kind) {
                    const bp_cpu_decode_row *from = row_of(bp_cpu_table_decode(), a->from, a->kind, &c);
                    alt = from ? from->fn_name : "?", first = a->first;
                }
            char mb[16];
            if (d->k.max_batch == 0x7fffffff) snprintf(mb, sizeof mb, "any");
            else snprintf(mb, sizeof mb, "%d", d->k.max_batch);
            OUT("| %s | `%s`%s%s%s | %s | %s | %s | %s | %s%s%s | %s%s%s%s | %s | %s |\n", bp_kind_traits_of(d->kind)->info.name,
                d->fn_name, vb ? " (`" : "", vb ? vb->fn_name : "", vb ? "` with VBMI)" : "", act_names[d->k.act],
                d->k.multi ? "yes" : "no", mb, d->k.pack ? "yes" : "", pl ? "`" : "", pl ? pl->fn_name : "", pl ? "`" : "",
                *alt ? "`" : "", alt, *alt ? "`" : "", first ? "*" : "", d->dequant ? "fast" : "ref", d->k.name);
        }
        if (any) OUT("\n");
    }
#undef OUT
    return n;
}

static void check_doc(bool write) {
    static char want[1 << 16];
    const size_t n = table_markdown(want, sizeof want);
    CHECK(n < sizeof want, "the markdown table needs %zu bytes", n);
    const char *path = "docs/cpu-kernel-table.md";
    if (write) {
        FILE *f = fopen(path, "w");
        CHECK(f && fwrite(want, 1, n, f) == n, "cannot write %s", path);
        if (f) fclose(f);
        return;
    }
    static char have[1 << 16];
    FILE *f = fopen(path, "r");
    size_t m = f ? fread(have, 1, sizeof have, f) : 0;
    if (f) fclose(f);
    CHECK(m == n && memcmp(have, want, n) == 0, "%s is not the table as it is: run test_cpu_table --write from the source tree",
          path);
}

int main(int argc, char **argv) {
    const bool write = argc > 1 && strcmp(argv[1], "--write") == 0;
    check_table();
    if (!write) check_names();
    check_doc(write);
    return bp_test_finish();
}
