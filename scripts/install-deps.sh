#!/usr/bin/env bash
# Install what a fresh Debian machine lacks to build and test backplane. Idempotent: each
# package is installed only when missing, so a warm machine spends no time here.
set -euo pipefail

pkgs=(cmake make gcc python3 python3-pip
      mesa-vulkan-drivers libvulkan-dev glslc glslang-tools
      pocl-opencl-icd ocl-icd-opencl-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing ${missing[*]}; run as root (apt-get)" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # --no-install-recommends: PoCL otherwise pulls ~360 MB of extras (TOOLCHAINS.md).
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The gguf package (the llama.cpp project's Python GGUF library) checks that files our writer
# makes load in its reader. Test vectors are committed, so nothing else needs it at test time.
if ! python3 -c 'import gguf, numpy' 2>/dev/null; then
  echo "install-deps: pip install gguf numpy"
  python3 -m pip install -q --disable-pip-version-check gguf==0.19.0 numpy \
    || python3 -m pip install -q --break-system-packages --disable-pip-version-check gguf==0.19.0 numpy \
    || echo "install-deps: WARNING: could not install the gguf package; tests that need it will SKIP loudly" >&2
fi

# Tokenizer tests (the tok area): llama.cpp's vocabulary GGUFs from the pinned
# llama-cpp-python sdist (scripts/fetch-vocab.sh; the tests fail without them), and
# unicodedata2 (Unicode 15.1, llama.cpp's version) for src/model/unicode_gen.py --check.
bash "$(dirname "$0")/fetch-vocab.sh"
if ! python3 -c 'import unicodedata2 as u; assert u.unidata_version == "15.1.0"' 2>/dev/null; then
  echo "install-deps: pip install unicodedata2==15.1.0"
  python3 -m pip install -q --disable-pip-version-check unicodedata2==15.1.0 \
    || python3 -m pip install -q --break-system-packages --disable-pip-version-check unicodedata2==15.1.0
fi
