/* AVX2 integer-dot decode kernels for the low-bit kinds (Q1_0, Q2_0, NVFP4) and the
 * grid-coded IQ kinds, against activations quantized once per call. The grid kinds look up
 * 8 (or 4) unsigned magnitudes per index and move the weights' signs onto the activations
 * (x ^ m) - m, so one maddubs multiplies 32 weights. Layouts and byte offsets as in the
 * reference (src/kinds/ref_iquants.c, ref_lowbit.c), which these are tested against. */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"
#include "kinds/iq_tables.h"

/* Negate the bytes of x where mask is 0xff. */
static ALWAYS_INLINE __m256i negate_where(__m256i x, __m256i mask) {
    return _mm256_sub_epi8(_mm256_xor_si256(x, mask), mask);
}

/* Four sign bytes (one bit per weight, weight j of 8 at bit j) -> 32 byte masks. */
static ALWAYS_INLINE __m256i sign_masks(uint32_t s4) { return bits32(s4); }

/* The 128 sign patterns of the IQ2/IQ3 kinds as 8 byte masks each (0xff: negative), built
 * once: four table loads then give the masks of 32 weights, with no bit shuffling. */
static uint64_t g_signmask[128];

static void init_signmask(void) {
    for (int i = 0; i < 128; i++) {
        uint64_t m = 0;
        for (int j = 0; j < 8; j++)
            if ((bp_ksigns_iq2xs[i] >> j) & 1) m |= (uint64_t)0xff << (8 * j);
        g_signmask[i] = m;
    }
}

/* This and the IQ2_XXS / IQ2_XS grid lookups stay written out (grid4's insert form, by hand):
 * routing them through grid4 changes GCC's unrolling of IQ2_XXS's group loop (the tile decode
 * halves in size) and makes IQ2_XXS decode slower.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/decode_grid_lowbit.c. */
static ALWAYS_INLINE __m256i signmask4(unsigned a, unsigned b, unsigned c, unsigned d) {
    return _mm256_set_epi64x((long long)g_signmask[d], (long long)g_signmask[c], (long long)g_signmask[b],
                             (long long)g_signmask[a]);
}

static ALWAYS_INLINE __m256i ksigns_masks(uint32_t aux) {
    return signmask4(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
}

/* ---- Q1_0: 18 bytes, d | qs[16]; bit j of the 128 set: +d, clear: -d. Against q8x32: the dot is
 * 2 * (sum of x where the bit is set) - (sum of all x). */
void bp_avx2_vec_q1_0(const bp_cpu_job *job, int64_t r0, int64_t r1) {
    const bp_q8x32 *xq = job->xq;
    const int64_t nb = job->cols / 128;
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *b = job->w + (size_t)r * job->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        float offs = 0;
        for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q1_0) {
            BP_PREFETCH_BLOCK(b, BP_BLOCK_BYTES_Q1_0);
            const float d = f16(b);
            for (int s = 0; s < 4; s++) {
                const bp_q8x32 *x = &xq[4 * i + s];
                __m256i sel = _mm256_and_si256(bits32(bp_load_u32(b + 2 + 4 * s)), load32(x->q));
                __m256i p = dot_us(ones, sel);
                acc = _mm256_fmadd_ps(_mm256_set1_ps(2 * d * x->d), _mm256_cvtepi32_ps(p), acc);
                offs -= d * x->ds;
            }
        }
        job->y[r] = hsum8(acc) + offs;
    }
}

/* ---- Q2_0: 18 bytes, d | qs[16]; element j is bits 2*(j%4) of qs[j/4], 0..3 meaning -1..2.
 * 8 bytes shifted by 0, 2, 4, 6 in the four 64-bit quarters put element 4b+k at byte 8k+b; the
 * activations are permuted the same way in registers (within lanes, then across). */
