#!/usr/bin/env bash
# The seam's reports when a GPU runs, end to end through `backplane run` on the tiny models of
# every architecture, with the mock backend standing in for the GPU (BACKPLANE_TEST_MOCK=all:
# it takes every (op, kind) pair and computes the op layer's reference). $1 is the CLI path.
#   - the summary names the mock's kernel for every weight kind, decode and prefill, and for
#     every op that ran; 0 fallbacks;
#   - --profile attributes every row to the mock;
#   - a launch error injected on one op (BACKPLANE_TEST_MOCK_FAIL=norm) is one named, counted
#     fallback row ("mock F32 norm -> CPU: mock: injected launch error on norm"), the summary
#     says so for that op, every other op still runs on the mock, and the tokens are those of
#     the run without the error; under --strict the same run fails naming the op.
set -u
cli=${1:?usage: cli_seam_mock.sh path/to/backplane}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
python3 tests/model/gen_tiny.py "$tmp/tiny" >/dev/null || fail "gen_tiny.py failed"
for arch in llama qwen2 qwen3 gemma3; do
    m="$tmp/tiny/tiny-$arch.gguf"
    BACKPLANE_TEST_MOCK=all "$cli" run "$m" -p "the of and" -n 8 --json >"$tmp/mock.json" 2>"$tmp/mock.err" \
        || fail "$arch: mock run exited $?: $(tail -3 "$tmp/mock.err")"
    BACKPLANE_TEST_MOCK=all "$cli" run "$m" -p "the of and" -n 8 --profile >"$tmp/mock.out" 2>"$tmp/mock.err" \
        || fail "$arch: mock run --profile exited $?"
    BACKPLANE_TEST_MOCK=all BACKPLANE_TEST_MOCK_FAIL=norm "$cli" run "$m" -p "the of and" -n 8 --json \
        >"$tmp/fail.json" 2>"$tmp/fail.err" || fail "$arch: run with a failing norm exited $?"
    BACKPLANE_TEST_MOCK=all BACKPLANE_TEST_MOCK_FAIL=norm "$cli" run "$m" -p "the of and" -n 8 --fallbacks \
        >"$tmp/fail.out" 2>"$tmp/fail.txt" || fail "$arch: run --fallbacks with a failing norm exited $?"
    BACKPLANE_TEST_MOCK=all BACKPLANE_TEST_MOCK_FAIL=norm "$cli" run "$m" -p "the of and" -n 8 --strict \
        >/dev/null 2>"$tmp/strict.err" && fail "$arch: --strict with a failing norm succeeded"
    grep -aq "strict mode: norm of F32" "$tmp/strict.err" || fail "$arch: strict error: $(tail -2 "$tmp/strict.err")"
    ARCH=$arch python3 - "$tmp" <<'PY' || fail "$arch: reports (above)"
import json, os, re, sys
tmp, arch = sys.argv[1], os.environ["ARCH"]
mock = json.loads(open(tmp + "/mock.json", encoding="utf-8", errors="replace").read(), strict=False)
bad = []
for p in mock["paths"]:
    for which in ("decode", "prefill"):
        want = "Mock jobs " + p["kind"]
        if which == "prefill" and p[which] == "":
            continue  # a weight only the last row meets (the output) has no prefill
        if p[which] != want:
            bad.append("%s %s: %r, want %r" % (p["kind"], which, p[which], want))
if mock["fallbacks"] != 0:
    bad.append("mock run: %d fallbacks" % mock["fallbacks"])
err = open(tmp + "/mock.err", encoding="utf-8", errors="replace").read()
ops = re.findall(r"^  (\w+) +(.+) \(\d+ calls?\)$", err.split("paths per op:")[1].split("fallbacks:")[0], re.M)
if not ops:
    bad.append("no 'paths per op' lines")
for op, what in ops:
    # the mock does not claim the whole step: the CPU walks its ops, each of which ran on the mock
    if op == "step" and what.startswith("CPU, op by op"):
        continue
    if not what.startswith("Mock %s " % op):
        bad.append("op %s ran on %r" % (op, what))
prof = [l for l in err.splitlines() if re.match(r"^\| (matvec|gemm|jobs|attention|norm|rope|act|glu|softmax) \|", l)]
if not prof:
    bad.append("--profile printed no rows")
for l in prof:
    if "| Mock " not in l:
        bad.append("--profile row not on the mock: " + l)
failj = json.loads(open(tmp + "/fail.json", encoding="utf-8", errors="replace").read(), strict=False)
if failj["text"] != mock["text"]:
    bad.append("tokens differ with the injected error: %r vs %r" % (failj["text"], mock["text"]))
if failj["fallbacks"] <= 0:
    bad.append("the injected error was not counted")
txt = open(tmp + "/fail.txt", encoding="utf-8", errors="replace").read()
rows = re.findall(r"^ +(\d+)  (\S+ \S+ \S+) -> (\S+): (.*)$", txt, re.M)
if len(rows) != 1 or rows[0][1:] != ("mock F32 norm", "CPU", "mock: injected launch error on norm") \
        or int(rows[0][0]) != failj["fallbacks"]:
    bad.append("fallback rows: %r (total %d)" % (rows, failj["fallbacks"]))
if not re.search(r"^  norm +CPU .*\(fallback from Mock: mock: injected launch error on norm\)", txt, re.M):
    bad.append("the summary does not name the norm fallback")
for op, what in re.findall(r"^  (\w+) +(.+) \(\d+ calls?\)$", txt.split("paths per op:")[1].split("fallbacks:")[0], re.M):
    if op != "norm" and not what.startswith("Mock ") and not (op == "step" and what.startswith("CPU, op by op")):
        bad.append("with norm failing, op %s ran on %r" % (op, what))
for b in bad:
    print("FAIL %s: %s" % (arch, b))
sys.exit(1 if bad else 0)
PY
    echo "ok: $arch: every weight kind and op on the mock, --profile on the mock, one counted norm fallback, same tokens"
done
