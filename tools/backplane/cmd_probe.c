/* backplane probe [--all] [--json] [--rows R --cols C --batch T]: per backend whether it is
 * compiled and enabled and why, and its device; per weight kind the path decode (matvec, batch
 * 1) and prefill (GEMM, batch T) really take on this machine for a R x C weight; with --all,
 * what every backend would run for each kind if it were present.
 *
 * The route is a record from bp_route_op -> bp_seam_route -> bp_seam_takes_shape, the rule the
 * walk itself applies to every call (enabled, claims, BACKPLANE_<B>_MIN_WORK, the cost model,
 * the preference), so this report cannot say "Vulkan" while the op runs on the CPU.
 * Default shape: 4096 x 4096 (`backplane bench`'s), prefill batch 512. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"
#include "probe_ops.h"
#include "seam/seam_internal.h"

typedef struct path {
    bp_run_record rec;   /* what the route says will run: backend, kernel */
    char label[300];     /* "Vulkan Q4_K matvec", "Vulkan per-position matvec", "CPU avx2 Q4_K" */
    bool per_position;
    char why[768];       /* why the backends before it passed */
    char choice[320];    /* CPU decode: how its kernel was chosen between two (bp_cpu_decode_choice), or "" */
} path;

/* The CPU picks its kernel by batch (multi-input matvec for small batches, the panel GEMM for
 * large ones), so a prefill path is named at one batch: by default 512, the prefill `backplane
 * bench` measures. */
enum { PROBE_PREFILL_BATCH = 512, PROBE_ROWS = 4096, PROBE_COLS = 4096 };

static void route(bp_kind k, int64_t rows, int64_t cols, int64_t batch, path *p) {
    memset(p, 0, sizeof *p);
    if (bp_route_op(batch == 1 ? "matvec" : "gemm", k, rows, cols, batch, &p->rec, p->why, sizeof p->why) != BP_OK) {
        snprintf(p->rec.display, sizeof p->rec.display, "CPU");
        snprintf(p->rec.kernel, sizeof p->rec.kernel, "%s", bp_cpu_kernel_name(k, batch));
        snprintf(p->why, sizeof p->why, "%s", bp_last_error());
    }
    bp_run_record_label(&p->rec, p->label, sizeof p->label);
    p->per_position = p->rec.per_position;
    if (!strcmp(p->rec.backend, "cpu") && batch == 1 && !bp_cpu_decode_choice(k, p->choice, sizeof p->choice))
        p->choice[0] = 0;
}

static void json_path(const path *p) {
    printf("{\"backend\": ");
    bp_cli_json_str(stdout, p->rec.display);
    printf(", \"kernel\": ");
    bp_cli_json_str(stdout, p->rec.kernel);
    printf(", \"path\": ");
    bp_cli_json_str(stdout, p->label);
    printf(", \"per_position\": %s, \"why\": ", p->per_position ? "true" : "false");
    bp_cli_json_str(stdout, p->why);
    printf(", \"choice\": ");
    bp_cli_json_str(stdout, p->choice[0] ? p->choice : NULL);
    printf("}");
}

/* A positive integer option value; 0 on a bad one. */
static int64_t count_arg(const char *v) {
    char *end;
    long long n = v ? strtoll(v, &end, 10) : 0;
    return v && *v && !*end && n > 0 && n <= (1LL << 31) ? (int64_t)n : 0;
}

static int usage(int rc) {
    fprintf(rc ? stderr : stdout,
            "usage: backplane probe [--all] [--json] [--rows R] [--cols C] [--batch T]\n"
            "  per backend: compiled, enabled and why (BACKPLANE_<NAME>=0|1 forces, else a device probe)\n"
            "  per weight kind: the decode (batch 1) and prefill (batch T) path on this machine for an\n"
            "  R x C weight, by the rule the ops use (enabled, claims, MIN_WORK, cost model, preference)\n"
            "  --rows R --cols C  the weight's shape (default 4096 x 4096)\n"
            "  --batch T          the prefill batch (default 512)\n"
            "  --all   also what every backend would run for each kind if present\n"
            "  --json  {\"shape\": {...}, \"backends\": [...], \"kinds\": [...]}\n");
    return rc;
}

