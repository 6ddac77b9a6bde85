/* Requests and responses as JSON (cJSON): each known field checked by type (a wrong type is a
 * 400 naming the field; unknown fields are ignored, as OpenAI's API does), the prompt built
 * (a chat through the model family's format) and tokenized; responses, stream chunks and
 * errors in OpenAI's shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "serve_json.h"

static int bad(char *err, size_t n, const char *fmt, const char *field) {
    snprintf(err, n, fmt, field);
    return 400;
}

/* A number field: absent leaves *out; else it must be a number in [lo, hi]. */
static int num(const cJSON *o, const char *k, double lo, double hi, double *out, char *err, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return bad(err, n, "'%s' must be a number", k);
    if (v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(err, n, "'%s' is %g, outside [%g, %g]", k, v->valuedouble, lo, hi);
        return 400;
    }
    *out = v->valuedouble;
    return 0;
}

static int integer(const cJSON *o, const char *k, double lo, double hi, long long *out, char *err, size_t n) {
    double d = (double)*out;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    int rc = num(o, k, lo, hi, &d, err, n);
    if (rc) return rc;
    if (v && !cJSON_IsNull(v) && d != floor(d)) return bad(err, n, "'%s' must be an integer", k);
    *out = (long long)d;
    return 0;
}

static int boolean(const cJSON *o, const char *k, bool *out, char *err, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return bad(err, n, "'%s' must be a boolean", k);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts (joined). */
static char *content_of(const cJSON *c, int i, char *err, size_t n) {
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) {
        snprintf(err, n, "'messages[%d].content' must be a string or an array of text parts", i);
        return NULL;
    }
    bp_cli_buf b = {0};
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type"),
                    *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) {
            snprintf(err, n, "'messages[%d].content': only parts of type 'text' with a string 'text' are supported", i);
            free(b.p);
            return NULL;
        }
        bp_cli_buf_add(&b, tx->valuestring, strlen(tx->valuestring));
    }
    return b.p ? b.p : strdup("");
}

/* The chat's text in the model family's format. */
static char *chat_text(const cJSON *msgs, const serve_json_ctx *x, char *err, size_t n) {
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        snprintf(err, n, "'messages' must be a non-empty array");
        return NULL;
    }
    int count = cJSON_GetArraySize(msgs), i = 0;
    const char **roles = calloc((size_t)count, sizeof *roles);
    char **texts = calloc((size_t)count, sizeof *texts);
    char *out = NULL;
    if (!roles || !texts) goto done;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            snprintf(err, n, "'messages[%d]' must be an object with a string 'role'", i);
            goto done;
        }
        roles[i] = role->valuestring;
        if (!(texts[i] = content_of(cJSON_GetObjectItemCaseSensitive(m, "content"), i, err, n))) goto done;
        i++;
    }
    size_t cap = 256 * (size_t)count + 256, len = 0;
    for (int k = 0; k < count; k++) cap += strlen(texts[k]);
    out = malloc(cap);
    if (out && bp_model_chat_format_turns(x->model, x->tok, roles, (const char *const *)texts, (size_t)count, out, cap,
                                          &len, NULL)) {
        snprintf(err, n, "messages: %s", bp_last_error());
        free(out);
        out = NULL;
    }
done:
    for (int k = 0; texts && k < count; k++) free(texts[k]);
    free(texts);
    free(roles);
    return out;
}

static int stops_of(const cJSON *o, serve_request *r, char *err, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) {
        if (v->valuestring[0]) r->stops[r->n_stops++] = strdup(v->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(v)) return bad(err, n, "'%s' must be a string or an array of strings", "stop");
    if (cJSON_GetArraySize(v) > SERVE_MAX_STOPS) return bad(err, n, "'%s' holds at most 4 strings", "stop");
    const cJSON *s;
    cJSON_ArrayForEach(s, v) {
        if (!cJSON_IsString(s)) return bad(err, n, "'%s' must be a string or an array of strings", "stop");
        if (s->valuestring[0]) r->stops[r->n_stops++] = strdup(s->valuestring);
    }
    return 0;
}

