/* AVX2 integer-dot decode kernels: activations were quantized once per call to 8 bits
 * (bp_q8x32 / bp_q8x256), weights are decoded to 8-bit integers in registers and multiplied
 * with maddubs/madd, so the weights stream at memory speed instead of being expanded to
 * floats. Block layouts are the published GGUF ones (ggml-common.h); byte offsets are written
 * out per kind. Each block's contribution is d_w * d_x * (integer dot) plus, for offset kinds,
 * a scalar term from the precomputed activation sums. */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"

/* ---- 32-element kinds against bp_q8x32 --------------------------------------------------- */

/* One loop shape for every 32-element kind: DECODE sets `q` (32 bytes), `d` (weight scale) and,
 * when HAS_OFF, `off` (a per-block term times d_x * s_x: the -8 of Q4_0, Q4_1's min); SIGNED
 * says whether q holds signed or unsigned bytes. */
#define Q32_KERNEL(NAME, BB, SIGNED, HAS_OFF, DECODE)                                             \
    void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                             \
        const bp_q8x32 *xq = job->xq;                                                             \
        const int64_t nb = job->cols / 32;                                                        \
        for (int64_t r = r0; r < r1; r++) {                                                       \
            const uint8_t *b = job->w + (size_t)r * job->row_bytes;                              \
            __m256 acc = _mm256_setzero_ps();                                                     \
            float offs = 0;                                                                       \
            for (int64_t i = 0; i < nb; i++, b += (BB)) {                                         \
                __m256i q;                                                                        \
                float d, off = 0;                                                                 \
                (void)off;                                                                        \
                DECODE;                                                                           \
                __m256i x8 = load32(xq[i].q);                                                     \
                __m256i p = SIGNED ? dot_ss(q, x8) : dot_us(q, x8);                               \
                acc = _mm256_fmadd_ps(_mm256_set1_ps(d * xq[i].d), _mm256_cvtepi32_ps(p), acc);   \
                if (HAS_OFF) offs += off * xq[i].ds;                                                \
            }                                                                                     \
            job->y[r] = hsum8(acc) + offs;                                                        \
        }                                                                                         \
    }

Q32_KERNEL(bp_avx2_vec_q8_0, 34, 1, 0, { d = f16(b); q = load32(b + 2); })
Q32_KERNEL(bp_avx2_vec_q4_0, 18, 0, 1, { d = f16(b); q = nibbles32(b + 2); off = -8 * d; })
Q32_KERNEL(bp_avx2_vec_q4_1, 20, 0, 1, { d = f16(b); off = f16(b + 2); q = nibbles32(b + 4); })
Q32_KERNEL(bp_avx2_vec_q5_0, 22, 0, 1, {
    d = f16(b);
    q = _mm256_or_si256(nibbles32(b + 6), _mm256_and_si256(bits32(bp_load_u32(b + 2)), _mm256_set1_epi8(0x10)));
    off = -16 * d;
})
Q32_KERNEL(bp_avx2_vec_q5_1, 24, 0, 1, {
    d = f16(b);
    off = f16(b + 2);
    q = _mm256_or_si256(nibbles32(b + 8), _mm256_and_si256(bits32(bp_load_u32(b + 4)), _mm256_set1_epi8(0x10)));
})

static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* E8M0 exponent -> 2^(e-127) / 2, the half pairing with the doubled E2M1 table. */
static ALWAYS_INLINE float e8m0_half(uint8_t e) {
    uint32_t u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

Q32_KERNEL(bp_avx2_vec_iq4_nl, 18, 1, 0, { d = f16(b); q = _mm256_shuffle_epi8(table16(iq4nl_values), nibbles32(b + 2)); })
/* The E2M1 table shifted by +12 to be unsigned (0..24): maddubs needs no sign moves, and the
 * shift comes back as -12 * sum(x). */
static const int8_t fp4_doubled_plus12[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
Q32_KERNEL(bp_avx2_vec_mxfp4, 17, 0, 1, {
    d = e8m0_half(b[0]);
    q = _mm256_shuffle_epi8(table16(fp4_doubled_plus12), nibbles32(b + 1));
    off = -12 * d;
})

/* ---- 256-element k-quants against bp_q8x256 --------------------------------------------- */

/* Q4_K / Q5_K block head: the 8 scales, each as a dword holding it twice (the int16 pair a
 * group's vpmaddwd multiplies by), stored for broadcast loads, and the mins as 16 words (each
 * twice: min j pairs with the activation sums of groups 2j, 2j + 1). Why a store: a scale
 * taken as a byte (sc[k], _mm256_set1_epi16) compiles to vpextrb + vmovd + vpbroadcastw, ~3
 * shuffle-port operations per 32 weights; a dword broadcast from memory is a load alone. It pays
 * hot; cold, the row's memory stream bounds the kernel.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/decode_legacy_kquant.c. */
static ALWAYS_INLINE __m256i k4_head(const uint8_t *b, int32_t *scd) {
    const __m128i v = scale_min_k4v(b + 4);
    const __m256i s32 = _mm256_cvtepu8_epi32(v);
    _mm256_store_si256((__m256i *)(void *)scd, _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16)));
    /* Opaque to the compiler from here: it would otherwise forward the stored register into
     * shuffles (vpsrldq + vpbroadcastd per scale) instead of loading. */
    __asm__("" : "+m"(*(int32_t(*)[8])scd));
    return _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(v, v));
}

