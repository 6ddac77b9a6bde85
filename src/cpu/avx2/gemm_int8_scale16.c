/* AVX2 prefill, the int8 panel GEMM (avx2/gemm_int8.c) for the 256-element kinds whose weights are
 * small integers with an integer scale per 16 columns (Q6_K Q3_K Q2_K IQ2_XS IQ2_S IQ1_M) or per
 * 32 (IQ1_S Q5_K IQ2_XXS IQ3_XXS IQ3_S) under a float super-block scale d. A row's own integers
 * are packed as they are, and the sub-block scale costs nothing: the int16 pairs of vpmaddubsw
 * are summed over S k4 steps (4 S columns, within one scale group), then the widening vpmaddwd
 * multiplies by a vector of the 16 rows' int16 scales instead of ones. The int32 sums run over
 * the activation's 64-column block, then one float multiply by d_w d_x.
 *   Unsigned panels (stored q' = q + m, offset -m sc per group: Q6_K 0..63 m 32, Q3_K 0..7 m 4,
 *     IQ1 0..18 m 9, IQ3_S 0..30 m 15; Q2_K 0..3 and Q5_K 0..31 with their mins): q' is
 *     vpmaddubsw's unsigned operand as it is (no vpsignb); the offset goes through the input's
 *     int16 sums per 16 columns (prep in avx2/gemm_int8.c), one more vpmaddwd per two groups. Where
 *     the offset is an integer multiple of the same d it is added to the int32 sums (the dot is
 *     exact in integers); Q2_K's and Q5_K's mins have their own dmin and float step.
 *   Signed panels (IQ2_XS IQ2_S IQ2_XXS: magnitudes up to 43, IQ3_XXS up to 62, explicit or
 *     table signs): the sign trick of the requantized panels (|w| unsigned, the activation
 *     takes w's sign).
 * int16 range (|x| <= 127), a lane sums S pairs: S = 2: Q6_K 2 x 2 x 63 x 127 = 32004, IQ3_XXS
 * 31496, IQ2 21844; S = 4: Q5_K 4 x 2 x 31 x 127 = 31496, IQ3_S 30480, IQ1 18288, Q3_K, Q2_K.
 * An int32 sum of a block: Q6_K |sc| <= 128, 8 x 128 x 32004 + offsets < 2^31.
 * The weights are not rounded a second time, so the results are closer to the reference than
 * the requantized panels' (same tolerance.def gemm QUANT bound, test_cpu_kernels). */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"
#include "cpu/avx2/int8_direct.h"

/* QB: the activations' quant block (bp_cpu_q8_block: 64 for every 256-element kind). */
enum { NR = BP_CPU_NR, KC = BP_CPU_KC, QB = 64, MR = 4 };
_Static_assert(KC == 256, "one super-block of 256 a KC chunk: d_w is one float per row a panel");

/* One 256-element block -> q[256] (unsigned q' or signed q), per 16 columns the int16 scale sc
 * and offset of, and dd[0] = d, dd[1] = the offset's multiplier (d itself but for Q2_K's dmin):
 * w_j = d sc q_j + dd[1] of. */
typedef void (*dq16_fn)(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd);

/* Q6_K: the 6-bit values (stored + 32), int8 scales. */
static void d16_q6_k(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    for (int h = 0; h < 2; h++) {
        __m256i v[4];
        q6_k_half(b, h, v);
        for (int k = 0; k < 4; k++) st32(q + 128 * h + 32 * k, v[k]);
    }
    for (int g = 0; g < 16; g++) {
        sc[g] = (int8_t)b[192 + g];
        of[g] = (int16_t)(-32 * sc[g]);
    }
    dd[0] = dd[1] = f16(b + 208);
}

/* Q3_K: element 32 j + l (j = 4 p + s): bits 2 s of qs[32 p + l], + 4 where bit j of hmask[l]
 * is set (a clear bit is "minus 4": q' = q + 4); 6-bit scales - 32. */
