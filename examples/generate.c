/* A minimal generate loop: load a GGUF model, tokenize a prompt, evaluate it, then pick and
 * print one token at a time until an end-of-generation token or N tokens. Greedy by default
 * (the same text on every run); with a temperature, sampled from seed 0.
 *     cc generate.c -o generate $(pkg-config --cflags --libs backplane)
 *     ./generate MODEL.gguf "PROMPT" [N] [TEMPERATURE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane.h>

static int fail(const char *what, bp_status s) {
    fprintf(stderr, "generate: %s: %s (%s)\n", what, bp_last_error(), bp_status_name(s));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf \"PROMPT\" [N] [TEMPERATURE]\n", argv[0]);
        return 2;
    }
    /* strict numbers: atoi read "abc" as 0 and "10x" as 10 */
    char *end = NULL;
    const long n_gen = argc > 3 ? strtol(argv[3], &end, 10) : 32;
    int bad = argc > 3 && (*end || end == argv[3] || n_gen < 0);
    const float temp = argc > 4 ? strtof(argv[4], &end) : 0.0f;
    bad |= argc > 4 && (*end || end == argv[4]);
    if (bad) {
        fprintf(stderr, "generate: N must be a count and TEMPERATURE a number\n");
        return 2;
    }
    bp_model *m = NULL;
    bp_tokenizer *tok = NULL;
    bp_context *c = NULL;
    bp_sampler *smp = NULL;
    bp_token *ids = NULL;
    size_t n_ids = 0;
    int rc = 1;
    bp_status s;
    bp_model_info info;
    bp_sampler_params sp = bp_sampler_default_params();
    sp.temperature = temp; /* <= 0: greedy */

    if ((s = bp_model_load(argv[1], NULL, &m))) return fail(argv[1], s);
    if ((s = bp_model_get_info(m, &info)) || (s = bp_tokenizer_create(bp_model_gguf(m), &tok)) ||
        (s = bp_context_create(m, NULL, &c)) || (s = bp_sampler_create(&sp, (int32_t)info.n_vocab, &smp)) ||
        (s = bp_tokenizer_encode_alloc(tok, argv[2], strlen(argv[2]), true, false, &ids, &n_ids)) ||
        (s = bp_context_eval(c, ids, (int64_t)n_ids, 1))) {
        rc = fail("setup", s);
        goto out;
    }
    fputs(argv[2], stdout);
    for (long i = 0; i < n_gen; i++) {
        bp_token t;
        char piece[256], *p = piece;
        size_t len;
        if ((s = bp_sampler_sample(smp, bp_context_logits(c, 0), &t))) break;
        if (bp_tokenizer_is_eog(tok, t)) break;
        s = bp_tokenizer_token_to_piece(tok, t, false, piece, sizeof piece, &len);
        if (s == BP_E_INVAL && len > sizeof piece && (p = malloc(len))) /* a longer piece: whole */
            s = bp_tokenizer_token_to_piece(tok, t, false, p, len, &len);
        if (s) break;
        fwrite(p, 1, len, stdout);
        if (p != piece) free(p);
        fflush(stdout);
        if ((s = bp_sampler_accept(smp, t)) || (s = bp_context_eval(c, &t, 1, 1))) break;
    }
    putchar('\n');
    rc = s ? fail("generate", s) : 0;
    if (fflush(stdout) || ferror(stdout)) rc = 1, fprintf(stderr, "generate: writing the text failed\n");
out:
    bp_tokens_free(ids);
    bp_sampler_free(smp);
    bp_context_free(c);
    bp_tokenizer_free(tok);
    bp_model_free(m);
    return rc;
}
