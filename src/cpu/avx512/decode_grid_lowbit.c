/* AVX-512 (VL, BW, VNNI) decode and small-batch kernels for the compute-bound low-bit kinds:
 * the grid kinds (IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S), IQ1_S, IQ1_M, TQ1_0, TQ2_0, NVFP4 (Q1_0
 * runs the repacked kernels of avx2/decode_repacked.inc).
 *
 * These kinds are limited by instructions per weight, not memory, so each kernel decodes a
 * 32-weight group once into unsigned bytes, a negate mask (the weight's sign moved onto x) and
 * int16 group scales, pairs two groups in a zmm, and serves every input of the pass (up to 8)
 * with four instructions per 64 weights: load, masked negate, vpmaddubsw, vpdpwssd. The block
 * end is 3 FP ops per input (SERVE). Grid rows come from scalar loads (a gather was slower);
 * sign masks straight from the bits (the ksigns kinds' 8th bit is the parity of the other 7);
 * IQ1_S / IQ1_M use w + 9 = 8 (g + 1) + (delta + 1), unsigned, the -9 returned once per block
 * through the activations' 16-sums; TQ2_0 reads 64 weights per zmm as Q2_K does.
 * From t = 9 the grid and IQ1 kinds run a panel with the inputs in the lanes (p16_panel: a block
 * decoded once per 16 or 32 inputs, one vpdpbusd per 64 multiply-adds).
 * Results per (row, input) do not depend on the batch grouping or the thread count; for the
 * grid and IQ1 kinds (t >= 2) not on which kernel (row or panel) served the input either.
 * Measurements: docs/cpu-kernels.md. */
#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#include "cpu/avx2/simd.h"
#include "cpu/avx512/simd.h"
#include "kinds/iq_tables.h"

enum { MAX_NJ = 16, DXT_MAX = 256 /* blocks of d_x tabled per call (16 KB) */ };

#define XQ(jj, i) ((const bp_q8x256 *)(const void *)(xq + (size_t)(jj) * xs) + (i))

/* TQ1_0, TQ2_0, NVFP4: per row, NJ inputs from j0: float accumulators acc[jj] (zmm); BODY per
 * block (b, i). Up to MAXNJ inputs per pass: 8 (4 was slower for TQ2_0 past t = 4). (The grid
 * and IQ1 kinds: IQ_KERNEL, below.)
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_grid_lowbit.c. */
#define ROW_KERNEL(NAME, BYTES, ELEMS, MAXNJ, ...)                                                        \
    static ALWAYS_INLINE void NAME##_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {    \
        const int64_t nb = job->cols / (ELEMS);                                                           \
        const size_t xs = job->xq_stride;                                                                 \
        const uint8_t *xq = (const uint8_t *)job->xq + (size_t)j0 * xs;                                   \
        const uint8_t *b = job->w + (size_t)r * job->row_bytes;                                           \
        __m512 acc[MAX_NJ];                                                                               \
        float offs[MAX_NJ];                                                                               \
        _Pragma("GCC unroll 16") for (int jj = 0; jj < NJ; jj++) acc[jj] = _mm512_setzero_ps(), offs[jj] = 0; \
        for (int64_t i = 0; i < nb; i++, b += (BYTES)) {                                                  \
            BP_PREFETCH_BLOCK(b, BYTES);                                                                  \
            __VA_ARGS__                                                                                   \
        }                                                                                                 \
        _Pragma("GCC unroll 16") for (int jj = 0; jj < NJ; jj++) job->y[(j0 + jj) * job->rows + r] =       \
            _mm512_reduce_add_ps(acc[jj]) + offs[jj];                                                     \
    }                                                                                                     \
    void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                     \
        for (int64_t j0 = 0; j0 < job->batch;) {                                                          \
            const int64_t left = job->batch - j0;                                                         \
            /* every count up to MAXNJ in one pass (t = 3 as 2 + 1 passes read TQ1_0 at 0.55x t = 4) */   \
            const int nj = left >= 16 && (MAXNJ) >= 16 ? 16 : left >= (MAXNJ) ? (MAXNJ) : (int)left;      \
            for (int64_t r = r0; r < r1; r++) {                                                           \
                switch (nj) {                                                                             \
                case 16: NAME##_row(job, r, (MAXNJ) >= 16 ? 16 : 1, j0); break;                           \
                case 8: NAME##_row(job, r, (MAXNJ) >= 8 ? 8 : 1, j0); break;                              \
                case 7: NAME##_row(job, r, (MAXNJ) >= 7 ? 7 : 1, j0); break;                              \
                case 6: NAME##_row(job, r, (MAXNJ) >= 6 ? 6 : 1, j0); break;                              \
                case 5: NAME##_row(job, r, (MAXNJ) >= 5 ? 5 : 1, j0); break;                              \
                case 4: NAME##_row(job, r, 4, j0); break;                                                 \
                case 3: NAME##_row(job, r, 3, j0); break;                                                 \
                case 2: NAME##_row(job, r, 2, j0); break;                                                 \
                default: NAME##_row(job, r, 1, j0); break;                                                \
                }                                                                                         \
            }                                                                                             \
            j0 += nj;                                                                                     \
        }                                                                                                 \
    }

