#!/usr/bin/env bash
# The stack runs one way (DESIGN.md "The stack"): a file may include headers of its own folder
# and of the layers below it, never of a layer above. Levels, lowest first:
#   0 core   1 kinds, gguf   2 device   3 backend   4 gpu (the GPU backends' common code)
#   5 cpu, cuda, vulkan, opencl, metal, mock   6 seam   7 ops   8 model, text (tokenizer, sampler)
#   9 testing (test helpers, for tools and tests only)
# tools/ and tests/ sit on top and may include anything. A violation prints the file, the line
# and the two layers, and fails. Generated headers and the public include/ are not layers.
set -u
cd "$(dirname "$0")/.."
level() {
    case "$1" in
    core) echo 0 ;;
    kinds | gguf) echo 1 ;;
    device) echo 2 ;;
    backend) echo 3 ;;
    gpu) echo 4 ;;
    cpu | cuda | vulkan | opencl | metal | mock) echo 5 ;;
    seam) echo 6 ;;
    ops) echo 7 ;;
    model | text) echo 8 ;;
    testing) echo 9 ;;
    *) echo "" ;;
    esac
}
bad=0
checked=0
for f in $(find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' \) | sort); do
    from=$(echo "$f" | cut -d/ -f2)
    lf=$(level "$from")
    if [ -z "$lf" ]; then
        echo "FAIL: $f is in src/$from/, a folder with no layer (add it to tests/lint_layers.sh)"
        bad=1
        continue
    fi
    while IFS= read -r hit; do
        line=${hit%%:*}
        inc=$(echo "$hit" | sed -E 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/')
        case "$inc" in */*) ;; *) continue ;; esac # same folder, public or generated header
        to=${inc%%/*}
        lt=$(level "$to")
        [ -z "$lt" ] && continue
        checked=$((checked + 1))
        if [ "$to" != "$from" ] && [ "$lt" -gt "$lf" ]; then
            echo "FAIL: $f:$line includes $inc: $from (layer $lf) must not include $to (layer $lt), which is above it"
            bad=1
        fi
        if [ "$to" = testing ] && [ "$from" != testing ]; then
            echo "FAIL: $f:$line includes $inc: the library must not depend on the test helpers"
            bad=1
        fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done
echo "lint_layers: $checked cross-folder includes checked"
exit $bad
