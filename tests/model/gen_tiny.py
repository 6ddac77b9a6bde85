#!/usr/bin/env python3
"""Tiny random-weight GGUF models for the model tests, written with the `gguf` package.

    python3 tests/model/gen_tiny.py OUT_DIR            # writes tiny-<name>.gguf for every MODELS entry
    python3 tests/model/gen_tiny.py OUT_DIR --check    # also checks each file's sha256 against
                                                       # tests/model/ref/tiny.sha256

Deterministic: numpy's PCG64 from a fixed seed per model, and the gguf writer lays a file out the
same way every time, so the files llama.cpp's reference logits were computed on
(tests/model/ref/tiny-*.logits.bin) are regenerated bit for bit at test time; --check proves it.
Each model has a few layers, grouped-query attention and several weight kinds per layer, so a
forward pass exercises many kernels:

  llama   3 layers, GQA 4:2, head 64, NORM RoPE with Llama 3 frequency factors (rope_freqs),
          separate output matrix, kinds from Q2_K to F32
  qwen2   2 layers, MQA 4:1, q/k/v biases, NeoX RoPE, tied embeddings (output = token_embd)
  qwen3   2 layers, GQA 4:2, head 128 (q is wider than n_embd), q/k RMSNorm, separate output
  gemma3  4 layers, GQA 2:1, head 128, sliding window 8 on layers 0 and 2 (pattern 2), two RoPE
          bases, q/k norms, post-norms, embedding scale, GELU gate, final logit soft-cap 30
  qwen3moe  3 layers, GQA 4:2, head 64, q/k norm, 8 routed experts top 2 of width 256
          (expert_feed_forward_length), F32/F16 routers; layer 0's router has constructed ties:
          row 3 = row 2 (every token ties experts 2 and 3 exactly: the lower index must win) and
          row 6 = row 5 * (1 + 1e-3) (a near-tie the larger logit must win, for 4 tokens the higher index)
  qwen3moe-ties  qwen3moe's shape, 6 experts top 2, every router row a multiple of one direction:
          layer 0 logits (2s, s, s, -2s, -s, -s) (an exact tie at the top-2 boundary for every token:
          the lower index wins), layer 1 the same with rows 2 and 5 x (1 + 1e-4) (a near-tie the
          larger logit wins), layer 2 (s, s, s, -s, -s, -s) (a three-way tie for two places)
  llama-moe  Mixtral-style: a llama file with 2 layers, 6 experts top 2 of width n_ff (no
          expert_feed_forward_length), NORM RoPE, separate output

  phi3    2 layers, GQA 4:2, head 64, NeoX RoPE; layer 0's Q/K/V fused in attn_qkv, layer 1's
          separate; gate and up fused in ffn_up (2 x n_ff rows, gate first), as Phi-3 files store them
  phi3-longrope  phi3's shape with Phi-3 128k's LongRoPE: rope_factors_long / rope_factors_short
          (distinct, in [1, 8) and [1, 2)), rope.scaling.attn_factor sqrt(1 + ln(s) / ln(orig)) as
          llama.cpp's converter writes it (s = context_length / orig), original context 32: a
          context of 64 (llama.cpp's 256) takes the long factors
  phi3-longrope-short  the same with an original context of 256 and context_length 256 (so its
          attn_factor is 1, as the converter writes it for no extension: a device step may run
          it): a context of 64 (llama.cpp's 256) takes the short factors, one of 257 the long
  mistral3  2 layers, GQA 4:2, head 64, NORM RoPE with rope_freqs factors (llama's layer)
  gpt-oss  4 layers, GQA 4:2, head 64, alternating sliding window, attention sinks, biases, YaRN,
          6 MXFP4 experts top 3 with biases (make_gptoss)

Expert tensors are stacked [expert][rows][cols] as GGUF stores ffn_{gate,up,down}_exps.

The quantizing kinds the gguf package has (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 BF16) are quantized from
random floats; the others (K-quants, IQ4_NL, IQ4_XS) are random bytes with their f16 scale fields
set so the decoded weights have the wanted spread: a random-weight model only needs weights that
both implementations decode identically, which any block bytes are.
"""
import hashlib
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

