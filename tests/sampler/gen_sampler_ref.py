#!/usr/bin/env python3
"""NumPy float64 reference for the sampler (tests/test_sampler.c).

    python3 tests/sampler/gen_sampler_ref.py          # rewrite tests/sampler/sampler_ref.txt
    python3 tests/sampler/gen_sampler_ref.py --check  # exit 1 if the committed file differs

For fixed logits rows and sampler configs it writes the distribution the sampler must draw
from, computed here from the specification in include/backplane_tokenizer.h (not from our C):
penalties over the accepted window, greedy, top-k, top-p, min-p (on temperature-1
probabilities), then softmax(l / T). It also writes, per (row, config) drawn from, the bins
of a chi-square test (tokens with expected count < 5 pooled) and the critical value at
p = 1e-6 for the test's draws.
"""
import math
import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sampler_ref.txt")
DRAWS = 10000  # scaling the sampler's uniform draw by 0.97 (a 3% skew) fails all 12 cases at this count
Z = 4.753424  # standard normal quantile at 1 - 1e-6

rng = np.random.default_rng(20261130)
ROWS = {
    "normal16": (rng.normal(0, 1, 16)).astype(np.float32),
    "ties8": np.array([1.5, 0.25, 1.5, -1, 1.5, 0.25, -3, 0.5], np.float32),
    "special8": np.array([0.5, -np.inf, 2.0, np.nan, 1.0, -np.inf, 2.0, -0.5], np.float32),
    "wide1000": (rng.normal(0, 3, 1000)).astype(np.float32),
    # flat: top-p's mass is not in the best 256, so the sampler's partial sort falls back to a
    # full one (wide1000 takes the partial path)
    "flat1000": (rng.normal(0, 0.1, 1000)).astype(np.float32),
}

# name: (temperature, top_k, top_p, min_p, repeat_penalty, frequency, presence, last_n, history)
CONFIGS = {
    "greedy": (0.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0, 0, []),
    "temp1": (1.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0, 0, []),
    "temp07": (0.7, 0, 1.0, 0.0, 1.0, 0.0, 0.0, 0, []),
    "temp2": (2.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0, 0, []),
    "topk5": (1.0, 5, 1.0, 0.0, 1.0, 0.0, 0.0, 0, []),
    "topk2": (1.0, 2, 1.0, 0.0, 1.0, 0.0, 0.0, 0, []),
    "topk40": (1.0, 40, 1.0, 0.0, 1.0, 0.0, 0.0, 0, []),
    "topp08": (1.0, 0, 0.8, 0.0, 1.0, 0.0, 0.0, 0, []),
    "topp05": (1.0, 0, 0.5, 0.0, 1.0, 0.0, 0.0, 0, []),
    "minp01": (1.0, 0, 1.0, 0.1, 1.0, 0.0, 0.0, 0, []),
    "minp03": (1.0, 0, 1.0, 0.3, 1.0, 0.0, 0.0, 0, []),
    "penalty": (1.0, 0, 1.0, 0.0, 1.3, 0.1, 0.2, 4, [3, 5, 5, 7, 1]),
    "defaults": (0.8, 40, 0.95, 0.05, 1.0, 0.0, 0.0, 64, []),
    "combo": (0.6, 6, 0.9, 0.02, 1.2, 0.0, 0.0, 3, [2, 2, 0, 4]),
}
DRAWN = [("normal16", c) for c in ("temp1", "temp07", "temp2", "topk5", "topp08", "minp01", "penalty", "combo")] + \
        [("ties8", "temp1"), ("special8", "temp1"), ("wide1000", "defaults"), ("wide1000", "topp08")]

f32 = lambda x: float(np.float32(x))  # parameters are floats in the C struct


