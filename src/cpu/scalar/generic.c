/* The portable path: the kind's reference dequantizer on a chunk of blocks, then a plain float
 * dot. Correct for every kind on any machine; the SIMD files override what they speed up. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"

/* Elements dequantized per step: a multiple of every block size (256), small enough to stay
 * in L1 next to the matching slice of x. */
enum { CHUNK = 1024 };

void bp_scalar_vec_generic(const bp_cpu_job *job, int64_t r0, int64_t r1) {
    float buf[CHUNK];
    const int64_t be = job->kt->info.block_elems, bb = job->kt->info.block_bytes;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = job->w + (size_t)r * job->row_bytes;
        float acc[8] = {0};
        for (int64_t c = 0; c < job->cols; c += CHUNK) {
            int64_t n = job->cols - c < CHUNK ? job->cols - c : CHUNK;
            job->kt->dequant(row + (size_t)(c / be * bb), buf, n / be);
            const float *x = job->x + c;
            int64_t i = 0;
            for (; i + 8 <= n; i += 8)
                for (int l = 0; l < 8; l++) acc[l] += buf[i + l] * x[i + l];
            for (; i < n; i++) acc[0] += buf[i] * x[i];
        }
        job->y[r] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

/* Each row chunk is dequantized once and used for every input; y accumulates chunk by chunk
 * in a fixed order, so the thread count never changes a value. */
void bp_scalar_gemm_generic(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1) {
    float *buf = job->scratch[ith];
    const int64_t be = job->kt->info.block_elems, bb = job->kt->info.block_bytes;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = job->w + (size_t)r * job->row_bytes;
        for (int64_t c = 0; c < job->cols; c += CHUNK) {
            int64_t n = job->cols - c < CHUNK ? job->cols - c : CHUNK;
            job->dequant(row + (size_t)(c / be * bb), buf, n / be);
            for (int64_t j = 0; j < job->batch; j++) {
                const float *x = job->x + j * job->cols + c;
                float acc = 0;
                for (int64_t i = 0; i < n; i++) acc += buf[i] * x[i];
                float *yo = &job->y[j * job->rows + r];
                *yo = c ? *yo + acc : acc;
            }
        }
    }
}

void bp_cpu_quant_q8x32_scalar(const float *x, int64_t n, void *out_) {
    bp_q8x32 *out = out_;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) {
            int v = (int)lrintf(x[i] * id);
            out[b].q[i] = (int8_t)v;
            s += v;
        }
        out[b].d = d;
        out[b].s = s;
        out[b].ds = d * (float)s;
    }
}

void bp_cpu_quant_q8x256_scalar(const float *x, int64_t n, void *out_) {
    bp_q8x256 *out = out_;
    for (int64_t b = 0; b < n / 256; b++, x += 256) {
        float amax = 0;
        for (int i = 0; i < 256; i++) amax = fmaxf(amax, fabsf(x[i]));
        float id = amax > 0 ? 127.0f / amax : 0.0f;
        out[b].d = amax / 127.0f;
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int i = g * 16; i < g * 16 + 16; i++) {
                int v = (int)lrintf(x[i] * id);
                out[b].q[i] = (int8_t)v;
                s += v;
            }
            out[b].bsums[g] = (int16_t)s;
        }
    }
}

uint64_t bp_scalar_read_sum(const uint8_t *p, size_t n) {
    const uint64_t *q = (const uint64_t *)(const void *)p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        a ^= q[i];
        b ^= q[i + 1];
        c ^= q[i + 2];
        d ^= q[i + 3];
    }
    return a ^ b ^ c ^ d;
}

