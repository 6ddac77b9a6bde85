/* AVX-512 VNNI prefill: an int8 GEMM for every quantized kind. Each panel of 16 weight rows is
 * dequantized once with the kind's dequantizer (as the f32 GEMM does) and then re-quantized to
 * int8 per block of QB columns; the inputs are quantized once per call to int8 per block of QB
 * (stored +128, since vpdpbusd multiplies unsigned by signed bytes; the +128 is taken back by
 * starting each block's sums at -128 * the weights' block sums). One vpdpbusd does 64
 * multiply-adds, four times an f32 FMA's 16, which is what lets prefill pass the f32 GEMM's
 * ceiling. The second rounding of the weights costs ~1e-5 NMSE on top of the kind's own error
 * (the tests hold it to 5e-4); the float kinds keep the exact f32 GEMM. Kinds whose weights are
 * small integers x a scale per 32 skip the f32 round trip and the second rounding at small and
 * mid batches (direct panels, below). */
#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#include <string.h>

#include "cpu/avx2/simd.h"
#include "cpu/avx512/simd.h"
#include "cpu/avx2/int8_direct.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The micro-kernel's tile: MR inputs x two 16-row panels (NW = 2 weight zmm per k4), so each
 * broadcast input dword feeds two vpdpbusd and each weight load MR: 2 loads + MR broadcasts per
 * 2 MR vpdpbusd, with 2 MR int and 2 MR f32 accumulators in registers (27 zmm at MR = 6). That
 * shape runs vpdpbusd at the core's peak (2 a clock); one weight zmm x 8 inputs (9 loads per 8)
 * did not.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/gemm_int8.c. */
enum { MR = 6, NR = 16, KC = BP_CPU_KC, PW = 2 * NR /* rows per panel pair */, GROUPS_PER_BLOCK = 86 /* ~512 inputs */ };

/* The T inputs in ceil(T / MR) groups of near-equal size (the first T % groups one larger), so
 * no group is a small remainder: t = 32 ran as 6+6+6+6+6+2, where the 2-input tile does 4
 * vpdpbusd per 4 loads; now 6+6+5+5+5+5. Group g: inputs [*t0, *t0 + *m). */
static ALWAYS_INLINE void group_of(int64_t T, int64_t g, int64_t *t0, int *m) {
    const int64_t G = (T + MR - 1) / MR, base = T / G, rem = T % G;
    *t0 = g * base + (g < rem ? g : rem);
    *m = (int)(base + (g < rem));
}

/* x (T x cols) -> u8 (q + 128), inputs in the groups of group_of and columns in
 * chunks of KC (the last may be shorter, kc wide): group g's m inputs stored input after input
 * within each chunk (column c of input i at t0 * cols + c0 m + i kc + c - c0), so a
 * micro-kernel's broadcasts read m * kc contiguous bytes instead of m rows 4 KB apart (which
 * share one L1 set). Then T x (cols / QB) float scales, then per input and 32 columns d x the sum of the quants
 * (the offset term of the direct panels, below). */
size_t bp_avx512_gemm_q8_bytes(int64_t T, int64_t cols) {
    return bp_cpu_q8_prep_bytes(T, cols) + sizeof(float) * (size_t)(T * (cols / 32));
}

