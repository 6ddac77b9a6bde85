/* backplane serve: an OpenAI-compatible HTTP server over one context of N sequences.
 *
 *   serve_main.c    options, model and context, signals, shutdown with the ledger check
 *   serve_engine.c  the engine thread: N slots, each a sequence of the context; every step one
 *                   bp_context_decode over every active slot (a decoding slot's next token, a
 *                   prefilling slot's next chunk of its prompt); requests join at the next step
 *   serve_http.c    libmicrohttpd: routes, limits, API key, streaming (server-sent events)
 *   serve_json.c    cJSON: request fields checked by type, responses and chunks built
 *
 * The HTTP threads (one per connection) and the engine share `serve_request`s under the
 * engine's mutex: the engine appends text and log-probabilities and sets `done`; the
 * connection sends what is new and sets `cancelled` when its client goes away. */
#ifndef BP_SERVE_H
#define BP_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backplane.h"
#include "cli_common.h"

enum { SERVE_MAX_STOPS = 4, SERVE_MAX_TOP_LOGPROBS = 20 };

typedef struct serve_logprob {
    char *text;  /* the token's piece (malloc'ed) */
    size_t len;
    double logprob;
    int n_top;
    struct {
        char *text;
        size_t len;
        double logprob;
    } top[SERVE_MAX_TOP_LOGPROBS];
} serve_logprob;

typedef struct serve_request {
    /* what was asked (set before submission, then read-only) */
    bool chat, stream, include_usage;
    int32_t *prompt;
    int64_t n_prompt;
    bp_sampler_params sp;
    int64_t max_tokens;          /* <= 0: until the context is full */
    char *stops[SERVE_MAX_STOPS];
    int n_stops;
    bool logprobs;
    int top_logprobs;
    bool ignore_eos;             /* an end-of-generation token is generated like any other */
    bp_token *bias_ids;
    float *bias;
    int32_t n_bias;
    long long id;
    long long created;
    /* what came out, under the engine's mutex */
    pthread_cond_t cv;
    bp_cli_buf text;             /* shown text so far */
    size_t text_sent;
    serve_logprob *lp;
    int64_t n_lp, lp_cap, lp_sent;
    int64_t n_gen;
    bool started;                /* given a slot */
    bool done;
    const char *finish;          /* "stop", "length", or NULL while running */
    char error[256];             /* set when the engine failed it */
    bool cancelled;              /* the client went away */
    int refs;                    /* the connection and the engine */
} serve_request;

typedef struct serve_engine serve_engine;

typedef struct serve_config {
    int parallel;       /* slots */
    int64_t ctx;        /* positions per slot */
    bp_kind kv_kind;
    int64_t chunk;      /* prompt tokens a step prefills, over every slot */
    int queue;          /* requests waiting for a slot before 503 */
} serve_config;

/* serve_engine.c */
bp_status serve_engine_start(bp_model *m, const bp_tokenizer *tok, const serve_config *cfg, serve_engine **out);
/* Stop the thread: every request still queued or running ends with an error, its waiters woken. */
void serve_engine_stop(serve_engine *e);
void serve_engine_free(serve_engine *e);
/* Queue r (refs becomes 2); false when the queue is full (503) or the engine is stopping. */
bool serve_engine_submit(serve_engine *e, serve_request *r);
/* Drop the connection's reference (cancelling r when it is not done). */
void serve_engine_release(serve_engine *e, serve_request *r);
pthread_mutex_t *serve_engine_mutex(serve_engine *e);
int64_t serve_engine_ctx(const serve_engine *e);
void serve_engine_counts(serve_engine *e, int *idle, int *busy, int *queued);
serve_request *serve_request_new(void);
void serve_request_free(serve_request *r);

/* serve_http.c */
typedef struct serve_http serve_http;
typedef struct serve_http_config {
    const char *host;
    int port;
    const char *api_key;        /* NULL: none */
    const char *model_id;
    size_t max_body;            /* bytes; larger is 413 */
    unsigned conn_limit;        /* connections at once */
    unsigned timeout_s;         /* an idle connection is closed after this */
} serve_http_config;
bp_status serve_http_start(const serve_http_config *cfg, serve_engine *e, bp_model *m, const bp_tokenizer *tok,
                           serve_http **out);
int serve_http_port(const serve_http *h);
void serve_http_stop(serve_http *h);

#endif
