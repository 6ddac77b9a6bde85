/* The MoE routing helper against values written out from the formulas (softmax over all
 * logits, or sigmoid; top-k by the float32 gate value with ties to the lower index, as llama.cpp's
 * CPU ranks them; renormalized or not), and
 * the MoE offload switch: default on, BACKPLANE_MOE_OFFLOAD=0|false|off turns it off, read once
 * at first use, the setter overrides it. (That the switch is honoured by a run -- a claiming
 * backend skipped when off -- is test_conv_moe_guard.c.) */
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static void near(float got, double want, const char *what) {
    CHECK(fabs((double)got - want) <= 1e-6 * fabs(want) + 1e-7, "%s: %.9g, want %.9g", what, (double)got, want);
}

static void routing(void) {
    int32_t ids[8];
    float w[8];
    /* Token 0: a tie between experts 1 and 3 (logit 3): 1 first. Token 1: a clear order. */
    const float l[2 * 4] = {1, 3, 2, 3, /**/ 0.5f, -1, 2, 0};
    double z0 = exp(1) + exp(2) + 2 * exp(3);
    CHECK_OK(bp_moe_route(l, 2, 4, 2, BP_MOE_GATE_SOFTMAX, false, ids, w));
    CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 2 && ids[3] == 0, "softmax top-2 ids %d %d | %d %d", ids[0], ids[1],
          ids[2], ids[3]);
    near(w[0], exp(3) / z0, "token 0 weight 0");
    near(w[1], exp(3) / z0, "token 0 weight 1");
    double z1 = exp(0.5) + exp(-1) + exp(2) + exp(0);
    near(w[2], exp(2) / z1, "token 1 weight 0");
    near(w[3], exp(0.5) / z1, "token 1 weight 1");
    CHECK_OK(bp_moe_route(l, 2, 4, 2, BP_MOE_GATE_SOFTMAX, true, ids, w));
    near(w[0], 0.5, "renormalized tie");
    near(w[2], exp(2) / (exp(2) + exp(0.5)), "token 1 renormalized weight 0");
    near(w[3], exp(0.5) / (exp(2) + exp(0.5)), "token 1 renormalized weight 1");
    /* Sigmoid, top-3 of token 1's logits. */
    double s2 = 1 / (1 + exp(-2.0)), s05 = 1 / (1 + exp(-0.5)), s0 = 0.5;
    CHECK_OK(bp_moe_route(l + 4, 1, 4, 3, BP_MOE_GATE_SIGMOID, false, ids, w));
    CHECK(ids[0] == 2 && ids[1] == 0 && ids[2] == 3, "sigmoid top-3 ids %d %d %d", ids[0], ids[1], ids[2]);
    near(w[0], s2, "sigmoid weight 0");
    near(w[2], s0, "sigmoid weight 2");
    CHECK_OK(bp_moe_route(l + 4, 1, 4, 3, BP_MOE_GATE_SIGMOID, true, ids, w));
    near(w[1], s05 / (s2 + s05 + s0), "sigmoid renormalized weight 1");
    /* Top-1 renormalized is weight 1; top-k = all experts keeps every one once. */
    CHECK_OK(bp_moe_route(l, 1, 4, 1, BP_MOE_GATE_SOFTMAX, true, ids, w));
    CHECK(ids[0] == 1, "top-1 id %d", ids[0]);
    near(w[0], 1.0, "top-1 renormalized");
    CHECK_OK(bp_moe_route(l, 1, 4, 4, BP_MOE_GATE_SOFTMAX, false, ids, w));
    CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 2 && ids[3] == 0, "top-4 order %d %d %d %d", ids[0], ids[1], ids[2],
          ids[3]);
    near(w[0] + w[1] + w[2] + w[3], 1.0, "top-4 softmax weights sum");
    CHECK_OK(bp_moe_route(NULL, 0, 4, 2, BP_MOE_GATE_SOFTMAX, true, NULL, NULL)); /* no tokens */
}

/* llama.cpp ranks float32 softmax values (exp(l - max) in float32, times the float32 reciprocal
 * of the sum) with a sort that keeps equal values in index order: logits so close that their
 * float32 values are equal are a tie, and the lower index wins although its logit is smaller.
 * Values worked out by hand: max = l[1] = 1e-9; l[0] - max = -1e-9, whose exp rounds to 1.0f, as
 * does exp(0); so experts 0 and 1 tie at 1/(2 + 2e^-5) and 0 is first. Logits 1e-6 apart are
 * resolved (exp(-1e-6) = 0.999999f) and the larger wins. */
static void float32_ties(void) {
    int32_t ids[2];
    float w[2];
    const float l[4] = {0.0f, 1e-9f, -5.0f, -5.0f};
    CHECK(l[1] > l[0] && expf(l[0] - l[1]) == 1.0f, "the constructed logits are not a float32 tie");
    CHECK_OK(bp_moe_route(l, 1, 4, 1, BP_MOE_GATE_SOFTMAX, false, ids, w));
    CHECK(ids[0] == 0, "a float32 tie (logits 0 and 1e-9) went to expert %d, not the lower index 0", ids[0]);
    near(w[0], 1.0 / (2 + 2 * exp(-5.0)), "float32 tie weight");
    CHECK_OK(bp_moe_route(l, 1, 4, 2, BP_MOE_GATE_SOFTMAX, true, ids, w));
    CHECK(ids[0] == 0 && ids[1] == 1, "float32 tie, top-2: %d %d", ids[0], ids[1]);
    const float r[4] = {0.0f, 1e-6f, -5.0f, -5.0f};
    CHECK_OK(bp_moe_route(r, 1, 4, 1, BP_MOE_GATE_SOFTMAX, false, ids, w));
    CHECK(ids[0] == 1, "logits 1e-6 apart: expert %d chosen, not the larger (1)", ids[0]);
}

int main(void) {
    float32_ties();
    /* The default needs a process where nothing has read the switch yet: a child. */
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("BACKPLANE_MOE_OFFLOAD");
        _exit(bp_moe_offload() ? 0 : 3);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "MoE offload must default to on (child status %d)", st);
    setenv("BACKPLANE_MOE_OFFLOAD", "off", 1);
    CHECK(!bp_moe_offload(), "BACKPLANE_MOE_OFFLOAD=off must turn MoE offload off");
    setenv("BACKPLANE_MOE_OFFLOAD", "1", 1);
    CHECK(!bp_moe_offload(), "the environment must be read once, not per call");
    bp_set_moe_offload(true);
    CHECK(bp_moe_offload(), "the setter must override the environment default");
    bp_set_moe_offload(false);
    CHECK(!bp_moe_offload(), "the setter must turn it back off");
    routing();
    return bp_test_finish();
}
