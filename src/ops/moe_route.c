/* MoE routing, the helper op beside bp_moe_run: per token, the top_k experts and their weights.
 *
 * The choice is llama.cpp's (CPU; facts from ggml's soft_max and argsort): it ranks the gate's
 * float32 outputs, not the logits -- softmax as exp(l - max) in float32 times the float32
 * reciprocal of their sum, or the sigmoid -- in descending order by std::sort, which for
 * up to 16 experts is libstdc++'s insertion sort, stable: equal values keep the lower index first.
 * So two logits close enough that their float32 gate values are equal are a tie, and go to the
 * lower index, although one is larger; ranking the logits in double would pick the other. The
 * same rule here: float32 gate values, the lower index on equal ones. (For more than 16 experts
 * llama.cpp's introsort leaves the order of equal values unspecified; here it stays the lower
 * index.) The weights are computed in double from the logits. */
#include <math.h>

#include "core/error.h"
#include "ops/moe_internal.h"

/* The gate's weight for logit v: softmax over all logits or over the chosen ones (their max and
 * denominator given), or sigmoid. */
static double gate_value(bp_moe_gate gate, double v, double max, double denom) {
    return gate != BP_MOE_GATE_SIGMOID ? exp(v - max) / denom : 1.0 / (1.0 + exp(-v));
}

bp_status bp_moe_route(const float *logits, int64_t t, int64_t n_expert, int64_t top_k, bp_moe_gate gate, bool renorm,
                       int32_t *ids, float *route_w) {
    if (t < 0 || n_expert < 1 || n_expert > INT32_MAX || top_k < 1 || top_k > n_expert)
        return bp_fail(BP_E_SHAPE, "bp_moe_route: t %lld, %lld experts, top_k %lld: need t >= 0 and 1 <= top_k <= experts",
                       (long long)t, (long long)n_expert, (long long)top_k);
    if (gate != BP_MOE_GATE_SOFTMAX && gate != BP_MOE_GATE_SIGMOID && gate != BP_MOE_GATE_SOFTMAX_TOPK)
        return bp_fail(BP_E_INVAL, "bp_moe_route: unknown gate %d (0 softmax, 1 sigmoid, 2 softmax of the top k)",
                       (int)gate);
    if (t && (!logits || !ids || !route_w)) return bp_fail(BP_E_INVAL, "bp_moe_route: logits, ids or weights is NULL");
    for (int64_t i = 0; i < t * n_expert; i++)
        if (!isfinite(logits[i]))
            return bp_fail(BP_E_INVAL, "bp_moe_route: token %lld expert %lld: logit %g is not finite",
                           (long long)(i / n_expert), (long long)(i % n_expert), (double)logits[i]);
    for (int64_t i = 0; i < t; i++) {
        const float *l = logits + i * n_expert;
        int32_t *id = ids + i * top_k;
        float *w = route_w + i * top_k;
        double max = l[0], denom = 0, sum = 0;
        for (int64_t e = 1; e < n_expert; e++) max = l[e] > max ? l[e] : max;
        if (gate == BP_MOE_GATE_SOFTMAX)
            for (int64_t e = 0; e < n_expert; e++) denom += exp((double)l[e] - max);
        /* the float32 ranking values (see above) */
        double fsum = 0;
        for (int64_t e = 0; gate == BP_MOE_GATE_SOFTMAX && e < n_expert; e++) fsum += (double)expf(l[e] - (float)max);
        const float finv = (float)(1.0 / fsum);
#define RANK(e) (gate == BP_MOE_GATE_SOFTMAX ? expf(l[e] - (float)max) * finv \
                 : gate == BP_MOE_GATE_SIGMOID ? 1.0f / (1.0f + expf(-l[e])) : l[e])
        /* Selection: top_k passes, each the largest value not taken yet (first index on ties). */
        for (int64_t j = 0; j < top_k; j++) {
            int64_t best = -1;
            float bv = 0;
            for (int64_t e = 0; e < n_expert; e++) {
                bool taken = false;
                for (int64_t q = 0; q < j && !taken; q++) taken = id[q] == e;
                const float v = RANK(e);
                if (!taken && (best < 0 || v > bv)) best = e, bv = v;
            }
            id[j] = (int32_t)best;
        }
#undef RANK
        if (gate == BP_MOE_GATE_SOFTMAX_TOPK) { /* softmax over the chosen: the first is their max */
            max = l[id[0]], denom = 0;
            for (int64_t j = 0; j < top_k; j++) denom += exp((double)l[id[j]] - max);
        }
        for (int64_t j = 0; j < top_k; j++) sum += gate_value(gate, l[id[j]], max, denom);
        for (int64_t j = 0; j < top_k; j++) {
            double g = gate_value(gate, l[id[j]], max, denom);
            w[j] = (float)(renorm && sum > 0 ? g / sum : g);
        }
    }
    return BP_OK;
}
