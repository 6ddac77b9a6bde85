/* The device op cache holds every kernel any backend's registry has (issue 13: it held a fixed
 * 64 while CUDA's registry has 85 -- matvec, gemm and gemm_exact per kind plus quantize_q8 --
 * so from the 65th lookup on every op failed with "op cache full").
 *
 * On the mock device (its "nop_<name>" kernels stand for any registry), on every build: for each
 * backend of backends.def, the names it looks up -- matvec_<K>, gemm_<K> and gemm_exact_<K> for
 * every kind its capability table claims, plus its helpers -- all resolve, each is looked up in
 * the backend once (the cache answers the second time), and handles stay valid as the cache
 * grows. With CUDA compiled in, the count is also checked against CUDA's real registry. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mock/mock_device.h"
#include "seam/seam.h"

#if defined(BP_HAVE_CUDA)
#include "cuda/cuda_internal.h"
#endif

enum { MAX_NAMES = 512 };

/* The names backend `caps` can ask its device for, as "nop_" kernels. */
static int registry_names(const bp_backend_caps *caps, char names[][64], int max) {
    int n = 0;
    snprintf(names[n++], 64, "nop_%s_quantize_q8", caps->name);
    for (int i = 0; i < bp_kind_table_size() && n + 3 <= max; i++) {
        const bp_kind_info *ki = bp_kind_at(i);
        if (!caps->kernel(BP_OP_MATVEC, ki->kind)) continue;
        snprintf(names[n++], 64, "nop_%s_matvec_%s", caps->name, ki->name);
        if (!caps->kernel(BP_OP_GEMM, ki->kind)) continue;
        snprintf(names[n++], 64, "nop_%s_gemm_%s", caps->name, ki->name);
        snprintf(names[n++], 64, "nop_%s_gemm_exact_%s", caps->name, ki->name);
    }
    return n;
}

static void fits(const char *what, char names[][64], int n) {
    bp_device *dev = NULL;
    CHECK_OK(bp_mock_device_open(&dev));
    if (!dev) return;
    bp_kernel **k = calloc((size_t)n, sizeof *k);
    int ok = 0;
    for (int i = 0; i < n; i++) ok += bp_dev_kernel(dev, names[i], &k[i]) == BP_OK && k[i];
    CHECK(ok == n, "%s: %d of %d kernels resolved (%s)", what, ok, n, bp_last_error());
    CHECK(bp_mock_lookups(dev) == n, "%s: each looked up once (%d lookups for %d names)", what, bp_mock_lookups(dev), n);
    int same = 0;
    for (int i = 0; i < n; i++) {
        bp_kernel *again = NULL;
        same += bp_dev_kernel(dev, names[i], &again) == BP_OK && again == k[i];
    }
    CHECK(same == n && bp_mock_lookups(dev) == n, "%s: the second pass is served by the cache (%d of %d)", what, same, n);
    free(k);
    bp_device_close(dev);
}

int main(void) {
    static char names[MAX_NAMES][64];
    int largest = 0;
    for (int b = 0; b < BP_BACKEND_CPU; b++) {
        const bp_backend_caps *caps = bp_backend_caps_of((bp_backend_id)b);
        int n = registry_names(caps, names, MAX_NAMES);
        fits(caps->name, names, n);
        if (n > largest) largest = n;
        fprintf(stderr, "%-7s registry: %d kernels\n", caps->name, n);
    }
    CHECK(largest > 64, "the largest registry (%d) is past the old fixed size of 64", largest);
    /* A registry far past any of today's: the cache has no fixed size. */
    for (int i = 0; i < MAX_NAMES; i++) snprintf(names[i], 64, "nop_synthetic_%d", i);
    fits("512 synthetic kernels", names, MAX_NAMES);
#if defined(BP_HAVE_CUDA)
    /* CUDA's real registry: every row is a name kernel_lookup answers; the op cache must hold
     * them all (test_cuda_kernels looks each one up on a GPU). */
    int ncu = 0;
    for (int t = 0; t < 3; t++) {
        const bp_cu_kernel_entry *tab = t == 0 ? bp_cu_matvec_kernels : t == 1 ? bp_cu_gemm_kernels : bp_cu_gemm_exact_kernels;
        for (const bp_cu_kernel_entry *e = tab; e->name; e++) snprintf(names[ncu++], 64, "nop_cuda_real_%s", e->name);
    }
    CHECK(ncu >= 85, "CUDA registry has %d kernels", ncu);
    fits("CUDA's real registry", names, ncu);
    fprintf(stderr, "CUDA's compiled registry: %d kernels\n", ncu);
#endif
    return bp_test_finish();
}
