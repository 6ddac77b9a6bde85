/* HTTP over libmicrohttpd, one thread per connection (a connection's thread may wait for the
 * engine), at most conn_limit connections, each closed after timeout_s idle seconds:
 *
 *   POST /v1/chat/completions, /v1/completions   (stream: server-sent events)
 *   GET  /v1/models, /health
 *
 * Every request but /health needs the API key when one is set. A body over max_body is read
 * to its end and discarded, then answered 413; a body that is not UTF-8 or not JSON, or a field
 * of the wrong type, 400; a full queue 503 with Retry-After. While a connection waits for the
 * engine it watches its socket: a client that hangs up cancels its request, which frees its
 * slot at the engine's next step. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "core/error.h"
#include "serve_json.h"

struct serve_http {
    struct MHD_Daemon *d;
    serve_http_config cfg;
    serve_engine *e;
    serve_json_ctx jx;
    long long next_id;
    pthread_mutex_t id_mu;
    long long started;
};

typedef struct conn {
    serve_http *h;
    bp_cli_buf body;
    size_t body_bytes;
    bool too_big;
    serve_request *r;   /* submitted: the connection's reference */
    MHD_socket fd;
    bp_cli_buf out;     /* SSE bytes not yet handed to MHD */
    size_t out_off;
    int64_t lp_sent;
    bool first, ended;
} conn;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *json, const char *retry_after) {
    if (!json) json = strdup("{}");
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(json);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    if (retry_after) MHD_add_response_header(resp, "Retry-After", retry_after);
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result fail(struct MHD_Connection *c, unsigned status, const char *msg) {
    return reply(c, status, serve_json_error((int)status, msg), status == 503 ? "1" : NULL);
}

/* The client hung up (or the socket failed). */
static bool gone(MHD_socket fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Under the mutex: wait until r has something new or is done; false when the client left. */
static bool wait_news(conn *k, pthread_mutex_t *mu) {
    serve_request *r = k->r;
    while (!r->done && r->text_sent == r->text.len && k->lp_sent == r->n_lp) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&r->cv, mu, &ts);
        if (!r->done && gone(k->fd)) {
            r->cancelled = true;
            return false;
        }
    }
    return true;
}

static void sse(conn *k, char *json) {
    if (!json) return;
    bp_cli_buf_add(&k->out, "data: ", 6);
    bp_cli_buf_add(&k->out, json, strlen(json));
    bp_cli_buf_add(&k->out, "\n\n", 2);
    free(json);
}

/* The stream: chunks as the engine makes them, the finish chunk, usage, [DONE]. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    conn *k = cls;
    if (k->out_off == k->out.len) {
        k->out.len = k->out_off = 0;
        if (k->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_t *mu = serve_engine_mutex(k->h->e);
        pthread_mutex_lock(mu);
        serve_request *r = k->r;
        if (!wait_news(k, mu)) {
            pthread_mutex_unlock(mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        const char *id = k->h->cfg.model_id;
        if (r->text_sent < r->text.len || k->lp_sent < r->n_lp || k->first) {
            sse(k, serve_json_chunk(r, id, r->text.p + r->text_sent, r->text.len - r->text_sent, k->lp_sent, r->n_lp,
                                    k->first, NULL));
            r->text_sent = r->text.len, k->lp_sent = r->n_lp, k->first = false;
        }
        if (r->done) {
            if (r->finish) {
                sse(k, serve_json_chunk(r, id, "", 0, 0, 0, false, r->finish));
                if (r->include_usage) sse(k, serve_json_usage_chunk(r, id));
            } else {
                sse(k, serve_json_error(500, r->error));
            }
            bp_cli_buf_add(&k->out, "data: [DONE]\n\n", 14);
            k->ended = true;
        }
        pthread_mutex_unlock(mu);
    }
    size_t n = k->out.len - k->out_off < max ? k->out.len - k->out_off : max;
    memcpy(buf, k->out.p + k->out_off, n);
    k->out_off += n;
    return (ssize_t)n;
}

static bool authorized(serve_http *h, struct MHD_Connection *c) {
    if (!h->cfg.api_key) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!a || strncmp(a, "Bearer ", 7)) return false;
    a += 7;
    size_t n = strlen(h->cfg.api_key), m = strlen(a);
    unsigned diff = n != m;
    for (size_t i = 0; i < m; i++) diff |= (unsigned)(a[i] ^ h->cfg.api_key[i % (n ? n : 1)]); /* no early exit */
    return diff == 0;
}

