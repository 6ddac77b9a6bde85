/* The mock device: the whole device interface (include/backplane_device.h) in host memory. It records
 * every call and can be told to fail the Nth call of a kind, so every fallback path of the
 * seam and the ledger runs on any machine with real numbers.
 *
 * Handles are host addresses (so the common typed -> raw launch conversion is exercised).
 * Kernels, by name:
 *   "gemm"  params: void *W, void *X, void *Y, int32 kind, int64 rows, int64 cols, int64 t
 *           Y[t][rows] = X[t][cols] W^T computed by the CPU reference (bp_ref_gemm) reading
 *           the mock's memory, so results are real.
 *   "poke"  params: void *p, int64 offset, int32 value: writes one byte at p + offset with no
 *           bounds check -- a deliberately overrunning kernel for the redzone tests.
 *   "nop_<anything>"  no parameters, does nothing: a registry of any size, for the op-cache
 *           tests (every backend's kernel registry must fit the cache).
 * Streams are in order and run synchronously; a graph records launches while capturing and
 * replays them. */
#ifndef BP_MOCK_DEVICE_H
#define BP_MOCK_DEVICE_H

#include "backplane_device.h"

typedef enum bp_mock_call {
    BP_MOCK_ALLOC = 0,  /* alloc, alloc_managed, arena_create, host_ptr_to_device */
    BP_MOCK_COPY = 1,   /* every copy and memset */
    BP_MOCK_LAUNCH = 2, /* launch_raw */
    BP_MOCK_SYNC = 3,   /* stream_sync, device_sync, event_sync, bind_to_thread */
    BP_MOCK_EVENT = 4,  /* event_create, event_record */
    BP_MOCK_GRAPH = 5,  /* graph_begin, graph_end, graph_replay */
    BP_MOCK_CALL_KINDS
} bp_mock_call;

const char *bp_mock_call_name(bp_mock_call c); /* "alloc", "copy", "launch", "sync", "event", "graph" */

bp_status bp_mock_device_open(bp_device **out);
/* The same device through a version-1 table holding only the REQUIRED members and kernel
 * lookup / raw launch: every other member defaulted by the common code. */
bp_status bp_mock_device_open_bare(bp_device **out);
/* Make the n-th call of kind c from now fail (n = 1: the next one) with status s and the message
 * "mock: injected <kind> failure" (no call number, so repeats are one cause); n = 0 disarms.
 * One armed failure per kind. */
void bp_mock_fail_nth(bp_device *dev, bp_mock_call c, int n, bp_status s);
/* Lose the device at the n-th call of kind c from now (n = 1: the next one): that call and every
 * later call of every kind fail with BP_E_DEVICE_LOST, "mock: device lost (sticky error
 * injected at a <kind> call)" -- a CUDA context after an illegal address. n = 0 disarms (a
 * device already lost stays lost). */
void bp_mock_lose_device(bp_device *dev, bp_mock_call c, int n);
/* kernel_lookup calls since open (the op cache asks once per name). */
int bp_mock_lookups(bp_device *dev);
/* Calls of kind c since open (failed ones included). */
int bp_mock_calls(bp_device *dev, bp_mock_call c);
/* The i-th most recent call (0 = last) as text, "launch gemm", "h2d 4096"; "" when none. */
const char *bp_mock_recent(bp_device *dev, int i, char *buf, size_t len);

#endif
