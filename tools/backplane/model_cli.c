/* What `run` and `perplexity` share: loading a model with a progress line and its tokenizer, and
 * the closing report (tokens/s, memory, and the path summary: which backend and kernel ran each
 * weight kind, and how many ops fell back). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"
#include "model_cli.h"
#include "run_report.h"
#include "seam/seam_internal.h"

/* The progress line: rewritten in place on a terminal when the percentage moves; elsewhere (a
 * log, CI) only the "loaded" line that follows. */
typedef struct progress_state {
    const char *path;
    int last;
} progress_state;

static bool progress(double f, void *user) {
    progress_state *p = user;
    int pct = (int)(100 * f);
    if (pct == p->last) return true;
    p->last = pct;
    fprintf(stderr, "\rloading %s: %3d%%", p->path, pct);
    fflush(stderr);
    return true;
}

int bp_cli_model_open(const char *path, bool show_progress, bp_cli_model_session *s) {
    memset(s, 0, sizeof *s);
    bp_model_params mp = bp_model_default_params();
    progress_state ps = {.path = path, .last = -1};
    bool tty = show_progress && isatty(2);
    if (tty) mp.progress = progress, mp.progress_user = &ps;
    double t0 = bp_bench_now();
    bp_status st = bp_model_load(path, &mp, &s->model);
    if (tty) fprintf(stderr, "\r\033[K");
    if (st) return bp_cli_error("load", st);
    s->load_seconds = bp_bench_now() - t0;
    bp_model_get_info(s->model, &s->info);
    if ((st = bp_tokenizer_create(bp_model_gguf(s->model), &s->tok))) {
        bp_model_free(s->model);
        s->model = NULL;
        return bp_cli_error("tokenizer", st);
    }
    if (show_progress)
        fprintf(stderr, "loaded %s (%s '%s'): %lld layers, %.1f M params, %.1f MiB, in %.2f s\n", path, s->info.arch,
                s->info.name, (long long)s->info.n_layer, (double)s->info.n_params / 1e6,
                (double)s->info.file_bytes / (1 << 20), s->load_seconds);
    return 0;
}

void bp_cli_model_close(bp_cli_model_session *s) {
    bp_tokenizer_free(s->tok);
    bp_model_free(s->model);
    memset(s, 0, sizeof *s);
}

/* Resident set size in bytes (Linux /proc/self/status VmRSS); 0 when unknown. */
size_t bp_cli_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtoull(line + 6, NULL, 10);
    fclose(f);
    return kb * 1024;
}

/* Per weight kind present in the model: count, bytes, and the decode/prefill paths. */
typedef struct kind_row {
    bp_kind kind;
    int count;
    double bytes;
} kind_row;

static int kind_rows(const bp_model *m, kind_row *rows, int cap) {
    int n = 0;
    for (int64_t i = 0; i < bp_model_weight_count(m); i++) {
        const bp_weight *w = bp_model_weight_at(m, i, NULL);
        bp_kind k = w->kind;
        int j = 0;
        while (j < n && rows[j].kind != k) j++;
        if (j == n) {
            if (n == cap) continue;
            rows[n++] = (kind_row){.kind = k};
        }
        rows[j].count++;
        rows[j].bytes += (double)w->row_bytes * (double)w->rows;
    }
    return n;
}

/* Per op that ran (matmul jobs are in the per-kind lines), what ran it, from the tally's
 * records: "  attention  Mock attention F16 (24 calls); CPU ... (2 calls)". */
static void print_ops(FILE *f) {
    enum { MAX = 512 };
    static bp_run_tally rows[MAX];
    int n = bp_run_tally_get(rows, MAX);
    if (n > MAX) n = MAX;
    fprintf(f, "paths per op:\n");
    for (int op = 0; op < bp_op_count(); op++) {
        const char *name = bp_op_name(op);
        if (!strcmp(name, "jobs") || !strcmp(name, "matvec") || !strcmp(name, "gemm")) continue;
        char line[2048] = "";
        size_t used = 0;
        for (int i = 0; i < n; i++) {
            if (rows[i].record.op != op) continue;
            /* one part per distinct label: kinds and batches of the same kernel merge */
            char label[512], other[512];
            bp_run_record_label(&rows[i].record, label, sizeof label);
            bool seen = false;
            unsigned long long calls = 0;
            for (int j = 0; j < n; j++) {
                if (rows[j].record.op != op || strcmp(bp_run_record_label(&rows[j].record, other, sizeof other), label))
                    continue;
                seen = seen || j < i;
                calls += rows[j].calls;
            }
            if (seen || used + 1 >= sizeof line) continue;
            int m = snprintf(line + used, sizeof line - used, "%s%s (%llu call%s)", used ? "; " : "", label, calls,
                             calls == 1 ? "" : "s");
            if (m > 0) used = used + (size_t)m < sizeof line ? used + (size_t)m : sizeof line - 1;
        }
        if (used) fprintf(f, "  %-10s %s\n", name, line);
    }
}

