#!/usr/bin/env bash
# Builds ggml's CPU backend from a ggml source tree (fetched by you into /tmp; this script
# fetches nothing) and every tools/sidebyside/ggml_*.c timing program against it, all under
# $BP_SBS_OUT (default /tmp/bp_sidebyside), never inside the repository.
#
#   tools/sidebyside/build.sh GGML_TREE          # e.g. /tmp/llama.cpp/ggml
#
# GGML_TREE is a ggml source tree (its CMakeLists.txt and include/ggml.h), standalone or the
# one vendored in llama.cpp. Environment:
#   BP_SBS_OUT=DIR     where everything goes (default /tmp/bp_sidebyside)
#   GGML_LIBS=DIR      reuse shared libraries already built from THAT tree (libggml.so,
#                      libggml-base.so, libggml-cpu.so; e.g. /tmp/llama.cpp/build/bin) instead of
#                      building them: on a 2-core machine ggml's CPU backend takes minutes
#   GGML_LABEL=TEXT    how tables name this ggml (default: "ggml <version> (<tree>)")
#   GGML_CMAKE_ARGS    extra configure arguments (default build: Release, GGML_NATIVE=ON,
#                      shared libs, llamafile and CPU repack at their defaults, i.e. ON)
# Each ggml_<name>.c becomes $BP_SBS_OUT/bin/ggml_<name>; $BP_SBS_OUT/ggml.env records the
# tree, the libraries and the label for run.py.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tree=${1:-}
if [[ -z "$tree" || ! -f "$tree/include/ggml.h" || ! -f "$tree/CMakeLists.txt" ]]; then
    echo "usage: $0 GGML_TREE   (a ggml source tree: GGML_TREE/include/ggml.h must exist)" >&2
    exit 2
fi
tree=$(cd "$tree" && pwd)
out=${BP_SBS_OUT:-/tmp/bp_sidebyside}
case "$out" in
"$(cd "$here/../.." && pwd)"*) echo "$0: BP_SBS_OUT must be outside the repository" >&2; exit 2 ;;
esac
mkdir -p "$out/bin"

if [[ -n "${GGML_LIBS:-}" ]]; then
    libs=$(cd "$GGML_LIBS" && pwd)
else
    bdir="$out/ggml-build"
    # shellcheck disable=SC2086
    cmake -S "$tree" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON \
        -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF ${GGML_CMAKE_ARGS:-} >"$out/ggml-configure.log"
    cmake --build "$bdir" --target ggml ggml-base ggml-cpu -j"$(nproc)" >"$out/ggml-build.log"
    libs=$(dirname "$(find "$bdir" -name 'libggml-cpu.so' -print -quit)")
fi
for l in libggml.so libggml-base.so libggml-cpu.so; do
    [[ -e "$libs/$l" ]] || { echo "$0: $libs/$l missing" >&2; exit 1; }
done

version=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)).*/\2/p' "$tree/CMakeLists.txt" | paste -sd.)
label=${GGML_LABEL:-"ggml ${version:-?} ($tree)"}

cc=${CC:-cc}
n=0
for src in "$here"/ggml_*.c; do
    [[ -e "$src" ]] || continue
    name=$(basename "$src" .c)
    "$cc" -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -I"$tree/include" "$src" -o "$out/bin/$name" \
        -L"$libs" -Wl,-rpath,"$libs" -lggml -lggml-base -lggml-cpu -lm -lpthread
    n=$((n + 1))
done

{
    echo "GGML_TREE=$tree"
    echo "GGML_LIBS=$libs"
    printf 'GGML_LABEL=%q\n' "$label"
} >"$out/ggml.env"
echo "built $n timing program(s) in $out/bin against $label (libraries: $libs)"
