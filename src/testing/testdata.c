/* Deterministic test data (see testdata.h). */
#include "testing/testdata.h"

#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"

uint64_t bp_rng_next(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

float bp_rng_float(uint64_t *s) { return (float)((double)(bp_rng_next(s) >> 40) * (2.0 / 16777216.0) - 1.0); }

static bool block_ok(bp_kind k, const uint8_t *blk, uint32_t bb, float *tmp, uint32_t be) {
    if (bp_dequantize(k, blk, bb, tmp, be)) return false;
    for (uint32_t i = 0; i < be; i++)
        if (!(fabsf(tmp[i]) < 1e3f)) return false; /* also false for NaN */
    return true;
}

uint8_t *bp_random_weight(bp_kind k, int64_t rows, int64_t cols, uint64_t *rng, size_t *bytes_out) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    size_t rb, bytes;
    if (!ki || bp_kind_row_bytes(k, cols, &rb) || rows <= 0 || !bp_mul_size(rb, (size_t)rows, &bytes)) {
        bp_fail(BP_E_SHAPE, "bp_random_weight: no %lld x %lld weight of kind %d", (long long)rows, (long long)cols,
                (int)k);
        return NULL;
    }
    uint8_t *w = bp_malloc(bytes);
    float *tmp = bp_malloc(sizeof(float) * (size_t)(ki->can_quantize ? cols : ki->block_elems));
    if (!w || !tmp) {
        bp_free(w);
        bp_free(tmp);
        bp_fail(BP_E_NOMEM, "bp_random_weight: no memory for %zu bytes", bytes);
        return NULL;
    }
    bp_status s = BP_OK;
    for (int64_t r = 0; r < rows && !s; r++) {
        uint8_t *row = w + (size_t)r * rb;
        if (ki->can_quantize) {
            for (int64_t c = 0; c < cols; c++) tmp[c] = bp_rng_float(rng);
            s = bp_quantize(k, tmp, cols, row, rb);
            continue;
        }
        for (int64_t b = 0; b < cols / ki->block_elems && !s; b++) {
            uint8_t *blk = row + (size_t)b * ki->block_bytes;
            int tries = 0;
            do {
                for (uint32_t i = 0; i < ki->block_bytes; i++) blk[i] = (uint8_t)bp_rng_next(rng);
            } while (!block_ok(k, blk, ki->block_bytes, tmp, ki->block_elems) && ++tries < 1000);
            if (tries == 1000)
                s = bp_fail(BP_E_KIND, "bp_random_weight: %s: no finite block in 1000 random draws", ki->name);
        }
    }
    bp_free(tmp);
    if (s) {
        bp_free(w);
        return NULL;
    }
    *bytes_out = bytes;
    return w;
}