static void d16_q3_k(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    Q3_K_GROUPS(b, g, v, st32(q + 32 * g, v));
    const __m256i s16 = scales_q3_k(b + 96);
    _mm256_storeu_si256((__m256i *)(void *)sc, s16);
    _mm256_storeu_si256((__m256i *)(void *)of, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 2)));
    dd[0] = dd[1] = f16(b + 108);
}

/* Q2_K: the 2-bit q as they are; scale the low nibble, min the high one (times dmin). */
static void d16_q2_k(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    Q2_K_GROUPS(b, g, v, st32(q + 32 * g, v));
    for (int g = 0; g < 16; g++) {
        sc[g] = b[g] & 15;
        of[g] = (int16_t)-(b[g] >> 4);
    }
    dd[0] = f16(b + 80);
    dd[1] = f16(b + 82);
}

/* IQ2_XS / IQ2_S: signed grid values; the reference's d (0.5 + s) 0.25 as (d / 8)(2 s + 1). */
static ALWAYS_INLINE void iq2_scales(const uint8_t *s4, int16_t *sc, int16_t *of) {
    for (int g = 0; g < 16; g++) {
        sc[g] = (int16_t)(2 * ((s4[g / 2] >> (4 * (g % 2))) & 15) + 1);
        of[g] = 0;
    }
}
static void d16_iq2_xs(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    for (int ib = 0; ib < 8; ib++) {
        uint16_t u[4];
        for (int l = 0; l < 4; l++) u[l] = bp_load_u16(b + 2 + 8 * ib + 2 * l);
        const __m256i v = grid4(GRID4_INSERT, bp_iq2xs_grid, u[0] & 511u, u[1] & 511u, u[2] & 511u, u[3] & 511u);
        const uint32_t sg = (uint32_t)bp_ksigns_iq2xs[u[0] >> 9] | (uint32_t)bp_ksigns_iq2xs[u[1] >> 9] << 8 |
                            (uint32_t)bp_ksigns_iq2xs[u[2] >> 9] << 16 | (uint32_t)bp_ksigns_iq2xs[u[3] >> 9] << 24;
        st_signed(q + 32 * ib, v, sg);
    }
    iq2_scales(b + 66, sc, of);
    dd[0] = dd[1] = f16(b) * 0.125f;
}
/* IQ2_S: group k of 8: index qs[k] | 2 bits of qh[k / 4] << 8, one explicit sign bit a weight. */
static void d16_iq2_s(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    for (int ib = 0; ib < 8; ib++) {
        const unsigned qh = b[66 + ib];
        const uint8_t *qs = b + 2 + 4 * ib;
        const __m256i v = grid4(GRID4_INSERT, bp_iq2s_grid, qs[0] | (qh & 3u) << 8, qs[1] | (qh >> 2 & 3u) << 8,
                                qs[2] | (qh >> 4 & 3u) << 8, qs[3] | (qh >> 6 & 3u) << 8);
        st_signed(q + 32 * ib, v, bp_load_u32(b + 34 + 4 * ib));
    }
    iq2_scales(b + 74, sc, of);
    dd[0] = dd[1] = f16(b) * 0.125f;
}

/* IQ1_S / IQ1_M: w = d (2 s + 1)(g + delta), g in {-1, 0, 1}, delta +-1/8, as (d / 8)(2 s + 1)
 * (8 g +- 1), stored + 9: q' = 8 (g + 1) + (delta > 0 ? 2 : 0) in 0..18. The grid rows' bytes are
 * -1, 0, 1: + 1 and a 16-bit shift by 3 cannot carry across bytes (2 << 3 = 16). */
