/* The tolerance table (src/testing/tolerance.def) against the kind table: every weight kind has a
 * matvec and a GEMM bound (a kind added to kinds.def without one would make every test of it
 * fail on a missing row, never pass on "no bound"); the FLOAT class is exactly the kinds whose
 * weights are exact in f32; a missing op or a non-weight kind has no bound. And bp_nmse, the one
 * NMSE: its definition on small cases, NaN never passing a bound. */
#include <math.h>

#include "testing/tolerance.h"
#include "harness.h"

int main(void) {
    static const char *const ops[] = {"matvec", "gemm"};
    int weight_kinds = 0;
    for (int i = 0; i < bp_kind_table_size(); i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        for (int o = 0; o < 2; o++) {
            double t = bp_tolerance_nmse(ki->kind, ops[o]);
            if (ki->role == BP_ROLE_W)
                CHECK(t > 0 && t < 1e-2, "%s %s: bound %g", ki->name, ops[o], t);
            else
                CHECK(t < 0, "%s is not a weight kind but has a %s bound %g", ki->name, ops[o], t);
        }
        if (ki->role != BP_ROLE_W) continue;
        weight_kinds++;
        bool exact_f32 = ki->block_elems == 1; /* F32, F16, BF16: one value per "block" */
        CHECK(bp_tolerance_float_class(ki->kind) == exact_f32, "%s: FLOAT class %d, one element per block %d",
              ki->name, bp_tolerance_float_class(ki->kind), exact_f32);
        if (exact_f32)
            CHECK(bp_tolerance_nmse(ki->kind, "gemm") < bp_tolerance_nmse(BP_KIND_Q4_0, "gemm"),
                  "%s is held tighter than the quantized kinds", ki->name);
    }
    CHECK(weight_kinds == 28, "%d weight kinds", weight_kinds);
    CHECK(bp_tolerance_nmse(BP_KIND_Q4_K, "no-such-op") < 0, "unknown op: no bound");
    CHECK(bp_tolerance_nmse(BP_KIND_Q4_K, NULL) < 0, "NULL op: no bound");

    const float ref[4] = {1, -2, 3, 0}, same[4] = {1, -2, 3, 0}, off[4] = {1, -2, 4, 0}, zero[4] = {0};
    const float nan_[4] = {1, NAN, 3, 0};
    CHECK(bp_nmse(same, ref, 4) == 0, "identical: 0");
    CHECK(fabs(bp_nmse(off, ref, 4) - 1.0 / 14.0) < 1e-15, "one off by 1: 1/14, got %.17g", bp_nmse(off, ref, 4));
    CHECK(bp_nmse(zero, zero, 4) == 0, "all zero: 0");
    CHECK(isinf(bp_nmse(ref, zero, 4)), "zero reference, non-zero result: inf");
    CHECK(!(bp_nmse(nan_, ref, 4) <= 1.0) && !(bp_nmse(ref, nan_, 4) <= 1.0), "a NaN never passes a bound");
    return bp_test_finish();
}
