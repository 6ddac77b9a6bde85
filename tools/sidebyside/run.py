#!/usr/bin/env python3
"""Side by side with ggml: matmul (decode GB/s, batch GFLOP/s) for each kind, ggml and backplane
interleaved kind by kind over several rounds, one table of medians with the ratio and the read
bandwidth measured in the same run.

Build ggml's side first (tools/sidebyside/build.sh GGML_TREE), and backplane (build/backplane).

    tools/sidebyside/run.py [--kinds all|Q4_K,Q8_0,...] [--batch 1,2,4,8,16,32,512]
                            [--rows 4096] [--cols 4096] [--threads 2] [--rounds 3]
                            [--cold-mib 256] [--backplane build/backplane] [--json]

Per round and kind, both libraries run back to back (which goes first alternates by round), so a
burst of load from other processes hits both; each figure is the median over rounds of each
program's own median. Decode (batch 1) reads its weights cold from DRAM (both programs rotate
through --cold-mib of copies); batches > 1 are hot (one copy), as in `backplane bench`.
Ratio = backplane / ggml. "of BW" = backplane decode GB/s / the read bandwidth that
`backplane bench` measured in the same invocations (median over all of them).
"""
import argparse
import json
import os
import platform
import shlex
import statistics
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.environ.get("BP_SBS_OUT", "/tmp/bp_sidebyside")


def load_env():
    env = {}
    path = os.path.join(OUT, "ggml.env")
    if not os.path.exists(path):
        sys.exit(f"run.py: {path} missing: run tools/sidebyside/build.sh GGML_TREE first")
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            if k:
                env[k] = shlex.split(v)[0] if v else ""
    return env