static ALWAYS_INLINE __m256i iq1_q(__m256i g, __m256i add) {
    return _mm256_add_epi8(_mm256_slli_epi16(_mm256_add_epi8(g, _mm256_set1_epi8(1)), 3), add);
}
/* IQ1_S: per 32 weights a u16: four 3-bit index high parts, the 3-bit scale, the delta's sign. */
static void d16_iq1_s(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    for (int ib = 0; ib < 8; ib++) {
        const unsigned qh = bp_load_u16(b + 34 + 2 * ib);
        const uint8_t *qs = b + 2 + 4 * ib;
        const __m256i v = grid4(GRID4_INSERT, bp_iq1s_grid, qs[0] | (qh & 7u) << 8, qs[1] | (qh >> 3 & 7u) << 8,
                                qs[2] | (qh >> 6 & 7u) << 8, qs[3] | (qh >> 9 & 7u) << 8);
        st32(q + 32 * ib, iq1_q(v, _mm256_set1_epi8(qh & 0x8000u ? 0 : 2)));
        sc[2 * ib] = sc[2 * ib + 1] = (int16_t)(2 * ((qh >> 12) & 7u) + 1);
        of[2 * ib] = of[2 * ib + 1] = (int16_t)(-9 * sc[2 * ib]);
    }
    dd[0] = dd[1] = f16(b) * 0.125f;
}
/* IQ1_M: per 8 weights a qh nibble (3 index bits, the delta's sign); sixteen 3-bit scales and
 * the f16 d's four nibbles in the top nibbles of the 4 u16 at 48. */
static void d16_iq1_m(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    unsigned s4[4];
    for (int k = 0; k < 4; k++) s4[k] = bp_load_u16(b + 48 + 2 * k);
    for (int ib = 0; ib < 8; ib++) {
        const unsigned qh = bp_load_u16(b + 32 + 2 * ib); /* nibble l: group 4 ib + l */
        long long g[4], a[4];
        for (int l = 0; l < 4; l++) {
            const unsigned nib = (qh >> (4 * l)) & 15u;
            g[l] = (long long)bp_iq1s_grid[b[4 * ib + l] | (nib & 7u) << 8];
            a[l] = nib & 8u ? 0 : 0x0202020202020202ll;
        }
        st32(q + 32 * ib, iq1_q(_mm256_setr_epi64x(g[0], g[1], g[2], g[3]), _mm256_setr_epi64x(a[0], a[1], a[2], a[3])));
    }
    for (int s = 0; s < 16; s++) {
        sc[s] = (int16_t)(2 * ((s4[s / 4] >> (3 * (s % 4))) & 7u) + 1);
        of[s] = (int16_t)(-9 * sc[s]);
    }
    const uint16_t dbits = (uint16_t)((s4[0] >> 12) | ((s4[1] >> 8) & 0x00f0u) | ((s4[2] >> 4) & 0x0f00u) | (s4[3] & 0xf000u));
    dd[0] = dd[1] = _cvtsh_ss(dbits) * 0.125f;
}

/* Kinds with a scale per 32 columns that also gain from summing in int16 before one scaled
 * widening (their avx2/gemm_int8.c direct panels widen every k4 step): q from the shared decoders of
 * avx2/int8_direct.h, the integer scales read again from the block, each for both of its 16-groups. */
/* Q5_K: 0..31, 6-bit scales and mins (x dmin). */
static void d16_q5_k(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    float s[16];
    d8_q5_k(b, 1, q, s);
    uint8_t sm[16];
    _mm_storeu_si128((__m128i *)(void *)sm, scale_min_k4v(b + 4));
    for (int g = 0; g < 16; g++) {
        sc[g] = sm[g / 2];
        of[g] = (int16_t)-sm[8 + g / 2];
    }
    dd[0] = f16(b);
    dd[1] = f16(b + 2);
}
/* IQ3_XXS: signed grid values up to 62 (S = 2: 2 x 2 x 62 x 127 = 31496), d (0.5 + s) 0.5 as
 * (d / 4)(2 s + 1), s in the top 4 bits of the group's u32 at 66. */
static void d16_iq3_xxs(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    float s[8];
    d8_iq3_xxs(b, 1, q, s);
    for (int g = 0; g < 16; g++) {
        sc[g] = (int16_t)(2 * (bp_load_u32(b + 66 + 4 * (g / 2)) >> 28) + 1);
        of[g] = 0;
    }
    dd[0] = dd[1] = f16(b) * 0.25f;
}
/* IQ2_XXS: signed grid values up to 43 (as IQ2_XS), the scale in the top 4 bits of each
 * 32-weight group's u32. */
