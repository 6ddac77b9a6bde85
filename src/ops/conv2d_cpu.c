/* conv2d on the CPU: the input normalized as it is loaded, neighbourhoods gathered a tile at a
 * time, each tile one GEMM through the CPU backend's kernels (any of the 28 kinds, int8 VNNI or
 * f32 panels as bp_cpu_gemm chooses). The unfolded input (oh*ow x k*k*cin floats: 47 MB for a
 * 64x64x320 3x3 conv, 94 MB at 640 channels) never exists.
 *
 * Per tile of P consecutive output pixels (raster order, P = TILE_BYTES / (k*k*cin*4), at least
 * one): the input rows the tile reaches are normalized (norm, affine, SiLU) into a ring of
 * normalized rows, each row once per call (a row stays in the ring while later tiles need it;
 * rows a stride skips are never normalized), then each pixel's k x k x cin patch is copied from
 * the ring (zeros outside the image) into the tile, and Y[P][cout] = tile W^T runs as one
 * bp_cpu_gemm.
 *
 * Peak extra memory per call:
 *     the tile: TILE_BYTES (4 MiB; one pixel's patch if that is larger)
 *   + the ring, only with a norm or SiLU: R rows x w x cin floats, R = (n - 1) * stride + k
 *     (stride < k) or n * k (stride >= k), n = ceil(P/ow) + 1 output rows, R <= h
 *   + GroupNorm statistics: NCHUNK x cin doubles + 2 x cin floats (NCHUNK = 64)
 *   + what bp_cpu_gemm keeps for a P-row batch (its int8 activations: about P*k*k*cin bytes)
 * 64x64x320 k3 with GroupNorm: 4 MiB + 720 KiB (9 rows) + 160 KiB + ~1 MiB, about 6 MiB against
 * the 47 MB an im2col buffer would take. A 1x1 stride-1 conv with no norm and no SiLU is one
 * GEMM straight over x: nothing extra.
 *
 * Determinism: GroupNorm statistics are summed per fixed pixel chunk and the chunks combined in
 * order, so results do not depend on the thread count (as the CPU backend promises). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "ops/conv2d_internal.h"
#include "cpu/op_kern.h"

/* 4 MiB: a tile of 364 pixels for a 3x3x320 patch. Per tile the GEMM reads (and its panel
 * kernels unpack) the whole weight again, 1.8 MB of F16 at 320 -> 320, so small tiles pay
 * that per few pixels: on the 2-core EPYC VM 1 MiB tiles ran ~25% slower than 2-8 MiB, which
 * were within noise of each other (64x64x320, F16 and Q8_0, load average ~12). */
enum { TILE_BYTES = 4 << 20, NCHUNK = 64, GATHER_CHUNK = 8 };
static size_t tile_bytes = TILE_BYTES;
void bp_conv2d_cpu_set_tile_bytes(size_t bytes) { tile_bytes = bytes ? bytes : TILE_BYTES; }

typedef struct conv_run {
    const bp_conv2d_params *p;
    const float *x;
    int64_t oh, ow, pad, kk_cin;
    bool transform;           /* norm or SiLU: read through the ring */
    /* GroupNorm folded into x * ga[c] + gb[c] */
    float *ga, *gb;
    double *psum;             /* [NCHUNK][cin] partial sums, then partial squared deviations */
    const double *mean_g;     /* per group, for the second pass */
    /* the ring of normalized rows */
    float *ring;
    int64_t ring_rows, *ring_tag;
    int64_t *fill_rows, nfill; /* rows of this tile not in the ring yet */
    /* the tile */
    float *tile;
    int64_t p0, np;
    _Atomic int64_t next;
} conv_run;

/* Run fn over the pool (the calling thread alone when another thread holds it). */
static void par(bp_pool_fn fn, conv_run *r) {
    atomic_store(&r->next, 0);
    if (bp_pool_acquire()) {
        bp_pool_run(fn, r, bp_pool_size());
        bp_pool_release();
    } else {
        fn(r, 0, 1);
    }
}

/* ---- GroupNorm statistics ------------------------------------------------------------------ */