def cpu_name():
    name, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name in ("unknown CPU", "", "x86_64"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("cpu family"):
                    name += ""
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    extra = [x for x, f in (("VNNI", "avx512_vnni"), ("BF16", "avx512_bf16"), ("FP16", "avx512_fp16"))
             if f in flags]
    forced = os.environ.get("BACKPLANE_CPU_ISA")
    # A table made with the path forced (e.g. the AVX2 kernels on an AVX-512 machine, beside a
    # ggml built without AVX-512) must say so, or it reads as this CPU's default figures.
    note = f"; backplane forced to BACKPLANE_CPU_ISA={forced}" if forced else ""
    return f"{name} ({isa}{', ' + '/'.join(extra) if extra else ''}), {os.cpu_count()} CPUs{note}"


def all_kinds(bp):
    out = subprocess.run([bp, "kinds", "--json"], capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    rows = data["kinds"] if isinstance(data, dict) else data
    return [r["name"] for r in rows if r.get("role", "weight") in ("weight", "W", "w")]


def run_ggml(args, kind):
    """ggml's figure per batch: the better of its runs under each --ggml-env setting (its OpenMP
    threads spin at barriers; under load from other processes the passive wait policy can be
    several times faster, on a quiet machine the default is), so the table is ggml at its best."""
    res = {}
    for setting in args.ggml_env:
        env = dict(os.environ)
        for kv in setting.split():
            k, _, v = kv.partition("=")
            env[k] = v
        cmd = [os.path.join(OUT, "bin", "ggml_mm"), "--kind", kind, "--rows", str(args.rows), "--cols",
               str(args.cols), "--batch", ",".join(map(str, args.batch)), "--threads", str(args.threads),
               "--cold-mib", str(args.cold_mib), "--min-ms", str(args.ggml_min_ms)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        got = 0
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                got += 1
                if r["batch"] not in res or r["median_us"] < res[r["batch"]]["median_us"]:
                    res[r["batch"]] = r
        # Also after some figures: ggml's AMX buffer (a CPU that reports AMX the OS does not
        # enable) printed batch 1, then died on SIGILL or SIGSEGV; its cells came out "-"
        # with no word why.
        if p.returncode:
            why = f"killed by {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exited {p.returncode}"
            print(f"run.py: ggml_mm {kind} ({setting or 'default environment'}) {why} after {got} figure(s): "
                  f"{p.stderr.strip()[-300:]}", file=sys.stderr)
    return res


def run_bp(args, kind):
    cmd = [args.backplane, "bench", "--kind", kind, "--rows", str(args.rows), "--cols", str(args.cols),
           "--threads", str(args.threads), "--cold-mib", str(args.cold_mib), "--json"]
    for b in args.batch:
        cmd += ["--batch", str(b)]
    env = dict(os.environ, BACKPLANE_VULKAN="0", BACKPLANE_OPENCL="0", BACKPLANE_CUDA="0")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError:
        print(f"run.py: backplane {kind}: {p.stderr.strip()[-300:]}", file=sys.stderr)
        return {}, None
    return {r["batch"]: r for r in data["results"]}, data.get("read_bandwidth_gbps")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default="all")
    ap.add_argument("--batch", default="1,512")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold-mib", type=int, default=256)
    ap.add_argument("--backplane", default=os.path.join(REPO, "build", "backplane"))
    ap.add_argument("--ggml-env", action="append", default=None,
                    help="environment for a ggml run, e.g. 'OMP_WAIT_POLICY=PASSIVE' (repeatable; each "
                         "cell takes ggml's best; default: as is, and OMP_WAIT_POLICY=PASSIVE)")
    ap.add_argument("--wide", action="store_true", help="one row per kind, a column per batch")
    ap.add_argument("--ggml-min-ms", type=int, default=150,
                    help="ggml_mm's timing budget per figure (at least 5 graphs); default 150")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--from-json", metavar="FILE", nargs="+",
                    help="print the table of earlier --json runs (several: one table, e.g. a run taken "
                         "in chunks of kinds; the bandwidth is the median over all their probes)")
    args = ap.parse_args()
    if args.from_json:
        docs = []
        for path in args.from_json:
            with open(path) as f:
                docs.append(json.load(f))
        meta, rows = merge_runs(docs) if len(docs) > 1 else (docs[0]["meta"], docs[0]["rows"])
        print_table(meta, rows, args.wide)
        return
    args.batch = [int(b) for b in args.batch.split(",")]
    if args.ggml_env is None:
        args.ggml_env = ["", "OMP_WAIT_POLICY=PASSIVE"]
    env = load_env()
    kinds = all_kinds(args.backplane) if args.kinds == "all" else args.kinds.split(",")

    figs = {}  # (lib, kind, batch) -> [value per round]
    bws = []
    t0 = time.time()
    load0 = os.getloadavg()
    for rnd in range(args.rounds):
        for kind in kinds:
            order = ("ggml", "bp") if (rnd % 2 == 0) else ("bp", "ggml")
            for lib in order:
                if lib == "ggml":
                    res = run_ggml(args, kind)
                else:
                    res, bw = run_bp(args, kind)
                    if bw:
                        bws.append(bw)
                for b, r in res.items():
                    figs.setdefault((lib, kind, b), []).append(r["gbps"] if b == 1 else r["gflops"])
            print(f"round {rnd + 1}/{args.rounds} {kind} done", file=sys.stderr)
    bw = statistics.median(bws) if bws else None

    def med(lib, kind, b):
        v = figs.get((lib, kind, b))
        return statistics.median(v) if v else None

    rows = []
    for kind in kinds:
        for b in args.batch:
            g, p = med("ggml", kind, b), med("bp", kind, b)
            rows.append({"kind": kind, "batch": b, "ggml": g, "backplane": p,
                         "ratio": p / g if g and p else None,
                         "of_bw": p / bw if b == 1 and p and bw else None})
    meta = {"cpu": cpu_name(), "threads": args.threads, "rounds": args.rounds, "rows": args.rows, "cols": args.cols,
            "cold_mib": args.cold_mib, "read_bandwidth_gbps": bw,
            "read_bandwidth_range": [min(bws), max(bws)] if bws else None, "read_bandwidth_n": len(bws),
            "read_bandwidth_samples": bws, "ggml": env.get("GGML_LABEL", "?"),
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime(t0)), "minutes": (time.time() - t0) / 60,
            "ggml_env": args.ggml_env,
            "load_avg_start": load0[0], "load_avg_end": os.getloadavg()[0]}
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
        return
    print_table(meta, rows, args.wide)


