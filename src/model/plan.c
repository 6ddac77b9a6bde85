/* bp_plan: where a model would run and the memory it would take, from the file's metadata alone.
 *
 * The plan binds the model as bp_model_load does, but as a shell (model_load.c: every tensor
 * checked by name, shape and kind, no tensor data read), writes the same step programs the run
 * writes (forward.c), asks the seam which backend would take each step whole (the walk's first
 * question, step.c) and sizes everything with the functions the run allocates by:
 *   device    the backend's step_bytes: the placement's own layout (gpu_step.c)
 *   host      the KV cache and buffers (context.c, kv_cache.c), the CPU's repacked copies and
 *             activation buffers (cpu.c's plan_call), the file's index and the model's tables
 *             (the heap the shell itself took: the same reader and binder over the same file)
 * so what `run --plan-check` measures after the run can be held to it. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/cpu.h"
#include "model/context_internal.h"
#include "ops/ops_internal.h"

bp_plan_params bp_plan_default_params(void) {
    bp_plan_params p = {.n_ctx = 0, .kv_kind = BP_KIND_F16, .n_batch = 0, .n_parallel = 1, .device_budget = 0};
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int layer_of(const char *name) {
    int il;
    return sscanf(name, "blk.%d.", &il) == 1 ? il : -1;
}

static void total(bp_plan_memory *m) {
    m->total = m->weights + m->copies + m->kv + m->activations + m->logits + m->scratch + m->other;
}

/* The matmul nodes' activation buffers on the CPU: the pool keeps the largest one call needs
 * (a node's jobs share one buffer). */
static uint64_t cpu_act_bytes(const bp_step_prog *p) {
    uint64_t most = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const bp_step_node *nd = &p->nodes[i];
        if (nd->kind != BP_STEP_MATMUL) continue;
        uint64_t sum = 0;
        for (int j = 0; j < nd->n_jobs; j++) {
            size_t copy, act;
            const bp_weight *w = nd->job[j].w;
            bp_cpu_call_memory(w->kind, w->rows, w->cols, w->row_bytes, nd->rows, &copy, &act);
            sum += act;
        }
        if (sum > most) most = sum;
    }
    return most;
}

