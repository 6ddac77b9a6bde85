/* backplane models: load a GGUF transformer, evaluate tokens with a KV cache, read logits.
 * Included at the end of backplane.h.
 *
 * The shape follows llama.h: a model (the weights, read-only, shareable) and a context over it
 * (the KV caches of its sequences and the activations; one sequence unless n_seq_max says
 * more). The tokenizer and the sampler are separate
 * objects (backplane_tokenizer.h). Weights stay in the file's mapping (zero-copy); the KV cache
 * and the activations are the only large allocations.
 *
 * Architectures: src/model/archs.def (llama incl. Llama 2/3 and Mistral, qwen2, qwen3, gemma3).
 * Every hyperparameter comes from the file's `<arch>.*` metadata and is validated at load; an
 * unsupported architecture, a missing tensor, a tensor of the wrong shape or kind, or a
 * truncated file is a clear error naming it, never a crash. */
#ifndef BACKPLANE_MODEL_H
#define BACKPLANE_MODEL_H

#include "backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libbackplane.so without marking each declaration (see backplane.h). */
#pragma GCC visibility push(default)

typedef struct bp_model bp_model;
typedef struct bp_context bp_context;

/* Called while loading with the fraction done (0..1); return false to cancel the load
 * (bp_model_load then fails with BP_E_INVAL, "cancelled"). */
typedef bool (*bp_progress_fn)(double fraction, void *user);

typedef struct bp_model_params {
    bp_progress_fn progress; /* NULL: none */
    void *progress_user;
    /* Read every weight page at load (madvise + touch), so the first token does not pay the
     * page faults and the progress callback means something. Default true. */
    bool prefetch;
    /* Drop the file pages of a weight once the CPU backend has made its repacked copy, so the
     * resident size stays near the file size instead of the file plus the copies (see
     * src/model/memory.c: decode reads only the copy; a prefill faults the original back in
     * from the page cache). Default true. */
    bool release_originals;
} bp_model_params;

bp_model_params bp_model_default_params(void);
/* params NULL: the defaults. *out is NULL on failure. */
bp_status bp_model_load(const char *path, const bp_model_params *params, bp_model **out);
void bp_model_free(bp_model *m); /* NULL is fine */

typedef struct bp_model_info {
    const char *arch;        /* general.architecture: "gemma3" */
    const char *name;        /* general.name, or "" */
    int64_t n_vocab;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;        /* key head size (value head size is the same for every family here) */
    int64_t n_ff;
    int64_t n_ctx_train;     /* <arch>.context_length */
    int64_t sliding_window;  /* 0 when no layer slides */
    int64_t n_swa_layers;    /* layers with the sliding window */
    int64_t n_params;        /* elements of every tensor the forward pass uses */
    uint64_t weight_bytes;   /* bytes of those tensors in the file (the tied output counted once) */
    uint64_t file_bytes;
    bool tied_output;        /* the output projection is token_embd */
} bp_model_info;

bp_status bp_model_get_info(const bp_model *m, bp_model_info *out);
/* The file, for the tokenizer (the vocabulary lives in its metadata). Valid until
 * bp_model_free. */
const bp_gguf *bp_model_gguf(const bp_model *m);

/* The model's weight matrices, for reports: i in [0, bp_model_weight_count). *name gets the
 * tensor's name ("blk.3.ffn_down.weight"); bp_weight_last_path(w) says what last ran it. */
int64_t bp_model_weight_count(const bp_model *m);
const bp_weight *bp_model_weight_at(const bp_model *m, int64_t i, const char **name);

/* ---- contexts -------------------------------------------------------------------------- */

