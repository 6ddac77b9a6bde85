/* The tolerance table (src/testing/tolerance.def) and the one NMSE every test and `backplane
 * verify` compare with. */
#ifndef BP_CORE_TOLERANCE_H
#define BP_CORE_TOLERANCE_H

#include <stddef.h>

#include "backplane.h"

/* The NMSE bound for op ("matvec", "gemm", ...) on weights of kind k: the kind's own row if the
 * table has one, else its class's (FLOAT or QUANT). Negative when the table has no row for the
 * op or k is not a weight kind: a caller must treat that as a failure, never as "anything goes". */
double bp_tolerance_nmse(bp_kind k, const char *op);
/* True for F32, F16, BF16: weights exact in f32 (the FLOAT class). */
bool bp_tolerance_float_class(bp_kind k);

/* Normalised mean squared error of got against ref: sum (got - ref)^2 / sum ref^2 (double).
 * 0 when both are all zero; +Inf when ref is all zero and got is not; NaN when either holds a
 * NaN (so a NaN never passes a "<= bound" check). */
double bp_nmse(const float *got, const float *ref, size_t n);

#endif