N_VOCAB = 320  # 3 control tokens, 256 byte tokens, 61 word pieces

# Byte offsets of each random-byte kind's f16 scale fields in its block: (block bytes, block
# elements, [(offset, role)]), role "d" (the scale) or "m" (the min scale, set to a multiple of d
# that centres the decoded values on zero). From the published block layouts (ggml-common.h).
RAW = {
    T.Q2_K: (84, 256, [(80, "d"), (82, "m")]),
    T.Q3_K: (110, 256, [(108, "d")]),
    T.Q4_K: (144, 256, [(0, "d"), (2, "m")]),
    T.Q5_K: (176, 256, [(0, "d"), (2, "m")]),
    T.Q6_K: (210, 256, [(208, "d")]),
    T.IQ4_NL: (18, 32, [(0, "d")]),
    T.IQ4_XS: (136, 256, [(0, "d")]),
}
# min scale / scale that centres q * sc - m * dmin for the kind's quant range
MIN_RATIO = {T.Q2_K: 1.5, T.Q4_K: 7.5, T.Q5_K: 15.5}


def weight(rng, kind, rows, cols, std):
    """(array for add_tensor, raw_dtype) of a rows x cols matrix of the given kind."""
    if kind == T.F32:
        return (rng.standard_normal((rows, cols)) * std).astype(np.float32), None
    if kind == T.F16:
        return (rng.standard_normal((rows, cols)) * std).astype(np.float16), None
    if kind in (T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0):
        x = (rng.standard_normal((rows, cols)) * std).astype(np.float32)
        return gguf.quants.quantize(x, kind), kind
    bb, be, fields = RAW[kind]
    nb = rows * cols // be
    blocks = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)

    def set_scales(d):
        for off, role in fields:
            v = d * (MIN_RATIO[kind] if role == "m" else 1.0)
            blocks[:, off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)

    set_scales(1.0)
    probe = gguf.quants.dequantize(blocks.reshape(rows, -1), kind)
    set_scales(std / float(np.std(probe)))
    return blocks.reshape(rows, -1), kind


def vocab(w, gemma):
    toks = ["<unk>", "<s>", "</s>"] if not gemma else ["<pad>", "<eos>", "<bos>"]
    types = [2, 3, 3] if not gemma else [3, 3, 3]
    toks += ["<0x%02X>" % b for b in range(256)]
    types += [6] * 256
    words = ["\u2581the", "\u2581of", "\u2581and", "\u2581a", "\u2581to", "\u2581in", "\u2581is", "\u2581it",
             "\u2581that", "\u2581was", "\u2581for", "\u2581on", "\u2581are", "\u2581as", "\u2581with",
             "\u2581his", "\u2581they", "\u2581at", "\u2581be", "\u2581this", "\u2581have", "\u2581from"]
    i = 0
    while len(toks) < N_VOCAB:
        toks.append(words[i] if i < len(words) else "\u2581w%d" % i)
        types.append(1)
        i += 1
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([-1000.0] * 3 + [0.0] * 256 + [-float(j) for j in range(N_VOCAB - 259)])
    w.add_token_types(types)
    if gemma:
        w.add_bos_token_id(2), w.add_eos_token_id(1), w.add_pad_token_id(0)
    else:
        w.add_unk_token_id(0), w.add_bos_token_id(1), w.add_eos_token_id(2)