void bp_avx512_gemm_q8_prep(const float *x, int64_t T, int64_t cols, void *buf) {
    const int qb = bp_cpu_q8_block(cols);
    uint8_t *q = buf;
    float *d = (float *)(void *)(q + (size_t)(T * cols));
    float *xs = d + T * (cols / qb);
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * cols;
        const int64_t G = (T + MR - 1) / MR, base = T / G, rem = T % G, big = rem * (base + 1);
        int64_t g0;
        int m;
        group_of(T, t < big ? t / (base + 1) : rem + (t - big) / base, &g0, &m);
        const int64_t i0 = t - g0;
        uint8_t *qg = q + g0 * cols;
        for (int64_t b = 0; b < cols / qb; b++) {
            const float *xb = xr + b * qb;
            __m512 mx = _mm512_setzero_ps();
            for (int i = 0; i < qb; i += 16) mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_loadu_ps(xb + i), absmask));
            float amax = _mm512_reduce_max_ps(mx);
            float id = amax > 0 ? 127.0f / amax : 0.0f;
            d[t * (cols / qb) + b] = amax / 127.0f;
            __m512 vid = _mm512_set1_ps(id);
            __m512i vs = _mm512_setzero_si512();
            for (int i = 0; i < qb; i += 16) {
                __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + i), vid));
                vs = _mm512_add_epi32(vs, v);
                if (i % 32 == 16) { /* the direct panels' offset term: d x the 32 quants' sum */
                    xs[t * (cols / 32) + (b * qb + i) / 32] = amax / 127.0f * (float)_mm512_reduce_add_epi32(vs);
                    vs = _mm512_setzero_si512();
                }
                __m128i b8 = _mm_xor_si128(_mm512_cvtepi32_epi8(v), _mm_set1_epi8((char)0x80));
                const int64_t c = b * qb + i, c0 = c / KC * KC, kc = cols - c0 < KC ? cols - c0 : KC;
                _mm_storeu_si128((__m128i *)(void *)(qg + c0 * m + i0 * kc + c - c0), b8);
            }
        }
    }
}

/* Scratch layout: rowbuf (NR x KC floats) | q8 rows (NR x KC bytes) | packed pair (KC / 4 x
 * PW dwords: per k4, rows 0-15 then 16-31) | scales [KC/32 x PW] | -128 x block sums [KC/32 x PW]
 * | offsets [KC/32 x PW] (direct panels of offset kinds only). */
typedef struct panel {
    float *rowbuf;
    int8_t *qrow;
    int8_t *pk;
    float *dw;
    int32_t *nws;
    float *ow;
} panel;

static panel panel_of(float *scratch) {
    panel p;
    p.rowbuf = scratch;
    p.qrow = (int8_t *)(scratch + NR * KC);
    p.pk = (int8_t *)(scratch + NR * KC + NR * KC / 4);
    p.dw = scratch + NR * KC + NR * KC / 4 + PW * KC / 4;
    p.nws = (int32_t *)(p.dw + KC / 32 * PW);
    p.ow = (float *)(p.nws + KC / 32 * PW);
    return p;
}
_Static_assert(NR * KC + NR * KC / 4 + PW * KC / 4 + 3 * (KC / 32) * PW <= BP_CPU_SCRATCH_FLOATS,
               "the int8 GEMM's panels fit the thread scratch");

/* Columns [k0, k0 + n) of the 16 rows in rowbuf (n = 64, or 32 at the last chunk of a kc that
 * is a multiple of 32 only) into half h (rows 16 h ..) of the packed pair: per QB block each
 * row's absmax (16 rows' partial maxima transposed and reduced together, not one horizontal
 * reduction per row), requantized to int8, transposed to k-major dwords in registers, and per
 * block -128 x each row's sum of quants (the +128 of the inputs, taken back where the block's
 * sums start). */