void bp_avx2_vec_q2_0(const bp_cpu_job *job, int64_t r0, int64_t r1) {
    const bp_q8x32 *xq = job->xq;
    const int64_t nb = job->cols / 64;
    const __m256i m3 = _mm256_set1_epi8(3), sh = _mm256_setr_epi64x(0, 2, 4, 6);
    const __m256i in_lane = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5,
                                             9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i across = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *b = job->w + (size_t)r * job->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        float offs = 0;
        for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_Q2_0) {
            BP_PREFETCH_BLOCK(b, BP_BLOCK_BYTES_Q2_0);
            const float d = f16(b);
            for (int h = 0; h < 2; h++) {
                const bp_q8x32 *x = &xq[2 * i + h];
                uint64_t qv;
                memcpy(&qv, b + 2 + 8 * h, 8);
                __m256i q = _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x((long long)qv), sh), m3);
                __m256i xp = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(load32(x->q), in_lane), across);
                float dd = d * x->d;
                acc = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(dot_us(q, xp)), acc);
                offs -= d * x->ds;
            }
        }
        job->y[r] = hsum8(acc) + offs;
    }
}

/* ---- NVFP4: 36 bytes, d[4] (UE4M3 per 16) | qs[32]; in sub-block s, element j < 8 is the low
 * nibble of qs[8s + j], j >= 8 the high nibble of qs[8s + j - 8]. The kernel on the file's layout:
 * avx2/decode_repacked.inc's repacked one replaces it (its init keeps this one as vec_plain, for a
 * weight with no memory for the copy). */
static float g_ue4m3_half[256];

static void init_ue4m3(void) {
    for (int v = 0; v < 256; v++) {
        uint8_t x = (uint8_t)v;
        float f = 0;
        if (x != 0 && x != 0x7f) {
            int ex = (x >> 3) & 15, man = x & 7;
            f = ex == 0 ? (float)man / 512.0f : (1.0f + (float)man / 8.0f) * (float)(1 << ex) / 128.0f;
        }
        g_ue4m3_half[v] = f * 0.5f;
    }
}

void bp_avx2_vec_nvfp4(const bp_cpu_job *job, int64_t r0, int64_t r1) {
    const bp_q8x32 *xq = job->xq;
    const int64_t nb = job->cols / 64;
    const __m256i tbl = table16(bp_fp4_doubled_i8);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *b = job->w + (size_t)r * job->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++, b += BP_BLOCK_BYTES_NVFP4) {
            BP_PREFETCH_BLOCK(b, BP_BLOCK_BYTES_NVFP4);
            for (int h = 0; h < 2; h++) {
                const bp_q8x32 *x = &xq[2 * i + h];
                __m128i v = _mm_loadu_si128((const __m128i *)(b + 4 + 16 * h));
                __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
                __m256i idx = _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi));
                __m256i q = _mm256_shuffle_epi8(tbl, idx);
                __m256i p = dot_ss(q, load32(x->q));
                float s0 = g_ue4m3_half[b[2 * h]] * x->d, s1 = g_ue4m3_half[b[2 * h + 1]] * x->d;
                __m256 sc = _mm256_set_m128(_mm_set1_ps(s1), _mm_set1_ps(s0));
                acc = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(p), acc);
            }
        }
        job->y[r] = hsum8(acc);
    }
}

/* ---- grid kinds against bp_q8x256 ------------------------------------------------------- */

/* From GRID_TILE_MIN inputs on, a grid kind's weights are decoded once per block of KQ_RB rows
 * and 256 columns into a tile in L1 (signed bytes, |w| <= 62, their int16 multipliers) and
 * every input runs over it: an input's activations are biased to unsigned once per block
 * (x ^ 0x80 = x + 128) and kept in 8 registers across the rows, so 32 weights cost one maddubs
 * (tile operand from L1), one madd, one add; the bias's share, 128 * sum(w * sc), is formed at
 * decode (corr). Pairs stay in int16: 2 * 255 * 62 = 31620. Same integers and the same float
 * steps as the multi-input kernel (d * DS * x.d times each block's sum, added in block order,
 * one hsum at the end), so results are bit-identical to it and independent of the batch. */