static enum MHD_Result completion(serve_http *h, conn *k, struct MHD_Connection *c, bool chat) {
    if (!bp_cli_utf8_valid(k->body.p ? k->body.p : "", k->body.len))
        return fail(c, 400, "the body is not valid UTF-8");
    serve_request *r = serve_request_new();
    if (!r) return fail(c, 500, "out of memory");
    char err[512];
    int status = serve_json_request(k->body.p ? k->body.p : "", k->body.len, chat, &h->jx, r, err, sizeof err);
    if (status) {
        serve_request_free(r);
        return fail(c, (unsigned)status, err);
    }
    pthread_mutex_lock(&h->id_mu);
    r->id = ++h->next_id;
    pthread_mutex_unlock(&h->id_mu);
    r->created = (long long)time(NULL);
    if (!serve_engine_submit(h->e, r)) {
        serve_request_free(r);
        return fail(c, 503, "every slot is busy and the queue is full: retry later");
    }
    k->r = r;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    k->fd = ci ? ci->connect_fd : MHD_INVALID_SOCKET;
    if (r->stream) {
        k->first = true;
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, k, NULL);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return rc;
    }
    pthread_mutex_t *mu = serve_engine_mutex(h->e);
    pthread_mutex_lock(mu);
    bool here = true;
    while (here && !r->done) {
        r->text_sent = r->text.len, k->lp_sent = r->n_lp; /* the whole reply goes at the end */
        here = wait_news(k, mu);
    }
    char *json = NULL;
    if (here && r->finish) json = serve_json_response(r, h->cfg.model_id);
    char msg[300];
    snprintf(msg, sizeof msg, "%s", r->error);
    pthread_mutex_unlock(mu);
    if (!here) return MHD_NO; /* the client left: close */
    if (!json) return fail(c, 500, msg);
    return reply(c, 200, json, NULL);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    serve_http *h = cls;
    conn *k = *con_cls;
    if (!k) {
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        k->h = h;
        *con_cls = k;
        return MHD_YES;
    }
    if (*upload_size) { /* the body, kept up to max_body and counted past it */
        k->body_bytes += *upload_size;
        if (k->body_bytes > h->cfg.max_body) {
            k->too_big = true;
            free(k->body.p);
            k->body = (bp_cli_buf){0};
        } else if (!bp_cli_buf_add(&k->body, upload, *upload_size)) {
            k->too_big = true;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health") && get) {
        int idle, busy, queued;
        serve_engine_counts(h->e, &idle, &busy, &queued);
        return reply(c, 200, serve_json_health(idle, busy, queued), NULL);
    }
    if (!authorized(h, c)) return fail(c, 401, "a valid API key is needed: 'Authorization: Bearer KEY'");
    if (k->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "the body is %zu bytes, more than the limit of %zu (--max-body)", k->body_bytes,
                 h->cfg.max_body);
        return fail(c, 413, msg);
    }
    if (!strcmp(url, "/v1/models") && get) return reply(c, 200, serve_json_models(h->cfg.model_id, h->started), NULL);
    if (!strcmp(url, "/v1/chat/completions") && post) return completion(h, k, c, true);
    if (!strcmp(url, "/v1/completions") && post) return completion(h, k, c, false);
    char msg[320];
    snprintf(msg, sizeof msg, "no route %s %.120s (POST /v1/chat/completions, POST /v1/completions, GET /v1/models, "
             "GET /health)", method, url);
    return fail(c, 404, msg);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)c, (void)why;
    serve_http *h = cls;
    conn *k = *con_cls;
    if (!k) return;
    if (k->r) serve_engine_release(h->e, k->r);
    free(k->body.p);
    free(k->out.p);
    free(k);
    *con_cls = NULL;
}

bp_status serve_http_start(const serve_http_config *cfg, serve_engine *e, bp_model *m, const bp_tokenizer *tok,
                           serve_http **out) {
    *out = NULL;
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return bp_fail(BP_E_NOMEM, "serve: no memory");
    h->cfg = *cfg, h->e = e;
    bp_model_info info;
    bp_model_get_info(m, &info);
    h->jx = (serve_json_ctx){.model = m, .tok = tok, .n_vocab = (int32_t)info.n_vocab, .n_ctx = serve_engine_ctx(e)};
    h->started = (long long)time(NULL);
    pthread_mutex_init(&h->id_mu, NULL);
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)cfg->port)};
    const struct sockaddr *sa = (const struct sockaddr *)&a4;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (inet_pton(AF_INET, cfg->host, &a4.sin_addr) != 1) {
        if (inet_pton(AF_INET6, cfg->host, &a6.sin6_addr) != 1) {
            free(h);
            return bp_fail(BP_E_INVAL, "serve: --host '%s' is not an IPv4 or IPv6 address", cfg->host);
        }
        sa = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    }
    h->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_CONNECTION_LIMIT, cfg->conn_limit, MHD_OPTION_CONNECTION_TIMEOUT,
                            cfg->timeout_s, MHD_OPTION_NOTIFY_COMPLETED, completed, h,
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 * 1024), MHD_OPTION_END);
    if (!h->d) {
        pthread_mutex_destroy(&h->id_mu);
        free(h);
        return bp_fail(BP_E_IO, "serve: cannot listen on %s port %d (in use, or not an address here)", cfg->host,
                       cfg->port);
    }
    *out = h;
    return BP_OK;
}

int serve_http_port(const serve_http *h) {
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? (int)i->port : h->cfg.port;
}

void serve_http_stop(serve_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->id_mu);
    free(h);
}