typedef struct bp_context_params {
    /* KV cache capacity in tokens. 0: the model's training context, capped at 4096. */
    int64_t n_ctx;
    /* Kind of the K and V caches: F16 (default), or another kind the op layer's KV cache
     * offers (bp_context_kv_kinds). */
    bp_kind kv_kind;
    /* Largest number of tokens one internal forward step takes (a longer eval is split);
     * prefill runs the GEMM path over up to this many tokens. 0: 512. */
    int64_t n_batch;
    /* Sequences the context holds, ids 0 .. n_seq_max - 1, each with its own KV cache of n_ctx
     * positions (made on its first use). 0: 1. Sequence 0 is the one bp_context_eval and the
     * other single-sequence calls use. */
    int32_t n_seq_max;
    /* Bytes the device taking the forward step may hold; 0: no limit. When the whole step does
     * not fit, the device takes the last layers that do (their weights and KV cache, plus its
     * activations, logits and tables once) and the output, and the CPU runs the embedding and
     * the layers before; a budget too small for one layer leaves every layer on the CPU. The
     * layers are those bp_plan names for the same budget (bp_plan.n_layers_device). */
    uint64_t device_budget;
} bp_context_params;

bp_context_params bp_context_default_params(void);
/* BP_E_NOMEM before any allocation when the KV cache and buffers would need more memory than is
 * available (the smallest of MemAvailable, a cgroup v2 limit less usage, BACKPLANE_MEMORY_LIMIT
 * bytes), the message naming the bytes asked and available; see bp_set_memory_check. */
bp_status bp_context_create(bp_model *m, const bp_context_params *params, bp_context **out);
/* The memory check of bp_context_create: on by default; BACKPLANE_MEMORY_CHECK=0 (off, false)
 * turns it off for the process, bp_set_memory_check overrides both (to allocate anyway, e.g.
 * with swap or overcommit the check does not see). */
void bp_set_memory_check(bool on);
bool bp_memory_check(void);
void bp_context_free(bp_context *c); /* NULL is fine; the model must outlive its contexts */

/* The KV kinds bp_context_params.kv_kind accepts, and the NMSE bound of the logits with that
 * cache against the F16 cache's, as tests/test_model_kv.c checks it. Returns the count; fills
 * up to cap entries. */
int bp_context_kv_kinds(bp_kind *kinds, double *nmse_bound, int cap);

/* Append n tokens at positions bp_context_pos(c) .. +n-1, and compute the logits of the last
 * n_out of them (0 <= n_out <= n; 1 for generation, n for every position). On failure nothing
 * is appended: the cache holds the same positions as before. A token id outside the vocabulary,
 * a token whose embedding row is not finite (BP_E_FORMAT naming the row) or more tokens than the
 * cache has room for is found before any work, and the previous eval's logits stay readable; a
 * failure inside the forward pass (no memory, a backend error, a logit that is NaN or infinite:
 * BP_E_FORMAT naming the output) leaves no logits (bp_context_logits gives NULL). */
bp_status bp_context_eval(bp_context *c, const int32_t *tokens, int64_t n, int64_t n_out);
/* Logits (n_vocab floats) of output j of the last eval, j in [0, n_out): output j belongs to
 * token n - n_out + j. NULL when out of range. Valid until the next eval. */
const float *bp_context_logits(const bp_context *c, int64_t j);
/* The position the next token takes: the tokens in the cache, or more once a range was removed
 * from the middle (bp_context_seq_rm of sequence 0 leaves a hole). */
int64_t bp_context_pos(const bp_context *c);
int64_t bp_context_n_ctx(const bp_context *c);
/* The record of what last ran a matmul of weight kind k in this context, decode (one token) or
 * prefill (several): each job's own record, filled by the seam where it ran (its backend and
 * kernel, "CPU avx512 Q5_0 (...)", "Vulkan jobs Q4_K", a fallback and its cause). BP_E_NOT_FOUND
 * when nothing of that kind has run. */
bp_status bp_context_kind_record(const bp_context *c, bp_kind k, bool prefill, bp_run_record *out);
/* That record as a line (bp_run_record_label); "" when nothing of that kind has run. A
 * thread-local copy, valid until the next call on this thread. */
const char *bp_context_kind_path(const bp_context *c, bp_kind k, bool prefill);
/* The last forward step of the context, decode (one token) or prefill: the record of what ran it
 * whole ("Vulkan step F16", or the CPU running it op by op), and what it moved between host and
 * device, counted by the device layer where the copies and submissions were made (zeros for a
 * step the CPU ran). BP_E_NOT_FOUND before such a step. */
