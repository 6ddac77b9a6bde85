/* Metal capabilities: compiled on every build, no SDK needed. Claims nothing until its kernels
 * land; each claim must then be backed by a launch (the guard's claim <=> launch test). */
#include "backend/backend.h"

static const char *metal_kernel(bp_op op, bp_kind k) { return bp_claim_answer(BP_BACKEND_METAL, op, k, false); }

const bp_backend_caps bp_caps_metal = {
    .id = BP_BACKEND_METAL,
    .name = "metal",
    .display_name = "Metal",
    .prefill_fallback_name = "Metal per-position matvec",
    .kernel = metal_kernel,
    .unverified = "UNVERIFIED: Metal kernels cannot be built or run here",
};
