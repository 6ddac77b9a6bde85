/* libFuzzer target over the GGUF reader: open any bytes from memory, and when the open
 * succeeds, touch everything the API hands out (every metadata value and array element, every
 * tensor's first and last data byte, lookups by name), so a validation gap becomes an ASan
 * report instead of a latent read past the end.
 *
 * Build: cmake -S . -B build-fuzz -DBP_FUZZ=ON -DCMAKE_C_COMPILER=clang ...
 * Run:   build-fuzz/fuzz_gguf -max_total_time=600 corpus-dir tests/fuzz/corpus
 * The same walk is replayed over tests/gguf/crashers/ by tests/test_gguf_crashers.c. */
#include <stddef.h>
#include <stdint.h>

#include "gguf_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bp_fuzz_gguf_walk(data, size);
    return 0;
}
