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

#endif
