/* Available memory for the checks before large allocations (see meminfo.h). Read at each call:
 * a context is created rarely, and what is free changes. */
#include "core/meminfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first number in path (after `key` when key is not NULL), in bytes (kB lines scaled);
 * false when the file or the key is missing or holds no number ("max"). */
static bool read_number(const char *path, const char *key, uint64_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        const char *p = line;
        if (key) {
            size_t k = strlen(key);
            if (strncmp(line, key, k)) continue;
            p += k;
        }
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p) break;
        while (*end == ' ') end++;
        *out = !strncmp(end, "kB", 2) ? (uint64_t)v * 1024 : (uint64_t)v;
        found = true;
    }
    fclose(f);
    return found;
}

uint64_t bp_mem_available(const char **source) {
    uint64_t best = UINT64_MAX, v, used;
    const char *why = "unknown";
    if (read_number("/proc/meminfo", "MemAvailable:", &v)) best = v, why = "MemAvailable in /proc/meminfo";
    if (read_number("/sys/fs/cgroup/memory.max", NULL, &v) && read_number("/sys/fs/cgroup/memory.current", NULL, &used)) {
        uint64_t left = v > used ? v - used : 0;
        if (left < best) best = left, why = "the cgroup's memory.max less memory.current";
    }
    const char *env = getenv("BACKPLANE_MEMORY_LIMIT");
    if (env && *env) {
        char *end;
        unsigned long long lim = strtoull(env, &end, 10);
        if (!*end && env[0] != '-' && lim < best) best = lim, why = "BACKPLANE_MEMORY_LIMIT";
    }
    if (source) *source = why;
    return best;
}