static void chunk_range(const conv_run *r, int64_t c, int64_t *i0, int64_t *i1) {
    int64_t npix = r->p->h * r->p->w;
    *i0 = npix * c / NCHUNK;
    *i1 = npix * (c + 1) / NCHUNK;
}

static void stat_sum(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    conv_run *r = ctx;
    int64_t cin = r->p->cin, cg = cin / r->p->groups;
    for (int64_t c; (c = atomic_fetch_add(&r->next, 1)) < NCHUNK;) {
        double *ps = r->psum + c * cin;
        int64_t i0, i1;
        chunk_range(r, c, &i0, &i1);
        memset(ps, 0, sizeof(double) * (size_t)cin);
        for (int64_t i = i0; i < i1; i++) {
            const float *xr = r->x + i * cin;
            if (!r->mean_g)
                for (int64_t ch = 0; ch < cin; ch++) ps[ch] += xr[ch];
            else
                for (int64_t ch = 0; ch < cin; ch++) {
                    double d = xr[ch] - r->mean_g[ch / cg];
                    ps[ch] += d * d;
                }
        }
    }
}

/* Sum of the per-channel partials of group g, chunks in order. */
static double group_total(const conv_run *r, int64_t g) {
    int64_t cin = r->p->cin, cg = cin / r->p->groups;
    double t = 0;
    for (int64_t c = 0; c < NCHUNK; c++)
        for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) t += r->psum[c * cin + ch];
    return t;
}

static bp_status groupnorm_affine(conv_run *r) {
    const bp_conv2d_params *p = r->p;
    int64_t G = p->groups, cg = p->cin / G;
    double n = (double)(p->h * p->w * cg);
    double *mean = bp_malloc(sizeof(double) * (size_t)G);
    if (!mean) return bp_fail(BP_E_NOMEM, "conv2d: no memory for GroupNorm statistics");
    r->mean_g = NULL;
    par(stat_sum, r);
    for (int64_t g = 0; g < G; g++) mean[g] = group_total(r, g) / n;
    r->mean_g = mean;
    par(stat_sum, r);
    for (int64_t g = 0; g < G; g++) {
        double rstd = 1.0 / sqrt(group_total(r, g) / n + (double)p->eps);
        for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++) {
            double a = (p->gamma ? (double)p->gamma[ch] : 1.0) * rstd;
            r->ga[ch] = (float)a;
            r->gb[ch] = (float)((p->beta ? (double)p->beta[ch] : 0.0) - mean[g] * a);
        }
    }
    r->mean_g = NULL;
    bp_free(mean);
    return BP_OK;
}

/* ---- the ring of normalized rows ------------------------------------------------------------ */

/* The SiLU's table: the vector exp, or libm in exact mode (as the op layer's activations). */
static const bp_op_kern *silu_kern(void) { return bp_exact_mode() ? bp_op_kern_portable() : bp_op_kern_current(); }

static void norm_pixel(const conv_run *r, const float *xr, float *o) {
    const bp_conv2d_params *p = r->p;
    int64_t cin = p->cin;
    if (p->norm == BP_CONV_NORM_GROUP) {
        for (int64_t c = 0; c < cin; c++) o[c] = xr[c] * r->ga[c] + r->gb[c];
    } else if (p->norm == BP_CONV_NORM_LAYER) {
        double sum = 0, ss = 0;
        for (int64_t c = 0; c < cin; c++) sum += xr[c];
        double mean = sum / (double)cin;
        for (int64_t c = 0; c < cin; c++) ss += (xr[c] - mean) * (xr[c] - mean);
        float rstd = (float)(1.0 / sqrt(ss / (double)cin + (double)p->eps)), m = (float)mean;
        for (int64_t c = 0; c < cin; c++)
            o[c] = (xr[c] - m) * rstd * (p->gamma ? p->gamma[c] : 1.0f) + (p->beta ? p->beta[c] : 0.0f);
    } else {
        memcpy(o, xr, sizeof(float) * (size_t)cin);
    }
    if (p->silu) silu_kern()->act(BP_SILU, o, NULL, o, cin);
}

/* The ring slot of input row iy. With stride < k output rows share input rows, and a window of
 * R consecutive rows covers a tile; with stride >= k each needed row belongs to one output row
 * oy and kernel row ky, and (oy, ky) numbered oy * k + ky are consecutive over a tile. */
