#!/usr/bin/env bash
# `backplane verify MODEL --trace` ($1 = CLI path): the first op of a prefill whose output leaves
# its tolerance (src/testing/tolerance.def), each op fed the backend's own inputs on the CPU
# reference path.
#   - no injected error: no op out of tolerance on the tiny models, for the CPU fast path, the
#     mock taking the whole step (src/gpu/gpu_step.c over the mock device: the device tap), and
#     Vulkan and OpenCL where the binary and the machine have them (lavapipe, PoCL);
#   - an error injected in one step kernel of the mock (BACKPLANE_TEST_MOCK_SCALE: the nth launch
#     of a kernel in each step scaled by 1.01, NMSE 1e-4, 100x the f32 ops' bound; 1.05 for a
#     quantized matmul, NMSE 2.5e-3 against its 5e-4): --trace names exactly that op, layer and
#     tensor, worked out here from the forward pass's order (src/model/forward.c), and exits 1.
#     (A 1.01 on a Q4_0 matmul stays inside its bound, and --trace rightly passes it.)
# Without Vulkan or OpenCL (binary or device) the rest is checked and the test then exits 77 (a
# skip, named on stderr), so the skip summary sees it.
# For OpenCL only, LeakSanitizer skips thread-local roots: PoCL leaves a bogus dynamic-TLS entry
# (tests/cli_opencl_model.sh says more); for Vulkan that would report the loader's dlerror
# buffer, reachable only from TLS, as a leak. Nothing changes outside a sanitized build.
set -u
cli=${1:?usage: cli_verify_trace.sh path/to/backplane}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
skipped=""
bad() { echo "FAIL: $*"; fail=1; }
python3 tests/model/gen_tiny.py "$tmp/tiny" >/dev/null || { echo "FAIL: gen_tiny.py"; exit 1; }

# check FILE BACKEND WANT: WANT "none" (no op out of tolerance), or "layer op tensor"
check() {
  python3 - "$@" <<'PY'
import json, sys
path, backend, want = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    d = json.load(open(path))
except Exception as e:
    print("unreadable JSON (%s)" % e); sys.exit(1)
tr = [t for t in d.get("trace", []) if t["backend"] == backend]
if len(tr) != 1:
    print("no trace row for %s" % backend); sys.exit(1)
t = tr[0]
if t["outputs_compared"] < 20:
    print("only %d outputs compared" % t["outputs_compared"]); sys.exit(1)
if want == "none":
    if t["out_of_tolerance"]:
        f = t["first"]
        print("out of tolerance: layer %d %s %s NMSE %g > %g" % (f["layer"], f["op"], f["tensor"], f["nmse"], f["bound"]))
        sys.exit(1)
    w = t["worst"]
    if not (w["nmse"] <= w["bound"]):
        print("worst %r above its bound" % w); sys.exit(1)
    sys.exit(0)
layer, op, tensor = want.split()
if not t["out_of_tolerance"]:
    print("the injected error was not found (closest: %r)" % t["worst"]); sys.exit(1)
f = t["first"]
got = "%d %s %s" % (f["layer"], f["op"], f["tensor"])
if got != want:
    print("named %r, want %r" % (got, want)); sys.exit(1)
if not (f["nmse"] > f["bound"] > 0):
    print("NMSE %g not above bound %g" % (f["nmse"], f["bound"])); sys.exit(1)
PY
}

for arch in llama qwen2 qwen3 gemma3; do
  m=$tmp/tiny/tiny-$arch.gguf
  "$cli" verify "$m" --ctx 16 --trace --json >"$tmp/cpu.json" 2>"$tmp/cpu.err" || bad "$arch cpu: exited $?: $(tail -2 "$tmp/cpu.err")"
  why=$(check "$tmp/cpu.json" cpu none) || bad "$arch cpu: $why"
  BACKPLANE_TEST_MOCK=step "$cli" verify "$m" --backend mock --ctx 16 --trace --json >"$tmp/mock.json" 2>"$tmp/mock.err" \
    || bad "$arch mock: exited $?: $(tail -2 "$tmp/mock.err")"
  why=$(check "$tmp/mock.json" mock none) || bad "$arch mock: $why"
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["trace"][0]; sys.exit(0 if t["ran"].startswith("Mock step") else 1)' \
    "$tmp/mock.json" || bad "$arch mock: the mock did not run the whole step: $(grep -o '"ran": "[^"]*"' "$tmp/mock.json" | tail -1)"
