#!/usr/bin/env bash
# `backplane matvec` on tests/gguf/kinds.gguf (one 8 x 256 tensor per kind the gguf package can
# write) against NumPy: y = W x with W dequantized by the gguf package, in float64
# (tests/gguf/kinds_y/<KIND>.f32, made by tests/gguf/gen_gguf.py). Compared with od + awk, so no
# Python is needed. --backend cpu-ref (dequantize, accumulate in double): |y - ref| <= 1e-6 *
# sum|W x| per row (kinds_y/<KIND>.scale.f32). The seam's choice may quantize x to 8 bits first
# (Q8_0/Q8_K activations, as llama.cpp does) and accumulate in float32: rounding moves each x[c]
# by up to d/2 (d = max|x|/127), so y moves by about sigma = |W row| * d / sqrt(12)
# (kinds_y/<KIND>.l2w.f32); the bound is 6 sigma plus 2e-5 * sum|W x|. Measured on the CPU's
# q8 int-dot paths: at most 3.3 sigma (TQ2_0), typically 1-2; the bound is ~7% of |y|.
# Then the error cases: unknown tensor, non-2-D tensor, wrong input length. $1 = CLI.
set -u
cli=${1:?usage: cli_matvec.sh path/to/backplane}
dir=tests/gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0; checked=0

floats() { od -An -v -f -w4 "$1" | tr -d ' '; }
xmax=$(floats $dir/kinds_x.f32 | awk '{ a = $1 < 0 ? -$1 : $1; if (a > m) m = a } END { printf "%.9g", m }')

for kind in $(cat $dir/kinds_list.txt); do
    # seam: whatever the seam picks with the CPU implementations forced on (lavapipe when Vulkan
    # is built: unforced they are off and the seam would pick the CPU, as `cpu` does); cpu: the
    # optimized CPU kernels (int8 activations); cpu-ref: the reference kernel.
    for backend in seam cpu cpu-ref; do
        args=(); tol=2e-5; q8=1; force=()
        if [ "$backend" = seam ]; then force=(BACKPLANE_VULKAN=1 BACKPLANE_OPENCL=1); fi
        if [ "$backend" = cpu ]; then args=(--backend cpu); fi
        if [ "$backend" = cpu-ref ]; then args=(--backend cpu-ref); tol=1e-6; q8=0; fi
        if ! env "${force[@]}" "$cli" matvec $dir/kinds.gguf "$kind" --input $dir/kinds_x.f32 --output "$tmp/y" "${args[@]}" 2>"$tmp/err"; then
            echo "FAIL: matvec $kind ($backend) exited non-zero: $(cat "$tmp/err")"; fail=1; continue
        fi
        grep -q "ran on: " "$tmp/err" || { echo "FAIL: matvec $kind ($backend) did not say which path ran"; fail=1; }
        verdict=$(paste <(floats "$tmp/y") <(floats $dir/kinds_y/$kind.f32) <(floats $dir/kinds_y/$kind.scale.f32) \
                        <(floats $dir/kinds_y/$kind.l2w.f32) |
            awk -v tol="$tol" -v q8="$q8" -v xmax="$xmax" '
                tolower($1) ~ /nan/ { nan = 1; next }
                { n++; d = $1 - $2; if (d < 0) d = -d; lim = tol * $3 + q8 * 6 * $4 * xmax / 127 / sqrt(12) + 1e-30
                  if (d > lim) { bad++; msg = msg sprintf(" row %d: %s vs %s (allowed %.3g);", NR - 1, $1, $2, lim) } }
                END { if (nan) print "NaN output"; else if (n != 8) print "COUNT " n; else if (bad) print "BAD" msg; else print "OK" }')
        case "$verdict" in
            OK) checked=$((checked + 1)) ;;
            *) echo "FAIL: matvec $kind ($backend, $(sed -n 's/.*ran on: //p' "$tmp/err")) vs NumPy: $verdict"; fail=1 ;;
        esac
    done
done
echo "matvec vs NumPy: $checked kind/backend pairs agree"
[ "$checked" -gt 0 ] || { echo "FAIL: nothing compared"; fail=1; }

# Error cases: each must exit non-zero with a message that names the problem.
expect_fail() {  # what, pattern, command...
    local what=$1 pat=$2; shift 2
    if "$@" >"$tmp/out" 2>"$tmp/err"; then echo "FAIL: $what: exited 0"; fail=1; return; fi
    grep -q -- "$pat" "$tmp/err" || { echo "FAIL: $what: stderr lacks '$pat': $(cat "$tmp/err")"; fail=1; }
}
expect_fail "unknown tensor" "no tensor named 'nope'" \
    "$cli" matvec $dir/kinds.gguf nope --input $dir/kinds_x.f32 --output "$tmp/y"
expect_fail "1-D tensor" "1 dimension" \
    "$cli" matvec $dir/meta_all.gguf t1.f32 --input $dir/kinds_x.f32 --output "$tmp/y"
expect_fail "3-D tensor" "3 dimensions" \
    "$cli" matvec $dir/meta_all.gguf t3.i32 --input $dir/kinds_x.f32 --output "$tmp/y"
head -c 1020 $dir/kinds_x.f32 > "$tmp/short.f32"
expect_fail "short input" "has 256 columns" \
    "$cli" matvec $dir/kinds.gguf Q4_K --input "$tmp/short.f32" --output "$tmp/y"
cat $dir/kinds_x.f32 $dir/kinds_x.f32 > "$tmp/long.f32"
expect_fail "long input" "must have 1024 bytes" \
    "$cli" matvec $dir/kinds.gguf Q4_K --input "$tmp/long.f32" --output "$tmp/y"
expect_fail "missing input file" "cannot open input" \
    "$cli" matvec $dir/kinds.gguf Q4_K --input "$tmp/none.f32" --output "$tmp/y"
expect_fail "unknown backend" "matvec" \
    "$cli" matvec $dir/kinds.gguf Q4_K --input $dir/kinds_x.f32 --output "$tmp/y" --backend no-such-backend
expect_fail "big-endian file" "big-endian" \
    "$cli" matvec $dir/meta_all_be.gguf t2.f16 --input $dir/kinds_x.f32 --output "$tmp/y"
expect_fail "missing --output" "usage" "$cli" matvec $dir/kinds.gguf Q4_K --input $dir/kinds_x.f32
exit $fail