/* The k-quants for NJ inputs at once (KQ_MULTI8, avx2/simd.h): each block's quants and scales
 * are unpacked once and multiplied with every input's activations. */
/* 32 unsigned quants q times the int16 multipliers s into every input's sums (activations at
 * byte xo of each input's block i). */
static ALWAYS_INLINE void kq_run(__m256i *sumi, const int NJ, const uint8_t *xb, size_t xs, int64_t i, int xo, __m256i q,
                                 __m256i s) {
    for (int jj = 0; jj < NJ; jj++) sumi[jj] = _mm256_add_epi32(sumi[jj], dot_us_scaled(q, load32(XJ(jj)->q + xo), s));
}
/* Q3_K / Q6_K block end: the quants were stored + 2^sh, so 2^sh * (scales . group sums) comes
 * off each input's sums before d scales them. */
static ALWAYS_INLINE void kq_offset_end(__m256 *acc, const __m256i *sumi, const int NJ, const uint8_t *xb, size_t xs,
                                        int64_t i, __m256i sc16, const int sh, float d) {
    for (int jj = 0; jj < NJ; jj++) {
        const __m256i t = _mm256_sub_epi32(sumi[jj], _mm256_slli_epi32(group_dot(sc16, XJ(jj)), sh));
        acc[jj] = _mm256_fmadd_ps(_mm256_set1_ps(d * XJ(jj)->d), _mm256_cvtepi32_ps(t), acc[jj]);
    }
}

/* Q4_K / Q5_K: group pair j (lo, hi: 32 unsigned quants each) times scales scd[2j], scd[2j + 1]
 * (k4_head) into every input's sums. */
static ALWAYS_INLINE void kq_pair(__m256i *sumi, const int NJ, const uint8_t *xb, size_t xs, int64_t i, int j,
                                  __m256i lo, __m256i hi, const int32_t scd[8]) {
    kq_run(sumi, NJ, xb, xs, i, 64 * j, lo, _mm256_set1_epi32(scd[2 * j]));
    kq_run(sumi, NJ, xb, xs, i, 64 * j + 32, hi, _mm256_set1_epi32(scd[2 * j + 1]));
}
/* Q4_K / Q5_K / Q2_K block end: d * sums - dmin * (mins . group sums), per input (d, dmin: the
 * two f16 at dmp, mn16: the mins as group_dot's weights); d and dmin converted as a pair and scaled
 * by the input's d together (the products are the scalar ones). */
static ALWAYS_INLINE void kq_mins_end(__m256 *acc, const __m256i *sumi, const int NJ, const uint8_t *xb, size_t xs,
                                      int64_t i, const uint8_t *dmp, __m256i mn16) {
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)bp_load_u32(dmp)));
    for (int jj = 0; jj < NJ; jj++) {
        const __m128 s = _mm_mul_ps(dm, _mm_broadcast_ss(&XJ(jj)->d));
        acc[jj] = _mm256_fmadd_ps(_mm256_broadcastss_ps(s), _mm256_cvtepi32_ps(sumi[jj]), acc[jj]);
        acc[jj] = _mm256_fnmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(s)), _mm256_cvtepi32_ps(group_dot(mn16, XJ(jj))),
                                   acc[jj]);
    }
}

