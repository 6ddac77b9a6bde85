/* A backend made of a device a program registered (bp_backend_register in
 * include/backplane_device.h): caps and dispatch tables over a bp_device whose kernels follow
 * the "matmul_<KIND>" contract written there, each kind claimed only after its kernel ran on a
 * small weight and matched the CPU reference. The seam (src/seam/register.c) inserts the tables
 * into the dispatch order; this file never sees the seam.
 *
 * Weights are uploaded per call (no residency yet): the contract a program implements stays
 * four buffers and a launch. */
#ifndef BP_GPU_EXTERN_H
#define BP_GPU_EXTERN_H

#include "backend/backend.h"
#include "backplane_device.h"

/* How many registered backends at once: the seam's tables are context-free function tables,
 * so each index has trampolines of its own. */
enum { BP_GPU_EXTERN_MAX = 4 };

/* The NMSE a kernel's proof must stay within (include/backplane_device.h says why 1e-3). */
#define BP_GPU_EXTERN_PROOF_NMSE 1e-3

/* Set up index i over dev: find and prove every weight kind's kernel, fill the tables. *proven
 * gets the number of kinds claimed; none is BP_E_NOT_FOUND naming the first kind that failed
 * its proof (or that the device has no matmul kernel at all). BP_E_INVAL when i is in use. */
bp_status bp_gpu_extern_open(int i, bp_device *dev, const char *name, const char *display, int *proven);
/* Forget index i (its device stays the caller's). */
void bp_gpu_extern_close(int i);
/* The first unused index, or -1. */
int bp_gpu_extern_free_index(void);
/* Index i's tables; NULL when it is not set up. */
const bp_backend_caps *bp_gpu_extern_caps(int i);
const bp_backend_dispatch *bp_gpu_extern_dispatch(int i);
/* Index i's device; NULL when it is not set up. */
bp_device *bp_gpu_extern_device(int i);

#endif
