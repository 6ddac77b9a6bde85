/* AVX2 prefill: an int8 panel GEMM for every quantized kind (the AVX2 path's counterpart of
 * avx512/gemm_int8.c's VNNI GEMM, for CPUs without AVX-512). Each panel of 16 weight rows x KC
 * columns is dequantized once with the kind's fast dequantizer and re-quantized to int8 per
 * block of QB columns (|w| <= 127); the inputs are quantized once per call to int8 per block of
 * QB. AVX2 has no unsigned-by-signed dot with 32-bit accumulation, so a product goes through
 * vpmaddubsw (unsigned x signed bytes, pairs summed to int16 with saturation): the weights' |w|
 * is the unsigned operand and the activation takes the weight's sign (vpsignb), so a pair is at
 * most 2 x 127 x 127 = 32258 and never saturates; vpmaddwd with ones widens to int32. That is
 * 32 multiply-adds for two multiplier-port ops, where the f32 FMA GEMM (avx2/float_kinds.c) needs four,
 * which is what lets prefill pass the f32 GEMM's ceiling. Per block the int32 sums are scaled
 * by d_w * d_x into a float tile.
 * The second rounding of the weights costs ~1e-5 NMSE on top of the activations' own (the
 * tests hold it to tolerance.def's gemm QUANT bound); the float kinds keep the f32 GEMM.
 * Kinds whose weights are small integers x a scale per 32 columns skip the round trip (direct
 * panels, below): their own integers are packed as they are, unsigned where the kind stores
 * them so (the offset x the input's quant sum added per 32 columns), which drops the sign op,
 * and small enough ones summed in int16 over 32 columns before widening. The 256-element kinds
 * with integer sub-block scales (per 16 or 32 columns) have their own panels in avx2/gemm_int8_scale16.c,
 * which widen their int16 sums by those scales. */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"
#include "cpu/avx2/int8_direct.h"

/* MR inputs x 16 rows: 2 MR int32 accumulators, the 4 weight registers of one k4 step (|w| and
 * w, rows 0-7 and 8-15), the ones, the broadcast activation and two temporaries in 16 ymm. */
enum { MR = 4, NR = BP_CPU_NR, KC = BP_CPU_KC };

/* amax / 127 of n floats (n a multiple of 32), and 127 / amax (0 for an all-zero block). */
static ALWAYS_INLINE float block_scale(const float *x, int n, float *id) {
    float amax = 0;
    for (int i = 0; i < n; i += 32) {
        float m = amax32(x + i);
        amax = m > amax ? m : amax;
    }
    *id = amax > 0 ? 127.0f / amax : 0.0f;
    return amax / 127.0f;
}

/* x (T x cols) -> int8 T x cols, then T x (cols / QB) float scales, then per input and 32
 * columns d x the sum of the quants (the direct panels' offset term), then per input and 16
 * columns the int16 sum of the quants (<= 16 x 127; the per-16 panels' offsets, avx2/gemm_int8_scale16.c). */
size_t bp_avx2_gemm_q8_bytes(int64_t T, int64_t cols) {
    return bp_cpu_q8_prep_bytes(T, cols) + sizeof(float) * (size_t)(T * (cols / 32)) + sizeof(int16_t) * (size_t)(T * (cols / 16));
}