static void d16_iq2_xxs(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    float s[8];
    d8_iq2_xxs(b, 1, q, s);
    for (int g = 0; g < 16; g++) {
        sc[g] = (int16_t)(2 * (bp_load_u32(b + 2 + 8 * (g / 2) + 4) >> 28) + 1);
        of[g] = 0;
    }
    dd[0] = dd[1] = f16(b) * 0.125f;
}
/* IQ3_S: signed magnitudes 1..15 made unsigned, + 15 in 0..30 (S = 4: 30480), scale 1 + 2 s. */
static void d16_iq3_s(const uint8_t *b, int8_t *q, int16_t *sc, int16_t *of, float *dd) {
    float s[8];
    d8_iq3_s(b, 1, q, s);
    for (int k = 0; k < 256; k += 32) st32(q + k, _mm256_add_epi8(load32(q + k), _mm256_set1_epi8(15)));
    for (int g = 0; g < 16; g++) {
        sc[g] = (int16_t)(1 + 2 * ((b[106 + g / 4] >> (4 * (g / 2 % 2))) & 15));
        of[g] = (int16_t)(-15 * sc[g]);
    }
    dd[0] = dd[1] = f16(b);
}

/* The decoder of kind k (NULL: not a kind of these panels), whether it is signed (sign trick, no
 * offsets), the k4 steps S its int16 sums span, and whether its offset has its own multiplier.
 * Every kind listed runs faster on these panels than requantized. Q4_K keeps avx2/gemm_int8.c's
 * panels: |q| <= 15 lets them sum 32 columns in int16 and widen once by ones, fewer multiplies
 * than a scaled widening per 16.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/gemm_int8_scale16.c. */
static dq16_fn d16_of(bp_kind k, bool *sg, int *S, bool *sep) {
    *sg = *sep = false;
    *S = 4;
    switch (k) {
    case BP_KIND_Q6_K: *S = 2; return d16_q6_k;
    case BP_KIND_Q3_K: return d16_q3_k;
    case BP_KIND_Q2_K: *sep = true; return d16_q2_k;
    case BP_KIND_IQ1_S: return d16_iq1_s;
    case BP_KIND_IQ1_M: return d16_iq1_m;
    case BP_KIND_IQ2_XS: *sg = true, *S = 2; return d16_iq2_xs;
    case BP_KIND_IQ2_S: *sg = true, *S = 2; return d16_iq2_s;
    case BP_KIND_Q5_K: *sep = true; return d16_q5_k;
    case BP_KIND_IQ3_S: return d16_iq3_s;
    case BP_KIND_IQ2_XXS: *sg = true, *S = 2; return d16_iq2_xxs;
    case BP_KIND_IQ3_XXS: *sg = true, *S = 2; return d16_iq3_xxs;
    default: return NULL;
    }
}

bool bp_cpu_avx2g16_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out) {
    bool sg, sep;
    int S;
    const dq16_fn fn = d16_of(k, &sg, &S, &sep);
    const bp_kind_traits *kt = bp_kind_traits_of(k);
    if (!fn || !kt) return false;
    for (int64_t i = 0; i < nblocks; i++, out += 256) {
        int8_t q[256];
        int16_t sc[16], of[16];
        float dd[2];
        fn((const uint8_t *)blocks + (size_t)i * kt->info.block_bytes, q, sc, of, dd);
        for (int j = 0; j < 256; j++)
            out[j] = sep ? dd[0] * (float)(sc[j / 16] * q[j]) + dd[1] * (float)of[j / 16] : dd[0] * (float)(sc[j / 16] * q[j] + of[j / 16]);
    }
    return true;
}

/* Scratch bytes: q rows [NR][KC] | w, |w| (k4-major as avx2/gemm_int8.c's: dword (k4, i) = row i's
 * bytes 4 k4 .. 4 k4 + 3) | sc [KC / 16][2][16] int16: group g, row half h, row 8 h + j's scale
 * in lanes 2 j and 2 j + 1 (one vpmaddwd scales both of a row's int16 pairs) | of [KC / 32][2][16]:
 * groups 2 gp and 2 gp + 1's offsets of row 8 h + j in lanes 2 j, 2 j + 1 (against the input's
 * int16 sums of the two groups, one dword) | d, dm [NR] | the decoders' per-row records. */