int bp_cmd_probe(int argc, char **argv) {
    bool json = false, all = false;
    int64_t rows = PROBE_ROWS, cols = PROBE_COLS, batch = PROBE_PREFILL_BATCH;
    for (int i = 1; i < argc; i++) {
        int64_t *dst = !strcmp(argv[i], "--rows") ? &rows : !strcmp(argv[i], "--cols") ? &cols
                     : !strcmp(argv[i], "--batch") ? &batch : NULL;
        if (dst) {
            if (i + 1 >= argc || !(*dst = count_arg(argv[i + 1]))) {
                fprintf(stderr, "backplane probe: %s needs a positive integer\n", argv[i]);
                return usage(2);
            }
            i++;
        } else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--all")) all = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(0);
        else {
            fprintf(stderr, "backplane probe: unknown option '%s'\n", argv[i]);
            return usage(2);
        }
    }
    int n = bp_seam_slot_count();

    /* Backends. */
    if (json)
        printf("{\n  \"shape\": {\"rows\": %lld, \"cols\": %lld, \"decode_batch\": 1, \"prefill_batch\": %lld},\n"
               "  \"backends\": [\n",
               (long long)rows, (long long)cols, (long long)batch);
    else printf("backends, in dispatch order:\n");
    for (int i = 0; i <= n; i++) {
        const char *name, *display, *reason;
        bool compiled, enabled;
        const char *unverified = NULL;
        if (i < n) {
            const bp_seam_slot *s = bp_seam_slot_at(i);
            name = s->caps->name;
            display = s->caps->display_name;
            compiled = s->dispatch != NULL;
            enabled = bp_seam_slot_enabled(i, &reason);
            unverified = s->caps->unverified;
        } else {
            name = "cpu";
            display = "CPU";
            compiled = true;
            enabled = bp_backend_enabled(BP_BACKEND_CPU, &reason);
        }
        bp_backend_info info;
        const bool have_info = bp_backend_info_at(i, &info) == BP_OK;
        const char *device = have_info ? info.device : "";
        if (json) {
            printf("    {\"name\": \"%s\", \"display\": \"%s\", \"compiled\": %s, \"enabled\": %s, \"reason\": ", name,
                   display, compiled ? "true" : "false", enabled ? "true" : "false");
            bp_cli_json_str(stdout, reason);
            printf(", \"device\": ");
            bp_cli_json_str(stdout, device);
            printf(", \"cpu_implementation\": %s, \"unverified\": ", have_info && info.cpu_implementation ? "true" : "false");
            bp_cli_json_str(stdout, unverified);
            printf("}%s\n", i < n ? "," : "");
        } else {
            printf("  %-7s compiled: %-3s  enabled: %-3s  %s%s%s%s\n", name, compiled ? "yes" : "no",
                   enabled ? "yes" : "no", reason, unverified ? "  [" : "", unverified ? unverified : "", unverified ? "]" : "");
        }
    }

    /* Kinds. */
    if (json) printf("  ],\n  \"kinds\": [\n");
    else {
        bp_backend_pref mode;
        const char *pref = bp_backend_preference(&mode);
        printf("\nshape: %lld x %lld weight; decode batch 1, prefill batch %lld (--rows/--cols/--batch)%s%s%s%s\n",
               (long long)rows, (long long)cols, (long long)batch, pref ? "; backend " : "",
               pref ? (mode == BP_FORCE ? "forced: " : "preferred: ") : "", pref ? pref : "", bp_strict_mode() ? "; strict" : "");
        printf("\n| kind | decode (batch 1) | prefill (batch %lld) |%s\n|---|---|---|", (long long)batch,
               all ? " would run if present |" : "");
        printf("%s\n", all ? "---|" : "");
    }
    bool first = true;
    for (int t = 0; t < bp_kind_table_size(); t++) {
        const bp_kind_info *ki = bp_kind_at(t);
        if (ki->role != BP_ROLE_W) continue;
        path dec, pre;
        route(ki->kind, rows, cols, 1, &dec);
        route(ki->kind, rows, cols, batch, &pre);
        if (json) {
            printf("%s    {\"kind\": \"%s\", \"decode\": ", first ? "" : ",\n", ki->name);
            json_path(&dec);
            printf(", \"prefill\": ");
            json_path(&pre);
            if (all) {
                printf(", \"all\": {");
                for (int i = 0; i < n; i++) {
                    const bp_seam_slot *s = bp_seam_slot_at(i);
                    const char *kn = s->caps->kernel(BP_OP_MATVEC, ki->kind);
                    const bool gemm = s->caps->kernel(BP_OP_GEMM, ki->kind) != NULL;
                    printf("%s\"%s\": {\"matvec\": ", i ? ", " : "", s->caps->name);
                    bp_cli_json_str(stdout, kn);
                    printf(", \"gemm\": %s, \"prefill\": ", gemm ? "true" : "false");
                    bp_cli_json_str(stdout, !kn ? NULL : gemm ? "gemm" : s->caps->prefill_fallback_name);
                    printf(", \"unverified\": ");
                    bp_cli_json_str(stdout, kn ? s->caps->unverified : NULL);
                    printf("}");
                }
                printf("}");
            }
            printf("}");
        } else {
            printf("| %s | %s%s%s%s | %s |", ki->name, dec.label, dec.choice[0] ? " (" : "", dec.choice,
                   dec.choice[0] ? ")" : "", pre.label);
            if (all) {
                printf(" ");
                bool any = false;
                for (int i = 0; i < n; i++) {
                    const bp_seam_slot *s = bp_seam_slot_at(i);
                    const char *kn = s->caps->kernel(BP_OP_MATVEC, ki->kind);
                    if (!kn) continue;
                    printf("%s%s %s%s%s%s", any ? "; " : "", s->caps->display_name, kn,
                           s->caps->kernel(BP_OP_GEMM, ki->kind) ? " +gemm" : " (prefill per-position)",
                           s->caps->unverified ? " " : "", s->caps->unverified ? s->caps->unverified : "");
                    any = true;
                }
                printf("%s |", any ? "" : "CPU only");
            }
            printf("\n");
        }
        first = false;
    }
    if (json) printf("\n  ],\n");
    bp_probe_ops(json, all, rows, cols); /* op routes (probe_ops.c) */
    if (json) printf("}\n");
    return 0;
}
