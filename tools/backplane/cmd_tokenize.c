/* backplane tokenize MODEL.gguf: token ids of a text (the model file's tokenizer), like
 * llama.cpp's llama-tokenize; with --bench, how long loading the tokenizer and encoding take. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_common.h"

typedef struct opts {
    const char *model, *prompt, *file;
    int ids, no_bos, no_parse, json, bench, reps;
} opts;

static int usage(FILE *f) {
    fprintf(f,
            "usage: backplane tokenize MODEL.gguf (-p TEXT | -f FILE) [--ids] [--no-bos]\n"
            "                          [--no-parse-special] [--json]\n"
            "       backplane tokenize MODEL.gguf --bench [-f FILE] [--reps N] [--json]\n"
            "  -p TEXT / -f FILE     the text (bytes as given; no escape processing)\n"
            "  --ids                 only the ids, as [1, 2, 3]\n"
            "  --no-bos              add_special off (no BOS/EOS even if the model adds them)\n"
            "  --no-parse-special    control-token text (\"<start_of_turn>\") is plain text\n"
            "  --json                {\"ids\": [...], \"pieces\": [...]} (--bench: the table's rows)\n"
            "  --bench               median time to build the tokenizer from the open file, and to\n"
            "                        encode FILE (default: a built-in mixed text) at 1x, 4x, 16x\n"
            "                        its length: time per byte must stay flat (linear encoding)\n");
    return f == stderr ? 2 : 0;
}

/* CPU time of this process: on a shared machine wall time includes waiting for a core. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A mixed text for the bench: prose, code, numbers, CJK, emoji (~1 KB). */
static const char bench_text[] =
    "The tokenizer turns text into ids. In 2024 a model read 4,096 tokens per window; "
    "perplexity is exp(mean negative log-likelihood). Numbers: 3.14159 2.71828 1e-10 123456789.\n"
    "def encode(text):\n    return [vocab[w] for w in text.split()]  # naive\n\n"
    "日本語のテキストと中文文本，以及한국어. Emoji: \xf0\x9f\x99\x82\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
    "caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9. <start_of_turn>user\nHello!<end_of_turn>\n"
    "It's what they've said: we're done, aren't we? ... --- *** ### !!! (parenthesised) [bracketed]\n"
    "    indented   spaces\tand\ttabs\n\n\nLorem ipsum dolor sit amet, consectetur adipiscing elit, "
    "sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.\n";

