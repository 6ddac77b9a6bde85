/* AVX-512 decode and small-batch kernels for the k-quants (Q2_K Q3_K Q4_K Q5_K Q6_K) against
 * bp_q8x256 activations (IQ4_XS runs avx512/decode_repacked.c's quad loop). One zmm holds 64
 * weights, the 32-weight groups whose activations are 64 consecutive bytes of the plain q8x256
 * layout, so nothing is re-ordered. Per 64 weights: unpack (a variable shift per 256-bit half
 * picks the nibble or bit pair; vptestmb + masked add supply Q5_K's and Q3_K's extra bit), one
 * vpmaddubsw and one vpdpwssd that multiplies the pairs by their group scales (vpermw puts each
 * group's scale under its lanes) and accumulates (Q4_K / Q5_K decode: one vpdpbusd instead).
 *
 * Small batches: up to MAX_NJ = 8 inputs per pass over a row, every count from 1 to 8 in one
 * pass, so the weights are read once per call and unpacked once per 8 inputs (two passes of 4
 * made t = 5-7 slower than t = 4). From 16 inputs, groups of 16 or 32 run p16_panel
 * (avx512/panel16.inc) with the inputs in the lanes: one vpdpbusd per 64 multiply-adds.
 * Measurements and the alternatives: docs/cpu-kernels.md. */
#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#include "cpu/avx2/simd.h"
#include "cpu/avx512/simd.h"

enum { MAX_NJ = 8 };

/* vpermw indices: lanes 0-15 take word a, 16-31 word b (two 32-weight groups per zmm)... */
static ALWAYS_INLINE __m512i idx2(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)a)), _mm256_set1_epi16((short)b), 1);
}
/* ...or lanes 8k..8k+7 take word a + k (four 16-weight groups per zmm). */
static ALWAYS_INLINE __m512i idx4(int a) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_setr_epi16(
                                  (short)a, (short)a, (short)a, (short)a, (short)a, (short)a, (short)a, (short)a,
                                  (short)(a + 1), (short)(a + 1), (short)(a + 1), (short)(a + 1), (short)(a + 1),
                                  (short)(a + 1), (short)(a + 1), (short)(a + 1))),
                              _mm256_setr_epi16((short)(a + 2), (short)(a + 2), (short)(a + 2), (short)(a + 2),
                                                (short)(a + 2), (short)(a + 2), (short)(a + 2), (short)(a + 2),
                                                (short)(a + 3), (short)(a + 3), (short)(a + 3), (short)(a + 3),
                                                (short)(a + 3), (short)(a + 3), (short)(a + 3), (short)(a + 3)),
                              1);
}
/* 16-bit shift counts: a in the low 256-bit half, b in the high one. */
static ALWAYS_INLINE __m512i cnt2(int a, int b) { return idx2(a, b); }
/* Byte masks for vptestmb: bit a in the low half, bit b in the high one. */
static ALWAYS_INLINE __m512i bit2(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8((char)(1 << a))), _mm256_set1_epi8((char)(1 << b)), 1);
}
static ALWAYS_INLINE __m512i bcast32(const uint8_t *p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}
static ALWAYS_INLINE __m512i zext(__m256i v) { return _mm512_inserti64x4(_mm512_setzero_si512(), v, 0); }

/* The activations of input jj of the job, block i. */
#define XQ(jj, i) ((const bp_q8x256 *)(const void *)(xq + (size_t)(jj) * xs) + (i))

/* The lane sums of s[0..3] in one xmm (s[jj]'s in lane jj); exact, in any order. */
static ALWAYS_INLINE __m128i sum4(const __m512i s[4]) {
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
    __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
    u = _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(1, 0, 3, 2)));
    u = _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si128(u);
}

/* Shared frame: per row, for NJ inputs starting at j0. BODY runs per block with b (the block's
 * bytes) and i (its index); per input jj it sets sv[jj] (int32 lanes summing to the block's exact
 * scaled dot, offsets included) and, for kinds with mins (SEP), mv[jj] (lanes summing to sum of
 * min x activation sum); per block d and f2 (-dmin). Per (row, input) and block the float work
 * is then y = fma(S, dx * d, y), y = fma(M, dx * f2, y): the same operations, in the same order,
 * as p16_panel's lanes, so an input's result does not depend on which kernel its group ran.
 * Decode (a batch of 1, DEC) keeps 16 float lanes and one reduction per row instead: that costs
 * 4 ops per block where the exact sums cost ~15, and decode results need not match a batch's
 * (bp_cpu_kernel_name: batch 1 may even run the AVX2 kernel). */
