/* A forward step as data: the op `step` (ops.def) carries a program of nodes over a fixed set of
 * activation buffers. The model layer writes the program once per shape (t tokens, n_out logit
 * rows); the CPU runs its nodes one by one through the op layer, a device backend places the
 * model once (weights in arenas, the KV cache and the activations in device memory), records
 * the nodes into one submission and replays it per step, so only token ids and positions go in
 * and logits come out.
 *
 * A program never names a position: positions arrive per step in bp_step_io, and every node
 * that depends on them (RoPE, KV append, attention) reads them from there, so a program made
 * for one token replays for every decode step. */
#ifndef BP_BACKEND_STEP_H
#define BP_BACKEND_STEP_H

#include "backplane.h"
#include "backend/backend_id.h"

/* The activation buffers, each n_batch rows of width[buf] floats. */
typedef enum bp_step_buf {
    BP_SB_X = 0,  /* the residual stream [t][n_embd] */
    BP_SB_XN,     /* normed input of a matmul [t][n_embd] */
    BP_SB_Q,      /* [t][n_head * head_dim] */
    BP_SB_K,      /* [t][n_kv_head * head_dim]: this step's keys before they enter the cache */
    BP_SB_V,
    BP_SB_ATT,    /* attention output [t][n_head * head_dim] */
    BP_SB_TMP,    /* a block's output before the residual add [t][n_embd] */
    BP_SB_GATE,   /* [t][n_ff]; a layer with experts: the router logits [t][n_expert] (the buffer is
                     max(n_ff, n_expert) wide) */
    BP_SB_UP,     /* [t][n_ff] */
    BP_SB_LOGITS, /* [n_out][n_vocab] */
    BP_SB_COUNT
} bp_step_buf;

typedef enum bp_step_kind {
    BP_STEP_EMBED,     /* dst[i] = row tokens[i] of w, times f (the embedding scale), i < rows */
    BP_STEP_RMS_NORM,  /* dst row = src row / rms * vec (vec NULL: no gain); rows of n; f = eps */
    BP_STEP_MATMUL,    /* job j: buf job[j].dst rows = src rows (n = w->cols) times job[j].w^T */
    BP_STEP_ADD_VEC,   /* dst[r][j] += vec[j] (a bias), rows of n */
    BP_STEP_ADD,       /* dst[i] += src[i], rows x n elements */
    BP_STEP_ROPE,      /* in place on dst rows [r0, r0 + rows) of rope.n_heads * head_dim */
    BP_STEP_KV_APPEND, /* layer's cache at positions pos0 .. pos0 + rows - 1 <- K and V rows */
    BP_STEP_ATTENTION, /* dst rows = attention(Q rows at the rows' positions, layer's cache) */
    BP_STEP_GLU,       /* dst (= gate) = act(gate) * up, rows x n */
    BP_STEP_SOFTCAP,   /* dst = f * tanh(dst / f), rows x n */
    BP_STEP_MOE,       /* dst rows = routed experts of src rows (n = n_embd): the router logits in
                          GATE's rows (n_expert per row, written by the MATMUL before it) choose
                          moe.top_k experts per row (bp_moe_route, moe.gate), their outputs summed by
                          the route weights (bp_moe_run). Only the CPU runs it: a step holding one
                          is never taken whole by a device (src/seam/route.c) */
    BP_STEP_KIND_COUNT
} bp_step_kind;

