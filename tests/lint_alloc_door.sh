#!/usr/bin/env bash
# Every host allocation in src/ goes through src/core/alloc.h (bp_malloc, bp_calloc, bp_realloc,
# bp_aligned_alloc, bp_strdup, bp_free), so the allocation-failure campaign
# (tests/test_alloc_campaign.c) can fail each one: an allocation that bypasses the door is one
# whose NULL check no test can ever reach. This fails on a direct malloc/calloc/realloc/
# posix_memalign/aligned_alloc/strdup call in src/ outside src/core/alloc.c, and prints how many
# allocation sites the door has (the campaign's "sites covered" is out of this figure).
# Allowed exceptions carry "alloc-door: <why>" on the same line.
set -u
cd "$(dirname "$0")/.."
bad=$(grep -rnE '(^|[^_a-zA-Z0-9>.])(malloc|calloc|realloc|posix_memalign|aligned_alloc|strdup|strndup)[[:space:]]*\(' \
        src --include='*.c' --include='*.h' --include='*.inc' --include='*.cu' |
      grep -v '^src/core/alloc\.c:' | grep -v 'alloc-door:' |
      grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)')
sites=$(grep -rnoE '\bbp_(malloc|calloc|realloc|aligned_alloc|strdup)[[:space:]]*\(' src --include='*.c' --include='*.inc' |
        grep -v '^src/core/alloc\.c:' | wc -l)
dev=$(grep -rnoE '\bbp_dev_(alloc|alloc_managed|host_alloc_pinned|arena_create)[[:space:]]*\(' src --include='*.c' |
      grep -v '^src/device/device\.c:' | wc -l)
echo "allocation sites in src/: $sites host (through the door), $dev device (alloc, managed, pinned, arena)"
if [ -n "$bad" ]; then
    echo "FAIL: allocations in src/ that bypass src/core/alloc.h:"
    echo "$bad"
    exit 1
fi
