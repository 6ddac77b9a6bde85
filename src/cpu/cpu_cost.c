/* The CPU backend's own cost estimate, the side every device is compared with by the rule's
 * shape test (src/seam/route.c; the model and where its numbers come from: src/backend/cost.c). */
#include <pthread.h>

#include "cpu/cpu.h"

/* Per thread; the figures and the machine they come from: src/backend/cost.c. */
static const bp_cost_model cpu_per_thread = {
    .overhead_us = 5, .link_gbps = 0, .mem_gbps = 15, .gflops = 200,
    .source = "measured: 2-vCPU AMD EPYC Zen 5 VM, per thread",
};

static pthread_mutex_t test_lock = PTHREAD_MUTEX_INITIALIZER;
static bool test_cpu_set;
static bp_cost_model test_cpu;

void bp_cost_test_set_cpu(const bp_cost_model *m) {
    pthread_mutex_lock(&test_lock);
    test_cpu_set = m != NULL;
    if (m) test_cpu = *m;
    pthread_mutex_unlock(&test_lock);
}

void bp_cost_cpu(bp_cost_model *out) {
    pthread_mutex_lock(&test_lock);
    bool set = test_cpu_set;
    if (set) *out = test_cpu;
    pthread_mutex_unlock(&test_lock);
    if (set) return;
    const double n = (double)bp_cpu_threads();
    *out = cpu_per_thread;
    out->mem_gbps *= n;
    out->gflops *= n;
}