#define K_ROWS(NAME, SUF, NJ, DEC)                                                                           \
    static __attribute__((noinline)) void NAME##SUF(const bp_cpu_job *job, int64_t r0, int64_t r1, int64_t j0) { \
        for (int64_t r = r0; r < r1; r++) NAME##_row(job, r, NJ, j0, DEC);                                    \
    }
#define K_KERNEL(NAME, BYTES, PKIND, SEP, ...)                                                               \
    static ALWAYS_INLINE void NAME##_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0, const bool DEC) { \
        const int64_t nb = job->cols / 256;                                                                  \
        const size_t xs = job->xq_stride;                                                                    \
        const uint8_t *xq = (const uint8_t *)job->xq + (size_t)j0 * xs;                                      \
        const uint8_t *b = job->w + (size_t)r * job->row_bytes;                                              \
        __m128 acc[MAX_NJ / 4] = {_mm_setzero_ps(), _mm_setzero_ps()};                                      \
        __m512 acc1 = _mm512_setzero_ps();                                                                   \
        for (int64_t i = 0; i < nb; i++, b += (BYTES)) {                                                     \
            __m512i sv[MAX_NJ], mv[MAX_NJ];                                                                  \
            float d, f2 = 0.0f;                                                                              \
            __m128 dm = _mm_setzero_ps(); /* kinds with mins: [d, dmin] for decode */                        \
            /* sum4 below reads whole groups of 4 */                                                         \
            for (int jj = 0; jj < (NJ + 3) / 4 * 4; jj++) sv[jj] = mv[jj] = _mm512_setzero_si512();          \
            BP_PREFETCH_BLOCK(b, BYTES);                                                                     \
            __VA_ARGS__                                                                                      \
            if (DEC && SEP) {                                                                                \
                /* d and dmin converted and scaled together, then one broadcast each */                      \
                const __m512 dmx = _mm512_castps128_ps512(_mm_mul_ps(dm, _mm_broadcast_ss(&XQ(0, i)->d)));   \
                acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sv[0]), _mm512_broadcastss_ps(_mm512_castps512_ps128(dmx)), acc1); \
                acc1 = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mv[0]), _mm512_permutexvar_ps(_mm512_set1_epi32(1), dmx), acc1); \
                continue;                                                                                    \
            }                                                                                                \
            if (DEC) {                                                                                       \
                acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sv[0]), _mm512_set1_ps(XQ(0, i)->d * d), acc1);    \
                continue;                                                                                    \
            }                                                                                                \
            for (int h = 0; h < (NJ + 3) / 4; h++) {                                                         \
                const int q = 4 * h;                                                                         \
                const __m128 dx = _mm_setr_ps(XQ(q, i)->d, NJ > q + 1 ? XQ(q + 1, i)->d : 0.0f,              \
                                              NJ > q + 2 ? XQ(q + 2, i)->d : 0.0f, NJ > q + 3 ? XQ(q + 3, i)->d : 0.0f); \
                acc[h] = _mm_fmadd_ps(_mm_cvtepi32_ps(sum4(sv + q)), _mm_mul_ps(dx, _mm_set1_ps(d)), acc[h]); \
                if (SEP) acc[h] = _mm_fmadd_ps(_mm_cvtepi32_ps(sum4(mv + q)), _mm_mul_ps(dx, _mm_set1_ps(f2)), acc[h]); \
            }                                                                                                \
        }                                                                                                    \
        if (DEC) {                                                                                           \
            job->y[j0 * job->rows + r] = _mm512_reduce_add_ps(acc1);                                         \
            return;                                                                                          \
        }                                                                                                    \
        _Alignas(16) float o[MAX_NJ];                                                                        \
        _mm_store_ps(o, acc[0]);                                                                             \
        _mm_store_ps(o + 4, acc[1]);                                                                         \
        for (int jj = 0; jj < NJ; jj++) job->y[(j0 + jj) * job->rows + r] = o[jj];                           \
    }                                                                                                        \
    /* One NJ's row loop per function (as avx512/decode_grid_lowbit.c's IQ_ROWS): with the eight         \
     * inlined into one, Q5_K's decode loses 8-10%.                                                      \
     * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_kquant.c. */       \
    K_ROWS(NAME, _dec, 1, true)                                                                          \
    K_ROWS(NAME, _r1, 1, false)                                                                          \
    K_ROWS(NAME, _r2, 2, false)                                                                          \
    K_ROWS(NAME, _r3, 3, false)                                                                          \
    K_ROWS(NAME, _r4, 4, false)                                                                          \
    K_ROWS(NAME, _r5, 5, false)                                                                          \
    K_ROWS(NAME, _r6, 6, false)                                                                          \
    K_ROWS(NAME, _r7, 7, false)                                                                          \
    K_ROWS(NAME, _r8, 8, false)                                                                          \
    /* Inputs outer, rows inner (as avx2/decode_repacked.inc, which says why). */                                     \
    void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                        \
        for (int64_t j0 = 0; j0 < job->batch;) {                                                             \
            const int64_t left = job->batch - j0;                                                            \
            if (left >= 16) {                                                                                \
                if (left >= 32) p16_panel(job, r0, r1, j0, 32, PKIND, BYTES, 2);                             \
                else p16_panel(job, r0, r1, j0, 16, PKIND, BYTES, 1);                                        \
                j0 += left >= 32 ? 32 : 16;                                                                  \
                continue;                                                                                    \
            }                                                                                                \
            const int nj = left >= MAX_NJ ? MAX_NJ : (int)left;                                              \
            switch (nj) {                                                                                    \
            case 8: NAME##_r8(job, r0, r1, j0); break;                                                       \
            case 7: NAME##_r7(job, r0, r1, j0); break;                                                       \
            case 6: NAME##_r6(job, r0, r1, j0); break;                                                       \
            case 5: NAME##_r5(job, r0, r1, j0); break;                                                       \
            case 4: NAME##_r4(job, r0, r1, j0); break;                                                       \
            case 3: NAME##_r3(job, r0, r1, j0); break;                                                       \
            case 2: NAME##_r2(job, r0, r1, j0); break;                                                       \
            default:                                                                                         \
                if (job->batch > 1) NAME##_r1(job, r0, r1, j0);                                              \
                else NAME##_dec(job, r0, r1, j0);                                                            \
                break;                                                                                       \
            }                                                                                                \
            j0 += nj;                                                                                        \
        }                                                                                                    \
    }