static ALWAYS_INLINE void pack_chunk(const int qb, const int n, const panel *pp, int h, int64_t k0) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512i c128 = _mm512_set1_epi8((char)0x80);
    int8_t *dst = pp->pk + h * 64;
    float ids[2][16]; /* per block of the chunk: 127 / each row's absmax */
    for (int s = 0; s < n / qb; s++) {
        const int kb = (int)k0 + s * qb;
        __m512i mx[16];
        for (int i = 0; i < NR; i++) {
            const float *w = pp->rowbuf + i * KC + kb;
            __m512 m = _mm512_and_ps(_mm512_loadu_ps(w), absmask);
            for (int k = 16; k < qb; k += 16) m = _mm512_max_ps(m, _mm512_and_ps(_mm512_loadu_ps(w + k), absmask));
            mx[i] = _mm512_castps_si512(m);
        }
        bp_transpose16_epi32(mx);
        __m512 amax = _mm512_castsi512_ps(mx[0]);
        for (int j = 1; j < 16; j++) amax = _mm512_max_ps(amax, _mm512_castsi512_ps(mx[j]));
        /* The same roundings as one row at a time: 127 / amax (0 for an all-zero block). */
        const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ),
                                              _mm512_set1_ps(127.0f), amax);
        _mm512_store_ps(pp->dw + kb / qb * PW + h * NR, _mm512_div_ps(amax, _mm512_set1_ps(127.0f)));
        _mm512_storeu_ps(ids[s], id);
    }
    /* Row i's 64 bytes: two saturating packs (exact: |q| <= 127) leave dword 4 L + v holding
     * columns 4 (4 v + L) .. of the row (v: which 16 columns, L: the 128-bit lane), so after
     * the transpose r[4 L + v] is k4 = k0 / 4 + 4 v + L for all 16 rows. */
    __m512i r[16];
    for (int i = 0; i < NR; i++) {
        const float *w = pp->rowbuf + i * KC + k0;
        __m512i q[4];
#pragma GCC unroll 4
        for (int v = 0; v < n / 16; v++)
            q[v] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(w + 16 * v), _mm512_set1_ps(ids[16 * v / qb][i])));
        r[i] = _mm512_packs_epi16(_mm512_packs_epi32(q[0], q[1]), n == 64 ? _mm512_packs_epi32(q[2], q[3]) : _mm512_setzero_si512());
    }
    bp_transpose16_epi32(r);
    /* Per block, four partial sums (one per lane L) so the vpdpbusd do not wait on each other. */
    __m512i sum[2][4];
#pragma GCC unroll 4
    for (int L = 0; L < 4; L++) sum[0][L] = sum[1][L] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int L = 0; L < 4; L++)
#pragma GCC unroll 4
        for (int v = 0; v < n / 16; v++) {
            const int k4 = 4 * v + L;
            _mm512_store_si512((void *)(dst + (k0 / 4 + k4) * 128), r[4 * L + v]);
            sum[k4 * 4 / qb][L] = _mm512_dpbusd_epi32(sum[k4 * 4 / qb][L], c128, r[4 * L + v]);
        }
    for (int s = 0; s < n / qb; s++) {
        const __m512i t = _mm512_add_epi32(_mm512_add_epi32(sum[s][0], sum[s][1]), _mm512_add_epi32(sum[s][2], sum[s][3]));
        _mm512_store_si512((void *)(pp->nws + (k0 + s * qb) / qb * PW + h * NR), _mm512_sub_epi32(_mm512_setzero_si512(), t));
    }
}

/* Rows [p, p + nr) x columns [c0, c0 + kc) dequantized (rows past nr zero) and packed. */
static void pack(const bp_cpu_job *job, const panel *pp, int h, int64_t p, int nr, int64_t c0, int64_t kc, int qb) {
    const int64_t be = job->kt->info.block_elems, bb = job->kt->info.block_bytes;
    for (int i = 0; i < nr; i++)
        job->dequant(job->w + (size_t)(p + i) * job->row_bytes + (size_t)(c0 / be * bb), pp->rowbuf + i * KC, kc / be);
    for (int i = nr; i < NR; i++) memset(pp->rowbuf + i * KC, 0, sizeof(float) * (size_t)kc);
    for (int64_t k0 = 0; k0 < kc; k0 += 64) {
        if (qb == 64) pack_chunk(64, 64, pp, h, k0);
        else if (kc - k0 >= 64) pack_chunk(32, 64, pp, h, k0);
        else pack_chunk(32, 32, pp, h, k0); /* kc is a multiple of 32 (of 64 when QB is) */
    }
}

/* ---- Direct panels: the kind's own integers, no f32 round trip ------------------------------
 * Why: at t = 32-64 the pack above (dequantize 16 rows to f32, absmax, requantize, transpose)
 * cost as much as ~36 inputs' micro-kernel time per panel, the dequantizers 2/3 of it. For kinds
 * whose weights are small integers q times a scale per 32 columns, plus an offset for some
 * (w = s q + o: Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS Q4_K Q5_K), a decoder writes q as int8
 * with s and o per 32 columns, and the pack is only the transpose. The micro-kernel then scales
 * per 32 columns (twice as often) and adds
 * o x (the input's d x its 32 quants' sum, from bp_avx512_gemm_q8_prep). The weights are not rounded a second
 * time, so results are closer to the reference than the requantized panels.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/gemm_int8.c. */
