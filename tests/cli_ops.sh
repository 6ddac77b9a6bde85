#!/usr/bin/env bash
# The op layer at the CLI. $1 is the CLI path.
# - probe --json has an "ops" list covering every ops.def row (names written here, independently
#   of the code) with every KV kind under attention, and every route names the CPU or a backend
#   that claims the pair; the text probe has the ops table.
# - verify --backend cpu covers attention for every KV kind and the row ops, all PASS.
# - bench --op norm/rope/act/jobs/attention run on tiny shapes and print their tables
#   (timings are not checked: benchmarks are not tests), --profile prints the stats table.
set -u
cli=${1:?usage: cli_ops.sh path/to/backplane}
fail() { echo "FAIL: $*"; exit 1; }

ops="matvec gemm jobs attention norm rope act glu softmax conv2d conv2d_gn conv2d_ln moe step"
kv="F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL"

probe=$("$cli" probe --json) || fail "probe --json exited $?"
"$cli" probe | grep -q "^| attention |" || fail "text probe has no attention route"
if command -v python3 >/dev/null 2>&1; then
    printf '%s' "$probe" | OPS="$ops" KV="$kv" python3 -c '
import json, os, sys
d = json.load(sys.stdin)
rows = d["ops"]
names = {r["op"] for r in rows}
want = set(os.environ["OPS"].split())
assert names == want, ("ops listed", sorted(names), "want", sorted(want))
att = set()
for r in rows:
    if r["op"] == "attention":
        att |= set(r["kinds"].split())
    # the CPU, or a backend claiming the pair (the route names that backend)
    ok = r["route"].startswith("CPU") or (r["claimed_by"] and r["route"].split()[0].lower() in r["claimed_by"].split(", "))
    assert ok, ("route without a claim", r)
assert att == set(os.environ["KV"].split()), ("attention kinds", sorted(att))
' || fail "probe --json ops section"
fi

out=$("$cli" verify --backend cpu --kind Q8_0) || fail "verify --backend cpu --kind Q8_0 exited $?"
printf '%s\n' "$out" | grep -q "| cpu | attention | Q8_0 |" || fail "verify has no attention rows"
printf '%s\n' "$out" | grep -q "FAIL" && fail "verify printed FAIL"
out=$("$cli" verify --backend cpu --kind F32 --json) || fail "verify --kind F32 --json exited $?"
for op in norm rope act glu softmax attention; do
    printf '%s' "$out" | grep -q "\"op\": \"$op\"" || fail "verify --json has no $op case"
done

for op in norm rope act; do
    "$cli" bench --op $op --min-ms 1 --threads 1 | grep -q "^| " || fail "bench --op $op printed no table"
done
"$cli" bench --op jobs --t 1 --min-ms 1 | grep -q "^| gemma3" || fail "bench --op jobs printed no table"
err=$("$cli" bench --op attention --kv-kind F16,Q4_0 --ctx 64 --gqa 2 --dim 64 --heads 4 --min-ms 1 --cold-mib 1 \
      --profile 2>&1 >/dev/null) || fail "bench --op attention exited $?"
printf '%s' "$err" | grep -q "^| attention | F16 | 1 | CPU " || fail "--profile printed no attention row: $err"
"$cli" bench --op attention --kv-kind Q4_K >/dev/null 2>&1 && fail "Q4_K accepted as a KV kind"
"$cli" bench --op nosuch >/dev/null 2>&1 && fail "an unknown op accepted"
echo "cli_ops: ok"
