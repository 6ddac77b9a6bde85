#!/usr/bin/env bash
# backplane serve and llama.cpp's llama-server on the same model, the same --parallel and context
# per slot, the same client (tools/serve_bench.py), interleaved: backplane, llama-server,
# backplane, llama-server (ROUNDS rounds), each server started fresh and stopped after its run.
#
# usage: tools/serve_sidebyside.sh BACKPLANE_CLI LLAMA_SERVER MODEL.gguf [PARALLEL=16] [CTX=1024] [ROUNDS=2]
# llama-server's -c is the context of all slots together (PARALLEL x CTX), -np the slots.
set -euo pipefail
bp=$1 ls=$2 model=$3 par=${4:-16} ctx=${5:-1024} rounds=${6:-2}
threads=$(nproc)
here=$(cd "$(dirname "$0")" && pwd)
port=$((20000 + RANDOM % 20000))
wait_health() {
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "sidebyside: the server on port $port did not come up" >&2
  return 1
}
run_one() { # label command...
  local label=$1
  shift
  "$@" >/tmp/sidebyside.$label.log 2>&1 &
  local pid=$!
  wait_health
  python3 "$here/serve_bench.py" "http://127.0.0.1:$port" --label "$label" --concurrency 1,4,16 --max-tokens 32 \
    --long-prompt-ttft | tee -a /tmp/sidebyside.results.md
  kill -TERM $pid
  wait $pid || true
}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads CPUs, $(date -u +%F)" | tee /tmp/sidebyside.results.md
for r in $(seq "$rounds"); do
  run_one backplane "$bp" serve "$model" --port $port --parallel "$par" --ctx "$ctx" --threads "$threads"
  run_one llama-server "$ls" -m "$model" --port $port -np "$par" -c $((par * ctx)) -t "$threads"
done