static void d8_q4_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q4_0, q += 32) {
        s[i] = f16(b);
        st32(q, _mm256_sub_epi8(nib32(b + 2), _mm256_set1_epi8(8)));
    }
}
/* Q5_0: bit j of qh is element j's fifth bit. */
static void d8_q5_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q5_0, q += 32) {
        s[i] = f16(b);
        st32(q, _mm256_sub_epi8(add_bit5(nib32(b + 6), b + 2), _mm256_set1_epi8(16)));
    }
}
/* Q2_0, 64 weights, one scale: element j is bits 2 (j % 4) of qs[j / 4], 0..3 meaning -1..2.
 * Each qs byte widened to a dword and OR-ed with itself shifted by 6, 12 and 18 puts its four
 * fields at the bottoms of the dword's four bytes, in element order. Without it Q2_0's panels
 * went through the reference dequantizer, at a third of the decode kernel's speed.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/gemm_int8.c. */
static void d8_q2_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q2_0, s += 2) {
        s[0] = s[1] = f16(b);
        for (int h = 0; h < 2; h++, q += 32) {
            __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + 8 * h)));
            v = _mm256_or_si256(_mm256_or_si256(v, _mm256_slli_epi32(v, 6)), _mm256_or_si256(_mm256_slli_epi32(v, 12), _mm256_slli_epi32(v, 18)));
            st32(q, _mm256_sub_epi8(_mm256_and_si256(v, _mm256_set1_epi8(3)), _mm256_set1_epi8(1)));
        }
    }
}
/* The direct decoder of kind k (NULL: requantized panels) up to batch *max_t, and whether it
 * has offsets. The offset kinds lose past t ~ 160 to the extra multiply-add per 32 columns;
 * IQ4_XS wins at every t; Q4_0 / Q8_0 are even with the requantized panels by t = 256-512.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/gemm_int8.c. */
static dq8_fn dq8_of(bp_kind k, bool *off, int64_t *max_t) {
    *off = k == BP_KIND_Q4_1 || k == BP_KIND_Q5_1 || k == BP_KIND_Q4_K || k == BP_KIND_Q5_K;
    *max_t = *off ? 160 : k == BP_KIND_IQ4_XS || k == BP_KIND_IQ4_NL ? INT64_MAX : 384;
    switch (k) {
    case BP_KIND_IQ2_XXS: return d8_iq2_xxs;
    case BP_KIND_IQ3_XXS: return d8_iq3_xxs;
    case BP_KIND_IQ3_S: return d8_iq3_s;
    case BP_KIND_Q8_0: return d8_q8_0;
    case BP_KIND_Q4_0: return d8_q4_0;
    case BP_KIND_Q2_0: return d8_q2_0;
    case BP_KIND_Q4_1: return d8_q4_1;
    case BP_KIND_Q5_0: return d8_q5_0;
    case BP_KIND_Q5_1: return d8_q5_1;
    case BP_KIND_IQ4_NL: return d8_iq4_nl;
    case BP_KIND_IQ4_XS: return d8_iq4_xs;
    case BP_KIND_Q4_K: return d8_q4_k;
    case BP_KIND_Q5_K: return d8_q5_k;
    default: return NULL;
    }
}

/* Rows [p, p + nr) x columns [c0, c0 + kc) decoded (rows past nr zero) into half h of the pair:
 * per 64 columns the 16 rows' bytes transposed to k-major dwords, and per 32 columns -128 x each
 * row's sum of q. */