static ALWAYS_INLINE __m512i zext(__m256i v) { return _mm512_inserti64x4(_mm512_setzero_si512(), v, 0); }
static ALWAYS_INLINE __m512i pair(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Every input of the pass, 8 at a time (the decoded pairs stay in registers, 8 int32
 * accumulators beside them). Per input and 64 weights: a load, a masked negate where the weight
 * is negative (the sign moved onto x; SIGNS 0: none), vpmaddubsw, vpdpwssd. An input's block
 * sum starts at INIT(jj) and ends as END_ADD(jj, s) (IQ1's shift term, below). With 1-2 inputs,
 * alternate pairs go to two of them (one chain of vpdpwssd, ~5 cycles each, left a single
 * input's decode latency-bound).
 * Block end, decode (DEC, a batch of 1): (int lanes * d_w) * d_x into 16 float lanes, the
 * input's d as an embedded broadcast (3 FP ops). Block end, a batch: each input's int lanes
 * reduced to its exact block sum S (lanesum8, ~3 ops an input, the inputs' sums land in the lanes
 * of one ymm), then y = fma(float(S), d_x * d_w, y) for 8 inputs at once, d_x from a table
 * built once per call (dxt). With 1-4 inputs a block's reduction runs after the next block's
 * serve (pe_, pdx_, DEFER): at its own block's end it holds up the window. Not for IQ3_XXS /
 * IQ3_S, whose eight dword lookups per group want the registers, nor with 8 inputs (the
 * deferred sums spill).
 * That is the arithmetic of the 16/32-input panel (p16_panel,
 * below), lane for lane, so an input's result does not depend on the batch it came in or on
 * which kernel served its group (tests/test_cpu_kernels.c checks t against t = 64).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_grid_lowbit.c. */
#define ADD_NONE(P, V) (V)
#define DECODE_PAIR(GRPG, ADDP, P)                                                                        \
    {                                                                                                     \
        __m256i g0, g1;                                                                                   \
        GRPG(2 * (P), g0)                                                                                 \
        GRPG(2 * (P) + 1, g1)                                                                             \
        G_[P] = ADDP(P, pair(g0, g1));                                                                    \
    }

/* The lane sums of s[0..n-1] (n <= 8; the rest read as 0) in lanes 0..n-1; exact, any order. */
static ALWAYS_INLINE __m256i lanesum8(const __m512i *s, const int n) {
    const __m512i z = _mm512_setzero_si512();
    __m512i t[4], u[2];
    for (int k = 0; k < 4; k++) {
        const __m512i a = 2 * k < n ? s[2 * k] : z, b = 2 * k + 1 < n ? s[2 * k + 1] : z;
        t[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    }
    for (int k = 0; k < 2; k++) /* 128-bit lane L: partial sums of s[4k .. 4k + 3] */
        u[k] = 4 * k < n ? _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * k], t[2 * k + 1]),
                                            _mm512_unpackhi_epi64(t[2 * k], t[2 * k + 1]))
                         : z;
    if (n <= 4) {
        const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(u[0]), _mm512_extracti64x4_epi64(u[0], 1));
        return _mm256_zextsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    }
    /* [u0 L0 + L1, u0 L2 + L3, u1 L0 + L1, u1 L2 + L3] -> [u0 L0 + L1, u1 L0 + L1, u0 L2 + L3, u1 L2 + L3] */
    __m512i v = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
    v = _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

#define SERVE(GRPG, ADDP, SIGNS, KP, SCP, INIT, END_ADD, D)                                               \
    {                                                                                                     \
        const float dwf_ = (D);                                                                           \
        __m512i G_[4];                                                                                    \
        if (NJ < 8) _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) DECODE_PAIR(GRPG, ADDP, p)        \
        _Pragma("GCC unroll 2") for (int h_ = 0; h_ < NJ; h_ += 8) {                                      \
            const int n_ = NJ - h_ < 8 ? NJ - h_ : 8;                                                     \
            __m512i si[2][8];                                                                             \
            _Pragma("GCC unroll 8") for (int q = 0; q < n_; q++) si[0][q] = INIT(h_ + q),                 \
                                                                  si[1][q] = _mm512_setzero_si512();      \
            _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {                                         \
                if (NJ >= 8 && h_ == 0) DECODE_PAIR(GRPG, ADDP, p)                                        \
                const __m512i sc_ = SCP(p);                                                               \
                const __mmask64 k_ = KP(p);                                                               \
                _Pragma("GCC unroll 8") for (int q = 0; q < n_; q++) {                                    \
                    __m512i xv = _mm512_loadu_si512((const void *)(XQ(h_ + q, i)->q + 64 * p));           \
                    if (SIGNS) xv = _mm512_mask_sub_epi8(xv, k_, _mm512_setzero_si512(), xv);              \
                    __m512i *s_ = &si[n_ >= 4 ? 0 : p & 1][q];                                            \
                    *s_ = _mm512_dpwssd_epi32(*s_, _mm512_maddubs_epi16(G_[p], xv), sc_);                  \
                }                                                                                         \
            }                                                                                             \
            if (DEC) {                                                                                    \
                const __m512i s_ = END_ADD(0, _mm512_add_epi32(si[0][0], si[1][0]));                      \
                acc1 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s_), _mm512_set1_ps(dwf_)),       \
                                       _mm512_set1_ps(XQ(0, i)->d), acc1);                                \
            } else {                                                                                      \
                const __m256 dx_ = dxt ? _mm256_loadu_ps(dxt + 16 * i + h_) : _mm256_setr_ps(XQ(0, i)->d, 0, 0, 0, 0, 0, 0, 0); \
                if (NJ <= 4 && DEFER_) {                                                                  \
                    if (i > 0) acc8[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanesum8(pe_, n_)), pdx_, acc8[0]); \
                    _Pragma("GCC unroll 4") for (int q = 0; q < n_; q++) pe_[q] =                         \
                        END_ADD(h_ + q, n_ >= 4 ? si[0][q] : _mm512_add_epi32(si[0][q], si[1][q]));       \
                    pdx_ = _mm256_mul_ps(dx_, _mm256_set1_ps(dwf_));                                      \
                } else {                                                                                  \
                    __m512i e_[8];                                                                        \
                    _Pragma("GCC unroll 8") for (int q = 0; q < n_; q++) e_[q] =                          \
                        END_ADD(h_ + q, n_ >= 4 ? si[0][q] : _mm512_add_epi32(si[0][q], si[1][q]));       \
                    acc8[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanesum8(e_, n_)),                       \
                                              _mm256_mul_ps(dx_, _mm256_set1_ps(dwf_)), acc8[0]);         \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }
#define CALL(M, ...) M(__VA_ARGS__)
/* IQ1: coef16 . bsums (the -9 shift), coef_ a zmm of 16 int16 with the upper half zero, as an
 * input's start value (INIT) or added at the block end (END_ADD). Where it goes is chosen per
 * kind by speed (the compiler's register allocation differs): IQ1_S at the end, IQ1_M at the
 * start.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_grid_lowbit.c. */
#define IQ1_SHIFT_TERM(JJ) _mm512_madd_epi16(_mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)XQ(JJ, i)->bsums)), coef_)
#define ZERO_START(JJ) _mm512_setzero_si512()
#define NO_END(JJ, S) (S)
#define IQ1_END(JJ, S) _mm512_add_epi32((S), IQ1_SHIFT_TERM(JJ))