static int bias_of(const cJSON *o, serve_request *r, int32_t n_vocab, char *err, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "logit_bias");
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsObject(v)) return bad(err, n, "'%s' must be an object of token id to number", "logit_bias");
    int count = cJSON_GetArraySize(v);
    r->bias_ids = calloc((size_t)count + 1, sizeof *r->bias_ids);
    r->bias = calloc((size_t)count + 1, sizeof *r->bias);
    if (!r->bias_ids || !r->bias) return bad(err, n, "no memory for '%s'", "logit_bias");
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        char *end;
        long id = strtol(e->string, &end, 10);
        if (*end || end == e->string || id < 0 || id >= n_vocab || !cJSON_IsNumber(e) || e->valuedouble < -100 ||
            e->valuedouble > 100) {
            snprintf(err, n, "'logit_bias': key '%.40s' must be a token id in 0..%d with a number in [-100, 100]",
                     e->string, (int)n_vocab - 1);
            return 400;
        }
        r->bias_ids[r->n_bias] = (bp_token)id;
        r->bias[r->n_bias++] = e->valuedouble <= -100 ? -INFINITY : (float)e->valuedouble;
    }
    return 0;
}

int serve_json_request(const char *body, size_t len, bool chat, const serve_json_ctx *x, serve_request *r, char *err,
                       size_t n) {
    cJSON *o = cJSON_ParseWithLength(body, len);
    if (!o) return bad(err, n, "the body is not valid JSON%s", "");
    int rc = 0;
    char *text = NULL;
    if (!cJSON_IsObject(o)) {
        rc = bad(err, n, "the body must be a JSON object%s", "");
        goto out;
    }
    r->chat = chat;
    r->sp = bp_sampler_default_params();
    r->sp.temperature = 1.0f, r->sp.top_p = 1.0f, r->sp.top_k = 0, r->sp.min_p = 0, r->sp.repeat_last_n = 0;
    double temp = 1.0, top_p = 1.0, fp = 0, pp = 0, top_k = 0, min_p = 0;
    long long max_tokens = chat ? -1 : 16, seed = -1, n_choices = 1, top_lp = 0;
    bool want_lp = false;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model)) rc = bad(err, n, "'%s' must be a string", "model");
    if (!rc) rc = num(o, "temperature", 0, 2, &temp, err, n);
    if (!rc) rc = num(o, "top_p", 0, 1, &top_p, err, n);
    if (!rc) rc = num(o, "top_k", 0, 1e9, &top_k, err, n);
    if (!rc) rc = num(o, "min_p", 0, 1, &min_p, err, n);
    if (!rc) rc = num(o, "frequency_penalty", -2, 2, &fp, err, n);
    if (!rc) rc = num(o, "presence_penalty", -2, 2, &pp, err, n);
    if (!rc) rc = integer(o, "max_tokens", -1, 1e9, &max_tokens, err, n);
    if (!rc && chat) rc = integer(o, "max_completion_tokens", -1, 1e9, &max_tokens, err, n);
    if (!rc) rc = integer(o, "seed", -9.2e18, 9.2e18, &seed, err, n);
    if (!rc) rc = integer(o, "n", 1, 1, &n_choices, err, n);
    if (!rc) rc = boolean(o, "stream", &r->stream, err, n);
    if (!rc) rc = boolean(o, "ignore_eos", &r->ignore_eos, err, n); /* llama-server's extension, for benchmarks */
    if (!rc && chat) {
        rc = boolean(o, "logprobs", &want_lp, err, n);
        if (!rc) rc = integer(o, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &top_lp, err, n);
    } else if (!rc) {
        top_lp = -1;
        rc = integer(o, "logprobs", 0, 5, &top_lp, err, n);
        want_lp = top_lp >= 0;
        if (top_lp < 0) top_lp = 0;
    }
    if (!rc) {
        const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
        if (so && !cJSON_IsNull(so) && !cJSON_IsObject(so)) rc = bad(err, n, "'%s' must be an object", "stream_options");
        else if (so) rc = boolean(so, "include_usage", &r->include_usage, err, n);
    }
    if (!rc) rc = stops_of(o, r, err, n);
    if (!rc) rc = bias_of(o, r, x->n_vocab, err, n);
    if (rc) goto out;
    r->sp.temperature = (float)temp, r->sp.top_p = (float)top_p, r->sp.top_k = (int32_t)top_k;
    r->sp.min_p = (float)min_p, r->sp.frequency_penalty = (float)fp, r->sp.presence_penalty = (float)pp;
    if (fp != 0 || pp != 0) r->sp.repeat_last_n = 64;
    r->sp.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)r;
    r->max_tokens = max_tokens;
    r->logprobs = want_lp, r->top_logprobs = (int)top_lp;
    if (chat) {
        if (!(text = chat_text(cJSON_GetObjectItemCaseSensitive(o, "messages"), x, err, n))) {
            rc = 400;
            goto out;
        }
    } else {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
        if (!cJSON_IsString(p)) {
            rc = bad(err, n, "'%s' must be a string (or an array of one string)", "prompt");
            goto out;
        }
        text = strdup(p->valuestring);
    }
    size_t n_ids = 0;
    bp_token *ids = NULL;
    if (!text || bp_tokenizer_encode_alloc(x->tok, text, strlen(text), true, chat, &ids, &n_ids)) {
        rc = bad(err, n, "the prompt cannot be tokenized: %s", bp_last_error());
        goto out;
    }
    r->prompt = malloc((n_ids ? n_ids : 1) * sizeof *r->prompt); /* freed with free(), as the request is */
    if (r->prompt && n_ids) memcpy(r->prompt, ids, n_ids * sizeof *ids);
    bp_tokens_free(ids);
    if (!r->prompt) {
        rc = bad(err, n, "no memory for the prompt%s", "");
        goto out;
    }
    r->n_prompt = (int64_t)n_ids;
    if (r->n_prompt == 0) {
        rc = bad(err, n, "the prompt is empty%s", "");
    } else if (r->n_prompt >= x->n_ctx) {
        snprintf(err, n,
                 "the prompt is %lld tokens, and a request's context holds %lld (--ctx): the prompt and at least one "
                 "generated token must fit",
                 (long long)r->n_prompt, (long long)x->n_ctx);
        rc = 400;
    }