void bp_avx2_gemm_q8_prep(const float *x, int64_t T, int64_t cols, void *buf) {
    const int qb = bp_cpu_q8_block(cols);
    int8_t *q = buf;
    float *d = (float *)(void *)(q + (size_t)(T * cols));
    float *xs = d + T * (cols / qb);
    int16_t *xs16 = (int16_t *)(void *)(xs + T * (cols / 32));
    for (int64_t t = 0; t < T; t++) {
        for (int64_t b = 0; b < cols / qb; b++) {
            const float *xb = x + t * cols + b * qb;
            float id;
            const float db = block_scale(xb, qb, &id);
            d[t * (cols / qb) + b] = db;
            for (int i = 0; i < qb; i += 32)
                xs[t * (cols / 32) + (b * qb + i) / 32] = db * (float)quant32(xb + i, id, q + t * cols + b * qb + i);
        }
        /* vpsadbw of q ^ 0x80 (q + 128 as unsigned) against zero: sums of 8, each 8 x 128 high */
        for (int64_t i = 0; i < cols; i += 32) {
            const __m256i v = _mm256_xor_si256(load32(q + t * cols + i), _mm256_set1_epi8((char)0x80));
            const __m256i s8 = _mm256_sad_epu8(v, _mm256_setzero_si256());
            const __m256i s16 = _mm256_add_epi64(s8, _mm256_srli_si256(s8, 8));
            xs16[t * (cols / 16) + i / 16] = (int16_t)(_mm256_extract_epi16(s16, 0) - 2048);
            xs16[t * (cols / 16) + i / 16 + 1] = (int16_t)(_mm256_extract_epi16(s16, 8) - 2048);
        }
    }
}

/* Scratch (floats): rowbuf[NR * KC] | w (NR * KC bytes) | |w| (NR * KC bytes) | scales
 * [KC / 32 * NR] | offsets [KC / 32 * NR] (direct panels of offset kinds). w and |w| are
 * k-major by 4: dword (k4, i) = row i's bytes 4 k4 .. 4 k4 + 3, so one k4 step is two ymm (rows
 * 0-7, 8-15) matching a broadcast dword of activations. Direct panels decode into rowbuf (the
 * rows' int8 q, then a record of 16 floats per row: its scales and offsets). */
typedef struct panel {
    float *rowbuf;
    int8_t *w, *aw;
    float *dw, *ow;
} panel;

static panel panel_of(float *scratch) {
    panel p;
    p.rowbuf = scratch;
    p.w = (int8_t *)(scratch + NR * KC);
    p.aw = p.w + NR * KC;
    p.dw = scratch + NR * KC + NR * KC / 2;
    p.ow = p.dw + KC / 32 * NR;
    return p;
}
_Static_assert(NR * KC + NR * KC / 2 + 2 * (KC / 32) * NR <= BP_CPU_SCRATCH_FLOATS, "the int8 GEMM's panel fits the thread scratch");
_Static_assert(NR * KC / 4 + 16 * NR <= NR * KC, "a direct panel's rows and records fit rowbuf");

/* Rows [p, p + nr) x columns [c0, c0 + kc) -> w, |w| and the block scales (rows past nr: 0).
 * Eight rows' 32 quants at a time are transposed in registers into the k4-major layout. */
static void pack(const bp_cpu_job *job, const panel *pp, int64_t p, int nr, int64_t c0, int64_t kc, int qb) {
    const int64_t be = job->kt->info.block_elems, bb = job->kt->info.block_bytes;
    for (int i = 0; i < nr; i++)
        job->dequant(job->w + (size_t)(p + i) * job->row_bytes + (size_t)(c0 / be * bb), pp->rowbuf + i * KC, kc / be);
    const int nb = (int)(kc / qb);
    for (int b = 0; b < nb; b++) {
        float id[NR];
        for (int i = 0; i < NR; i++) {
            id[i] = 0;
            pp->dw[b * NR + i] = i < nr ? block_scale(pp->rowbuf + i * KC + b * qb, qb, &id[i]) : 0.0f;
        }
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < qb; k += 32) {
                __m256i r[8];
                for (int i = 0; i < 8; i++)
                    r[i] = 8 * h + i < nr ? quant32v(pp->rowbuf + (8 * h + i) * KC + b * qb + k, id[8 * h + i])
                                          : _mm256_setzero_si256();
                transpose8(r);
                const size_t off = (size_t)(b * qb + k) / 4 * NR * 4 + 32 * h; /* dword (k4, 8h) */
                for (int j = 0; j < 8; j++) {
                    _mm256_store_si256((__m256i *)(void *)(pp->w + off + 64 * j), r[j]);
                    _mm256_store_si256((__m256i *)(void *)(pp->aw + off + 64 * j), _mm256_abs_epi8(r[j]));
                }
            }
    }
}

