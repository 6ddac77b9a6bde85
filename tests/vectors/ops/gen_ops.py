#!/usr/bin/env python3
"""Expected outputs for the op layer's tests (tests/test_ops_vectors.c), computed in float64 by
NumPy from the published formulas, independently of the C code.

    python3 tests/vectors/ops/gen_ops.py           # rewrites tests/vectors/ops/ops_*.bin
    python3 tests/vectors/ops/gen_ops.py --check   # regenerates in memory, fails on any diff

Inputs are not stored: both sides draw them from the harness's xorshift generator
(tests/harness.c bp_test_rand/bp_test_randf, replicated here bit for bit), seeded per case; each
case stores its first four inputs so the C side proves its stream is the same.

KV caches of a quantized kind: the reference attends over the values the cache holds, i.e. K
and V quantized and dequantized by the gguf package (our quantizers are bit-exact with it; see
tests/test_kinds_quantize.c). IQ4_NL has no quantizer in the gguf package: its cases attend
over the unquantized values (flag `exact_kv` = 0) and the test allows the quantization error.

File ops_<group>.bin (little-endian):
    char  magic[4] "BPOP"; uint32 version 1; uint32 ncases
    per case:
      char    name[48]      NUL padded
      int64   p[16]         integer parameters (meaning per group, see below)
      float64 f[8]          float parameters
      uint64  seed
      float32 first[4]      the first four inputs drawn
      uint64  n_out
      float32 out[n_out]    expected output, float64 rounded once
Groups and parameters:
  norm      p: type(0 rms,1 layer,2 group), t, n, channels, groups, has_gamma, has_beta, silu
            f: eps.  draws: x[t*n], gamma, beta (n, or channels for group)
  rope      p: t, n_heads, head_dim, n_rot, layout(0 normal, 2 neox)   f: base, scale
            draws: positions[t] = (rand >> 40) % 70000, then x[t*n_heads*head_dim]
  act       p: which(0 silu,1 gelu_tanh,2 gelu_erf), n, gated   f: amplitude
            draws: x[n] (* amplitude), then up[n] when gated
  softmax   p: t, n, has_mask   f: scale, softcap, amplitude
            draws: x[t*n] (* amplitude), then per mask element: r = rand; -inf when
            (r >> 40) % 5 == 0 else randf
  attention p: t, len, n_heads, n_kv, dk, dv, causal, window, kind_k, kind_v, exact_kv,
               positions mode (0: the last t positions, 1: drawn (rand >> 40) % len)
            f: scale, softcap
            draws: K[len][n_kv*dk], V[len][n_kv*dv], q[t][n_heads*dk], then positions (mode 1)
"""
import math
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants as gq

HERE = os.path.dirname(os.path.abspath(__file__))
M64 = (1 << 64) - 1


class Rng:
    """tests/harness.c bp_test_rand / bp_test_randf."""

    def __init__(self, seed):
        self.s = seed & M64

    def rand(self):
        x = self.s if self.s else 0x9E3779B97F4A7C15
        x ^= (x << 13) & M64
        x ^= x >> 7
        x ^= (x << 17) & M64
        self.s = x
        return x

    def randf(self):
        return float(np.float32((self.rand() >> 40) * (2.0 / 16777216.0) - 1.0))

    def floats(self, n, amp=1.0):
        v = np.array([self.randf() for _ in range(n)], dtype=np.float64)
        return v * amp if amp != 1.0 else v


class Case:
    def __init__(self, name, p, f, seed):
        self.name, self.p, self.f, self.seed = name, list(p), list(f), seed
        self.first = []
        self.out = None

    def note(self, v):
        if len(self.first) < 4:
            self.first += [float(x) for x in v[: 4 - len(self.first)]]


def f32(v):
    return np.asarray(v, dtype=np.float64).astype(np.float32).astype(np.float64)


# ---- norms -------------------------------------------------------------------------------