typedef struct panel16 {
    int8_t *qrow, *w, *aw;
    int16_t *sc, *of, *rsc, *rof;
    float *d, *dm, *rdd;
} panel16;

static panel16 panel16_of(float *scratch) {
    panel16 p;
    p.qrow = (int8_t *)(void *)scratch;
    p.w = p.qrow + NR * KC;
    p.aw = p.w + NR * KC;
    p.sc = (int16_t *)(void *)(p.aw + NR * KC);
    p.of = p.sc + KC / 16 * 2 * 16;
    p.rsc = p.of + KC / 32 * 2 * 16;
    p.rof = p.rsc + NR * 16;
    p.d = (float *)(void *)(p.rof + NR * 16);
    p.dm = p.d + NR;
    p.rdd = p.dm + NR;
    return p;
}
_Static_assert(3 * NR * KC + 2 * (KC / 16 * 32 + KC / 32 * 32 + 2 * NR * 16) + 4 * 4 * NR <= 4 * BP_CPU_SCRATCH_FLOATS,
               "the per-16 panel fits the thread scratch");

/* Rows [p, p + nr) of the KC chunk at column c0 decoded (rows past nr zero) and transposed. */
static void pack16(const bp_cpu_job *job, dq16_fn fn, bool sg, const panel16 *pp, int64_t p, int nr, int64_t c0) {
    const size_t bb = job->kt->info.block_bytes;
    for (int i = 0; i < NR; i++) {
        if (i < nr) {
            fn(job->w + (size_t)(p + i) * job->row_bytes + (size_t)(c0 / KC) * bb, pp->qrow + i * KC, pp->rsc + 16 * i, pp->rof + 16 * i,
               pp->rdd + 2 * i);
        } else {
            memset(pp->qrow + i * KC, 0, KC);
            memset(pp->rsc + 16 * i, 0, 32);
            memset(pp->rof + 16 * i, 0, 32);
            pp->rdd[2 * i] = pp->rdd[2 * i + 1] = 0.0f;
        }
    }
    /* a row's 16 int16 scales (offsets) are 8 dwords: transposed, register k holds dword k (the
     * scales of groups 2 k, 2 k + 1; the offsets of pair k as they are) of each of 8 rows */
    const __m256i dup_lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i dup_hi = _mm256_add_epi8(dup_lo, _mm256_set1_epi8(2));
    for (int h = 0; h < 2; h++) {
        __m256i r[8], o[8];
        for (int j = 0; j < 8; j++) {
            r[j] = load32(pp->rsc + 16 * (8 * h + j));
            o[j] = load32(pp->rof + 16 * (8 * h + j));
        }
        transpose8(r);
        transpose8(o);
        for (int k = 0; k < 8; k++) {
            _mm256_storeu_si256((__m256i *)(void *)(pp->sc + (2 * (2 * k) + h) * 16), _mm256_shuffle_epi8(r[k], dup_lo));
            _mm256_storeu_si256((__m256i *)(void *)(pp->sc + (2 * (2 * k + 1) + h) * 16), _mm256_shuffle_epi8(r[k], dup_hi));
            _mm256_storeu_si256((__m256i *)(void *)(pp->of + (2 * k + h) * 16), o[k]);
        }
    }
    for (int i = 0; i < NR; i++) {
        pp->d[i] = pp->rdd[2 * i];
        pp->dm[i] = pp->rdd[2 * i + 1];
    }
    for (int g = 0; g < KC / 32; g++)
        for (int h = 0; h < 2; h++) {
            __m256i r[8];
            for (int i = 0; i < 8; i++) r[i] = load32(pp->qrow + (8 * h + i) * KC + 32 * g);
            transpose8(r);
            const size_t off = (size_t)g * 8 * NR * 4 + 32 * h; /* dword (k4 = 8 g, 8 h) */
            for (int j = 0; j < 8; j++) {
                _mm256_store_si256((__m256i *)(void *)(pp->w + off + 64 * j), r[j]);
                if (sg) _mm256_store_si256((__m256i *)(void *)(pp->aw + off + 64 * j), _mm256_abs_epi8(r[j]));
            }
        }
}

