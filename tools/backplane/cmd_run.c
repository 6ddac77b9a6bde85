/* backplane run MODEL.gguf -p PROMPT: load (with a progress line), tokenize, prefill, then sample
 * and stream tokens; at the end prompt and generation tokens/s, memory, and the path summary:
 * per weight kind, which backend and kernel ran its decode and prefill matmuls, and how many ops
 * fell back. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "cpu/cpu.h"
#include "model_cli.h"
#include "plan_check.h"

typedef struct ropts {
    const char *model, *prompt;
    int n, threads;
    int64_t ctx;
    uint64_t budget; /* --device-budget, bytes */
    bp_kind kv_kind;
    bool chat, json, quiet, plan_check;
    bp_sampler_params sp;
} ropts;

static int usage(FILE *f, int rc) {
    fprintf(f,
            "usage: backplane run MODEL.gguf -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
            "                     [--repeat-penalty R] [--seed S] [--ctx N] [--kv-kind KIND] [--threads N]\n"
            "                     [--chat] [--json] [--profile] [--fallbacks] [--strict] [--no-memory-check]\n"
            "                     [--backend NAME] [--device-budget MIB] [--plan-check]\n"
            "  -p PROMPT        the prompt (BOS is added as the vocabulary says)\n"
            "  -n N             tokens to generate at most (default 128; stops early at end of generation)\n"
            "  --temp T         temperature (default 0: greedy); --top-k/--top-p/--min-p/--repeat-penalty/--seed\n"
            "                   as bp_sampler_params documents (defaults 40, 0.95, 0.05, 1.0, 0)\n"
            "  --ctx N          KV cache tokens (default: prompt + N, at most the model's training context)\n"
            "  --kv-kind KIND   KV cache kind: F16 (default), F32, BF16, Q8_0, Q5_1, Q5_0, IQ4_NL, Q4_1, Q4_0\n"
            "  --threads N      CPU threads (default: BACKPLANE_THREADS or every CPU)\n"
            "  --chat           wrap the prompt in the family's chat format (gemma, chatml, llama3, llama2, phi3)\n"
            "  --json           print one JSON object at the end instead of streaming text\n"
            "  --profile        per-op calls, time, GB/s and GFLOP/s;  --fallbacks: ops that fell back;\n"
            "  --strict         a fallback is an error (BACKPLANE_STRICT=1)\n"
            "  --backend NAME   run there (vulkan, opencl, cuda, cpu; BACKPLANE_BACKEND prefers instead): on\n"
            "                   Vulkan the whole forward pass, the KV cache and the activations stay on the device\n"
            "  --device-budget MIB  the device may hold at most this much: the last layers that fit and the\n"
            "                   output run there, the rest on the CPU (as `backplane plan --device-budget`)\n"
            "  --plan-check     at the end, the memory the run took (library heap, device ledger, resident)\n"
            "                   against `backplane plan`'s figures; exit 1 when above them\n"
            "  --no-memory-check  allocate a KV cache larger than the memory available (BACKPLANE_MEMORY_CHECK=0)\n");
    return rc;
}

