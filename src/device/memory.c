/* bp_device_memory(): the public view of the allocation ledger (ledger.c), totals over every
 * device of the process. Bindings and programs use it to prove a load/free cycle leaks nothing
 * on a device, as the tests do with the internal per-device queries. */
#include "core/alloc.h"
#include "device/device_internal.h"

void bp_device_memory(uint64_t *live_bytes, uint64_t *live_allocations) {
    if (live_bytes) *live_bytes = bp_ledger_live_bytes(NULL);
    if (live_allocations) *live_allocations = bp_ledger_live_count(NULL);
}

uint64_t bp_device_memory_peak(bool reset) { return bp_ledger_peak_bytes(reset); }

void bp_host_memory(uint64_t *live_bytes, uint64_t *peak_bytes, bool reset) {
    if (live_bytes) *live_bytes = (uint64_t)bp_alloc_live_bytes();
    if (peak_bytes) *peak_bytes = (uint64_t)bp_alloc_peak_bytes();
    if (reset) bp_alloc_peak_reset();
}
