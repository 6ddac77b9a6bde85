/* backplane plan MODEL.gguf: where each tensor and op would run and the bytes per device, from
 * the file's metadata alone (bp_plan_file), before anything is loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "plan_check.h"

static int usage(FILE *f, int rc) {
    fprintf(f,
            "usage: backplane plan MODEL.gguf [--backend NAME] [--ctx N] [--kv-kind KIND] [--parallel N]\n"
            "                      [--batch N] [--device-budget MIB] [--tensors] [--json]\n"
            "  reads the file's metadata only (no tensor data) and prints what a run would place where:\n"
            "  the backend that takes the forward step (or the CPU and why), each layer's kernels, and the\n"
            "  bytes per device (weights, repacked copies, KV cache, activations, logits, scratch)\n"
            "  --backend NAME       plan for that backend forced on (as run --backend)\n"
            "  --ctx N              KV cache tokens (default: the training context, at most 4096)\n"
            "  --kv-kind KIND       KV cache kind (default F16)\n"
            "  --parallel N         sequences, each with its own KV cache (default 1)\n"
            "  --batch N            tokens per prefill step (default 512)\n"
            "  --device-budget MIB  the device may hold at most this much: the last layers that fit go\n"
            "                       there with the output, the rest stay on the CPU\n"
            "  --tensors            every tensor with its kernels (text); --json always lists them\n");
    return rc;
}

static double mib(uint64_t b) { return (double)b / (1 << 20); }

static void print_mem_json(FILE *f, const bp_plan_memory *m) {
    fprintf(f, "{\"name\": ");
    bp_cli_json_str(f, m->name);
    fprintf(f,
            ", \"known\": %s, \"weights\": %llu, \"copies\": %llu, \"kv\": %llu, \"activations\": %llu, "
            "\"logits\": %llu, \"scratch\": %llu, \"other\": %llu, \"total\": %llu}",
            m->known ? "true" : "false", (unsigned long long)m->weights, (unsigned long long)m->copies,
            (unsigned long long)m->kv, (unsigned long long)m->activations, (unsigned long long)m->logits,
            (unsigned long long)m->scratch, (unsigned long long)m->other, (unsigned long long)m->total);
}

/* What runs layer l (its weights, its KV cache): the device holds the last n_layers_device. */
static const char *layer_backend(const bp_plan *p, int l) {
    return strcmp(p->step_backend, "cpu") && l >= p->n_layers - p->n_layers_device ? p->step_backend : "cpu";
}

