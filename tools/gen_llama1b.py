#!/usr/bin/env python3
"""A Llama-shaped 1B-class Q4_K_M GGUF file with random weights, for decode-speed checks on a lent
GPU (tools/gpu_check.sh step 5), written with the `gguf` package:

    python3 tools/gen_llama1b.py OUT.gguf [--layers N]

The shape of Llama 3.2 1B: n_embd 2048, 16 layers, 32 query heads and 8 KV heads of 64, n_ff 8192,
a 128256-token vocabulary and a tied output (token_embd is the output matrix too), and the kinds
llama.cpp's Q4_K_M mix gives it: Q4_K, with attn_v and ffn_down Q6_K in every other layer and
token_embd Q6_K. About 1.24 G weights, 0.8 GB. Its numbers mean nothing; what a decode step
reads does: every weight byte once per token.

Fast to write: blocks are random bytes with their f16 scale fields set, the scale chosen from a
sample of rows rather than by decoding the whole tensor (tests/model/gen_tiny.py's RAW table gives
the field offsets). No vocabulary: the model loader needs none and `backplane bench` feeds random
ids (packing 128256 token strings through the gguf writer took 14 of a 1-layer file's 24 s);
`run`, which tokenizes, cannot use the file. 1 layer took 11 s on the loaded 2-vCPU dev VM
(2026-12-02), 16 layers about 30 s there.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "model"))
import gen_tiny  # noqa: E402  (RAW, MIN_RATIO)
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402

E, H, KV, D, F, VOCAB = 2048, 32, 8, 64, 8192, 128256


def raw_weight(rng, kind, rows, cols, std):
    bb, be, fields = gen_tiny.RAW[kind]
    blocks = rng.integers(0, 256, size=(rows, cols // be, bb), dtype=np.uint8)

    def set_scales(d):
        for off, role in fields:
            v = d * (gen_tiny.MIN_RATIO[kind] if role == "m" else 1.0)
            blocks[:, :, off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)

    set_scales(1.0)
    sample = min(rows, 16)
    probe = gguf.quants.dequantize(blocks[:sample].reshape(sample, -1), kind)
    set_scales(std / float(np.std(probe)))
    return blocks.reshape(rows, -1)


def main():
    argv, layers = sys.argv[1:], 16
    if "--layers" in argv:
        i = argv.index("--layers")
        layers = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 1:
        sys.exit("usage: gen_llama1b.py OUT.gguf [--layers N]")
    out = argv[0]
    rng = np.random.Generator(np.random.PCG64(2026))
    tmp = "%s.%d.tmp" % (out, os.getpid())
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name("llama-1b-shaped-random-q4_k_m")
    w.add_context_length(8192)
    w.add_embedding_length(E)
    w.add_block_count(layers)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_rope_dimension_count(D)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(500000.0)
    w.add_file_type(15)  # MOSTLY_Q4_K_M

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def add(name, kind, rows, cols, std):
        w.add_tensor(name, raw_weight(rng, kind, rows, cols, std), raw_dtype=kind)

    add("token_embd.weight", T.Q6_K, VOCAB, E, 1.0)
    w.add_tensor("output_norm.weight", norm(E))
    for i in range(layers):
        p = "blk.%d." % i
        big = T.Q6_K if i % 2 == 0 else T.Q4_K  # Q4_K_M: the "use more bits" layers
        w.add_tensor(p + "attn_norm.weight", norm(E))
        add(p + "attn_q.weight", T.Q4_K, H * D, E, 1.0 / np.sqrt(E))
        add(p + "attn_k.weight", T.Q4_K, KV * D, E, 1.0 / np.sqrt(E))
        add(p + "attn_v.weight", big, KV * D, E, 1.0 / np.sqrt(E))
        add(p + "attn_output.weight", T.Q4_K, E, H * D, 1.0 / np.sqrt(H * D))
        w.add_tensor(p + "ffn_norm.weight", norm(E))
        add(p + "ffn_gate.weight", T.Q4_K, F, E, 1.0 / np.sqrt(E))
        add(p + "ffn_up.weight", T.Q4_K, F, E, 1.0 / np.sqrt(E))
        add(p + "ffn_down.weight", big, E, F, 1.0 / np.sqrt(F))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)
    print("%s: %d layers, %.2f GB" % (out, layers, os.path.getsize(out) / 1e9))


if __name__ == "__main__":
    main()