/* tile[M x 16] += sum over nblk blocks of d_w d_x (int8 w . int8 x). */
static ALWAYS_INLINE void micro(const int M, const int QB, const panel *pp, const int8_t *xq, int64_t ldx,
                                const float *xd, int64_t ldd, int nblk, float *tile) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int b = 0; b < nblk; b++) {
        __m256i acc[MR][2];
#pragma GCC unroll 8
        for (int i = 0; i < M; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
        const int8_t *wb = pp->w + (size_t)b * QB * NR, *ab = pp->aw + (size_t)b * QB * NR;
        const int8_t *xb = xq + b * QB;
#pragma GCC unroll 2
        for (int k4 = 0; k4 < QB / 4; k4++) {
            const __m256i a0 = load32(ab + 64 * k4), a1 = load32(ab + 64 * k4 + 32);
            const __m256i w0 = load32(wb + 64 * k4), w1 = load32(wb + 64 * k4 + 32);
#pragma GCC unroll 8
            for (int i = 0; i < M; i++) {
                int32_t xv;
                memcpy(&xv, xb + i * ldx + 4 * k4, 4);
                const __m256i x4 = _mm256_set1_epi32(xv);
                acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(x4, w0)), ones));
                acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(x4, w1)), ones));
            }
        }
        const __m256 d0 = _mm256_loadu_ps(pp->dw + b * NR), d1 = _mm256_loadu_ps(pp->dw + b * NR + 8);
#pragma GCC unroll 8
        for (int i = 0; i < M; i++) {
            const __m256 s = _mm256_set1_ps(xd[i * ldd + b]);
            float *ti = tile + i * NR;
            _mm256_storeu_ps(ti, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][0]), _mm256_mul_ps(d0, s), _mm256_loadu_ps(ti)));
            _mm256_storeu_ps(ti + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][1]), _mm256_mul_ps(d1, s), _mm256_loadu_ps(ti + 8)));
        }
    }
}

#define MICRO_CASES(QB)                                                      \
    switch (mr) {                                                            \
    case 4: micro(4, QB, pp, xq, ldx, xd, ldd, nblk, tile); break;           \
    case 3: micro(3, QB, pp, xq, ldx, xd, ldd, nblk, tile); break;           \
    case 2: micro(2, QB, pp, xq, ldx, xd, ldd, nblk, tile); break;           \
    default: micro(1, QB, pp, xq, ldx, xd, ldd, nblk, tile); break;          \
    }

static void micro_any(int mr, int qb, const panel *pp, const int8_t *xq, int64_t ldx, const float *xd, int64_t ldd,
                      int nblk, float *tile) {
    if (qb == 64) {
        MICRO_CASES(64)
    } else {
        MICRO_CASES(32)
    }
}

/* ---- Direct panels: the kind's own integers, no f32 round trip ------------------------------
 * The decoders (avx2/int8_direct.h, shared with avx512/gemm_int8.c's VNNI GEMM, and the unsigned forms
 * below) write a row's q as int8 with a scale s (and offset o) per 32 columns; the pack only
 * transposes. Two kinds of panel:
 *   unsigned (w = s q + o, q >= 0: Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q2_0 TQ2_0 TQ1_0): q is
 *     vpmaddubsw's unsigned operand as it is, no vpsignb; o x (the input's d x its 32 quants'
 *     sum) is added per 32 columns;
 *   signed (Q8_0 IQ4_NL IQ4_XS): the sign trick of the requantized panels (up to a batch for
 *     some: d8_of).
 * Where 8 k4 steps' pairs cannot overflow int16 (|q| <= 15: 8 x 2 x 15 x 127 = 30480), they are
 * summed in int16 over the 32 columns and widened once (vpmaddwd) instead of per step. The
 * weights are not rounded a second time, so the results are closer to the reference. */