static void print_json(FILE *f, const char *path, const bp_plan *p) {
    fprintf(f, "{\"file\": ");
    bp_cli_json_str(f, path);
    fprintf(f, ", \"arch\": ");
    bp_cli_json_str(f, p->arch);
    fprintf(f, ", \"name\": ");
    bp_cli_json_str(f, p->name);
    fprintf(f, ", \"file_bytes\": %llu, \"n_ctx\": %lld, \"n_batch\": %lld, \"n_parallel\": %d, \"kv_kind\": ",
            (unsigned long long)p->file_bytes, (long long)p->ctx.n_ctx, (long long)p->ctx.n_batch,
            (int)p->ctx.n_seq_max);
    bp_cli_json_str(f, bp_kind_lookup((uint32_t)p->ctx.kv_kind)->name);
    fprintf(f, ", \"step_backend\": ");
    bp_cli_json_str(f, p->step_backend);
    fprintf(f, ", \"why\": ");
    bp_cli_json_str(f, p->why);
    fprintf(f, ", \"n_layers\": %d, \"n_layers_device\": %d, \"budget_note\": ", (int)p->n_layers,
            (int)p->n_layers_device);
    bp_cli_json_str(f, p->budget_note);
    fprintf(f, ", \"split\": %s, \"layers\": [", p->split ? "true" : "false");
    for (int l = 0; l < p->n_layers; l++) {
        fprintf(f, "%s{\"layer\": %d, \"backend\": ", l ? ", " : "", l);
        bp_cli_json_str(f, layer_backend(p, l));
        fprintf(f, "}");
    }
    fprintf(f, "]");
    fprintf(f, ", \"heap\": %llu, \"released\": %llu, \"seconds\": %.6f, \"memory\": [",
            (unsigned long long)p->heap, (unsigned long long)p->released, p->seconds);
    for (int i = 0; i < p->n_mem; i++) {
        if (i) fprintf(f, ", ");
        print_mem_json(f, &p->mem[i]);
    }
    fprintf(f, "], \"tensors\": [");
    for (int64_t i = 0; i < p->n_tensors; i++) {
        const bp_plan_tensor *t = &p->tensors[i];
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        bp_cli_json_str(f, t->name);
        fprintf(f, ", \"layer\": %d, \"kind\": ", (int)t->layer);
        bp_cli_json_str(f, bp_kind_lookup((uint32_t)t->kind)->name);
        fprintf(f, ", \"rows\": %lld, \"cols\": %lld, \"bytes\": %llu, \"backend\": ", (long long)t->rows,
                (long long)t->cols, (unsigned long long)t->bytes);
        bp_cli_json_str(f, t->backend);
        fprintf(f, ", \"kernel\": ");
        bp_cli_json_str(f, t->kernel);
        fprintf(f, ", \"kernel_batch\": ");
        bp_cli_json_str(f, t->kernel_batch);
        fprintf(f, ", \"copy_bytes\": %llu}", (unsigned long long)t->copy_bytes);
    }
    fprintf(f, "]}\n");
}

static void print_text(FILE *f, const char *path, const bp_plan *p, bool tensors) {
    fprintf(f, "plan for %s (%s '%s'), %.1f MiB, read from its metadata in %.3f s\n", path, p->arch, p->name,
            mib(p->file_bytes), p->seconds);
    fprintf(f, "context: %lld tokens x %d sequence(s), KV %s, prefill steps of %lld tokens\n", (long long)p->ctx.n_ctx,
            (int)p->ctx.n_seq_max, bp_kind_lookup((uint32_t)p->ctx.kv_kind)->name, (long long)p->ctx.n_batch);
    if (p->split) {
        fprintf(f, "forward step: split, %d of %d layers on %s: the CPU runs the embedding and the first layers, %s "
                   "the last layers and the output in one submission (the hidden state crosses once per step)\n",
                (int)p->n_layers_device, (int)p->n_layers, p->step_backend, p->step_backend);
        /* layer by layer, runs of one placement merged */
        for (int l = 0; l < p->n_layers;) {
            int e = l;
            while (e + 1 < p->n_layers && !strcmp(layer_backend(p, e + 1), layer_backend(p, l))) e++;
            char span[32];
            if (e > l) snprintf(span, sizeof span, "layers %d-%d", l, e);
            else snprintf(span, sizeof span, "layer %d", l);
            fprintf(f, "  %-14s %s (weights and KV cache)\n", span, layer_backend(p, l));
            l = e + 1;
        }
    } else if (strcmp(p->step_backend, "cpu"))
        fprintf(f, "forward step: the whole step on %s (every op, the KV cache and the activations on the device; "
                   "%d of %d layers)\n", p->step_backend, (int)p->n_layers_device, (int)p->n_layers);
    else
        fprintf(f, "forward step: the CPU, op by op (%s)\n", p->why);
    if (p->budget_note[0]) fprintf(f, "device budget: %s\n", p->budget_note);
    fprintf(f, "\n%-8s %10s %10s %10s %10s %10s %10s %10s %10s  (MiB)\n", "device", "weights", "copies", "KV", "activ.",
            "logits", "scratch", "other", "total");
    for (int i = 0; i < p->n_mem; i++) {
        const bp_plan_memory *m = &p->mem[i];
        if (!m->known) {
            fprintf(f, "%-8s %10s (the backend cannot size its placement)\n", m->name, "unknown");
            continue;
        }
        fprintf(f, "%-8s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", m->name, mib(m->weights),
                mib(m->copies), mib(m->kv), mib(m->activations), mib(m->logits), mib(m->scratch), mib(m->other),
                mib(m->total));
    }
    fprintf(f, "host: weights are the mapped file; after each eval the pages of originals with a copy are dropped "
               "(-%.2f MiB)\n", mib(p->released));
    /* layers: one line per distinct placement (kinds and kernels), runs of layers merged */
    fprintf(f, "\nplacement (decode kernel / prefill kernel):\n");
    for (int64_t i = 0; i < p->n_tensors; i++) {
        const bp_plan_tensor *t = &p->tensors[i];
        /* layer 0 stands for the others, unless asked; of a split, the device's first layer too */
        const int dev0 = p->split ? (int)(p->n_layers - p->n_layers_device) : 0;
        if (!tensors && t->layer > 0 && t->layer != dev0) continue;
        fprintf(f, "  %-28s %-7s %6lld x %-6lld %-8s %s / %s%s\n", t->name, bp_kind_lookup((uint32_t)t->kind)->name,
                (long long)t->rows, (long long)t->cols, t->backend, t->kernel, t->kernel_batch,
                t->copy_bytes ? " (repacked copy)" : "");
    }
    if (!tensors && p->split)
        fprintf(f, "  (each layer as the first of its placement above: --tensors lists every one)\n");
    else if (!tensors && p->n_layers > 1)
        fprintf(f, "  (layers 1..%d as layer 0: --tensors lists every one)\n", (int)p->n_layers - 1);
}

