/* How much memory this process can still take, for checks made before a large allocation (the
 * KV cache): bp_context_create refuses a request larger than this, naming both numbers, rather
 * than let the allocation succeed lazily and the kernel kill the process later. */
#ifndef BP_CORE_MEMINFO_H
#define BP_CORE_MEMINFO_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes available: the smallest of /proc/meminfo's MemAvailable, a cgroup v2 limit less its
 * usage (memory.max - memory.current), and BACKPLANE_MEMORY_LIMIT (bytes) when set; *source
 * names which one (static string). UINT64_MAX when none is known. */
uint64_t bp_mem_available(const char **source);

#endif