/* From KT_TILE_MIN inputs on, a k-quant's weights are decoded once per block of KQ_RB rows and
 * 256 columns into a tile in L1 (32 unsigned quants and the int16 multipliers per group, the
 * block-end multipliers m16 against the group sums, the float scales), and every input runs
 * over it with its activations held in 8 registers across the rows: a group costs maddubs +
 * madd + add, no decode. The block end is the multi-input kernels' (kq_mins_end:
 * two fmadds, d * sums then -dmin * (m16 . group sums); kq_offset_end: one fmadd of sums -
 * (m16 . group sums), m16 = scales << sh, the same integer): same integers, same float steps
 * in the same order, so results are bit-identical to the 8-a-pass kernel and batch-independent.
 * 10: at t = 8 the tile and 8 a pass are even, from there the tile leads. IQ4_XS stays 8 a pass: its
 * signed 4-bit values (+-127) against biased activations would overflow maddubs' int16 pairs.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/decode_legacy_kquant.c. */
enum { KT_TILE_MIN = 10, KT_TILE_MAXB = 64 };
typedef struct {
    _Alignas(32) uint8_t w[KQ_RB][8][32];
    _Alignas(32) int16_t sc[KQ_RB][8][16];
    _Alignas(32) int16_t m16[KQ_RB][16];
    float a[KQ_RB], bm[KQ_RB]; /* d, and -dmin (mins kinds) */
    _Alignas(32) float acc[KT_TILE_MAXB][KQ_RB][8];
} kq_tile;

static ALWAYS_INLINE void kt_put(kq_tile *t, int rr, int g, __m256i q, __m256i sc) {
    _mm256_store_si256((__m256i *)t->w[rr][g], q);
    _mm256_store_si256((__m256i *)t->sc[rr][g], sc);
}

/* MINS: the block end is d * sums - dmin * (m16 . group sums) (Q2_K Q4_K Q5_K); else d * (sums
 * - m16 . group sums) (Q3_K Q6_K). */
static ALWAYS_INLINE void kt_inputs(const bp_cpu_job *job, kq_tile *t, int nr, int64_t i, bool first, const bool MINS) {
    for (int64_t j = 0; j < job->batch; j++) {
        const bp_q8x256 *x = (const bp_q8x256 *)(const void *)((const uint8_t *)job->xq + (size_t)j * job->xq_stride) + i;
        __m256i xv[8];
        for (int k = 0; k < 8; k++) xv[k] = load32(x->q + 32 * k);
        const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
        for (int rr = 0; rr < nr; rr++) {
            __m256i s = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++)
                s = _mm256_add_epi32(s, dot_us_scaled(_mm256_load_si256((const __m256i *)t->w[rr][k]), xv[k],
                                                      _mm256_load_si256((const __m256i *)t->sc[rr][k])));
            const __m256i md = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)t->m16[rr]), bs);
            __m256 a = first ? _mm256_setzero_ps() : _mm256_load_ps(t->acc[j][rr]);
            if (MINS) {
                a = _mm256_fmadd_ps(_mm256_set1_ps(t->a[rr] * x->d), _mm256_cvtepi32_ps(s), a);
                a = _mm256_fmadd_ps(_mm256_set1_ps(t->bm[rr] * x->d), _mm256_cvtepi32_ps(md), a);
            } else {
                a = _mm256_fmadd_ps(_mm256_set1_ps(t->a[rr] * x->d), _mm256_cvtepi32_ps(_mm256_sub_epi32(s, md)), a);
            }
            _mm256_store_ps(t->acc[j][rr], a);
        }
    }
}

/* The tile driver for kind NAME: DECODE(t, rr, b) fills row rr of the tile from block b.
 * KT_TILED_SPLIT keeps the tile (a 40 KB stack frame) in a function of its own, so that a
 * decode call, which runs MULTI, does not move the stack 40 KB down first (GCC compiled Q4_K
 * and Q5_K so while their kernels were static; Q2_K Q3_K Q6_K keep the one function). */
#define KT_TILED(NAME, BB, MINS, DECODE, MULTI) KT_TILED_FN(, NAME, BB, MINS, DECODE, MULTI)
#define KT_TILED_SPLIT(NAME, BB, MINS, DECODE, MULTI)                                                      \
    KT_TILED_FN(static __attribute__((noinline)), NAME##_tile, BB, MINS, DECODE, MULTI)                    \
    void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                             \
        if (job->batch < KT_TILE_MIN || job->batch > KT_TILE_MAXB) MULTI(job, r0, r1);                      \
        else NAME##_tile(job, r0, r1);                                                                      \
    }
