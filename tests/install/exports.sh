#!/usr/bin/env bash
# The shared library exports exactly the public API, both directions:
#   - every function declared in include/*.h (and every `extern` object) is a defined dynamic
#     symbol of libbackplane.so: a public header without `#pragma GCC visibility push(default)`,
#     or a declared function nobody defined, fails here rather than at a user's link;
#   - every defined dynamic symbol is declared in include/*.h: an internal function that leaks
#     (a missing -fvisibility=hidden, an SDK's static runtime) fails here.
# The declarations come from gcc itself (-aux-info lists every function prototype a translation
# unit sees, with the file that declared it), not from a regex over the headers, so multi-line
# declarations and macros cannot fool it. `static inline` helpers in a header are not symbols.
# $1 = libbackplane.so, $2 = the include directory.
set -u
lib=${1:?usage: exports.sh libbackplane.so include-dir}
inc=$(cd "${2:?usage: exports.sh libbackplane.so include-dir}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# gcc is what -aux-info needs; scripts/install-deps.sh installs it, so its absence is a failure.
command -v gcc >/dev/null || { echo "FAIL: gcc not found (scripts/install-deps.sh installs it)"; exit 1; }
command -v nm >/dev/null || { echo "FAIL: nm not found (binutils)"; exit 1; }

for h in "$inc"/*.h; do echo "#include \"$(basename "$h")\""; done > "$tmp/all.c"
if ! gcc -std=c11 -I"$inc" -aux-info "$tmp/aux.txt" -fsyntax-only "$tmp/all.c" 2>"$tmp/err"; then
    echo "FAIL: the public headers do not compile together: $(cat "$tmp/err")"; exit 1
fi
# Lines look like: /* /abs/include/backplane.h:36:NC */ extern const char *bp_status_name (bp_status);
# The name is the last identifier before the first " (" (the parameter list).
grep -F "/* $inc/" "$tmp/aux.txt" | grep -v '\*/ static ' |
    sed -e 's|^/\*[^*]*\*/ ||' -e 's/ (.*//' -e 's/.*[^A-Za-z0-9_]//' | sort -u > "$tmp/declared"
# Objects: `extern TYPE name;` / `extern TYPE name[N];` on one line of a public header.
cat "$inc"/*.h | sed -n 's/^[[:space:]]*extern[^(]*[^A-Za-z0-9_]\([A-Za-z_][A-Za-z0-9_]*\)[[:space:]]*\(\[[^]]*\]\)\{0,1\}[[:space:]]*;.*/\1/p' \
    >> "$tmp/declared"
sort -u -o "$tmp/declared" "$tmp/declared"

# Defined dynamic symbols; _init/_fini and the linker's section markers are not API.
nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sed 's/@.*//' |
    grep -v -x -E '_init|_fini|_edata|_end|__bss_start' | sort -u > "$tmp/exported"

n_decl=$(wc -l < "$tmp/declared"); n_exp=$(wc -l < "$tmp/exported")
[ "$n_decl" -gt 50 ] || { echo "FAIL: only $n_decl public declarations found in $inc (parse broken?)"; fail=1; }

missing=$(comm -23 "$tmp/declared" "$tmp/exported")
leaked=$(comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
    echo "FAIL: declared in include/*.h but not exported from $(basename "$lib") (a header without"
    echo "      '#pragma GCC visibility push(default)', or a function never defined):"
    echo "$missing" | sed 's/^/  /'; fail=1
fi
if [ -n "$leaked" ]; then
    echo "FAIL: exported from $(basename "$lib") but declared in no public header (internal symbols leak):"
    echo "$leaked" | sed 's/^/  /'; fail=1
fi
echo "exports: $n_decl public declarations, $n_exp exported symbols"
[ $fail = 0 ] && echo "exports: OK (exactly the public API)"
exit $fail