/* vpermw indices: lanes 0-15 take word a, 16-31 word b (a pair's two 32-weight scales)... */
static ALWAYS_INLINE __m512i idx2(int a, int b) { return pair(_mm256_set1_epi16((short)a), _mm256_set1_epi16((short)b)); }
/* ...or lanes 8k..8k+7 take word a + k (four 16-weight scales). */
static ALWAYS_INLINE __m512i idx4(int a) {
    return pair(_mm256_setr_epi16((short)a, (short)a, (short)a, (short)a, (short)a, (short)a, (short)a, (short)a,
                                  (short)(a + 1), (short)(a + 1), (short)(a + 1), (short)(a + 1), (short)(a + 1),
                                  (short)(a + 1), (short)(a + 1), (short)(a + 1)),
                _mm256_setr_epi16((short)(a + 2), (short)(a + 2), (short)(a + 2), (short)(a + 2), (short)(a + 2),
                                  (short)(a + 2), (short)(a + 2), (short)(a + 2), (short)(a + 3), (short)(a + 3),
                                  (short)(a + 3), (short)(a + 3), (short)(a + 3), (short)(a + 3), (short)(a + 3),
                                  (short)(a + 3)));
}

/* Eight groups' sign bytes at once: each dword holds a group's four 7-bit sign fields in its
 * bytes; bit 7 of each byte becomes the parity of its 7 bits (the ksigns rule). Stored as the
 * four pairs' 64-bit masks. */
static ALWAYS_INLINE void parity_signs8(__m256i s, uint64_t out[4]) {
    __m256i p = _mm256_xor_si256(s, _mm256_srli_epi32(s, 4));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
    p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
    s = _mm256_or_si256(s, _mm256_slli_epi32(_mm256_and_si256(p, _mm256_set1_epi32(0x01010101)), 7));
    _mm256_storeu_si256((__m256i *)(void *)out, s);
}
/* Eight dwords of four 7-bit fields at bits 0, 7, 14, 21 -> one field per byte. */
static ALWAYS_INLINE __m256i fields7(__m256i a) {
    const __m256i m = _mm256_set1_epi32(0x7f);
    return _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(a, m), _mm256_and_si256(_mm256_slli_epi32(a, 1), _mm256_slli_epi32(m, 8))),
                           _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(a, 2), _mm256_slli_epi32(m, 16)),
                                           _mm256_and_si256(_mm256_slli_epi32(a, 3), _mm256_slli_epi32(m, 24))));
}
/* (aux >> 28) * 2 + 1 of eight dwords, as eight words in a zmm for vpermw. */
static ALWAYS_INLINE __m512i top4_scales(__m256i aux) {
    __m256i s = _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), _mm256_set1_epi32(1));
    return _mm512_zextsi128_si512(_mm256_cvtepi32_epi16(s));
}

static ALWAYS_INLINE __m256i grid64x4(const uint64_t *t, unsigned a, unsigned b, unsigned c, unsigned d) {
    return _mm256_set_epi64x((long long)t[d], (long long)t[c], (long long)t[b], (long long)t[a]);
}
static ALWAYS_INLINE __m256i grid32x8(const uint32_t *t, const uint8_t *q, unsigned hi) {
    return _mm256_set_epi32((int)t[q[7] | ((hi << 1) & 0x100u)], (int)t[q[6] | ((hi << 2) & 0x100u)],
                            (int)t[q[5] | ((hi << 3) & 0x100u)], (int)t[q[4] | ((hi << 4) & 0x100u)],
                            (int)t[q[3] | ((hi << 5) & 0x100u)], (int)t[q[2] | ((hi << 6) & 0x100u)],
                            (int)t[q[1] | ((hi << 7) & 0x100u)], (int)t[q[0] | ((hi << 8) & 0x100u)]);
}

/* ---- grid kinds (layouts: avx2/decode_grid_lowbit.c and src/kinds/ref_iquants.c) ----------------------
 * Per kind: PREP_x (the block's signs, scales and indices, as locals), ARGS_x (SERVE's
 * arguments) and WADD_x (what makes the decoded bytes the signed weights, for the panel). */
#define G_IQ2_XXS(IB, G)                                                                                  \
    {                                                                                                     \
        const uint8_t *q = b + 2 + 8 * (IB);                                                              \
        G = grid64x4(bp_iq2xxs_grid, q[0], q[1], q[2], q[3]);                                             \
    }
#define KP_MEM(P) ((__mmask64)smask[P])
#define KP_NONE(P) ((__mmask64)0)
#define SCP_2(P) _mm512_permutexvar_epi16(idx2(2 * (P), 2 * (P) + 1), scw)
#define WADD_NONE(P, V) (V)
/* the 8 aux words are the high dwords of the block's 8 qwords at 2 */
#define PREP_IQ2_XXS                                                                                      \
    const __m256i aux = _mm512_cvtepi64_epi32(_mm512_srli_epi64(_mm512_loadu_si512((const void *)(b + 2)), 32)); \
    uint64_t smask[4];                                                                                    \
    parity_signs8(fields7(aux), smask);                                                                   \
    const __m512i scw = top4_scales(aux);
#define ARGS_IQ2_XXS G_IQ2_XXS, ADD_NONE, 1, KP_MEM, SCP_2, ZERO_START, NO_END, f16(b) * 0.125f, WADD_NONE

#define G_IQ2_XS(IB, G)                                                                                   \
    {                                                                                                     \
        const uint64_t q_ = bp_load_u64(b + 2 + 8 * (IB));                                                \
        G = grid64x4(bp_iq2xs_grid, (unsigned)q_ & 511, (unsigned)(q_ >> 16) & 511, (unsigned)(q_ >> 32) & 511, \
                     (unsigned)(q_ >> 48) & 511);                                                         \
    }
/* Scales of 16 weights: words [lo0, hi0, lo1, hi1, ...] (2 s + 1) from the 8 scale bytes. */
static ALWAYS_INLINE __m512i nibble_scales(const uint8_t *p) {
    __m128i v = _mm_loadl_epi64((const __m128i *)p);
    __m128i lh = _mm_unpacklo_epi8(_mm_and_si128(v, _mm_set1_epi8(15)), _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15)));
    __m256i w = _mm256_cvtepu8_epi16(lh);
    return zext(_mm256_or_si256(_mm256_slli_epi16(w, 1), _mm256_set1_epi16(1)));
}
#define SCP_4(P) _mm512_permutexvar_epi16(idx4(4 * (P)), scw)
/* 32 u16: 9-bit grid index, 7-bit sign field */
#define PREP_IQ2_XS                                                                                       \
    const __m512i v = _mm512_loadu_si512((const void *)(b + 2));                                          \
    uint64_t smask[4];                                                                                    \
    parity_signs8(_mm512_cvtepi16_epi8(_mm512_srli_epi16(v, 9)), smask);                                  \
    const __m512i scw = nibble_scales(b + 66);
