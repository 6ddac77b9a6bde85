/* Partial offload: which part of the forward step a device takes under a byte budget, for the
 * plan (plan.c) and the run (forward.c) alike, so the layers the plan names are the layers the
 * run places.
 *
 * The device takes the last layers and the head (output norm, output matmul, soft-cap); the
 * embedding and the first layers stay on the CPU. The hidden state crosses once per step, host
 * to device, and the logits come back as they do from a whole device step. Each candidate is
 * sized by the backend's own step_bytes (the placement's layout, gpu_step.c): the layers'
 * weights and KV cache, plus the activations, logits, tables and input counted once. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/context_internal.h"
#include "ops/ops_internal.h"

static uint64_t sum(const bp_step_bytes *b) {
    return (uint64_t)b->weights + b->params + b->kv + b->activations + b->logits + b->io + b->extra;
}

bp_status bp_forward_offload(const bp_step_prog *p, uint64_t budget, bp_offload *out) {
    memset(out, 0, sizeof *out);
    out->slot = bp_step_route(p, out->why, sizeof out->why);
    if (out->slot < 0) return BP_OK; /* no device takes the step: the CPU runs it, as without a budget */
    const bp_seam_slot *sl = bp_seam_slot_at(out->slot);
    const char *name = sl->caps->name;
    if (!sl->dispatch->step_bytes) {
        /* a backend that cannot size its placement gets the step whole, budget or not */
        out->n_dev = p->n_layers, out->whole = true;
        snprintf(out->note, sizeof out->note, "%s cannot size its placement: the budget is not applied", name);
        return BP_OK;
    }
    bp_status s = sl->dispatch->step_bytes(p, &out->bytes);
    if (s) return s;
    out->total = sum(&out->bytes);
    if (!budget || out->total <= budget) {
        out->n_dev = p->n_layers, out->whole = true;
        if (budget)
            snprintf(out->note, sizeof out->note, "the whole %s step needs %.1f MiB, within the %.1f MiB budget", name,
                     out->total / 1048576.0, budget / 1048576.0);
        return BP_OK;
    }
    /* the most last layers whose part fits (the part shrinks with every layer left out) */
    const uint64_t whole = out->total;
    uint64_t need = 0; /* the part tried; after the loop, the last layer and the head (k = 1) */
    for (int k = p->n_layers; k >= 1; k--) {
        bp_step_prog first, last;
        bp_step_split(p, k, &first, &last);
        bp_step_bytes b;
        if ((s = sl->dispatch->step_bytes(&last, &b))) return s;
        need = sum(&b);
        if (need > budget) continue;
        out->n_dev = k, out->bytes = b, out->total = need;
        char cpu[48];
        if (k < p->n_layers) snprintf(cpu, sizeof cpu, "the embedding and layers 0-%d", p->n_layers - k - 1);
        else snprintf(cpu, sizeof cpu, "the embedding");
        snprintf(out->note, sizeof out->note,
                 "the whole %s step needs %.1f MiB, more than the %.1f MiB budget: layers %d-%d and the output on %s "
                 "(%.1f MiB), %s on the CPU",
                 name, whole / 1048576.0, budget / 1048576.0, p->n_layers - k, p->n_layers - 1, name,
                 out->total / 1048576.0, cpu);
        return BP_OK;
    }
    snprintf(out->note, sizeof out->note,
             "the %.1f MiB budget is too small for even one layer on %s (the last layer and the output need %.1f "
             "MiB): every layer runs on the CPU",
             budget / 1048576.0, name, need / 1048576.0);
    out->n_dev = 0, out->slot = -1;
    memset(&out->bytes, 0, sizeof out->bytes);
    out->total = 0;
    return BP_OK;
}
