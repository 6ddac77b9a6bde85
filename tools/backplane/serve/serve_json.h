/* Requests and responses as JSON (serve_json.c, over cJSON). */
#ifndef BP_SERVE_JSON_H
#define BP_SERVE_JSON_H

#include "serve.h"

typedef struct serve_json_ctx {
    bp_model *model;
    const bp_tokenizer *tok;
    int32_t n_vocab;
    int64_t n_ctx;
} serve_json_ctx;

/* Parse body[0..len) as a /v1/chat/completions (chat) or /v1/completions request into r (its
 * prompt tokenized); 0, or the HTTP status (400) with the reason in err. */
int serve_json_request(const char *body, size_t len, bool chat, const serve_json_ctx *x, serve_request *r, char *err,
                       size_t n);
/* malloc'ed JSON texts: OpenAI's error object; a whole response; one stream chunk (text[0..n)
 * new, log-probabilities [lp_from, lp_to), the role on the first, finish_reason on the last);
 * the usage chunk; /v1/models; /health. */
char *serve_json_error(int status, const char *message);
char *serve_json_response(const serve_request *r, const char *model_id);
char *serve_json_chunk(const serve_request *r, const char *model_id, const char *text, size_t n, int64_t lp_from,
                       int64_t lp_to, bool first, const char *finish);
char *serve_json_usage_chunk(const serve_request *r, const char *model_id);
char *serve_json_models(const char *model_id, long long created);
char *serve_json_health(int idle, int busy, int queued);

#endif
