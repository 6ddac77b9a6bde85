#!/usr/bin/env bash
# The Python binding as a user gets it: `cmake --install` into a temporary prefix, `pip install`
# of python/ (from a copy, so the source tree stays clean) into a temporary folder, then pytest
# over python/tests with only the prefix's library (LD_LIBRARY_PATH) and the prefix's CLI as the
# C reference. Any pytest skip makes this test exit 77, so ctest reports it as skipped (and CI,
# which refuses unexpected skips, fails): nothing is skipped silently.
# $1 = build dir; $2 = LD_PRELOAD for a sanitizer build (the runtime must load first), or empty.
build=$(cd "${1:?usage: python.sh BUILD_DIR [PRELOAD]}" && pwd)
preload=${2:-}
. "$(dirname "$0")/lib.sh"

python3 -c 'import numpy, pytest, setuptools' 2>"$tmp/err" ||
    { echo "FAIL: python3 lacks numpy/pytest/setuptools (scripts/install-deps.sh installs them): $(cat "$tmp/err")"; exit 1; }
install_prefix "$build"

# python/ reads the version from ../CMakeLists.txt: copy both.
mkdir -p "$tmp/src"
cp -r "$src/python" "$src/CMakeLists.txt" "$tmp/src/"
if ! python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
        --target "$tmp/site" "$tmp/src/python" > "$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log"; echo "FAIL: pip install ./python"; exit 1
fi

export PYTHONPATH=$tmp/site LD_LIBRARY_PATH=$p/$libdir BACKPLANE_SOURCE_DIR=$src
export BACKPLANE_CLI=$p/bin/backplane BACKPLANE_INCLUDE=$p/include
# Under ASan: the interpreter's own allocations are not ours to leak-check (the C tests do that),
# and freed memory parked in ASan's quarantine would read as RSS growth in the leak test.
[ -n "$preload" ] && export LD_PRELOAD=$preload ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0:quarantine_size_mb=0
# -p no:cacheprovider: no .pytest_cache written into the source tree.
python3 -m pytest -q -rs -p no:cacheprovider "$src/python/tests" 2>&1 | tee "$tmp/pytest.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || exit 1
grep -q ' skipped' "$tmp/pytest.log" && { echo "SKIP: pytest skipped tests (above)" >&2; exit 77; }
exit 0