/* tile[M x 16] += one KC chunk: M inputs x the 16 rows, one half of the rows (8) a pass: M int32
 * and M int16 accumulators, the weight register(s), the broadcast input and the scales stay in
 * 16 ymm for M = 4 (both halves at once would need 4 M). */
static ALWAYS_INLINE void micro16(const int M, const int S, const bool SG, const bool SEP, const panel16 *pp, const int8_t *xq,
                                  int64_t ldx, const float *xd, int64_t ldd, const int16_t *xs, int64_t lds, float *tile) {
    const int NSB = QB / (4 * S); /* sub-blocks a block (outside the loop: UBSan's division check
                                   * in the condition made gcc drop the unroll pragma, -Werror) */
    for (int b = 0; b < KC / QB; b++) {
        for (int h = 0; h < 2; h++) {
            __m256i acc[MR];
#pragma GCC unroll 4
            for (int i = 0; i < M; i++) acc[i] = _mm256_setzero_si256();
#pragma GCC unroll 1
            for (int sb = 0; sb < NSB; sb++) {
                const int k0 = b * QB / 4 + sb * S;
                /* The sub-block's S weight registers (and |w|) are loaded once for the M inputs, and
                 * an input's int16 sum is widened before the next input's starts: one is live. (With
                 * every input's sum live, gcc hoisted all the broadcasts and spilled the int32 sums.) */
                __m256i a[4], wv[4];
#pragma GCC unroll 4
                for (int k = 0; k < S; k++) {
                    a[k] = load32((SG ? pp->aw : pp->w) + 64 * (k0 + k) + 32 * h);
                    wv[k] = SG ? load32(pp->w + 64 * (k0 + k) + 32 * h) : a[k];
                }
                const __m256i scv = load32(pp->sc + (2 * (k0 / 4) + h) * 16);
#pragma GCC unroll 4
                for (int i = 0; i < M; i++) {
                    __m256i s16 = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int k = 0; k < S; k++) {
                        int32_t xv;
                        memcpy(&xv, xq + i * ldx + 4 * (k0 + k), 4);
                        const __m256i x4 = _mm256_set1_epi32(xv);
                        const __m256i p = _mm256_maddubs_epi16(a[k], SG ? _mm256_sign_epi8(x4, wv[k]) : x4);
                        s16 = k ? _mm256_add_epi16(s16, p) : p;
                    }
                    acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(s16, scv));
                }
            }
            const __m256 dv = _mm256_loadu_ps(pp->d + 8 * h);
#pragma GCC unroll 4
            for (int i = 0; i < M; i++) {
                __m256i o = _mm256_setzero_si256();
                if (!SG)
                    for (int gp = 0; gp < QB / 32; gp++) {
                        int32_t xv;
                        memcpy(&xv, xs + i * lds + b * (QB / 16) + 2 * gp, 4);
                        o = _mm256_add_epi32(o, _mm256_madd_epi16(load32(pp->of + (2 * (b * (QB / 32) + gp) + h) * 16), _mm256_set1_epi32(xv)));
                    }
                const __m256 s = _mm256_set1_ps(xd[i * ldd + b]);
                float *ti = tile + i * NR + 8 * h;
                __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(SG || SEP ? acc[i] : _mm256_add_epi32(acc[i], o)), _mm256_mul_ps(dv, s),
                                           _mm256_load_ps(ti));
                if (SEP) t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(o), _mm256_mul_ps(_mm256_loadu_ps(pp->dm + 8 * h), s), t);
                _mm256_store_ps(ti, t);
            }
        }
    }
}

#define MICRO16_CASES(S, SG, SEP)                                                        \
    switch (mr) {                                                                        \
    case 4: micro16(4, S, SG, SEP, pp, xq, ldx, xd, ldd, xs, lds, tile); break;          \
    case 3: micro16(3, S, SG, SEP, pp, xq, ldx, xd, ldd, xs, lds, tile); break;          \
    case 2: micro16(2, S, SG, SEP, pp, xq, ldx, xd, ldd, xs, lds, tile); break;          \
    default: micro16(1, S, SG, SEP, pp, xq, ldx, xd, ldd, xs, lds, tile); break;         \
    }

