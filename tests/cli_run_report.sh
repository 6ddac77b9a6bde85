#!/usr/bin/env bash
# The run report `run`, `perplexity` and `bench MODEL` end with ($1 = CLI path): op time per
# device from the run records, bytes between host and device, fallbacks; "on the GPU" only when
# every op of every step ran on a device.
#   - CPU only: the CPU alone, 100%, nothing moved, no "on the GPU" (run, perplexity, bench);
#   - the mock taking only attention and norm (BACKPLANE_TEST_MOCK=attention,norm): both devices
#     named, each with a share above 0, the shares summing to 100%; bytes moved; no "on the GPU";
#   - the mock taking every op but not the step (=all): the CPU still runs the step's other nodes
#     (embedding, adds), so no "on the GPU" either;
#   - the mock taking the whole step (=step, --backend mock) and Vulkan --strict (lavapipe, where
#     present): that device alone at 100%, "every op of every step ran on the GPU", and at least
#     the model's weight bytes uploaded (placing it);
#   - the same in --json ("report").
# Without Vulkan (binary or device) the rest is checked and the test then exits 77 (a skip, named
# on stderr), so the skip summary sees it.
set -u
cli=${1:?usage: cli_run_report.sh path/to/backplane}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
python3 tests/model/gen_tiny.py "$tmp/tiny" >/dev/null || { echo "FAIL: gen_tiny.py"; exit 1; }
m=$tmp/tiny/tiny-llama.gguf

# check JSON TEXT WANT_DEVICES ALL_ON_DEVICE: the report's devices (comma list, in order), shares
# > 0 summing to 1, all_on_device, and the text's lines saying the same
check() {
  python3 - "$@" <<'PY'
import json, re, sys
jpath, tpath, want, all_on = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4] == "1"
try:
    d = json.load(open(jpath, encoding="utf-8", errors="replace"), strict=False)
except Exception as e:
    print("unreadable JSON (%s)" % e); sys.exit(1)
r = d.get("report")
bad = []
if r is None:
    print("no report in the JSON"); sys.exit(1)
names = [x["backend"] for x in r["devices"]]
if names != want:
    bad.append("devices %r, want %r" % (names, want))
if any(not (x["share"] > 0) for x in r["devices"]):
    bad.append("a share is not above 0: %r" % r["devices"])
tot = sum(x["share"] for x in r["devices"])
if abs(tot - 1) > 0.005:
    bad.append("shares sum to %.4f" % tot)
if abs(sum(x["seconds"] for x in r["devices"]) - r["op_seconds"]) > 1e-3 * max(r["op_seconds"], 1e-3):
    bad.append("seconds do not add up to op_seconds %r" % r)
if r["all_on_device"] != all_on:
    bad.append("all_on_device %r" % r["all_on_device"])
if r["steps"] < 1 or r["tokens"] < r["steps"]:
    bad.append("steps %d tokens %d" % (r["steps"], r["tokens"]))
moved = r["h2d_bytes"] + r["d2h_bytes"]
if (want == ["cpu"]) != (moved == 0):
    bad.append("%d bytes moved with devices %r" % (moved, names))
if all_on and "paths" in d:
    weights = sum(p["bytes"] for p in d["paths"])
    if r["h2d_bytes"] < weights:
        bad.append("%d bytes uploaded, below the %d bytes of weights placed" % (r["h2d_bytes"], weights))
txt = open(tpath, encoding="utf-8", errors="replace").read()
line = re.search(r"^op time by device \(run records\): (.*) of [0-9.]+ s over", txt, re.M)
if not line:
    bad.append("no 'op time by device' line")
else:
    parts = [p.strip().rsplit(" ", 1) for p in line.group(1).split(",")]
    disp = {"cpu": "CPU", "mock": "Mock", "vulkan": "Vulkan", "opencl": "OpenCL"}
    if [p[0] for p in parts] != [disp[w] for w in want]:
        bad.append("text names %r" % [p[0] for p in parts])
    s = sum(float(p[1].rstrip("%")) for p in parts)
    if abs(s - 100) > 0.5:
        bad.append("text shares sum to %.1f%%" % s)
if ("on the GPU" in txt) != all_on:
    bad.append("'on the GPU' %s the text" % ("missing from" if all_on else "in"))
