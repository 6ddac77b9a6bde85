/* backplane: tokenizer and sampler, separate objects beside the model (as llama.h keeps them).
 *
 * Included at the end of backplane.h; do not include it on its own.
 *
 * Tokenizer: built from the tokenizer.ggml.* metadata of an open GGUF. Two families, with the
 * token ids llama.cpp (commit 0c1e570) produces, checked on committed strings:
 *   - tokenizer.ggml.model = "llama": SentencePiece-style score merging with byte fallback
 *     (<0xNN> tokens) and the U+2581 space marker (Gemma 3, Llama 2);
 *   - tokenizer.ggml.model = "gpt2": byte-level BPE, merges by rank, with the pre-tokenizer
 *     tokenizer.ggml.pre names (bp_tokenizer_pre_names() lists the supported ones).
 * Anything else is BP_E_UNSUPPORTED naming the value and what is supported: never a silent
 * wrong tokenization. The tokenizer copies what it needs; the GGUF may be closed afterwards. A
 * tokenizer is immutable after creation, so any number of threads may encode/decode at once.
 *
 * Sampler: one config struct (bp_sampler_params), applied in a fixed order documented there.
 */
#ifndef BACKPLANE_TOKENIZER_H
#define BACKPLANE_TOKENIZER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libbackplane.so, which is built with -fvisibility=hidden (as backplane.h). */
#pragma GCC visibility push(default)

/* ---- tokenizer -------------------------------------------------------------------------- */

typedef int32_t bp_token;
#define BP_TOKEN_NULL ((bp_token)-1)

typedef struct bp_tokenizer bp_tokenizer;

typedef enum bp_tokenizer_type {
    BP_TOKENIZER_SPM = 1, /* tokenizer.ggml.model = "llama" */
    BP_TOKENIZER_BPE = 2, /* tokenizer.ggml.model = "gpt2", or "gemma4" (BPE on raw UTF-8) */
    BP_TOKENIZER_WPM = 3, /* tokenizer.ggml.model = "bert" (WordPiece) */
} bp_tokenizer_type;

/* Token attributes (bit flags), from tokenizer.ggml.token_type (1 normal, 2 unknown,
 * 3 control, 4 user-defined, 5 unused, 6 byte). Tokens whose text marks an end of generation
 * ("<|eot_id|>", "<end_of_turn>", ...) also get CONTROL, as llama.cpp does. */
enum {
    BP_TOKEN_ATTR_UNDEFINED = 0,
    BP_TOKEN_ATTR_UNKNOWN = 1 << 0,
    BP_TOKEN_ATTR_UNUSED = 1 << 1,
    BP_TOKEN_ATTR_NORMAL = 1 << 2,
    BP_TOKEN_ATTR_CONTROL = 1 << 3,
    BP_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    BP_TOKEN_ATTR_BYTE = 1 << 5,
};

/* Special token roles; bp_tokenizer_special() gives the id or BP_TOKEN_NULL. */
typedef enum bp_special_token {
    BP_SPECIAL_BOS = 0,
    BP_SPECIAL_EOS = 1,
    BP_SPECIAL_UNK = 2,
    BP_SPECIAL_PAD = 3,
    BP_SPECIAL_SEP = 4,
    BP_SPECIAL_EOT = 5, /* end of turn: "<end_of_turn>", "<|eot_id|>", "<|im_end|>", ... */
    BP_SPECIAL_COUNT
} bp_special_token;

/* Build from f's tokenizer.ggml.* keys: tokens, scores, token_type, merges, the special ids
 * (bos/eos/unknown/padding/seperator _token_id), add_bos_token/add_eos_token/
 * add_space_prefix, pre, and for WordPiece normalizer.lowercase/normalizer.strip_accents.
 * Errors: BP_E_NOT_FOUND (a required key is missing), BP_E_FORMAT (a key of the wrong type or
 * length, naming it), BP_E_UNSUPPORTED (model or pre-tokenizer not supported, naming
 * it and listing what is), BP_E_NOMEM. *out is NULL on failure. Loading Gemma 3's 262,144
 * tokens takes ~20 ms here (README). */
bp_status bp_tokenizer_create(const bp_gguf *f, bp_tokenizer **out);
void bp_tokenizer_free(bp_tokenizer *t); /* NULL is fine */

bp_tokenizer_type bp_tokenizer_get_type(const bp_tokenizer *t);
/* tokenizer.ggml.model and tokenizer.ggml.pre as read ("default" when pre is absent). */
const char *bp_tokenizer_model_name(const bp_tokenizer *t);
const char *bp_tokenizer_pre_name(const bp_tokenizer *t);
/* The supported pre-tokenizer names for "gpt2", comma-separated. */
const char *bp_tokenizer_pre_names(void);

int32_t bp_tokenizer_vocab_size(const bp_tokenizer *t);
bp_token bp_tokenizer_special(const bp_tokenizer *t, bp_special_token which);
/* Whether encode with add_special adds BOS / EOS (the file's add_*_token, else the family's
 * default: SPM adds BOS, BPE adds nothing), and whether SPM text gets a leading space. */
