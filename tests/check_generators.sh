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
#   tests/model/gen_tiny.py --check, np_forward.py
#                                          the tiny models (their sha256) and their float64
#                                          logits, tests/model/ref/tiny-*.f64.logits.bin, within
#                                          1e-6 of each row's largest (float64 sums may round
#                                          their last bit otherwise on another BLAS)
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
tiny=$(mktemp -d)
if python3 tests/model/gen_tiny.py "$tiny" --check >/dev/null; then
    for ref in tests/model/ref/tiny-*.f64.logits.bin; do
        name=$(basename "$ref" .f64.logits.bin) ctx=()
        # tiny-<model>.ctx<N>.f64.logits.bin: that model's logits at a context of N (LongRoPE's choice)
        case $name in *.ctx*) ctx=(--ctx "${name##*.ctx}") name=${name%.ctx*} ;; esac
        out=$tiny/$(basename "$ref").out
        python3 tests/model/np_forward.py "$tiny/$name.gguf" "$out" "${ctx[@]}" --like "$ref" &&
            python3 - "$ref" "$out" <<'PY' || { echo "FAIL: $ref differs from np_forward.py's"; fail=1; }
import sys
import numpy as np
a, b = (np.frombuffer(open(p, "rb").read(), dtype=np.uint8) for p in sys.argv[1:])
if a.size != b.size:
    sys.exit(1)
n_pos, n_ent = np.frombuffer(a[8:16].tobytes(), dtype="<i4")
off = 16 + 4 * n_pos
rec = [np.frombuffer(x[off:].tobytes(), dtype=[("id", "<i4"), ("v", "<f4")]).reshape(n_pos, n_ent) for x in (a, b)]
scale = np.abs(rec[0]["v"]).max(axis=1, keepdims=True)
ok = (a[:off] == b[:off]).all() and (rec[0]["id"] == rec[1]["id"]).all() and \
    (np.abs(rec[0]["v"].astype(np.float64) - rec[1]["v"]) <= 1e-6 * scale).all()
sys.exit(0 if ok else 1)
PY
    done
else
    echo "FAIL: tests/model/gen_tiny.py --check: the tiny models differ from tests/model/ref/tiny.sha256"; fail=1
fi
rm -rf "$tiny"
[ $fail = 0 ] && echo "generators: tests/vectors, src/kinds/iq_tables.h, tests/gguf, the fuzz seeds, the tiny models and their float64 logits are reproducible"
exit $fail
