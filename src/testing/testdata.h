/* Deterministic test data, shared by the tests (tests/harness.h wraps these) and the CLI's
 * verify and bench, so there is one random generator and one weight maker, not one per file. */
#ifndef BP_CORE_TESTDATA_H
#define BP_CORE_TESTDATA_H

#include <stddef.h>
#include <stdint.h>

#include "backplane.h"

/* xorshift64; a zero state is replaced by a fixed non-zero seed. */
uint64_t bp_rng_next(uint64_t *state);
/* Uniform in [-1, 1), 24 random bits. */
float bp_rng_float(uint64_t *state);

/* rows x cols random weights of kind k in a new buffer (bp_malloc; *bytes set), or NULL with
 * the error recorded: a real quantization of uniform [-1, 1) floats where the kind has a
 * quantizer; else random bytes, block by block, redrawn until the block decodes (by the
 * reference) to finite values below 1e3 in magnitude. Random f16 scale bytes are Inf/NaN in 1 of
 * 32 draws and up to 65504: such blocks test nothing but overflow. No per-kind scale offsets
 * needed, so it stays right when a kind is added. */
uint8_t *bp_random_weight(bp_kind k, int64_t rows, int64_t cols, uint64_t *rng, size_t *bytes);

#endif