/* Q4_0 / Q5_0 / Q2_0 / TQ2_0 as unsigned q and an offset (the VNNI GEMM stores the first three
 * signed, no offset): w = d q - 8 d, d q - 16 d, d q - d, d q - d (exact in float: d is an f16
 * and q small). */
static void d8u_q4_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q4_0, q += 32) {
        s[i] = f16(b);
        s[8 + i] = -8.0f * s[i];
        st32(q, nib32(b + 2));
    }
}
static void d8u_q5_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q5_0, q += 32) {
        s[i] = f16(b);
        s[8 + i] = -16.0f * s[i];
        st32(q, add_bit5(nib32(b + 6), b + 2));
    }
}
/* Q2_0, 64 weights: element j is bits 2 (j % 4) of qs[j / 4] (0..3 for -1..2); each byte widened
 * to a dword and OR-ed with itself shifted by 6, 12, 18 puts its four fields in element order. */
static void d8u_q2_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_Q2_0) {
        const float d = f16(b);
        for (int h = 0; h < 2; h++, q += 32) {
            s[2 * i + h] = d;
            s[8 + 2 * i + h] = -d;
            __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + 8 * h)));
            v = _mm256_or_si256(_mm256_or_si256(v, _mm256_slli_epi32(v, 6)), _mm256_or_si256(_mm256_slli_epi32(v, 12), _mm256_slli_epi32(v, 18)));
            st32(q, _mm256_and_si256(v, _mm256_set1_epi8(3)));
        }
    }
}
/* TQ2_0, 66 bytes: qs[64] | d; element 128 j + 32 l + m is bits 2 l of qs[32 j + m], 0..2. */
static void d8u_tq2_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_TQ2_0, s += 8) {
        const float d = f16(b + 64);
        for (int g = 0; g < 8; g++, q += 32) {
            s[g] = d;
            s[8 + g] = -d;
            st32(q, _mm256_and_si256(_mm256_srli_epi16(load32(b + 32 * (g / 4)), 2 * (g % 4)), _mm256_set1_epi8(3)));
        }
    }
}

/* TQ1_0, 54 bytes: qs[48] | qh[4] | d; the trits as digits 0..2 (offset -d per 32 columns).
 * A byte holds ceil(v 256 / 243) of a 5-trit number v: times 3^k (mod 256: two byte adds per
 * step) brings trit k to the top, and (byte x 3) >> 8 reads it, i.e. (byte >= 86) + (byte >=
 * 171). Elements 0-159: trit e / 32 of qs[e % 32]; 160-239: trit (e - 160) / 16 of qs[32 + e %
 * 16]; 240-255: trit (e - 240) / 4 of qh[e % 4]. */
static ALWAYS_INLINE __m256i tq1_digit(__m256i v) {
    const __m256i ge86 = _mm256_cmpeq_epi8(_mm256_max_epu8(v, _mm256_set1_epi8(86)), v);
    const __m256i ge171 = _mm256_cmpeq_epi8(_mm256_max_epu8(v, _mm256_set1_epi8((char)171)), v);
    return _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_add_epi8(ge86, ge171));
}
static void d8u_tq1_0(const uint8_t *b, int64_t n, int8_t *q, float *s) {
    for (int64_t i = 0; i < n; i++, b += BP_BLOCK_BYTES_TQ1_0, q += 256, s += 8) {
        const float d = f16(b + 52);
        for (int g = 0; g < 8; g++) {
            s[g] = d;
            s[8 + g] = -d;
        }
        __m256i v = load32(b);
        for (int k = 0; k < 5; k++, v = _mm256_add_epi8(_mm256_add_epi8(v, v), v)) st32(q + 32 * k, tq1_digit(v));
        /* qs[32..47] (in both lanes; the low one is stored): trit k is elements 160 + 16 k .. */
        __m256i u = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(b + 32)));
        uint8_t tail[32];
        for (int k = 0; k < 5; k++, u = _mm256_add_epi8(_mm256_add_epi8(u, u), u)) {
            _mm256_storeu_si256((__m256i *)(void *)tail, tq1_digit(u));
            memcpy(q + 160 + 16 * k, tail, 16);
        }
        static const uint8_t pow3[4] = {1, 3, 9, 27};
        for (int k = 0; k < 4; k++)
            for (int m = 0; m < 4; m++) q[240 + 4 * k + m] = (int8_t)(((uint8_t)(b[48 + m] * pow3[k]) * 3) >> 8);
    }
}