/* GRID_TILE_MAXB: the most inputs the tile holds (acc: 256 KB of stack at 512; pool threads have
 * the default 8 MB). Each grid kind's AVX2 batch limit (kernels.def) is at most this. */
enum { GRID_TILE_MIN = 10, GRID_TILE_MAXB = 512 };
typedef struct {
    _Alignas(32) int8_t w[KQ_RB][8][32];
    _Alignas(32) int16_t sc[KQ_RB][8][16];
    _Alignas(32) int32_t corr[KQ_RB][8];
    float d[KQ_RB];
    _Alignas(32) float acc[GRID_TILE_MAXB][KQ_RB][8];
} grid_tile;

static ALWAYS_INLINE void grid_tile_inputs(const bp_cpu_job *job, grid_tile *t, int nr, int64_t i, bool first) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    for (int64_t j = 0; j < job->batch; j++) {
        const bp_q8x256 *x = (const bp_q8x256 *)(const void *)((const uint8_t *)job->xq + (size_t)j * job->xq_stride) + i;
        __m256i xb[8];
        for (int k = 0; k < 8; k++) xb[k] = _mm256_xor_si256(load32(x->q + 32 * k), bias);
        for (int rr = 0; rr < nr; rr++) {
            __m256i s = _mm256_load_si256((const __m256i *)t->corr[rr]);
            for (int k = 0; k < 8; k++)
                s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(xb[k], _mm256_load_si256((const __m256i *)t->w[rr][k])),
                                                          _mm256_load_si256((const __m256i *)t->sc[rr][k])));
            const __m256 a = first ? _mm256_setzero_ps() : _mm256_load_ps(t->acc[j][rr]);
            _mm256_store_ps(t->acc[j][rr], _mm256_fmadd_ps(_mm256_set1_ps(t->d[rr] * x->d), _mm256_cvtepi32_ps(s), a));
        }
    }
}

static void grid_tile_store(const bp_cpu_job *job, const grid_tile *t, int nr, int64_t rb) {
    for (int64_t j = 0; j < job->batch; j++)
        for (int rr = 0; rr < nr; rr++) job->y[j * job->rows + rb + rr] = hsum8(_mm256_load_ps(t->acc[j][rr]));
}

/* The grid kinds over NJ inputs at once (KQ_MULTI8, avx2/simd.h): per group of 32 weights DECODE
 * sets g (unsigned magnitudes), m (sign masks) and sc (int16 multipliers) once, and every
 * input's activations take the signs; the block's float scale is d * DS. 8 inputs a pass (4 were
 * slower). NAME##_tiled: the same DECODE into the tile (grid_tile), from GRID_TILE_MIN inputs.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/decode_grid_lowbit.c. */
#define GRID_DOTS                                                                                           \
    for (int jj = 0; jj < NJ; jj++)                                                                         \
        sumi[jj] = _mm256_add_epi32(sumi[jj], dot_us_scaled(g, negate_where(load32(XJ(jj)->q + 32 * ib), m), sc));
/* GRID_KERNEL2: up to FAST_NJ inputs a pass and in the tile, FDECODE after the block's PREP, its
 * 8 groups unrolled; more inputs a pass DECODE (see IQ2_S for why). */
