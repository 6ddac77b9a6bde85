#!/usr/bin/env bash
# One-shot CUDA check for a machine with a GPU (written for the H200, sm_90): configure and
# build with CUDA, run the whole ctest suite including the GPU tests, `backplane verify
# --backend cuda`, `backplane bench --backend cuda`, and the kernel-only timing of
# tools/cuda_bench.c. Everything goes to $OUT (default ./gpu_check_out): one log per step and
# summary.txt. Exit status: 0 when every step passed.
#
# Until this has passed on a GPU, the CUDA kernels are UNRUN ON HARDWARE (src/cuda/cuda_caps.c).
# Run from the repository root:  OUT=/some/dir tools/gpu_check.sh
# Order: most valuable first (GPU tests, verify, kernel timing), so a run cut short by the
# device time budget still leaves the figures that matter in $OUT.
set -u
OUT=${OUT:-$PWD/gpu_check_out}
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
fail=0

step() { # step NAME TIMEOUT_S COMMAND...: run, log to $OUT/NAME.log, record the verdict
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    printf '%-12s rc=%-3d %4ds  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$*" | tee -a "$SUMMARY"
    [ "$rc" -eq 0 ] || fail=1
    return "$rc"
}

{
    echo "date: $(date -u)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    nvcc --version | tail -2
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt" >> "$SUMMARY"

step configure 300 cmake -S . -B "$BUILD" -DBP_CUDA=ON -DBP_VULKAN=OFF -DBP_OPENCL=OFF -DCMAKE_BUILD_TYPE=Release
step build 900 cmake --build "$BUILD" -j "$JOBS" || { echo "build failed; see $OUT/build.log" | tee -a "$SUMMARY"; exit 1; }
# The GPU tests first and verbose: their stderr has per-kind NMSE and the device properties.
step gpu_tests 600 ctest --test-dir "$BUILD" -R test_cuda -V
step probe 60 "$BUILD/backplane" probe --all
step verify 900 "$BUILD/backplane" verify --backend cuda --fallbacks
CUDA_ROOT=$(dirname "$(dirname "$(command -v nvcc)")")
if step cuda_bench_build 300 cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -Isrc/kinds -isystem "$CUDA_ROOT/include" \
        tools/cuda_bench.c "$BUILD/libbackplane.a" "$CUDA_ROOT/lib64/libcudart_static.a" \
        -lstdc++ -ldl -lrt -lpthread -lm -o "$OUT/cuda_bench"; then
    step cuda_bench 1200 "$OUT/cuda_bench" --rows 8192 --cols 8192 --batch 512 --reps 100
    step cuda_bench_16k 1200 "$OUT/cuda_bench" --rows 16384 --cols 16384 --batch 512 --reps 50 --kind Q4_K
fi
# Through the library (includes x upload, y download, sync per call).
step bench 1200 "$BUILD/backplane" bench --backend cuda --rows 8192 --cols 8192
# The whole suite last among the must-haves: the CPU tests are the slow part.
step ctest 1800 ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
# Compute sanitizer over the GPU test, when installed: out-of-bounds and race checks.
if command -v compute-sanitizer > /dev/null; then
    step memcheck 900 compute-sanitizer --tool memcheck --error-exitcode 1 "$BUILD/test_cuda_kernels"
    step racecheck 900 compute-sanitizer --tool racecheck --error-exitcode 1 "$BUILD/test_cuda_kernels"
fi

echo "overall: $([ $fail -eq 0 ] && echo PASS || echo FAIL)" | tee -a "$SUMMARY"
echo "kernel timing (decode GB/s vs 4.8 TB/s, prefill TFLOP/s): $OUT/cuda_bench.log" | tee -a "$SUMMARY"
exit $fail