# name: arch, seed, layers, n_embd, heads, kv heads, head dim, n_ff, per-layer kinds
# (q, k, v, o, gate, up, down), token_embd kind, output kind (None: tied)
MODELS = {
    "llama": dict(arch="llama", seed=11, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=512,
                  layers=[(T.Q4_K, T.Q5_0, T.Q8_0, T.Q4_0, T.Q4_K, T.Q5_K, T.Q6_K),
                          (T.F16, T.BF16, T.F32, T.Q8_0, T.Q4_1, T.Q5_1, T.IQ4_NL),
                          (T.Q3_K, T.Q2_K, T.Q6_K, T.Q5_K, T.IQ4_XS, T.Q8_0, T.Q4_K)],
                  embd=T.Q4_0, out=T.Q6_K),
    "qwen2": dict(arch="qwen2", seed=12, n_embd=256, n_head=4, n_kv=1, hd=64, n_ff=768,
                  layers=[(T.Q4_0, T.Q8_0, T.Q5_1, T.Q4_K, T.Q5_0, T.Q4_K, T.Q6_K),
                          (T.Q6_K, T.Q4_1, T.IQ4_NL, T.F16, T.Q3_K, T.Q2_K, T.Q8_0)],
                  embd=T.Q8_0, out=None, embd_std=1.0),
    "qwen3": dict(arch="qwen3", seed=13, n_embd=256, n_head=4, n_kv=2, hd=128, n_ff=512,
                  layers=[(T.Q5_K, T.Q6_K, T.Q8_0, T.IQ4_XS, T.Q4_K, T.Q4_K, T.Q5_0),
                          (T.BF16, T.F16, T.Q4_0, T.Q8_0, T.Q6_K, T.Q5_K, T.Q4_K)],
                  embd=T.Q4_K, out=T.Q8_0),
    "gemma3": dict(arch="gemma3", seed=14, n_embd=256, n_head=2, n_kv=1, hd=128, n_ff=512,
                   layers=[(T.Q5_0, T.Q5_0, T.Q8_0, T.Q4_K, T.Q5_0, T.Q5_0, T.Q6_K)] * 4,
                   embd=T.Q8_0, out=None),
    # MoE: per layer (q, k, v, o, gate_exps, up_exps, down_exps) plus a router kind per layer
    "qwen3moe": dict(arch="qwen3moe", seed=37, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=512,
                     n_expert=8, n_used=2, n_ff_exp=256,
                     layers=[(T.Q8_0, T.Q5_0, T.Q8_0, T.Q4_K, T.Q4_K, T.Q5_K, T.Q6_K),
                             (T.Q6_K, T.Q4_0, T.F16, T.Q8_0, T.Q8_0, T.IQ4_NL, T.Q4_1),
                             (T.Q4_K, T.Q8_0, T.Q5_1, T.Q5_0, T.Q5_0, T.Q4_K, T.Q8_0)],
                     routers=[T.F32, T.F16, T.F32], ties=True, embd=T.Q8_0, out=T.Q6_K),
    # every router row a multiple of one direction u (tie_rows: the multiples per layer), so every
    # token's logits tie, or nearly tie, at the top-2 boundary, whatever its hidden state
    "qwen3moe-ties": dict(arch="qwen3moe", seed=51, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=512,
                          n_expert=6, n_used=2, n_ff_exp=256,
                          layers=[(T.Q8_0, T.Q5_0, T.Q8_0, T.Q4_K, T.Q4_K, T.Q5_K, T.Q6_K),
                                  (T.Q6_K, T.Q4_0, T.F16, T.Q8_0, T.Q8_0, T.IQ4_NL, T.Q4_1),
                                  (T.Q4_K, T.Q8_0, T.Q5_1, T.Q5_0, T.Q5_0, T.Q4_K, T.Q8_0)],
                          routers=[T.F32, T.F32, T.F32],
                          tie_rows=[(2, 1, 1, -2, -1, -1), (2, 1, 1 + 1e-4, -2, -1, -(1 + 1e-4)),
                                    (1, 1, 1, -1, -1, -1)],
                          embd=T.Q8_0, out=T.Q6_K),
    "llama-moe": dict(arch="llama", seed=43, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=256,
                      n_expert=6, n_used=2, no_rope_freqs=True,
                      layers=[(T.Q4_K, T.Q8_0, T.Q5_0, T.Q6_K, T.Q4_K, T.Q4_K, T.Q5_K),
                              (T.Q5_K, T.Q4_1, T.Q8_0, T.Q4_0, T.Q8_0, T.Q6_K, T.IQ4_XS)],
                      routers=[T.F32, T.F32], embd=T.Q4_0, out=T.Q8_0),
    # dense: a fused attn_qkv is made with the q kind, a fused gate-up ffn_up with the gate kind
    "phi3": dict(arch="phi3", seed=17, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=512, fused_qkv=(0,), gate_up=True,
                 layers=[(T.Q4_K, None, None, T.Q8_0, T.Q5_K, None, T.Q6_K),
                         (T.Q5_0, T.Q8_0, T.Q4_1, T.Q4_K, T.Q8_0, None, T.Q5_1)],
                 embd=T.Q8_0, out=T.Q6_K),
    "phi3-longrope": dict(arch="phi3", seed=19, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=512, fused_qkv=(1,),
                          gate_up=True, longrope=(32, 256),
                          layers=[(T.Q8_0, T.Q4_K, T.Q5_0, T.Q6_K, T.Q4_K, None, T.Q8_0),
                                  (T.Q4_K, None, None, T.Q5_1, T.Q8_0, None, T.Q6_K)],
                          embd=T.Q8_0, out=T.Q6_K),
    "phi3-longrope-short": dict(arch="phi3", seed=23, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=512, fused_qkv=(0,),
                                gate_up=True, longrope=(256, 256),
                                layers=[(T.Q6_K, None, None, T.Q4_K, T.Q8_0, None, T.Q5_0),
                                        (T.Q5_K, T.Q8_0, T.Q4_0, T.Q8_0, T.Q5_K, None, T.Q6_K)],
                                embd=T.Q8_0, out=T.Q6_K),
    "mistral3": dict(arch="mistral3", seed=18, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=512,
                     layers=[(T.Q6_K, T.Q4_K, T.Q8_0, T.Q5_0, T.Q4_K, T.Q5_K, T.Q6_K),
                             (T.Q8_0, T.Q5_1, T.F16, T.Q4_K, T.IQ4_NL, T.Q4_0, T.Q8_0)],
                     embd=T.Q4_K, out=T.Q8_0),
    # gpt-oss: per layer (q, k, v, o) kinds; experts always MXFP4 (as its files store them)
    "gpt-oss": dict(arch="gpt-oss", seed=58, n_embd=256, n_head=4, n_kv=2, hd=64, n_ff=128,
                    n_expert=6, n_used=3, n_ff_exp=128,
                    layers=[(T.Q8_0, T.F16, T.Q8_0, T.Q5_0), (T.BF16, T.Q8_0, T.F32, T.Q8_0),
                            (T.Q5_0, T.Q8_0, T.F16, T.Q4_0), (T.Q8_0, T.Q4_1, T.Q8_0, T.F16)],
                    embd=T.Q8_0, out=T.Q8_0),
}