#define GRID_KERNEL2(NAME, BB, DS, FAST_NJ, PREP, FDECODE, DECODE)                                          \
    static ALWAYS_INLINE void NAME##_row(const bp_cpu_job *job, int64_t r, const int NJ, int64_t j0) {     \
        KQ_ROW_BEGIN(BB)                                                                                    \
        if (NJ <= (FAST_NJ)) {                                                                              \
            PREP;                                                                                           \
            _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {                                        \
                __m256i g, m, sc;                                                                           \
                FDECODE;                                                                                    \
                GRID_DOTS                                                                                   \
            }                                                                                               \
        } else {                                                                                            \
            for (int ib = 0; ib < 8; ib++) {                                                                \
                __m256i g, m, sc;                                                                           \
                DECODE;                                                                                     \
                GRID_DOTS                                                                                   \
            }                                                                                               \
        }                                                                                                   \
        const float d = f16(b) * (DS);                                                                      \
        for (int jj = 0; jj < NJ; jj++)                                                                     \
            acc[jj] = _mm256_fmadd_ps(_mm256_set1_ps(d * XJ(jj)->d), _mm256_cvtepi32_ps(sumi[jj]), acc[jj]); \
        KQ_ROW_END                                                                                          \
    }                                                                                                       \
    KQ_MULTI8(NAME##_multi, NAME##_row)                                                                     \
    static void NAME##_tiled(const bp_cpu_job *job, int64_t r0, int64_t r1) {                               \
        grid_tile t;                                                                                        \
        for (int64_t rb = r0; rb < r1; rb += KQ_RB) {                                                       \
            const int nr = (int)(r1 - rb < KQ_RB ? r1 - rb : KQ_RB);                                        \
            for (int64_t i = 0; i < job->cols / 256; i++) {                                                 \
                for (int rr = 0; rr < nr; rr++) {                                                           \
                    const uint8_t *b = job->w + (size_t)(rb + rr) * job->row_bytes + (size_t)i * (BB);      \
                    __m256i corr = _mm256_setzero_si256();                                                  \
                    PREP;                                                                                   \
                    for (int ib = 0; ib < 8; ib++) {                                                        \
                        __m256i g, m, sc;                                                                   \
                        FDECODE;                                                                            \
                        const __m256i w = negate_where(g, m);                                               \
                        corr = _mm256_sub_epi32(corr, dot_us_scaled(_mm256_set1_epi8((char)0x80), w, sc));  \
                        _mm256_store_si256((__m256i *)t.w[rr][ib], w);                                      \
                        _mm256_store_si256((__m256i *)t.sc[rr][ib], sc);                                    \
                    }                                                                                       \
                    _mm256_store_si256((__m256i *)t.corr[rr], corr);                                        \
                    t.d[rr] = f16(b) * (DS);                                                                \
                }                                                                                           \
                grid_tile_inputs(job, &t, nr, i, i == 0);                                                   \
            }                                                                                               \
            grid_tile_store(job, &t, nr, rb);                                                               \
        }                                                                                                   \
    }                                                                                                       \
    void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                       \
        if (job->batch >= GRID_TILE_MIN && job->batch <= GRID_TILE_MAXB) NAME##_tiled(job, r0, r1);                                       \
        else NAME##_multi(job, r0, r1);                                                                     \
    }
#define GRID_KERNEL(NAME, BB, DS, DECODE) GRID_KERNEL2(NAME, BB, DS, 0, (void)0, DECODE, DECODE)

/* IQ2_XXS, 66 bytes: d; per 32 weights 8 bytes: 4 grid indices, u32 of four 7-bit sign
 * indices and a 4-bit scale s: w = d * (2s + 1) / 8 * grid * sign. */
GRID_KERNEL(bp_avx2_vec_iq2_xxs, BP_BLOCK_BYTES_IQ2_XXS, 0.125f, {
    const uint8_t *q = b + 2 + 8 * ib;
    const uint32_t aux = bp_load_u32(q + 4);
    g = _mm256_set_epi64x((long long)bp_iq2xxs_grid[q[3]], (long long)bp_iq2xxs_grid[q[2]],
                          (long long)bp_iq2xxs_grid[q[1]], (long long)bp_iq2xxs_grid[q[0]]);
    m = ksigns_masks(aux);
    sc = _mm256_set1_epi16((int16_t)(2 * (aux >> 28) + 1));
})