done
[ $fail = 0 ] && echo "ok: no op out of tolerance on the tiny models (CPU fast path, mock device step)"

# Injected errors. Per layer the step runs (forward.c): llama rms_norm attn_norm, ffn_norm; gemm
# q, k, v (one submission, three launches), attn_output, gate, up, down; glu once. gemma3 adds the
# q/k norms and post-norms: attn_norm, attn_q_norm, attn_k_norm, post_attention_norm, ffn_norm,
# post_ffw_norm.
inject() { # ARCH KERNEL:N:FACTOR WANT
  BACKPLANE_TEST_MOCK=step BACKPLANE_TEST_MOCK_SCALE=$2 "$cli" verify "$tmp/tiny/tiny-$1.gguf" --backend mock \
    --ctx 16 --trace --json >"$tmp/inj.json" 2>"$tmp/inj.err"
  rc=$?
  [ $rc = 1 ] || bad "$1 $2: exited $rc, want 1 (an op out of tolerance): $(tail -2 "$tmp/inj.err")"
  why=$(check "$tmp/inj.json" mock "$3") && echo "ok: $1, $2 (kernel:launch:factor): --trace names $3" || bad "$1 $2: $why"
}
inject llama rms_norm:3:1.01 "1 rms_norm blk.1.attn_norm.weight"
inject llama rms_norm:2:1.01 "0 rms_norm blk.0.ffn_norm.weight"
inject llama gemm:4:1.05 "0 matmul blk.0.attn_output.weight"
inject llama gemm:9:1.05 "1 matmul blk.1.attn_k.weight"
inject llama glu:2:1.01 "1 glu GATE"
inject llama attention:2:1.01 "1 attention ATT"
inject gemma3 rms_norm:8:1.01 "1 rms_norm blk.1.attn_q_norm.weight"
inject gemma3 rms_norm:10:1.01 "1 rms_norm blk.1.post_attention_norm.weight"

# Device backends: the step read back node by node where it ran.
for be in vulkan opencl; do
  env_on="BACKPLANE_$(printf '%s' "$be" | tr a-z A-Z)=1"
  lsan=${LSAN_OPTIONS:-}
  [ $be = opencl ] && lsan=${lsan:+$lsan:}use_tls=0
  probe=$(env "$env_on" "$cli" probe --json 2>/dev/null)
  if ! printf '%s' "$probe" | python3 -c 'import json,sys; d=json.load(sys.stdin); b=[x for x in d["backends"] if x["name"]==sys.argv[1]]; sys.exit(0 if b and b[0]["compiled"] and b[0]["enabled"] and b[0]["device"] else 1)' "$be" 2>/dev/null; then
    echo "SKIP: no $be backend or device in this binary / machine: its --trace is not checked" >&2
    skipped="$skipped $be"
    continue
  fi
  for arch in llama gemma3; do
    env "$env_on" LSAN_OPTIONS="$lsan" "$cli" verify "$tmp/tiny/tiny-$arch.gguf" --backend $be --ctx 8 --trace --json >"$tmp/dev.json" 2>"$tmp/dev.err" \
      || bad "$arch $be: exited $?: $(tail -2 "$tmp/dev.err")"
    why=$(check "$tmp/dev.json" $be none) || bad "$arch $be: $why"
    grep -q '"ran": "[A-Za-z]* step' "$tmp/dev.json" || bad "$arch $be: the device did not run the whole step"
  done
  [ $fail = 0 ] && echo "ok: $be: no op out of tolerance on the tiny llama and gemma3, the step read back node by node"
done
[ $fail = 0 ] && [ -n "$skipped" ] && { echo "SKIP: --trace not checked on:$skipped (the rest passed)" >&2; exit 77; }
exit $fail
