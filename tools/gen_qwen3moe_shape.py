#!/usr/bin/env python3
"""A random-weight GGUF file (F16) of Qwen3-30B-A3B's shape with fewer layers, for the MoE speed
comparison with llama-bench (docs/benchmarks.md):

    python3 tools/gen_qwen3moe_shape.py VOCAB.gguf OUT.gguf [--layers 4] [--seed 1]

The shape of one layer is Qwen3-30B-A3B's: n_embd 2048, 32 query heads and 4 KV heads of 128
(q/k RMS norms), 128 routed experts of width 768, 8 used per token, no shared expert; the
vocabulary is VOCAB.gguf's (llama.cpp's models/ggml-vocab-qwen2.gguf: 151,936 entries as the
model's). 48 layers would be 60 GB in F16: fewer layers keep every per-token cost of a layer and
fit this machine. Quantize with llama-quantize (Q4_K_M) as a user's file would be made.
Speed depends on the shape, not on the weights' values.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_peaked_llama  # noqa: E402  (copy_tokenizer, write_out)
import gguf  # noqa: E402

E, H, KV, D, NE, NU, FE = 2048, 32, 4, 128, 128, 8, 768


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vocab")
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    w = gguf.GGUFWriter(a.out, "qwen3moe")
    w.add_name("qwen3moe-30b-a3b-shape-%dL" % a.layers)
    w.add_context_length(40960)
    w.add_embedding_length(E)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(6144)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(NE)
    w.add_expert_used_count(NU)
    w.add_expert_feed_forward_length(FE)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    V = gen_peaked_llama.copy_tokenizer(w, a.vocab)

    def mat(name, shape, std):
        w.add_tensor(name, (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float16))

    def gain(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", (V, E), 1.0)
    for i in range(a.layers):
        p = "blk.%d." % i
        gain(p + "attn_norm.weight", E)
        mat(p + "attn_q.weight", (H * D, E), E ** -0.5)
        mat(p + "attn_k.weight", (KV * D, E), E ** -0.5)
        mat(p + "attn_v.weight", (KV * D, E), E ** -0.5)
        gain(p + "attn_q_norm.weight", D)
        gain(p + "attn_k_norm.weight", D)
        mat(p + "attn_output.weight", (E, H * D), (H * D) ** -0.5)
        gain(p + "ffn_norm.weight", E)
        w.add_tensor(p + "ffn_gate_inp.weight", rng.standard_normal((NE, E), dtype=np.float32))
        mat(p + "ffn_gate_exps.weight", (NE, FE, E), E ** -0.5)
        mat(p + "ffn_up_exps.weight", (NE, FE, E), E ** -0.5)
        mat(p + "ffn_down_exps.weight", (NE, E, FE), FE ** -0.5)
    gain("output_norm.weight", E)
    mat("output.weight", (V, E), E ** -0.5)
    gen_peaked_llama.write_out(w)


if __name__ == "__main__":
    main()
