/* backplane probe [--all] [--json]: per backend whether it is compiled and enabled and why; per
 * weight kind the path decode (matvec) and prefill (GEMM) really take on this machine; with
 * --all, what every backend would run for each kind if it were present.
 *
 * The route comes from bp_seam_route, the same rule the dispatch walk uses, so this report
 * cannot say "Vulkan" while ops run on the CPU. Shape thresholds (`wants`) are not applied:
 * the path shown is the one for shapes the backend accepts. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"
#include "probe_ops.h"
#include "seam/seam_internal.h"

typedef struct path {
    const char *backend; /* display name: "Vulkan", "CPU" */
    const char *kernel;  /* kernel name: "Q4_K", or the CPU's kernel name */
    char label[128];     /* "Vulkan Q4_K matvec", "Vulkan per-position matvec", "CPU avx2 Q4_K" */
    bool per_position;
} path;

/* The CPU picks its kernel by batch (multi-input matvec for small batches, the panel GEMM for
 * large ones), so a prefill path is named at one batch: 512, the prefill `backplane bench`
 * measures. */
enum { PROBE_PREFILL_BATCH = 512 };

static void route(bp_kind k, bool prefill, path *p) {
    int i = bp_seam_route(k);
    memset(p, 0, sizeof *p);
    if (i < 0) {
        p->backend = "CPU";
        p->kernel = bp_cpu_kernel_name(k, prefill ? PROBE_PREFILL_BATCH : 1);
        snprintf(p->label, sizeof p->label, "%s", p->kernel);
        return;
    }
    const bp_seam_slot *s = bp_seam_slot_at(i);
    p->backend = s->caps->display_name;
    p->kernel = s->caps->matvec_kernel(k);
    if (!prefill) snprintf(p->label, sizeof p->label, "%s %s matvec", p->backend, p->kernel);
    else if (s->caps->has_gemm(k) && s->dispatch->gemm)
        snprintf(p->label, sizeof p->label, "%s %s gemm", p->backend, p->kernel);
    else {
        p->per_position = true;
        snprintf(p->label, sizeof p->label, "%s", s->caps->prefill_fallback_name);
    }
}

static void json_path(const path *p) {
    printf("{\"backend\": ");
    bp_cli_json_str(stdout, p->backend);
    printf(", \"kernel\": ");
    bp_cli_json_str(stdout, p->kernel);
    printf(", \"path\": ");
    bp_cli_json_str(stdout, p->label);
    printf(", \"per_position\": %s}", p->per_position ? "true" : "false");
}

static int usage(int rc) {
    fprintf(rc ? stderr : stdout,
            "usage: backplane probe [--all] [--json]\n"
            "  per backend: compiled, enabled and why (BACKPLANE_<NAME>=0|1 forces, else a device probe)\n"
            "  per weight kind: the decode and prefill path on this machine\n"
            "  --all   also what every backend would run for each kind if present\n"
            "  --json  {\"backends\": [...], \"kinds\": [...]}\n");
    return rc;
}

int bp_cmd_probe(int argc, char **argv) {
    bool json = false, all = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--all")) all = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(0);
        else {
            fprintf(stderr, "backplane probe: unknown option '%s'\n", argv[i]);
            return usage(2);
        }
    }
    int n = bp_seam_slot_count();

    /* Backends. */
    if (json) printf("{\n  \"backends\": [\n");
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
        if (json) {
            printf("    {\"name\": \"%s\", \"display\": \"%s\", \"compiled\": %s, \"enabled\": %s, \"reason\": ", name,
                   display, compiled ? "true" : "false", enabled ? "true" : "false");
            bp_cli_json_str(stdout, reason);
            printf(", \"unverified\": ");
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
        printf("\n| kind | decode (batch 1) | prefill (batch 512) |%s\n|---|---|---|", all ? " would run if present |" : "");
        printf("%s\n", all ? "---|" : "");
    }
    bool first = true;
    for (int t = 0; t < bp_kind_table_size(); t++) {
        const bp_kind_info *ki = bp_kind_at(t);
        if (ki->role != BP_ROLE_W) continue;
        path dec, pre;
        route(ki->kind, false, &dec);
        route(ki->kind, true, &pre);
        if (json) {
            printf("%s    {\"kind\": \"%s\", \"decode\": ", first ? "" : ",\n", ki->name);
            json_path(&dec);
            printf(", \"prefill\": ");
            json_path(&pre);
            if (all) {
                printf(", \"all\": {");
                for (int i = 0; i < n; i++) {
                    const bp_seam_slot *s = bp_seam_slot_at(i);
                    const char *kn = s->caps->matvec_kernel(ki->kind);
                    printf("%s\"%s\": {\"matvec\": ", i ? ", " : "", s->caps->name);
                    bp_cli_json_str(stdout, kn);
                    printf(", \"gemm\": %s, \"prefill\": ", s->caps->has_gemm(ki->kind) ? "true" : "false");
                    bp_cli_json_str(stdout, !kn ? NULL : s->caps->has_gemm(ki->kind) ? "gemm"
                                                                                     : s->caps->prefill_fallback_name);
                    printf(", \"unverified\": ");
                    bp_cli_json_str(stdout, kn ? s->caps->unverified : NULL);
                    printf("}");
                }
                printf("}");
            }
            printf("}");
        } else {
            printf("| %s | %s | %s |", ki->name, dec.label, pre.label);
            if (all) {
                printf(" ");
                bool any = false;
                for (int i = 0; i < n; i++) {
                    const bp_seam_slot *s = bp_seam_slot_at(i);
                    const char *kn = s->caps->matvec_kernel(ki->kind);
                    if (!kn) continue;
                    printf("%s%s %s%s%s%s", any ? "; " : "", s->caps->display_name, kn,
                           s->caps->has_gemm(ki->kind) ? " +gemm" : " (prefill per-position)",
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
    bp_probe_ops(json, all); /* op routes (probe_ops.c) */
    if (json) printf("}\n");
    return 0;
}
