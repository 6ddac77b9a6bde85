#!/usr/bin/env python3
"""conv2d and MoE side by side with ggml: `backplane bench --op conv2d|moe` and ggml_conv /
ggml_moe (built from tools/sidebyside/ggml_conv.c and ggml_moe.c by build.sh, or by hand) on the
same shapes, interleaved round by round (the order alternates), one markdown table of medians
over rounds, with the CPU and the load average named.

    tools/sidebyside/run_conv_moe.py [--op conv2d,moe] [--rounds 3] [--threads 2]
        [--backplane build/backplane] [--bin /tmp/bp_sidebyside/bin] [--json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CONV = [  # (hw, cin, cout, k, groups): backplane bench's conv_shapes
    (64, 320, 320, 3, 0),
    (32, 640, 640, 3, 32),
]
MOE = [  # (experts, top_k, h, inter): backplane bench's moe_shapes
    (8, 2, 2048, 1408),
    (64, 8, 2048, 768),
]


def lines(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


def ours(a, op, kinds):
    out = subprocess.run([a.backplane, "bench", "--op", op, "--kind", ",".join(kinds), "--threads", str(a.threads),
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["results"]


def ggml(a, op, kinds):
    res = []
    if op == "conv2d":
        for hw, cin, cout, k, g in CONV:
            res += lines([os.path.join(a.bin, "ggml_conv"), "--kind", ",".join(kinds), "--hw", str(hw), "--cin", str(cin),
                          "--cout", str(cout), "--k", str(k), "--groups", str(g), "--threads", str(a.threads)])
    else:
        for e, tk, h, i in MOE:
            res += lines([os.path.join(a.bin, "ggml_moe"), "--kind", ",".join(kinds), "--experts", str(e), "--top-k",
                          str(tk), "--h", str(h), "--inter", str(i), "--t", "1,512", "--threads", str(a.threads)])
    return res


def key(lib, r):
    return (lib, r["shape"], r["kind"], r.get("t", 0), r.get("method", ""))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--op", default="conv2d,moe")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--backplane", default="build/backplane")
    p.add_argument("--bin", default="/tmp/bp_sidebyside/bin")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    load0 = os.getloadavg()[0]
    table = {}
    for op in a.op.split(","):
        kinds = ["F16", "Q8_0"] if op == "conv2d" else ["Q4_K", "Q8_0"]
        for rnd in range(a.rounds):
            runs = [("backplane", ours), ("ggml", ggml)]
            if rnd % 2:
                runs.reverse()
            for lib, fn in runs:
                for r in fn(a, op, kinds):
                    table.setdefault((op,) + key(lib, r), {"lib": lib, "row": r, "us": []})["us"].append(r["median_us"])
    load1 = os.getloadavg()[0]
    rows = []
    for k, v in table.items():
        r, us = v["row"], statistics.median(v["us"])
        f = us / r["median_us"]  # the row's figures scale with 1 / time
        rows.append(dict(op=k[0], lib=v["lib"], shape=r["shape"], kind=r["kind"], t=r.get("t", 0),
                         method=r.get("method", r.get("path", "")), median_us=us, gflops=r["gflops"] / f,
                         gbps=(r.get("gbps") or 0) / f, rounds=len(v["us"])))
    if a.json:
        print(json.dumps(dict(cpu=cpu, threads=a.threads, load=[load0, load1], rows=rows), indent=1))
        return 0
    print(f"{cpu}, {a.threads} threads; median of {a.rounds} interleaved rounds; load average {load0:.1f} -> {load1:.1f}\n")
    print("| op | shape | kind | test | library | median ms | GB/s | GFLOP/s | how |")
    print("|---|---|---|---|---|---:|---:|---:|---|")
    for r in sorted(rows, key=lambda r: (r["op"], r["shape"], r["kind"], r["t"], r["lib"] != "backplane")):
        test = "hot" if r["op"] == "conv2d" else ("decode t=1" if r["t"] == 1 else f"prefill t={r['t']}")
        gb = f"{r['gbps']:.1f}" if r["gbps"] else "-"
        print(f"| {r['op']} | {r['shape']} | {r['kind']} | {test} | {r['lib']} | {r['median_us'] / 1e3:.2f} | {gb} | "
              f"{r['gflops']:.1f} | {r['method']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
