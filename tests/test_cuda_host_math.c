/* The CUDA kernels' per-kind arithmetic (src/cuda/cuda_kind_math.h), compiled by the C compiler
 * and checked against the CPU reference for every weight kind. Runs on every machine: this is
 * how the kernel math is tested where no GPU exists.
 *
 * - dequant: chunk unpack + bp_cu_chunk_dequant must equal bp_dequantize BIT FOR BIT (the
 *   chunk form performs the reference's IEEE operations in the reference's order), on random
 *   block bytes (scale fields made finite) and, where a quantizer exists, on quantized data.
 * - dot: the dp4a dot of a chunk against x quantized to q8 must equal the reference dot of the
 *   row against the DEQUANTIZED q8 activations (so q8 rounding is not part of the tolerance):
 *   |ours - ref| <= 1e-5 * sum|w*x| + 1e-30; float accumulation of integer sums is the only
 *   difference, a few ulps of each chunk's terms.
 * - coverage: the kernel kind lists cover every weight kind of backplane_kinds.def with the right block
 *   geometry (chunks * 32 == block_elems).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_kind_math.h"
#include "cuda_test_data.h"
#include "harness.h"

enum { NBLOCKS = 24 };

typedef void (*unpack_fn)(const uint8_t *, int, bp_cu_chunk *);

typedef struct kind_case {
    const char *name;
    bp_kind kind;
    int chunks;   /* per block; 0 for a float kind */
    int has_min;
    int esize;    /* float kinds: bytes per element */
    unpack_fn unpack;
} kind_case;

static const kind_case cases[] = {
#define QK(NAME, CPB, MIN) {#NAME, BP_KIND_##NAME, CPB, MIN, 0, bp_cu_unpack_##NAME},
    BP_CU_QUANT_KINDS(QK)
#undef QK
#define FK(NAME, ES) {#NAME, BP_KIND_##NAME, 0, 0, ES, NULL},
    BP_CU_FLOAT_KINDS(FK)
#undef FK
};
enum { NCASES = (int)(sizeof cases / sizeof cases[0]) };

static bool same_float(float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub || (isnan(a) && isnan(b));
}

/* Dequantize a row of `n` elements with the kernel math. */
static void kernel_dequant(const kind_case *kc, const bp_kind_info *ki, const uint8_t *row, int64_t n,
                           float *out) {
    if (!kc->unpack) {
        for (int64_t i = 0; i < n; i++) out[i] = bp_cu_float_elem(kc->esize, kc->kind == BP_KIND_BF16, row, (int)i);
        return;
    }
    for (int64_t b = 0; b < n / ki->block_elems; b++)
        for (int c = 0; c < kc->chunks; c++) {
            bp_cu_chunk ch;
            kc->unpack(row + b * ki->block_bytes, c, &ch);
            bp_cu_chunk_dequant(&ch, kc->has_min, out + b * ki->block_elems + 32 * c);
        }
}

/* The kernel's decode dot over a row; float kinds use the plain float path. Returns the dot and
 * writes the q8-dequantized activations the reference is given. */
static double kernel_dot(const kind_case *kc, const bp_kind_info *ki, const uint8_t *row, int64_t n,
                         const float *x, float *xr, double *absdot) {
    double acc = 0.0, mag = 0.0;
    if (!kc->unpack) {
        for (int64_t i = 0; i < n; i++) {
            const float w = bp_cu_float_elem(kc->esize, kc->kind == BP_KIND_BF16, row, (int)i);
            acc += (double)(w * x[i]);
            mag += fabs((double)w * x[i]);
            xr[i] = x[i];
        }
        *absdot = mag;
        return acc;
    }
    for (int64_t k = 0; k < n / 32; k++) {
        const int64_t b = k / kc->chunks;
        const int c = (int)(k % kc->chunks);
        bp_cu_chunk ch;
        bp_cu_xq xq;
        kc->unpack(row + b * ki->block_bytes, c, &ch);
        bp_cu_quantize_x32(x + 32 * k, &xq);
        acc += bp_cu_chunk_dot_q8(&ch, kc->has_min, &xq);
        float w[32];
        bp_cu_chunk_dequant(&ch, kc->has_min, w);
        for (int i = 0; i < 32; i++) {
            xr[32 * k + i] = xq.d * (float)(int8_t)(uint8_t)(xq.q[i >> 2] >> (8 * (i & 3)));
            mag += fabs((double)w[i] * xr[32 * k + i]);
        }
    }
    *absdot = mag;
    return acc;
}

