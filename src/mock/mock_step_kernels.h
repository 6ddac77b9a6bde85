/* The step's kernels (src/gpu/gpu_step.h names them and their arguments) in plain C on the mock
 * device's host memory, so the device step code -- placement, launch list, record and replay,
 * the KV hand-back -- runs with real numbers on any machine, under the mock's fault injection. */
#ifndef BP_MOCK_STEP_KERNELS_H
#define BP_MOCK_STEP_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

enum { BP_MOCK_MAX_PARAMS = 8, BP_MOCK_MAX_VAL = 64 };

/* A mock kernel: params[i] points at the i-th argument's value (a buffer's address, a struct). */
typedef struct bp_mock_kernel {
    const char *name;
    int nparams;
    size_t sizes[BP_MOCK_MAX_PARAMS];
    void (*run)(const struct bp_mock_kernel *k, void **params); /* may set the launch's status */
    int kind;     /* matvec_/gemm_/embed_<KIND>: the GGUF id */
    bool dynamic; /* made by lookup, freed by release */
    char name_buf[48];
} bp_mock_kernel;

/* The step kernel called name, if there is one (*out filled; name must outlive it: the op cache
 * keeps the name it looked up). */
bool bp_mock_step_kernel(const char *name, bp_mock_kernel *out);

/* Tests of `verify --trace`: from now on, the nth launch of a kernel whose name starts with
 * prefix ("rms_norm", "gemm", "glu") in each step scales its output by factor -- an error
 * injected in one op's kernel at one layer. prefix NULL or nth < 1 disarms. */
void bp_mock_step_inject(const char *prefix, int nth, float factor);
/* A step starts: the count of launches for the injection begins again (the mock backend). */
void bp_mock_step_begin(void);

#endif