typedef struct bp_step_report {
    bp_run_record record;
    uint64_t uploads, downloads;        /* host -> device and device -> host copies */
    uint64_t bytes_in, bytes_out;
    uint64_t submissions, launches;     /* queue submissions (a replayed step: 1), kernels */
    bool recorded;                      /* the step recorded its submission rather than replay it */
} bp_step_report;
bp_status bp_context_step_report(const bp_context *c, bool prefill, bp_step_report *out);
/* Under a device budget (bp_context_params.device_budget), decided at the first eval: the layers
 * the device holds (the last *n_layers_device of the model; 0: every layer on the CPU) and a line
 * saying how the budget decided ("layers 12-17 and the output on vulkan (215.9 MiB), ..."), as
 * bp_plan's budget_note. BP_E_NOT_FOUND without a budget or before the first eval. */
bp_status bp_context_offload(const bp_context *c, int32_t *n_layers_device, const char **note);
/* Forget positions >= n (0 clears the cache). BP_E_INVAL when n > bp_context_pos. */
bp_status bp_context_truncate(bp_context *c, int64_t n);
/* Bytes of the KV cache (K and V, every layer), and of the context's other buffers. */
size_t bp_context_kv_bytes(const bp_context *c);
size_t bp_context_buffer_bytes(const bp_context *c);

/* ---- several sequences ------------------------------------------------------------------ */

/* A batch: n tokens, each of a sequence (seq[i], in 0 .. n_seq_max - 1; NULL: all 0) at a
 * position (pos[i]; NULL: each token continues its sequence), and whether its logits are wanted
 * (logits[i] != 0; NULL: only the last token's). A sequence's positions increase: the first at
 * or after bp_context_seq_pos, each next one above the one before, all below n_ctx. A position
 * past where the sequence continues leaves a hole (as bp_context_seq_rm of a middle range does);
 * to rewrite positions, remove them first with bp_context_seq_rm. Tokens of different sequences
 * may interleave. */
typedef struct bp_batch {
    int64_t n;
    const int32_t *tokens;
    const int32_t *pos;
    const int32_t *seq;
    const int8_t *logits;
} bp_batch;

/* One eval over the batch: each weight's matmul runs once over every token of every sequence
 * (split into steps of n_batch tokens), each token attending over its own sequence only. Every
 * check (ids, sequences, positions, room, embedding rows) comes before any work; on any failure
 * nothing is appended to any sequence. A batch whose tokens are all of sequence 0, continuing it
 * without a jump, with the wanted logits a suffix is bp_context_eval (which may run on a
 * device); any other batch runs on the CPU, and bp_context_step_report says so (a device step
 * holds one sequence, without holes: sequence 0 with a hole is evaluated on the CPU, its cells
 * handed back by the device, until a truncation or seq_rm of the tail closes the hole). */
bp_status bp_context_decode(bp_context *c, const bp_batch *b);
/* Logits (n_vocab floats) of token i of the last bp_context_decode; NULL when it did not ask
 * for them or i is out of range. Valid until the next eval or decode. */
const float *bp_context_batch_logits(const bp_context *c, int64_t i);
int32_t bp_context_n_seq_max(const bp_context *c);
/* The position seq's next token takes (one past its last token's; the tokens it holds when it
 * has no hole); -1 for an unknown seq. */
int64_t bp_context_seq_pos(const bp_context *c, int32_t seq);
/* Remove positions [p0, p1) of seq (p0 < 0: from 0; p1 < 0: to the end), as llama.cpp's
 * memory seq_rm: the tokens at the remaining positions keep them (K was rotated at them), so a
 * range in the middle leaves a hole in position space that attention masks (causal and sliding
 * window) respect, and the sequence continues after its last token. p0 > p1, p1 past
 * bp_context_seq_pos or an unknown seq is BP_E_INVAL and changes nothing. */
bp_status bp_context_seq_rm(bp_context *c, int32_t seq, int64_t p0, int64_t p1);
/* dst's cache becomes src's tokens at positions below n (n < 0: all of src), with their
 * positions, copied, not recomputed (a shared system prompt). dst's earlier tokens are dropped. */