/* Offsets are in rows of the buffer's width; a node covers rows [r0, r0 + rows). */
typedef struct bp_step_node {
    bp_step_kind kind;
    bp_step_buf dst, src;
    int64_t r0, rows;   /* rows of the buffers (norm per head: rows are heads, r0 too) */
    int64_t n;          /* floats per row the node sees */
    const float *vec;   /* RMS_NORM gain, ADD_VEC bias: n floats the device uploads once */
    float f;            /* eps, scale or cap */
    int layer;          /* the model layer the node belongs to; -1: the embedding and the head */
    const char *tensor; /* the tensor the node applies, as GGUF names it after "blk.<layer>."
                           ("attn_norm.weight"); NULL for a node without one (add, glu) */
    int n_jobs;         /* MATMUL */
    struct { bp_weight *w; bp_step_buf dst; const char *tensor; } job[3];
    bp_weight *w;       /* EMBED */
    bp_rope_desc rope;  /* ROPE */
    const float *rope_factors; /* ROPE: n_rot / 2 frequency divisors, or NULL */
    float rope_attn;    /* ROPE with factors: cos and sin times this (Phi-3 LongRoPE's
                           rope.scaling.attn_factor); 0 reads as 1, none */
    bp_attn_desc attn;  /* ATTENTION */
    bp_activation act;  /* GLU */
    struct { bp_moe *m; int32_t top_k; bool renorm; bp_moe_gate gate; } moe; /* MOE */
} bp_step_node;

typedef struct bp_step_prog {
    bp_step_node *nodes;
    int n_nodes, cap;
    int64_t t, n_out;               /* tokens in, logit rows out (the last n_out tokens) */
    int64_t n_batch;                /* rows every buffer has room for */
    int64_t width[BP_SB_COUNT];     /* floats per row */
    int n_layers;
    int32_t n_kv_heads, head_dim;   /* the KV cache */
    int64_t ctx;                    /* positions the cache holds */
    bp_kind kv_kind;                /* K and V */
    bp_weight *embed;               /* the embedding weight (its kind is claimed too) */
    uint64_t gen;                   /* bumped whenever nodes change: a device's recording of
                                       an older gen is stale */
    /* A part of a split step (bp_step_split): the layers [layer0, layer0 + n_layers) of the
     * model, its nodes a view of the whole program's (not owned). part 1: the first (the
     * CPU's, no logits); part 2: the second, whose residual stream's t rows come from the
     * host's X buffer (the layers before ran elsewhere), so a device uploads them before its
     * launches. The whole program: layer0 0, part 0. */
    int layer0;
    int part;
} bp_step_prog;

typedef struct bp_step_kv_host bp_step_kv_host;

/* A backend's state for one context (placed weights, device KV cache, recordings): kept by the
 * caller in bp_step_io.state[backend] between steps and freed with free(self) when the context
 * goes. kv_len: the positions [0, kv_len) whose K and V the backend holds; the caller lowers it
 * when the sequence is cut. hand_back copies positions [from, to) of its cache into the host's,
 * so the CPU can go on where the device stopped (after a failure, or a shape the device
 * declined); without it the CPU could not continue a sequence the device held, and would
 * attend over stale keys. */
typedef struct bp_step_state {
    void (*free)(struct bp_step_state *self);
    bp_status (*hand_back)(struct bp_step_state *self, const bp_step_kv_host *kv, int64_t from, int64_t to);
    int64_t kv_len;
} bp_step_state;

/* Host access to the context's KV cache (the op layer's), so a backend can take over a
 * sequence mid-way (upload positions [0, n)) and hand it back after a failure (download). The
 * bytes are the cache kind's rows for one head, `rows` tokens from `first`. */
struct bp_step_kv_host {
    void *cache;
    bp_status (*read_raw)(void *cache, int layer, bool values, int head, int64_t first, int64_t rows, void *dst);
    bp_status (*write_raw)(void *cache, int layer, bool values, int head, int64_t first, int64_t rows,
                           const void *src);
    int64_t (*length)(void *cache, int layer);  /* positions the host holds in that layer */
};

/* What a step moved between host and device, counted by the device wrappers (the backend that
 * ran it fills this; a CPU step leaves zeros). */
typedef struct bp_step_traffic {
    uint64_t h2d, d2h, submits, launches, h2d_bytes, d2h_bytes;
    bool recorded;             /* this step recorded its submission (else it replayed one) */
    bool updated;              /* that recording updated the earlier graph of its slot in place
                                  (same topology, another shape: no re-instantiation) */
} bp_step_traffic;

/* The device memory a backend places for a program (its step_bytes member, `backplane plan`):
 * what it allocates when it takes the step, computed without a device call. */
