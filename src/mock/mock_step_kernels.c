/* The step's kernels in C (mock_step_kernels.h): each reads its buffers as host pointers and its
 * argument block as the struct gpu_step.h defines, and computes what the Vulkan shader of the
 * same name computes, in double where the CPU reference does. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "gpu/gpu_step.h"
#include "kinds/kinds_internal.h"
#include "mock/mock_step_kernels.h"

#define BUF(i) (*(void **)p[i])

/* The injected error (bp_mock_step_inject): kernels whose name starts with `prefix`, counted
 * from the last bp_mock_step_begin; the nth scales what it writes by factor. */
static struct { char prefix[32]; int nth, seen; float factor; } inj;

void bp_mock_step_inject(const char *prefix, int nth, float factor) {
    memset(&inj, 0, sizeof inj);
    if (!prefix || nth < 1) return;
    snprintf(inj.prefix, sizeof inj.prefix, "%s", prefix);
    inj.nth = nth, inj.factor = factor;
}

void bp_mock_step_begin(void) { inj.seen = 0; }

/* 1, or the factor when this launch of k is the armed one. */
static float injected(const bp_mock_kernel *k) {
    if (!inj.nth) return 1.0f;
    const char *name = strncmp(k->name, "step_", 5) ? k->name : k->name + 5;
    if (strncmp(name, inj.prefix, strlen(inj.prefix))) return 1.0f;
    return ++inj.seen == inj.nth ? inj.factor : 1.0f;
}

static void k_mm(const bp_mock_kernel *k, void **p) {
    const bp_gpu_mm_args *a = p[3];
    const uint8_t *w = (const uint8_t *)BUF(0) + a->w_off;
    const float *x = (const float *)BUF(1) + a->x_off;
    float *y = BUF(2);
    const double f = injected(k);
    float *row = bp_malloc((size_t)a->cols * sizeof(float));
    if (!row) return;
    for (uint32_t r = 0; r < a->rows; r++) {
        if (bp_dequantize((bp_kind)k->kind, w + (size_t)r * a->row_bytes, a->row_bytes, row, a->cols)) break;
        for (uint32_t t = 0; t < a->t; t++) {
            double s = 0;
            for (uint32_t c = 0; c < a->cols; c++) s += (double)row[c] * x[(size_t)t * a->cols + c];
            y[(size_t)t * a->y_stride + a->y_row0 + r] = (float)(s * f);
        }
    }
    bp_free(row);
}

static void k_embed(const bp_mock_kernel *k, void **p) {
    const bp_gpu_mm_args *a = p[3];
    const uint8_t *w = (const uint8_t *)BUF(0) + a->w_off;
    const int32_t *ids = (const int32_t *)BUF(1) + a->x_off;
    float *y = BUF(2);
    const float f = injected(k);
    for (uint32_t i = 0; i < a->t; i++) {
        int64_t r = (int64_t)ids[2 * i] - a->y_row0;
        if (r < 0 || r >= a->rows) continue;
        float *o = y + a->y_stride + (size_t)i * a->cols;
        if (bp_dequantize((bp_kind)k->kind, w + (size_t)r * a->row_bytes, a->row_bytes, o, a->cols)) return;
        for (uint32_t c = 0; c < a->cols; c++) o[c] *= a->fscale * f;
    }
}

static void k_norm(const bp_mock_kernel *k, void **p) {
    const double f = injected(k);
    const bp_gpu_norm_args *a = p[3];
    const float *x = BUF(0), *g = BUF(1);
    float *y = BUF(2);
    for (uint32_t r = 0; r < a->rows; r++) {
        const float *xr = x + a->x_off + (size_t)r * a->n;
        double ss = 0;
        for (uint32_t j = 0; j < a->n; j++) ss += (double)xr[j] * xr[j];
        const double inv = f / sqrt(ss / a->n + (double)a->eps);
        for (uint32_t j = 0; j < a->n; j++)
            y[a->y_off + (size_t)r * a->n + j] = (float)(xr[j] * inv * (a->g_off == 0xFFFFFFFFu ? 1.0 : g[a->g_off + j]));
    }
}

static void k_elt(const bp_mock_kernel *k, void **p) {
    const float f = injected(k);
    const bp_gpu_elt_args *a = p[2];
    float *y = (float *)BUF(0) + a->y_off;
    const float *x = (const float *)BUF(1) + a->x_off;
    for (uint32_t i = 0; i < a->count; i++)
        y[i] = f * (a->mode == 0 ? y[i] + x[i] : a->mode == 1 ? y[i] + x[i % a->n] : (float)(a->f * tanh(y[i] / a->f)));
}

static void k_glu(const bp_mock_kernel *k, void **p) {
    const double f = injected(k);
    const bp_gpu_glu_args *a = p[2];
    float *g = (float *)BUF(0) + a->g_off;
    const float *u = (const float *)BUF(1) + a->u_off;
    for (uint32_t i = 0; i < a->count; i++) {
        const double x = g[i];
        const double act = a->act == BP_SILU ? x / (1.0 + exp(-x))
                           : a->act == BP_GELU_TANH ? 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
                                                    : 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
        g[i] = (float)(act * u[i] * f);
    }
}

static void k_rope(const bp_mock_kernel *k, void **p) {
    const double fi = injected(k);
    const bp_gpu_rope_args *a = p[3];
    float *x = BUF(0);
    const int32_t *io = BUF(1);
    const float *f = (const float *)BUF(2) + a->f_off;
    const uint32_t half = a->n_rot / 2;
    for (uint32_t r = 0; r < a->rows; r++)
        for (uint32_t h = 0; h < a->n_heads; h++)
            for (uint32_t q = 0; q < half; q++) {
                const double th = (double)io[a->pos_idx + 2 * r] * f[q], c = cos(th), s = sin(th);
                float *v = x + a->x_off + ((size_t)r * a->n_heads + h) * a->head_dim;
                const uint32_t i0 = a->neox ? q : 2 * q, i1 = a->neox ? q + half : 2 * q + 1;
                const double x0 = v[i0], x1 = v[i1];
                v[i0] = (float)(fi * (x0 * c - x1 * s)), v[i1] = (float)(fi * (x0 * s + x1 * c));
            }
}