static void micro16_any(int mr, int S, bool sg, bool sep, const panel16 *pp, const int8_t *xq, int64_t ldx, const float *xd,
                        int64_t ldd, const int16_t *xs, int64_t lds, float *tile) {
    if (sg) {
        MICRO16_CASES(2, true, false)
    } else if (sep) {
        MICRO16_CASES(4, false, true)
    } else if (S == 2) {
        MICRO16_CASES(2, false, false)
    } else {
        MICRO16_CASES(4, false, false)
    }
}

/* The GEMM for the per-16 kinds (false: not one of them); x prepared by avx2/gemm_int8.c's prep:
 * int8 q [T][cols] | float d [T][cols / 64] | float d sum [T][cols / 32] | int16 sum [T][cols / 16]. */
bool bp_cpu_avx2g16_gemm(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    bool sg, sep;
    int S;
    const dq16_fn fn = d16_of(job->kt->info.kind, &sg, &S, &sep);
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    if (!fn || cols % KC || bp_cpu_q8_block(cols) != QB) return false;
    const panel16 pp = panel16_of(job->scratch[ith]);
    const int8_t *xq = job->xq;
    const float *xd = (const float *)(const void *)(xq + (size_t)(T * cols));
    const int64_t ldd = cols / QB, lds = cols / 16;
    const int16_t *xs = (const int16_t *)(const void *)(xd + T * ldd + T * (cols / 32));
    float tile[MR * NR] __attribute__((aligned(32)));
    const int64_t tb_ = bp_batch_block(T, 512, MR); /* past 512 inputs (bp_batch_block) */
    for (int64_t b0 = 0; b0 < T; b0 += tb_) {
    const int64_t b1 = T - b0 < tb_ ? T : b0 + tb_;
    for (int64_t c0 = 0; c0 < cols; c0 += KC) {
        for (int64_t p = r0; p < r1; p += NR) {
            const int nr = r1 - p < NR ? (int)(r1 - p) : NR;
            pack16(job, fn, sg, &pp, p, nr, c0);
            for (int64_t t0 = b0; t0 < b1; t0 += MR) {
                const int mr = b1 - t0 < MR ? (int)(b1 - t0) : MR;
                float *y = job->y + t0 * rows + p;
                const int8_t *xqt = xq + t0 * cols + c0;
                const float *xdt = xd + t0 * ldd + c0 / QB;
                const int16_t *xst = xs + t0 * lds + c0 / 16;
                /* through a compact tile: y's rows are `rows` floats apart (4 KB multiples on the
                 * usual shapes), whose loads and stores alias in L1 (~15% slower) */
                if (nr == NR)
                    for (int i = 0; i < mr; i++)
                        for (int j = 0; j < NR; j += 8)
                            _mm256_store_ps(tile + i * NR + j, c0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + i * rows + j));
                else
                    for (int i = 0; i < mr; i++)
                        for (int j = 0; j < NR; j++) tile[i * NR + j] = c0 == 0 || j >= nr ? 0.0f : y[i * rows + j];
                micro16_any(mr, S, sg, sep, &pp, xqt, cols, xdt, ldd, xst, lds, tile);
                if (nr == NR)
                    for (int i = 0; i < mr; i++)
                        for (int j = 0; j < NR; j += 8) _mm256_storeu_ps(y + i * rows + j, _mm256_load_ps(tile + i * NR + j));
                else
                    for (int i = 0; i < mr; i++) memcpy(y + i * rows, tile + i * NR, sizeof(float) * (size_t)nr);
            }
        }
    }
    }
    return true;
}

#else
bool bp_cpu_avx2g16_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out) {
    (void)k, (void)blocks, (void)nblocks, (void)out;
    return false;
}
bool bp_cpu_avx2g16_gemm(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    (void)job, (void)ith, (void)r0, (void)r1;
    return false;
}
#endif
