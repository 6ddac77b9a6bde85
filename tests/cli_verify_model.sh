#!/usr/bin/env bash
# `backplane verify MODEL.gguf` ($1 = CLI path): the model over a text on each backend against
# the CPU reference path (scalar kernels, exact mode, F32 KV cache).
#   - the four tiny architectures, the CPU fast path: no non-finite logit, mean KL under 1e-3
#     (measured ~4e-5 on tiny llama: the 8-bit activations; 1e-8 on tiny gemma3), top-1 >= 90%;
#   - the measure can fail: --max-kl 0 fails the fast path (its activations are rounded, so
#     its KL is not 0), exit status 1 and a FAIL row;
#   - it sees the KV cache: a Q4_0 cache diverges more than an F16 one (same model, same text);
#   - the mock backend (BACKPLANE_TEST_MOCK=all computes every op with the op layer's
#     reference) is within 1e-6, and the row names it as what ran the matmuls;
#   - Vulkan forced on (lavapipe): the step on the device, within 1e-6, named "Vulkan step";
#   - Gemma 3 270M (scripts/install-gemma.sh), 64 tokens of gpl-3.txt: the AVX2 fast path no
#     further from the reference than llama.cpp is (its KL recorded in ref/gemma3-270m.peer.txt;
#     measured 0.0061 vs 0.0144), the default path under 0.02 -- not under the sanitizer;
#   - --peer reads another engine's logits (llama.cpp's tiny-llama refs) as a row; bad files fail;
#   - bad input: no model file, a one-token context, an unknown kind: exit 2 or 1 with a message.
set -u
cli=${1:?usage: cli_verify_model.sh path/to/backplane}
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tests/model/gen_tiny.py "$tmp/tiny" >/dev/null || { echo "FAIL: gen_tiny.py"; exit 1; }

# field NAME of backend B's row in verify's JSON ($1 file, $2 backend, $3 field)
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([b for b in d["backends"] if b["backend"]==sys.argv[2]][0][sys.argv[3]])' "$@"; }
below() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"; }

for arch in llama qwen2 qwen3 gemma3; do
  m=$tmp/tiny/tiny-$arch.gguf
  "$cli" verify "$m" --ctx 96 --json >"$tmp/v.json" 2>"$tmp/err" || bad "verify tiny-$arch exited $?: $(tail -2 "$tmp/err")"
  [ "$(field "$tmp/v.json" cpu nonfinite)" = 0 ] || bad "tiny-$arch: non-finite logits on the CPU fast path"
  kl=$(field "$tmp/v.json" cpu mean_kl)
  below "$kl" 1e-3 || bad "tiny-$arch: CPU fast path mean KL $kl, bound 1e-3"
  below 0.9 "$(field "$tmp/v.json" cpu top1)" || bad "tiny-$arch: top-1 agreement $(field "$tmp/v.json" cpu top1) under 0.9"
done

m=$tmp/tiny/tiny-llama.gguf
"$cli" verify "$m" --ctx 64 --max-kl 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || bad "--max-kl 0 exited $rc, expected 1 (the fast path's KL is not 0)"
grep -q '^| cpu | F16 | .* | FAIL |' "$tmp/out" || bad "--max-kl 0: no FAIL row: $(cat "$tmp/out")"

"$cli" verify "$m" --ctx 96 --kv-kind F16 --json >"$tmp/f16.json" 2>/dev/null || bad "verify --kv-kind F16 failed"
"$cli" verify "$m" --ctx 96 --kv-kind Q4_0 --json >"$tmp/q4.json" 2>/dev/null || bad "verify --kv-kind Q4_0 failed"
below "$(field "$tmp/f16.json" cpu mean_kl)" "$(field "$tmp/q4.json" cpu mean_kl)" ||
  bad "a Q4_0 KV cache should diverge more than F16: $(field "$tmp/q4.json" cpu mean_kl) vs $(field "$tmp/f16.json" cpu mean_kl)"

BACKPLANE_TEST_MOCK=all "$cli" verify "$m" --ctx 64 --backend mock --json >"$tmp/mock.json" 2>"$tmp/err" ||
  bad "verify --backend mock exited $?: $(tail -2 "$tmp/err")"
below "$(field "$tmp/mock.json" mock mean_kl)" 1e-6 || bad "mock (reference ops) mean KL $(field "$tmp/mock.json" mock mean_kl)"
field "$tmp/mock.json" mock ran | grep -q "on Mock" || bad "mock row does not name the mock: $(field "$tmp/mock.json" mock ran)"

if BACKPLANE_VULKAN=1 "$cli" probe --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); b=[x for x in d["backends"] if x["name"]=="vulkan"]; sys.exit(0 if b and b[0]["compiled"] and b[0]["enabled"] and b[0]["device"] else 1)'; then
  "$cli" verify "$m" --ctx 48 --backend vulkan --json >"$tmp/vk.json" 2>"$tmp/err" || bad "verify --backend vulkan exited $?: $(tail -2 "$tmp/err")"
  below "$(field "$tmp/vk.json" vulkan mean_kl)" 1e-6 || bad "Vulkan mean KL $(field "$tmp/vk.json" vulkan mean_kl)"
  field "$tmp/vk.json" vulkan ran | grep -q "^Vulkan step" || bad "Vulkan row: $(field "$tmp/vk.json" vulkan ran)"