#define ARGS_IQ2_XS G_IQ2_XS, ADD_NONE, 1, KP_MEM, SCP_4, ZERO_START, NO_END, f16(b) * 0.125f, WADD_NONE

#define G_IQ2_S(IB, G)                                                                                    \
    {                                                                                                     \
        const uint8_t *qs = b + 2 + 4 * (IB);                                                             \
        const unsigned qh = b[66 + (IB)];                                                                 \
        G = grid64x4(bp_iq2s_grid, qs[0] | ((qh << 8) & 0x300u), qs[1] | ((qh << 6) & 0x300u),           \
                     qs[2] | ((qh << 4) & 0x300u), qs[3] | ((qh << 2) & 0x300u));                         \
    }
#define KP_IQ2_S(P) ((__mmask64)bp_load_u64(b + 34 + 8 * (P)))
#define PREP_IQ2_S const __m512i scw = nibble_scales(b + 74);
#define ARGS_IQ2_S G_IQ2_S, ADD_NONE, 1, KP_IQ2_S, SCP_4, ZERO_START, NO_END, f16(b) * 0.125f, WADD_NONE

#define G_IQ3_XXS(IB, G) G = grid32x8(bp_iq3xxs_grid, b + 2 + 8 * (IB), 0);
#define PREP_IQ3_XXS                                                                                      \
    const __m256i aux = load32(b + 66);                                                                   \
    uint64_t smask[4];                                                                                    \
    parity_signs8(fields7(aux), smask);                                                                   \
    const __m512i scw = top4_scales(aux);
#define ARGS_IQ3_XXS G_IQ3_XXS, ADD_NONE, 1, KP_MEM, SCP_2, ZERO_START, NO_END, f16(b) * 0.25f, WADD_NONE

#define G_IQ3_S(IB, G)                                                                                    \
    {                                                                                                     \
        const uint16_t *ix = idx + 8 * (IB);                                                              \
        G = _mm256_set_epi32((int)bp_iq3s_grid[ix[7]], (int)bp_iq3s_grid[ix[6]], (int)bp_iq3s_grid[ix[5]],  \
                             (int)bp_iq3s_grid[ix[4]], (int)bp_iq3s_grid[ix[3]], (int)bp_iq3s_grid[ix[2]],  \
                             (int)bp_iq3s_grid[ix[1]], (int)bp_iq3s_grid[ix[0]]);                           \
    }
#define KP_IQ3_S(P) ((__mmask64)bp_load_u64(b + 74 + 8 * (P)))
/* 64 9-bit grid indices: the low bytes at 2, the 9th bits in order in the 8 bytes at 66; 4 bits
 * per group (low nibble first) at 106, giving 2 s + 1 */
#define PREP_IQ3_S                                                                                        \
    const uint64_t hi = bp_load_u64(b + 66);                                                              \
    uint16_t idx[64];                                                                                     \
    for (int h = 0; h < 2; h++) {                                                                         \
        const __m512i lo = _mm512_cvtepu8_epi16(load32(b + 2 + 32 * h));                                  \
        _mm512_storeu_si512((void *)(idx + 32 * h),                                                       \
                            _mm512_mask_add_epi16(lo, (__mmask32)(hi >> (32 * h)), lo, _mm512_set1_epi16(256))); \
    }                                                                                                     \
    const __m128i v = _mm_cvtsi32_si128((int)bp_load_u32(b + 106));                                      \
    const __m128i lh = _mm_unpacklo_epi8(_mm_and_si128(v, _mm_set1_epi8(15)), _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15))); \
    const __m512i scw = _mm512_zextsi128_si512(_mm_or_si128(_mm_slli_epi16(_mm_cvtepu8_epi16(lh), 1), _mm_set1_epi16(1)));
#define ARGS_IQ3_S G_IQ3_S, ADD_NONE, 1, KP_IQ3_S, SCP_2, ZERO_START, NO_END, f16(b), WADD_NONE

/* ---- IQ1_S / IQ1_M: w + 9 = 8 (g + 1) + (delta + 1), unsigned; -9 * scale * sum(x) per 16 -- */
static uint64_t g_iq1_g8[2048]; /* per grid row: bytes 8 (g + 1) */

static void init_iq1(void) {
    for (int i = 0; i < 2048; i++) {
        uint64_t row = bp_iq1s_grid[i], out = 0;
        for (int j = 0; j < 8; j++) {
            int g = (int8_t)(uint8_t)(row >> (8 * j));
            out |= (uint64_t)(uint8_t)(8 * (g + 1)) << (8 * j);
        }
        g_iq1_g8[i] = out;
    }
}

/* IQ1_S keeps delta (one per group) out of the weights: w = 8 (g + 1) + (delta - 8), and the
 * group constant (delta - 8) * scale multiplies the group's activation sum, so the weights are
 * the table bytes alone. */
#define G_IQ1_S(IB, G)                                                                                    \
    {                                                                                                     \
        const unsigned qh = bp_load_u16(b + 34 + 2 * (IB));                                               \
        const uint8_t *q = b + 2 + 4 * (IB);                                                              \
        G = grid64x4(g_iq1_g8, q[0] | ((qh & 7u) << 8), q[1] | (((qh >> 3) & 7u) << 8),                   \
                     q[2] | (((qh >> 6) & 7u) << 8), q[3] | (((qh >> 9) & 7u) << 8));                     \
    }
/* u16 ib at 34: four 3-bit high index parts, 3-bit scale at 12, delta sign at 15; (delta - 8):
 * -9 where bit 15 is set, -7 where not */
#define PREP_IQ1_S                                                                                        \
    const __m128i qh8 = _mm_loadu_si128((const __m128i *)(b + 34));                                       \
    const __m128i s8 = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh8, 12), _mm_set1_epi16(7)), 1), \
                                    _mm_set1_epi16(1));                                                   \
    const __m512i scw = _mm512_zextsi128_si512(s8);                                                       \
    const __m128i dm8 = _mm_sub_epi16(_mm_set1_epi16(-7), _mm_slli_epi16(_mm_srli_epi16(qh8, 15), 1));  \
    const __m128i c8 = _mm_mullo_epi16(s8, dm8);                                                          \
    const __m256i coef = _mm256_set_m128i(_mm_unpackhi_epi16(c8, c8), _mm_unpacklo_epi16(c8, c8));        \
    const __m512i coef_ = _mm512_zextsi256_si512(coef);                                                   \
    (void)coef_;