/* The direct decoder of kind k up to batch *max_t (NULL: requantized panels), whether its q are
 * signed (sign trick, no offset) or unsigned (with offset), and the columns a block of the
 * micro-kernel sums in int16 before widening (*blk: 64 for Q2_0, TQ2_0 and TQ1_0, whose weight
 * scale holds for 64 columns; 32 where |q| <= 15, 8 x 2 x 15 x 127 = 30480; 0: widen every k4
 * step). The 256-element kinds whose panels sum in int16 per 16 columns and widen by their
 * integer scales (Q2_K Q3_K Q5_K Q6_K, the IQ2 / IQ3 / IQ1 kinds) never get here: avx2/gemm_int8_scale16.c.
 * Direct panels win for the unsigned kinds at every batch. Signed Q8_0 / IQ4_NL widen every step
 * and scale per 32 columns where the requantized panels scale per 64, so they win only while the
 * pack's round trip weighs most: max_t 160 for Q8_0 and IQ4_NL.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/gemm_int8.c. */
static dq8_fn d8_of(bp_kind k, bool *sg, int *blk, int64_t *max_t) {
    *sg = false;
    *blk = 32;
    *max_t = INT64_MAX;
    switch (k) {
    case BP_KIND_Q4_0: return d8u_q4_0;
    case BP_KIND_Q4_1: return d8_q4_1;
    case BP_KIND_Q4_K: return d8_q4_k;
    case BP_KIND_Q2_0: *blk = 64; return d8u_q2_0;
    case BP_KIND_TQ2_0: *blk = 64; return d8u_tq2_0;
    case BP_KIND_TQ1_0: *blk = 64; return d8u_tq1_0;
    default: break;
    }
    *blk = 0; /* widen every step */
    switch (k) {
    case BP_KIND_Q5_0: return d8u_q5_0;
    case BP_KIND_Q5_1: return d8_q5_1;
    default: break;
    }
    *sg = true;
    switch (k) {
    case BP_KIND_IQ4_XS: return d8_iq4_xs;
    default: break;
    }
    *max_t = 160;
    switch (k) {
    case BP_KIND_Q8_0: return d8_q8_0;
    case BP_KIND_IQ4_NL: return d8_iq4_nl;
    default: return NULL;
    }
}

/* Rows [p, p + nr) x columns [c0, c0 + kc) decoded (rows past nr zero) and transposed into the
 * k4-major w (and |w| for signed panels), with the scales and offsets per 32 columns. */
static void pack_direct(const bp_cpu_job *job, dq8_fn fn, bool sg, const panel *pp, int64_t p, int nr, int64_t c0, int64_t kc) {
    const int64_t be = job->kt->info.block_elems, bb = job->kt->info.block_bytes;
    int8_t *qrow = (int8_t *)(void *)pp->rowbuf;
    float *rec = pp->rowbuf + NR * KC / 4;
    _Static_assert(KC / 32 <= 8, "a row's scales and offsets fit a 16-float record");
    for (int i = 0; i < nr; i++)
        fn(job->w + (size_t)(p + i) * job->row_bytes + (size_t)(c0 / be * bb), kc / be, qrow + i * KC, rec + 16 * i);
    for (int i = nr; i < NR; i++) memset(qrow + i * KC, 0, (size_t)kc);
    for (int64_t g = 0; g < kc / 32; g++)
        for (int i = 0; i < NR; i++) {
            pp->dw[g * NR + i] = i < nr ? rec[16 * i + g] : 0.0f;
            pp->ow[g * NR + i] = i < nr && !sg ? rec[16 * i + 8 + g] : 0.0f;
        }
    for (int64_t g = 0; g < kc / 32; g++)
        for (int h = 0; h < 2; h++) {
            __m256i r[8];
            for (int i = 0; i < 8; i++) r[i] = load32(qrow + (8 * h + i) * KC + 32 * g);
            transpose8(r);
            const size_t off = (size_t)g * 8 * NR * 4 + 32 * h; /* dword (k4 = 8 g, 8 h) */
            for (int j = 0; j < 8; j++) {
                _mm256_store_si256((__m256i *)(void *)(pp->w + off + 64 * j), r[j]);
                if (sg) _mm256_store_si256((__m256i *)(void *)(pp->aw + off + 64 * j), _mm256_abs_epi8(r[j]));
            }
        }
}

