/* The CPU fast paths of the row ops: norms, RoPE, activations, softmax, in f32 with the ISA's
 * vector exp (op_kern.h). Each follows its reference's formula (norm.c, rope.c, act.c,
 * softmax.c) and is tested against it and against NumPy (test_ops_vectors, test_ops_fast). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/error.h"
#include "cpu/cpu_internal.h"
#include "cpu/op_kern.h"
#include "ops/ops_internal.h"

/* sum and sum of squares (about mean) in 8 independent f32 lanes, then double: vectorizable and
 * exact enough for rows of up to ~1e5 (measured NMSE < 1e-12 against the double reference). */
static double row_sum(const float *x, int64_t n) {
    float a[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) a[u] += x[i + u];
    double s = 0;
    for (int u = 0; u < 8; u++) s += a[u];
    for (; i < n; i++) s += x[i];
    return s;
}

static double row_ss(const float *x, int64_t n, float mean) {
    float a[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) a[u] += (x[i + u] - mean) * (x[i + u] - mean);
    double s = 0;
    for (int u = 0; u < 8; u++) s += a[u];
    for (; i < n; i++) s += (double)(x[i] - mean) * (x[i] - mean);
    return s;
}

static void apply(const float *x, float *y, int64_t n, float mean, float rstd, const float *gamma, const float *beta,
                  int64_t per, int64_t c0) {
    if (per == 1) {
        const float *g = gamma ? gamma + c0 : NULL, *b = beta ? beta + c0 : NULL;
        for (int64_t i = 0; i < n; i++) {
            float v = (x[i] - mean) * rstd;
            if (g) v *= g[i];
            if (b) v += b[i];
            y[i] = v;
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float v = (x[i] - mean) * rstd;
        int64_t c = c0 + i / per;
        if (gamma) v *= gamma[c];
        if (beta) v += beta[c];
        y[i] = v;
    }
}

static void norm_rows(const bp_norm_desc *d, const float *x, int64_t r0, int64_t r1, float *y, const bp_op_kern *kn) {
    int64_t n = d->n;
    bool group = d->type == BP_NORM_GROUP;
    int64_t ng = group ? d->groups : 1, per = n / ng, spatial = group ? n / d->channels : 1;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t g = 0; g < ng; g++) {
            const float *xg = x + r * n + g * per;
            float *yg = y + r * n + g * per;
            float mean = d->type == BP_NORM_RMS ? 0.0f : (float)(row_sum(xg, per) / (double)per);
            float rstd = (float)(1.0 / sqrt(row_ss(xg, per, mean) / (double)per + (double)d->eps));
            apply(xg, yg, per, mean, rstd, d->gamma, d->type == BP_NORM_RMS ? NULL : d->beta, spatial,
                  group ? g * (d->channels / ng) : 0);
            if (d->silu) kn->act(BP_SILU, yg, NULL, yg, per);
        }
}

/* cos/sin of each pair's angle once per token, then every head. The angle pos * theta_i is
 * formed and reduced to [-pi, pi] in double (positions reach 1e5 rad and more, where a float
 * angle would be off by 1e-2); sincosf of the reduced angle costs a third of a double sincos
 * (measured ~1 ms of 2 for a 512-token Gemma 3 rope) and is exact to float rounding. */
enum { ROPE_MAX_PAIRS = 1024 };

static void rope_rows(const bp_rope_desc *d, float *x, int64_t j0, int64_t j1, const int32_t *pos) {
    int half = d->n_rot / 2;
    float cs[2 * ROPE_MAX_PAIRS];
    double inv[ROPE_MAX_PAIRS], ms = 1.0;
    for (int i = 0; i < half; i++) inv[i] = bp_rope_pair_scale(d, i, &ms) * pow((double)d->freq_base, -2.0 * i / (double)d->n_rot);
    const float mf = (float)ms; /* YaRN's magnitude, 1 without it */
    int64_t row = (int64_t)d->n_heads * d->head_dim;
    for (int64_t j = j0; j < j1; j++) {
        for (int i = 0; i < half; i++) {
            double th = (double)pos[j] * inv[i];
            th -= 6.283185307179586 * nearbyint(th * 0.15915494309189535);
            float sn, cn;
            sincosf((float)th, &sn, &cn);
            cs[2 * i] = cn * mf, cs[2 * i + 1] = sn * mf;
        }
        for (int h = 0; h < d->n_heads; h++) {
            float *v = x + j * row + (int64_t)h * d->head_dim;
            if (d->layout == BP_ROPE_NEOX)
                for (int i = 0; i < half; i++) {
                    float x0 = v[i], x1 = v[i + half], c = cs[2 * i], s = cs[2 * i + 1];
                    v[i] = x0 * c - x1 * s, v[i + half] = x0 * s + x1 * c;
                }
            else
                for (int i = 0; i < half; i++) {
                    float x0 = v[2 * i], x1 = v[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];
                    v[2 * i] = x0 * c - x1 * s, v[2 * i + 1] = x0 * s + x1 * c;
                }
        }
    }
}