# Router weights: logits of rms ~4 (h is about unit rms per element). A top-k choice decided by a
# margin smaller than the logits' own error (llama.cpp's 8-bit activations, ~1e-2 here) could go
# either way in any implementation, so the seeds of the two MoE models (37, 43) were picked from
# 15-44 so that every choice but the constructed ones is decided by a float64 margin of more than
# 0.12 (a constructed tie counted as one value: its gaps to the experts above and below it count).
# qwen3moe's layer 0 then has 2 tokens whose exact tie straddles the top-2 boundary and 4 whose
# near-tie does.
ROUTER_STD = 0.25


def make_gptoss(m, name, path):
    """gpt-oss (llama.cpp's openai_moe): 4 layers, sliding window 8 on layers 0 and 2 (its
    pattern 2), NeoX RoPE with YaRN (factor 32 from 4096, base 150000, as gpt-oss-20b), biases on
    q/k/v/o, per-head attention sinks, post_attention_norm as the FFN's input norm, 6 MXFP4
    experts top 3 with a router bias and gate/up/down biases; the clamped SwiGLU's limit 7 is
    reached by construction (the gate/up biases below). The router is twice the others' spread,
    and seed 58 was picked from 51-100 as the one whose every top-3 choice (32 fixed tokens, 4
    layers) is decided by a float64 margin of more than 0.12 (0.146), as for the other MoE models."""
    rng = np.random.Generator(np.random.PCG64(m["seed"]))
    E, H, KV, D, NE, FE = m["n_embd"], m["n_head"], m["n_kv"], m["hd"], m["n_expert"], m["n_ff_exp"]
    w = gguf.GGUFWriter(path, m["arch"])
    w.add_name("tiny-" + name)
    w.add_context_length(256)
    w.add_embedding_length(E)
    w.add_block_count(len(m["layers"]))
    w.add_feed_forward_length(m["n_ff"])
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(150000.0)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(32.0)
    w.add_rope_scaling_orig_ctx_len(4096)
    w.add_sliding_window(8)
    w.add_expert_count(NE)
    w.add_expert_used_count(m["n_used"])
    w.add_expert_feed_forward_length(FE)
    w.add_file_type(1)
    vocab(w, False)

    def vec(n, std, centre=0.0):
        return (centre + std * rng.standard_normal(n)).astype(np.float32)

    def add(name_, kind, rows, cols, std):
        arr, raw = weight(rng, kind, rows, cols, std)
        w.add_tensor(name_, arr, raw_dtype=raw)

    def experts(name_, rows, cols, std, zero=()):
        x = (rng.standard_normal((NE, rows, cols)) * std).astype(np.float32)
        x[:, list(zero)] = 0.0
        w.add_tensor(name_, np.stack([gguf.quants.quantize(x[e], T.MXFP4) for e in range(NE)]), raw_dtype=T.MXFP4)

    add("token_embd.weight", m["embd"], N_VOCAB, E, 2.0)
    w.add_tensor("output_norm.weight", vec(E, 0.1, 1.0))
    add("output.weight", m["out"], N_VOCAB, E, 1.0 / np.sqrt(E))
    for i, (q, k, v, o) in enumerate(m["layers"]):
        p = "blk.%d." % i
        w.add_tensor(p + "attn_norm.weight", vec(E, 0.1, 1.0))
        add(p + "attn_q.weight", q, H * D, E, 1.0 / np.sqrt(E))
        add(p + "attn_k.weight", k, KV * D, E, 1.0 / np.sqrt(E))
        add(p + "attn_v.weight", v, KV * D, E, 1.0 / np.sqrt(E))
        for t_, n in (("q", H * D), ("k", KV * D), ("v", KV * D)):
            w.add_tensor(p + "attn_%s.bias" % t_, vec(n, 0.1))
        add(p + "attn_output.weight", o, E, H * D, 1.0 / np.sqrt(H * D))
        w.add_tensor(p + "attn_output.bias", vec(E, 0.1))
        w.add_tensor(p + "attn_sinks.weight", vec(H, 1.0))
        w.add_tensor(p + "post_attention_norm.weight", vec(E, 0.1, 1.0))
        w.add_tensor(p + "ffn_gate_inp.weight", (rng.standard_normal((NE, E)) * 2 * ROUTER_STD).astype(np.float32))
        w.add_tensor(p + "ffn_gate_inp.bias", vec(NE, 0.5))
        # The clamps, reached by construction: units 0-1 have gate biases of 9 (g is cut to 7)
        # and a constant up of -0.9 (zero up rows), units 32-33 up biases of -9 (u is cut to -7),
        # units 64-65 of 9 (u is cut to 7), both with a constant gate of 0.3. So no activation
        # grows far past the others: an 8-bit activation block holding 7 x 8 = 56 among values
        # near 0.5 would round them coarsely, in llama.cpp as here (NMSE 5e-3 against float64).
        bg, bu = 0.1 * rng.standard_normal((NE, FE)), 0.1 * rng.standard_normal((NE, FE))
        bg[:, 0:2] += 9.0
        bu[:, 0:2] = -0.9
        bu[:, 32:34] -= 9.0
        bu[:, 64:66] += 9.0
        bg[:, 32:34] = bg[:, 64:66] = 0.3
        experts(p + "ffn_gate_exps.weight", FE, E, 1.0 / np.sqrt(E), zero=(32, 33, 64, 65))
        w.add_tensor(p + "ffn_gate_exps.bias", bg.astype(np.float32))
        experts(p + "ffn_up_exps.weight", FE, E, 1.0 / np.sqrt(E), zero=(0, 1))
        w.add_tensor(p + "ffn_up_exps.bias", bu.astype(np.float32))
        experts(p + "ffn_down_exps.weight", E, FE, 0.5 / np.sqrt(FE))
        w.add_tensor(p + "ffn_down_exps.bias", (0.1 * rng.standard_normal((NE, E))).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make(name, path):
    m = MODELS[name]
    if m["arch"] == "gpt-oss":
        return make_gptoss(m, name, path)
    rng = np.random.Generator(np.random.PCG64(m["seed"]))
    arch, E, H, KV, D, F = m["arch"], m["n_embd"], m["n_head"], m["n_kv"], m["hd"], m["n_ff"]
    gemma = arch == "gemma3"
    w = gguf.GGUFWriter(path, arch)
    # llama.cpp patches a vocabulary by general.name: a name with "phi3" in it must have the
    # token <|endoftext|>, which the tiny vocabulary lacks (an unordered_map::at on load)
    w.add_name("tiny-" + name if arch != "phi3" else "tiny-phi-mini")
    orig, n_ctx_train = m.get("longrope", (None, 256))
    w.add_context_length(n_ctx_train)
    if orig:  # as llama.cpp's Phi-3 converter writes LongRoPE (no rope.scaling.type)
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_rope_scaling_attn_factors(float(np.sqrt(1 + np.log(n_ctx_train / orig) / np.log(orig))))
    w.add_embedding_length(E)
    w.add_block_count(len(m["layers"]))
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_layer_norm_rms_eps(1e-6 if gemma or arch in ("qwen3", "qwen3moe") else 1e-5)
    w.add_rope_freq_base(10000.0 if arch in ("llama", "phi3") else 1e6)
    if arch in ("llama", "phi3", "mistral3"):
        w.add_rope_dimension_count(D)
    moe = "n_expert" in m
    if moe:
        w.add_expert_count(m["n_expert"])
        w.add_expert_used_count(m["n_used"])
        if "n_ff_exp" in m:
            w.add_expert_feed_forward_length(m["n_ff_exp"])
    if arch in ("qwen3", "gemma3", "qwen3moe"):
        w.add_key_length(D)
        w.add_value_length(D)
    if gemma:
        w.add_sliding_window(8)
        w.add_sliding_window_pattern(2)
        w.add_rope_freq_base_swa(10000.0)
        w.add_final_logit_softcapping(30.0)
    w.add_file_type(1)
    vocab(w, gemma)

    def norm(n, centre=1.0):  # RMSNorm weights near centre (Gemma's files store 1 + w already)
        return (centre * (1.0 + 0.1 * rng.standard_normal(n))).astype(np.float32)

    def add(name_, kind, rows, cols, std):
        arr, raw = weight(rng, kind, rows, cols, std)
        w.add_tensor(name_, arr, raw_dtype=raw)

    # The embedding carries a good share of the residual stream (std 2; Gemma's 0.1 is 1.6 after
    # its sqrt(n_embd) scale, and its post-norms are scaled by 0.5): with every layer's output as
    # large as the embedding, random weights amplify llama.cpp's own 8-bit activation rounding to
    # an NMSE near 1e-3 against the exact float64 logits, and the 1e-3 bound would have no margin.
    add("token_embd.weight", m["embd"], N_VOCAB, E, m.get("embd_std", 2.0) if not gemma else 0.1)
    w.add_tensor("output_norm.weight", norm(E))
    if m["out"] is not None:
        add("output.weight", m["out"], N_VOCAB, E, 1.0 / np.sqrt(E))
    if arch in ("llama", "mistral3") and not m.get("no_rope_freqs"):  # Llama 3.1-style factors (theta_i / factor_i)
        w.add_tensor("rope_freqs.weight", (1.0 + 7.0 * rng.random(D // 2)).astype(np.float32))
    if orig:  # LongRoPE's divisors per pair, long > short as Phi-3's (theta_i / factor_i)
        w.add_tensor("rope_factors_long.weight", (1.0 + 7.0 * rng.random(D // 2)).astype(np.float32))
        w.add_tensor("rope_factors_short.weight", (1.0 + rng.random(D // 2)).astype(np.float32))
    for i, (q, k, v, o, g, u, d) in enumerate(m["layers"]):
        p = "blk.%d." % i
        w.add_tensor(p + "attn_norm.weight", norm(E))
        if i in m.get("fused_qkv", ()):
            add(p + "attn_qkv.weight", q, (H + 2 * KV) * D, E, 1.0 / np.sqrt(E))
        else:
            add(p + "attn_q.weight", q, H * D, E, 1.0 / np.sqrt(E))
            add(p + "attn_k.weight", k, KV * D, E, 1.0 / np.sqrt(E))
            add(p + "attn_v.weight", v, KV * D, E, 1.0 / np.sqrt(E))
        if arch == "qwen2":
            for t, n in (("q", H * D), ("k", KV * D), ("v", KV * D)):
                w.add_tensor(p + "attn_%s.bias" % t, (0.1 * rng.standard_normal(n)).astype(np.float32))
        if arch in ("qwen3", "gemma3", "qwen3moe"):
            w.add_tensor(p + "attn_q_norm.weight", norm(D))
            w.add_tensor(p + "attn_k_norm.weight", norm(D))
        add(p + "attn_output.weight", o, E, H * D, 1.0 / np.sqrt(H * D))
        if gemma:
            w.add_tensor(p + "post_attention_norm.weight", norm(E, 0.5))
        w.add_tensor(p + "ffn_norm.weight", norm(E))
        if moe:
            NE, FE = m["n_expert"], m.get("n_ff_exp", F)
            r = rng.standard_normal((NE, E)) * ROUTER_STD
            if m.get("ties") and i == 0:
                r[3] = r[2]                   # exact tie, every token
                r[6] = r[5] * (1.0 + 1e-3)    # near-tie: |logit 6| = |logit 5| * (1 + 1e-3)
            if m.get("tie_rows"):             # logits c * s, s = dirn . h of unit spread
                dirn = rng.standard_normal(E) / np.sqrt(E)
                r = np.array([c * dirn for c in m["tie_rows"][i]])
            if m["routers"][i] == T.F32:
                w.add_tensor(p + "ffn_gate_inp.weight", r.astype(np.float32))
            else:
                w.add_tensor(p + "ffn_gate_inp.weight", r.astype(np.float16))

            def experts(name_, kind, rows, cols, std):
                parts = [weight(rng, kind, rows, cols, std) for _ in range(NE)]
                w.add_tensor(name_, np.stack([a for a, _ in parts]), raw_dtype=parts[0][1])

            experts(p + "ffn_gate_exps.weight", g, FE, E, 1.0 / np.sqrt(E))
            experts(p + "ffn_up_exps.weight", u, FE, E, 1.0 / np.sqrt(E))
            experts(p + "ffn_down_exps.weight", d, E, FE, 1.0 / np.sqrt(FE))
            continue
        if m.get("gate_up"):
            add(p + "ffn_up.weight", g, 2 * F, E, 1.0 / np.sqrt(E))
        else:
            add(p + "ffn_gate.weight", g, F, E, 1.0 / np.sqrt(E))
            add(p + "ffn_up.weight", u, F, E, 1.0 / np.sqrt(E))
        add(p + "ffn_down.weight", d, E, F, 1.0 / np.sqrt(F))
        if gemma:
            w.add_tensor(p + "post_ffw_norm.weight", norm(E, 0.5))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit("usage: gen_tiny.py OUT_DIR [--check]")
    out = args[0]
    os.makedirs(out, exist_ok=True)
    sums = {}
    for name in MODELS:
        path = os.path.join(out, "tiny-%s.gguf" % name)
        # Written beside and renamed into place: tests running in parallel may generate at once,
        # and none may read a half-written file.
        tmp = "%s.%d.tmp" % (path, os.getpid())
        make(name, tmp)
        with open(tmp, "rb") as f:
            sums[name] = hashlib.sha256(f.read()).hexdigest()
        os.replace(tmp, path)
    if "--check" in sys.argv:
        ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref", "tiny.sha256")
        want = dict(line.split()[::-1] for line in open(ref) if line.strip())
        bad = [n for n in MODELS if want.get("tiny-%s.gguf" % n) != sums[n]]
        if bad:
            sys.exit("gen_tiny: %s differ from the files the reference was made on (%s)" % (bad, ref))
    for name in MODELS:
        print("%s  tiny-%s.gguf" % (sums[name], name))


if __name__ == "__main__":
    main()
