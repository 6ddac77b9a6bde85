/* AVX2 + FMA + F16C kernels that work for every kind: a chunked dequantize-then-FMA decode,
 * direct F32/F16/BF16 decode, and the panel GEMM for prefill. Built with -mavx2 -mfma -mf16c
 * (backend.cmake); only ever called after CPUID said the machine has them. */
#include "cpu/cpu_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "cpu/avx2/simd.h"

enum { CHUNK = 1024 };

static ALWAYS_INLINE float dot_f32(const float *a, const float *x, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(x + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(x + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(x + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(x + i), s0);
    float r = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) r += a[i] * x[i];
    return r;
}

void bp_avx2_vec_generic(const bp_cpu_job *job, int64_t r0, int64_t r1) {
    float buf[CHUNK] __attribute__((aligned(32)));
    const int64_t be = job->kt->info.block_elems, bb = job->kt->info.block_bytes;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = job->w + (size_t)r * job->row_bytes;
        float acc = 0;
        for (int64_t c = 0; c < job->cols; c += CHUNK) {
            int64_t n = job->cols - c < CHUNK ? job->cols - c : CHUNK;
            job->kt->dequant(row + (size_t)(c / be * bb), buf, n / be);
            acc += dot_f32(buf, job->x + c, n);
        }
        job->y[r] = acc;
    }
}

static ALWAYS_INLINE __m256 load_f16(const uint8_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static ALWAYS_INLINE __m256 load_bf16(const uint8_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* Float decode: one row at a time, 32 weights a step, each line requested BP_ROW_PF ahead into
 * L2 (avx2/simd.h): without a prefetch F16 and BF16 read cold under ggml's AVX2 build, 2-6 KB
 * ahead over it; into L2 rather than L1, as the AVX-512 twins (avx512/float_kinds.c). F32
 * converts nothing and has no tail conversion to do.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/float_kinds.c. */
static ALWAYS_INLINE __m256 load_f32(const uint8_t *p) { return _mm256_loadu_ps((const float *)(const void *)p); }
static ALWAYS_INLINE float conv_f32(const uint8_t *p) {
    float f;
    memcpy(&f, p, sizeof f);
    return f;
}
static ALWAYS_INLINE float conv_f16(const uint8_t *p) { return bp_f16_to_f32(bp_load_u16(p)); }
static ALWAYS_INLINE float conv_bf16(const uint8_t *p) { return bp_bf16_to_f32(bp_load_u16(p)); }
#define ROW_VEC(NAME, LOAD, CONV, ESZ)                                                          \
    static void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                            \
        const float *x = job->x;                                                                  \
        const int64_t n = job->cols;                                                              \
        for (int64_t r = r0; r < r1; r++) {                                                       \
            const uint8_t *w = job->w + (size_t)r * job->row_bytes;                              \
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                           \
            int64_t i = 0;                                                                        \
            for (; i + 32 <= n; i += 32) {                                                        \
                BP_PREFETCH_BLOCK(w + (ESZ) * i, 32 * (ESZ));                                      \
                s0 = _mm256_fmadd_ps(LOAD(w + (ESZ) * i), _mm256_loadu_ps(x + i), s0);            \
                s1 = _mm256_fmadd_ps(LOAD(w + (ESZ) * (i + 8)), _mm256_loadu_ps(x + i + 8), s1);  \
                s2 = _mm256_fmadd_ps(LOAD(w + (ESZ) * (i + 16)), _mm256_loadu_ps(x + i + 16), s2); \
                s3 = _mm256_fmadd_ps(LOAD(w + (ESZ) * (i + 24)), _mm256_loadu_ps(x + i + 24), s3); \
            }                                                                                     \
            for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(LOAD(w + (ESZ) * i), _mm256_loadu_ps(x + i), s0); \
            float acc = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));      \
            for (; i < n; i++) acc += CONV(w + (ESZ) * i) * x[i];                                  \
            job->y[r] = acc;                                                                      \
        }                                                                                         \
    }
ROW_VEC(vec_f32, load_f32, conv_f32, 4)
ROW_VEC(vec_f16, load_f16, conv_f16, 2)
ROW_VEC(vec_bf16, load_bf16, conv_bf16, 2)

