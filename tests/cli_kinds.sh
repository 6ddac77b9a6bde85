#!/usr/bin/env bash
# `backplane kinds --json` lists exactly the 28 weight kinds, each with the keys scripts read:
# name, id, block_elements, block_bytes, bits_per_weight, quantize. $1 is the CLI path.
# Parsed with python3's json module when present (CI has it), else checked with grep.
set -u
cli=${1:?usage: cli_kinds.sh path/to/backplane}
out=$("$cli" kinds --json) || { echo "FAIL: '$cli kinds --json' exited $?"; exit 1; }
"$cli" kinds >/dev/null || { echo "FAIL: '$cli kinds' exited $?"; exit 1; }

want="F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4 NVFP4 Q1_0 Q2_0"

if command -v python3 >/dev/null 2>&1; then
    printf '%s' "$out" | WANT="$want" python3 -c '
import json, os, sys
rows = json.load(sys.stdin)
assert isinstance(rows, list), "not a JSON array"
keys = {"name", "id", "block_elements", "block_bytes", "bits_per_weight", "quantize"}
for r in rows:
    missing = keys - set(r)
    assert not missing, (r.get("name"), "missing keys", sorted(missing))
    assert isinstance(r["id"], int) and isinstance(r["quantize"], bool), r
    assert abs(r["bits_per_weight"] - 8 * r["block_bytes"] / r["block_elements"]) < 1e-3, r
names = [r["name"] for r in rows]
want = os.environ["WANT"].split()
assert len(rows) == 28, f"{len(rows)} rows, want 28"
assert sorted(names) == sorted(want), f"kinds differ: extra {set(names) - set(want)}, missing {set(want) - set(names)}"
ids = [r["id"] for r in rows]
assert ids == sorted(set(ids)), "ids not unique and ascending"
q = {r["name"]: r["quantize"] for r in rows}
for k in ("F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "IQ4_NL", "MXFP4"):
    assert q[k], f"{k} should be quantizable"
for k in ("IQ2_XXS", "IQ1_S", "IQ3_S"):
    assert not q[k], f"{k} claims a quantizer"
print("cli kinds --json: 28 weight kinds, all keys present (python3 json)")
' || { echo "FAIL: kinds --json output:"; printf '%s\n' "$out" | head -40; exit 1; }
else
    n=$(printf '%s\n' "$out" | grep -c '"name"')
    [ "$n" = 28 ] || { echo "FAIL: $n rows with \"name\", want 28"; exit 1; }
    for key in name id block_elements block_bytes bits_per_weight quantize; do
        c=$(printf '%s\n' "$out" | grep -c "\"$key\":")
        [ "$c" = 28 ] || { echo "FAIL: key $key on $c rows, want 28"; exit 1; }
    done
    for k in $want; do
        printf '%s\n' "$out" | grep -q "\"name\": *\"$k\"" || { echo "FAIL: kind $k missing"; exit 1; }
    done
    printf '%s' "$out" | head -c1 | grep -q '\[' || { echo "FAIL: not a JSON array"; exit 1; }
    echo "cli kinds --json: 28 weight kinds, all keys present (grep check; no python3)"
fi
