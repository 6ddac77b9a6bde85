#!/usr/bin/env python3
"""A small random-weight Llama-shaped GGUF file (F16) whose next-token distributions are peaked,
for measuring how far each fast path drifts from the exact forward pass (docs/numerics.md):

    python3 tools/gen_peaked_llama.py VOCAB.gguf OUT.gguf [--layers 4] [--embd 512] [--seed 1]

VOCAB.gguf gives the tokenizer: the llama-bpe vocabulary, models/ggml-vocab-llama-bpe.gguf of
llama.cpp's tree (vendored by the llama-cpp-python sdist).
Quantize the result with llama-quantize --pure to hold every tensor to one kind.

Why peaked: with random weights and a small output scale every next-token distribution is near
uniform over 128k entries, and any rounding hardly moves a KL divergence or a perplexity. Here
the output matrix is scaled so that the logits have a standard deviation of about 6 (the top
entries hold most of the mass, as in a trained model), and token_embd has a spread of 1 so the
residual stream keeps each token's identity through the layers: small errors in the matmuls move
the mass between a few large logits, where a biased kernel shows.
"""
import argparse

import numpy as np

import gguf


def copy_tokenizer(w, vocab_path):
    """The tokenizer of vocab_path (a llama.cpp ggml-vocab-*.gguf) into writer w; its size."""
    r = gguf.GGUFReader(vocab_path)
    tok = {k: f.contents() for k, f in r.fields.items() if k.startswith("tokenizer.")}
    w.add_tokenizer_model(tok["tokenizer.ggml.model"])
    w.add_tokenizer_pre(tok["tokenizer.ggml.pre"])
    w.add_token_list(tok["tokenizer.ggml.tokens"])
    w.add_token_types(tok["tokenizer.ggml.token_type"])
    if "tokenizer.ggml.merges" in tok:
        w.add_token_merges(tok["tokenizer.ggml.merges"])
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id)):
        if "tokenizer.ggml.%s_token_id" % key in tok:
            add(int(tok["tokenizer.ggml.%s_token_id" % key]))
    return len(tok["tokenizer.ggml.tokens"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vocab")
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    E, L = a.embd, a.layers
    H = E // 64
    F = E * 3
    rng = np.random.default_rng(a.seed)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("peaked-llama-%dx%d" % (L, E))
    w.add_context_length(2048)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(H)
    w.add_rope_dimension_count(64)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    V = copy_tokenizer(w, a.vocab)

    def mat(name, rows, cols, std):  # a (rows, cols) weight: rows outputs of cols inputs
        w.add_tensor(name, (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(np.float16))

    def gain(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", V, E, 1.0)
    for i in range(L):
        p = "blk.%d." % i
        gain(p + "attn_norm.weight", E)
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            mat(p + t + ".weight", E, E, 1.0 / np.sqrt(E))
        gain(p + "ffn_norm.weight", E)
        mat(p + "ffn_gate.weight", F, E, 1.0 / np.sqrt(E))
        mat(p + "ffn_up.weight", F, E, 1.0 / np.sqrt(E))
        mat(p + "ffn_down.weight", E, F, 1.0 / np.sqrt(F))
    gain("output_norm.weight", E)
    mat("output.weight", V, E, 6.0 / np.sqrt(E))
    write_out(w)


def write_out(w):
    """Header, metadata and tensors of writer w to its file, then closed."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