/* u8 weights (64) times the input's 64 activations at off, pairs scaled by sc and summed. */
static ALWAYS_INLINE __m512i dotsc(__m512i acc, __m512i w, const int8_t *x, __m512i sc) {
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(w, _mm512_loadu_si512((const void *)x)), sc);
}

/* The 256 weights of a block (4 zmm) against one input's activations, pairs scaled per group;
 * two accumulator chains (one chain of 4 vpdpwssd left a single input latency-bound). */
static ALWAYS_INLINE __m512i dot4(const __m512i w[4], const __m512i sc[4], const int8_t *x) {
    __m512i s = dotsc(_mm512_setzero_si512(), w[0], x, sc[0]), s2 = dotsc(_mm512_setzero_si512(), w[1], x + 64, sc[1]);
    return _mm512_add_epi32(dotsc(s, w[2], x + 128, sc[2]), dotsc(s2, w[3], x + 192, sc[3]));
}

/* Decode's form of dot4 for the kinds with a scale per 32 weights (Q4_K, Q5_K), sc16 their 8
 * scales as words: one vpdpbusd per 64 weights (not vpmaddubsw + vpdpwssd), the int32 sums of
 * two zmm packed to words (vpackssdw, on the shuffle port), and one vpdpwssd per 128 weights
 * against the scales in the packed order. The same exact integer as dot4, in other lanes. Fits:
 * a vpdpbusd lane sums 4 products <= 31 * 127 (Q5_K), 15748 < 32767, so the pack never
 * saturates. Why: on Intel cores where the zmm multiply-adds and variable shifts all issue on
 * one port, this takes 2 of its ~16 operations a block off it. */