bool bp_tokenizer_add_bos(const bp_tokenizer *t);
bool bp_tokenizer_add_eos(const bp_tokenizer *t);
bool bp_tokenizer_add_space_prefix(const bp_tokenizer *t);
/* End of generation: EOS, EOT and the other end markers llama.cpp stops on. */
bool bp_tokenizer_is_eog(const bp_tokenizer *t, bp_token id);
/* BP_TOKEN_ATTR_* bits; 0 for an id out of range. */
unsigned bp_tokenizer_token_attr(const bp_tokenizer *t, bp_token id);
/* The vocabulary entry as stored (U+2581 / byte-level characters not undone); NULL and
 * *len = 0 for an id out of range. Not NUL-terminated in general; valid until free. */
const char *bp_tokenizer_token_text(const bp_tokenizer *t, bp_token id, size_t *len);
float bp_tokenizer_token_score(const bp_tokenizer *t, bp_token id);
/* Id of the vocabulary entry whose text is exactly text[0..len), or BP_TOKEN_NULL. */
bp_token bp_tokenizer_find(const bp_tokenizer *t, const char *text, size_t len);

/* Encode text[0..len) (any bytes; invalid UTF-8 is handled as llama.cpp does). add_special:
 * add BOS/EOS as bp_tokenizer_add_bos/_eos say. parse_special: text equal to a control token
 * ("<start_of_turn>") becomes that token; without it only user-defined tokens are matched and
 * control-token text is tokenized as plain text. Writes min(n, cap) ids to out and sets *n to
 * the count; when cap < n the result is BP_E_INVAL with *n the size needed (out may be NULL
 * with cap 0 to ask). Time is ~linear in len. */
bp_status bp_tokenizer_encode(const bp_tokenizer *t, const char *text, size_t len, bool add_special,
                              bool parse_special, bp_token *out, size_t cap, size_t *n);
/* The same into a new array (*ids, *n); release with bp_tokens_free. */
bp_status bp_tokenizer_encode_alloc(const bp_tokenizer *t, const char *text, size_t len,
                                    bool add_special, bool parse_special, bp_token **ids, size_t *n);
void bp_tokens_free(bp_token *ids);

/* Decode options (bit flags). */
enum {
    /* Control and unknown tokens ("<bos>", "<end_of_turn>") decode to their text; without this
     * flag they decode to nothing. User-defined tokens always decode to their text. */
    BP_DECODE_SPECIAL = 1 << 0,
    /* Keep the space the SPM add_space_prefix inserted before the first word (and after each
     * special token); without the flag it is removed, so decode(encode(s)) == s. */
    BP_DECODE_KEEP_PREFIX_SPACE = 1 << 1,
};

/* The bytes of one token, as llama_token_to_piece gives them: U+2581 becomes a space, <0xNN>
 * the byte, byte-level BPE characters their bytes. special: render control/unknown tokens
 * (otherwise they give 0 bytes). Writes min(n, cap) bytes, *n = the full length; BP_E_INVAL
 * when cap < *n or the id is out of range. No NUL is added. */
bp_status bp_tokenizer_token_to_piece(const bp_tokenizer *t, bp_token id, bool special, char *buf,
                                      size_t cap, size_t *n);
/* Concatenated pieces of ids[0..n_ids) under BP_DECODE_* flags. Writes min(len, cap) bytes and
 * sets *len; BP_E_INVAL when cap < *len (buf may be NULL with cap 0 to ask) or an id is out of
 * range (naming its index). No NUL is added. */
bp_status bp_tokenizer_decode(const bp_tokenizer *t, const bp_token *ids, size_t n_ids,
                              unsigned flags, char *buf, size_t cap, size_t *len);

/* ---- sampler ---------------------------------------------------------------------------- */
/* One config, applied to a logits row in this fixed order (llama.cpp's default chain order for
 * these samplers):
 *   1. penalties over the last `repeat_last_n` accepted tokens: for each distinct token seen c
 *      times there, its logit l becomes (l <= 0 ? l * repeat_penalty : l / repeat_penalty)
 *      - c * frequency_penalty - presence_penalty;
 *   2. temperature <= 0: greedy, the largest logit (ties: the lowest id); stop here;
 *   3. top-k (top_k > 0): the k largest logits (ties at the cut: lower ids first);
 *   4. top-p (top_p < 1): softmax of what is left; keep the smallest prefix, by descending
 *      probability (ties: lower id first), whose mass reaches top_p;
 *   5. min-p (min_p > 0): keep tokens whose probability is >= min_p x the largest, i.e. whose
 *      logit is >= the largest + log(min_p);
 *   6. temperature: softmax(l / temperature) over what is left;
 *   7. one draw from that distribution with the sampler's RNG (xoshiro256**, seeded through
 *      splitmix64; the same seed and calls give the same tokens on every machine).
 * Steps 4-5 see temperature-1 probabilities, as in llama.cpp; each step keeps >= 1 token.
 * Probabilities are computed in double. NaN logits count as -inf; +inf logits share the mass
 * equally; a row with every logit -inf/NaN is BP_E_INVAL. Cost per call: O(n_vocab) plus
 * O(n_vocab log k) for top-k; top-p without top-k sorts the whole row. */