def norm_case(name, typ, t, n, channels, groups, gamma, beta, silu, eps, seed):
    c = Case(name, [typ, t, n, channels, groups, int(gamma), int(beta), int(silu)], [eps], seed)
    r = Rng(seed)
    x = r.floats(t * n, 1.0).reshape(t, n) * 3.0 + 0.5  # off-centre, so LayerNorm's mean matters
    c.note(x.ravel())
    # the C side draws x the same way (3 * randf + 0.5, rounded to float)
    x = f32(x)
    npar = channels if typ == 2 else n
    g = r.floats(npar) if gamma else None
    b = r.floats(npar) if beta else None
    eps = float(np.float32(eps))
    if typ == 0:
        y = x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps)
        if g is not None:
            y = y * g
    elif typ == 1:
        mu = x.mean(axis=1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
        y = (x - mu) / np.sqrt(var + eps)
        if g is not None:
            y = y * g
        if b is not None:
            y = y + b
    else:
        xs = x.reshape(t, groups, -1)
        mu = xs.mean(axis=2, keepdims=True)
        var = ((xs - mu) ** 2).mean(axis=2, keepdims=True)
        y = ((xs - mu) / np.sqrt(var + eps)).reshape(t, channels, -1)
        if g is not None:
            y = y * g[None, :, None]
        if b is not None:
            y = y + b[None, :, None]
        y = y.reshape(t, n)
    if silu:
        y = y / (1.0 + np.exp(-y))
    c.out = y.ravel()
    return c


def norms():
    cs = []
    s = 100
    for typ, nm in ((0, "rms"), (1, "layer")):
        for (t, n) in ((1, 640), (3, 1), (5, 1000), (2, 2048)):
            for gamma, beta, silu in ((0, 0, 0), (1, 0, 0), (1, 1, 1)):
                if typ == 0 and beta:
                    beta = 0
                s += 1
                cs.append(norm_case(f"{nm} t{t} n{n} g{gamma} b{beta} silu{silu}", typ, t, n, 0, 0,
                                    gamma, beta, silu, 1e-6 if typ == 0 else 1e-5, s))
    for (t, ch, sp, gr) in ((1, 32, 49, 8), (2, 64, 17, 32), (1, 6, 5, 3), (3, 12, 1, 12)):
        for gamma, beta, silu in ((0, 0, 0), (1, 1, 0), (1, 1, 1)):
            s += 1
            cs.append(norm_case(f"group t{t} c{ch} s{sp} g{gr} a{gamma}{beta} silu{silu}", 2, t, ch * sp, ch, gr,
                                gamma, beta, silu, 1e-5, s))
    return cs


# ---- rope --------------------------------------------------------------------------------

def rope_case(name, t, nh, hd, nrot, layout, base, scale, seed):
    c = Case(name, [t, nh, hd, nrot, layout], [base, scale], seed)
    r = Rng(seed)
    pos = np.array([(r.rand() >> 40) % 70000 for _ in range(t)], dtype=np.int64)
    x = r.floats(t * nh * hd).reshape(t, nh, hd)
    c.note(x.ravel())
    base, scale = float(np.float32(base)), float(np.float32(scale))
    y = x.copy()
    half = nrot // 2
    i = np.arange(half)
    inv = base ** (-2.0 * i / nrot)
    for j in range(t):
        th = pos[j] * scale * inv
        cs, sn = np.cos(th), np.sin(th)
        if layout == 2:
            a, b = x[j, :, i], x[j, :, i + half]
            y[j, :, i], y[j, :, i + half] = (a * cs[:, None] - b * sn[:, None]), (a * sn[:, None] + b * cs[:, None])
        else:
            a, b = x[j, :, 2 * i], x[j, :, 2 * i + 1]
            y[j, :, 2 * i], y[j, :, 2 * i + 1] = (a * cs[:, None] - b * sn[:, None]), (a * sn[:, None] + b * cs[:, None])
    c.out = y.ravel()
    return c


def ropes():
    cs = []
    s = 200
    for layout in (0, 2):
        for (t, nh, hd, nrot, base, scale) in ((1, 4, 256, 256, 10000.0, 1.0), (7, 3, 64, 64, 1000000.0, 1.0),
                                                (5, 2, 128, 64, 10000.0, 0.25), (3, 5, 80, 32, 500000.0, 1.0),
                                                (2, 1, 256, 256, 1000000.0, 0.125)):
            s += 1
            cs.append(rope_case(f"{'neox' if layout else 'normal'} t{t} h{nh} d{hd} rot{nrot} base{base:g} "
                                f"scale{scale:g}", t, nh, hd, nrot, layout, base, scale, s))
    return cs


# ---- activations ---------------------------------------------------------------------------

def act(which, x):
    if which == 0:
        return x / (1.0 + np.exp(-x))
    if which == 1:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def acts():
    cs = []
    s = 300
    for which, nm in ((0, "silu"), (1, "gelu_tanh"), (2, "gelu_erf")):
        for gated in (0, 1):
            for n, amp in ((1, 1.0), (1000, 8.0), (4099, 30.0)):
                s += 1
                c = Case(f"{'glu ' if gated else ''}{nm} n{n} amp{amp:g}", [which, n, gated], [amp], s)
                r = Rng(s)
                x = f32(r.floats(n) * amp)
                c.note(x)
                y = act(which, x)
                if gated:
                    y = y * r.floats(n)
                c.out = y
                cs.append(c)
    return cs


# ---- softmax ----------------------------------------------------------------------------------

def softmaxes():
    cs = []
    s = 400
    for (t, n, mask, scale, cap, amp) in ((1, 1, 0, 1.0, 0.0, 1.0), (3, 100, 1, 0.125, 0.0, 20.0),
                                          (4, 1000, 0, 1.0, 30.0, 100.0), (2, 257, 1, 2.0, 50.0, 40.0),
                                          (5, 33, 1, 1.0, 0.0, 5.0)):
        s += 1
        c = Case(f"softmax t{t} n{n} mask{mask} scale{scale:g} cap{cap:g}", [t, n, mask], [scale, cap, amp], s)
        r = Rng(s)
        x = f32(r.floats(t * n) * amp).reshape(t, n)
        c.note(x.ravel())
        m = None
        if mask:
            m = np.empty(t * n)
            for i in range(t * n):
                rr = r.rand()
                m[i] = -np.inf if (rr >> 40) % 5 == 0 else r.randf()
            m = m.reshape(t, n)
        sc, cp = float(np.float32(scale)), float(np.float32(cap))
        z = sc * x
        if cp > 0:
            z = cp * np.tanh(z / cp)
        if m is not None:
            z = z + m
        y = np.zeros_like(z)
        for i in range(t):
            mx = z[i].max()
            if mx == -np.inf:
                continue
            e = np.exp(z[i] - mx)
            y[i] = e / e.sum()
        c.out = y.ravel()
        cs.append(c)
    return cs


# ---- attention ----------------------------------------------------------------------------

KV_KINDS = {"F32": T.F32, "F16": T.F16, "BF16": T.BF16, "Q8_0": T.Q8_0, "Q4_0": T.Q4_0, "Q4_1": T.Q4_1,
            "Q5_0": T.Q5_0, "Q5_1": T.Q5_1, "IQ4_NL": T.IQ4_NL}
NO_GGUF_QUANT = {"IQ4_NL"}


def through_cache(x, kind, d):
    """The values a cache of `kind` holds for x (rows of d elements)."""
    if kind == "F32":
        return x
    rows = f32(x).reshape(-1, d).astype(np.float32)
    q = gq.quantize(rows, KV_KINDS[kind])
    return gq.dequantize(q, KV_KINDS[kind]).astype(np.float64).reshape(x.shape)


def attn_case(name, t, ln, nh, nkv, dk, dv, causal, window, kk, kv, scale, cap, pos_mode, seed):
    exact = int(kk not in NO_GGUF_QUANT and kv not in NO_GGUF_QUANT)
    c = Case(name, [t, ln, nh, nkv, dk, dv, int(causal), window, int(KV_KINDS[kk]), int(KV_KINDS[kv]), exact,
                    pos_mode], [scale, cap], seed)
    r = Rng(seed)
    K = r.floats(ln * nkv * dk).reshape(ln, nkv, dk)
    c.note(K.ravel())
    V = r.floats(ln * nkv * dv).reshape(ln, nkv, dv)
    q = r.floats(t * nh * dk).reshape(t, nh, dk)
    if pos_mode == 0:
        pos = np.arange(ln - t, ln)
    else:
        pos = np.array([(r.rand() >> 40) % ln for _ in range(t)])
    if kk not in NO_GGUF_QUANT:
        K = through_cache(K, kk, dk)
    if kv not in NO_GGUF_QUANT:
        V = through_cache(V, kv, dv)
    sc, cp = float(np.float32(scale)), float(np.float32(cap))
    out = np.zeros((t, nh, dv))
    grp = nh // nkv
    j = np.arange(ln)
    for i in range(t):
        p = pos[i]
        vis = np.ones(ln, dtype=bool)
        if causal:
            vis &= j <= p
        if window > 0:
            vis &= np.abs(p - j) < window
        if not vis.any():
            continue
        for h in range(nh):
            g = h // grp
            s = sc * (K[vis, g, :] @ q[i, h])
            if cp > 0:
                s = cp * np.tanh(s / cp)
            w = np.exp(s - s.max())
            out[i, h] = (w / w.sum()) @ V[vis, g, :]
    c.out = out.ravel()
    return c


def attentions():
    cs = []
    s = 500
    # Every KV kind x head dim, decode and a short prefill; contexts not a multiple of any block.
    for kn in KV_KINDS:
        dims = (64, 80, 128, 256) if kn in ("F32", "F16", "BF16") else (64, 128, 256)
        for d in dims:
            for (t, ln, nh, nkv) in ((1, 37 + d // 8, 8, 1), (3, 45, 4, 2)):
                s += 1
                cs.append(attn_case(f"{kn} d{d} t{t} len{ln} h{nh}/{nkv}", t, ln, nh, nkv, d, d, True, 0, kn, kn,
                                    1.0 / math.sqrt(d), 0.0, 0, s))
    # Shapes and masks.
    more = [
        # name, t, len, nh, nkv, dk, dv, causal, window, kk, kv, scale, cap, pos_mode
        ("window smaller than the context", 13, 13, 4, 4, 80, 80, True, 5, "F32", "F32", 0.11, 0.0, 0),
        ("window larger than the context", 7, 50, 4, 1, 128, 128, True, 100, "F16", "F16", 0.3, 30.0, 0),
        ("gemma-like prefill window 8", 9, 40, 4, 1, 256, 256, True, 8, "Q5_0", "Q5_0", 1.0 / 16, 0.0, 0),
        ("softcap", 4, 33, 2, 1, 64, 64, True, 0, "Q8_0", "Q8_0", 0.5, 20.0, 0),
        ("dk differs from dv", 2, 45, 2, 2, 64, 128, True, 0, "Q5_1", "F16", 0.125, 0.0, 0),
        ("K Q8_0 V F16", 3, 30, 4, 2, 64, 64, True, 0, "Q8_0", "F16", 0.125, 0.0, 0),
        ("K IQ4_NL V Q4_0", 4, 36, 4, 2, 128, 64, True, 0, "IQ4_NL", "Q4_0", 0.088, 0.0, 0),
        ("non-causal window 4, drawn positions", 6, 20, 2, 1, 64, 64, False, 4, "F32", "F32", 0.125, 0.0, 1),
        ("non-causal, drawn positions", 5, 29, 4, 2, 64, 64, False, 0, "BF16", "BF16", 0.125, 0.0, 1),
        ("causal, drawn positions", 6, 41, 4, 2, 64, 64, True, 0, "Q4_1", "Q4_1", 0.125, 0.0, 1),
        ("one token", 1, 1, 4, 1, 64, 64, True, 0, "F16", "F16", 0.125, 0.0, 0),
        ("one token, window 1", 1, 9, 2, 1, 64, 64, True, 1, "Q8_0", "Q8_0", 0.125, 0.0, 0),
        ("GQA 8:1 decode long", 1, 301, 8, 1, 128, 128, True, 0, "Q8_0", "Q8_0", 0.0884, 0.0, 0),
        ("GQA 4:1 prefill", 5, 70, 8, 2, 64, 64, True, 0, "Q4_0", "Q4_0", 0.125, 0.0, 0),
        # Contexts long enough that a decode splits its keys into chunks (>= 512 keys).
        ("long decode, split keys", 1, 1200, 4, 1, 128, 128, True, 0, "Q8_0", "Q8_0", 0.088, 0.0, 0),
        ("long decode, window 300", 1, 900, 8, 2, 64, 64, True, 300, "F16", "F16", 0.125, 0.0, 0),
        ("long, two queries, softcap", 2, 700, 2, 1, 64, 64, True, 0, "F32", "F32", 0.125, 10.0, 0),
        ("long, non-causal window 100, drawn", 3, 800, 4, 2, 64, 64, False, 100, "BF16", "BF16", 0.125, 0.0, 1),
    ]
    for m in more:
        s += 1
        cs.append(attn_case(m[0], *m[1:], seed=s))
    return cs


GROUPS = {"norm": norms, "rope": ropes, "act": acts, "softmax": softmaxes, "attention": attentions}


def encode(cases):
    b = bytearray(b"BPOP" + struct.pack("<II", 1, len(cases)))
    for c in cases:
        nm = c.name.encode()[:47]
        b += nm + b"\0" * (48 - len(nm))
        b += struct.pack("<16q", *(c.p + [0] * (16 - len(c.p))))
        b += struct.pack("<8d", *(c.f + [0.0] * (8 - len(c.f))))
        b += struct.pack("<Q", c.seed)
        b += np.array(c.first + [0.0] * (4 - len(c.first)), dtype="<f4").tobytes()
        out = np.asarray(c.out, dtype=np.float64).ravel()
        b += struct.pack("<Q", out.size) + out.astype("<f4").tobytes()
    return bytes(b)


def main():
    check = "--check" in sys.argv[1:]
    bad = 0
    for g, fn in GROUPS.items():
        data = encode(fn())
        path = os.path.join(HERE, f"ops_{g}.bin")
        if check:
            same = os.path.exists(path) and open(path, "rb").read() == data
            print(f"{path}: {'ok' if same else 'DIFFERS'}")
            bad += not same
        else:
            with open(path, "wb") as f:
                f.write(data)
            print(f"wrote {path} ({len(data)} bytes)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