/* ---- F32 / F16 / BF16 small batches -------------------------------------------------------
 * One pass over the weights for all inputs: a register tile of 2 rows x up to 4 inputs (8
 * accumulators: two FMAs a cycle at 4 cycles' latency), each weight vector loaded and converted
 * once for 4 inputs. Rows go in blocks of FRB, each block run for every group of 4 inputs (the
 * block comes from memory once, from L2 after that), and a block's columns in chunks of FCC, so
 * the chunk of 4 inputs (8 KB) and of the rows (16 KB of F32) stay in L1 across the block's rows.
 * The rows are prefetched 2 KB ahead (jumping between 8 rows' chunks defeats the hardware
 * prefetcher). A batch of up to 4 (one group of inputs) streams whole rows instead, each row
 * asking for a line once. A (row, input)'s 8 lanes carry over from chunk to chunk as a vector
 * (part) and are summed once at the end. A row's sum (lanes in column order, then the tail) does
 * not depend on which row it is paired with, so results do not depend on how rows are split over
 * threads. The batch limit (32, kernels.def) and the measurements: docs/cpu-kernels.md. */
enum { FR = 3, FRB = 12, FCC = 512 };

#define FLOAT_MULTI(NAME, ONE, LOAD, CONV, ESZ)                                                            \
    static ALWAYS_INLINE void NAME##_tile(const bp_cpu_job *job, int64_t r, const int R, const int NJ,    \
                                          int64_t j0, int64_t c0, int64_t c1, __m256 (*part)[4]) {        \
        const int64_t n = job->cols;                                                                      \
        const uint8_t *w[FR];                                                                             \
        _Pragma("GCC unroll 3") for (int rr = 0; rr < R; rr++) w[rr] = job->w + (size_t)(r + rr) * job->row_bytes; \
        const float *x = job->x + j0 * n;                                                                 \
        __m256 acc[FR][4];                                                                                \
        _Pragma("GCC unroll 3") for (int rr = 0; rr < R; rr++)                                            \
            _Pragma("GCC unroll 4") for (int jj = 0; jj < NJ; jj++) acc[rr][jj] = part[rr][jj];           \
        for (int64_t i = c0; i < c1; i += 8) {                                                            \
            __m256 wv[FR];                                                                                \
            _Pragma("GCC unroll 3") for (int rr = 0; rr < R; rr++) {                                      \
                if (((ESZ) * i) % 64 == 0) /* once a line: F16 / BF16 had asked 4 times, F32 twice */      \
                    _mm_prefetch((const char *)(w[rr] + (ESZ) * i + 2048), _MM_HINT_T0);                  \
                wv[rr] = LOAD(w[rr] + (ESZ) * i);                                                         \
            }                                                                                             \
            _Pragma("GCC unroll 4") for (int jj = 0; jj < NJ; jj++) {                                     \
                const __m256 xv = _mm256_loadu_ps(x + jj * n + i);                                        \
                _Pragma("GCC unroll 3") for (int rr = 0; rr < R; rr++)                                    \
                    acc[rr][jj] = _mm256_fmadd_ps(wv[rr], xv, acc[rr][jj]);                               \
            }                                                                                             \
        }                                                                                                 \
        _Pragma("GCC unroll 3") for (int rr = 0; rr < R; rr++)                                            \
            _Pragma("GCC unroll 4") for (int jj = 0; jj < NJ; jj++) part[rr][jj] = acc[rr][jj];           \
    }                                                                                                     \
    void NAME(const bp_cpu_job *job, int64_t r0, int64_t r1) {                                     \
        if (job->batch == 1) { /* decode: the one-row kernel with 4 accumulators */                       \
            ONE(job, r0, r1);                                                                             \
            return;                                                                                       \
        }                                                                                                 \
        const int64_t n = job->cols, n8 = n / 8 * 8;                                                      \
        for (int64_t rb = r0; rb < r1; rb += FRB) {                                                       \
            const int64_t re = r1 - rb < FRB ? r1 : rb + FRB;                                             \
            for (int64_t j0 = 0; j0 < job->batch; j0 += 4) {                                              \
                const int64_t nj = job->batch - j0 < 4 ? job->batch - j0 : 4;                             \
                __m256 part[FRB][4];                                                                      \
                for (int k = 0; k < FRB * 4; k++) part[k / 4][k % 4] = _mm256_setzero_ps();               \
                const int64_t cc = job->batch <= 4 ? n8 : FCC; /* one group: whole rows */                 \
                for (int64_t c0 = 0; c0 < n8; c0 += cc) {                                                 \
                    const int64_t c1 = n8 - c0 < cc ? n8 : c0 + cc;                                       \
                    for (int64_t r = rb; r < re;) {                                                       \
                        __m256(*p)[4] = part + (r - rb);                                                  \
                        const int R = re - r >= FR ? FR : (int)(re - r);                                  \
                        switch (nj * 4 + R) {                                                             \
                        case 19: NAME##_tile(job, r, 3, 4, j0, c0, c1, p); break;                         \
                        case 18: NAME##_tile(job, r, 2, 4, j0, c0, c1, p); break;                         \
                        case 17: NAME##_tile(job, r, 1, 4, j0, c0, c1, p); break;                         \
                        case 15: NAME##_tile(job, r, 3, 3, j0, c0, c1, p); break;                         \
                        case 14: NAME##_tile(job, r, 2, 3, j0, c0, c1, p); break;                         \
                        case 13: NAME##_tile(job, r, 1, 3, j0, c0, c1, p); break;                         \
                        case 11: NAME##_tile(job, r, 3, 2, j0, c0, c1, p); break;                         \
                        case 10: NAME##_tile(job, r, 2, 2, j0, c0, c1, p); break;                         \
                        case 9: NAME##_tile(job, r, 1, 2, j0, c0, c1, p); break;                          \
                        case 7: NAME##_tile(job, r, 3, 1, j0, c0, c1, p); break;                          \
                        case 6: NAME##_tile(job, r, 2, 1, j0, c0, c1, p); break;                          \
                        default: NAME##_tile(job, r, 1, 1, j0, c0, c1, p); break;                         \
                        }                                                                                 \
                        r += R;                                                                           \
                    }                                                                                     \
                }                                                                                         \
                for (int64_t r = rb; r < re; r++) {                                                       \
                    const uint8_t *w = job->w + (size_t)r * job->row_bytes;                               \
                    for (int64_t jj = 0; jj < nj; jj++) {                                                 \
                        float sum = hsum8(part[r - rb][jj]);                                              \
                        for (int64_t k = n8; k < n; k++) sum += CONV(w + (ESZ) * k) * job->x[(j0 + jj) * n + k]; \
                        job->y[(j0 + jj) * job->rows + r] = sum;                                          \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }

FLOAT_MULTI(bp_avx2_multi_f32, vec_f32, load_f32, conv_f32, 4)
FLOAT_MULTI(bp_avx2_multi_f16, vec_f16, load_f16, conv_f16, 2)
FLOAT_MULTI(bp_avx2_multi_bf16, vec_bf16, load_bf16, conv_bf16, 2)

/* ---- panel GEMM ---------------------------------------------------------------------------
 * C[MR x 16] (+)= X[MR x kc] * P[kc x 16], P packed k-major (16 floats per k). 12 of the 16
 * ymm registers hold C, which covers the FMA latency x throughput (4 x 2) with room to spare. */
static ALWAYS_INLINE void micro(const int MR, const float *pk, const float *x, int64_t ldx, int64_t kc,
                                float *c, int64_t ldc, int first) {
    __m256 acc[BP_CPU_MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        acc[i][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + i * ldc);
        acc[i][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + i * ldc + 8);
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(pk + k * 16), b1 = _mm256_load_ps(pk + k * 16 + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_broadcast_ss(x + i * ldx + k);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(c + i * ldc, acc[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
    }
}

static void micro_any(int mr, const float *pk, const float *x, int64_t ldx, int64_t kc, float *c,
                      int64_t ldc, int first) {
    switch (mr) {
    case 6: micro(6, pk, x, ldx, kc, c, ldc, first); break;
    case 5: micro(5, pk, x, ldx, kc, c, ldc, first); break;
    case 4: micro(4, pk, x, ldx, kc, c, ldc, first); break;
    case 3: micro(3, pk, x, ldx, kc, c, ldc, first); break;
    case 2: micro(2, pk, x, ldx, kc, c, ldc, first); break;
    default: micro(1, pk, x, ldx, kc, c, ldc, first); break;
    }
}

/* Dequantize rows [p, p+nr) x columns [c0, c0+kc) of the job's weight into rowbuf (BP_CPU_NR x
 * BP_CPU_KC) and pack them k-major into pk (16 floats per k); missing rows are 0. */
static void pack_panel_f32(const bp_cpu_job *job, int64_t p, int nr, int64_t c0, int64_t kc, float *rowbuf, float *pk) {
    const int64_t be = job->kt->info.block_elems, bb = job->kt->info.block_bytes;
    for (int i = 0; i < nr; i++)
        job->dequant(job->w + (size_t)(p + i) * job->row_bytes + (size_t)(c0 / be * bb),
                         rowbuf + i * BP_CPU_KC, kc / be);
    if (nr < BP_CPU_NR) memset(rowbuf + nr * BP_CPU_KC, 0, (size_t)(BP_CPU_NR - nr) * BP_CPU_KC * sizeof(float));
    /* 8x8 transposes would be faster, but this runs once per panel and batch: at t = 512 it
     * is under 1% of the FMAs. */
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < BP_CPU_NR; i++) pk[k * 16 + i] = rowbuf[i * BP_CPU_KC + k];
}

void bp_avx2_gemm_panels(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    float *rowbuf = job->scratch[ith];
    float *pk = rowbuf + BP_CPU_NR * BP_CPU_KC;
    float tile[BP_CPU_MR * 16];
    const int64_t T = job->batch, rows = job->rows, cols = job->cols;
    const int64_t tb_ = bp_batch_block(T, 512, BP_CPU_MR); /* past 512 inputs (bp_batch_block) */
    for (int64_t b0 = 0; b0 < T; b0 += tb_) {
    const int64_t b1 = T - b0 < tb_ ? T : b0 + tb_;
    for (int64_t c0 = 0; c0 < cols; c0 += BP_CPU_KC) {
        int64_t kc = cols - c0 < BP_CPU_KC ? cols - c0 : BP_CPU_KC;
        int first = c0 == 0;
        for (int64_t p = r0; p < r1; p += BP_CPU_NR) {
            int nr = r1 - p < BP_CPU_NR ? (int)(r1 - p) : BP_CPU_NR;
            pack_panel_f32(job, p, nr, c0, kc, rowbuf, pk);
            for (int64_t t0 = b0; t0 < b1; t0 += BP_CPU_MR) {
                int mr = b1 - t0 < BP_CPU_MR ? (int)(b1 - t0) : BP_CPU_MR;
                const float *x = job->x + t0 * cols + c0;
                float *y = job->y + t0 * rows + p;
                if (nr == BP_CPU_NR) {
                    micro_any(mr, pk, x, cols, kc, y, rows, first);
                } else {
                    /* A partial panel goes through a full-width tile so stores stay in bounds. */
                    for (int i = 0; i < mr; i++)
                        for (int j = 0; j < 16; j++) tile[i * 16 + j] = !first && j < nr ? y[i * rows + j] : 0;
                    micro_any(mr, pk, x, cols, kc, tile, 16, first);
                    for (int i = 0; i < mr; i++)
                        for (int j = 0; j < nr; j++) y[i * rows + j] = tile[i * 16 + j];
                }
            }
        }
    }
    }
}

/* ---- activation quantizers (same rounding as the scalar ones: nearest-even) ------------- */
void bp_cpu_quant_q8x32_avx2(const float *x, int64_t n, void *out_) {
    bp_q8x32 *out = out_;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = amax32(x);
        float id = amax > 0 ? 127.0f / amax : 0.0f;
        out[b].d = amax / 127.0f;
        out[b].s = quant32(x, id, out[b].q);
        out[b].ds = out[b].d * (float)out[b].s;
    }
}

void bp_cpu_quant_q8x256_avx2(const float *x, int64_t n, void *out_) {
    bp_q8x256 *out = out_;
    for (int64_t b = 0; b < n / 256; b++, x += 256) {
        float amax = 0;
        for (int i = 0; i < 256; i += 32) {
            float m = amax32(x + i);
            amax = m > amax ? m : amax;
        }
        float id = amax > 0 ? 127.0f / amax : 0.0f;
        out[b].d = amax / 127.0f;
        for (int i = 0; i < 256; i += 32) {
            quant32(x + i, id, out[b].q + i);
            for (int h = 0; h < 2; h++) {
                int s = 0;
                for (int j = 0; j < 16; j++) s += out[b].q[i + h * 16 + j];
                out[b].bsums[(i >> 4) + h] = (int16_t)s;
            }
        }
    }
}

/* Reads n bytes (a multiple of 256) as two streams side by side, one per half: the hardware
 * prefetcher keeps more lines in flight over two, and a single stream read ~10% under what the
 * decode kernels themselves stream at 2 threads.
 * Measured: docs/cpu-kernels.md, Measurements behind the comments, avx2/float_kinds.c. */
uint64_t bp_avx2_read_sum(const uint8_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    const uint8_t *q = p + n / 2;
    size_t h = n / 2 / 128 * 128;
    for (size_t i = 0; i < h; i += 128) {
        a = _mm256_xor_si256(a, _mm256_xor_si256(_mm256_load_si256((const __m256i *)(p + i)),
                                                 _mm256_load_si256((const __m256i *)(q + i))));
        b = _mm256_xor_si256(b, _mm256_xor_si256(_mm256_load_si256((const __m256i *)(p + i + 32)),
                                                 _mm256_load_si256((const __m256i *)(q + i + 32))));
        c = _mm256_xor_si256(c, _mm256_xor_si256(_mm256_load_si256((const __m256i *)(p + i + 64)),
                                                 _mm256_load_si256((const __m256i *)(q + i + 64))));
        d = _mm256_xor_si256(d, _mm256_xor_si256(_mm256_load_si256((const __m256i *)(p + i + 96)),
                                                 _mm256_load_si256((const __m256i *)(q + i + 96))));
    }
    a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 1) ^
           (uint64_t)_mm256_extract_epi64(a, 2) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}

#endif
