/* Internals of the CUDA backend shared by its C files and its tests (only built with CUDA). */
#ifndef BP_CUDA_INTERNAL_H
#define BP_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda_kernels.h"
#include "backplane_device.h"
#include "backend/backend.h"

/* The device interface over cudart (cuda_device.c). */
extern const bp_device_methods bp_cu_device_methods;
/* Turn a cudart error into a bp_fail status naming `what`; BP_OK for cudaSuccess;
 * BP_E_DEVICE_LOST for a sticky error (the message says the context is lost). */
bp_status bp_cu_status(cudaError_t e, const char *what);
/* Whether a cudart error code is sticky: the context is corrupt and every later call of the
 * process fails (illegal address, launch failure, ...). Device-free. */
bool bp_cu_error_is_sticky(int code);
/* The kernel registry row called name ("matvec_Q4_K"), or NULL. Device-free. */
const bp_cu_kernel_entry *bp_cu_kernel_find(const char *name);

/* The probe: is a usable GPU present? On false `why` holds the cause with the cudart error
 * code and text ("cudaGetDeviceCount -> 35 cudaErrorInsufficientDriver (...)"); on true the
 * device's description. Safe to call more than once (the seam caches its own answer). */
bool bp_cu_probe(char *why, size_t why_len);
/* The process's CUDA device and its stream, opened on first use (after a successful probe);
 * BP_E_UNSUPPORTED with the probe's reason when there is no usable GPU. */
bp_status bp_cu_device(bp_device **dev, bp_stream **stream);

#endif
