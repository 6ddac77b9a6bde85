#!/usr/bin/env bash
# valgrind memcheck over the CPU-only suite: every tests/test_* program of BUILD (default: build)
# except the CUDA, Vulkan and OpenCL ones, with those backends switched off by the environment
# (BACKPLANE_CUDA/VULKAN/OPENCL=0: their drivers are not ours to check, and lavapipe/PoCL under
# valgrind take minutes) and BP_TEST_QUICK=1 (reduced sizes: valgrind runs code ~50x slower; the
# same paths run). Fails on any memcheck error (invalid read/write, use of uninitialised values,
# a definite or indirect leak) or test failure; a test's own SKIP (exit 77) is fine here.
# valgrind 3.19 has no AVX-512: CPUID says so under it, and the CPU backend runs its AVX2 and
# scalar paths (the AVX-512 kernels are covered by ASan in `make sanitize`).
# tests/valgrind.supp: errors inside the C library and the dynamic loader, each with its reason.
# Usage: tests/valgrind.sh [BUILD]   (from the repository root; `make valgrind` builds first)
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
command -v valgrind >/dev/null || { echo "FAIL: valgrind not installed (scripts/install-deps.sh installs it)"; exit 1; }
export BACKPLANE_CUDA=0 BACKPLANE_VULKAN=0 BACKPLANE_OPENCL=0 BP_TEST_QUICK=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Not here: test_model_gemma and test_model_gemma_ppl (Gemma 3 270M's forward pass over hundreds
# of tokens: over an hour each at valgrind's speed, which timed CI out once); the same forward
# pass code runs here in test_model_tiny and test_model_errors on tiny models.
# Nor test_cpu_table (every kernel of the table, 13 min here), test_model_batch (9 min) and
# test_model_kv (7 min): the same kernels run here in test_cpu_kernels and test_cpu_dequant, the
# same batched forward pass in test_model_tiny, every KV kind's append and attention in
# test_ops_kv_cache, and all three whole under ASan+UBSan in `make sanitize`; with them the
# memcheck pass alone was over an hour on the 2-core VM, and CI took 53 min (2026-12-02).
progs=$(ls "$build"/test_* 2>/dev/null | grep -vE '/test_(cuda|vulkan|opencl)_[a-z_]+$' | grep -vE '\.[a-z]+$' |
        grep -vE '/test_model_gemma(_ppl)?$' | grep -vE '/test_(cpu_table|model_batch|model_kv)$')
[ -n "$progs" ] || { echo "FAIL: no test programs in $build"; exit 1; }
run_one() {
    local p=$1 name rc t0 t1
    name=$(basename "$p")
    t0=$(date +%s%N)
    valgrind -q --error-exitcode=99 --suppressions=tests/valgrind.supp --leak-check=full \
        --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect --track-origins=no "$p" >"$tmp/$name.log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    printf '%-26s %6.1f s  exit %d\n' "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')" $rc \
        >"$tmp/$name.res"
}
export -f run_one
export tmp
start=$(date +%s)
printf '%s\n' $progs | xargs -P "${JOBS:-2}" -I{} bash -c 'run_one {}'
fail=0; n=0
for r in "$tmp"/*.res; do
    n=$((n + 1)); cat "$r"
    rc=$(awk '{print $NF}' "$r"); name=$(basename "$r" .res)
    case $rc in
        0|77) ;;
        99) echo "FAIL: $name: valgrind memcheck errors:"; grep -E '^==[0-9]+==' "$tmp/$name.log" | head -40; fail=1 ;;
        *) echo "FAIL: $name exited $rc under valgrind:"; tail -20 "$tmp/$name.log"; fail=1 ;;
    esac
done
echo "valgrind memcheck: $n CPU-only test programs in $(( $(date +%s) - start )) s, $([ $fail = 0 ] && echo clean || echo ERRORS)"
exit $fail