/* the panel's signed weights: + (delta - 8) per group, as bytes */
#define WADD_IQ1_S(P, V)                                                                                  \
    _mm512_add_epi8((V), _mm512_permutexvar_epi16(idx2(2 * (P), 2 * (P) + 1),                             \
                                                  _mm512_zextsi128_si512(_mm_or_si128(                    \
                                                      _mm_and_si128(dm8, _mm_set1_epi16(0xff)), _mm_slli_epi16(dm8, 8)))))
#define ARGS_IQ1_S G_IQ1_S, ADD_NONE, 0, KP_NONE, SCP_2, ZERO_START, IQ1_END, f16(b) * 0.125f, WADD_IQ1_S

#define G_IQ1_M(IB, G)                                                                                    \
    {                                                                                                     \
        const uint32_t qw = bp_load_u32(b + 4 * (IB)), hh = bp_load_u16(b + 32 + 2 * (IB));               \
        G = grid64x4(g_iq1_g8, (qw & 0xffu) | ((hh << 8) & 0x700u), ((qw >> 8) & 0xffu) | ((hh << 4) & 0x700u), \
                     ((qw >> 16) & 0xffu) | (hh & 0x700u), (qw >> 24) | ((hh >> 4) & 0x700u));            \
    }
/* Pair P's delta bytes: 2 for each 8-weight segment whose delta is +1 (bit clear), else 0. */
#define GP_IQ1_M(P, V) _mm512_add_epi8((V), _mm512_maskz_mov_epi64((__mmask8)(dplus >> (8 * (P))), _mm512_set1_epi8(2)))
/* 16 3-bit scales (one per 16 weights), as avx2/decode_grid_lowbit.c unpacks them; 16 qh bytes at 32: a
 * nibble per 8 weights (3 high index bits, then the delta sign), low nibble first; as 32 bytes
 * in segment order */
#define PREP_IQ1_M                                                                                        \
    const __m256i rep = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, \
                                         7, 6, 7, 6, 7);                                                  \
    const __m256i mul = _mm256_setr_epi16(512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1);    \
    uint16_t sc4[4];                                                                                      \
    for (int k = 0; k < 4; k++) sc4[k] = bp_load_u16(b + 48 + 2 * k);                                     \
    const uint16_t dbits =                                                                                \
        (uint16_t)((sc4[0] >> 12) | ((sc4[1] >> 8) & 0x00f0u) | ((sc4[2] >> 4) & 0x0f00u) | (sc4[3] & 0xf000u)); \
    __m256i s16 = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadl_epi64((const __m128i *)(b + 48))), rep); \
    s16 = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(s16, mul), 9), _mm256_set1_epi16(7));     \
    const __m256i sc16 = _mm256_add_epi16(_mm256_add_epi16(s16, s16), _mm256_set1_epi16(1));              \
    const __m128i qh = _mm_loadu_si128((const __m128i *)(b + 32));                                        \
    const __m128i nl = _mm_and_si128(qh, _mm_set1_epi8(15)), nh = _mm_and_si128(_mm_srli_epi16(qh, 4), _mm_set1_epi8(15)); \
    const __m256i nib = _mm256_set_m128i(_mm_unpackhi_epi8(nl, nh), _mm_unpacklo_epi8(nl, nh));           \
    const uint32_t dplus = ~(uint32_t)_mm256_test_epi8_mask(nib, _mm256_set1_epi8(8));                    \
    const __m512i scw = zext(sc16);                                                                       \
    const __m512i coef_ = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc16, _mm256_set1_epi16(-9)));        \
    (void)coef_;
#define WADD_IQ1_M(P, V) _mm512_sub_epi8((V), _mm512_set1_epi8(9))
#define ARGS_IQ1_M G_IQ1_M, GP_IQ1_M, 0, KP_NONE, SCP_4, IQ1_SHIFT_TERM, NO_END, _cvtsh_ss(dbits) * 0.125f, WADD_IQ1_M

/* SERVE takes the first 8 of ARGS_x. */
#define SERVE9(GRPG, ADDP, SIGNS, KP, SCP, INIT, END_ADD, D, WADD) SERVE(GRPG, ADDP, SIGNS, KP, SCP, INIT, END_ADD, D)

/* ---- 16 or 32 inputs per pass (t >= 16): VNNI with the inputs in the lanes -----------------
 * avx512/panel16.inc's panel (avx512/decode_kquant.c says why it exists), for these kinds: a row's block is decoded ONCE
 * for 16 or 32 inputs into signed int8 weights (SIGNS and WADD applied), its group scales and
 * the +128 bias's correction -128 * sum_g scale_g * sum(weights of g); the activations are
 * transposed once per 128 rows (16 inputs in the lanes, +128 to make them the unsigned
 * operand) and one vpdpbusd with the weight dword broadcast does 64 multiply-adds. Per group
 * of 16 or 32 weights the int32 sums are scaled once (vpmulld; they do not fit 16 bits), per
 * block y = fma(float(S), d_x * d_w, y), SERVE's batch arithmetic. Why: the row kernels above
 * spend per 64 weights and input two multiply-port ops and decode once per 8-16 inputs, and a
 * tiled int8 GEMM (ggml's) overtakes them at t = 16-32.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_grid_lowbit.c. */
enum { IK_IQ2_XXS, IK_IQ2_XS, IK_IQ2_S, IK_IQ3_XXS, IK_IQ3_S, IK_IQ1_S, IK_IQ1_M };
/* Batches of PANEL_MIN or more inputs run the panel, 16 or (past PANEL2_MIN) 32 inputs a pass,
 * the last pass partly filled: a pass costs the same whatever its fill, and 9-11 inputs in a
 * 16-input pass beat 8 + 1-3 row passes; at t = 8 the rows win. 17-20 inputs run 16 + rows
 * (faster than a 32-input pass).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_grid_lowbit.c. */
#ifndef PANEL_MIN
#define PANEL_MIN 9
#endif
#ifndef PANEL2_MIN
#define PANEL2_MIN 20
#endif

typedef struct prow {
    _Alignas(64) int8_t w[256];
    int32_t sc[16];
    int32_t negc;
    float d;
} prow;

/* k-steps (4 weights) per scale group */
static ALWAYS_INLINE int ik_g(int k) { return k == IK_IQ2_XS || k == IK_IQ2_S || k == IK_IQ1_M ? 4 : 8; }

