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

/* A backend asked for by name is on, CPU implementations of its API (lavapipe, PoCL) included,
 * as BACKPLANE_<NAME>=1 would turn it on; call before the backend is first probed. */
void bp_cli_backend_on(const char *name);

bool bp_cli_take_fallbacks(int *argc, char **argv);
/* Set by the CLI fuzz target (tests/fuzz/fuzz_cli.c): a command that writes files or runs for
 * seconds (matvec, verify, bench) returns 0 once its arguments are parsed and checked. */
extern bool bp_cli_dry_run;
/* --strict: every command that runs ops accepts it (matvec, verify, bench). Removes the flag
 * from argv like bp_cli_take_fallbacks and turns strict mode on (bp_set_strict): a fallback
 * becomes the op's error (BACKPLANE_STRICT=1 does the same). */
bool bp_cli_take_strict(int *argc, char **argv);
/* --backend NAME: run everything there (bp_set_backend_preference FORCE; a CPU implementation
 * such as lavapipe is turned on, as BACKPLANE_<NAME>=1 does). Removed from argv; 1 when found, 0
 * when absent, -1 (after saying why on stderr) when NAME cannot run here. */
int bp_cli_take_backend(int *argc, char **argv, const char *cmd);
void bp_cli_print_fallbacks(void);
/* --no-memory-check (run, perplexity, bench MODEL): removed from argv like the flags above; turns
 * off bp_context_create's check of the KV cache against the memory available. */
bool bp_cli_take_no_memory_check(int *argc, char **argv);
/* --profile, the same way: ops' calls, time, GB/s and GFLOP/s per op and backend
 * (bp_stats_report) to stderr, when the flag was given. Commands that run ops take it. */
bool bp_cli_take_profile(int *argc, char **argv);
void bp_cli_print_profile(void);
/* backplane bench --crossover (bench_crossover.c): argv[0] is "--crossover". */
int bp_bench_crossover(int argc, char **argv);
/* ---- bytes as printed (cli_text.c) -------------------------------------------------------- */
/* JSON string literals valid for any bytes: well-formed UTF-8 as is, each maximal ill-formed
 * subpart as one U+FFFD (as Python's errors="replace"), control characters (NUL included)
 * escaped. _str: a C string (NULL writes null); _bytes: n bytes, NULs included; _hex: the exact
 * bytes as a hex string. */
void bp_cli_json_str(FILE *f, const char *s);
void bp_cli_json_bytes(FILE *f, const char *s, size_t n);
void bp_cli_json_hex(FILE *f, const char *s, size_t n);
/* Length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629), 0 when ill-formed. */
size_t bp_cli_utf8_seq(const unsigned char *s, size_t n);
bool bp_cli_utf8_valid(const char *s, size_t n);
/* A growable byte buffer (zero-initialise; free(p) when done). */
typedef struct bp_cli_buf {
    char *p;
    size_t len, cap;
} bp_cli_buf;
/* Append n bytes (NUL-terminated after len); false when out of memory. */
bool bp_cli_buf_add(bp_cli_buf *b, const char *s, size_t n);

/* ---- strict option values, checked input and output (cli_args.c) ---------------------------- */
/* The whole of v is a decimal integer in lo..hi (a float: a finite number; u64: no sign), else
 * "backplane CMD: OPT 'V': expected ..." on stderr and false. */
bool bp_cli_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);
bool bp_cli_u64(const char *cmd, const char *opt, const char *v, unsigned long long *out);
bool bp_cli_float(const char *cmd, const char *opt, const char *v, double lo, double hi, float *out);
/* A text input read whole (a FIFO or pipe as a stream; a directory or a read error refused by
 * name on stderr): malloc'ed, NUL-terminated (the NUL not counted in *len), or NULL. */
char *bp_cli_read_text(const char *cmd, const char *path, size_t *len);
/* A binary input that must be a regular file, opened without waiting on a FIFO; NULL with the
 * error on stderr. */
FILE *bp_cli_open_regular(const char *cmd, const char *path, const char *what);
/* rc, or 1 when standard output could not be written (flushed here; a full disk, a closed
 * pipe), with the error on stderr. main() passes every command's status through it. */
int bp_cli_finish_output(int rc);

/* ---- benches of ops in their own files (bench_conv_moe.c), helpers from cmd_bench.c -------- */
#include "backplane.h"
/* Token id's piece into b->p[0..*len), b grown to fit whatever its length (b->len unused). */
bp_status bp_cli_piece(const bp_tokenizer *tok, bp_token id, bool special, bp_cli_buf *b, size_t *len);
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
