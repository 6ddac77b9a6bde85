/* Every fast dequantizer the GEMM panels use (per ISA path and kind, cpu_internal.h's
 * ops->dequant) against the kind's reference dequantizer (src/kinds/ref_*.c), value by value.
 * The GEMM tests only bound the NMSE of a whole product, so a dequantizer that was wrong in a
 * few weights of a rare sub-block layout (the tail of a TQ1_0 block, one IQ1_M scale nibble)
 * could hide under their tolerance; here any differing value fails, naming the kind, the ISA
 * and the first element. Values must be bit-identical, except where a dequantizer says it
 * rounds differently: none does today. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "harness.h"

static void check(bp_cpu_isa isa, const bp_kind_info *ki, uint64_t *rng, int *checked) {
    bp_dequant_fn fast = bp_cpu_fast_dequant(isa, ki->kind);
    const bp_kind_traits *kt = bp_kind_traits_of(ki->kind);
    if (!fast || !kt) return;
    /* 64 rows of 8 blocks (at least 2048 values): every sub-block position many times over,
     * and random scale bytes across their range. */
    const int64_t rows = 64, cols = 8 * ki->block_elems;
    size_t bytes = 0;
    uint8_t *w = bp_test_make_weight(ki->kind, rows, cols, rng, &bytes);
    const size_t n = (size_t)(rows * cols);
    float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    CHECK(w && want && got, "%s: no test weight: %s", ki->name, bp_last_error());
    if (w && want && got) {
        const int64_t nb = rows * cols / ki->block_elems;
        kt->dequant(w, want, nb);
        memset(got, 0xff, sizeof(float) * n); /* NaN bytes: an unwritten value fails */
        fast(w, got, nb);
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (memcmp(&want[i], &got[i], sizeof(float)) != 0) bad = i;
        CHECK(bad == n, "%s on %s: element %zu (block %zu, offset %zu) is %.9g, the reference %.9g", ki->name,
              bp_cpu_isa_name(isa), bad, bad / (size_t)ki->block_elems, bad % (size_t)ki->block_elems,
              bad < n ? (double)got[bad] : 0.0, bad < n ? (double)want[bad] : 0.0);
        (*checked)++;
    }
    free(w);
    free(want);
    free(got);
}

/* The int8 GEMMs' direct panels (avx512/gemm_int8.c, avx2/gemm_int8.c: weights decoded straight to int8
 * q with a scale s and offset o per 32 columns) against the reference: s q + o per weight,
 * within 2e-6 of the block's largest weight (the offset kinds round s q + o in another order
 * than the reference's d sc q - dmin m; a misread field is off by at least one step, ~1/15 of
 * it). */
typedef bool (*direct_fn)(bp_kind k, const void *blocks, int64_t nblocks, float *out);

static void check_direct(direct_fn direct, const char *isa, const bp_kind_info *ki, uint64_t *rng, int *checked) {
    const int64_t be = ki->block_elems, nb = be >= BP_CPU_KC ? 1 : BP_CPU_KC / be, rows = 64, cols = 8 * be;
    size_t bytes = 0;
    uint8_t *w = bp_test_make_weight(ki->kind, rows, cols, rng, &bytes);
    const int64_t n = rows * cols, blocks = n / be;
    float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    CHECK(w && want && got, "%s: no test weight: %s", ki->name, bp_last_error());
    if (w && want && got && direct(ki->kind, w, nb, got)) {
        bp_kind_traits_of(ki->kind)->dequant(w, want, blocks);
        for (int64_t b = 0; b < blocks; b += nb)
            direct(ki->kind, w + (size_t)(b / nb) * (size_t)nb * ki->block_bytes, nb, got + b * be);
        int64_t bad = -1;
        for (int64_t b = 0; b < blocks && bad < 0; b++) {
            float mx = 0;
            for (int64_t j = b * be; j < (b + 1) * be; j++) mx = fabsf(want[j]) > mx ? fabsf(want[j]) : mx;
            for (int64_t j = b * be; j < (b + 1) * be && bad < 0; j++)
                if (!(fabsf(got[j] - want[j]) <= 2e-6f * mx)) bad = j;
        }
        CHECK(bad < 0, "%s direct panel on %s: element %lld (block %lld, offset %lld) is %.9g, the reference %.9g", ki->name,
              isa, (long long)bad, (long long)(bad / be), (long long)(bad % be), bad >= 0 ? (double)got[bad] : 0.0,
              bad >= 0 ? (double)want[bad] : 0.0);
        (*checked)++;
    }
    free(w);
    free(want);
    free(got);
}

int main(void) {
    uint64_t rng = 0x243f6a8885a308d3ull;
    int checked = 0;
    for (int isa = 0; isa < BP_CPU_ISA_COUNT; isa++) {
        if (!bp_cpu_isa_available((bp_cpu_isa)isa)) {
            fprintf(stderr, "ISA %s: not available here\n", bp_cpu_isa_name((bp_cpu_isa)isa));
            continue;
        }
        int before = checked;
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind_info *ki = bp_kind_at(i);
            if (ki->role == BP_ROLE_W) check((bp_cpu_isa)isa, ki, &rng, &checked);
        }
        fprintf(stderr, "ISA %s: %d fast dequantizers checked\n", bp_cpu_isa_name((bp_cpu_isa)isa), checked - before);
    }
    /* each path's direct panel kinds: AVX-512 13, AVX2 22 (the same, TQ2_0 and TQ1_0, and the
     * per-16 panels of avx2/gemm_int8_scale16.c: Q6_K Q3_K Q2_K IQ2_XS IQ2_S IQ1_S IQ1_M) */
    const struct {
        bp_cpu_isa isa;
        direct_fn fn;
        int want;
    } direct_paths[] = {{BP_CPU_ISA_AVX512, bp_cpu_avx512_direct_dequant, 13}, {BP_CPU_ISA_AVX2, bp_cpu_avx2g8_direct_dequant, 22}};
    for (size_t p = 0; p < sizeof direct_paths / sizeof direct_paths[0]; p++) {
        const char *name = bp_cpu_isa_name(direct_paths[p].isa);
        if (!bp_cpu_isa_available(direct_paths[p].isa)) {
            fprintf(stderr, "SKIP: the %s direct panel decoders (this CPU has no %s path)\n", name, name);
            continue;
        }
        int direct = 0;
        for (int i = 0; i < bp_kind_table_size(); i++) {
            const bp_kind_info *ki = bp_kind_at(i);
            if (ki->role == BP_ROLE_W) check_direct(direct_paths[p].fn, name, ki, &rng, &direct);
        }
        fprintf(stderr, "ISA %s: %d direct int8 panel decoders checked\n", name, direct);
        CHECK(direct == direct_paths[p].want, "%s: %d direct panel decoders found (%d expected)", name, direct, direct_paths[p].want);
    }
    return bp_test_finish();
}