else
  # lavapipe is installed by scripts/install-deps.sh: its absence is a failure, not a skip
  bad "no Vulkan device (mesa-vulkan-drivers gives lavapipe; scripts/install-deps.sh installs it)"
fi

if ldd "$cli" 2>/dev/null | grep -q libasan; then
  echo "cli_verify_model: sanitizer build: the Gemma 3 270M check is left to the Release suite" >&2
else
  gemma=$(bash scripts/install-gemma.sh 2>/dev/null) || bad "scripts/install-gemma.sh failed"
  # The AVX2 path (forced) holds llama.cpp's own distance from the same reference on the same 64
  # tokens (tests/model/ref/gemma3-270m.peer.txt, made by gen_ref.sh); the default path (AVX-512
  # where the CPU has it, not yet measured against llama.cpp on such a machine) keeps 0.02.
  peer_kl=$(sed -n 's/^mean_kl //p' tests/model/ref/gemma3-270m.peer.txt)
  if grep -qw avx2 /proc/cpuinfo; then
    BACKPLANE_CPU_ISA=avx2 "$cli" verify "$gemma" -f tests/model/gpl-3.txt --ctx 64 --json >"$tmp/g2.json" 2>"$tmp/err" ||
      bad "verify Gemma (AVX2) exited $?: $(tail -2 "$tmp/err")"
    below "$(field "$tmp/g2.json" cpu mean_kl)" "$peer_kl" ||
      bad "Gemma AVX2 fast path mean KL $(field "$tmp/g2.json" cpu mean_kl) above llama.cpp's $peer_kl on the same tokens"
  else
    echo "cli_verify_model: no AVX2 here: the Gemma check against llama.cpp's KL is not run" >&2
  fi
  "$cli" verify "$gemma" -f tests/model/gpl-3.txt --ctx 64 --json >"$tmp/g.json" 2>"$tmp/err" || bad "verify Gemma exited $?: $(tail -2 "$tmp/err")"
  below "$(field "$tmp/g.json" cpu mean_kl)" 0.02 || bad "Gemma CPU fast path mean KL $(field "$tmp/g.json" cpu mean_kl), bound 0.02"
  echo "cli_verify_model: Gemma 64 tokens: fast path mean KL $(field "$tmp/g.json" cpu mean_kl) (AVX2 forced: $(field "$tmp/g2.json" cpu mean_kl 2>/dev/null)), llama.cpp $peer_kl" >&2
fi

# --peer: another engine's logits as a row of its own, its token ids the text. tiny-llama's are
# llama.cpp's (tests/model/ref, every vocabulary entry): finite, and close (llama.cpp's distance
# from our reference path on the tiny model, measured 6.6e-5). A file for another vocabulary, or
# cut short, is a clear error.
"$cli" verify "$m" --peer tests/model/ref/tiny-llama.logits.bin --json >"$tmp/p.json" 2>"$tmp/err" ||
  bad "verify --peer exited $?: $(tail -2 "$tmp/err")"
pk=$(field "$tmp/p.json" peer mean_kl)
{ below 0 "$pk" && below "$pk" 1e-3; } || bad "--peer tiny-llama: llama.cpp's mean KL $pk, expected in (0, 1e-3)"
[ "$(field "$tmp/p.json" peer nonfinite)" = 0 ] || bad "--peer: non-finite peer logits"
"$cli" verify "$m" --peer tests/model/ref/gemma3-270m.logits.bin >/dev/null 2>"$tmp/err"; rc=$?
{ [ $rc = 2 ] && grep -q "vocabulary entries" "$tmp/err"; } || bad "--peer of another vocabulary: exit $rc: $(cat "$tmp/err")"
head -c 5000 tests/model/ref/tiny-llama.logits.bin >"$tmp/short.bin"
"$cli" verify "$m" --peer "$tmp/short.bin" >/dev/null 2>"$tmp/err"; rc=$?
{ [ $rc != 0 ] && grep -q "cut short" "$tmp/err"; } || bad "--peer cut short: exit $rc: $(cat "$tmp/err")"
"$cli" verify "$m" --peer tests/model/ref/tiny-llama.logits.bin -f README.md >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || bad "--peer with -f: exit $rc"


"$cli" verify "$tmp/none.gguf" >/dev/null 2>"$tmp/err"; rc=$?
{ [ $rc = 1 ] && grep -q none.gguf "$tmp/err"; } || bad "missing model: exit $rc: $(cat "$tmp/err")"
"$cli" verify "$m" --ctx 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || bad "--ctx 1: exit $rc: $(cat "$tmp/err")"
"$cli" verify "$m" --kv-kind Q9_Z >/dev/null 2>"$tmp/err"; rc=$?
{ [ $rc = 2 ] && grep -q "unknown kind" "$tmp/err"; } || bad "--kv-kind Q9_Z: exit $rc: $(cat "$tmp/err")"

[ $fail = 0 ] && echo "cli_verify_model: ok"
exit $fail
