/* bp_plan against the run: for each tiny architecture, KV kind and context (and Gemma 3 270M,
 * and the Vulkan step where lavapipe is here), a plan from the metadata, then in a fresh process
 * (so no earlier case's pool buffers are in the baseline) the model loaded, a context made and a
 * prefill and two decode steps run; the library heap's peak and the device ledger's peak since
 * before the load must be at most the plan's figure and at least 95% of it. And the plan reads no
 * tensor data: it is made from a copy of the file whose tensor pages are unreadable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backplane.h"
#include "harness.h"
#include "model/model_ref.h"

typedef struct result {
    uint64_t heap, dev, ok; /* no padding: the whole struct goes through a pipe (memcheck) */
} result;

/* In the child: load, context, prefill of `fill` tokens, 2 decode steps; the peaks. */
static result measure(const char *path, const bp_plan_params *pp, int64_t fill, bool vulkan) {
    result r = {0};
    if (vulkan && bp_set_backend_preference("vulkan", BP_FORCE)) return r;
    bp_backend_info bi;
    for (int i = 0; i < bp_backend_count(); i++) bp_backend_info_at(i, &bi); /* drivers first */
    uint64_t h0, d0;
    bp_host_memory(&h0, NULL, true);
    bp_device_memory(&d0, NULL);
    bp_device_memory_peak(true);
    bp_model *m = NULL;
    bp_context *c = NULL;
    bp_context_params cp = bp_context_default_params();
    cp.n_ctx = pp->n_ctx, cp.kv_kind = pp->kv_kind, cp.device_budget = pp->device_budget;
    if (bp_model_load(path, NULL, &m) || bp_context_create(m, &cp, &c)) goto out;
    bp_model_info info;
    bp_model_get_info(m, &info);
    int32_t *ids = malloc((size_t)fill * sizeof *ids);
    if (!ids) goto out;
    for (int64_t i = 0; i < fill; i++) ids[i] = (int32_t)((i * 7919 + 11) % info.n_vocab);
    bool ok = bp_context_eval(c, ids, fill, 1) == BP_OK;
    for (int k = 0; ok && k < 2 && bp_context_pos(c) < bp_context_n_ctx(c); k++)
        ok = bp_context_eval(c, ids + k, 1, 1) == BP_OK;
    free(ids);
    if (!ok) goto out;
    uint64_t hp;
    bp_host_memory(NULL, &hp, false);
    r.heap = hp - h0;
    r.dev = bp_device_memory_peak(false) - d0;
    r.ok = 1;
out:
    if (!r.ok) fprintf(stderr, "child: %s\n", bp_last_error());
    bp_context_free(c);
    bp_model_free(m);
    return r;
}

/* measure() in a fresh process. */
static result measure_fresh(const char *path, const bp_plan_params *pp, int64_t fill, bool vulkan) {
    int fd[2];
    result r = {0};
    if (pipe(fd)) return r;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        result x = measure(path, pp, fill, vulkan);
        ssize_t w = write(fd[1], &x, sizeof x);
        _exit(w == (ssize_t)sizeof x ? 0 : 1);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], &r, sizeof r);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    if (n != (ssize_t)sizeof r || !WIFEXITED(st) || WEXITSTATUS(st)) r.ok = 0;
    return r;
}

static void within(const char *what, const char *label, uint64_t measured, uint64_t plan) {
    double ratio = plan ? (double)measured / (double)plan : 0;
    if (getenv("BP_TEST_VERBOSE"))
        fprintf(stderr, "%s %s: measured %llu, plan %llu (%.4f)\n", label, what, (unsigned long long)measured,
                (unsigned long long)plan, ratio);
    CHECK(measured <= plan, "%s: %s %llu bytes, above the plan's %llu", label, what,
              (unsigned long long)measured, (unsigned long long)plan);
    CHECK(ratio >= 0.95, "%s: %s %llu bytes, more than 5%% below the plan's %llu", label, what,
              (unsigned long long)measured, (unsigned long long)plan);
}

/* A plan of path with Vulkan forced: a budget that splits its layers nearest the middle
 * (bisected between 0 and the whole step's bytes), in a child (see vulkan_here); 0 when none
 * does. */