static int bench(const opts *o, bp_gguf *f) {
    int reps = o->reps > 0 ? o->reps : 5;
    double *t = malloc((size_t)(reps > 9 ? reps : 9) * sizeof *t);
    double *c = malloc((size_t)reps * sizeof *c);
    bp_tokenizer *tok = NULL;
    for (int r = 0; r < reps; r++) {
        bp_tokenizer_free(tok);
        double t0 = bp_bench_now(), c0 = cpu_s();
        bp_status s = bp_tokenizer_create(f, &tok);
        t[r] = bp_bench_now() - t0;
        c[r] = cpu_s() - c0;
        if (s != BP_OK) {
            free(t);
            return bp_cli_error("tokenizer", s);
        }
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    qsort(c, (size_t)reps, sizeof *c, cmp_d);
    double load_ms = t[reps / 2] * 1e3, load_cpu_ms = c[reps / 2] * 1e3;
    free(c);
    size_t base_len = sizeof bench_text - 1;
    char *base = (char *)bench_text;
    if (o->file && !(base = bp_cli_read_text("tokenize", o->file, &base_len))) {
        free(t);
        return 1;
    }
    if (!o->json) {
        printf("tokenizer: %s / %s, %d tokens; built in %.1f ms wall, %.1f ms CPU (medians of %d)\n\n",
               bp_tokenizer_model_name(tok), bp_tokenizer_pre_name(tok), (int)bp_tokenizer_vocab_size(tok),
               load_ms, load_cpu_ms, reps);
        printf("| text | bytes | tokens | encode ms | MB/s | tokens/s | ns/byte |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|\n");
    } else {
        printf("{\"model\": \"%s\", \"pre\": \"%s\", \"vocab\": %d, \"load_ms\": %.3f, \"load_cpu_ms\": %.3f, \"encode\": [",
               bp_tokenizer_model_name(tok), bp_tokenizer_pre_name(tok), (int)bp_tokenizer_vocab_size(tok), load_ms,
               load_cpu_ms);
    }
    static const int scale[] = {1, 4, 16};
    for (int k = 0; k < 3; k++) {
        size_t n = base_len * (size_t)scale[k];
        char *text = malloc(n ? n : 1);
        for (int i = 0; i < scale[k]; i++) memcpy(text + (size_t)i * base_len, base, base_len);
        size_t n_ids = 0;
        int er = reps < 9 ? 9 : reps;
        for (int r = 0; r < er; r++) {
            bp_token *ids = NULL;
            double t0 = bp_bench_now();
            bp_status s = bp_tokenizer_encode_alloc(tok, text, n, true, true, &ids, &n_ids);
            t[r] = bp_bench_now() - t0;
            bp_tokens_free(ids);
            if (s != BP_OK) {
                free(text);
                return bp_cli_error("encode", s);
            }
        }
        qsort(t, (size_t)er, sizeof *t, cmp_d);
        double sec = t[er / 2];
        if (!o->json)
            printf("| %s x%d | %zu | %zu | %.3f | %.1f | %.0f | %.1f |\n", o->file ? o->file : "built-in",
                   scale[k], n, n_ids, sec * 1e3, n / sec / 1e6, n_ids / sec, sec * 1e9 / (double)n);
        else
            printf("%s{\"scale\": %d, \"bytes\": %zu, \"tokens\": %zu, \"encode_ms\": %.4f}", k ? ", " : "",
                   scale[k], n, n_ids, sec * 1e3);
        free(text);
    }
    if (o->json) printf("]}\n");
    if (base != bench_text) free(base);
    bp_tokenizer_free(tok);
    free(t);
    return 0;
}

int bp_cmd_tokenize(int argc, char **argv) {
    opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout);
        else if (!strcmp(a, "-p") && i + 1 < argc) o.prompt = argv[++i];
        else if (!strcmp(a, "-f") && i + 1 < argc) o.file = argv[++i];
        else if (!strcmp(a, "--reps") && i + 1 < argc) {
            long long x;
            if (!bp_cli_int("tokenize", a, argv[++i], 1, 1000000, &x)) return 2;
            o.reps = (int)x;
        } else if (!strcmp(a, "--ids")) o.ids = 1;
        else if (!strcmp(a, "--no-bos")) o.no_bos = 1;
        else if (!strcmp(a, "--no-parse-special")) o.no_parse = 1;
        else if (!strcmp(a, "--json")) o.json = 1;
        else if (!strcmp(a, "--bench")) o.bench = 1;
        else if (a[0] != '-' && !o.model) o.model = a;
        else {
            fprintf(stderr, "backplane tokenize: unknown argument '%s'\n", a);
            return usage(stderr);
        }
    }
    if (!o.model || (!o.bench && !o.prompt == !o.file)) return usage(stderr);
    bp_gguf *f = NULL;
    bp_status s = bp_gguf_open(o.model, &f);
    if (s != BP_OK) return bp_cli_error(o.model, s);
    if (o.bench) {
        int rc = bench(&o, f);
        bp_gguf_close(f);
        return rc;
    }
    bp_tokenizer *tok = NULL;
    s = bp_tokenizer_create(f, &tok);
    bp_gguf_close(f);
    if (s != BP_OK) return bp_cli_error(o.model, s);
    size_t len = o.prompt ? strlen(o.prompt) : 0;
    char *text = o.prompt ? (char *)o.prompt : bp_cli_read_text("tokenize", o.file, &len);
    if (!text) {
        bp_tokenizer_free(tok);
        return 1;
    }
    bp_token *ids = NULL;
    size_t n = 0;
    s = bp_tokenizer_encode_alloc(tok, text, len, !o.no_bos, !o.no_parse, &ids, &n);
    if (s != BP_OK) {
        if (text != o.prompt) free(text);
        bp_tokenizer_free(tok);
        return bp_cli_error("encode", s);
    }
    /* Pieces of any length, each fetched whole (a 4096-byte buffer cut longer ones); in JSON
     * as text by cli_text.c's policy and, in "pieces_hex", as their exact bytes (bytes >= 0x80
     * used to come out as \u00XX, garbling every non-ASCII piece). */
    bp_cli_buf piece = {0};
    int rc = 0;
    if (o.json) printf("{\"ids\": [");
    else if (o.ids) printf("[");
    for (size_t i = 0; i < n; i++) {
        if (o.json || o.ids) printf(i ? ", %d" : "%d", (int)ids[i]);
    }
    if (o.json) {
        for (int pass = 0; pass < 2 && !rc; pass++) {
            printf(pass ? "], \"pieces_hex\": [" : "], \"pieces\": [");
            for (size_t i = 0; i < n && !rc; i++) {
                size_t pn = 0;
                if ((s = bp_cli_piece(tok, ids[i], true, &piece, &pn))) rc = bp_cli_error("piece", s);
                else if (pass) printf(i ? ", " : ""), bp_cli_json_hex(stdout, piece.p, pn);
                else printf(i ? ", " : ""), bp_cli_json_bytes(stdout, piece.p, pn);
            }
        }
        if (!rc) printf("]}\n");
    } else if (o.ids) {
        printf("]\n");
    } else {
        for (size_t i = 0; i < n && !rc; i++) {
            size_t pn = 0;
            if ((s = bp_cli_piece(tok, ids[i], true, &piece, &pn))) {
                rc = bp_cli_error("piece", s);
                break;
            }
            printf("%6d -> '", (int)ids[i]);
            fwrite(piece.p, 1, pn, stdout);
            printf("'\n");
        }
    }
    free(piece.p);
    bp_tokens_free(ids);
    if (text != o.prompt) free(text);
    bp_tokenizer_free(tok);
    return rc;
}