#define UNPACK(GRPG, ADDP, SIGNS, KP, SCP, INIT, END_ADD, D, WADD)                                        \
    {                                                                                                     \
        __m512i G_[4], c_ = _mm512_setzero_si512();                                                       \
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) DECODE_PAIR(GRPG, ADDP, p)                    \
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {                                             \
            __m512i w_ = G_[p];                                                                           \
            if (SIGNS) w_ = _mm512_mask_sub_epi8(w_, KP(p), _mm512_setzero_si512(), w_);                  \
            w_ = WADD(p, w_);                                                                             \
            _mm512_store_si512((void *)(o->w + 64 * p), w_);                                              \
            c_ = _mm512_dpwssd_epi32(c_, _mm512_maddubs_epi16(_mm512_set1_epi8(1), w_), SCP(p));          \
        }                                                                                                 \
        o->negc = -128 * _mm512_reduce_add_epi32(c_);                                                     \
        _mm512_storeu_si512((void *)o->sc, _mm512_cvtepi16_epi32(_mm512_castsi512_si256(scw)));           \
        o->d = (D);                                                                                       \
    }

static ALWAYS_INLINE void iq_unpack(const int kind, const uint8_t *b, prow *o) {
    switch (kind) {
    case IK_IQ2_XXS: { PREP_IQ2_XXS CALL(UNPACK, ARGS_IQ2_XXS) } break;
    case IK_IQ2_XS: { PREP_IQ2_XS CALL(UNPACK, ARGS_IQ2_XS) } break;
    case IK_IQ2_S: { PREP_IQ2_S CALL(UNPACK, ARGS_IQ2_S) } break;
    case IK_IQ3_XXS: { PREP_IQ3_XXS CALL(UNPACK, ARGS_IQ3_XXS) } break;
    case IK_IQ3_S: { PREP_IQ3_S CALL(UNPACK, ARGS_IQ3_S) } break;
    case IK_IQ1_S: { PREP_IQ1_S CALL(UNPACK, ARGS_IQ1_S) } break;
    default: { PREP_IQ1_M CALL(UNPACK, ARGS_IQ1_M) } break;
    }
}

/* The panel's hooks (avx512/panel16.inc says what each must do). Block i of 16 inputs (the first
 * nv real, the rest 0): xt[64 k-steps][16 inputs x 4 bytes] (+128) and their d; no sums in bt. */
static ALWAYS_INLINE void p16_xt_block(const int kind, const uint8_t *xq, size_t xs, int64_t i, int nv, uint8_t *xt, int32_t *bt,
                                       float *dx) {
    (void)kind, (void)bt;
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int c = 0; c < 4; c++) {
        __m512i r[16];
        for (int jj = 0; jj < 16; jj++) r[jj] = jj < nv ? _mm512_loadu_si512((const void *)(XQ(jj, i)->q + 64 * c)) : _mm512_setzero_si512();
        bp_transpose16_epi32(r);
        for (int s = 0; s < 16; s++) _mm512_store_si512((void *)(xt + 64 * (16 * c + s)), _mm512_xor_si512(r[s], bias));
    }
    for (int jj = 0; jj < 16; jj++) dx[jj] = jj < nv ? XQ(jj, i)->d : 0.0f;
}
static ALWAYS_INLINE int p16_g(int kind) { return ik_g(kind); }
/* A group's sums do not fit 16 bits here: vpmulld. */
static ALWAYS_INLINE __m512i p16_scale(int kind, __m512i acc, __m512i sub, __m512i scv) {
    (void)kind;
    return _mm512_add_epi32(acc, _mm512_mullo_epi32(sub, scv));
}
static ALWAYS_INLINE void p16_unpack(int kind, const uint8_t *b, prow *o) { iq_unpack(kind, b, o); }
static ALWAYS_INLINE __m512 p16_block_end(int kind, const prow *p, const int32_t *bt, __m512 dxv, __m512 f) {
    (void)kind, (void)p, (void)bt, (void)dxv;
    return f;
}
#include "cpu/avx512/panel16.inc"

/* One NJ's row loop as a function of its own: with every NJ (and the panels) inlined into one,
 * GCC's register allocation costs the 2-8 input kernels up to 3x. TAB: d_x from the table (a
 * NULL table, only past DXT_MAX blocks and only with NJ = 1, reads it in place; a fallback for
 * any NJ in the same function halves IQ1_M's t = 8).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_grid_lowbit.c. */
#define IQ_ROWS(NAME, SUF, NJ, DEC, TAB)                                                                   \
    static __attribute__((noinline)) void NAME##SUF(const bp_cpu_job *job, int64_t r0, int64_t r1, int64_t j0, const float *dxt) { \
        for (int64_t r = r0; r < r1; r++) NAME##_row(job, r, NJ, j0, TAB ? dxt : NULL, DEC);              \
    }
