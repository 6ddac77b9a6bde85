/* The run report (run_report.h), from the tally of run records (src/seam/records.c).
 *
 * A step is one call: on a device that took it whole, its record names the device and holds its
 * time and the bytes it moved; run on the CPU node by node, its record holds the whole step's
 * time and bytes, and each op inside it that a device ran has a record of its own. So the op
 * time is the steps' time, a device's share is the time of its records, and the CPU's is what
 * is left of the steps (its ops and the nodes that are no op: embedding, adds). */
#include <string.h>

#include "backplane.h"
#include "backplane_ops.h"
#include "seam/seam_internal.h"
#include "cli_common.h"
#include "run_report.h"

static int dev_slot(bp_run_report *r, const bp_run_record *rec) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->dev[i].backend, rec->backend)) return i;
    if (r->n == BP_RUN_REPORT_MAX_DEVICES) return -1;
    snprintf(r->dev[r->n].backend, sizeof r->dev[r->n].backend, "%s", rec->backend);
    snprintf(r->dev[r->n].display, sizeof r->dev[r->n].display, "%s", rec->display);
    return r->n++;
}

void bp_run_report_get(bp_run_report *r) {
    enum { MAX = 512 };
    static bp_run_tally rows[MAX];
    memset(r, 0, sizeof *r);
    int n = bp_run_tally_get(rows, MAX);
    if (n > MAX) n = MAX;
    const bp_run_record cpu = {.backend = "cpu", .display = "CPU"};
    dev_slot(r, &cpu);
    double steps_s = 0, all_s = 0, cpu_ops_s = 0, dev_s = 0;
    bool cpu_step = false;
    for (int i = 0; i < n; i++) {
        const bp_run_tally *t = &rows[i];
        const bool is_cpu = !strcmp(t->record.backend, "cpu");
        all_s += t->seconds;
        if (t->record.op == BP_OP_STEP) {
            steps_s += t->seconds;
            if (!t->record.part) r->steps += t->calls, r->tokens += t->tokens; /* a split step once */
            r->h2d_bytes += t->h2d_bytes, r->d2h_bytes += t->d2h_bytes;
            cpu_step |= is_cpu;
        }
        if (is_cpu) {
            if (t->record.op != BP_OP_STEP) cpu_ops_s += t->seconds;
            continue;
        }
        const int d = dev_slot(r, &t->record);
        if (d >= 0) r->dev[d].seconds += t->seconds;
        dev_s += t->seconds;
    }
    /* No step (a bench of single ops): every call is its own op time. */
    r->seconds = r->steps ? steps_s : all_s;
    r->dev[0].seconds = r->steps ? (r->seconds > dev_s ? r->seconds - dev_s : 0) : cpu_ops_s;
    r->all_on_device = r->steps > 0 && !cpu_step && cpu_ops_s == 0;
    r->fallbacks = bp_fallback_total();
}

static void bytes(FILE *f, double b) {
    if (b >= 1 << 20) fprintf(f, "%.1f MiB", b / (1 << 20));
    else if (b >= 1 << 10) fprintf(f, "%.1f KiB", b / (1 << 10));
    else fprintf(f, "%.0f B", b);
}

void bp_run_report_print(FILE *f, const bp_run_report *r) {
    const double tot = r->seconds > 0 ? r->seconds : 1e-300;
    fprintf(f, "op time by device (run records):");
    int shown = 0;
    for (int i = 0; i < r->n; i++) {
        if (i == 0 && r->dev[0].seconds <= 0 && r->n > 1) continue; /* a device ran all of it */
        fprintf(f, "%s %s %.1f%%", shown++ ? "," : "", r->dev[i].display, 100.0 * r->dev[i].seconds / tot);
    }
    fprintf(f, " of %.3f s over %llu step%s, %llu token%s\n", r->seconds, r->steps, r->steps == 1 ? "" : "s", r->tokens,
            r->tokens == 1 ? "" : "s");
    if (r->all_on_device) {
        fprintf(f, "every op of every step ran on the GPU (");
        for (int i = 1; i < r->n; i++) fprintf(f, "%s%s", i > 1 ? ", " : "", r->dev[i].display);
        fprintf(f, "); the host sent token ids and read logits\n");
    } else if (r->n > 1)
        fprintf(f, "not every op ran on a device: the CPU had %.1f%% of the op time\n", 100.0 * r->dev[0].seconds / tot);
    if (!r->h2d_bytes && !r->d2h_bytes) fprintf(f, "host <-> device: nothing moved\n");
    else {
        fprintf(f, "host <-> device: ");
        bytes(f, (double)r->h2d_bytes);
        fprintf(f, " in, ");
        bytes(f, (double)r->d2h_bytes);
        fprintf(f, " out");
        if (r->tokens) {
            fprintf(f, ", ");
            bytes(f, (double)(r->h2d_bytes + r->d2h_bytes) / (double)r->tokens);
            fprintf(f, " per token (placing the weights included)");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "fallbacks: %llu%s\n", r->fallbacks, r->fallbacks ? " (--fallbacks for where and why)" : "");
}

void bp_run_report_json(FILE *f, const bp_run_report *r) {
    const double tot = r->seconds > 0 ? r->seconds : 1e-300;
    fprintf(f, "{\"op_seconds\": %.6f, \"steps\": %llu, \"tokens\": %llu, \"devices\": [", r->seconds, r->steps, r->tokens);
    for (int i = 0, k = 0; i < r->n; i++) {
        if (i == 0 && r->dev[0].seconds <= 0 && r->n > 1) continue;
        fprintf(f, "%s{\"backend\": ", k++ ? ", " : "");
        bp_cli_json_str(f, r->dev[i].backend);
        fprintf(f, ", \"display\": ");
        bp_cli_json_str(f, r->dev[i].display);
        fprintf(f, ", \"seconds\": %.6f, \"share\": %.6f}", r->dev[i].seconds, r->dev[i].seconds / tot);
    }
    fprintf(f, "], \"all_on_device\": %s, \"h2d_bytes\": %llu, \"d2h_bytes\": %llu, \"bytes_per_token\": %.1f, "
               "\"fallbacks\": %llu}",
            r->all_on_device ? "true" : "false", r->h2d_bytes, r->d2h_bytes,
            r->tokens ? (double)(r->h2d_bytes + r->d2h_bytes) / (double)r->tokens : 0.0, r->fallbacks);
}