#define KT_TILED_FN(LINKAGE, NAME, BB, MINS, DECODE, MULTI)                                                 \
    LINKAGE void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                       \
        if (job->batch < KT_TILE_MIN || job->batch > KT_TILE_MAXB) {                                        \
            MULTI(job, r0, r1);                                                                             \
            return;                                                                                         \
        }                                                                                                   \
        kq_tile t;                                                                                          \
        for (int64_t rb = r0; rb < r1; rb += KQ_RB) {                                                       \
            const int nr = (int)(r1 - rb < KQ_RB ? r1 - rb : KQ_RB);                                        \
            for (int64_t i = 0; i < job->cols / 256; i++) {                                                 \
                for (int rr = 0; rr < nr; rr++)                                                             \
                    DECODE(&t, rr, job->w + (size_t)(rb + rr) * job->row_bytes + (size_t)i * (BB));         \
                kt_inputs(job, &t, nr, i, i == 0, MINS);                                                    \
            }                                                                                               \
            for (int64_t j = 0; j < job->batch; j++)                                                        \
                for (int rr = 0; rr < nr; rr++) job->y[j * job->rows + rb + rr] = hsum8(_mm256_load_ps(t.acc[j][rr])); \
        }                                                                                                   \
    }

/* Q4_K / Q5_K: scales (k4_head's dwords) and mins (m16, k4_head's order). */
static ALWAYS_INLINE void kt_scale_min(kq_tile *t, int rr, const uint8_t *b, int32_t scd[8]) {
    _mm256_store_si256((__m256i *)t->m16[rr], k4_head(b, scd));
    t->a[rr] = f16(b);
    t->bm[rr] = -f16(b + 2);
}
static ALWAYS_INLINE void kt_q4_k(kq_tile *t, int rr, const uint8_t *b) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    _Alignas(32) int32_t scd[8];
    kt_scale_min(t, rr, b, scd);
    for (int j = 0; j < 4; j++) {
        const __m256i v = load32(b + 16 + 32 * j);
        kt_put(t, rr, 2 * j, _mm256_and_si256(v, m4), _mm256_set1_epi32(scd[2 * j]));
        kt_put(t, rr, 2 * j + 1, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_set1_epi32(scd[2 * j + 1]));
    }
}
static ALWAYS_INLINE void kt_q5_k(kq_tile *t, int rr, const uint8_t *b) {
    _Alignas(32) int32_t scd[8];
    kt_scale_min(t, rr, b, scd);
    const __m256i qh = load32(b + 16);
    __m256i lo, hi;
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) {
        q5_k_pair(b, j, qh, &lo, &hi);
        kt_put(t, rr, 2 * j, lo, _mm256_set1_epi32(scd[2 * j]));
        kt_put(t, rr, 2 * j + 1, hi, _mm256_set1_epi32(scd[2 * j + 1]));
    }
}
static ALWAYS_INLINE void kt_q6_k(kq_tile *t, int rr, const uint8_t *b) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
    __m256i sdup[2];
    scales_dup(sc16, sdup);
    for (int h = 0; h < 2; h++) {
        __m256i q[4];
        q6_k_half(b, h, q);
        for (int k = 0; k < 4; k++) kt_put(t, rr, 4 * h + k, q[k], pair_scales(sdup, 8 * h + 2 * k));
    }
    _mm256_store_si256((__m256i *)t->m16[rr], _mm256_slli_epi16(sc16, 5)); /* quants stored +32 */
    t->a[rr] = f16(b + 208);
}
static ALWAYS_INLINE void kt_q2_k(kq_tile *t, int rr, const uint8_t *b) {
    const __m256i sc16 = load16_u8_to_i16(b);
    const __m256i lo16 = _mm256_and_si256(sc16, _mm256_set1_epi16(15));
    __m256i sdup[2];
    scales_dup(lo16, sdup);
    Q2_K_GROUPS(b, g, q, kt_put(t, rr, g, q, pair_scales(sdup, 2 * g)));
    _mm256_store_si256((__m256i *)t->m16[rr], _mm256_srli_epi16(sc16, 4));
    t->a[rr] = f16(b + 80);
    t->bm[rr] = -f16(b + 82);
}
static ALWAYS_INLINE void kt_q3_k(kq_tile *t, int rr, const uint8_t *b) {
    const __m256i sc16 = scales_q3_k(b + 96);
    __m256i sdup[2];
    scales_dup(sc16, sdup);
    Q3_K_GROUPS(b, g, q, kt_put(t, rr, g, q, pair_scales(sdup, 2 * g)));
    _mm256_store_si256((__m256i *)t->m16[rr], _mm256_slli_epi16(sc16, 2)); /* quants stored +4 */
    t->a[rr] = f16(b + 108);
}