static void check_kind(const kind_case *kc, uint64_t *st) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)kc->kind);
    CHECK(ki != NULL, "%s: not in the kind table", kc->name);
    if (!ki) return;
    const int64_t be = ki->block_elems == 1 ? 32 : ki->block_elems;
    const int64_t n = be * NBLOCKS;
    size_t rb = 0;
    CHECK_OK(bp_kind_row_bytes(kc->kind, n, &rb));
    uint8_t *row = calloc(rb, 1);
    float *ref = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    float *x = malloc(sizeof(float) * (size_t)n), *xr = malloc(sizeof(float) * (size_t)n);
    if (!row || !ref || !got || !x || !xr) {
        CHECK(0, "out of memory");
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0) {
            const size_t per = ki->block_elems == 1 ? 32 * ki->block_bytes : ki->block_bytes;
            for (int b = 0; b < NBLOCKS; b++) bp_cu_test_fill_block(kc->kind, row + b * per, st);
        } else {
            if (!ki->can_quantize) break;
            for (int64_t i = 0; i < n; i++) x[i] = bp_test_randf(st) * (i % 7 == 0 ? 4.0f : 1.0f);
            CHECK_OK(bp_quantize(kc->kind, x, n, row, rb));
        }
        CHECK_OK(bp_dequantize(kc->kind, row, rb, ref, n));
        kernel_dequant(kc, ki, row, n, got);
        int64_t bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++)
            if (!same_float(got[i], ref[i])) bad = i;
        CHECK(bad < 0, "%s (%s data): dequant differs at element %lld: kernel %.9g, reference %.9g",
              kc->name, pass ? "quantized" : "random-bytes", (long long)bad, bad < 0 ? 0.0 : got[bad],
              bad < 0 ? 0.0 : ref[bad]);

        for (int64_t i = 0; i < n; i++) x[i] = bp_test_randf(st);
        double mag = 0.0;
        const double ours = kernel_dot(kc, ki, row, n, x, xr, &mag);
        float refdot = 0.0f;
        CHECK_OK(bp_ref_dot(kc->kind, row, rb, xr, n, &refdot));
        const double tol = 1e-5 * mag + 1e-30;
        CHECK(fabs(ours - refdot) <= tol, "%s (%s data): dot %.9g vs reference %.9g (|diff| %.3g > tol %.3g)",
              kc->name, pass ? "quantized" : "random-bytes", ours, (double)refdot, fabs(ours - refdot), tol);
    }
out:
    free(row);
    free(ref);
    free(got);
    free(x);
    free(xr);
}

/* Every weight kind of backplane_kinds.def has kernel math, with chunks * 32 == block_elems. */
static void check_coverage(void) {
    int weights = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (ki->role != BP_ROLE_W) continue;
        weights++;
        const kind_case *kc = NULL;
        for (int j = 0; j < NCASES; j++)
            if (cases[j].kind == ki->kind) kc = &cases[j];
        CHECK(kc != NULL, "weight kind %s has no CUDA kernel math", ki->name);
        if (!kc) continue;
        if (kc->unpack)
            CHECK((uint32_t)kc->chunks * 32 == ki->block_elems, "%s: %d chunks of 32 != block of %u", ki->name,
                  kc->chunks, ki->block_elems);
        else
            CHECK(ki->block_elems == 1 && (uint32_t)kc->esize == ki->block_bytes, "%s: float kind geometry", ki->name);
    }
    CHECK(weights == NCASES, "backplane_kinds.def has %d weight kinds, the CUDA kernel lists %d", weights, NCASES);
}

int main(void) {
    uint64_t st = 0x9e3779b97f4a7c15ull;
    check_coverage();
    for (int i = 0; i < NCASES; i++) check_kind(&cases[i], &st);
    /* The q8 activation quantizer round-trips within half a step per element. */
    float xs[32];
    bp_cu_xq q;
    for (int i = 0; i < 32; i++) xs[i] = bp_test_randf(&st) * 3.0f;
    bp_cu_quantize_x32(xs, &q);
    int worst_ok = 1, s0 = 0;
    for (int i = 0; i < 32; i++) {
        const int v = (int8_t)(uint8_t)(q.q[i >> 2] >> (8 * (i & 3)));
        if (fabsf(q.d * (float)v - xs[i]) > 0.5001f * q.d) worst_ok = 0;
        if (i < 16) s0 += v;
    }
    CHECK(worst_ok, "q8 activation quantizer error exceeds half a step");
    CHECK(s0 == q.s[0], "q8 half sum %d != stored %d", s0, q.s[0]);
    return bp_test_finish();
}