static void pack_direct(const bp_cpu_job *job, dq8_fn fn, const panel *pp, int h, int64_t p, int nr, int64_t c0, int64_t kc) {
    const int64_t be = job->kt->info.block_elems, bb = job->kt->info.block_bytes;
    /* per row a record of 16 floats: s of the kc / 32 <= 8 groups, then o (written whole by the
     * Q4_K / Q5_K decoders, one zmm), transposed below into the [group][row] scale arrays */
    float *rec = pp->rowbuf;
    _Static_assert(KC / 32 <= 8, "a row's scales and offsets fit a 16-float record");
    for (int i = 0; i < nr; i++)
        fn(job->w + (size_t)(p + i) * job->row_bytes + (size_t)(c0 / be * bb), kc / be, pp->qrow + i * KC, rec + 16 * i);
    for (int i = nr; i < NR; i++) memset(pp->qrow + i * KC, 0, (size_t)kc);
    {
        __m512i r[16];
        for (int i = 0; i < NR; i++) r[i] = i < nr ? _mm512_castps_si512(_mm512_loadu_ps(rec + 16 * i)) : _mm512_setzero_si512();
        bp_transpose16_epi32(r);
        for (int64_t g = 0; g < kc / 32; g++) {
            _mm512_store_si512((void *)(pp->dw + g * PW + h * NR), r[g]);
            _mm512_store_si512((void *)(pp->ow + g * PW + h * NR), r[8 + g]);
        }
    }
    const __m512i c128 = _mm512_set1_epi8((char)0x80);
    int8_t *dst = pp->pk + h * 64;
    for (int64_t k0 = 0; k0 < kc; k0 += 64) {
        const int n = kc - k0 >= 64 ? 64 : 32;
        __m512i r[16];
        for (int i = 0; i < NR; i++)
            r[i] = n == 64 ? _mm512_loadu_si512((const void *)(pp->qrow + i * KC + k0))
                           : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(pp->qrow + i * KC + k0)));
        bp_transpose16_epi32(r);
        for (int s = 0; s < n / 32; s++) {
            __m512i a = _mm512_setzero_si512(), a2 = _mm512_setzero_si512();
            for (int j = 8 * s; j < 8 * s + 8; j += 2) {
                _mm512_store_si512((void *)(dst + (k0 / 4 + j) * 128), r[j]);
                _mm512_store_si512((void *)(dst + (k0 / 4 + j + 1) * 128), r[j + 1]);
                a = _mm512_dpbusd_epi32(a, c128, r[j]);
                a2 = _mm512_dpbusd_epi32(a2, c128, r[j + 1]);
            }
            _mm512_store_si512((void *)(pp->nws + (k0 / 32 + s) * PW + h * NR), _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_add_epi32(a, a2)));
        }
    }
}

/* y[M inputs x NW * 16 rows] (+)= one packed pair x one group of inputs over nblk blocks of QB
 * columns. Per block the int sums start at -128 x the weights' sums and are scaled once, by the
 * block's weight scale and the input's d of the activation block holding it (xd[b >> qsh]: the
 * direct panels' 32-column blocks under 64-column activation blocks), plus for offset kinds
 * (OFF, direct panels) the block's offset x the input's d x quant sum (xs). */