static int64_t slot_of(const conv_run *r, int64_t iy) {
    int64_t s = r->p->stride, k = r->p->k;
    if (s < k) return iy % r->ring_rows;
    int64_t q = (iy + r->pad) / s, ky = (iy + r->pad) % s;
    return (q * k + ky) % r->ring_rows;
}

/* Units: (row to fill, run of GATHER_CHUNK pixels). */
static void fill_task(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    conv_run *r = ctx;
    int64_t w = r->p->w, cin = r->p->cin, per_row = (w + GATHER_CHUNK - 1) / GATHER_CHUNK;
    for (int64_t u; (u = atomic_fetch_add(&r->next, 1)) < r->nfill * per_row;) {
        int64_t iy = r->fill_rows[u / per_row], x0 = (u % per_row) * GATHER_CHUNK;
        int64_t x1 = x0 + GATHER_CHUNK < w ? x0 + GATHER_CHUNK : w;
        float *dst = r->ring + slot_of(r, iy) * w * cin;
        for (int64_t ix = x0; ix < x1; ix++) norm_pixel(r, r->x + (iy * w + ix) * cin, dst + ix * cin);
    }
}

/* Input row iy as the gather reads it. */
static const float *src_row(const conv_run *r, int64_t iy) {
    int64_t wc = r->p->w * r->p->cin;
    return r->transform ? r->ring + slot_of(r, iy) * wc : r->x + iy * wc;
}

/* ---- gather ----------------------------------------------------------------------------------- */

static void gather_pixel(const conv_run *r, int64_t pix, float *dst) {
    const bp_conv2d_params *p = r->p;
    int64_t oy = pix / r->ow, ox = pix % r->ow, k = p->k, cin = p->cin;
    int64_t ix0 = ox * p->stride - r->pad;
    /* kx whose ix = ix0 + kx lies in [0, w) */
    int64_t kx0 = ix0 < 0 ? -ix0 : 0, kx1 = p->w - ix0 < k ? p->w - ix0 : k;
    for (int64_t ky = 0; ky < k; ky++, dst += k * cin) {
        int64_t iy = oy * p->stride - r->pad + ky;
        if (iy < 0 || iy >= p->h || kx1 <= kx0) {
            memset(dst, 0, sizeof(float) * (size_t)(k * cin));
            continue;
        }
        if (kx0 > 0) memset(dst, 0, sizeof(float) * (size_t)(kx0 * cin));
        memcpy(dst + kx0 * cin, src_row(r, iy) + (ix0 + kx0) * cin, sizeof(float) * (size_t)((kx1 - kx0) * cin));
        if (kx1 < k) memset(dst + kx1 * cin, 0, sizeof(float) * (size_t)((k - kx1) * cin));
    }
}

static void gather_task(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    conv_run *r = ctx;
    for (int64_t c; (c = atomic_fetch_add(&r->next, 1)) * GATHER_CHUNK < r->np;) {
        int64_t i0 = c * GATHER_CHUNK, i1 = i0 + GATHER_CHUNK < r->np ? i0 + GATHER_CHUNK : r->np;
        for (int64_t i = i0; i < i1; i++) gather_pixel(r, r->p0 + i, r->tile + i * r->kk_cin);
    }
}

/* ---- the call --------------------------------------------------------------------------------- */

static void add_bias(const bp_conv2d_params *p, float *y, int64_t npix) {
    if (!p->bias) return;
    for (int64_t i = 0; i < npix; i++)
        for (int64_t c = 0; c < p->cout; c++) y[i * p->cout + c] += p->bias[c];
}

/* The input rows output pixels [p0, p0 + np) reach that the ring lacks: tagged and listed. */
static void rows_to_fill(conv_run *r) {
    int64_t oy0 = r->p0 / r->ow, oy1 = (r->p0 + r->np - 1) / r->ow;
    r->nfill = 0;
    for (int64_t oy = oy0; oy <= oy1; oy++)
        for (int64_t ky = 0; ky < r->p->k; ky++) {
            int64_t iy = oy * r->p->stride - r->pad + ky;
            if (iy < 0 || iy >= r->p->h) continue;
            int64_t slot = slot_of(r, iy);
            if (r->ring_tag[slot] == iy) continue;
            r->ring_tag[slot] = iy;
            r->fill_rows[r->nfill++] = iy;
        }
}

