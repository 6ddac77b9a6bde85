#!/usr/bin/env python3
"""A float64 NumPy forward pass of the tiny models: the second, exact reference beside llama.cpp.

    python3 tests/model/np_forward.py MODEL.gguf OUT.logits.bin IDS...
    python3 tests/model/np_forward.py MODEL.gguf OUT.logits.bin --like REF.logits.bin
    (either with --ctx N: the context asked for, which picks Phi-3's LongRoPE factors; default 64)

(--like: the token ids and the stored vocabulary entries of another reference file, e.g.
llama.cpp's Gemma logits with their 576 entries per position.)

Weights are decoded with the gguf package's dequantizers (bit-exact to the published layouts),
everything after that is float64 with no activation rounding, written from the published
formulas: RMSNorm, RoPE (adjacent pairs for llama, halves for the others; frequency factors), grouped-query causal
attention with the layer's sliding window (fused attn_qkv split into its q, k, v rows), SwiGLU
(Phi-3's fused gate-up split in halves) or tanh-GELU gates, Gemma's embedding scale,
q/k norms, post-norms and final soft-cap; Phi-3's LongRoPE (long or short factors by the
context, as llama.cpp picks them, and the attn_factor magnitude); routed experts (qwen3moe, llama with experts): softmax
over the router logits, the top expert_used_count by llama.cpp's rule (it ranks the float32
softmax values with a sort that, for up to 16 experts, keeps equal values in index order: ties go
to the lower index), weights divided by their sum, each expert a SwiGLU FFN; gpt-oss
(forward_gptoss: sinks, biases, YaRN, its routing and clamped SwiGLU). It writes every position's full logits in
gen_ref.cpp's format, so the same test code reads either reference.

llama.cpp rounds activations to 8 bits inside its quantized dot products, as our optimized CPU
kernels do; our reference kernels (BACKPLANE_CPU_ISA=scalar) do not, so against this file they
must agree far more tightly than against llama.cpp (tests/test_model_tiny.c).
"""
import struct
import sys

import numpy as np
import gguf