typedef struct bp_step_bytes {
    size_t weights;      /* the arenas, n_arenas of them */
    size_t params;       /* norm gains, biases, RoPE frequencies */
    size_t kv;           /* K and V of every layer */
    size_t activations;  /* the step's buffers but the logits */
    size_t logits;       /* host-visible where the device has it */
    size_t io;           /* the step's input */
    size_t extra;        /* the backend's own tables (Vulkan's IQ grids) */
    size_t host;         /* host memory: the placement's and recordings' tables (not device bytes) */
    int n_arenas;
} bp_step_bytes;

/* A tap: called after node `node` of p ran, with its output in io->host (rows [r0, r0 + rows)
 * of its dst buffers, each job's for a matmul) and io->logits, so a caller can read, and on the
 * CPU replace, what the op computed there (`backplane verify --trace`). The CPU calls it after
 * each node; a device step with a tap set runs node by node (no recorded submission) and copies
 * each node's output into io->host before the call (a KV append has no float output: its
 * effect shows in the layer's attention). NULL: no tap, and nothing of this costs anything. */
typedef struct bp_step_io bp_step_io;
typedef void (*bp_step_tap_fn)(void *user, const bp_step_prog *p, int node, bp_step_io *io);

/* Per-backend state slots: one per backends.def row, and one for a backend outside the table
 * (the test mock, whose id is BP_BACKEND_COUNT). */
enum { BP_STEP_STATES = BP_BACKEND_COUNT + 1 };

/* One step's inputs and outputs. */
struct bp_step_io {
    const int32_t *tokens;     /* t ids */
    const int32_t *positions;  /* t positions: pos0, pos0 + 1, ... */
    int64_t pos0;
    float *logits;             /* n_out x n_vocab, written by the step */
    float *host[BP_SB_COUNT];  /* the CPU's activation buffers */
    void *kv;                  /* the CPU's bp_kv_cache */
    bp_step_kv_host kv_host;
    bp_step_state **state;     /* [BP_STEP_STATES]: per-backend state, owned by the caller */
    bp_step_traffic traffic;
    /* Several sequences in one step (bp_context_decode): row i's keys go to, and its query
     * attends over, the cache seq_kv[row_seq[i]] at positions[i]; append_order lists the rows in
     * the order their keys enter the caches (each sequence's positions ascending). NULL
     * row_seq: one sequence, every row in kv at pos0 + i. Only the CPU runs such a step (a
     * device step holds one sequence): the model layer sends it to the CPU by name. */
    void *const *seq_kv;
    const int32_t *row_seq;
    const int32_t *append_order;
    /* The backend that ran the step whole writes, per weight kind it ran (indexed by the
     * GGUF id, < kind_rec_n), the record of its matmul kernel there; the CPU leaves it alone
     * (each of its matmuls is recorded in its weight). */
    bp_run_record *kind_rec;
    int kind_rec_n;
    bp_step_tap_fn tap;        /* see bp_step_tap_fn; NULL: none */
    void *tap_user;
};

/* Program p split for a device that takes its last n_dev layers (0 < n_dev <= n_layers) and
 * the head (output norm, output matmul, soft-cap): *first gets the embedding and the layers
 * before (layers [0, n_layers - n_dev), no logits: n_out 0), *last the rest (layer0 = n_layers - n_dev, part 2, no embedding),
 * both views of p's nodes, valid while p's are. The hidden state crosses once, host to device,
 * between the two. */
void bp_step_split(const bp_step_prog *p, int n_dev, bp_step_prog *first, bp_step_prog *last);

/* The weight kinds the program's matmuls and embedding use (each once): a backend taking the
 * step must claim `jobs` for every one of them (the rule, src/seam/route.c). */
int bp_step_weight_kinds(const bp_step_prog *p, bp_kind *kinds, int max);
/* Whether the program holds a node of kind k. */
bool bp_step_has_node(const bp_step_prog *p, bp_step_kind k);
/* The program's weights in order (the embedding, then each node's), repeats included: start
 * with *it = 0; NULL after the last. */
const bp_weight *bp_step_next_weight(const bp_step_prog *p, int *it);

#endif