static uint64_t split_budget(const char *path, int64_t n_ctx, bp_kind kv) {
    int fd[2];
    if (pipe(fd)) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        uint64_t best = 0;
        bp_plan_params pp = bp_plan_default_params();
        pp.n_ctx = n_ctx, pp.kv_kind = kv;
        bp_plan *p = NULL;
        if (!bp_set_backend_preference("vulkan", BP_FORCE) && !bp_plan_file(path, &pp, &p) && p->n_mem > 1) {
            uint64_t lo = 0, hi = p->mem[1].total;
            const int L = p->n_layers, want = L / 2 > 0 ? L / 2 : 1;
            int best_d = -L;
            for (int i = 0; i < 16 && best_d != want; i++) {
                bp_plan *q = NULL;
                pp.device_budget = lo + (hi - lo) / 2;
                if (bp_plan_file(path, &pp, &q)) break;
                const int d = q->split ? q->n_layers_device : q->n_mem > 1 ? L : 0;
                bp_plan_free(q);
                if (d > 0 && d < L && abs(2 * d - L) < abs(2 * best_d - L)) best_d = d, best = pp.device_budget;
                if (d < want) lo = pp.device_budget;
                else hi = pp.device_budget;
            }
        }
        bp_plan_free(p);
        ssize_t w = write(fd[1], &best, sizeof best);
        _exit(w == (ssize_t)sizeof best ? 0 : 1);
    }
    close(fd[1]);
    uint64_t b = 0;
    if (read(fd[0], &b, sizeof b) != (ssize_t)sizeof b) b = 0;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return b;
}

static void one_case_budget(const char *path, const char *name, int64_t n_ctx, bp_kind kv, int64_t fill, bool vulkan,
                            uint64_t budget) {
    char label[200];
    snprintf(label, sizeof label, "%s ctx %lld KV %s%s", name, (long long)n_ctx, bp_kind_lookup((uint32_t)kv)->name,
             vulkan ? " vulkan" : "");
    if (budget)
        snprintf(label + strlen(label), sizeof label - strlen(label), " budget %.2f MiB", (double)budget / 1048576.0);
    bp_plan_params pp = bp_plan_default_params();
    pp.n_ctx = n_ctx, pp.kv_kind = kv, pp.device_budget = budget;
    /* the plan in a child too: a plan with Vulkan forced must be made where it is forced */
    int fd[2];
    CHECK(pipe(fd) == 0, "pipe(fd) == 0");
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        uint64_t v[5] = {0};
        bp_plan *p = NULL;
        if ((!vulkan || !bp_set_backend_preference("vulkan", BP_FORCE)) && !bp_plan_file(path, &pp, &p)) {
            v[0] = p->heap, v[1] = p->n_mem > 1 ? p->mem[1].total : 0, v[2] = (uint64_t)(p->n_mem > 1);
            v[3] = p->split, v[4] = (uint64_t)p->n_layers_device;
            bp_plan_free(p);
        } else
            fprintf(stderr, "plan: %s\n", bp_last_error());
        ssize_t w = write(fd[1], v, sizeof v);
        _exit(w == (ssize_t)sizeof v ? 0 : 1);
    }
    close(fd[1]);
    uint64_t v[5] = {0};
    CHECK(read(fd[0], v, sizeof v) == (ssize_t)sizeof v, "read(fd[0], v, sizeof v) == (ssize_t)sizeof v");
    close(fd[0]);
    waitpid(pid, NULL, 0);
    CHECK(v[0] > 0, "%s: no plan", label);
    CHECK(!vulkan || v[2], "%s: the plan does not put the step on Vulkan", label);
    CHECK(!budget || v[3], "%s: the plan does not split the layers", label);
    if (budget && getenv("BP_TEST_VERBOSE")) fprintf(stderr, "%s: %llu layers on the device\n", label, (unsigned long long)v[4]);
    result r = measure_fresh(path, &pp, fill, vulkan);
    CHECK(r.ok, "%s: the run failed", label);
    if (!r.ok || !v[0]) return;
    /* a split: the CPU's part (and its share of the host) by the heap, the device's by the ledger */
    if (!vulkan || v[3]) within("host heap", label, r.heap, v[0]);
    if (vulkan) within("device ledger", label, r.dev, v[1]);
}

static void one_case(const char *path, const char *name, int64_t n_ctx, bp_kind kv, int64_t fill, bool vulkan) {
    one_case_budget(path, name, n_ctx, kv, fill, vulkan, 0);
}

/* A device budget that splits the layers: the plan names the split, the run places it. */
static void split_case(const char *path, const char *name, int64_t n_ctx, bp_kind kv, int64_t fill) {
    const uint64_t b = split_budget(path, n_ctx, kv);
    CHECK(b > 0, "%s ctx %lld: no device budget splits the layers", name, (long long)n_ctx);
    if (b) one_case_budget(path, name, n_ctx, kv, fill, true, b);
}

/* The plan made from a copy of the file whose tensor pages cannot be read: any read of tensor
 * data is a SIGSEGV, so this passing proves the plan reads metadata only. */