/* Per row, NJ inputs from j0, SERVE per block; DEC: a batch of 1. Inputs outer, rows inner;
 * groups of 16 or 32 inputs go to p16_panel. NJ is any count from 1 to 8: as 8 / 4 / 2 / 1 a
 * pass, t = 3 and 5-7 made two or three passes, each decoding the blocks again (up to ~2x
 * slower).
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx512/decode_grid_lowbit.c. */
#define IQ_KERNEL(NAME, BYTES, KIND, DEFER, PREP, ARGS)                                                   \
    static ALWAYS_INLINE void NAME##_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0, const float *dxt, \
                                         const bool DEC) {                                               \
        const int64_t nb = job->cols / 256;                                                               \
        const size_t xs = job->xq_stride;                                                                 \
        const uint8_t *xq = (const uint8_t *)job->xq + (size_t)j0 * xs;                                   \
        const uint8_t *b = job->w + (size_t)r * job->row_bytes;                                           \
        __m512 acc1 = _mm512_setzero_ps();                                                                \
        __m256 acc8[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};                                      \
        __m512i pe_[4];                                                                                   \
        const bool DEFER_ = (DEFER);                                                                      \
        __m256 pdx_ = _mm256_setzero_ps();                                                                \
        for (int64_t i = 0; i < nb; i++, b += (BYTES)) {                                                  \
            BP_PREFETCH_BLOCK(b, BYTES);                                                                  \
            PREP CALL(SERVE9, ARGS)                                                                       \
        }                                                                                                 \
        if (!DEC && NJ <= 4 && DEFER_ && nb > 0) acc8[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanesum8(pe_, NJ)), pdx_, acc8[0]); \
        if (DEC) {                                                                                        \
            job->y[j0 * job->rows + r] = _mm512_reduce_add_ps(acc1);                                      \
            return;                                                                                       \
        }                                                                                                 \
        _Alignas(32) float o[16];                                                                         \
        _mm256_store_ps(o, acc8[0]);                                                                      \
        _mm256_store_ps(o + 8, acc8[1]);                                                                  \
        for (int jj = 0; jj < NJ; jj++) job->y[(j0 + jj) * job->rows + r] = o[jj];                        \
    }                                                                                                     \
    IQ_ROWS(NAME, _r8, 8, false, true)                                                                    \
    IQ_ROWS(NAME, _r7, 7, false, true)                                                                    \
    IQ_ROWS(NAME, _r6, 6, false, true)                                                                    \
    IQ_ROWS(NAME, _r5, 5, false, true)                                                                    \
    IQ_ROWS(NAME, _r4, 4, false, true)                                                                    \
    IQ_ROWS(NAME, _r3, 3, false, true)                                                                    \
    IQ_ROWS(NAME, _r2, 2, false, true)                                                                    \
    IQ_ROWS(NAME, _r1, 1, false, true)                                                                    \
    IQ_ROWS(NAME, _r1x, 1, false, false)                                                                  \
    IQ_ROWS(NAME, _dec, 1, true, false)                                                                   \
    static __attribute__((noinline)) void NAME##_p1(const bp_cpu_job *job, int64_t r0, int64_t r1, int64_t j0, int nv) { \
        p16_panel(job, r0, r1, j0, nv, KIND, BYTES, 1);                                                    \
    }                                                                                                     \
    static __attribute__((noinline)) void NAME##_p2(const bp_cpu_job *job, int64_t r0, int64_t r1, int64_t j0, int nv) { \
        p16_panel(job, r0, r1, j0, nv, KIND, BYTES, 2);                                                    \
    }                                                                                                     \
    void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                     \
        const int64_t nb = job->cols / 256;                                                               \
        _Alignas(32) float dxt[DXT_MAX * 16];                                                             \
        for (int64_t j0 = 0; j0 < job->batch;) {                                                          \
            const int64_t left = job->batch - j0;                                                         \
            if (left >= PANEL_MIN) {                                                                      \
                const int nv = left >= 32 ? 32 : (int)left;                                               \
                if (nv > PANEL2_MIN) NAME##_p2(job, r0, r1, j0, nv);                                      \
                else if (nv > 16) NAME##_p1(job, r0, r1, j0, 16);                                         \
                else NAME##_p1(job, r0, r1, j0, nv);                                                      \
                j0 += nv > PANEL2_MIN || nv <= 16 ? nv : 16;                                              \
                continue;                                                                                 \
            }                                                                                             \
            const bool dec = job->batch == 1, tab = !dec && nb <= DXT_MAX;                                \
            const int nj = !dec && !tab ? 1 : left >= 8 ? 8 : (int)left;                                   \
            if (tab) {                                                                                    \
                const size_t xs = job->xq_stride;                                                         \
                const uint8_t *xq = (const uint8_t *)job->xq + (size_t)j0 * xs;                           \
                for (int64_t i = 0; i < nb; i++)                                                          \
                    for (int jj = 0; jj < 16; jj++) dxt[16 * i + jj] = jj < nj ? XQ(jj, i)->d : 0.0f;     \
            }                                                                                             \
            if (dec) NAME##_dec(job, r0, r1, j0, NULL);                                                   \
            else if (!tab) NAME##_r1x(job, r0, r1, j0, NULL);                                             \
            else if (nj == 8) NAME##_r8(job, r0, r1, j0, dxt);                                            \
            else if (nj == 7) NAME##_r7(job, r0, r1, j0, dxt);                                            \
            else if (nj == 6) NAME##_r6(job, r0, r1, j0, dxt);                                            \
            else if (nj == 5) NAME##_r5(job, r0, r1, j0, dxt);                                            \
            else if (nj == 4) NAME##_r4(job, r0, r1, j0, dxt);                                            \
            else if (nj == 3) NAME##_r3(job, r0, r1, j0, dxt);                                            \
            else if (nj == 2) NAME##_r2(job, r0, r1, j0, dxt);                                            \
            else NAME##_r1(job, r0, r1, j0, dxt);                                                         \
            j0 += nj;                                                                                     \
        }                                                                                                 \
    }

IQ_KERNEL(bp_avx512_vec_iq2_xxs, BP_BLOCK_BYTES_IQ2_XXS, IK_IQ2_XXS, true, PREP_IQ2_XXS, ARGS_IQ2_XXS)
IQ_KERNEL(bp_avx512_vec_iq2_xs, BP_BLOCK_BYTES_IQ2_XS, IK_IQ2_XS, true, PREP_IQ2_XS, ARGS_IQ2_XS)
IQ_KERNEL(bp_avx512_vec_iq2_s, BP_BLOCK_BYTES_IQ2_S, IK_IQ2_S, true, PREP_IQ2_S, ARGS_IQ2_S)
IQ_KERNEL(bp_avx512_vec_iq3_xxs, BP_BLOCK_BYTES_IQ3_XXS, IK_IQ3_XXS, false, PREP_IQ3_XXS, ARGS_IQ3_XXS)
IQ_KERNEL(bp_avx512_vec_iq3_s, BP_BLOCK_BYTES_IQ3_S, IK_IQ3_S, false, PREP_IQ3_S, ARGS_IQ3_S)
IQ_KERNEL(bp_avx512_vec_iq1_s, BP_BLOCK_BYTES_IQ1_S, IK_IQ1_S, true, PREP_IQ1_S, ARGS_IQ1_S)
IQ_KERNEL(bp_avx512_vec_iq1_m, BP_BLOCK_BYTES_IQ1_M, IK_IQ1_M, true, PREP_IQ1_M, ARGS_IQ1_M)
/* ---- TQ2_0: qs[64] | d, element 128n + 32j + l = ((qs[32n + l] >> 2j) & 3) - 1 ------------- */
static ALWAYS_INLINE __m512i cnt2(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)a)), _mm256_set1_epi16((short)b), 1);
}

ROW_KERNEL(bp_avx512_vec_tq2_0, BP_BLOCK_BYTES_TQ2_0, BP_BLOCK_ELEMS_TQ2_0, 8, {
    __m512i w[4];
    for (int k = 0; k < 4; k++)
        w[k] = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(load32(b + 32 * (k / 2))),
                                                  cnt2(4 * (k % 2), 4 * (k % 2) + 2)),
                                _mm512_set1_epi8(3));
    const float d = f16(b + 64);
    _Pragma("GCC unroll 8") for (int jj = 0; jj < NJ; jj++) {
        const bp_q8x256 *x = XQ(jj, i);
        __m512i s = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) s = _mm512_dpbusd_epi32(s, w[k], _mm512_loadu_si512((const void *)(x->q + 64 * k)));
        /* stored 0..2 for -1..1: minus the activation sum */
        s = _mm512_sub_epi32(s, zext(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1))));
        acc[jj] = _mm512_fmadd_ps(_mm512_set1_ps(d * x->d), _mm512_cvtepi32_ps(s), acc[jj]);
    }
})

