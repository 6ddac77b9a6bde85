#!/usr/bin/env bash
# A backend written outside the tree: install into a temporary prefix, copy
# tests/install/toy_backend.c away from the source tree, build it with only the prefix on the
# include and library paths (pkg-config), and run it on the tiny Llama model
# (tests/model/gen_tiny.py): its toy device implements the public device interface
# (include/backplane_device.h), registers itself with bp_backend_register, and the seam runs the
# model's matmuls on it -- logits against the CPU reference path, run records naming the toy
# (what the program checks: the comment at its top). Also: the header is installed and compiles
# on its own (-pedantic, C11 and C++).
# $1 = build dir, $2 = extra C flags for the program (the sanitizer flags in a sanitizer build).
build=$(cd "${1:?usage: device_backend.sh BUILD_DIR [CFLAGS]}" && pwd)
xflags=${2:-}
. "$(dirname "$0")/lib.sh"
fail=0
for tool in pkg-config gcc python3; do
    command -v $tool >/dev/null || { echo "FAIL: $tool not found (scripts/install-deps.sh installs it)"; exit 1; }
done
install_prefix "$build"
[ -f "$p/include/backplane_device.h" ] || { echo "FAIL: include/backplane_device.h is not installed"; exit 1; }
printf '#include <backplane_device.h>\nint main(void) { return BP_DEVICE_METHODS_VERSION > 0 ? 0 : 1; }\n' > "$tmp/alone.c"
gcc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$p/include" "$tmp/alone.c" 2>"$tmp/err" ||
    { echo "FAIL: backplane_device.h does not compile on its own: $(head -3 "$tmp/err")"; fail=1; }
if command -v g++ >/dev/null; then
    cp "$tmp/alone.c" "$tmp/alone.cc"
    g++ -Wall -Wextra -Werror -fsyntax-only -I"$p/include" "$tmp/alone.cc" 2>"$tmp/err" ||
        { echo "FAIL: backplane_device.h does not compile as C++: $(head -3 "$tmp/err")"; fail=1; }
fi

python3 tests/model/gen_tiny.py "$tmp/tiny" > /dev/null || { echo "FAIL: gen_tiny.py"; exit 1; }
mkdir -p "$tmp/toy"
cp tests/install/toy_backend.c "$tmp/toy/"
export PKG_CONFIG_PATH=$p/$libdir/pkgconfig
# shellcheck disable=SC2046,SC2086
if ! gcc -std=c11 -O1 -Wall -Wextra -Werror -pedantic $xflags $(pkg-config --cflags backplane) \
        "$tmp/toy/toy_backend.c" -o "$tmp/toy/toy_backend" $(pkg-config --libs backplane) -lm 2>"$tmp/err"; then
    echo "FAIL: the toy backend does not build against the installed prefix: $(head -5 "$tmp/err")"; exit 1
fi
# The built-in GPU backends off: nothing else opens a device (the device-memory check is
# process-wide) or probes for a second.
if ! BACKPLANE_CUDA=0 BACKPLANE_VULKAN=0 BACKPLANE_OPENCL=0 LD_LIBRARY_PATH=$p/$libdir "$tmp/toy/toy_backend" "$tmp/tiny/tiny-llama.gguf" > "$tmp/out" 2> "$tmp/err"; then
    cat "$tmp/out"; head -20 "$tmp/err"; echo "FAIL: toy_backend"; exit 1
fi
cat "$tmp/out"
grep -q '^toy_backend: OK$' "$tmp/out" || fail=1
[ $fail = 0 ] && echo "device_backend: OK"
exit $fail