int64_t bp_conv2d_cpu_tile_pixels(const bp_conv2d_params *p) {
    int64_t oh, ow;
    if (bp_conv2d_out_size(p, &oh, &ow)) return 1;
    if (p->k == 1 && p->stride == 1 && p->norm == BP_CONV_NORM_NONE && !p->silu) return oh * ow; /* one GEMM */
    int64_t P = (int64_t)(tile_bytes / ((size_t)(p->k * p->k * p->cin) * sizeof(float)));
    return P < 1 ? 1 : P > oh * ow ? oh * ow : P;
}

bp_status bp_conv2d_cpu(bp_weight *w, const bp_conv2d_params *p, const float *x, float *y) {
    conv_run r = {.p = p, .x = x, .pad = p->k / 2, .kk_cin = p->k * p->k * p->cin};
    bp_status s = bp_conv2d_out_size(p, &r.oh, &r.ow);
    if (s) return s;
    int64_t nout = r.oh * r.ow;
    r.transform = p->norm != BP_CONV_NORM_NONE || p->silu;
    if (p->k == 1 && p->stride == 1 && !r.transform) { /* the input is already the unfolded matrix */
        s = bp_cpu_gemm(w, x, nout, y);
        if (!s) add_bias(p, y, nout);
        return s;
    }
    int64_t P = bp_conv2d_cpu_tile_pixels(p);
    /* Output rows one tile touches (a run of P pixels starting mid-row reaches one more), and
     * the ring rows they need. */
    int64_t out_rows = (P + r.ow - 1) / r.ow + 1;
    if (out_rows > r.oh) out_rows = r.oh;
    if (p->stride < p->k) {
        r.ring_rows = (out_rows - 1) * p->stride + p->k;
        if (r.ring_rows > p->h) r.ring_rows = p->h;
    } else {
        r.ring_rows = out_rows * p->k;
    }
    size_t ring_f = r.transform ? (size_t)(r.ring_rows * p->w * p->cin) : 0;
    r.tile = bp_aligned_alloc(64, sizeof(float) * (size_t)(P * r.kk_cin));
    r.ring = ring_f ? bp_aligned_alloc(64, sizeof(float) * ring_f) : NULL;
    r.ring_tag = bp_malloc(sizeof(int64_t) * 2 * (size_t)r.ring_rows);
    r.fill_rows = r.ring_tag ? r.ring_tag + r.ring_rows : NULL;
    bool gn = p->norm == BP_CONV_NORM_GROUP;
    if (gn) {
        r.ga = bp_malloc(sizeof(float) * 2 * (size_t)p->cin);
        r.gb = r.ga ? r.ga + p->cin : NULL;
        r.psum = bp_malloc(sizeof(double) * NCHUNK * (size_t)p->cin);
    }
    if (!r.tile || (ring_f && !r.ring) || !r.ring_tag || (gn && (!r.ga || !r.psum))) {
        s = bp_fail(BP_E_NOMEM, "conv2d: no memory for a %lld-pixel tile of %lld x %lld x %lld patches", (long long)P,
                    (long long)p->k, (long long)p->k, (long long)p->cin);
        goto out;
    }
    for (int64_t i = 0; i < r.ring_rows; i++) r.ring_tag[i] = -1;
    if (gn && (s = groupnorm_affine(&r))) goto out;
    for (r.p0 = 0; r.p0 < nout; r.p0 += P) {
        r.np = nout - r.p0 < P ? nout - r.p0 : P;
        if (r.transform) {
            rows_to_fill(&r);
            if (r.nfill) par(fill_task, &r);
        }
        par(gather_task, &r);
        s = bp_cpu_gemm(w, r.tile, r.np, y + r.p0 * p->cout);
        if (s) goto out;
        add_bias(p, y + r.p0 * p->cout, r.np);
    }
out:
    bp_free(r.tile);
    bp_free(r.ring);
    bp_free(r.ring_tag);
    bp_free(r.ga);
    bp_free(r.psum);
    return s;
}
