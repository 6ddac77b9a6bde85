/* The step section of `backplane verify` (verify_step.c). */
#ifndef BP_VERIFY_STEP_H
#define BP_VERIFY_STEP_H

/* One result: the KV kind, the backend, the NMSE over every logit, what ran (or the error). */
typedef void (*bp_verify_step_emit)(void *ctx, const char *kind, const char *backend, double nmse, const char *path);

/* A synthetic two-layer model's prefill and decode step on every enabled backend claiming the
 * step for a KV kind (only_backend / only_kind: those), against the CPU. Returns the cases. */
int bp_verify_step(bp_verify_step_emit emit, void *ctx, const char *only_backend, const char *only_kind);

#endif
