#!/usr/bin/env python3
"""Generate the committed GGUF test files with the `gguf` PyPI package (an independent writer
and an independent NumPy dequantizer), so our reader and `backplane matvec` are checked against
code that is not ours.

    python3 tests/gguf/gen_gguf.py        # from the repository root; rewrites tests/gguf/*

Outputs (all small; total well under 2 MB):
  meta_all.gguf       every metadata value type, arrays of each, string arrays, nested arrays,
                      general.alignment = 64, tensors of 1..4 dimensions. test_gguf_read.c
                      checks every value below (META), so keep the two in step.
  meta_all_be.gguf    the same metadata written big-endian: must be refused with a clear error.
  kinds.gguf          one 8 x 256 tensor per kind the package can dequantize, named after the
                      kind ("Q4_K"), plus kinds_x.f32 (the input, 256 float32) and
                      kinds_y/<KIND>.f32 (y = W x, W dequantized by gguf.quants, product in
                      float64 by NumPy, rounded to float32) and kinds_y/<KIND>.scale.f32
                      (sum |W x| per row, what tolerances are relative to) and
                      kinds_y/<KIND>.l2w.f32 (|W| row norms, for the 8-bit activation bound).
  kinds_list.txt      the kinds in kinds.gguf, one per line (Q1_0 and Q2_0: the package has no
                      dequantizer for them, so they are absent).
  ../fuzz/corpus/*    seeds for fuzz_gguf: the files above, and small variants (the min-* files
                      there come from the fuzzer itself, see tests/fuzz/README.md).
"""
import math
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as T

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS, COLS = 8, 256

# key -> (type, value, sub_type). Values chosen to hit sign bits and extremes of each width.
META = [
    ("test.u8", T.UINT8, 200, None),
    ("test.i8", T.INT8, -100, None),
    ("test.u16", T.UINT16, 65000, None),
    ("test.i16", T.INT16, -32000, None),
    ("test.u32", T.UINT32, 4000000000, None),
    ("test.i32", T.INT32, -2000000000, None),
    ("test.f32", T.FLOAT32, 1.5, None),
    ("test.bool_true", T.BOOL, True, None),
    ("test.bool_false", T.BOOL, False, None),
    ("test.string", T.STRING, "h\u00e9llo, gguf", None),
    ("test.empty_string", T.STRING, "", None),
    ("test.u64", T.UINT64, 18000000000000000000, None),
    ("test.i64", T.INT64, -9000000000000000000, None),
    ("test.f64", T.FLOAT64, -2.25e100, None),
    ("test.arr_u8", T.ARRAY, [0, 1, 255], T.UINT8),
    ("test.arr_i8", T.ARRAY, [-128, 0, 127], T.INT8),
    ("test.arr_u16", T.ARRAY, [0, 65535], T.UINT16),
    ("test.arr_i16", T.ARRAY, [-32768, 32767], T.INT16),
    ("test.arr_u32", T.ARRAY, [1, 2, 3, 4294967295], T.UINT32),
    ("test.arr_i32", T.ARRAY, [-1, 0, 1], T.INT32),
    ("test.arr_f32", T.ARRAY, [0.5, -0.25, 3.0], T.FLOAT32),
    ("test.arr_bool", T.ARRAY, [True, False, True], T.BOOL),
    ("test.arr_str", T.ARRAY, ["alpha", "", "gamma"], T.STRING),
    ("test.arr_u64", T.ARRAY, [18446744073709551615, 7], T.UINT64),
    ("test.arr_i64", T.ARRAY, [-9223372036854775808, 9223372036854775807], T.INT64),
    ("test.arr_f64", T.ARRAY, [1e-300, -1e300], T.FLOAT64),
    ("test.nested", T.ARRAY, [[1, 2], [3], [4, 5, 6]], None),            # array of arrays of i32
    ("test.nested_str", T.ARRAY, [["a", "bc"], ["def"]], None),          # array of arrays of strings
    ("test.vocab", T.ARRAY, ["tok%d" % i for i in range(300)], T.STRING),  # long: info summarizes
]


def add_meta(w):
    for key, typ, val, sub in META:
        w.add_key_value(key, val, typ, sub_type=sub)


def write_meta(path, endian):
    w = gguf.GGUFWriter(path, "testarch", endianess=endian)
    w.add_custom_alignment(64)
    add_meta(w)
    rng = np.random.default_rng(1)
    # Tensors of 1..4 dimensions; numpy shape is reversed GGUF order (ne0 last).
    w.add_tensor("t1.f32", rng.standard_normal(16).astype(np.float32))
    w.add_tensor("t2.f16", rng.standard_normal((3, 8)).astype(np.float16))
    w.add_tensor("t3.i32", np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4))
    w.add_tensor("t4.f32", np.arange(2 * 1 * 3 * 2, dtype=np.float32).reshape(2, 1, 3, 2))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def f16_field(rng, n):
    """Random positive float16 scales, small enough that sums stay far from overflow."""
    return (rng.uniform(0.002, 0.02, n) * rng.choice([-1.0, 1.0], n)).astype(np.float16).view(np.uint8).reshape(n, 2)