/* Q4K_PF: batch 1 prefetches every line of its row this far ahead (3 lines per 144-byte block).
 * 4 KB: cold, with no prefetch Q4_K read under ggml's AVX2 build, 2-4 KB ahead over it.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/decode_legacy_kquant.c. */
enum { Q4K_PF = 4096 };
static ALWAYS_INLINE void q4_k_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    KQ_ROW_BEGIN(BP_BLOCK_BYTES_Q4_K)
    if (NJ == 1)
        for (int l = 0; l < 3; l++) _mm_prefetch((const char *)(b + Q4K_PF + 64 * l), _MM_HINT_T0);
    _Alignas(32) int32_t scd[8];
    const __m256i mn16 = k4_head(b, scd);
    for (int j = 0; j < 4; j++) {
        const __m256i v = load32(b + 16 + 32 * j);
        kq_pair(sumi, NJ, xb, xs, i, j, _mm256_and_si256(v, m4), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), scd);
    }
    kq_mins_end(acc, sumi, NJ, xb, xs, i, b, mn16);
    KQ_ROW_END
}
/* Q4_K and Q5_K: their 8-input loop apart from the tile driver (KT_TILED), as GCC compiled it
 * when every kernel was static. */
KQ_MULTI_NL(static __attribute__((noinline)), vec_q4_k_multi, q4_k_row, 8)

static ALWAYS_INLINE void q5_k_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    KQ_ROW_BEGIN(BP_BLOCK_BYTES_Q5_K)
    _Alignas(32) int32_t scd[8];
    const __m256i mn16 = k4_head(b, scd);
    const __m256i qh = load32(b + 16);
    __m256i lo, hi;
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) {
        q5_k_pair(b, j, qh, &lo, &hi);
        kq_pair(sumi, NJ, xb, xs, i, j, lo, hi, scd);
    }
    kq_mins_end(acc, sumi, NJ, xb, xs, i, b, mn16);
    KQ_ROW_END
}
KQ_MULTI_NL(static __attribute__((noinline)), vec_q5_k_multi, q5_k_row, 8)

static ALWAYS_INLINE void q6_k_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    KQ_ROW_BEGIN(BP_BLOCK_BYTES_Q6_K)
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
    __m256i sdup[2];
    scales_dup(sc16, sdup);
    for (int h = 0; h < 2; h++) {
        __m256i q[4];
        q6_k_half(b, h, q);
        for (int k = 0; k < 4; k++) kq_run(sumi, NJ, xb, xs, i, 128 * h + 32 * k, q[k], pair_scales(sdup, 8 * h + 2 * k));
    }
    kq_offset_end(acc, sumi, NJ, xb, xs, i, sc16, 5, f16(b + 208)); /* quants stored +32 */
    KQ_ROW_END
}
KQ_MULTI8(vec_q6_k_multi, q6_k_row)

static ALWAYS_INLINE void q2_k_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    KQ_ROW_BEGIN(BP_BLOCK_BYTES_Q2_K)
    const __m256i sc16 = load16_u8_to_i16(b);
    const __m256i lo16 = _mm256_and_si256(sc16, _mm256_set1_epi16(15)), mn16 = _mm256_srli_epi16(sc16, 4);
    __m256i sdup[2];
    scales_dup(lo16, sdup);
    Q2_K_GROUPS(b, g, q, kq_run(sumi, NJ, xb, xs, i, 32 * g, q, pair_scales(sdup, 2 * g)));
    kq_mins_end(acc, sumi, NJ, xb, xs, i, b + 80, mn16); /* d, dmin at 80 */
    KQ_ROW_END
}
KQ_MULTI8(vec_q2_k_multi, q2_k_row)

static ALWAYS_INLINE void q3_k_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    KQ_ROW_BEGIN(BP_BLOCK_BYTES_Q3_K)
    const __m256i sc16 = scales_q3_k(b + 96);
    __m256i sdup[2];
    scales_dup(sc16, sdup);
    /* q is unsigned 0..7 here; the -4 comes back below */
    Q3_K_GROUPS(b, g, q, kq_run(sumi, NJ, xb, xs, i, 32 * g, q, pair_scales(sdup, 2 * g)));
    kq_offset_end(acc, sumi, NJ, xb, xs, i, sc16, 2, f16(b + 108)); /* quants stored +4 */
    KQ_ROW_END
}
KQ_MULTI8(vec_q3_k_multi, q3_k_row)

