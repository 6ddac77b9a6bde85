#!/usr/bin/env python3
"""Side-by-side: `backplane tokenize` against llama.cpp's `llama-tokenize`, same vocabulary, same
text, interleaved runs, medians. Prints a markdown table (--json: the rows).

    python3 tests/tokenizer/bench_vs_llama.py [--backplane build/backplane]
        [--tool /tmp/llama.cpp/build/bin/llama-tokenize] [--reps 7] [--json]

Each run is a whole process: open the GGUF, build the tokenizer, encode the text (strings.py's
PARAGRAPH repeated to ~4k tokens, the size of a perplexity window set), print the ids. Both
are measured by the CPU time the child used (getrusage), which a shared machine disturbs less
than wall time; wall time is shown too. The ids of both are compared: a row whose ids differ
says so. Our in-process figures (tokenizer build alone, encode alone) come from
`backplane tokenize MODEL --bench`.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_expected import VOCABS, vocab_path  # noqa: E402
from strings import PARAGRAPH  # noqa: E402


def timed(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return out.strip().splitlines()[-1], cpu * 1e3, wall * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backplane", default="build/backplane")
    ap.add_argument("--tool", default="/tmp/llama.cpp/build/bin/llama-tokenize")
    ap.add_argument("--vocab-dir", default=os.environ.get(
        "BACKPLANE_VOCAB_DIR", os.path.expanduser("~/.cache/backplane/vocab")))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    text = (PARAGRAPH * 50).encode()
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    rows = []
    try:
        for name in VOCABS:
            model = vocab_path(name, args.vocab_dir)
            ours = [args.backplane, "tokenize", model, "-f", path, "--ids"]
            theirs = [args.tool, "-m", model, "-f", path, "--ids", "--no-escape", "--log-disable"]
            a, b = [], []
            for _ in range(args.reps):  # interleaved
                ida, ca, wa = timed(ours)
                idb, cb, wb = timed(theirs)
                a.append((ca, wa))
                b.append((cb, wb))
            n = len(ida.decode().strip("[]").split(","))
            rows.append({
                "vocab": name, "bytes": len(text), "tokens": n, "ids_equal": ida == idb,
                "ours_cpu_ms": statistics.median(x[0] for x in a),
                "ours_wall_ms": statistics.median(x[1] for x in a),
                "llama_cpu_ms": statistics.median(x[0] for x in b),
                "llama_wall_ms": statistics.median(x[1] for x in b),
            })
    finally:
        os.unlink(path)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| vocab | tokens | ids equal | backplane CPU ms | llama-tokenize CPU ms | backplane wall ms | llama-tokenize wall ms |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %d | %s | %.0f | %.0f | %.0f | %.0f |" % (
            r["vocab"], r["tokens"], "yes" if r["ids_equal"] else "NO", r["ours_cpu_ms"], r["llama_cpu_ms"],
            r["ours_wall_ms"], r["llama_wall_ms"]))


if __name__ == "__main__":
    main()