if not re.search(r"^fallbacks: 0", txt, re.M):
    bad.append("no 'fallbacks: 0' line")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
}

run2() { # NAME ENV... -- ARGS: the run twice, --json and text
  name=$1; shift
  envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$cli" "$@" --json >"$tmp/$name.json" 2>"$tmp/$name.jerr" || bad "$name: --json exited $?: $(tail -2 "$tmp/$name.jerr")"
  env "${envs[@]}" "$cli" "$@" >"$tmp/$name.out" 2>"$tmp/$name.txt" || bad "$name: exited $?: $(tail -2 "$tmp/$name.txt")"
  cat "$tmp/$name.out" >>"$tmp/$name.txt"
}

run2 cpu BACKPLANE_TEST_MOCK= -- run "$m" -p "the of and" -n 8
why=$(check "$tmp/cpu.json" "$tmp/cpu.txt" cpu 0) && echo "ok: run on the CPU: the CPU alone" || bad "run cpu: $why"
run2 ppl BACKPLANE_TEST_MOCK= -- perplexity "$m" -f tests/model/gpl-3.txt --ctx 32 --chunks 2
why=$(check "$tmp/ppl.json" "$tmp/ppl.txt" cpu 0) && echo "ok: perplexity on the CPU: the CPU alone" || bad "perplexity cpu: $why"
run2 bench BACKPLANE_TEST_MOCK= -- bench "$m" -p 8 -n 4 -r 1
why=$(check "$tmp/bench.json" "$tmp/bench.txt" cpu 0) && echo "ok: bench MODEL on the CPU: the CPU alone" || bad "bench cpu: $why"

run2 part BACKPLANE_TEST_MOCK=attention,norm -- run "$m" -p "the of and" -n 8
why=$(check "$tmp/part.json" "$tmp/part.txt" cpu,mock 0) && echo "ok: run with the mock taking attention and norm: CPU and Mock, shares summing to 100%" \
  || bad "run mock attention,norm: $why"
run2 pplpart BACKPLANE_TEST_MOCK=attention,norm -- perplexity "$m" -f tests/model/gpl-3.txt --ctx 32 --chunks 2
why=$(check "$tmp/pplpart.json" "$tmp/pplpart.txt" cpu,mock 0) && echo "ok: perplexity with the mock taking attention and norm: CPU and Mock" \
  || bad "perplexity mock attention,norm: $why"
run2 allops BACKPLANE_TEST_MOCK=all -- run "$m" -p "the of and" -n 8
why=$(check "$tmp/allops.json" "$tmp/allops.txt" cpu,mock 0) && echo "ok: run with the mock taking every op but the step: not 'on the GPU'" \
  || bad "run mock all: $why"

run2 step BACKPLANE_TEST_MOCK=step -- run "$m" -p "the of and" -n 8 --backend mock --strict
why=$(check "$tmp/step.json" "$tmp/step.txt" mock 1) && echo "ok: run with the mock taking the whole step: Mock alone, 'on the GPU'" \
  || bad "run mock step: $why"
run2 benchstep BACKPLANE_TEST_MOCK=step -- bench "$m" -p 8 -n 4 -r 1
why=$(check "$tmp/benchstep.json" "$tmp/benchstep.txt" mock 1) && echo "ok: bench MODEL with the mock taking the whole step: Mock alone" \
  || bad "bench mock step: $why"

probe=$(BACKPLANE_VULKAN=1 "$cli" probe --json 2>/dev/null)
if printf '%s' "$probe" | python3 -c 'import json,sys; d=json.load(sys.stdin); b=[x for x in d["backends"] if x["name"]=="vulkan"]; sys.exit(0 if b and b[0]["compiled"] and b[0]["enabled"] and b[0]["device"] else 1)' 2>/dev/null; then
  run2 vk BACKPLANE_TEST_MOCK= -- run "$m" -p "the of and" -n 8 --backend vulkan --strict
  why=$(check "$tmp/vk.json" "$tmp/vk.txt" vulkan 1) && echo "ok: run --backend vulkan --strict: Vulkan alone, 'on the GPU'" \
    || bad "run vulkan: $why"
else
  echo "SKIP: no Vulkan backend or device in this binary / machine: the Vulkan run report is not checked" >&2
  [ $fail = 0 ] && exit 77
fi
exit $fail