bp_status bp_context_seq_cp(bp_context *c, int32_t src, int32_t dst, int64_t n);
/* Every sequence but seq is cleared. */
bp_status bp_context_seq_keep(bp_context *c, int32_t seq);
/* The token ids seq holds, in position order: *n gets their count (bp_context_seq_pos when it
 * has no hole); the pointer is valid until the next change to seq. NULL for an unknown seq.
 * bp_context_seq_token_pos: the position of the i-th of them (i itself without a hole), -1 out
 * of range. */
const int32_t *bp_context_seq_tokens(const bp_context *c, int32_t seq, int64_t *n);
int64_t bp_context_seq_token_pos(const bp_context *c, int32_t seq, int64_t i);

/* A sequence's state (its token ids, their positions and K/V, after a header naming the model, the KV kind and
 * the lengths) in memory or in a file, to restore later into any sequence of a context over
 * the same model and KV kind with room for it (prompt caching). Restoring checks the header
 * first: another model, another KV kind, more positions than the context holds, or a short or
 * damaged buffer is BP_E_FORMAT/BP_E_INVAL saying which, and the target sequence is left as it
 * was. No logits come back: eval the next token. bp_context_seq_state_size: the bytes
 * bp_context_seq_state_get writes (buf may be NULL with cap 0 to ask). */
size_t bp_context_seq_state_size(const bp_context *c, int32_t seq);
bp_status bp_context_seq_state_get(const bp_context *c, int32_t seq, void *buf, size_t cap, size_t *len);
bp_status bp_context_seq_state_set(bp_context *c, int32_t seq, const void *buf, size_t len);
bp_status bp_context_seq_state_save(const bp_context *c, int32_t seq, const char *path);
bp_status bp_context_seq_state_load(bp_context *c, int32_t seq, const char *path);

/* ---- chat ----------------------------------------------------------------------------- */

/* The prompt wrapped as one user turn in the model family's built-in chat format, ending where
 * the assistant's reply begins (src/model/chat.c lists them: gemma, chatml for Qwen, llama3 when
 * the vocabulary t has <|start_header_id|>, else llama2's [INST]). *name gets the format's name.
 * Writes a NUL-terminated string to buf and its length (without the NUL) to *len; BP_E_INVAL
 * when it does not fit (buf may be NULL with cap 0 to ask). Encode it with parse_special. */
typedef struct bp_tokenizer bp_tokenizer;
bp_status bp_model_chat_format(const bp_model *m, const bp_tokenizer *t, const char *prompt, char *buf, size_t cap,
                               size_t *len, const char **name);

/* A conversation: turns of roles[i] ("system", "developer", "user", "assistant") with texts[i],
 * in the same format, ending where the assistant's reply begins (a server's chat request). */
bp_status bp_model_chat_format_turns(const bp_model *m, const bp_tokenizer *t, const char *const *roles,
                                     const char *const *texts, size_t n, char *buf, size_t cap, size_t *len,
                                     const char **name);

/* ---- perplexity ------------------------------------------------------------------------ */

typedef struct bp_perplexity_result {
    double ppl;      /* exp(mean negative log-likelihood of the scored tokens) */
    double ppl_err;  /* its standard error, as llama-perplexity prints it after "+/-" */
    int64_t chunks;  /* chunks evaluated */
    int64_t scored;  /* tokens scored */
} bp_perplexity_result;

/* Called after each chunk with its index and the running perplexity. */
typedef void (*bp_perplexity_fn)(int64_t chunk, double ppl_so_far, void *user);

/* Perplexity of tokens[0..n) as llama-perplexity computes it: chunks of `chunk` tokens (at most
 * max_chunks; <= 0: all whole chunks), each from an empty cache with its first token replaced by
 * bos (bos < 0: kept), scoring the second half of each chunk. Needs n >= 2 * chunk and a context
 * of at least `chunk` tokens; clears the context. */
bp_status bp_context_perplexity(bp_context *c, const int32_t *tokens, int64_t n, int64_t chunk, int64_t max_chunks,
                                int32_t bos, bp_perplexity_fn on_chunk, void *user, bp_perplexity_result *out);

