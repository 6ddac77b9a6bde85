#!/usr/bin/env bash
# Put llama.cpp's vocabulary-only GGUFs that the tokenizer tests compare against into
# ${BACKPLANE_VOCAB_DIR:-~/.cache/backplane/vocab}: the 15 ggml-vocab-*.gguf of llama.cpp's
# tokenizer test suite (the ones with .inp/.out pairs; the pairs themselves are committed in
# tests/tokenizer/llama-suite/) and gpt-neox (tests/tokenizer/expected/).
# They are llama.cpp's data, so they are not committed: they come from the pinned
# llama-cpp-python 0.3.36 sdist on PyPI (which vendors llama.cpp 0c1e570, the version the
# expected ids in tests/tokenizer/ were made with), checked by sha256.
# Then the vocabularies derived from those (tests/tokenizer/derive_vocab.py, with the gguf
# package scripts/install-deps.sh installs first): gpt-4o, the qwen2 file with
# tokenizer.ggml.pre = "gpt-4o" (llama.cpp ships no o200k vocabulary).
# Idempotent: when every file is present with the right sum it does nothing.
set -euo pipefail

DEST="${BACKPLANE_VOCAB_DIR:-$HOME/.cache/backplane/vocab}"
SDIST_VERSION=0.3.36
declare -A SHA256=(
  [bert-bge]=fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854
  [command-r]=a2f8cfea952ef7c391a6d92a1c309d0bd32e36384d9b9230569a7425732f27d9
  [deepseek-coder]=91cb1379f2e33af1c4866b194622b7a0e12e8f0c9dba7ba2f10d55978730bec1
  [deepseek-llm]=867f77537b54565f0d81d508c04edc41aa1d4ffc1a92745f225b4c1b02755f76
  [falcon]=9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad
  [gemma-4]=58b1ba0b57f3b4d7c468ba4ffd91ad85190346a3d7ad7e71d1cabaae8a14bb65
  [gpt-2]=cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac
  [gpt-neox]=ae593a7f9b8bb174ed4f5019e41530463e4dac7aa06e42dee8aa650d2bdac53d
  [llama-bpe]=97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e
  [llama-spm]=16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69
  [mpt]=59dc382612866d1fc6c11ea531318d327598f3412d9c8f8600607cdf3030898f
  [phi-3]=967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326
  [qwen2]=44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c
  [qwen35]=63ed952ff338996cf0bdf24a7b10015124273f75c6dc9bb427356aa3f67ec62c
  [refact]=ac3ceda902fed91ccf74312b305d9b86c37e4f8e35fa9cc6ef3ce34fca7d4678
  [starcoder]=fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d
)

# The derived ones, by name: their sums are also in derive_vocab.py, which checks what it writes.
declare -A DERIVED_SHA256=(
  [gpt-4o]=d9370dd93a3d3fd33329f67814017db44dcf3e7ee477c1da33fc47bebf21be6a
)

ok() { [ -f "$DEST/ggml-vocab-$1.gguf" ] && echo "${SHA256[$1]}  $DEST/ggml-vocab-$1.gguf" | sha256sum -c --status; }
derived_ok() {
  for v in "${!DERIVED_SHA256[@]}"; do
    [ -f "$DEST/ggml-vocab-$v.gguf" ] && echo "${DERIVED_SHA256[$v]}  $DEST/ggml-vocab-$v.gguf" | sha256sum -c --status || return 1
  done
}
derive() {
  derived_ok && return 0
  echo "fetch-vocab: deriving ${!DERIVED_SHA256[*]} (tests/tokenizer/derive_vocab.py)"
  BACKPLANE_VOCAB_DIR="$DEST" python3 "$(dirname "$0")/../tests/tokenizer/derive_vocab.py" >/dev/null
}

missing=()
for v in "${!SHA256[@]}"; do ok "$v" || missing+=("$v"); done
if [ ${#missing[@]} -eq 0 ]; then derive; exit 0; fi

echo "fetch-vocab: fetching ${missing[*]} from the llama-cpp-python $SDIST_VERSION sdist into $DEST"
mkdir -p "$DEST"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# --no-binary for this package only: with :all:, pip also builds the sdist's build backend
# (scikit-build-core) and every build dependency of those from source to read its metadata -- in
# a fresh minimal Debian that ran for 6+ minutes without finishing (.ci/bare-machine.sh).
python3 -m pip download -q --disable-pip-version-check --no-binary llama-cpp-python --no-deps -d "$tmp" \
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
derive
echo "fetch-vocab: done"