static bp_status plan_model(bp_gguf *f, const char *path, const bp_plan_params *pp, long long heap0, bp_plan *out) {
    const double t0 = now_s();
    bp_model *m = NULL;
    bp_status s = bp_model_open_shell(f, path, &m);
    if (s) return s;
    /* the reader's index and the model's tables, as the shell allocated them, and the F32
     * copies of the vectors the shell skipped */
    const uint64_t tables = (uint64_t)(bp_alloc_live_bytes() - heap0) + m->vector_bytes;
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = pp->n_ctx, cp.kv_kind = pp->kv_kind, cp.n_batch = pp->n_batch, cp.n_seq_max = pp->n_parallel;
    bp_step_prog prog[2] = {{0}};
    size_t kv = 0, bufs = 0;
    if (!(s = bp_context_params_resolve(m, &cp)) && !(s = bp_context_plan_bytes(m, &cp, &kv, &bufs)) &&
        !(s = bp_forward_program(m, cp.n_batch, cp.n_ctx, cp.kv_kind, &prog[0], 1, 1)))
        s = bp_forward_program(m, cp.n_batch, cp.n_ctx, cp.kv_kind, &prog[1], cp.n_batch, 1);
    if (s) goto done;
    out->ctx = cp;
    snprintf(out->arch, sizeof out->arch, "%s", m->arch->name);
    snprintf(out->name, sizeof out->name, "%s", m->name);
    out->n_layers = (int32_t)m->hp.n_layer;
    out->file_bytes = bp_gguf_file_size(m->file);

    /* who takes the decode step, whole or its last layers under the budget, and what it
     * places there (offload.c: the run decides by the same function) */
    bp_offload off;
    if ((s = bp_forward_offload(&prog[0], pp->device_budget, &off))) goto done;
    snprintf(out->why, sizeof out->why, "%s", off.why);
    if (off.slot < 0 && !out->why[0] && !off.note[0])
        snprintf(out->why, sizeof out->why, "no other backend is compiled in or enabled");
    if (off.slot < 0 && off.note[0]) snprintf(out->why, sizeof out->why, "the device budget");
    snprintf(out->budget_note, sizeof out->budget_note, "%s", off.note);
    const bp_seam_slot *sl = off.slot >= 0 ? bp_seam_slot_at(off.slot) : NULL;
    snprintf(out->step_backend, sizeof out->step_backend, "%s", sl ? sl->caps->name : "cpu");
    bp_plan_memory *host = &out->mem[0];
    snprintf(host->name, sizeof host->name, "host");
    out->n_mem = 1;
    out->n_layers_device = off.n_dev;
    out->split = sl && !off.whole;
    if (sl) {
        bp_plan_memory *d = &out->mem[out->n_mem++];
        snprintf(d->name, sizeof d->name, "%s", sl->caps->name);
        d->known = sl->dispatch->step_bytes != NULL;
        const bp_step_bytes *sb = &off.bytes;
        d->weights = sb->weights, d->kv = sb->kv, d->activations = sb->activations, d->logits = sb->logits;
        d->scratch = sb->params + sb->io + sb->extra;
        total(d);
    }
    /* the nodes the CPU runs: every one, none (a whole device step), or a split's first part */
    const int first_dev = out->n_layers - off.n_dev; /* the device's first layer (n_layers: none) */
    bp_step_prog cpu_prog[2], dev_prog[2];
    for (int k = 0; k < 2; k++) {
        cpu_prog[k] = prog[k];
        if (out->split) bp_step_split(&prog[k], off.n_dev, &cpu_prog[k], &dev_prog[k]);
    }

    /* every matrix: where its matmuls run, the kernels, the CPU's copy */
    out->tensors = bp_calloc((size_t)m->n_weights, sizeof *out->tensors);
    if (!out->tensors) {
        s = bp_fail(BP_E_NOMEM, "plan: no memory for %lld tensors", (long long)m->n_weights);
        goto done;
    }
    const bool on_cpu = sl == NULL, cpu_runs = on_cpu || out->split;
    for (int64_t i = 0; i < m->n_weights; i++) {
        const bp_weight *w = m->weights[i].w;
        bp_plan_tensor *t = &out->tensors[out->n_tensors++];
        snprintf(t->name, sizeof t->name, "%s", m->weights[i].name);
        t->layer = layer_of(t->name);
        t->kind = w->kind, t->rows = w->rows, t->cols = w->cols, t->bytes = (uint64_t)w->row_bytes * (uint64_t)w->rows;
        const bool matmul = !(w == m->tok_embd && m->output != m->tok_embd); /* an untied embedding is only looked up */
        /* on the device: every tensor of a whole step; of a split, its layers' and the head's
         * (a tied embedding is the output's matrix there, and only looked up on the CPU) */
        const bool dev = !on_cpu && (!out->split || t->layer >= first_dev || (t->layer < 0 && matmul));
        if (dev) {
            snprintf(t->backend, sizeof t->backend, "%s", out->step_backend);
            snprintf(t->kernel, sizeof t->kernel, "%s %s", out->step_backend, bp_kind_traits_of(w->kind)->info.name);
            snprintf(t->kernel_batch, sizeof t->kernel_batch, "%s", t->kernel);
            continue;
        }
        snprintf(t->backend, sizeof t->backend, "cpu");
        if (!matmul) {
            snprintf(t->kernel, sizeof t->kernel, "embedding rows");
            snprintf(t->kernel_batch, sizeof t->kernel_batch, "embedding rows");
            continue;
        }
        snprintf(t->kernel, sizeof t->kernel, "%s", bp_cpu_kernel_name(w->kind, 1));
        snprintf(t->kernel_batch, sizeof t->kernel_batch, "%s", bp_cpu_kernel_name(w->kind, cp.n_batch));
        size_t copy, act;
        bp_cpu_call_memory(w->kind, w->rows, w->cols, w->row_bytes, 1, &copy, &act);
        t->copy_bytes = copy;
        host->copies += copy;
        uintptr_t lo;
        if (copy) out->released += bp_model_release_span(w, &lo); /* what memory.c drops after an eval */
    }

    /* host: the mapped file, the copies, every sequence's cache, the buffers */
    host->weights = out->file_bytes;
    host->kv = (uint64_t)kv * (uint64_t)cp.n_seq_max;
    host->activations = bufs;
    host->logits = (uint64_t)m->hp.n_vocab * sizeof(float); /* one position's (generation) */
    if (cpu_runs) {
        /* the pool's thread scratch, and the largest activation buffer and attention scratch a
         * step asks for (both kept by the pool, grown to the largest): a decode step and a
         * whole prefill step at a full cache bound them (of a split, the CPU's part) */
        const uint64_t a0 = cpu_act_bytes(&cpu_prog[0]), a1 = cpu_act_bytes(&cpu_prog[1]);
        const bp_hparams *hp = &m->hp;
        const int nth = bp_cpu_threads();
        uint64_t at = 0;
        for (int k = 0; k < 2 && bp_step_has_node(&cpu_prog[0], BP_STEP_ATTENTION); k++) {
            const uint64_t b = bp_attention_cpu_scratch_bytes((int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim_k,
                                                              (int)hp->head_dim_v, k ? cp.n_batch : 1, cp.n_ctx, nth);
            if (b > at) at = b;
        }
        /* and 16 KiB per thread of small transient buffers not sized one by one (a jobs call's
         * slot arrays; measured: at most 9 KiB over the rest on the tiny models, test_plan) */
        host->scratch = bp_cpu_pool_scratch_bytes() + (a0 > a1 ? a0 : a1) + at + bp_cpu_jobs_call_bytes() +
                        (uint64_t)nth * (16u << 10);
    }
    /* the context's own tables: itself (its run records), the per-sequence arrays and token
     * ids (seq.c), the cache's per-layer table, the step programs, a device step's placement
     * and launch lists */
    host->other = tables + sizeof(bp_context) + (uint64_t)(prog[0].cap + prog[1].cap) * sizeof(bp_step_node) +
                  (uint64_t)cp.n_seq_max * (sizeof(bp_seq) + sizeof(bp_kv_cache *) + (uint64_t)cp.n_ctx * sizeof(int32_t)) +
                  4 * (uint64_t)cp.n_batch * sizeof(int32_t) + sizeof(bp_kv_cache) +
                  (uint64_t)m->hp.n_layer * sizeof(bp_kv_layer) + off.bytes.host;
    total(host);
    host->known = true;
    out->heap = host->total - host->weights;
    out->seconds = now_s() - t0;
done:
    bp_free(prog[0].nodes);
    bp_free(prog[1].nodes);
    bp_model_free(m);
    return s;
}

static bp_status finish(bp_status s, bp_plan *p, bp_plan **out) {
    if (s) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", bp_last_error());
        bp_plan_free(p);
        return bp_fail(s, "%s", msg);
    }
    *out = p;
    return BP_OK;
}

