#!/usr/bin/env bash
# `backplane bench` on tiny shapes: --json has exactly the documented keys, one result per
# (kind, backend, batch), positive finite figures that agree with each other (GFLOP/s and GB/s
# recomputed from median_us, rows, cols and the kind's block size), the cold buffer --cold-mib
# asked for; the markdown table has the
# header and a row per result; bad options exit 2; a backend that is not there is an error.
# $1 = CLI path. Needs python3 for the JSON checks (CI has it).
set -u
cli=${1:?usage: cli_cpu_bench.sh path/to/backplane}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

"$cli" bench --kind Q4_0,IQ2_XXS --kind F16 --backend cpu --backend cpu-ref --rows 40 --cols 512 \
    --batch 1 --batch 5 --reps 3 --cold-mib 64 --json >"$tmp/out.json" 2>"$tmp/err" ||
    { echo "FAIL: bench --json exited $?: $(cat "$tmp/err")"; exit 1; }
python3 - "$tmp/out.json" <<'PY' || fail=1
import json, math, sys
doc = json.load(open(sys.argv[1]))
assert set(doc) == {"read_bandwidth_gbps", "cold_mib", "results"}, doc.keys()
assert doc["read_bandwidth_gbps"] > 0
assert doc["cold_mib"] == 64, doc["cold_mib"]  # --cold-mib sizes the one cold buffer
keys = {"kind", "backend", "batch", "rows", "cols", "median_us", "gbps", "gflops"}
bpb = {"Q4_0": 18 / 32, "IQ2_XXS": 66 / 256, "F16": 2.0}
seen = set()
for r in doc["results"]:
    assert set(r) == keys, r
    assert r["rows"] == 40 and r["cols"] == 512, r
    for k in ("median_us", "gbps", "gflops"):
        assert math.isfinite(r[k]) and r[k] > 0, r
    t = r["median_us"] * 1e-6
    gflops = 2 * 40 * 512 * r["batch"] / t / 1e9
    gbps = 40 * 512 * bpb[r["kind"]] / t / 1e9
    assert abs(gflops / r["gflops"] - 1) < 0.01 and abs(gbps / r["gbps"] - 1) < 0.01, r
    seen.add((r["kind"], r["backend"], r["batch"]))
want = {(k, b, t) for k in bpb for b in ("cpu", "cpu-ref") for t in (1, 5)}
assert seen == want and len(doc["results"]) == len(want), sorted(seen ^ want)
PY
[ $fail = 0 ] || echo "FAIL: bench --json content (see above)"

"$cli" bench --kind Q8_0 --rows 32 --cols 256 --batch 1 --reps 3 >"$tmp/out.md" 2>"$tmp/err" ||
    { echo "FAIL: bench (table) exited $?: $(cat "$tmp/err")"; fail=1; }
grep -q '^| kind | backend | test | rows x cols | median us | GB/s | of read BW | GFLOP/s | CPU share | kernel |$' "$tmp/out.md" ||
    { echo "FAIL: no table header"; fail=1; }
grep -q '^| Q8_0 | cpu | decode | 32x256 | .* | CPU .*Q8_0' "$tmp/out.md" || { echo "FAIL: no Q8_0 decode row"; fail=1; }
grep -q 'read bandwidth [0-9.]* GB/s' "$tmp/out.md" || { echo "FAIL: no read bandwidth line"; fail=1; }

"$cli" bench --kind NOPE >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || { echo "FAIL: unknown kind exited $rc, want 2"; fail=1; }
"$cli" bench --rows >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || { echo "FAIL: --rows without a value exited $rc, want 2"; fail=1; }
"$cli" bench --kind Q4_0 --backend no-such-backend --rows 16 --cols 64 --batch 1 --reps 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q "no-such-backend" "$tmp/err" || { echo "FAIL: missing backend exited $rc: $(cat "$tmp/err")"; fail=1; }

if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
