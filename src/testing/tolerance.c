/* The tolerance table lookup and NMSE (see tolerance.def for the numbers and why). */
#include "testing/tolerance.h"

#include <math.h>
#include <string.h>

typedef struct row {
    const char *op, *cls;
    double nmse;
} row;

static const row rows[] = {
#define BP_TOLERANCE(op, cls, nmse) {#op, #cls, nmse},
#include "testing/tolerance.def"
#undef BP_TOLERANCE
};

bool bp_tolerance_float_class(bp_kind k) { return k == BP_KIND_F32 || k == BP_KIND_F16 || k == BP_KIND_BF16; }

double bp_tolerance_nmse(bp_kind k, const char *op) {
    const bp_kind_info *ki = bp_kind_lookup((uint32_t)k);
    if (!ki || ki->role != BP_ROLE_W || !op) return -1;
    const char *cls = bp_tolerance_float_class(k) ? "FLOAT" : "QUANT";
    double by_class = -1;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (strcmp(rows[i].op, op)) continue;
        if (!strcmp(rows[i].cls, ki->name)) return rows[i].nmse;
        if (!strcmp(rows[i].cls, cls)) by_class = rows[i].nmse;
    }
    return by_class;
}

double bp_nmse(const float *got, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    if (isnan(num) || isnan(den)) return NAN;
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return num / den;
}