static int parse(int argc, char **argv, ropts *o) {
    *o = (ropts){.n = 128, .kv_kind = BP_KIND_F16, .sp = bp_sampler_default_params()};
    o->sp.temperature = 0;
    long long x;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--chat")) o->chat = true;
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--plan-check")) o->plan_check = true;
        else if (!v && a[0] == '-') {
            fprintf(stderr, "backplane run: %s needs a value\n", a);
            return -1;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = argv[++i];
        else if (!strcmp(a, "-n")) {
            if (!bp_cli_int("run", a, argv[++i], 0, 1 << 24, &x)) return -1;
            o->n = (int)x;
        } else if (!strcmp(a, "--temp")) {
            if (!bp_cli_float("run", a, argv[++i], -1e30, 1e30, &o->sp.temperature)) return -1;
        } else if (!strcmp(a, "--top-k")) {
            if (!bp_cli_int("run", a, argv[++i], INT32_MIN, INT32_MAX, &x)) return -1;
            o->sp.top_k = (int32_t)x;
        } else if (!strcmp(a, "--top-p")) {
            if (!bp_cli_float("run", a, argv[++i], -1e30, 1e30, &o->sp.top_p)) return -1;
        } else if (!strcmp(a, "--min-p")) {
            if (!bp_cli_float("run", a, argv[++i], -1e30, 1, &o->sp.min_p)) return -1;
        } else if (!strcmp(a, "--repeat-penalty")) {
            if (!bp_cli_float("run", a, argv[++i], 1e-30, 1e30, &o->sp.repeat_penalty)) return -1;
        } else if (!strcmp(a, "--seed")) {
            unsigned long long u;
            if (!bp_cli_u64("run", a, argv[++i], &u)) return -1;
            o->sp.seed = u;
        } else if (!strcmp(a, "--ctx")) {
            if (!bp_cli_int("run", a, argv[++i], 0, 1 << 24, &x)) return -1;
            o->ctx = x;
        } else if (!strcmp(a, "--device-budget")) {
            float mb;
            if (!bp_cli_float("run", a, argv[++i], 1.0 / 1024, 1 << 30, &mb)) return -1;
            o->budget = (uint64_t)((double)mb * 1048576.0); /* MiB, fractions too (tiny models) */
        } else if (!strcmp(a, "--threads")) {
            if (!bp_cli_int("run", a, argv[++i], 0, 4096, &x)) return -1;
            o->threads = (int)x;
        } else if (!strcmp(a, "--kv-kind")) {
            const bp_kind_info *ki = bp_kind_by_name(argv[++i]);
            if (!ki) {
                fprintf(stderr, "backplane run: unknown kind '%s'\n", argv[i]);
                return -1;
            }
            o->kv_kind = ki->kind;
        } else if (a[0] != '-' && !o->model) o->model = a;
        else {
            fprintf(stderr, "backplane run: unknown option '%s'\n", a);
            return -1;
        }
    }
    if (!o->model || !o->prompt) {
        fprintf(stderr, "backplane run: need MODEL.gguf and -p PROMPT\n");
        return -1;
    }
    if (o->n < 0 || o->ctx < 0 || o->threads < 0) {
        fprintf(stderr, "backplane run: -n, --ctx and --threads must not be negative\n");
        return -1;
    }
    return 0;
}

