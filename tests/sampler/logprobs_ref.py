#!/usr/bin/env python3
"""Reference log-probabilities for tests/test_sampler_serve.c: float64 log-softmax with NumPy.

usage: logprobs_ref.py DIR   reads DIR/logits.bin (int32 rows, int32 n_vocab, then rows x n_vocab
float32) and DIR/bias.bin (n_vocab float32, added before the softmax), writes DIR/ref.bin
(rows x n_vocab float64)."""
import sys

import numpy as np

d = sys.argv[1]
raw = open(f"{d}/logits.bin", "rb").read()
rows, n = np.frombuffer(raw[:8], dtype="<i4")
x = np.frombuffer(raw[8:], dtype="<f4").reshape(rows, n).astype(np.float64)
b = np.fromfile(f"{d}/bias.bin", dtype="<f4").astype(np.float64)
z = x + b
m = z.max(axis=1, keepdims=True)
lse = m + np.log(np.exp(z - m).sum(axis=1, keepdims=True))
(z - lse).astype("<f8").tofile(f"{d}/ref.bin")