static ALWAYS_INLINE void micro(const int NW, const int M, const int QB, const bool OFF, const int8_t *pk, const uint8_t *xg,
                                int64_t ldx, const float *xd, int64_t ldd, int qsh, const float *xs, int64_t lds, int nblk,
                                const float *dw, const int32_t *nws, const float *ow, float *y, int64_t ldy, __mmask16 m0,
                                __mmask16 m1, int first) {
    __m512 accf[2][MR];
    __m512i acci[2][MR];
    const __mmask16 mk[2] = {m0, m1};
#pragma GCC unroll 8
    for (int i = 0; i < M; i++)
#pragma GCC unroll 2
        for (int r = 0; r < NW; r++)
            accf[r][i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk[r], y + i * ldy + r * NR);
    for (int b = 0; b < nblk; b++) {
#pragma GCC unroll 2
        for (int r = 0; r < NW; r++) {
            const __m512i s0 = _mm512_load_si512((const void *)(nws + b * PW + r * NR));
#pragma GCC unroll 8
            for (int i = 0; i < M; i++) acci[r][i] = s0;
        }
        const int8_t *pb = pk + (size_t)b * (QB / 4) * 128;
        const uint8_t *xb = xg + (size_t)b * QB;
#pragma GCC unroll 16
        for (int k4 = 0; k4 < QB / 4; k4++) {
            __m512i wv[2];
#pragma GCC unroll 2
            for (int r = 0; r < NW; r++) wv[r] = _mm512_load_si512((const void *)(pb + k4 * 128 + r * 64));
#pragma GCC unroll 8
            for (int i = 0; i < M; i++) {
                int32_t xv;
                memcpy(&xv, xb + i * ldx + 4 * k4, 4);
                const __m512i xb4 = _mm512_set1_epi32(xv);
#pragma GCC unroll 2
                for (int r = 0; r < NW; r++) acci[r][i] = _mm512_dpbusd_epi32(acci[r][i], xb4, wv[r]);
            }
        }
#pragma GCC unroll 2
        for (int r = 0; r < NW; r++) {
            const __m512 dv = _mm512_load_ps(dw + b * PW + r * NR);
#pragma GCC unroll 8
            for (int i = 0; i < M; i++)
                accf[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acci[r][i]), _mm512_mul_ps(dv, _mm512_set1_ps(xd[i * ldd + (b >> qsh)])),
                                             accf[r][i]);
            if (OFF) {
                const __m512 ov = _mm512_load_ps(ow + b * PW + r * NR);
#pragma GCC unroll 8
                for (int i = 0; i < M; i++) accf[r][i] = _mm512_fmadd_ps(ov, _mm512_set1_ps(xs[i * lds + b]), accf[r][i]);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < M; i++)
#pragma GCC unroll 2
        for (int r = 0; r < NW; r++) _mm512_mask_storeu_ps(y + i * ldy + r * NR, mk[r], accf[r][i]);
}

#define MICRO_M(NW, QB, OFF)                                                                                             \
    switch (m) {                                                                                                         \
    case 6: micro(NW, 6, QB, OFF, pk, xg, ldx, xd, ldd, qsh, xs, lds, nblk, dw, nws, ow, y, ldy, m0, m1, first); break;   \
    case 5: micro(NW, 5, QB, OFF, pk, xg, ldx, xd, ldd, qsh, xs, lds, nblk, dw, nws, ow, y, ldy, m0, m1, first); break;   \
    case 4: micro(NW, 4, QB, OFF, pk, xg, ldx, xd, ldd, qsh, xs, lds, nblk, dw, nws, ow, y, ldy, m0, m1, first); break;   \
    case 3: micro(NW, 3, QB, OFF, pk, xg, ldx, xd, ldd, qsh, xs, lds, nblk, dw, nws, ow, y, ldy, m0, m1, first); break;   \
    case 2: micro(NW, 2, QB, OFF, pk, xg, ldx, xd, ldd, qsh, xs, lds, nblk, dw, nws, ow, y, ldy, m0, m1, first); break;   \
    default: micro(NW, 1, QB, OFF, pk, xg, ldx, xd, ldd, qsh, xs, lds, nblk, dw, nws, ow, y, ldy, m0, m1, first); break;  \
    }
_Static_assert(MR == 6, "MICRO_M lists the cases 1 .. MR");

/* The instantiations: requantized panels (QB 64 or 32, no offsets) and direct ones (32, either). */
static void micro_any(int nw, int qb, bool off, int m, const int8_t *pk, const uint8_t *xg, int64_t ldx, const float *xd, int64_t ldd,
                      int qsh, const float *xs, int64_t lds, int nblk, const float *dw, const int32_t *nws, const float *ow,
                      float *y, int64_t ldy, __mmask16 m0, __mmask16 m1, int first) {
    if (nw == 2) {
        if (qb == 64) {
            MICRO_M(2, 64, false)
        } else if (off) {
            MICRO_M(2, 32, true)
        } else {
            MICRO_M(2, 32, false)
        }
    } else if (qb == 64) {
        MICRO_M(1, 64, false)
    } else if (off) {
        MICRO_M(1, 32, true)
    } else {
        MICRO_M(1, 32, false)
    }
}

/* One panel pair (rows p, p + 16; the second absent when nr1 = 0; the last pair of a range may be
 * one panel) x one depth block, for the input groups [g0, g1). Every (row, input) sums its blocks in the same
 * order whatever the tile or loop order, so neither the thread split nor the batch grouping can
 * change a bit. */
static void pair_block(const bp_cpu_job *job, const panel *pp, int64_t p, int nr0, int nr1, int64_t c0, int64_t g0,
                       int64_t g1) {
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    const int64_t kc = cols - c0 < KC ? cols - c0 : KC;
    const int qb = bp_cpu_q8_block(cols);
    const uint8_t *xq = job->xq;
    const float *xd = (const float *)(const void *)(xq + (size_t)(T * cols));
    const int64_t ldd = cols / qb;
    const __mmask16 m0 = (__mmask16)((1u << nr0) - 1), m1 = (__mmask16)((1u << nr1) - 1);
    bool off;
    int64_t max_t;
    const dq8_fn d8 = dq8_of(job->kt->info.kind, &off, &max_t);
    if (d8 && T <= max_t) {
        pack_direct(job, d8, pp, 0, p, nr0, c0, kc);
        if (nr1) pack_direct(job, d8, pp, 1, p + NR, nr1, c0, kc);
        const float *xs = xd + T * ldd;
        const int64_t lds = cols / 32;
        for (int64_t g = g0; g < g1; g++) {
            int64_t t0;
            int m;
            group_of(T, g, &t0, &m);
            micro_any(nr1 ? 2 : 1, 32, off, m, pp->pk, xq + t0 * cols + c0 * m, kc, xd + t0 * ldd + c0 / qb, ldd, qb == 64,
                      xs + t0 * lds + c0 / 32, lds, (int)(kc / 32), pp->dw, pp->nws, pp->ow, job->y + t0 * rows + p, rows, m0, m1,
                      c0 == 0);
        }
        return;
    }
    pack(job, pp, 0, p, nr0, c0, kc, qb);
    if (nr1) pack(job, pp, 1, p + NR, nr1, c0, kc, qb);
    for (int64_t g = g0; g < g1; g++) {
        int64_t t0;
        int m;
        group_of(T, g, &t0, &m);
        micro_any(nr1 ? 2 : 1, qb, false, m, pp->pk, xq + t0 * cols + c0 * m, kc, xd + t0 * ldd + c0 / qb, ldd, 0, NULL, 0,
                  (int)(kc / qb), pp->dw, pp->nws, NULL, job->y + t0 * rows + p, rows, m0, m1, c0 == 0);
    }
}

/* Loop order: panel pairs outside, depth blocks inside, so each weight row is read front to back
 * (a few streams the prefetcher follows) and the quantized inputs come from L2/L3 once per pair.
 * With depth blocks outside, the next block of a row was needed only after every panel of the
 * chunk and came from memory. Past ~512 inputs (8 MB of inputs re-read per pair at t = 2048)
 * the inputs go in blocks (bp_batch_block), ~10% at t = 1024-2048.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/gemm_int8.c. */
void bp_avx512_gemm_q8(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    const panel pp = panel_of(job->scratch[ith]);
    /* Input groups in blocks of ~512 inputs (bp_batch_block; t = 2048 above). */
    const int64_t ngroups = (job->batch + MR - 1) / MR, per = bp_batch_block(ngroups, GROUPS_PER_BLOCK, 1);
    for (int64_t g0 = 0; g0 < ngroups; g0 += per) {
        const int64_t g1 = ngroups - g0 < per ? ngroups : g0 + per;
        for (int64_t p = r0; p < r1; p += PW) {
            const int nr0 = r1 - p < NR ? (int)(r1 - p) : NR;
            const int nr1 = r1 - p <= NR ? 0 : r1 - p - NR < NR ? (int)(r1 - p - NR) : NR;
            for (int64_t c0 = 0; c0 < job->cols; c0 += KC) pair_block(job, &pp, p, nr0, nr1, c0, g0, g1);
        }
    }
}

/* Panel dequantizers for the kinds with no fast one on the AVX2 path (IQ1_S, IQ1_M: the
 * reference's scalar loop cost as much as the whole int8 GEMM at t = 64). Per 16 weights: two
 * grid rows widened to f32, + delta, x the group's scale: the reference's operations in its
 * order, so the values are the same bits. */
static ALWAYS_INLINE void put16_iq1(float *dst, uint64_t g0, uint64_t g1, float dl, float dt0, float dt1) {
    const __m512 g = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_set_epi64x((long long)g1, (long long)g0)));
    const __m512 dt = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(dt0), _mm512_set1_ps(dt1));
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_set1_ps(dl), _mm512_add_ps(g, dt)));
}

