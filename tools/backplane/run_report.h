/* The run report `run`, `perplexity` and `bench MODEL` end with (run_report.c): the share of op
 * time per device, the bytes moved between host and device per token, and the fallbacks, all
 * read from the seam's run records (the tally), which the walk fills where each call ran. */
#ifndef BP_RUN_REPORT_H
#define BP_RUN_REPORT_H

#include <stdbool.h>
#include <stdio.h>

enum { BP_RUN_REPORT_MAX_DEVICES = 8 };

typedef struct bp_run_report {
    double seconds;               /* op time: the steps' (else every call's), wall clock at the seam */
    unsigned long long steps, tokens, h2d_bytes, d2h_bytes, fallbacks;
    int n;                        /* devices with time, the CPU first */
    struct { char backend[16], display[16]; double seconds; } dev[BP_RUN_REPORT_MAX_DEVICES];
    bool all_on_device;           /* every step ran whole on one device: no op of it on the CPU */
} bp_run_report;

/* The report of everything since the process started (or the last bp_stats_reset). */
void bp_run_report_get(bp_run_report *r);
/* Text: a few lines; the words "on the GPU" only when r->all_on_device. */
void bp_run_report_print(FILE *f, const bp_run_report *r);
/* One JSON object (no trailing newline). */
void bp_run_report_json(FILE *f, const bp_run_report *r);

#endif