/* ---- TQ1_0: base-3 trits (avx2/decode_grid_lowbit.c has the layout). Trit k of byte q is [3^k q mod 256
 * >= 86] + [... >= 171] (unsigned byte compares into masks); the byte multiples by 3 wrap by
 * themselves. Two 32-trit groups per zmm, whose elements are 64 consecutive activations:
 * (q, 3q) -> 0..63, (9q, 27q) -> 64..127, (81q, [q1, 3q1]) -> 128..191 and ([9q1, 27q1],
 * [81q1, qh tail]) -> 192..255, q the 32 bytes at 0, q1 the 16 at 32. Then vpdpbusd per input. */
static ALWAYS_INLINE __m256i times3(__m256i q) { return _mm256_add_epi8(_mm256_add_epi8(q, q), q); }
static ALWAYS_INLINE __m128i times3x(__m128i q) { return _mm_add_epi8(_mm_add_epi8(q, q), q); }
static ALWAYS_INLINE __m512i trits(__m512i q) {
    const __m512i one = _mm512_set1_epi8(1);
    const __m512i t = _mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(q, _mm512_set1_epi8((char)86)), one);
    return _mm512_mask_add_epi8(t, _mm512_cmpge_epu8_mask(q, _mm512_set1_epi8((char)171)), t, one);
}

ROW_KERNEL(bp_avx512_vec_tq1_0, BP_BLOCK_BYTES_TQ1_0, BP_BLOCK_ELEMS_TQ1_0, 8, {
    const __m256i q = load32(b), q3 = times3(q), q9 = times3(q3), q27 = times3(q9), q81 = times3(q27);
    const __m128i q1 = _mm_loadu_si128((const __m128i *)(b + 32));
    const __m256i v = _mm256_set_m128i(times3x(q1), q1), v9 = times3(times3(v));
    const __m128i q1_81 = times3x(_mm256_extracti128_si256(v9, 1));
    const __m128i h0 = _mm_set1_epi32((int)bp_load_u32(b + 48));
    const __m128i h1 = times3x(h0), h2 = times3x(h1), h3 = times3x(h2);
    const __m128i tail = _mm_blend_epi32(_mm_blend_epi32(h0, h1, 2), _mm_blend_epi32(h2, h3, 8), 12);
    const __m512i t[4] = {trits(pair(q, q3)), trits(pair(q9, q27)), trits(pair(q81, v)),
                          trits(pair(v9, _mm256_set_m128i(tail, q1_81)))};
    const float d = f16(b + 52);
    _Pragma("GCC unroll 8") for (int jj = 0; jj < NJ; jj++) {
        const bp_q8x256 *x = XQ(jj, i);
        /* stored 0, 1, 2 for -1, 0, 1: minus the activation sum */
        __m512i s = zext(_mm256_sub_epi32(_mm256_setzero_si256(),
                                          _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1))));
        for (int k = 0; k < 4; k++) s = _mm512_dpbusd_epi32(s, t[k], _mm512_loadu_si512((const void *)(x->q + 64 * k)));
        acc[jj] = _mm512_fmadd_ps(_mm512_set1_ps(d * x->d), _mm512_cvtepi32_ps(s), acc[jj]);
    }
})

/* ---- NVFP4: 36 bytes, four UE4M3 scales (one per 16) | qs[32]; sub-block s: element j < 8 is
 * the low nibble of qs[8s + j], j >= 8 the high one. The 64 weights unpack into one zmm in
 * element order; |value| from a table, the sign (nibble >= 8) moved onto the activations. ---- */
static float g_ue4m3_half[256];

static void init_ue4m3(void) {
    for (int v = 0; v < 256; v++) {
        const int ex = (v >> 3) & 15, man = v & 7;
        /* as the reference: 0x00 and 0x7F read 0, the top bit is ignored otherwise */
        float f = 0;
        if (v != 0 && v != 0x7f) f = ex == 0 ? (float)man / 512.0f : (1.0f + (float)man / 8.0f) * (float)(1 << ex) / 128.0f;
        g_ue4m3_half[v] = f * 0.5f;
    }
}

static const int8_t fp4_doubled_abs[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12};

ROW_KERNEL(bp_avx512_vec_nvfp4, BP_BLOCK_BYTES_NVFP4, BP_BLOCK_ELEMS_NVFP4, 8, {
    const __m256i q = load32(b + 4), m4 = _mm256_set1_epi8(15);
    const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    /* [sub 0 | sub 2] and [sub 1 | sub 3] per 128-bit lane, then lanes in order 0 1 2 3 */
    const __m512i n = _mm512_shuffle_i64x2(pair(_mm256_unpacklo_epi64(lo, hi), _mm256_unpackhi_epi64(lo, hi)),
                                           pair(_mm256_unpacklo_epi64(lo, hi), _mm256_unpackhi_epi64(lo, hi)),
                                           _MM_SHUFFLE(3, 1, 2, 0));
    const __m512i w = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)fp4_doubled_abs)), n);
    const __mmask64 neg = _mm512_cmpge_epu8_mask(n, _mm512_set1_epi8(8));
    const __m128 s4 = _mm_setr_ps(g_ue4m3_half[b[0]], g_ue4m3_half[b[1]], g_ue4m3_half[b[2]], g_ue4m3_half[b[3]]);
    const __m512 wsc = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                             _mm512_castps128_ps512(s4));
    _Pragma("GCC unroll 8") for (int jj = 0; jj < NJ; jj++) {
        const bp_q8x32 *x = (const bp_q8x32 *)(const void *)(xq + (size_t)jj * xs) + 2 * i;
        __m512i xv = pair(load32(x[0].q), load32(x[1].q));
        xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
        const __m512 p = _mm512_mul_ps(wsc, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xv)));
        const __m512 dx = _mm512_insertf32x8(_mm512_set1_ps(x[0].d), _mm256_set1_ps(x[1].d), 1);
        acc[jj] = _mm512_fmadd_ps(dx, p, acc[jj]);
    }
})

/* The lookup tables this file's kernels read, filled once (kernels.def BP_CPU_SETUP). */
void bp_avx512_grid_lowbit_setup(void) {
    init_iq1();
    init_ue4m3();
}

#endif