int bp_cmd_plan(int argc, char **argv) {
    if (bp_cli_take_backend(&argc, argv, "plan") < 0) return 2;
    bp_plan_params pp = bp_plan_default_params();
    const char *model = NULL;
    bool json = false, tensors = false;
    long long x;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout, 0);
        if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--tensors")) tensors = true;
        else if (!v && a[0] == '-') {
            fprintf(stderr, "backplane plan: %s needs a value\n", a);
            return usage(stderr, 2);
        } else if (!strcmp(a, "--ctx")) {
            if (!bp_cli_int("plan", a, argv[++i], 0, 1 << 24, &x)) return 2;
            pp.n_ctx = x;
        } else if (!strcmp(a, "--batch")) {
            if (!bp_cli_int("plan", a, argv[++i], 0, 65536, &x)) return 2;
            pp.n_batch = x;
        } else if (!strcmp(a, "--parallel")) {
            if (!bp_cli_int("plan", a, argv[++i], 1, 256, &x)) return 2;
            pp.n_parallel = (int32_t)x;
        } else if (!strcmp(a, "--device-budget")) {
            float mb;
            if (!bp_cli_float("plan", a, argv[++i], 1.0 / 1024, 1 << 30, &mb)) return 2;
            pp.device_budget = (uint64_t)((double)mb * 1048576.0); /* MiB, fractions too (tiny models) */
        } else if (!strcmp(a, "--kv-kind")) {
            const bp_kind_info *ki = bp_kind_by_name(argv[++i]);
            if (!ki) {
                fprintf(stderr, "backplane plan: unknown kind '%s'\n", argv[i]);
                return 2;
            }
            pp.kv_kind = ki->kind;
        } else if (a[0] != '-' && !model) model = a;
        else {
            fprintf(stderr, "backplane plan: unknown option '%s'\n", a);
            return usage(stderr, 2);
        }
    }
    if (!model) {
        fprintf(stderr, "backplane plan: need MODEL.gguf\n");
        return usage(stderr, 2);
    }
    if (bp_cli_dry_run) return 0;
    bp_plan *p = NULL;
    bp_status s = bp_plan_file(model, &pp, &p);
    if (s) return bp_cli_error("plan", s);
    if (json) print_json(stdout, model, p);
    else print_text(stdout, model, p, tensors);
    bp_plan_free(p);
    return 0;
}