/* IQ2_XS, 74 bytes: d; 32 u16 at 2 (9-bit grid index, 7-bit sign index); 8 scale bytes at 66,
 * 4 bits per 16 weights: w = d * (2s + 1) / 8 * grid * sign. */
GRID_KERNEL(bp_avx2_vec_iq2_xs, BP_BLOCK_BYTES_IQ2_XS, 0.125f, {
    const uint8_t *q = b + 2 + 8 * ib;
    const uint16_t q0 = bp_load_u16(q);
    const uint16_t q1 = bp_load_u16(q + 2);
    const uint16_t q2 = bp_load_u16(q + 4);
    const uint16_t q3 = bp_load_u16(q + 6);
    g = _mm256_set_epi64x((long long)bp_iq2xs_grid[q3 & 511], (long long)bp_iq2xs_grid[q2 & 511],
                          (long long)bp_iq2xs_grid[q1 & 511], (long long)bp_iq2xs_grid[q0 & 511]);
    m = signmask4(q0 >> 9, q1 >> 9, q2 >> 9, q3 >> 9);
    const uint8_t s = b[66 + ib];
    sc = scales2(2 * (s & 15) + 1, 2 * (s >> 4) + 1);
})

/* IQ2_S, 82 bytes: d; 32 low index bytes at 2; 32 sign bytes at 34; 8 qh bytes at 66 (2 high
 * index bits per group of 8); 8 scale bytes at 74, 4 bits per 16 weights.
 * Once per block (iq2s_prep) the 32 10-bit grid indices are formed in two registers and stored,
 * and the 16 multipliers 2s + 1 put in one register (low lane: the first 16 weights' of each
 * group, high lane: the second 16's), so a group costs one index load, 4 grid loads (grid4), the
 * sign masks, one shuffle for its scales and the dot (scalar shifts per group took ~50
 * instructions per 32 weights). The block's bytes are prefetched ahead (KQ_ROW_BEGIN's
 * BP_PREFETCH_BLOCK): the hardware prefetcher alone leaves the kernel well under its hot speed cold.
 * With more than 2 inputs a pass the per-group scalar decode (second DECODE) stays: the prepped
 * one, unrolled, spills the inputs' sums.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/decode_grid_lowbit.c. */
typedef struct {
    _Alignas(32) uint16_t idx[32];
    __m256i sc16;
} iq2s_block;

static ALWAYS_INLINE void iq2s_prep(const uint8_t *b, iq2s_block *p) {
    /* qh byte of index e's group in the low byte of word e; times 2^(8 - 2 (e % 4)) puts the
     * index's two bits at 8-9. */
    const __m256i qh = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(b + 66)));
    const __m256i sh0 = _mm256_setr_epi8(0, -1, 0, -1, 0, -1, 0, -1, 1, -1, 1, -1, 1, -1, 1, -1,
                                         2, -1, 2, -1, 2, -1, 2, -1, 3, -1, 3, -1, 3, -1, 3, -1);
    const __m256i sh1 = _mm256_add_epi8(sh0, _mm256_set1_epi16(4));
    const __m256i mul = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
    const __m256i m300 = _mm256_set1_epi16(0x300);
    const __m256i q0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b + 2)));
    const __m256i q1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b + 18)));
    const __m256i h0 = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, sh0), mul), m300);
    const __m256i h1 = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, sh1), mul), m300);
    _mm256_store_si256((__m256i *)p->idx, _mm256_or_si256(q0, h0));
    _mm256_store_si256((__m256i *)(p->idx + 16), _mm256_or_si256(q1, h1));
    const __m128i s8 = _mm_loadl_epi64((const __m128i *)(b + 74)), m4 = _mm_set1_epi8(0x0f);
    __m128i s = _mm_unpacklo_epi64(_mm_and_si128(s8, m4), _mm_and_si128(_mm_srli_epi16(s8, 4), m4));
    s = _mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1));
    p->sc16 = _mm256_cvtepu8_epi16(s);
}