static ALWAYS_INLINE __m512i dot4_p32(const __m512i w[4], __m512i sc16, const int8_t *x) {
    /* 128-bit chunk c of packs(s0, s1): words 0-3 from s0 (group 0 for c < 2, else 1), words 4-7
     * from s1 (groups 2, 3); packs(s2, s3) the same, groups 4-7. */
    static const int16_t pk[32] = {0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3};
    const __m512i ia = _mm512_loadu_si512((const void *)pk);
    const __m512i ib = _mm512_add_epi16(ia, _mm512_set1_epi16(4));
    const __m512i z = _mm512_setzero_si512();
    const __m512i s0 = _mm512_dpbusd_epi32(z, w[0], _mm512_loadu_si512((const void *)x));
    const __m512i s1 = _mm512_dpbusd_epi32(z, w[1], _mm512_loadu_si512((const void *)(x + 64)));
    const __m512i s2 = _mm512_dpbusd_epi32(z, w[2], _mm512_loadu_si512((const void *)(x + 128)));
    const __m512i s3 = _mm512_dpbusd_epi32(z, w[3], _mm512_loadu_si512((const void *)(x + 192)));
    const __m512i a = _mm512_dpwssd_epi32(z, _mm512_packs_epi32(s0, s1), _mm512_permutexvar_epi16(ia, sc16));
    return _mm512_dpwssd_epi32(a, _mm512_packs_epi32(s2, s3), _mm512_permutexvar_epi16(ib, sc16));
}

/* ---- 16 inputs per pass (t >= 16): VNNI with the inputs in the lanes -----------------------
 * Why: per 64 weights and input the kernels above spend two multiply-port ops (vpmaddubsw +
 * vpdpwssd) plus a per-block float epilogue, which levels them off from t = 4 on, under a tiled
 * int8 GEMM (ggml's) at t = 16-32. Here one vpdpbusd does 64
 * multiply-adds: lane j is input j, the four bytes of a lane are four consecutive activations
 * (transposed once per 128 rows into xt, biased +128 to make them the unsigned operand), and the
 * weights' four bytes come as an embedded broadcast from the row's block unpacked to int8 (the
 * broadcast operand is the signed one). Per scale group the int32 sums are scaled once per row
 * (vpmulld, or vpdpwssd where a group's sum fits 16 bits), not once per 64 weights, and the +128
 * bias comes back as one per-row constant: -128 * sum_g scale_g * sum(weights of g).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_kquant.c. */
enum { PK_Q2, PK_Q3, PK_Q4, PK_Q5, PK_Q6 };

/* One row's block unpacked: weights as int8 in the activations' order, the per-group scales (as
 * (scale, 0) word pairs for vpdpwssd kinds), the mins as word pairs, the bias correction, d and
 * the mins' factor (-dmin). */
typedef struct prow {
    _Alignas(64) int8_t w[256];
    int32_t sc[16];
    int32_t mnp[8];
    int32_t negc;
    float d, f2;
} prow;

/* k-steps (4 weights) per scale group; groups whose 16-weight sums fit int16 (vpdpwssd); word
 * pairs of the mins term (0: none, the offsets are in the signed weights). */
static ALWAYS_INLINE int pk_g(int k) { return k == PK_Q4 || k == PK_Q5 ? 8 : 4; }
static ALWAYS_INLINE bool pk_dpw(int k) { return k == PK_Q2 || k == PK_Q3; }
static ALWAYS_INLINE int pk_np(int k) { return k == PK_Q2 ? 8 : k == PK_Q4 || k == PK_Q5 ? 4 : 0; }

