#!/usr/bin/env python3
"""A bounded load test of an OpenAI-compatible server (backplane serve, llama-server).

usage: serve_bench.py URL [--requests N] [--concurrency 1,4,16] [--max-tokens N] [--label NAME]
                          [--long-prompt-ttft] [--json]

For each concurrency C: C clients, each sending streamed greedy /v1/completions requests (one
at a time) until N requests have been sent in all (default 4 x C, at least 8), every request
asking for --max-tokens tokens with ignore_eos (so every server generates the same number).
Then it stops. Per C: requests/s, time to first token (TTFT) and inter-token latency (ITL,
the gaps between streamed chunks) p50/p99, aggregate generated tokens/s (tokens counted as
content chunks: both servers send one per token). --long-prompt-ttft adds: the TTFT of a
~512-token prompt on the idle server, and the same while 15 streams decode.

Prints a markdown table (JSON with --json). Only the standard library: http.client, threads.
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse

PROMPT = "Once upon a time, in a small village by the sea, there lived"


def stream_request(host, port, prompt, max_tokens, out):
    """One streamed completion: out gets ttft, gaps, n (tokens), or error."""
    try:
        _stream_request(host, port, prompt, max_tokens, out)
    except OSError as e:
        out.update(error=f"{type(e).__name__}: {e}")


def _stream_request(host, port, prompt, max_tokens, out):
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "ignore_eos": True})
    c = http.client.HTTPConnection(host, port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        out.update(error=f"HTTP {r.status}: {r.read()[:200]!r}")
        return
    last, first, gaps, n = None, None, [], 0
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            for line in ev.split(b"\n"):
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].strip()
                if data == b"[DONE]":
                    continue
                try:
                    obj = json.loads(data)
                except ValueError:
                    continue
                ch = obj.get("choices") or []
                if not ch or not ch[0].get("text"):
                    continue
                now = time.perf_counter()
                if first is None:
                    first = now - t0
                else:
                    gaps.append(now - last)
                last = now
                n += 1
    c.close()
    out.update(t_start=t0, ttft=first, gaps=gaps, n=n, t_end=time.perf_counter())


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def run_level(host, port, conc, n_req, max_tokens):
    lock = threading.Lock()
    left = [n_req]
    results = []

    def client(i):
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
                k = left[0]
            out = {}
            stream_request(host, port, f"{PROMPT} a child named number {k}.", max_tokens, out)
            with lock:
                results.append(out)

    t0 = time.perf_counter()
    th = [threading.Thread(target=client, args=(i,)) for i in range(conc)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.perf_counter() - t0
    errors = [r["error"] for r in results if "error" in r]
    ok = [r for r in results if "error" not in r]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    gaps = [g for r in ok for g in r["gaps"]]
    toks = sum(r["n"] for r in ok)
    return {"concurrency": conc, "requests": len(ok), "errors": len(errors), "wall_s": wall,
            "req_per_s": len(ok) / wall, "ttft_p50_ms": 1e3 * pct(ttft, 50), "ttft_p99_ms": 1e3 * pct(ttft, 99),
            "itl_p50_ms": 1e3 * pct(gaps, 50), "itl_p99_ms": 1e3 * pct(gaps, 99), "tokens": toks,
            "tok_per_s": toks / wall, "first_error": errors[0] if errors else None}


def long_prompt_ttft(host, port):
    """TTFT of a ~512-token prompt alone, then while 15 streams decode."""
    long_prompt = " ".join(["The weather report for the coast says it will rain later today."] * 40)
    alone = {}
    stream_request(host, port, long_prompt, 1, alone)
    stop = threading.Event()

    def background(i):
        while not stop.is_set():
            stream_request(host, port, f"{PROMPT} background story {i}.", 64, {})

    th = [threading.Thread(target=background, args=(i,)) for i in range(15)]
    for t in th:
        t.start()
    time.sleep(3)
    busy = {}
    stream_request(host, port, long_prompt + " Again.", 1, busy)
    stop.set()
    for t in th:
        t.join()
    return {"ttft_idle_ms": 1e3 * (alone.get("ttft") or float("nan")),
            "ttft_15_decoding_ms": 1e3 * (busy.get("ttft") or float("nan"))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--requests", type=int, default=0)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--label", default="")
    ap.add_argument("--long-prompt-ttft", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url if "//" in a.url else "http://" + a.url)
    host, port = u.hostname, u.port or 80
    rows = []
    for c in [int(x) for x in a.concurrency.split(",")]:
        n = a.requests or max(8, 4 * c)
        rows.append(run_level(host, port, c, n, a.max_tokens))
    extra = long_prompt_ttft(host, port) if a.long_prompt_ttft else None
    if a.json:
        print(json.dumps({"label": a.label, "levels": rows, "long_prompt": extra}))
        return 0
    print(f"| server | clients | requests | req/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | tok/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {a.label} | {r['concurrency']} | {r['requests']} | {r['req_per_s']:.2f} | "
              f"{r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | {r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | "
              f"{r['tok_per_s']:.1f} |")
    if extra:
        print(f"\n512-token prompt TTFT: idle {extra['ttft_idle_ms']:.0f} ms, "
              f"while 15 streams decode {extra['ttft_15_decoding_ms']:.0f} ms")
    errs = [r["first_error"] for r in rows if r["first_error"]]
    if errs:
        print(f"errors: {errs[0]}", file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
