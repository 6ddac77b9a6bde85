#!/usr/bin/env bash
# Side by side: `backplane bench MODEL` and llama.cpp's `llama-bench` on the same file, the same
# thread count, interleaved round by round (this machine is shared: whatever else runs hits both
# alike), medians of the rounds and the ratio per test. Prints a markdown table and the machine.
#
#   tools/model_sidebyside.sh MODEL.gguf [ROUNDS] [THREADS]
#
# LLAMA_BENCH: path of llama-bench (default /tmp/llama.cpp/build/bin/llama-bench).
# BACKPLANE: path of the CLI (default build/backplane). Each round runs pp512 and tg128 once per
# tool with -r 3 inside (each tool's own mean over 3 repetitions after its warm-up).
set -euo pipefail
MODEL=${1:?usage: tools/model_sidebyside.sh MODEL.gguf [ROUNDS] [THREADS]}
ROUNDS=${2:-5}
THREADS=${3:-2}
LB=${LLAMA_BENCH:-/tmp/llama.cpp/build/bin/llama-bench}
BP=${BACKPLANE:-build/backplane}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  # alternate which tool goes first, so neither always runs on a warmer or quieter machine
  if [ $((r % 2)) = 1 ]; then order="bp lc"; else order="lc bp"; fi
  for tool in $order; do
    if [ $tool = bp ]; then
      "$BP" bench "$MODEL" -p 512 -n 128 -r 3 --threads "$THREADS" --json >"$TMP/bp.$r.json"
    else
      "$LB" -m "$MODEL" -t "$THREADS" -p 512 -n 128 -r 3 -o json >"$TMP/lc.$r.json" 2>/dev/null
    fi
  done
done
python3 - "$TMP" "$ROUNDS" "$MODEL" "$THREADS" <<'PY'
import json, os, statistics, subprocess, sys
tmp, rounds, model, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
bp = {"pp512": [], "tg128": []}
lc = {"pp512": [], "tg128": []}
for r in range(1, rounds + 1):
    for t in json.load(open(os.path.join(tmp, "bp.%d.json" % r)))["tests"]:
        bp[t["test"]].append(t["tps_mean"])
    for t in json.load(open(os.path.join(tmp, "lc.%d.json" % r))):
        name = ("pp%d" % t["n_prompt"]) if t["n_gen"] == 0 else ("tg%d" % t["n_gen"])
        lc[name].append(t["avg_ts"])
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model_name = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
print("%s, %s threads, %d interleaved rounds, median of the rounds' means (t/s)\n" % (model_name, threads, rounds))
print("| test | backplane | llama.cpp | backplane / llama.cpp | backplane rounds | llama.cpp rounds |")
print("|---|---:|---:|---:|---|---|")
for k in ("pp512", "tg128"):
    a, b = statistics.median(bp[k]), statistics.median(lc[k])
    print("| %s | %.1f | %.1f | %.2f | %s | %s |" % (k, a, b, a / b, " ".join("%.1f" % x for x in bp[k]),
                                                    " ".join("%.1f" % x for x in lc[k])))
PY