static ALWAYS_INLINE void unpack_row(const int kind, const uint8_t *b, prow *o) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3);
    __m512i w[4], sc32 = _mm512_setzero_si512();
    o->f2 = 0.0f;
    if (kind == PK_Q4 || kind == PK_Q5) {
        const __m128i scm = scale_min_k4v(b + 4);
        sc32 = _mm512_cvtepu8_epi32(scm);
        _mm_storeu_si128((__m128i *)(void *)o->mnp, _mm_cvtepu8_epi16(_mm_srli_si128(scm, 8)));
        o->d = f16(b);
        o->f2 = -f16(b + 2);
        const uint8_t *qs = b + (kind == PK_Q4 ? 16 : 48);
        const __m512i qh = bcast32(b + 16);
        for (int p = 0; p < 4; p++) {
            w[p] = _mm512_and_si512(_mm512_srlv_epi16(bcast32(qs + 32 * p), cnt2(0, 4)), m4);
            if (kind == PK_Q5)
                w[p] = _mm512_mask_add_epi8(w[p], _mm512_test_epi8_mask(qh, bit2(2 * p, 2 * p + 1)), w[p], _mm512_set1_epi8(16));
        }
    } else if (kind == PK_Q6) {
        sc32 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 192)));
        o->d = f16(b + 208);
        for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(b + 64 * h)), qh = bcast32(b + 128 + 32 * h);
            const __m512i m30 = _mm512_set1_epi8(0x30), c32 = _mm512_set1_epi8(32);
            w[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, cnt2(4, 2)), m30));
            w[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                           _mm512_and_si512(_mm512_srlv_epi16(qh, cnt2(0, 2)), m30));
            w[2 * h] = _mm512_sub_epi8(w[2 * h], c32);
            w[2 * h + 1] = _mm512_sub_epi8(w[2 * h + 1], c32);
        }
    } else { /* PK_Q3, PK_Q2 */
        const uint8_t *qs = b + (kind == PK_Q3 ? 32 : 16);
        const __m512i hm = bcast32(b);
        if (kind == PK_Q3) {
            sc32 = _mm512_cvtepi16_epi32(scales_q3_k(b + 96));
            o->d = f16(b + 108);
        } else {
            const __m128i raw = _mm_loadu_si128((const __m128i *)b);
            sc32 = _mm512_cvtepu8_epi32(_mm_and_si128(raw, _mm_set1_epi8(15)));
            _mm256_storeu_si256((__m256i *)(void *)o->mnp, _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15))));
            o->d = f16(b + 80);
            o->f2 = -f16(b + 82);
        }
        for (int k = 0; k < 4; k++) {
            const int sh = 4 * (k % 2);
            w[k] = _mm512_and_si512(_mm512_srlv_epi16(bcast32(qs + 32 * (k / 2)), cnt2(sh, sh + 2)), m3);
            /* Q3_K: the high bit set means +0 and clear means -4 (q = low bits + 4 * hbit - 4) */
            if (kind == PK_Q3)
                w[k] = _mm512_mask_sub_epi8(w[k], _mm512_testn_epi8_mask(hm, bit2(2 * k, 2 * k + 1)), w[k], _mm512_set1_epi8(4));
        }
    }
    /* The bias: sum over groups of scale * the group's weight sum, times 128. */
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int lg = pk_g(kind) == 8 ? 3 : 2;
    __m512i c = _mm512_setzero_si512();
    for (int p = 0; p < 4; p++) {
        _mm512_store_si512((void *)(o->w + 64 * p), w[p]);
        const __m512i ls = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), w[p]);
        const __m512i gi = _mm512_srli_epi32(_mm512_add_epi32(_mm512_set1_epi32(16 * p), iota), lg);
        c = _mm512_add_epi32(c, _mm512_mullo_epi32(ls, _mm512_permutexvar_epi32(gi, sc32)));
    }
    o->negc = -128 * _mm512_reduce_add_epi32(c);
    _mm512_storeu_si512((void *)o->sc, pk_dpw(kind) ? _mm512_and_si512(sc32, _mm512_set1_epi32(0xffff)) : sc32);
}

/* The panel's hooks (avx512/panel16.inc says what each must do). Block i of 16 inputs (the first
 * nv real, the rest 0): xt[64 k-steps][16 inputs x 4 bytes] (+128), their d, and the mins' word
 * pairs of activation sums (np of them, per 16 or per 32 elements). */