/* tile[M x 16] += sum over nblk blocks of BLK (32 or 64) columns of d_w d_x (q . x) (+ o_w d_x
 * sum x): SG signed panels (sign trick), else unsigned with offsets. The pairs of all of a
 * block's k4 steps are summed in int16 and widened once. The weight scale and offset are those
 * of the block's first 32 columns (the same for both halves of a 64-column block), the input's
 * d that of the activation block holding the columns (xd[(b * BLK / 32) >> qsh]). */
static ALWAYS_INLINE void micro_direct(const int M, const bool SG, const int BLK, const panel *pp, const int8_t *xq, int64_t ldx,
                                       const float *xd, int64_t ldd, int qsh, const float *xs, int64_t lds, int nblk, float *tile) {
    const __m256i ones = _mm256_set1_epi16(1);
    const bool WIDE = BLK == 0; /* widen every k4 step (pairs too large to sum in int16) */
    const int G = WIDE ? 1 : BLK / 32; /* 32-column groups a block */
    for (int b = 0; b < nblk; b++) {
        __m256i acc[MR][2];
#pragma GCC unroll 8
        for (int i = 0; i < M; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
        const int8_t *wb = pp->w + (size_t)b * G * 32 * NR, *ab = pp->aw + (size_t)b * G * 32 * NR;
        const int8_t *xb = xq + b * G * 32;
        /* not unrolled further: fully unrolled, gcc computed every product first and spilled
         * them (perf: vpaddw from the stack) */
#pragma GCC unroll 2
        for (int k4 = 0; k4 < G * 8; k4++) {
            const __m256i w0 = load32(wb + 64 * k4), w1 = load32(wb + 64 * k4 + 32);
            __m256i a0 = w0, a1 = w1;
            if (SG) a0 = load32(ab + 64 * k4), a1 = load32(ab + 64 * k4 + 32);
#pragma GCC unroll 8
            for (int i = 0; i < M; i++) {
                int32_t xv;
                memcpy(&xv, xb + i * ldx + 4 * k4, 4);
                const __m256i x4 = _mm256_set1_epi32(xv);
                const __m256i p0 = _mm256_maddubs_epi16(a0, SG ? _mm256_sign_epi8(x4, w0) : x4);
                const __m256i p1 = _mm256_maddubs_epi16(a1, SG ? _mm256_sign_epi8(x4, w1) : x4);
                if (WIDE) {
                    acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(p0, ones));
                    acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(p1, ones));
                } else {
                    acc[i][0] = _mm256_add_epi16(acc[i][0], p0);
                    acc[i][1] = _mm256_add_epi16(acc[i][1], p1);
                }
            }
        }
        const float *dg = pp->dw + b * G * NR, *og = pp->ow + b * G * NR;
        const __m256 d0 = _mm256_loadu_ps(dg), d1 = _mm256_loadu_ps(dg + 8);
        const __m256 o0 = _mm256_loadu_ps(og), o1 = _mm256_loadu_ps(og + 8);
#pragma GCC unroll 8
        for (int i = 0; i < M; i++) {
            const __m256 s = _mm256_set1_ps(xd[i * ldd + ((b * G) >> qsh)]);
            float *ti = tile + i * NR;
            const __m256i i0 = WIDE ? acc[i][0] : _mm256_madd_epi16(acc[i][0], ones);
            const __m256i i1 = WIDE ? acc[i][1] : _mm256_madd_epi16(acc[i][1], ones);
            __m256 t0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(d0, s), _mm256_loadu_ps(ti));
            __m256 t1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(d1, s), _mm256_loadu_ps(ti + 8));
            if (!SG) {
                const __m256 xsv = _mm256_set1_ps(G == 2 ? xs[i * lds + 2 * b] + xs[i * lds + 2 * b + 1] : xs[i * lds + b]);
                t0 = _mm256_fmadd_ps(o0, xsv, t0);
                t1 = _mm256_fmadd_ps(o1, xsv, t1);
            }
            _mm256_storeu_ps(ti, t0);
            _mm256_storeu_ps(ti + 8, t1);
        }
    }
}