def load(path):
    r = gguf.GGUFReader(path)
    kv = {}
    for f in r.fields.values():
        if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
            continue
        v = f.parts[f.data[0]]
        kv[f.name] = bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v[0].item()
    t = {}
    for ti in r.tensors:
        a = gguf.quants.dequantize(ti.data, ti.tensor_type).astype(np.float64)
        shape = [int(x) for x in ti.shape][::-1]  # numpy order: rows, cols
        t[ti.name] = a.reshape(shape) if len(shape) > 1 else a.reshape(-1)
    return kv, t


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def rope(x, pos, base, neox, factors=None, mscale=1.0):
    # x: (T, heads, D); mscale: the magnitude of cos and sin (LongRoPE's attn_factor)
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d // 2) * 2.0 / d)
    if factors is not None:
        inv = inv / factors
    ang = pos[:, None] * inv[None, :]
    c, s = mscale * np.cos(ang)[:, None, :], mscale * np.sin(ang)[:, None, :]
    y = x.copy()
    if neox:
        a, b = x[..., : d // 2], x[..., d // 2:]
        y[..., : d // 2], y[..., d // 2:] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        y[..., 0::2], y[..., 1::2] = a * c - b * s, a * s + b * c
    return y


def route(logits, k):
    """Per row of router logits: the top k experts as llama.cpp's CPU picks them (descending
    float32 softmax value, equal values in index order) and their float64 softmax weights."""
    l32 = logits.astype(np.float32)
    e32 = np.exp(l32 - l32.max(axis=1, keepdims=True))
    p32 = e32 * (1.0 / e32.sum(axis=1, dtype=np.float64, keepdims=True)).astype(np.float32)
    sel = np.argsort(-p32, axis=1, kind="stable")[:, :k]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return sel, np.take_along_axis(p, sel, axis=1)


def moe(t, p, h, k, norm_w):
    sel, w = route(h @ t[p + "ffn_gate_inp.weight"].T, k)
    if norm_w:
        w = w / w.sum(axis=1, keepdims=True)
    g, u, d = t[p + "ffn_gate_exps.weight"], t[p + "ffn_up_exps.weight"], t[p + "ffn_down_exps.weight"]
    out = np.zeros_like(h)
    for i in range(h.shape[0]):
        for j in range(k):
            e = sel[i, j]
            gt, up = g[e] @ h[i], u[e] @ h[i]
            out[i] += w[i, j] * (d[e] @ (gt / (1 + np.exp(-gt)) * up))
    return out


def yarn_inv(d, base, factor, orig, beta_fast=32.0, beta_slow=1.0):
    """YaRN (Peng et al. 2023, as llama.cpp applies it): per pair i the angle step base^(-2i/d)
    mixes interpolation (/ factor) and extrapolation by a ramp that is 1 below the pair whose
    wavelength makes beta_fast turns in orig positions and 0 above the one making beta_slow
    (those pair indices floored / ceiled); cos and sin are scaled by 0.1 ln(factor) + 1."""
    corr = lambda b: d * np.log(orig / (b * 2 * np.pi)) / (2 * np.log(base))
    lo, hi = max(0.0, np.floor(corr(beta_fast))), min(d - 1.0, np.ceil(corr(beta_slow)))
    i = np.arange(d // 2)
    ramp = 1 - np.clip((i - lo) / max(0.001, hi - lo), 0, 1)
    inv = base ** (-2.0 * i / d) * ((1 - ramp) / factor + ramp)
    return inv, 0.1 * np.log(factor) + 1.0


def rope_inv(x, pos, inv, mscale):  # NeoX halves with given angle steps and magnitude
    d = x.shape[-1]
    ang = pos[:, None] * inv[None, :]
    c, s = mscale * np.cos(ang)[:, None, :], mscale * np.sin(ang)[:, None, :]
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def forward_gptoss(kv, t, ids):
    """gpt-oss: every even layer slides (pattern 2); attention with a per-head sink logit in the
    softmax denominator; q/k/v/o biases; post_attention_norm before the experts; router logits
    plus bias, the top k by float32 logit (ties to the lower index), softmax over those k;
    experts g = gate h + bg, u = up h + bu, a = min(g, 7) sigmoid(1.702 min(g, 7)) (clip(u, +-7) + 1),
    down a + bd."""
    g = lambda k, d=None: kv.get("gpt-oss.%s" % k, d)
    E, L, H = g("embedding_length"), g("block_count"), g("attention.head_count")
    KV, D = g("attention.head_count_kv", H), g("attention.key_length", E // H)
    eps, window, k_used = g("attention.layer_norm_rms_epsilon"), g("attention.sliding_window"), g("expert_used_count")
    base = g("rope.freq_base", 10000.0)
    if kv.get("gpt-oss.rope.scaling.type") == "yarn":
        inv, msc = yarn_inv(D, base, g("rope.scaling.factor"), g("rope.scaling.original_context_length"))
    else:
        inv, msc = base ** (-2.0 * np.arange(D // 2) / D), 1.0
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    x = t["token_embd.weight"][ids].copy()
    ii, jj = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    for il in range(L):
        p = "blk.%d." % il
        swa = il % 2 == 0
        h = rmsnorm(x, t[p + "attn_norm.weight"], eps)
        q = (h @ t[p + "attn_q.weight"].T + t[p + "attn_q.bias"]).reshape(T, H, D)
        k = (h @ t[p + "attn_k.weight"].T + t[p + "attn_k.bias"]).reshape(T, KV, D)
        v = (h @ t[p + "attn_v.weight"].T + t[p + "attn_v.bias"]).reshape(T, KV, D)
        q, k = rope_inv(q, pos, inv, msc), rope_inv(k, pos, inv, msc)
        out = np.zeros((T, H, D))
        mask = (jj > ii) | ((ii - jj >= window) if swa else False)
        for hh in range(H):
            sink = t[p + "attn_sinks.weight"][hh]
            s = np.where(mask, -np.inf, q[:, hh] @ k[:, hh // (H // KV)].T / np.sqrt(D))
            m = np.maximum(s.max(axis=1, keepdims=True), sink)
            e = np.exp(s - m)
            out[:, hh] = e @ v[:, hh // (H // KV)] / (e.sum(axis=1, keepdims=True) + np.exp(sink - m))
        x = x + out.reshape(T, H * D) @ t[p + "attn_output.weight"].T + t[p + "attn_output.bias"]
        h = rmsnorm(x, t[p + "post_attention_norm.weight"], eps)
        r = h @ t[p + "ffn_gate_inp.weight"].T + t[p + "ffn_gate_inp.bias"]
        sel = np.argsort(-r.astype(np.float32), axis=1, kind="stable")[:, :k_used]
        rs = np.take_along_axis(r, sel, axis=1)
        wts = np.exp(rs - rs.max(axis=1, keepdims=True))
        wts /= wts.sum(axis=1, keepdims=True)
        ge, ue, de = t[p + "ffn_gate_exps.weight"], t[p + "ffn_up_exps.weight"], t[p + "ffn_down_exps.weight"]
        gb, ub, db = t[p + "ffn_gate_exps.bias"], t[p + "ffn_up_exps.bias"], t[p + "ffn_down_exps.bias"]
        f = np.zeros_like(x)
        for i in range(T):
            for j in range(k_used):
                e_ = sel[i, j]
                gt = np.minimum(ge[e_] @ h[i] + gb[e_], 7.0)
                up = np.clip(ue[e_] @ h[i] + ub[e_], -7.0, 7.0)
                f[i] += wts[i, j] * (de[e_] @ (gt / (1 + np.exp(-1.702 * gt)) * (up + 1)) + db[e_])
        x = x + f
    return rmsnorm(x, t["output_norm.weight"], eps) @ t["output.weight"].T


N_CTX = 64  # the context the logits are asked for (gen_ref.sh's --ctx, the tests' n_ctx); --ctx N


def longrope_factors(kv, t, arch, n_ctx):
    """Phi-3 LongRoPE (llama.cpp's get_rope_factors): the long factors when the per-sequence
    context, rounded up to a multiple of 256 as llama.cpp rounds it, exceeds
    rope.scaling.original_context_length (default context_length), else the short ones; cos and
    sin scaled by rope.scaling.attn_factor (default 1)."""
    orig = kv.get("%s.rope.scaling.original_context_length" % arch, kv["%s.context_length" % arch])
    seq = (n_ctx + 255) // 256 * 256
    ff = t["rope_factors_long.weight"] if seq > orig else t["rope_factors_short.weight"]
    return ff, kv.get("%s.rope.scaling.attn_factor" % arch, 1.0)


def forward(kv, t, ids):
    arch = kv["general.architecture"]
    if arch == "gpt-oss":
        return forward_gptoss(kv, t, ids)
    g = lambda k, d=None: kv.get("%s.%s" % (arch, k), d)
    E, L, H = g("embedding_length"), g("block_count"), g("attention.head_count")
    KV = g("attention.head_count_kv", H)
    D = g("attention.key_length", E // H)
    eps = g("attention.layer_norm_rms_epsilon")
    base, base_swa = g("rope.freq_base", 10000.0), g("rope.freq_base_swa", 10000.0)
    window = g("attention.sliding_window", 0)
    pattern = g("attention.sliding_window_pattern", 6)
    cap = g("final_logit_softcapping", 0.0)
    gemma = arch == "gemma3"
    neox = arch not in ("llama", "mistral3")
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    x = t["token_embd.weight"][ids] * (np.sqrt(E) if gemma else 1.0)
    for il in range(L):
        p = "blk.%d." % il
        swa = window > 0 and il % pattern < pattern - 1
        h = rmsnorm(x, t[p + "attn_norm.weight"], eps)
        if p + "attn_qkv.weight" in t:  # fused: the q rows, then k's, then v's
            qkv = h @ t[p + "attn_qkv.weight"].T + t.get(p + "attn_qkv.bias", 0)
            q, k, v = qkv[:, :H * D], qkv[:, H * D:(H + KV) * D], qkv[:, (H + KV) * D:]
        else:
            q = h @ t[p + "attn_q.weight"].T + t.get(p + "attn_q.bias", 0)
            k = h @ t[p + "attn_k.weight"].T + t.get(p + "attn_k.bias", 0)
            v = h @ t[p + "attn_v.weight"].T + t.get(p + "attn_v.bias", 0)
        q, k, v = q.reshape(T, H, D), k.reshape(T, KV, D), v.reshape(T, KV, D)
        if p + "attn_q_norm.weight" in t:
            q = rmsnorm(q, t[p + "attn_q_norm.weight"], eps)
            k = rmsnorm(k, t[p + "attn_k_norm.weight"], eps)
        b = base_swa if swa else base
        ff, msc = t.get("rope_freqs.weight"), 1.0
        if "rope_factors_long.weight" in t:  # Phi-3 LongRoPE (longrope_factors)
            ff, msc = longrope_factors(kv, t, arch, N_CTX)
        q, k = rope(q, pos, b, neox, ff, msc), rope(k, pos, b, neox, ff, msc)
        out = np.zeros((T, H, D))
        for hh in range(H):
            kk, vv = k[:, hh // (H // KV)], v[:, hh // (H // KV)]
            s = q[:, hh] @ kk.T / np.sqrt(D)
            i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
            mask = (j > i) | ((i - j >= window) if swa else False)
            s = np.where(mask, -np.inf, s)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, hh] = (s / s.sum(axis=1, keepdims=True)) @ vv
        a = out.reshape(T, H * D) @ t[p + "attn_output.weight"].T
        if gemma:
            a = rmsnorm(a, t[p + "post_attention_norm.weight"], eps)
        x = x + a
        h = rmsnorm(x, t[p + "ffn_norm.weight"], eps)
        if p + "ffn_gate_inp.weight" in t:
            x = x + moe(t, p, h, g("expert_used_count"), g("expert_weights_norm", True))
            continue
        if p + "ffn_gate.weight" in t:
            gt = h @ t[p + "ffn_gate.weight"].T
            up = h @ t[p + "ffn_up.weight"].T
        else:  # Phi-3: gate and up fused in ffn_up, the gate's rows first (llama.cpp's swiglu split)
            gu = h @ t[p + "ffn_up.weight"].T
            gt, up = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        if gemma:
            act = 0.5 * gt * (1 + np.tanh(np.sqrt(2 / np.pi) * (gt + 0.044715 * gt ** 3)))
        else:
            act = gt / (1 + np.exp(-gt))
        f = (act * up) @ t[p + "ffn_down.weight"].T
        if gemma:
            f = rmsnorm(f, t[p + "post_ffw_norm.weight"], eps)
        x = x + f
    h = rmsnorm(x, t["output_norm.weight"], eps)
    logits = h @ t.get("output.weight", t["token_embd.weight"]).T
    if cap:
        logits = cap * np.tanh(logits / cap)
    return logits


def main():
    global N_CTX
    if "--ctx" in sys.argv:
        i = sys.argv.index("--ctx")
        N_CTX = int(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    kv, t = load(sys.argv[1])
    if sys.argv[3] == "--like":
        b = open(sys.argv[4], "rb").read()
        n_vocab, n_pos, n_ent = struct.unpack("<3i", b[4:16])
        ids = np.frombuffer(b[16:16 + 4 * n_pos], dtype="<i4")
        rec = np.frombuffer(b[16 + 4 * n_pos:], dtype=[("id", "<i4"), ("v", "<f4")]).reshape(n_pos, n_ent).copy()
    else:
        ids = np.array([int(a) for a in sys.argv[3:]], dtype="<i4")
        rec = None
    lg = forward(kv, t, ids)
    n_vocab = lg.shape[1]
    if rec is None:
        rec = np.zeros((len(ids), n_vocab), dtype=[("id", "<i4"), ("v", "<f4")])
        rec["id"] = np.arange(n_vocab)[None, :]
    rec["v"] = np.take_along_axis(lg, rec["id"].astype(np.int64), axis=1)
    with open(sys.argv[2], "wb") as f:
        f.write(b"BPLG" + struct.pack("<3i", n_vocab, len(ids), rec.shape[1]))
        f.write(ids.astype("<i4").tobytes())
        f.write(rec.tobytes())


if __name__ == "__main__":
    main()