static ALWAYS_INLINE void p16_xt_block(const int kind, const uint8_t *xq, size_t xs, int64_t i, int nv, uint8_t *xt, int32_t *bt,
                                       float *dx) {
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int c = 0; c < 4; c++) {
        __m512i r[16];
        for (int jj = 0; jj < 16; jj++) r[jj] = jj < nv ? _mm512_loadu_si512((const void *)(XQ(jj, i)->q + 64 * c)) : _mm512_setzero_si512();
        bp_transpose16_epi32(r);
        for (int s = 0; s < 16; s++) _mm512_store_si512((void *)(xt + 64 * (16 * c + s)), _mm512_xor_si512(r[s], bias));
    }
    for (int jj = 0; jj < 16; jj++) {
        const bp_q8x256 *x = jj < nv ? XQ(jj, i) : NULL;
        dx[jj] = x ? x->d : 0.0f;
        if (pk_np(kind) == 8)
            for (int p = 0; p < 8; p++) bt[16 * p + jj] = x ? (int32_t)bp_load_u32((const uint8_t *)(x->bsums + 2 * p)) : 0;
        else if (pk_np(kind) == 4)
            for (int q = 0; q < 4; q++) {
                const int lo = x ? x->bsums[4 * q] + x->bsums[4 * q + 1] : 0, hi = x ? x->bsums[4 * q + 2] + x->bsums[4 * q + 3] : 0;
                bt[16 * q + jj] = (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16);
            }
    }
}
static ALWAYS_INLINE int p16_g(int kind) { return pk_g(kind); }
static ALWAYS_INLINE __m512i p16_scale(int kind, __m512i acc, __m512i sub, __m512i scv) {
    return pk_dpw(kind) ? _mm512_dpwssd_epi32(acc, sub, scv) : _mm512_add_epi32(acc, _mm512_mullo_epi32(sub, scv));
}
static ALWAYS_INLINE void p16_unpack(int kind, const uint8_t *b, prow *o) { unpack_row(kind, b, o); }
/* The mins: -dmin * sum_q min_q * (the input's sum over q's elements), word pairs by vpdpwssd. */
static ALWAYS_INLINE __m512 p16_block_end(int kind, const prow *p, const int32_t *bt, __m512 dxv, __m512 f) {
    const int np = pk_np(kind);
    if (!np) return f;
    __m512i m = _mm512_setzero_si512();
    for (int q = 0; q < np; q++) m = _mm512_dpwssd_epi32(m, _mm512_load_si512((const void *)(bt + 16 * q)), _mm512_set1_epi32(p->mnp[q]));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dxv, _mm512_set1_ps(p->f2)), f);
}
#include "cpu/avx512/panel16.inc"

/* ---- Q4_K: d, dmin, 12 bytes of 6-bit scales/mins (scale_min_k4v), 128 bytes of nibbles --- */
#define Q45K_BODY(QS, EXTRA_BIT)                                                                            \
    {                                                                                                       \
        const __m512i m4 = _mm512_set1_epi8(0x0f);                                                          \
        const __m128i scm = scale_min_k4v(b + 4);                                                            \
        const __m512i sc16 = zext(_mm256_cvtepu8_epi16(scm));                                               \
        d = f16(b);                                                                                         \
        f2 = -f16(b + 2);                                                                                   \
        dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)bp_load_u32(b)));                                          \
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scm, scm));                            \
        __m512i w[4], sc[4];                                                                                \
        for (int p = 0; p < 4; p++) {                                                                       \
            w[p] = _mm512_and_si512(_mm512_srlv_epi16(bcast32(QS + 32 * p), cnt2(0, 4)), m4);               \
            EXTRA_BIT;                                                                                      \
            sc[p] = _mm512_permutexvar_epi16(idx2(2 * p, 2 * p + 1), sc16);                                 \
        }                                                                                                   \
        for (int jj = 0; jj < NJ; jj++) {                                                                   \
            const bp_q8x256 *x = XQ(jj, i);                                                                 \
            sv[jj] = DEC ? dot4_p32(w, sc16, x->q) : dot4(w, sc, x->q);                                     \
            /* the mins term: min j pairs with the activation sums of groups 2j, 2j+1 */                  \
            mv[jj] = zext(_mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)x->bsums)));         \
        }                                                                                                   \
    }

K_KERNEL(bp_avx512_vec_q4_k, BP_BLOCK_BYTES_Q4_K, PK_Q4, 1, Q45K_BODY(b + 16, (void)0))
/* Q5_K: qh[32] at 16, bit j of qh[l] is the fifth bit of group j's element l; quants at 48. */
K_KERNEL(bp_avx512_vec_q5_k, BP_BLOCK_BYTES_Q5_K, PK_Q5, 1, {
    const __m512i qh = bcast32(b + 16);
    Q45K_BODY(b + 48, w[p] = _mm512_mask_add_epi8(w[p], _mm512_test_epi8_mask(qh, bit2(2 * p, 2 * p + 1)), w[p],
                                                  _mm512_set1_epi8(16)))
})

