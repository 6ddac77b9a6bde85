/* libFuzzer target over the sampler (issue 36): the input's first 32 bytes are the settings
 * (temperature, top_k, top_p, min_p, repeat_penalty, frequency/presence penalties as raw floats,
 * so NaN, +/-Inf, denormals and extremes all come up; repeat_last_n, seed), the next 8 accepted
 * tokens, the rest a logits row (raw floats, NaN and Inf included) of 1..256 entries. Every
 * bp_sampler_create either refuses with BP_E_INVAL or gives a sampler whose sample returns
 * BP_E_INVAL or an id inside the vocabulary, and whose probs sum to 1. Before the fix top_p <= 0
 * read before the candidate buffer.
 *
 * Build: cmake -S . -B build-fuzz -DBP_FUZZ=ON -DCMAKE_C_COMPILER=clang ...; target fuzz_sampler. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backplane.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static float f32_at(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 32 + 16 + 4) return 0;
    bp_sampler_params p = bp_sampler_default_params();
    p.temperature = f32_at(data);
    memcpy(&p.top_k, data + 4, 4);
    p.top_p = f32_at(data + 8);
    p.min_p = f32_at(data + 12);
    p.repeat_penalty = f32_at(data + 16);
    p.frequency_penalty = f32_at(data + 20);
    p.presence_penalty = f32_at(data + 24);
    p.repeat_last_n = data[28] % 70;
    p.seed = (uint64_t)data[29] << 8 | data[30];
    const uint8_t *acc = data + 32;
    size_t n = (size - 48) / 4;
    if (n > 256) n = 256;
    float *logits = malloc(n * sizeof *logits);
    double *probs = malloc(n * sizeof *probs);
    if (!logits || !probs) abort();
    for (size_t i = 0; i < n; i++) logits[i] = f32_at(data + 48 + 4 * i);
    bp_sampler *s = NULL;
    bp_status rc = bp_sampler_create(&p, (int32_t)n, &s);
    if (rc != BP_OK) {
        if (rc != BP_E_INVAL || s) abort();
    } else {
        for (int i = 0; i < 16; i++) bp_sampler_accept(s, (bp_token)(acc[i] % n));
        for (int round = 0; round < 2; round++) {
            bp_token id = -1;
            rc = bp_sampler_sample(s, logits, &id);
            if (rc != BP_OK && rc != BP_E_INVAL) abort();
            if (rc == BP_OK && (id < 0 || (size_t)id >= n)) abort();
            if (bp_sampler_probs(s, logits, probs) == BP_OK) {
                double sum = 0;
                for (size_t i = 0; i < n; i++) {
                    if (!(probs[i] >= 0 && probs[i] <= 1)) abort();
                    sum += probs[i];
                }
                if (!(fabs(sum - 1) < 1e-6)) abort();
            }
            if (rc == BP_OK) bp_sampler_accept(s, id);
        }
        bp_sampler_free(s);
    }
    free(logits);
    free(probs);
    return 0;
}
