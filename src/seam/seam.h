/* The seam: the registry of backends (backends.def expanded), for everything above it. The
 * interface a backend fills in lives below, in src/backend/backend.h; this header adds the
 * names, the lookups and the once-per-process enable decision. */
#ifndef BP_SEAM_H
#define BP_SEAM_H

#include "backend/backend.h"

/* "cuda", ..., "cpu" for BP_BACKEND_CPU; NULL out of range. */
const char *bp_backend_name(bp_backend_id id);
/* "CUDA", ..., "CPU". */
const char *bp_backend_display_name(bp_backend_id id);
/* "cuda, metal, vulkan, opencl, cpu": every name, for errors that list them. */
const char *bp_backend_names_list(void);
/* Capabilities of a table row (every row, every build); NULL for the CPU and out of range. */
const bp_backend_caps *bp_backend_caps_of(bp_backend_id id);
/* Dispatch table when the backend is compiled in, else NULL. */
const bp_backend_dispatch *bp_backend_dispatch_of(bp_backend_id id);
/* Id by name ("vulkan", "cpu"); BP_E_NOT_FOUND for an unknown name. */
bp_status bp_backend_by_name(const char *name, bp_backend_id *id);
/* Whether the backend runs in this process: compiled in, and BACKPLANE_<ENUM> or the probe
 * (decided once, cached, thread-safe). The CPU is always enabled. reason (may be NULL) gets
 * a sentence for `backplane probe`: "BACKPLANE_VULKAN=0 forces it off". */
bool bp_backend_enabled(bp_backend_id id, const char **reason);

#endif