int bp_cmd_run(int argc, char **argv) {
    bp_cli_take_fallbacks(&argc, argv);
    bp_cli_take_profile(&argc, argv);
    bp_cli_take_strict(&argc, argv);
    bp_cli_take_no_memory_check(&argc, argv);
    if (bp_cli_take_backend(&argc, argv, "run") < 0) return 2;
    ropts o;
    int p = parse(argc, argv, &o);
    if (p) return usage(p > 0 ? stdout : stderr, p > 0 ? 0 : 2);
    if (o.threads && bp_cpu_set_threads(o.threads)) return bp_cli_error("--threads", BP_E_INVAL);

    bp_plan_check pc = {0};
    if (o.plan_check) bp_plan_check_begin(&pc);
    bp_cli_model_session ses;
    int rc = bp_cli_model_open(o.model, !o.json, &ses);
    if (rc) return rc;
    bp_model_info *info = &ses.info;
    char *text = NULL;
    bp_token *ids = NULL;
    bp_sampler *smp = NULL;
    bp_context *c = NULL;
    bp_cli_buf out = {0}, piece = {0}; /* --json's text; one token's bytes */
    bp_status s;
    const char *chat_name = NULL;

    /* the prompt, wrapped as a chat turn when asked */
    const char *prompt = o.prompt;
    if (o.chat) {
        size_t len;
        bp_model_chat_format(ses.model, ses.tok, o.prompt, NULL, 0, &len, &chat_name);
        text = malloc(len + 1);
        if (!text || (s = bp_model_chat_format(ses.model, ses.tok, o.prompt, text, len + 1, &len, &chat_name))) {
            rc = bp_cli_error("chat format", text ? s : BP_E_NOMEM);
            goto out;
        }
        prompt = text;
    }
    size_t n_ids;
    if ((s = bp_tokenizer_encode_alloc(ses.tok, prompt, strlen(prompt), true, o.chat, &ids, &n_ids))) {
        rc = bp_cli_error("tokenize", s);
        goto out;
    }
    if (n_ids == 0) {
        fprintf(stderr, "backplane run: the prompt has no tokens\n");
        rc = 2;
        goto out;
    }
    /* The context: prompt + N unless --ctx says otherwise. A prompt that does not fit is an
     * error here, before any work, naming both sizes. */
    int64_t ctx = o.ctx ? o.ctx : (int64_t)n_ids + o.n;
    if (!o.ctx && ctx > info->n_ctx_train) ctx = info->n_ctx_train > (int64_t)n_ids ? info->n_ctx_train : (int64_t)n_ids;
    if ((int64_t)n_ids > ctx) {
        fprintf(stderr, "backplane run: the prompt is %zu tokens, longer than the context of %lld (--ctx)\n", n_ids,
                (long long)ctx);
        rc = 1;
        goto out;
    }
    int n_gen = o.n;
    if ((int64_t)n_ids + n_gen > ctx) {
        n_gen = (int)(ctx - (int64_t)n_ids);
        fprintf(stderr, "backplane run: the context of %lld holds %d generated tokens after the %zu of the prompt\n",
                (long long)ctx, n_gen, n_ids);
    }
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = ctx;
    cp.kv_kind = o.kv_kind;
    cp.device_budget = o.budget;
    if ((s = bp_context_create(ses.model, &cp, &c))) {
        rc = bp_cli_error("context", s);
        goto out;
    }
    if ((s = bp_sampler_create(&o.sp, (int32_t)info->n_vocab, &smp))) {
        rc = bp_cli_error("sampler", s);
        goto out;
    }
    /* Warm-up, as llama.cpp's tools do: one token evaluated and forgotten, so the first use of
     * each weight (repacking it for the decode kernels, faulting its pages) is part of loading,
     * not of the prompt's tokens/s. */
    if ((s = bp_context_eval(c, ids, 1, 1)) || (s = bp_context_truncate(c, 0))) {
        rc = bp_cli_error("warm-up", s);
        goto out;
    }
    for (size_t i = 0; i < n_ids; i++) bp_sampler_accept(smp, ids[i]);
    if (!o.json) {
        if (chat_name) fprintf(stderr, "chat format: %s\n", chat_name);
        fwrite(o.prompt, 1, strlen(o.prompt), stdout);
        if (o.chat) fputc('\n', stdout);
        fflush(stdout);
    }

    double t0 = bp_bench_now();
    if ((s = bp_context_eval(c, ids, (int64_t)n_ids, 1))) {
        rc = bp_cli_error("prompt", s);
        goto out;
    }
    double t_prompt = bp_bench_now() - t0;
    int generated = 0;
    bool eog = false;
    t0 = bp_bench_now();
    for (; generated < n_gen; generated++) {
        bp_token tok;
        if ((s = bp_sampler_sample(smp, bp_context_logits(c, 0), &tok))) {
            rc = bp_cli_error("sample", s);
            goto out;
        }
        if (bp_tokenizer_is_eog(ses.tok, tok)) {
            eog = true;
            break;
        }
        bp_sampler_accept(smp, tok);
        /* Every byte of every token reaches the output: a piece of any length (a fixed 256-byte
         * buffer used to drop longer ones while the count said they were generated). */
        size_t len;
        if ((s = bp_cli_piece(ses.tok, tok, false, &piece, &len))) {
            rc = bp_cli_error("token text", s);
            goto out;
        }
        if (o.json) {
            if (!bp_cli_buf_add(&out, piece.p, len)) {
                rc = bp_cli_error("--json text", BP_E_NOMEM);
                goto out;
            }
        } else {
            fwrite(piece.p, 1, len, stdout);
            fflush(stdout);
        }
        /* every generated token is evaluated, the last too: N tokens/s = N evals */
        if ((s = bp_context_eval(c, &tok, 1, 1))) {
            rc = bp_cli_error("generate", s);
            goto out;
        }
    }
    double t_gen = bp_bench_now() - t0;
    if (!o.json) printf("\n");
    bp_cli_model_report(&ses, c, o.json ? stdout : stderr, o.json, (int64_t)n_ids, t_prompt, generated, t_gen,
                        eog ? "end of generation" : "token limit", out.p ? out.p : "", out.len);
    if (pc.on) rc = bp_plan_check_end(&pc, o.model, ses.model, ctx, o.kv_kind, o.budget, stderr, o.json);
out:
    free(out.p);
    free(piece.p);
    bp_tokens_free(ids);
    free(text);
    bp_sampler_free(smp);
    bp_context_free(c);
    bp_cli_model_close(&ses);
    bp_cli_print_profile();
    bp_cli_print_fallbacks();
    return rc;
}