GRID_KERNEL2(bp_avx2_vec_iq2_s, BP_BLOCK_BYTES_IQ2_S, 0.125f, 2, iq2s_block pb; iq2s_prep(b, &pb), {
    uint64_t ix;
    memcpy(&ix, pb.idx + 4 * ib, 8);
    g = grid4(GRID4_BLEND, bp_iq2s_grid, ix & 0xffff, (ix >> 16) & 0xffff, (ix >> 32) & 0xffff, ix >> 48);
    m = sign_masks(bp_load_u32(b + 34 + 4 * ib));
    sc = _mm256_shuffle_epi8(pb.sc16, _mm256_set1_epi16((short)(0x0100 * (2 * ib + 1) + 2 * ib)));
}, {
    const uint8_t *qs = b + 2 + 4 * ib;
    const unsigned qh = b[66 + ib];
    g = grid4(GRID4_INSERT, bp_iq2s_grid, qs[0] | ((qh << 8) & 0x300), qs[1] | ((qh << 6) & 0x300),
              qs[2] | ((qh << 4) & 0x300), qs[3] | ((qh << 2) & 0x300));
    m = sign_masks(bp_load_u32(b + 34 + 4 * ib));
    const uint8_t s = b[74 + ib];
    sc = scales2(2 * (s & 15) + 1, 2 * (s >> 4) + 1);
})

/* IQ3_XXS, 98 bytes: d; 64 index bytes at 2 (grid of 4 weights); 8 u32 at 66: four 7-bit sign
 * indices and a 4-bit scale s: w = d * (2s + 1) / 4 * grid * sign. */
GRID_KERNEL(bp_avx2_vec_iq3_xxs, BP_BLOCK_BYTES_IQ3_XXS, 0.25f, {
    const uint8_t *q = b + 2 + 8 * ib;
    const uint32_t aux = bp_load_u32(b + 66 + 4 * ib);
    g = _mm256_set_epi32((int)bp_iq3xxs_grid[q[7]], (int)bp_iq3xxs_grid[q[6]], (int)bp_iq3xxs_grid[q[5]],
                         (int)bp_iq3xxs_grid[q[4]], (int)bp_iq3xxs_grid[q[3]], (int)bp_iq3xxs_grid[q[2]],
                         (int)bp_iq3xxs_grid[q[1]], (int)bp_iq3xxs_grid[q[0]]);
    m = ksigns_masks(aux);
    sc = _mm256_set1_epi16((int16_t)(2 * (aux >> 28) + 1));
})

/* IQ3_S, 110 bytes: d; 64 low index bytes at 2; 8 qh bytes at 66 (9th index bit); 32 sign bytes
 * at 74; 4 scale bytes at 106, 4 bits per 32 weights: w = d * (2s + 1) * grid * sign. */
GRID_KERNEL(bp_avx2_vec_iq3_s, BP_BLOCK_BYTES_IQ3_S, 1.0f, {
    const uint8_t *q = b + 2 + 8 * ib;
    const unsigned qh = b[66 + ib];
    int gi[8];
    for (int k = 0; k < 8; k++) gi[k] = (int)bp_iq3s_grid[q[k] | (((qh >> k) & 1u) << 8)];
    g = _mm256_loadu_si256((const __m256i *)gi);
    m = sign_masks(bp_load_u32(b + 74 + 4 * ib));
    sc = _mm256_set1_epi16((int16_t)(2 * ((b[106 + ib / 2] >> (4 * (ib % 2))) & 15) + 1));
})

/* The lookup tables this file's kernels read, filled once (kernels.def BP_CPU_SETUP). */
void bp_avx2_grid_lowbit_setup(void) {
    init_ue4m3();
    init_signmask();
}

#endif