# Kinds the package cannot quantize get random bytes, with their f16 scale field(s) (byte offset
# inside the block) replaced by sane values: random bytes there would be Inf/NaN/1e4 scales.
F16_FIELDS = {
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
    Q.IQ2_XXS: [0], Q.IQ2_XS: [0], Q.IQ2_S: [0], Q.IQ3_XXS: [0], Q.IQ3_S: [0], Q.IQ1_S: [0],
    Q.IQ4_NL: [0], Q.IQ4_XS: [0],
}


def make_blocks(kind, rng):
    """Bytes of a ROWS x COLS tensor of `kind` (uint8, shape ROWS x row_bytes)."""
    be, bb = gguf.GGML_QUANT_SIZES[kind]
    nb = ROWS * COLS // be
    w = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    if kind == Q.F32:
        return w.view(np.uint8)
    if kind == Q.F16:
        return w.astype(np.float16).view(np.uint8)
    try:
        return gguf.quants.quantize(w, kind)
    except NotImplementedError:
        pass
    b = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    for off in F16_FIELDS.get(kind, []):
        b[:, off:off + 2] = f16_field(rng, nb)
    if kind == Q.IQ1_M:
        # The block scale is an f16 spread over the top nibbles of the four u16 scales (bytes
        # 48..55); bit 14 of the last u16 is the f16's top exponent bit: clear it (|d| < 2).
        b[:, 55] &= 0xBF
    if kind == Q.NVFP4:
        b[:, 0:4] = rng.integers(0x20, 0x40, size=(nb, 4), dtype=np.uint8)  # ue4m3 scales ~0.01..1
    return b.reshape(ROWS, -1)


def write_kinds(path):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(COLS).astype(np.float32)
    x.tofile(os.path.join(HERE, "kinds_x.f32"))
    ydir = os.path.join(HERE, "kinds_y")
    os.makedirs(ydir, exist_ok=True)
    w = gguf.GGUFWriter(path, "testkinds")
    kinds = []
    for kind in Q:
        if kind in (Q.Q8_1, Q.Q8_K, Q.I8, Q.I16, Q.I32, Q.I64, Q.F64):
            continue  # activation and plain data kinds: not weights
        blocks = make_blocks(kind, rng)
        try:
            deq = gguf.quants.dequantize(blocks, kind)
        except NotImplementedError:
            print("skip %s: the gguf package cannot dequantize it" % kind.name, file=sys.stderr)
            continue
        deq = np.asarray(deq, dtype=np.float32).reshape(ROWS, COLS)
        assert np.all(np.isfinite(deq)), kind.name
        # Exactly rounded (math.fsum), not BLAS, whose summation order depends on the machine:
        # CI regenerates these files and fails on any byte that differs.
        d64, x64 = deq.astype(np.float64), x.astype(np.float64)
        y = np.array([math.fsum(d64[r] * x64) for r in range(ROWS)]).astype(np.float32)
        y.tofile(os.path.join(ydir, kind.name + ".f32"))
        # sum_c |W[r][c] x[c]| per row: the scale a tolerance is relative to (a float32
        # accumulation's rounding grows with it, not with |y|, which may cancel to ~0).
        scale = np.array([math.fsum(np.abs(d64[r] * x64)) for r in range(ROWS)]).astype(np.float32)
        scale.tofile(os.path.join(ydir, kind.name + ".scale.f32"))
        # sqrt(sum_c W[r][c]^2) per row: the size of the error of a path that quantizes x to 8
        # bits first (llama.cpp-style Q8_0/Q8_K/Q8_1 activations): rounding moves each x[c] by
        # up to d/2, d = max|x|/127, roughly uniformly, so y[r] moves by about
        # l2w[r] * d / sqrt(12) (one sigma).
        l2w = np.sqrt([math.fsum(d64[r] ** 2) for r in range(ROWS)]).astype(np.float32)
        l2w.tofile(os.path.join(ydir, kind.name + ".l2w.f32"))
        w.add_tensor(kind.name, blocks, raw_dtype=kind)
        kinds.append(kind.name)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(os.path.join(HERE, "kinds_list.txt"), "w") as f:
        f.write("\n".join(kinds) + "\n")


def write_corpus():
    cdir = os.path.join(HERE, "..", "fuzz", "corpus")
    os.makedirs(cdir, exist_ok=True)
    for name in ("meta_all.gguf", "meta_all_be.gguf"):
        with open(os.path.join(HERE, name), "rb") as f:
            data = f.read()
        with open(os.path.join(cdir, name), "wb") as f:
            f.write(data)
    # kinds.gguf is large for a seed; a header-only cut keeps its tensor infos.
    with open(os.path.join(HERE, "kinds.gguf"), "rb") as f:
        data = f.read()
    with open(os.path.join(cdir, "kinds_head.gguf"), "wb") as f:
        f.write(data[:4096])
    # One tiny tensor of a quantized kind, whole.
    w = gguf.GGUFWriter(os.path.join(cdir, "tiny_q4_0.gguf"), "t")
    w.add_tensor("w", gguf.quants.quantize(np.ones((1, 32), np.float32), Q.Q4_0), raw_dtype=Q.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    write_meta(os.path.join(HERE, "meta_all.gguf"), gguf.GGUFEndian.LITTLE)
    write_meta(os.path.join(HERE, "meta_all_be.gguf"), gguf.GGUFEndian.BIG)
    write_kinds(os.path.join(HERE, "kinds.gguf"))
    write_corpus()


if __name__ == "__main__":
    main()