/* A cache row is one token of one head in the cache's kind, row_bytes long. */
static void k_kv(const bp_mock_kernel *k, void **p) {
    const bp_gpu_kv_args *a = p[3];
    const float *src = (const float *)BUF(0) + a->src_off;
    uint8_t *cache = BUF(1);
    const int32_t pos0 = ((const int32_t *)BUF(2))[0];
    const bp_kind_traits *kt = bp_kind_traits_of((bp_kind)k->kind);
    for (uint32_t r = 0; r < a->rows; r++)
        for (uint32_t h = 0; h < a->n_kv_heads; h++)
            kt->quantize(src + ((size_t)r * a->n_kv_heads + h) * a->head_dim,
                         cache + ((size_t)h * a->cap + (size_t)pos0 + r) * a->row_bytes, a->head_dim / kt->info.block_elems);
}

static void k_attn(const bp_mock_kernel *k, void **p) {
    const bp_gpu_attn_args *a = p[5];
    const float *q = BUF(0);
    const uint8_t *K = BUF(1), *V = BUF(2);
    float *o = BUF(3);
    const int32_t *io = BUF(4);
    const uint32_t D = a->head_dim, grp = a->n_heads / a->n_kv_heads;
    const double f = injected(k);
    double *acc = bp_malloc(D * sizeof(double));
    float *kr = bp_malloc(2 * D * sizeof(float)), *vr = kr ? kr + D : NULL;
    for (uint32_t i = 0; acc && kr && i < a->rows; i++)
        for (uint32_t h = 0; h < a->n_heads; h++) {
            const int32_t pos = io[a->pos_idx + 2 * i];
            const int32_t j0 = a->window > 0 && pos - (int32_t)a->window + 1 > 0 ? pos - (int32_t)a->window + 1 : 0;
            const float *qh = q + a->q_off + ((size_t)i * a->n_heads + h) * D;
            const size_t row0 = (size_t)(h / grp) * a->cap;
            double m = -INFINITY, l = 0;
            memset(acc, 0, D * sizeof(double));
            for (int32_t j = j0; j <= pos; j++) {
                if (bp_dequantize((bp_kind)k->kind, K + (row0 + (size_t)j) * a->row_bytes, a->row_bytes, kr, D) ||
                    bp_dequantize((bp_kind)k->kind, V + (row0 + (size_t)j) * a->row_bytes, a->row_bytes, vr, D))
                    goto out;
                double s = 0;
                for (uint32_t d = 0; d < D; d++) s += (double)qh[d] * kr[d];
                s *= a->scale;
                if (a->softcap > 0) s = a->softcap * tanh(s / a->softcap);
                const double mn = s > m ? s : m, corr = exp(m - mn), e = exp(s - mn);
                l = l * corr + e;
                for (uint32_t d = 0; d < D; d++) acc[d] = acc[d] * corr + e * vr[d];
                m = mn;
            }
            float *oh = o + a->o_off + ((size_t)i * a->n_heads + h) * D;
            for (uint32_t d = 0; d < D; d++) oh[d] = l > 0 ? (float)(f * acc[d] / l) : 0.0f;
        }
out:
    bp_free(acc);
    bp_free(kr);
}

enum { PTR = sizeof(void *) };

bool bp_mock_step_kernel(const char *name, bp_mock_kernel *out) {
    memset(out, 0, sizeof *out);
    out->name = name;
    if (!strncmp(name, "step_", 5)) name += 5; /* CUDA's names for the same kernels */
    static const struct { const char *prefix; void (*run)(const bp_mock_kernel *, void **); int nbuf; size_t args; } t[] = {
        {"matvec_", k_mm, 3, sizeof(bp_gpu_mm_args)},       {"gemm_", k_mm, 3, sizeof(bp_gpu_mm_args)},
        {"embed_", k_embed, 3, sizeof(bp_gpu_mm_args)},     {"rms_norm", k_norm, 3, sizeof(bp_gpu_norm_args)},
        {"eltwise", k_elt, 2, sizeof(bp_gpu_elt_args)},     {"glu", k_glu, 2, sizeof(bp_gpu_glu_args)},
        {"rope", k_rope, 3, sizeof(bp_gpu_rope_args)},      {"kv_append_", k_kv, 3, sizeof(bp_gpu_kv_args)},
        {"attention_", k_attn, 5, sizeof(bp_gpu_attn_args)},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const size_t n = strlen(t[i].prefix);
        const bool suffix = t[i].prefix[n - 1] == '_';
        if (suffix ? strncmp(name, t[i].prefix, n) : strcmp(name, t[i].prefix)) continue;
        if (suffix) {
            const bp_kind_info *ki = NULL;
            for (int j = 0; j < bp_kind_table_size() && !ki; j++)
                if (!strcmp(bp_kind_at(j)->name, name + n)) ki = bp_kind_at(j);
            if (!ki) return false;
            out->kind = (int)ki->kind;
            if ((t[i].run == k_kv || t[i].run == k_attn) && !bp_gpu_step_kv_kind(ki->kind)) return false;
        }
        out->run = t[i].run;
        out->nparams = t[i].nbuf + 1;
        for (int b = 0; b < t[i].nbuf; b++) out->sizes[b] = PTR;
        out->sizes[t[i].nbuf] = t[i].args;
        return true;
    }
    return false;
}