static void no_tensor_reads_here(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "f != NULL");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    long pg = sysconf(_SC_PAGESIZE);
    size_t maplen = (len + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    uint8_t *buf = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(buf != MAP_FAILED, "buf != MAP_FAILED");
    CHECK(fread(buf, 1, len, f) == len, "fread(buf, 1, len, f) == len");
    fclose(f);
    /* where the tensor data starts: the lowest tensor offset */
    bp_gguf *g = NULL;
    CHECK(bp_gguf_open_memory(buf, len, &g) == BP_OK, "bp_gguf_open_memory(buf, len, &g) == BP_OK");
    size_t lo = len;
    for (int64_t i = 0; g && i < bp_gguf_tensor_count(g); i++) {
        size_t off = (size_t)((const uint8_t *)bp_gguf_tensor_at(g, i)->data - buf);
        if (off < lo) lo = off;
    }
    bp_gguf_close(g);
    size_t first = (lo + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    CHECK(first + 64 * (size_t)pg < maplen, "%s: too little tensor data to protect", path);
    CHECK(mprotect(buf + first, maplen - first, PROT_NONE) == 0, "mprotect(buf + first, maplen - first, PROT_NONE) == 0");
    bp_plan *p = NULL;
    bp_status s = bp_plan_buffer(buf, len, NULL, &p);
    CHECK(s == BP_OK, "plan of a copy with unreadable tensor pages: %s", bp_last_error());
    CHECK(p && p->n_tensors > 0 && p->mem[0].total > 0, "p && p->n_tensors > 0 && p->mem[0].total > 0");
    bp_plan_free(p);
    munmap(buf, maplen);
}

/* In a child: the parent's process must not decide the backends before the Vulkan cases. */
static void no_tensor_reads(const char *path) {
    const int before = bp_test_failed; /* the child's count starts from the parent's */
    pid_t pid = fork();
    if (pid == 0) {
        no_tensor_reads_here(path);
        _exit(bp_test_failed > before ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the plan of a copy with unreadable tensor pages failed or crashed",
          path);
}

/* Asked in a child: a device opened here would be shared with every later fork (undefined for
 * Vulkan, and it hangs), so the parent never opens one. */
static bool vulkan_here(void) {
    pid_t pid = fork();
    if (pid == 0) {
        bp_backend_info bi;
        for (int i = 0; i < bp_backend_count(); i++)
            if (bp_backend_info_at(i, &bi) == BP_OK && !strcmp(bi.name, "vulkan")) _exit(bi.compiled && bi.device[0] ? 0 : 1);
        _exit(1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void) {
    /* the per-thread figures (scratch, slack) held at one size whatever the machine's cores */
    setenv("BACKPLANE_THREADS", "2", 1);
    const char *archs[] = {"llama", "qwen2", "qwen3", "gemma3"};
    const bp_kind kvs[] = {BP_KIND_F16, BP_KIND_Q4_0, BP_KIND_Q8_0, BP_KIND_F32};
    /* a prefill up to two short of the context, then two decode steps: the decode makes the CPU's
     * repacked copies, the full cache the largest attention scratch (the plan's bounds) */
    const struct { int64_t ctx, fill; } ctxs[] = {{64, 62}, {512, 510}, {32768, 40}};
    /* BP_TEST_QUICK (valgrind): two KV kinds, no Gemma */
    const bool quick = bp_test_quick();
    const size_t n_kvs = quick ? 2 : sizeof kvs / sizeof *kvs;
    for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
        const char *path = model_tiny_path(archs[a]);
        if (!path) break;
        for (size_t k = 0; k < n_kvs; k++)
            for (size_t c = 0; c < sizeof ctxs / sizeof *ctxs; c++)
                one_case(path, archs[a], ctxs[c].ctx, kvs[k], ctxs[c].fill, false);
        no_tensor_reads(path);
    }
    const char *gemma = quick ? NULL : model_gemma_path();
    if (gemma) {
        one_case(gemma, "gemma3-270m", 4096, BP_KIND_F16, 40, false);
        one_case(gemma, "gemma3-270m", 512, BP_KIND_Q8_0, 40, false);
        no_tensor_reads(gemma);
    }
    /* the device step: the ledger against the step's layout */
    setenv("BACKPLANE_VULKAN", "1", 0); /* valgrind.sh turns it off: its SKIP is fine there */
    if (vulkan_here()) {
        for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
            const char *path = model_tiny_path(archs[a]);
            if (!path) break;
            one_case(path, archs[a], 512, BP_KIND_F16, 40, true);
            one_case(path, archs[a], 64, BP_KIND_Q8_0, 62, true);
            split_case(path, archs[a], 512, BP_KIND_F16, 510);
            split_case(path, archs[a], 64, BP_KIND_Q8_0, 62);
        }
        if (gemma) {
            one_case(gemma, "gemma3-270m", 1024, BP_KIND_F16, 20, true);
            split_case(gemma, "gemma3-270m", 1024, BP_KIND_F16, 20);
        }
    } else {
        BP_SKIP("test_plan's Vulkan cases: no Vulkan device here (lavapipe: apt-get install mesa-vulkan-drivers)");
    }
    /* a file that is not a model: the reader's error, no plan */
    bp_plan *p = (bp_plan *)1;
    CHECK(bp_plan_file("/nonexistent.gguf", NULL, &p) != BP_OK && p == NULL, "a plan of a missing file");
    return bp_test_finish();
}