/* IQ1_S, 50 bytes: f16 d; 32 low index bytes at 2; per 32 weights a u16 at 34: four 3-bit high
 * index parts, a 3-bit scale (2 s + 1), the delta sign (bit 15). */
void bp_avx512_dq_iq1_s(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ1_S) {
        const float d = bp_f16_to_f32(bp_load_u16(b));
        for (int ib = 0; ib < 8; ib++, dst += 32) {
            const unsigned qh = bp_load_u16(b + 34 + 2 * ib);
            const float dl = d * (float)(2u * ((qh >> 12) & 7u) + 1u);
            const float dt = (qh & 0x8000u) ? -BP_IQ1S_DELTA : BP_IQ1S_DELTA;
            const uint8_t *q = b + 2 + 4 * ib;
            put16_iq1(dst, bp_iq1s_grid[q[0] | ((qh & 7u) << 8)], bp_iq1s_grid[q[1] | (((qh >> 3) & 7u) << 8)], dl, dt, dt);
            put16_iq1(dst + 16, bp_iq1s_grid[q[2] | (((qh >> 6) & 7u) << 8)], bp_iq1s_grid[q[3] | (((qh >> 9) & 7u) << 8)],
                      dl, dt, dt);
        }
    }
}

/* IQ1_M, 56 bytes: 32 low index bytes; 16 qh bytes at 32, a nibble per 8 weights (3 high index
 * bits, the delta sign); 4 u16 at 48: sixteen 3-bit scales (2 s + 1, one per 16 weights) and in
 * their top nibbles the f16 d. */