out:
    free(text);
    cJSON_Delete(o);
    return rc;
}

/* ---- responses ------------------------------------------------------------------------------ */

char *serve_json_error(int status, const char *message) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    const char *type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 503 ? "server_busy"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* A string value from bytes that may not be valid UTF-8 alone (a piece of a character): the
 * bytes' well-formed UTF-8, each ill-formed part, and a NUL byte (a model's <0x00> token: a
 * cJSON string ends at NUL, which cut a whole reply short there), as U+FFFD. */
static cJSON *str_of(const char *p, size_t n) {
    bp_cli_buf b = {0};
    for (size_t i = 0; i < n;) {
        size_t k = p[i] ? bp_cli_utf8_seq((const unsigned char *)p + i, n - i) : 0;
        if (k) bp_cli_buf_add(&b, p + i, k), i += k;
        else bp_cli_buf_add(&b, "\xEF\xBF\xBD", 3), i++;
    }
    cJSON *s = cJSON_CreateString(b.p ? b.p : "");
    free(b.p);
    return s;
}

static cJSON *bytes_of(const char *p, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)p[i]));
    return a;
}

/* Log-probabilities [from, to) of r: chat's {"content": [...]} or completions' four lists. */
static cJSON *logprobs_json(const serve_request *r, int64_t from, int64_t to) {
    cJSON *o = cJSON_CreateObject();
    if (r->chat) {
        cJSON *content = cJSON_AddArrayToObject(o, "content");
        for (int64_t i = from; i < to; i++) {
            const serve_logprob *l = &r->lp[i];
            cJSON *e = cJSON_CreateObject(), *top;
            cJSON_AddItemToObject(e, "token", str_of(l->text, l->len));
            cJSON_AddNumberToObject(e, "logprob", l->logprob);
            cJSON_AddItemToObject(e, "bytes", bytes_of(l->text, l->len));
            top = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int k = 0; k < l->n_top; k++) {
                cJSON *t = cJSON_CreateObject();
                cJSON_AddItemToObject(t, "token", str_of(l->top[k].text, l->top[k].len));
                cJSON_AddNumberToObject(t, "logprob", l->top[k].logprob);
                cJSON_AddItemToObject(t, "bytes", bytes_of(l->top[k].text, l->top[k].len));
                cJSON_AddItemToArray(top, t);
            }
            cJSON_AddItemToArray(content, e);
        }
        return o;
    }
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs"),
          *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    size_t off = 0;
    for (int64_t i = 0; i < from; i++) off += r->lp[i].len;
    for (int64_t i = from; i < to; i++) {
        const serve_logprob *l = &r->lp[i];
        cJSON_AddItemToArray(toks, str_of(l->text, l->len));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(l->logprob));
        cJSON *t = cJSON_CreateObject();
        for (int k = 0; k < l->n_top; k++) {
            cJSON *key = str_of(l->top[k].text, l->top[k].len);
            if (!cJSON_GetObjectItemCaseSensitive(t, key->valuestring))
                cJSON_AddNumberToObject(t, key->valuestring, l->top[k].logprob);
            cJSON_Delete(key);
        }
        cJSON_AddItemToArray(tops, t);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += l->len;
    }
    return o;
}

