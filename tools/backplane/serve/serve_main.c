/* backplane serve MODEL.gguf: options, the model and its engine, the HTTP server; SIGTERM or
 * SIGINT stops it cleanly (running requests end with an error, connections close) and the
 * allocation counts are checked: a block of the library's allocator or a device allocation
 * live after the engine is freed that was not live before serving began is a leak, reported
 * and exit status 3 (ASan's leak check covers the server's own malloc'ed memory). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "core/alloc.h"
#include "cpu/cpu.h"
#include "model_cli.h"
#include "serve.h"

static int usage(FILE *f, int rc) {
    fprintf(f,
            "usage: backplane serve MODEL.gguf [--host ADDR] [--port N] [--parallel N] [--ctx N] [--kv-kind KIND]\n"
            "                       [--api-key KEY] [--chunk N] [--queue N] [--max-body BYTES] [--conn-limit N]\n"
            "                       [--timeout S] [--threads N]\n"
            "  An OpenAI-compatible server: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,\n"
            "  GET /health. Every step decodes all active requests in one batch (continuous batching).\n"
            "  --host ADDR      address to listen on (default 127.0.0.1: this machine only)\n"
            "  --port N         port (default 8080; 0: any free one, printed on stderr)\n"
            "  --parallel N     requests decoded at once, each a sequence of the context (default 4)\n"
            "  --ctx N          positions per request: prompt + reply (default 2048, at most the model's)\n"
            "  --kv-kind KIND   KV cache kind (default F16; as `run --kv-kind`)\n"
            "  --api-key KEY    require 'Authorization: Bearer KEY' (env BACKPLANE_API_KEY; /health is open)\n"
            "  --chunk N        prompt tokens prefilled per step over all requests (default 128)\n"
            "  --queue N        requests waiting for a slot before 503 (default 64)\n"
            "  --max-body BYTES largest request body (default 1048576; larger: 413)\n"
            "  --conn-limit N   connections at once (default 256); --timeout S: idle ones close (default 30)\n"
            "  --threads N      CPU threads (default: BACKPLANE_THREADS or every CPU)\n");
    return rc;
}

static bool opt_int(const char *a, const char *v, long long lo, long long hi, long long *out) {
    return bp_cli_int("serve", a, v, lo, hi, out);
}

int bp_cmd_serve(int argc, char **argv) {
    const char *path = NULL, *host = "127.0.0.1", *key = getenv("BACKPLANE_API_KEY");
    long long port = 8080, parallel = 4, ctx = 2048, chunk = 128, queue = 64, max_body = 1 << 20, conns = 256,
              timeout = 30, threads = 0;
    bp_kind kv = BP_KIND_F16;
    if (key && !*key) key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout, 0);
        if (a[0] != '-') {
            if (path) return usage(stderr, 2);
            path = a;
            continue;
        }
        if (!v) {
            fprintf(stderr, "backplane serve: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--api-key")) key = v;
        else if (!strcmp(a, "--port")) ok = opt_int(a, v, 0, 65535, &port);
        else if (!strcmp(a, "--parallel")) ok = opt_int(a, v, 1, 256, &parallel);
        else if (!strcmp(a, "--ctx")) ok = opt_int(a, v, 8, 1 << 20, &ctx);
        else if (!strcmp(a, "--chunk")) ok = opt_int(a, v, 1, 8192, &chunk);
        else if (!strcmp(a, "--queue")) ok = opt_int(a, v, 1, 1 << 16, &queue);
        else if (!strcmp(a, "--max-body")) ok = opt_int(a, v, 64, 1LL << 30, &max_body);
        else if (!strcmp(a, "--conn-limit")) ok = opt_int(a, v, 2, 1 << 16, &conns);
        else if (!strcmp(a, "--timeout")) ok = opt_int(a, v, 1, 86400, &timeout);
        else if (!strcmp(a, "--threads")) ok = opt_int(a, v, 1, 1024, &threads);
        else if (!strcmp(a, "--kv-kind")) {
            const bp_kind_info *ki = bp_kind_by_name(v);
            if (!ki || !bp_kv_kind_supported(ki->kind)) {
                fprintf(stderr, "backplane serve: --kv-kind '%s' is not a KV cache kind (F16 F32 BF16 Q8_0 Q5_1 "
                        "Q5_0 IQ4_NL Q4_1 Q4_0)\n", v);
                return 2;
            }
            kv = ki->kind;
        } else {
            fprintf(stderr, "backplane serve: unknown option %s\n", a);
            return usage(stderr, 2);
        }
        if (!ok) return 2;
    }
    if (!path) return usage(stderr, 2);
    if (threads && bp_cpu_set_threads((int)threads)) return bp_cli_error("--threads", BP_E_INVAL);
    /* SIGTERM and SIGINT are taken by sigwait below: blocked before any thread starts, so none
     * of them is interrupted; a closed client socket must not kill the server either */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    bp_cli_model_session ses;
    int rc = bp_cli_model_open(path, true, &ses);
    if (rc) return rc;
    /* The process's lasting state (thread pool, kernel tables) is made by a first eval; after
     * it, the library's live blocks are the model's, and serving must leave them so. */
    bp_context *warm = NULL;
    bp_context_params wp = bp_context_default_params();
    wp.n_ctx = 8, wp.kv_kind = kv, wp.n_seq_max = 2;
    const int32_t warm_ids[2] = {0, 0};
    if (bp_context_create(ses.model, &wp, &warm) == BP_OK) {
        bp_context_eval(warm, warm_ids, 2, 1);
        bp_context_eval(warm, warm_ids, 1, 1);
        bp_context_decode(warm, &(bp_batch){.n = 2, .tokens = warm_ids, .seq = (const int32_t[]){0, 1}});
    }
    bp_context_free(warm);
    const long long live0 = bp_alloc_live();
    uint64_t dev0 = 0;
    bp_device_memory(NULL, &dev0);
    if (ctx > ses.info.n_ctx_train) {
        fprintf(stderr, "backplane serve: --ctx %lld is more than the model's training context; using %lld\n", ctx,
                (long long)ses.info.n_ctx_train);
        ctx = ses.info.n_ctx_train;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    serve_config cfg = {.parallel = (int)parallel, .ctx = ctx, .kv_kind = kv, .chunk = chunk, .queue = (int)queue};
    serve_engine *e = NULL;
    serve_http *h = NULL;
    bp_status s = serve_engine_start(ses.model, ses.tok, &cfg, &e);
    if (s) {
        bp_cli_model_close(&ses);
        return bp_cli_error("serve", s);
    }
    serve_http_config hc = {.host = host, .port = (int)port, .api_key = key, .model_id = base,
                            .max_body = (size_t)max_body, .conn_limit = (unsigned)conns, .timeout_s = (unsigned)timeout};
    if ((s = serve_http_start(&hc, e, ses.model, ses.tok, &h))) {
        serve_engine_free(e);
        bp_cli_model_close(&ses);
        return bp_cli_error("serve", s);
    }
    fprintf(stderr, "serve: listening on http://%s:%d (model %s, %d slots of %lld positions, KV %s, chunk %lld%s)\n",
            host, serve_http_port(h), base, cfg.parallel, (long long)ctx, bp_kind_lookup((uint32_t)kv)->name, chunk,
            key ? ", API key required" : "");
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "serve: %s: shutting down\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    serve_engine_stop(e); /* running requests end, their connections' waits return */
    serve_http_stop(h);
    serve_engine_free(e);
    uint64_t dev1 = 0;
    bp_device_memory(NULL, &dev1);
    const long long live1 = bp_alloc_live();
    bp_cli_model_close(&ses);
    fprintf(stderr, "serve: ledger after shutdown: %lld library blocks and %llu device allocations live (%lld and %llu "
            "before serving, the model loaded)%s\n", live1, (unsigned long long)dev1, live0, (unsigned long long)dev0,
            live1 > live0 || dev1 > dev0 ? ": LEAK" : ": clean");
    return live1 > live0 || dev1 > dev0 ? 3 : 0;
}