KT_TILED(bp_avx2_vec_q2_k, BP_BLOCK_BYTES_Q2_K, 1, kt_q2_k, vec_q2_k_multi)
KT_TILED(bp_avx2_vec_q3_k, BP_BLOCK_BYTES_Q3_K, 0, kt_q3_k, vec_q3_k_multi)
KT_TILED_SPLIT(bp_avx2_vec_q4_k, BP_BLOCK_BYTES_Q4_K, 1, kt_q4_k, vec_q4_k_multi)
KT_TILED_SPLIT(bp_avx2_vec_q5_k, BP_BLOCK_BYTES_Q5_K, 1, kt_q5_k, vec_q5_k_multi)
KT_TILED(bp_avx2_vec_q6_k, BP_BLOCK_BYTES_Q6_K, 0, kt_q6_k, vec_q6_k_multi)

/* IQ4_XS, 136 bytes: d; scales_h u16 at 2; scales_l[4] at 4; qs[128] at 8, 16 bytes per 32
 * weights (low nibbles: weights 0..15, high: 16..31), value kvalues_iq4nl[nibble] times
 * d * (6-bit scale - 32). Against BP_ACT_Q8X256P: one 32-byte load is two groups' nibbles. */
static ALWAYS_INLINE void iq4_xs_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {
    const __m256i tbl = table16(iq4nl_values), m4 = _mm256_set1_epi8(0x0f);
    const __m256i sh_lo = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), sh_hi = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3);
    const __m256i pick[4] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                             _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
    KQ_ROW_BEGIN(BP_BLOCK_BYTES_IQ4_XS)
    /* The 8 6-bit scales (minus 32) at once: lane ib gets low nibble ib of scales_l and bits
     * 2ib..2ib+1 of scales_h, copied into both 16-bit halves so one permute makes madd's
     * multiplier for a pair of groups. */
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)bp_load_u32(b + 4)), sh_lo), m15);
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(bp_load_u16(b + 2)), sh_hi), m3);
    __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    ls = _mm256_or_si256(_mm256_and_si256(ls, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(ls, 16));
    for (int p = 0; p < 4; p++) {
        const __m256i v = load32(b + 8 + 32 * p);
        const __m256i qa = _mm256_shuffle_epi8(tbl, _mm256_and_si256(v, m4));
        const __m256i qb = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        const __m256i ua = _mm256_sign_epi8(qa, qa), ub = _mm256_sign_epi8(qb, qb);
        const __m256i sc = _mm256_permutevar8x32_epi32(ls, pick[p]);
        for (int jj = 0; jj < NJ; jj++) {
            const __m256i pa = _mm256_maddubs_epi16(ua, _mm256_sign_epi8(load32(XJ(jj)->q + 64 * p), qa));
            const __m256i pb = _mm256_maddubs_epi16(ub, _mm256_sign_epi8(load32(XJ(jj)->q + 64 * p + 32), qb));
            sumi[jj] = _mm256_add_epi32(sumi[jj], _mm256_add_epi32(_mm256_madd_epi16(pa, sc), _mm256_madd_epi16(pb, sc)));
        }
    }
    const float d = f16(b);
    for (int jj = 0; jj < NJ; jj++)
        acc[jj] = _mm256_fmadd_ps(_mm256_set1_ps(d * XJ(jj)->d), _mm256_cvtepi32_ps(sumi[jj]), acc[jj]);
    KQ_ROW_END
}
KQ_MULTI_NL(, bp_avx2_vec_iq4_xs, iq4_xs_row, 8)

/* q8x256 with each pair of groups split by halves and the halves alternated (BP_ACT_Q8X256P). */
void bp_avx2_quant_q8x256p(const float *x, int64_t n, void *out_) {
    bp_q8x256 *out = out_;
    bp_cpu_quant_q8x256_avx2(x, n, out);
    for (int64_t b = 0; b < n / 256; b++) {
        int8_t t[256];
        memcpy(t, out[b].q, 256);
        for (int p = 0; p < 4; p++) {
            memcpy(out[b].q + 64 * p, t + 64 * p, 16);
            memcpy(out[b].q + 64 * p + 16, t + 64 * p + 32, 16);
            memcpy(out[b].q + 64 * p + 32, t + 64 * p + 16, 16);
            memcpy(out[b].q + 64 * p + 48, t + 64 * p + 48, 16);
        }
    }
}

#endif