/* ---- plan: placement and memory before loading ------------------------------------------ */

/* What a run of the model would use, from the file's metadata alone: no tensor data is read (a
 * plan of a multi-GiB file takes milliseconds), every tensor is checked as bp_model_load checks
 * it, and the placement is the one the run takes in this process (the backend preference,
 * BACKPLANE_* switches and strict mode as they are now). `run --plan-check` holds the run to it. */
typedef struct bp_plan_params {
    int64_t n_ctx;          /* as bp_context_params: 0 the training context, capped at 4096 */
    bp_kind kv_kind;        /* default F16 */
    int64_t n_batch;        /* 0: 512 */
    int32_t n_parallel;     /* sequences, each with its own cache of n_ctx (0: 1) */
    uint64_t device_budget; /* bytes a device may hold; 0: no limit */
} bp_plan_params;

bp_plan_params bp_plan_default_params(void);

/* Bytes on one device ("host", or a backend's name). The host's weights are the mapped file
 * (read whole at load); each item is what the run allocates for it. */
typedef struct bp_plan_memory {
    char name[24];
    bool known;           /* false: the backend cannot size its placement (no step_bytes) */
    uint64_t weights;     /* host: the mapped file; a device: the weight arenas */
    uint64_t copies;      /* the CPU's repacked copies (made at the first decode) */
    uint64_t kv;          /* K and V of every layer (every sequence) */
    uint64_t activations; /* the step's buffers */
    uint64_t logits;      /* host: one position's; a device: its logits buffers */
    uint64_t scratch;     /* CPU: thread scratch and the activation buffer; a device: gains,
                             biases, RoPE tables, the step input, its own tables */
    uint64_t other;       /* host: the file's index, the model's tables and F32 vectors, the
                             step programs, the sequences' token ids */
    uint64_t total;
} bp_plan_memory;

typedef struct bp_plan_tensor {
    char name[96];
    int32_t layer;         /* -1: not a layer's (token_embd, output) */
    bp_kind kind;
    int64_t rows, cols;
    uint64_t bytes;        /* in the file */
    char backend[24];      /* what runs its matmuls: "cpu", "vulkan" */
    char kernel[128];      /* the kernel at batch 1 (decode) */
    char kernel_batch[128]; /* at n_batch (prefill) */
    uint64_t copy_bytes;   /* the CPU's repacked copy of it (0: its kernel reads the file) */
} bp_plan_tensor;

typedef struct bp_plan {
    char arch[32], name[128];
    bp_context_params ctx;   /* the context, its defaults filled in */
    uint64_t file_bytes;
    char step_backend[24];   /* what takes the step whole; "cpu": op by op on the CPU */
    char why[1024];          /* for "cpu": each backend's answer */
    bp_plan_memory mem[2];   /* [0] the host, [1] the device when one takes the step (or its
                                last layers) */
    int n_mem;
    uint64_t heap;           /* of mem[0]: the host allocations (all but the mapped file) */
    uint64_t released;       /* of mem[0].weights: the originals' pages dropped after each eval
                                (bp_model_params.release_originals) */
    int32_t n_layers, n_layers_device; /* the device's layers are the last n_layers_device */
    bool split;              /* the device takes layers [n_layers - n_layers_device, n_layers) and
                                the output, the CPU the embedding and the layers before */
    char budget_note[256];   /* how device_budget decided, or "" */
    bp_plan_tensor *tensors; /* every matrix of the model */
    int64_t n_tensors;
    double seconds;          /* the plan's own time */
} bp_plan;

/* The plan of the model in the file at path (or in memory: buf, len, as bp_gguf_open_memory);
 * *out NULL on failure, the error naming the file, key or tensor as bp_model_load would. */
bp_status bp_plan_file(const char *path, const bp_plan_params *p, bp_plan **out);
bp_status bp_plan_buffer(const void *buf, size_t len, const bp_plan_params *p, bp_plan **out);
void bp_plan_free(bp_plan *p); /* NULL is fine */

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_MODEL_H */