void bp_avx512_dq_iq1_m(const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < nblocks; i++, b += BP_BLOCK_BYTES_IQ1_M) {
        uint16_t sc[4];
        for (int k = 0; k < 4; k++) sc[k] = bp_load_u16(b + 48 + 2 * k);
        const float d = bp_f16_to_f32((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0u) | ((sc[2] >> 4) & 0x0f00u) |
                                                 (sc[3] & 0xf000u)));
        for (int s = 0; s < 16; s++, dst += 16) {
            const float dl = d * (float)(2u * ((sc[s / 4] >> (3 * (s % 4))) & 7u) + 1u);
            const unsigned qh = b[32 + s];
            put16_iq1(dst, bp_iq1s_grid[b[2 * s] | ((qh & 7u) << 8)], bp_iq1s_grid[b[2 * s + 1] | (((qh >> 4) & 7u) << 8)],
                      dl, (qh & 8u) ? -BP_IQ1M_DELTA : BP_IQ1M_DELTA, (qh & 0x80u) ? -BP_IQ1M_DELTA : BP_IQ1M_DELTA);
        }
    }
}

bool bp_cpu_avx512_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out) {
    bool off;
    int64_t max_t;
    const dq8_fn fn = dq8_of(k, &off, &max_t);
    return dq8_to_float(fn, off, k, blocks, nblocks, out);
}

#else
bool bp_cpu_avx512_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out) {
    (void)k, (void)blocks, (void)nblocks, (void)out;
    return false;
}
#endif
