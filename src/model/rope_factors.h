/* RoPE with per-frequency factors (Llama 3.1+'s rope_freqs.weight): the op layer's bp_rope has
 * no factors, so the model layer carries this one variant. */
#ifndef BP_MODEL_ROPE_FACTORS_H
#define BP_MODEL_ROPE_FACTORS_H

#include "backplane.h"

/* As bp_rope, with theta_i divided by factors[i] (n_rot / 2 of them). */
bp_status bp_model_rope_factors(const bp_rope_desc *d, const float *factors, float *x, int64_t t,
                                const int32_t *positions);

#endif