def merge_runs(docs):
    """One table from runs taken in chunks (so a long run need not hold the machine at once): rows
    concatenated; the read bandwidth is the median over every chunk's probes and "of BW" is
    recomputed against it, so all rows are held to one figure."""
    first, last = docs[0]["meta"], docs[-1]["meta"]
    for d in docs[1:]:
        m = d["meta"]
        if (m["cpu"], m["threads"], m["rows"], m["cols"], m["ggml"]) != \
                (first["cpu"], first["threads"], first["rows"], first["cols"], first["ggml"]):
            sys.exit("run.py: --from-json files come from different setups (CPU, threads, shape or ggml)")
    bws = [b for d in docs for b in d["meta"].get("read_bandwidth_samples") or []]
    bw = statistics.median(bws) if bws else None
    meta = dict(first, read_bandwidth_gbps=bw, read_bandwidth_n=len(bws), read_bandwidth_samples=bws,
                read_bandwidth_range=[min(bws), max(bws)] if bws else None,
                minutes=sum(d["meta"]["minutes"] for d in docs), load_avg_end=last["load_avg_end"],
                date_utc=first["date_utc"] + " to " + last["date_utc"] + f" ({len(docs)} chunks)")
    rows = []
    for d in docs:
        for r in d["rows"]:
            p = r["backplane"]
            rows.append(dict(r, of_bw=p / bw if r["batch"] == 1 and p and bw else None))
    return meta, rows


def print_table(meta, rows, wide):
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    batches = list(dict.fromkeys(r["batch"] for r in rows))
    bw = meta["read_bandwidth_gbps"]
    f = lambda v, d=1: "-" if v is None else f"{v:.{d}f}"
    print(f"{meta['cpu']}; {meta['threads']} threads; {meta['rows']} x {meta['cols']}; {meta['ggml']} vs backplane; "
          f"{meta['rounds']} interleaved rounds, medians; {meta['date_utc']} UTC, load average "
          f"{meta['load_avg_start']:.1f} -> {meta['load_avg_end']:.1f}")
    if bw:
        lo, hi = meta["read_bandwidth_range"]
        print(f"read bandwidth in the same run: {bw:.1f} GB/s (median of {meta['read_bandwidth_n']}, "
              f"{lo:.1f}-{hi:.1f}); decode reads cold weights ({meta['cold_mib']} MiB of copies)")
    print(f"ggml: best of its runs under {' / '.join(repr(e) if e else 'the default environment' for e in meta['ggml_env'])}")
    print()
    if wide:
        cols = ["decode GB/s ggml / ours (ratio, of BW)" if b == 1 else f"t={b} GFLOP/s ggml / ours (ratio)"
                for b in batches]
        print("| kind | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        by = {(r["kind"], r["batch"]): r for r in rows}
        for kind in kinds:
            cells = []
            for b in batches:
                r = by[(kind, b)]
                cell = f"{f(r['ggml'])} / {f(r['backplane'])} ({f(r['ratio'], 2)}"
                if r["of_bw"] is not None:
                    cell += f", {100 * r['of_bw']:.0f}%"
                cells.append(cell + ")")
            print(f"| {kind} | " + " | ".join(cells) + " |")
        return
    print("| kind | test | ggml | backplane | backplane / ggml | backplane of read BW |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        unit = "GB/s" if r["batch"] == 1 else "GFLOP/s"
        test = "decode" if r["batch"] == 1 else f"t={r['batch']}"
        of = "" if r["of_bw"] is None else f"{100 * r['of_bw']:.0f}%"
        print(f"| {r['kind']} | {test} ({unit}) | {f(r['ggml'])} | {f(r['backplane'])} | "
              f"{f(r['ratio'], 2)} | {of} |")


if __name__ == "__main__":
    main()