typedef struct bp_sampler_params {
    float temperature;       /* <= 0: greedy. Default 0.8 */
    int32_t top_k;           /* <= 0: off. Default 40 */
    float top_p;             /* >= 1: off. Default 0.95 */
    float min_p;             /* <= 0: off. Default 0.05 */
    float repeat_penalty;    /* 1: off. Default 1.0 (must be > 0) */
    float frequency_penalty; /* 0: off. Default 0 */
    float presence_penalty;  /* 0: off. Default 0 */
    int32_t repeat_last_n;   /* accepted tokens the penalties see; 0: off. Default 64 */
    uint64_t seed;           /* Default 0 */
} bp_sampler_params;

typedef struct bp_sampler bp_sampler;

bp_sampler_params bp_sampler_default_params(void);
/* n_vocab: the logits row length every call will pass. BP_E_INVAL on a NaN or out-of-range
 * parameter (naming it). */
bp_status bp_sampler_create(const bp_sampler_params *p, int32_t n_vocab, bp_sampler **out);
void bp_sampler_free(bp_sampler *s); /* NULL is fine */
/* Draw one token from logits[0..n_vocab) (not modified). Does not accept it: call
 * bp_sampler_accept for every prompt and generated token the penalties should see. */
bp_status bp_sampler_sample(bp_sampler *s, const float *logits, bp_token *out);
/* The distribution step 7 draws from, over the whole vocabulary (zeros for filtered tokens; a
 * one-hot vector when greedy). Does not advance the RNG. */
bp_status bp_sampler_probs(bp_sampler *s, const float *logits, double *probs);
/* Record a token for the penalties (BP_E_INVAL when outside the vocabulary). */
bp_status bp_sampler_accept(bp_sampler *s, bp_token tok);
/* Forget the accepted tokens and restart the RNG from the seed (the logit bias stays). */
void bp_sampler_reset(bp_sampler *s);
/* One sampler per sequence keeps each sequence's RNG and penalty window apart (a server makes
 * one per request).
 *
 * Logit bias: bias[i] is added to the logit of ids[i] before step 1 (repeated ids add up;
 * -INFINITY bans the token). Replaces the sampler's earlier bias; n = 0 clears it. */
bp_status bp_sampler_set_logit_bias(bp_sampler *s, const bp_token *ids, const float *bias, int32_t n);
/* Log-probabilities, in double, of the model's distribution as OpenAI's `logprobs` reports it:
 * log-softmax of the biased logits at temperature 1, before penalties and filters. *tok_logprob
 * gets tok's; top[0..top_n) the top_n most likely ids (ties: lower id first), best first. */
typedef struct bp_logprob {
    bp_token id;
    double logprob;
} bp_logprob;
bp_status bp_sampler_logprobs(bp_sampler *s, const float *logits, bp_token tok, int32_t top_n, double *tok_logprob,
                              bp_logprob *top);

/* ---- stopping a generation -------------------------------------------------------------- */
/* A generation ends at an end-of-generation token, at one of the stop strings (found in the
 * generated text across token boundaries; the stop string and what follows are not part of
 * the reply), or after max_tokens tokens. bp_stopper_push takes each generated token's text
 * and gives back the text that is now safe to show: text that could still be the start of a
 * stop string, and an incomplete UTF-8 sequence at the end, are held back until the next token
 * decides. */
typedef enum bp_stop_reason {
    BP_STOP_NONE = 0, /* go on */
    BP_STOP_EOG,      /* an end-of-generation token ("stop" in OpenAI's finish_reason) */
    BP_STOP_STRING,   /* a stop string ("stop") */
    BP_STOP_LENGTH,   /* max_tokens, or the context is full ("length") */
} bp_stop_reason;

typedef struct bp_stopper bp_stopper;
/* stops[0..n_stops): non-empty strings (copied); max_tokens <= 0: no limit. */
bp_status bp_stopper_create(const char *const *stops, int32_t n_stops, int64_t max_tokens, bp_stopper **out);
void bp_stopper_free(bp_stopper *s); /* NULL is fine */
/* One generated token: its text (n bytes; eog: an end-of-generation token, whose text is not
 * shown). *emit and *emit_len: the text to show now (valid until the next call). Returns why the
 * generation ends, or BP_STOP_NONE; once it has ended, every later push returns the same
 * reason and shows nothing. At EOG or LENGTH the held-back text is shown; at a stop string,
 * the text before it. */
bp_stop_reason bp_stopper_push(bp_stopper *s, const char *piece, size_t n, bool eog, const char **emit,
                               size_t *emit_len);
/* Tokens pushed so far. The reason name as OpenAI's finish_reason spells it ("stop", "length",
 * or NULL for BP_STOP_NONE). */
int64_t bp_stopper_count(const bp_stopper *s);
const char *bp_stop_reason_name(bp_stop_reason r);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_TOKENIZER_H */