#define MICRO_DIRECT_CASES(SG, BLK)                                                          \
    switch (mr) {                                                                            \
    case 4: micro_direct(4, SG, BLK, pp, xq, ldx, xd, ldd, qsh, xs, lds, nblk, tile); break;  \
    case 3: micro_direct(3, SG, BLK, pp, xq, ldx, xd, ldd, qsh, xs, lds, nblk, tile); break;  \
    case 2: micro_direct(2, SG, BLK, pp, xq, ldx, xd, ldd, qsh, xs, lds, nblk, tile); break;  \
    default: micro_direct(1, SG, BLK, pp, xq, ldx, xd, ldd, qsh, xs, lds, nblk, tile); break; \
    }

/* nblk: blocks of blk columns (a 64-column block's activation scale is one: blk 64 only where
 * the activation blocks are 64 wide, qsh = 1). */
static void micro_direct_any(int mr, bool sg, int blk, const panel *pp, const int8_t *xq, int64_t ldx, const float *xd,
                             int64_t ldd, int qsh, const float *xs, int64_t lds, int nblk, float *tile) {
    if (sg) { /* |q| up to 127: widen every step */
        MICRO_DIRECT_CASES(true, 0)
    } else if (blk == 0) {
        MICRO_DIRECT_CASES(false, 0)
    } else if (blk == 64) {
        MICRO_DIRECT_CASES(false, 64)
    } else {
        MICRO_DIRECT_CASES(false, 32)
    }
}

bool bp_cpu_avx2g8_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out) {
    bool sg;
    int blk;
    int64_t max_t;
    if (bp_cpu_avx2g16_direct_dequant(k, blocks, nblocks, out)) return true;
    const dq8_fn fn = d8_of(k, &sg, &blk, &max_t);
    return dq8_to_float(fn, !sg, k, blocks, nblocks, out);
}

/* The direct panels' loop (bp_avx2_gemm_q8's, with the direct pack and micro-kernel); kept apart so the
 * requantized loop compiles as it did (one loop serving both ran the requantized kinds ~5%
 * slower): noinline, since GCC inlines a static function called once into an exported caller. */
