#!/usr/bin/env bash
# Put llama.cpp's vocabulary-only GGUFs that the tokenizer tests compare against into
# ${BACKPLANE_VOCAB_DIR:-~/.cache/backplane/vocab}: ggml-vocab-{llama-spm,llama-bpe,qwen2,gpt-2,gpt-neox}.gguf.
# They are llama.cpp's data, so they are not committed: they come from the pinned
# llama-cpp-python 0.3.36 sdist on PyPI (which vendors llama.cpp 0c1e570, the version the
# expected ids in tests/tokenizer/expected/ were made with), checked by sha256.
# Idempotent: when the four files are present with the right sums it does nothing.
set -euo pipefail

DEST="${BACKPLANE_VOCAB_DIR:-$HOME/.cache/backplane/vocab}"
SDIST_VERSION=0.3.36
declare -A SHA256=(
  [llama-spm]=16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69
  [llama-bpe]=97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e
  [qwen2]=44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c
  [gpt-2]=cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac
  [gpt-neox]=ae593a7f9b8bb174ed4f5019e41530463e4dac7aa06e42dee8aa650d2bdac53d
)

ok() { [ -f "$DEST/ggml-vocab-$1.gguf" ] && echo "${SHA256[$1]}  $DEST/ggml-vocab-$1.gguf" | sha256sum -c --status; }

missing=()
for v in "${!SHA256[@]}"; do ok "$v" || missing+=("$v"); done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "fetch-vocab: fetching ${missing[*]} from the llama-cpp-python $SDIST_VERSION sdist into $DEST"
mkdir -p "$DEST"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps -d "$tmp" \
  "llama-cpp-python==$SDIST_VERSION"
sdist=("$tmp"/llama_cpp_python-"$SDIST_VERSION".tar.gz)
members=()
for v in "${missing[@]}"; do
  members+=("llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp/models/ggml-vocab-$v.gguf")
done
tar -xzf "${sdist[0]}" -C "$tmp" "${members[@]}"
for v in "${missing[@]}"; do
  src="$tmp/llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp/models/ggml-vocab-$v.gguf"
  echo "${SHA256[$v]}  $src" | sha256sum -c --status || { echo "fetch-vocab: $v: sha256 mismatch" >&2; exit 1; }
  mv "$src" "$DEST/ggml-vocab-$v.gguf"
done
echo "fetch-vocab: done"