/* ---- Q6_K: ql[128], qh[64], 16 int8 scales, d. Half h, zmm k (elements 128h + 64k ..):
 * k = 0: low nibbles of ql[64h .. 64h + 63] | qh bits 0-1 (first 32) and 2-3 (next 32);
 * k = 1: high nibbles | qh bits 4-5 and 6-7. Quants stored +32. */
K_KERNEL(bp_avx512_vec_q6_k, BP_BLOCK_BYTES_Q6_K, PK_Q6, 0, {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m256i sc16y = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
    const __m512i sc16 = zext(sc16y);
    d = f16(b + 208);
    __m512i w[4], sc[4];
    for (int h = 0; h < 2; h++) {
        const __m512i ql = _mm512_loadu_si512((const void *)(b + 64 * h));
        const __m512i qh = bcast32(b + 128 + 32 * h);
        w[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, cnt2(4, 2)), m30));
        w[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                       _mm512_and_si512(_mm512_srlv_epi16(qh, cnt2(0, 2)), m30));
        sc[2 * h] = _mm512_permutexvar_epi16(idx4(8 * h), sc16);
        sc[2 * h + 1] = _mm512_permutexvar_epi16(idx4(8 * h + 4), sc16);
    }
    for (int jj = 0; jj < NJ; jj++) {
        const bp_q8x256 *x = XQ(jj, i);
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16y, _mm256_loadu_si256((const __m256i *)x->bsums)), 5);
        sv[jj] = _mm512_sub_epi32(dot4(w, sc, x->q), zext(off));
    }
})

/* ---- Q2_K: 16 scale bytes (low nibble scale, high nibble min), qs[64], d, dmin. zmm k (of 4)
 * is elements 64k..64k+63: bit pairs 2(2k%4) and 2(2k%4)+2 of qs[32(k/2) ..]. ----------------- */
K_KERNEL(bp_avx512_vec_q2_k, BP_BLOCK_BYTES_Q2_K, PK_Q2, 1, {
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m256i raw = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b));
    const __m256i mn16 = _mm256_srli_epi16(raw, 4);
    const __m512i sc16 = zext(_mm256_and_si256(raw, _mm256_set1_epi16(15)));
    d = f16(b + 80);
    f2 = -f16(b + 82);
    dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)bp_load_u32(b + 80)));
    __m512i w[4], sc[4];
    for (int k = 0; k < 4; k++) {
        const int sh = 4 * (k % 2);
        w[k] = _mm512_and_si512(_mm512_srlv_epi16(bcast32(b + 16 + 32 * (k / 2)), cnt2(sh, sh + 2)), m3);
        sc[k] = _mm512_permutexvar_epi16(idx4(4 * k), sc16);
    }
    for (int jj = 0; jj < NJ; jj++) {
        const bp_q8x256 *x = XQ(jj, i);
        sv[jj] = dot4(w, sc, x->q);
        mv[jj] = zext(_mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)x->bsums)));
    }
})

/* ---- Q3_K: hmask[32], qs[64], 12 bytes of 6-bit scales (+32), d. Like Q2_K plus the high bit
 * (bit 2k and 2k+1 of hmask for zmm k's halves) as +4; the stored -4 comes back through the
 * activation sums. */
K_KERNEL(bp_avx512_vec_q3_k, BP_BLOCK_BYTES_Q3_K, PK_Q3, 0, {
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    const __m256i sc16y = scales_q3_k(b + 96);
    const __m512i sc16 = zext(sc16y);
    const __m512i hm = bcast32(b);
    d = f16(b + 108);
    __m512i w[4], sc[4];
    for (int k = 0; k < 4; k++) {
        const int sh = 4 * (k % 2);
        w[k] = _mm512_and_si512(_mm512_srlv_epi16(bcast32(b + 32 + 32 * (k / 2)), cnt2(sh, sh + 2)), m3);
        w[k] = _mm512_mask_add_epi8(w[k], _mm512_test_epi8_mask(hm, bit2(2 * k, 2 * k + 1)), w[k], four);
        sc[k] = _mm512_permutexvar_epi16(idx4(4 * k), sc16);
    }
    for (int jj = 0; jj < NJ; jj++) {
        const bp_q8x256 *x = XQ(jj, i);
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16y, _mm256_loadu_si256((const __m256i *)x->bsums)), 2);
        sv[jj] = _mm512_sub_epi32(dot4(w, sc, x->q), zext(off));
    }
})

#endif