bp_status bp_plan_file(const char *path, const bp_plan_params *params, bp_plan **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_plan_file: out is NULL");
    *out = NULL;
    if (!path) return bp_fail(BP_E_INVAL, "bp_plan_file: path is NULL");
    const bp_plan_params pp = params ? *params : bp_plan_default_params();
    bp_plan *p = bp_calloc(1, sizeof *p);
    if (!p) return bp_fail(BP_E_NOMEM, "bp_plan_file: no memory");
    const long long heap0 = bp_alloc_live_bytes();
    bp_gguf *f = NULL;
    bp_status s = bp_gguf_open(path, &f);
    if (!s) s = plan_model(f, path, &pp, heap0, p);
    return finish(s, p, out);
}

bp_status bp_plan_buffer(const void *buf, size_t len, const bp_plan_params *params, bp_plan **out) {
    if (!out) return bp_fail(BP_E_INVAL, "bp_plan_buffer: out is NULL");
    *out = NULL;
    const bp_plan_params pp = params ? *params : bp_plan_default_params();
    bp_plan *p = bp_calloc(1, sizeof *p);
    if (!p) return bp_fail(BP_E_NOMEM, "bp_plan_buffer: no memory");
    const long long heap0 = bp_alloc_live_bytes();
    bp_gguf *f = NULL;
    bp_status s = bp_gguf_open_memory(buf, len, &f);
    if (!s) s = plan_model(f, "(buffer)", &pp, heap0, p);
    return finish(s, p, out);
}

void bp_plan_free(bp_plan *p) {
    if (!p) return;
    bp_free(p->tensors);
    bp_free(p);
}
