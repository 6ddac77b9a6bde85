/* Helpers shared by several subcommands (owned by the seam work; additive changes welcome).
 *
 * --fallbacks: matvec, verify and bench accept it. Call bp_cli_take_fallbacks() first thing (it
 * removes the flag from argv so the command's own parser never sees it), and
 * bp_cli_print_fallbacks() just before returning: it prints the per-run summary of ops that
 * fell back, from where and why (bp_fallback_report), to stderr when the flag was given. */
#ifndef BP_CLI_COMMON_H
#define BP_CLI_COMMON_H

#include <stdbool.h>
#include <stdio.h>

bool bp_cli_take_fallbacks(int *argc, char **argv);
/* Set by the CLI fuzz target (tests/fuzz/fuzz_cli.c): a command that writes files or runs for
 * seconds (matvec, verify, bench) returns 0 once its arguments are parsed and checked. */
extern bool bp_cli_dry_run;
/* --strict: every command that runs ops accepts it (matvec, verify, bench). Removes the flag
 * from argv like bp_cli_take_fallbacks and turns strict mode on (bp_set_strict): a fallback
 * becomes the op's error (BACKPLANE_STRICT=1 does the same). */
bool bp_cli_take_strict(int *argc, char **argv);
void bp_cli_print_fallbacks(void);
/* --profile, the same way: ops' calls, time, GB/s and GFLOP/s per op and backend
 * (bp_stats_report) to stderr, when the flag was given. Commands that run ops take it. */
bool bp_cli_take_profile(int *argc, char **argv);
void bp_cli_print_profile(void);
/* backplane bench --crossover (bench_crossover.c): argv[0] is "--crossover". */
int bp_bench_crossover(int argc, char **argv);
/* Write s as a JSON string literal (quotes, escapes). NULL writes null. */
void bp_cli_json_str(FILE *f, const char *s);

/* ---- benches of ops in their own files (bench_conv_moe.c), helpers from cmd_bench.c -------- */
#include "backplane.h"
/* rows x cols weights of kind ki (row bytes rb) with a bench's random contents: one tile of rows
 * quantized (or random finite blocks), repeated down the matrix. */
bp_status bp_bench_fill_weights(const bp_kind_info *ki, int64_t rows, int64_t cols, size_t rb, uint8_t *w);
/* Bytes of weight copies a decode rotates through so every read comes from DRAM. */
size_t bp_bench_cold_bytes(void);
/* Monotonic seconds; the median of v[0..n) (v is sorted in place). */
double bp_bench_now(void);
double bp_bench_median(double *v, int n);
/* backplane verify's rows of conv2d and MoE cases (verify_conv_moe.c), printed in verify's
 * table or JSON format; cases and failed are added to. caps NULL: the CPU (claims every op). */
typedef struct bp_verify_rows {
    bool json, first; /* first: no JSON row printed yet (the next gets no comma) */
    int cases, failed;
} bp_verify_rows;
struct bp_backend_caps;
/* verify's random numbers (uniform in [-1, 1), from --seed) and NMSE (sum (got-ref)^2 / sum ref^2). */
float bp_verify_randf(void);
double bp_verify_nmse(const float *got, const float *ref, size_t n);
void bp_verify_conv_moe(bp_verify_rows *out, const char *backend, const struct bp_backend_caps *caps,
                        const bp_kind_info *ki);
/* backplane bench --op conv2d|moe (bench_conv_moe.c): whether argv asks for one of them. */
bool bp_bench_conv_moe_wants(int argc, char **argv);
int bp_bench_conv_moe(int argc, char **argv);

#endif
