/* AVX2 prefill: an int8 panel GEMM for every quantized kind (the AVX2 path's counterpart of
 * kern_avx512.c's VNNI GEMM, for Zen 3 and older Intel). Each panel of 16 weight rows x KC
 * columns is dequantized once with the kind's fast dequantizer and re-quantized to int8 per
 * block of QB columns (|w| <= 127); the inputs are quantized once per call to int8 per block of
 * QB. AVX2 has no unsigned-by-signed dot with 32-bit accumulation, so a product goes through
 * vpmaddubsw (unsigned x signed bytes, pairs summed to int16 with saturation): the weights' |w|
 * is the unsigned operand and the activation takes the weight's sign (vpsignb), so a pair is at
 * most 2 x 127 x 127 = 32258 and never saturates; vpmaddwd with ones widens to int32. That is
 * 32 multiply-adds for two multiplier-port ops, where the f32 FMA GEMM (kern_avx2.c) needs four,
 * which is what lets prefill pass the f32 GEMM's ceiling. Per block the int32 sums are scaled
 * by d_w * d_x into a float tile.
 * The second rounding of the weights costs ~1e-5 NMSE on top of the activations' own (the
 * tests hold it to tolerance.def's gemm QUANT bound); the float kinds keep the f32 GEMM. */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2_util.h"

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

/* x (T x cols) -> int8 T x cols, then T x (cols / QB) float scales. */
static void prep(const float *x, int64_t T, int64_t cols, void *buf) {
    const int qb = bp_cpu_q8_block(cols);
    int8_t *q = buf;
    float *d = (float *)(void *)(q + (size_t)(T * cols));
    for (int64_t t = 0; t < T; t++)
        for (int64_t b = 0; b < cols / qb; b++) {
            const float *xb = x + t * cols + b * qb;
            float id;
            d[t * (cols / qb) + b] = block_scale(xb, qb, &id);
            for (int i = 0; i < qb; i += 32) quant32(xb + i, id, q + t * cols + b * qb + i);
        }
}


/* Scratch (floats): rowbuf[NR * KC] | w (NR * KC bytes) | |w| (NR * KC bytes) | scales
 * [KC / 32 * NR]. w and |w| are k-major by 4: dword (k4, i) = row i's bytes 4 k4 .. 4 k4 + 3,
 * so one k4 step is two ymm (rows 0-7, 8-15) matching a broadcast dword of activations. */
typedef struct panel {
    float *rowbuf;
    int8_t *w, *aw;
    float *dw;
} panel;

static panel panel_of(float *scratch) {
    panel p;
    p.rowbuf = scratch;
    p.w = (int8_t *)(scratch + NR * KC);
    p.aw = p.w + NR * KC;
    p.dw = scratch + NR * KC + NR * KC / 2;
    return p;
}
_Static_assert(NR * KC + NR * KC / 2 + KC / 32 * NR <= BP_CPU_SCRATCH_FLOATS, "the int8 GEMM's panel fits the thread scratch");

/* 8 registers of 8 dwords (register i = row i) -> register k = dword k of every row. */
static ALWAYS_INLINE void transpose8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
        r[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
    }
}

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

static void gemm_q8(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    const panel pp = panel_of(job->scratch[ith]);
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    const int qb = bp_cpu_q8_block(cols);
    const int8_t *xq = job->xq;
    const float *xd = (const float *)(const void *)(xq + (size_t)(T * cols));
    const int64_t ldd = cols / qb;
    float tile[MR * NR] __attribute__((aligned(32)));
    for (int64_t c0 = 0; c0 < cols; c0 += KC) {
        const int64_t kc = cols - c0 < KC ? cols - c0 : KC;
        for (int64_t p = r0; p < r1; p += NR) {
            const int nr = r1 - p < NR ? (int)(r1 - p) : NR;
            pack(job, &pp, p, nr, c0, kc, qb);
            for (int64_t t0 = 0; t0 < T; t0 += MR) {
                const int mr = T - t0 < MR ? (int)(T - t0) : MR;
                float *y = job->y + t0 * rows + p;
                for (int i = 0; i < mr; i++)
                    for (int j = 0; j < NR; j++) tile[i * NR + j] = c0 == 0 || j >= nr ? 0.0f : y[i * rows + j];
                micro_any(mr, qb, &pp, xq + t0 * cols + c0, cols, xd + t0 * ldd + c0 / qb, ldd, (int)(kc / qb), tile);
                for (int i = 0; i < mr; i++) memcpy(y + i * rows, tile + i * NR, sizeof(float) * (size_t)nr);
            }
        }
    }
}

bool bp_cpu_avx2g8_init(bp_cpu_ops *ops) {
    ops->gemm_q8 = gemm_q8;
    ops->gemm_q8_prep = prep;
    ops->gemm_q8_bytes = bp_cpu_q8_prep_bytes;
    ops->gemm_q8_name = "panel GEMM (dequant, int8 requant, maddubs 4x16)";
    return true;
}

#else
bool bp_cpu_avx2g8_init(bp_cpu_ops *ops) {
    (void)ops;
    return false;
}
#endif