static __attribute__((noinline)) void gemm_direct(const bp_cpu_job *job, dq8_fn d8, bool sg, int blk, int ith, int64_t r0, int64_t r1) {
    const panel pp = panel_of(job->scratch[ith]);
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    const int qb = bp_cpu_q8_block(cols);
    const int8_t *xq = job->xq;
    const float *xd = (const float *)(const void *)(xq + (size_t)(T * cols));
    const int64_t ldd = cols / qb, lds = cols / 32;
    const float *xs = xd + T * ldd;
    if (qb != 64 && blk == 64) blk = 32; /* 32-column activation blocks: a scale step each */
    float tile[MR * NR] __attribute__((aligned(32)));
    const int64_t tb_ = bp_batch_block(T, 512, MR); /* past 512 inputs (bp_batch_block) */
    for (int64_t b0 = 0; b0 < T; b0 += tb_) {
    const int64_t b1 = T - b0 < tb_ ? T : b0 + tb_;
    for (int64_t c0 = 0; c0 < cols; c0 += KC) {
        const int64_t kc = cols - c0 < KC ? cols - c0 : KC;
        for (int64_t p = r0; p < r1; p += NR) {
            const int nr = r1 - p < NR ? (int)(r1 - p) : NR;
            pack_direct(job, d8, sg, &pp, p, nr, c0, kc);
            for (int64_t t0 = b0; t0 < b1; t0 += MR) {
                const int mr = b1 - t0 < MR ? (int)(b1 - t0) : MR;
                float *y = job->y + t0 * rows + p;
                for (int i = 0; i < mr; i++)
                    for (int j = 0; j < NR; j++) tile[i * NR + j] = c0 == 0 || j >= nr ? 0.0f : y[i * rows + j];
                micro_direct_any(mr, sg, blk, &pp, xq + t0 * cols + c0, cols, xd + t0 * ldd + c0 / qb, ldd, qb == 64,
                                 xs + t0 * lds + c0 / 32, lds, (int)(kc / (blk ? blk : 32)), tile);
                for (int i = 0; i < mr; i++) memcpy(y + i * rows, tile + i * NR, sizeof(float) * (size_t)nr);
            }
        }
    }
    }
}

static void gemm_requant(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);

void bp_avx2_gemm_q8(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    bool sg;
    int blk;
    int64_t max_t;
    if (bp_cpu_avx2g16_gemm(job, ith, r0, r1)) return; /* the per-16 kinds: avx2/gemm_int8_scale16.c */
    const dq8_fn d8 = d8_of(job->kt->info.kind, &sg, &blk, &max_t);
    if (d8 && job->batch <= max_t) gemm_direct(job, d8, sg, blk, ith, r0, r1);
    else gemm_requant(job, ith, r0, r1);
}

/* The requantized panels' loop, a function of its own as GCC had split it out of the dispatch
 * above while every kernel was static (compiled into the exported dispatcher it ran otherwise). */
static __attribute__((noinline)) void gemm_requant(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    const panel pp = panel_of(job->scratch[ith]);
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    const int qb = bp_cpu_q8_block(cols);
    const int8_t *xq = job->xq;
    const float *xd = (const float *)(const void *)(xq + (size_t)(T * cols));
    const int64_t ldd = cols / qb;
    float tile[MR * NR] __attribute__((aligned(32)));
    const int64_t tb_ = bp_batch_block(T, 512, MR); /* past 512 inputs (bp_batch_block) */
    for (int64_t b0 = 0; b0 < T; b0 += tb_) {
    const int64_t b1 = T - b0 < tb_ ? T : b0 + tb_;
    for (int64_t c0 = 0; c0 < cols; c0 += KC) {
        const int64_t kc = cols - c0 < KC ? cols - c0 : KC;
        for (int64_t p = r0; p < r1; p += NR) {
            const int nr = r1 - p < NR ? (int)(r1 - p) : NR;
            pack(job, &pp, p, nr, c0, kc, qb);
            for (int64_t t0 = b0; t0 < b1; t0 += MR) {
                const int mr = b1 - t0 < MR ? (int)(b1 - t0) : MR;
                float *y = job->y + t0 * rows + p;
                for (int i = 0; i < mr; i++)
                    for (int j = 0; j < NR; j++) tile[i * NR + j] = c0 == 0 || j >= nr ? 0.0f : y[i * rows + j];
                micro_any(mr, qb, &pp, xq + t0 * cols + c0, cols, xd + t0 * ldd + c0 / qb, ldd, (int)(kc / qb), tile);
                for (int i = 0; i < mr; i++) memcpy(y + i * rows, tile + i * NR, sizeof(float) * (size_t)nr);
            }
        }
    }
    }
}

#else
bool bp_cpu_avx2g8_direct_dequant(bp_kind k, const void *blocks, int64_t nblocks, float *out) {
    (void)k, (void)blocks, (void)nblocks, (void)out;
    return false;
}
#endif
