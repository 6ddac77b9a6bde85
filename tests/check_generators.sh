#!/usr/bin/env bash
# The committed vectors and tables are what their scripts make: regenerate each and fail on any
# byte that differs (CI runs this; a hand-edited or stale vector file is a test checking nothing
# but itself). Needs python3 with numpy and the gguf package (scripts/install-deps.sh).
#   tests/vectors/gen_vectors.py --check   dequant/quant/matmul vectors (its own check mode)
#   tools/gen_iq_tables.py                 src/kinds/iq_tables.h, compared byte for byte
#   tests/vectors/ops/gen_ops.py --check, tests/vectors/conv_moe/gen_conv_moe.py --check
#                                          the op layer's and conv2d/MoE's float64 vectors
#   tests/gguf/gen_gguf.py                 tests/gguf/* and the seeds in tests/fuzz/corpus,
#                                          regenerated in place, then compared with the
#                                          checksums taken before
set -u
cd "$(dirname "$0")/.."
fail=0
python3 tests/vectors/gen_vectors.py --check || { echo "FAIL: tests/vectors differ from gen_vectors.py"; fail=1; }
python3 tests/vectors/ops/gen_ops.py --check >/dev/null || { echo "FAIL: tests/vectors/ops differ from gen_ops.py"; fail=1; }
python3 tests/vectors/conv_moe/gen_conv_moe.py --check >/dev/null ||
    { echo "FAIL: tests/vectors/conv_moe differ from gen_conv_moe.py"; fail=1; }
python3 tools/gen_iq_tables.py | cmp -s - src/kinds/iq_tables.h ||
    { echo "FAIL: src/kinds/iq_tables.h differs from tools/gen_iq_tables.py"; fail=1; }
sums() { find tests/gguf tests/fuzz/corpus -type f ! -name '*.py' ! -path '*/crashers/*' -print0 | sort -z | xargs -0 sha256sum; }
before=$(sums)
python3 tests/gguf/gen_gguf.py 2>/dev/null || { echo "FAIL: tests/gguf/gen_gguf.py failed"; fail=1; }
after=$(sums)
if [ "$before" != "$after" ]; then
    echo "FAIL: tests/gguf/gen_gguf.py changed committed files (now rewritten in place; see git diff):"
    diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -20
    fail=1
fi
[ $fail = 0 ] && echo "generators: tests/vectors, src/kinds/iq_tables.h, tests/gguf and the fuzz seeds are reproducible"
exit $fail