void bp_cli_model_report(const bp_cli_model_session *s, const bp_context *c, FILE *f, bool json, int64_t n_prompt,
                         double t_prompt, int64_t n_gen, double t_gen, const char *stop, const char *text,
                         size_t text_len) {
    const double MiB = 1 << 20;
    size_t rss = bp_cli_rss_bytes(), kv = bp_context_kv_bytes(c), bufs = bp_context_buffer_bytes(c);
    unsigned long long fallbacks = bp_fallback_total();
    bp_run_report rr;
    bp_run_report_get(&rr);
    kind_row rows[64];
    int nk = kind_rows(s->model, rows, 64);
    if (json) {
        fprintf(f, "{\"model\": ");
        bp_cli_json_str(f, s->info.name);
        fprintf(f, ", \"arch\": ");
        bp_cli_json_str(f, s->info.arch);
        fprintf(f, ", \"threads\": %d, \"text\": ", bp_cpu_threads());
        bp_cli_json_bytes(f, text, text_len);
        fprintf(f, ", \"text_hex\": ");
        bp_cli_json_hex(f, text, text_len);
        fprintf(f, ", \"text_utf8\": %s", bp_cli_utf8_valid(text, text_len) ? "true" : "false");
        fprintf(f,
                ", \"prompt_tokens\": %lld, \"prompt_seconds\": %.6f, \"prompt_tps\": %.3f, \"gen_tokens\": %lld, "
                "\"gen_seconds\": %.6f, \"gen_tps\": %.3f, \"stop\": ",
                (long long)n_prompt, t_prompt, t_prompt > 0 ? n_prompt / t_prompt : 0, (long long)n_gen, t_gen,
                t_gen > 0 ? n_gen / t_gen : 0);
        bp_cli_json_str(f, stop);
        fprintf(f, ", \"rss_bytes\": %zu, \"file_bytes\": %llu, \"kv_bytes\": %zu, \"buffer_bytes\": %zu, \"paths\": [",
                rss, (unsigned long long)s->info.file_bytes, kv, bufs);
        for (int i = 0; i < nk; i++) {
            fprintf(f, "%s{\"kind\": \"%s\", \"tensors\": %d, \"bytes\": %.0f, \"decode\": ", i ? ", " : "",
                    bp_kind_lookup((uint32_t)rows[i].kind)->name, rows[i].count, rows[i].bytes);
            bp_cli_json_str(f, bp_context_kind_path(c, rows[i].kind, false));
            fprintf(f, ", \"prefill\": ");
            bp_cli_json_str(f, bp_context_kind_path(c, rows[i].kind, true));
            fprintf(f, "}");
        }
        fprintf(f, "], \"report\": ");
        bp_run_report_json(f, &rr);
        fprintf(f, ", \"fallbacks\": %llu}\n", fallbacks);
        return;
    }
    fprintf(f, "\nprompt: %lld tokens in %.3f s, %.1f tokens/s\n", (long long)n_prompt, t_prompt,
            t_prompt > 0 ? n_prompt / t_prompt : 0);
    if (n_gen || t_gen > 0)
        fprintf(f, "generation: %lld tokens in %.3f s, %.1f tokens/s (stopped: %s)\n", (long long)n_gen, t_gen,
                t_gen > 0 ? n_gen / t_gen : 0, stop);
    fprintf(f, "memory: resident %.1f MiB = file %.1f MiB, KV cache %.1f MiB, buffers %.1f MiB, other %.1f MiB\n",
            rss / MiB, (double)s->info.file_bytes / MiB, kv / MiB, bufs / MiB,
            ((double)rss - (double)s->info.file_bytes - (double)kv - (double)bufs) / MiB);
    fprintf(f, "threads: %d; paths per weight kind:\n", bp_cpu_threads());
    for (int i = 0; i < nk; i++) {
        /* the label is a thread-local copy: keep the decode one before asking for the prefill one */
        char d[600];
        snprintf(d, sizeof d, "%s", bp_context_kind_path(c, rows[i].kind, false));
        const char *p = bp_context_kind_path(c, rows[i].kind, true);
        fprintf(f, "  %-6s %3d tensors %7.1f MiB  decode: %s\n", bp_kind_lookup((uint32_t)rows[i].kind)->name,
                rows[i].count, rows[i].bytes / MiB, *d ? d : "(not run)");
        if (*p) fprintf(f, "  %-6s %3s %15s  prefill: %s\n", "", "", "", p);
    }
    print_ops(f);
    const char *note = NULL;
    if (!bp_context_offload(c, NULL, &note) && note[0]) fprintf(f, "device budget: %s\n", note);
    for (int pre = 0; pre < 2; pre++) {
        bp_step_report sr;
        if (bp_context_step_report(c, pre, &sr) || !strcmp(sr.record.backend, "cpu")) continue;
        fprintf(f, "device step (%s, last): %s; %llu submission%s, %llu kernels, %llu upload%s (%llu B), %llu download%s "
                   "(%.1f KiB)%s\n",
                pre ? "prefill" : "decode", sr.record.display, (unsigned long long)sr.submissions,
                sr.submissions == 1 ? "" : "s", (unsigned long long)sr.launches, (unsigned long long)sr.uploads,
                sr.uploads == 1 ? "" : "s", (unsigned long long)sr.bytes_in, (unsigned long long)sr.downloads,
                sr.downloads == 1 ? "" : "s", (double)sr.bytes_out / 1024, sr.recorded ? " (recorded now)" : " (replayed)");
    }
    bp_run_report_print(f, &rr);
}