static void softmax_rows(const float *x, int64_t r0, int64_t r1, int64_t n, float scale, float cap, const float *mask,
                         float *y, const bp_op_kern *kn, bool exact) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * n, *mr = mask ? mask + r * n : NULL;
        float *yr = y + r * n, mx = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            float z = scale * xr[i];
            if (cap > 0) z = cap * tanhf(z / cap);
            if (mr) z += mr[i];
            yr[i] = z;
            if (z > mx) mx = z;
        }
        if (mx == -INFINITY) {
            memset(yr, 0, sizeof(float) * (size_t)n);
            continue;
        }
        double sum = 0;
        if (exact || n > INT32_MAX)
            for (int64_t i = 0; i < n; i++) sum += yr[i] = expf(yr[i] - mx);
        else
            sum = kn->exp_sum(yr, (int)n, mx);
        kn->scale(yr, (int)n, (float)(1.0 / sum));
    }
}

/* Rows of each op, shared out over the pool in chunks from an atomic counter (bp_pool_run's
 * rule); each row is computed whole by one thread, so results do not depend on the threads.
 * Elementwise ops count blocks of ACT_ROW elements as rows. */
enum { ACT_ROW = 4096, MIN_PARALLEL_ELEMS = 32768 };

typedef struct rows_task {
    const bp_op_call *c;
    const bp_op_kern *kn, *ka;
    bool exact;
    int64_t rows, chunk;
    _Atomic int64_t next;
} rows_task;

static void rows_range(const rows_task *tk, int64_t r0, int64_t r1) {
    const bp_op_call *c = tk->c;
    switch (c->op) {
    case BP_OP_NORM: norm_rows(c->u.norm.d, c->u.norm.x, r0, r1, c->u.norm.y, tk->ka); break;
    case BP_OP_ROPE: rope_rows(c->u.rope.d, c->u.rope.x, r0, r1, c->u.rope.positions); break;
    case BP_OP_ACT:
    case BP_OP_GLU: {
        int64_t e0 = r0 * ACT_ROW, e1 = r1 * ACT_ROW < c->u.act.n ? r1 * ACT_ROW : c->u.act.n;
        tk->ka->act(c->u.act.a, c->u.act.x + e0, c->u.act.up ? c->u.act.up + e0 : NULL, c->u.act.y + e0, e1 - e0);
        break;
    }
    case BP_OP_SOFTMAX:
        softmax_rows(c->u.softmax.x, r0, r1, c->u.softmax.n, c->u.softmax.scale, c->u.softmax.softcap,
                     c->u.softmax.mask, c->u.softmax.y, tk->kn, tk->exact);
        break;
    default: break;
    }
}

static void rows_worker(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    rows_task *tk = ctx;
    for (;;) {
        int64_t k = atomic_fetch_add_explicit(&tk->next, 1, memory_order_relaxed);
        int64_t r0 = k * tk->chunk;
        if (r0 >= tk->rows) return;
        rows_range(tk, r0, r0 + tk->chunk < tk->rows ? r0 + tk->chunk : tk->rows);
    }
}

bp_status bp_ops_cpu_rows(const bp_op_call *c, char *label, size_t label_len) {
    const bp_op_kern *kn = bp_op_kern_current();
    bool exact = bp_exact_mode();
    /* Exact mode: activations through libm (the portable table), not the polynomial exp. */
    rows_task tk = {.c = c, .kn = kn, .ka = exact ? bp_op_kern_portable() : kn, .exact = exact};
    int64_t elems;
    switch (c->op) {
    case BP_OP_NORM: tk.rows = c->u.norm.t, elems = c->u.norm.t * c->u.norm.d->n; break;
    case BP_OP_ROPE:
        if (c->u.rope.d->n_rot / 2 > ROPE_MAX_PAIRS) {
            snprintf(label, label_len, "CPU reference rope (n_rot over %d)", 2 * ROPE_MAX_PAIRS);
            return bp_op_reference(c);
        }
        tk.rows = c->u.rope.t, elems = c->u.rope.t * c->u.rope.d->n_heads * c->u.rope.d->head_dim;
        break;
    case BP_OP_ACT:
    case BP_OP_GLU: tk.rows = (c->u.act.n + ACT_ROW - 1) / ACT_ROW, elems = c->u.act.n; break;
    case BP_OP_SOFTMAX: tk.rows = c->u.softmax.t, elems = c->u.softmax.t * c->u.softmax.n; break;
    default: return bp_fail(BP_E_UNSUPPORTED, "CPU rows: op %s is not a row op", bp_op_name(c->op));
    }
    snprintf(label, label_len, "CPU %s %s%s", kn->isa, bp_op_name(c->op), exact ? " (exact)" : "");
    bool held = elems >= MIN_PARALLEL_ELEMS && tk.rows > 1 && bp_pool_acquire();
    int nth = held ? bp_pool_size() : 1;
    if (nth > tk.rows) nth = (int)tk.rows;
    /* about 4 chunks per thread */
    tk.chunk = (tk.rows + 4 * (int64_t)nth - 1) / (4 * (int64_t)nth);
    if (tk.chunk < 1) tk.chunk = 1;
    atomic_init(&tk.next, 0);
    if (nth > 1) bp_pool_run(rows_worker, &tk, nth);
    else rows_worker(&tk, 0, 1);
    if (held) bp_pool_release();
    return BP_OK;
}
