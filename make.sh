#!/usr/bin/env bash
# The README's commands on any Debian machine, a bare one included: `./make.sh run`,
# `./make.sh check` (any Makefile target works). A minimal Debian has no `make` (nor a compiler,
# CMake or Python): when make is missing, scripts/install-deps.sh installs everything the build
# and the suite need, make included (apt-get; as root, or through sudo), then this runs make.
# With make present it is plain `make TARGET`, whose targets install what else is missing.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v make >/dev/null 2>&1; then
    echo "make.sh: make is not installed; running scripts/install-deps.sh first"
    bash scripts/install-deps.sh
fi
exec make "$@"
