/* bp_device_memory(): the public view of the allocation ledger (ledger.c), totals over every
 * device of the process. Bindings and programs use it to prove a load/free cycle leaks nothing
 * on a device, as the tests do with the internal per-device queries. */
#include "device/device_internal.h"

void bp_device_memory(uint64_t *live_bytes, uint64_t *live_allocations) {
    if (live_bytes) *live_bytes = bp_ledger_live_bytes(NULL);
    if (live_allocations) *live_allocations = bp_ledger_live_count(NULL);
}