static cJSON *envelope(const serve_request *r, const char *model_id, bool chunk) {
    cJSON *o = cJSON_CreateObject();
    char id[48];
    snprintf(id, sizeof id, "%s-%lld", r->chat ? "chatcmpl" : "cmpl", r->id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", r->chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                 : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)r->created);
    cJSON_AddStringToObject(o, "model", model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "backplane");
    return o;
}

static void add_usage(cJSON *o, const serve_request *r) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)r->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(r->n_prompt + r->n_gen));
}

static char *print(cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *serve_json_response(const serve_request *r, const char *model_id) {
    cJSON *o = envelope(r, model_id, false), *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (r->chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddItemToObject(m, "content", str_of(r->text.p ? r->text.p : "", r->text.len));
    } else {
        cJSON_AddItemToObject(c, "text", str_of(r->text.p ? r->text.p : "", r->text.len));
    }
    if (r->logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs_json(r, 0, r->n_lp));
    else cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", r->finish ? r->finish : "stop");
    cJSON_AddItemToArray(ch, c);
    add_usage(o, r);
    return print(o);
}

char *serve_json_chunk(const serve_request *r, const char *model_id, const char *text, size_t n, int64_t lp_from,
                       int64_t lp_to, bool first, const char *finish) {
    cJSON *o = envelope(r, model_id, true), *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (r->chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (n || (first && !finish)) cJSON_AddItemToObject(d, "content", str_of(text, n));
    } else {
        cJSON_AddItemToObject(c, "text", str_of(text, n));
    }
    if (r->logprobs && lp_to > lp_from) cJSON_AddItemToObject(c, "logprobs", logprobs_json(r, lp_from, lp_to));
    else cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(ch, c);
    return print(o);
}

char *serve_json_usage_chunk(const serve_request *r, const char *model_id) {
    cJSON *o = envelope(r, model_id, true);
    cJSON_AddArrayToObject(o, "choices");
    add_usage(o, r);
    return print(o);
}

char *serve_json_models(const char *model_id, long long created) {
    cJSON *o = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)created);
    cJSON_AddStringToObject(m, "owned_by", "backplane");
    cJSON_AddItemToArray(d, m);
    return print(o);
}

char *serve_json_health(int idle, int busy, int queued) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddNumberToObject(o, "slots_idle", idle);
    cJSON_AddNumberToObject(o, "slots_processing", busy);
    cJSON_AddNumberToObject(o, "requests_queued", queued);
    return print(o);
}