def expected(logits, cfg):
    T, K, P, MINP, RP, FP, PP, LAST, hist = cfg
    l = logits.astype(np.float64)
    l[np.isnan(l)] = -np.inf
    window = hist[-LAST:] if LAST else []
    for tok in set(window):
        c = window.count(tok)
        l[tok] = l[tok] * f32(RP) if l[tok] <= 0 else l[tok] / f32(RP)
        l[tok] -= c * f32(FP) + f32(PP)
    ids = np.array([i for i in range(len(l)) if l[i] != -np.inf])
    if np.isinf(l[ids]).any():  # +inf shares the mass
        ids = np.array([i for i in ids if l[i] == np.inf])
        l = np.where(np.isinf(l), 0.0, l)
    probs = np.zeros(len(logits))
    if T <= 0:
        probs[ids[np.argmax(l[ids])]] = 1.0  # argmax: first of the ties = lowest id
        return probs
    # order: logit descending, id ascending
    order = sorted(ids, key=lambda i: (-l[i], i))
    if K > 0:
        order = order[:K]
    if P < 1:
        w = np.exp(l[order] - l[order].max())
        cum = np.cumsum(w / w.sum())
        assert np.all(np.abs(cum - f32(P)) > 1e-9), "a cumulative sum sits on top_p"
        keep = int(np.argmax(cum >= f32(P))) + 1 if (cum >= f32(P)).any() else len(order)
        order = order[:keep]
    if MINP > 0:
        cut = max(l[order]) + math.log(f32(MINP))
        assert all(abs(l[i] - cut) > 1e-9 for i in order), "a logit sits on the min_p cut"
        order = [i for i in order if l[i] >= cut]
    sel = np.array(order)
    w = np.exp((l[sel] - l[sel].max()) / f32(T))
    probs[sel] = w / w.sum()
    return probs


def chi2_bins(p):
    """Bins: tokens with expected count >= 5 alone, the rest pooled (dropped if pooled < 5)."""
    big = [i for i in np.argsort(-p, kind="stable") if p[i] * DRAWS >= 5]
    rest = [i for i in range(len(p)) if p[i] > 0 and i not in big]
    bins = [[int(i)] for i in big]
    if rest and p[rest].sum() * DRAWS >= 5:
        bins.append([int(i) for i in rest])
    elif rest:
        bins[-1].extend(int(i) for i in rest)
    df = max(len(bins) - 1, 1)
    crit = df * (1 - 2 / (9 * df) + Z * math.sqrt(2 / (9 * df))) ** 3  # Wilson-Hilferty
    return bins, crit


def fmt(x):
    return "%.9g" % x if np.isfinite(x) else ("nan" if np.isnan(x) else ("inf" if x > 0 else "-inf"))


def generate():
    lines = ["# GENERATED by tests/sampler/gen_sampler_ref.py (NumPy float64); do not edit.",
             "# row NAME N logits... | config NAME T K P MINP RP FP PP LASTN hist|- |",
             "# expect ROW CONFIG probs... | chi2 ROW CONFIG DRAWS CRIT bins (id+id+...:prob ...)"]
    for name, row in ROWS.items():
        lines.append("row %s %d %s" % (name, len(row), " ".join(fmt(x) for x in row)))
    for name, c in CONFIGS.items():
        hist = ",".join(str(h) for h in c[8]) or "-"
        lines.append("config %s %s %d %s %s %s %s %s %d %s" % (name, fmt(c[0]), c[1], fmt(c[2]), fmt(c[3]),
                                                             fmt(c[4]), fmt(c[5]), fmt(c[6]), c[7], hist))
    for rname, row in ROWS.items():
        for cname, c in CONFIGS.items():
            if max(c[8], default=-1) >= len(row):
                continue
            p = expected(row, c)
            lines.append("expect %s %s %s" % (rname, cname, " ".join("%.17g" % x for x in p)))
    for rname, cname in DRAWN:
        p = expected(ROWS[rname], CONFIGS[cname])
        bins, crit = chi2_bins(p)
        lines.append("chi2 %s %s %d %.6f %s" % (rname, cname, DRAWS, crit, " ".join(
            "%s:%.17g" % ("+".join(map(str, b)), p[b].sum()) for b in bins)))
    return "\n".join(lines) + "\n"


def main():
    text = generate()
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            ok = f.read() == text
        print("%s %s" % (OUT, "matches" if ok else "DIFFERS"))
        sys.exit(0 if ok else 1)
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
