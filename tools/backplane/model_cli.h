/* What `run` and `perplexity` share (model_cli.c): a loaded model with its tokenizer, and the
 * closing report. */
#ifndef BP_MODEL_CLI_H
#define BP_MODEL_CLI_H

#include <stdio.h>

#include "backplane.h"

typedef struct bp_cli_model_session {
    bp_model *model;
    bp_tokenizer *tok;
    bp_model_info info;
    double load_seconds;
} bp_cli_model_session;

/* Load path (a progress line on stderr when show_progress) and its tokenizer; 0 or an exit
 * status with the error printed. */
int bp_cli_model_open(const char *path, bool show_progress, bp_cli_model_session *s);
void bp_cli_model_close(bp_cli_model_session *s);
/* Resident set size in bytes; 0 when unknown. */
size_t bp_cli_rss_bytes(void);
/* Tokens/s, memory (resident = file + KV + buffers + other), per weight kind the decode and
 * prefill paths, the attention path, the fallback count; as text or one JSON object (with
 * text, the generated text). */
void bp_cli_model_report(const bp_cli_model_session *s, const bp_context *c, FILE *f, bool json, int64_t n_prompt,
                         double t_prompt, int64_t n_gen, double t_gen, const char *stop, const char *text);

#endif
