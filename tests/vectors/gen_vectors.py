#!/usr/bin/env python3
"""Generate the committed kind test vectors in tests/vectors/.

Regenerate (from the repository root; needs numpy and the `gguf` PyPI package, version noted
in every file header):

    python3 tests/vectors/gen_vectors.py            # rewrites tests/vectors/*.bin
    python3 tests/vectors/gen_vectors.py --check    # regenerates in memory, fails on any diff

The output is deterministic (fixed seeds, no dict-order or time dependence), so a rerun with the
same numpy/gguf versions reproduces the committed bytes exactly.

The kinds come from include/backplane_kinds.def (parsed here, never retyped), so a kind added there
without vectors makes tests/test_kinds_dequant.c fail.

Files (all little-endian). Every file starts with a 64-byte header:
    char     magic[4]      "BPDQ" dequant, "BPQZ" quantize, "BPMM" matmul
    uint32   version       1
    uint32   kind          GGUF type id
    uint32   a, b, c       dequant/quantize: nblocks, block_bytes, block_elems
                           matmul: rows, cols, t
    char     source[40]    which implementation produced the expected values, NUL padded:
                           "gguf <ver> dequantize", "gguf <ver> quantize",
                           "numpy layout reference", "numpy float64"
  dequant_<KIND>.bin : header, nblocks*block_bytes block bytes, nblocks*block_elems float32
  quant_<KIND>.bin   : header, nblocks*block_elems float32 inputs, nblocks*block_bytes expected
  matmul_<KIND>.bin  : header, rows*(cols/block_elems)*block_bytes W bytes, t*cols float32 X,
                       t*rows float64 Y = X W^T, t*rows float64 A = |X| |W|^T (for the error
                       bound), all from the gguf-dequantized W computed in float64.

Random blocks: every byte random, then each kind's scale fields overwritten with finite values
of sane magnitude (f16 scales, Q8_K's f32 scale, MXFP4's e8m0 exponent, NVFP4's ue4m3 scales,
IQ1_M's f16 split over four nibbles). Any other bits are valid for every kind (IQ grid indices
cover their whole range). The generator checks its own scale offsets: with the scale fields
zeroed, every kind whose value is scale * something must dequantize to all zeros.

Kinds the gguf package cannot dequantize (Q8_1, Q8_K, Q1_0, Q2_0 and the plain data kinds
I8..F64) get an independent NumPy reference written here from the published block layout
(ggml-common.h / ggml-quants.c facts), and the header says so.
"""
import math
import os
import re
import struct
import sys

import numpy as np

import gguf
from gguf import quants as gq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "vectors")
VERSION = 1
GGUF_VER = getattr(gguf, "__version__", None)
if GGUF_VER is None:
    from importlib.metadata import version as _v
    GGUF_VER = _v("gguf")


def parse_kinds():
    rows = []
    pat = re.compile(r"^\s*BP_KIND\(\s*(\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*([WAD])\s*,\s*([01])\s*\)")
    with open(os.path.join(ROOT, "include", "backplane_kinds.def")) as f:
        for line in f:
            m = pat.match(line)
            if m:
                name, gid, be, bb, role, q = m.groups()
                rows.append(dict(name=name, id=int(gid), be=int(be), bb=int(bb), role=role, quant=int(q)))
    return rows


def header(magic, kind_id, a, b, c, source):
    src = source.encode()
    assert len(src) < 40
    return magic + struct.pack("<5I", VERSION, kind_id, a, b, c) + src.ljust(40, b"\0")


# ---- scale fields --------------------------------------------------------------------------

# (offset, type) of each scale field, facts of the ggml block layouts.
F16 = "f16"
SCALES = {
    "Q4_0": [(0, F16)], "Q4_1": [(0, F16), (2, F16)], "Q5_0": [(0, F16)], "Q5_1": [(0, F16), (2, F16)],
    "Q8_0": [(0, F16)], "Q8_1": [(0, F16), (2, F16)],
    "Q2_K": [(80, F16), (82, F16)], "Q3_K": [(108, F16)], "Q4_K": [(0, F16), (2, F16)],
    "Q5_K": [(0, F16), (2, F16)], "Q6_K": [(208, F16)], "Q8_K": [(0, "f32")],
    "IQ2_XXS": [(0, F16)], "IQ2_XS": [(0, F16)], "IQ3_XXS": [(0, F16)], "IQ1_S": [(0, F16)],
    "IQ4_NL": [(0, F16)], "IQ3_S": [(0, F16)], "IQ2_S": [(0, F16)], "IQ4_XS": [(0, F16)],
    "IQ1_M": [(48, "iq1m")], "TQ1_0": [(52, F16)], "TQ2_0": [(64, F16)],
    "MXFP4": [(0, "e8m0")], "NVFP4": [(0, "ue4m3"), (1, "ue4m3"), (2, "ue4m3"), (3, "ue4m3")],
    "Q1_0": [(0, F16)], "Q2_0": [(0, F16)],
}


def rand_f16_bits(rng):
    # sign random, exponent 0..17 (|d| up to 2^2, subnormals included), mantissa random
    return (int(rng.integers(0, 2)) << 15) | (int(rng.integers(0, 18)) << 10) | int(rng.integers(0, 1024))


def set_scales(blk, name, rng, zero=False):
    for off, typ in SCALES.get(name, []):
        if typ == F16:
            blk[off:off + 2] = np.frombuffer(struct.pack("<H", 0 if zero else rand_f16_bits(rng)), np.uint8)
        elif typ == "f32":
            v = 0.0 if zero else float(rng.choice([-1, 1]) * rng.uniform(1e-4, 1e-1))
            blk[off:off + 4] = np.frombuffer(struct.pack("<f", v), np.uint8)
        elif typ == "e8m0":
            # 0 and 1 take the subnormal branch of e8m0 -> float; keep those covered
            blk[off] = int(rng.choice([0, 1, int(rng.integers(100, 150)), int(rng.integers(100, 150))]))
        elif typ == "ue4m3":
            blk[off] = 0 if zero else int(rng.integers(0, 0x7f))  # 0x7f (NaN) excluded
        elif typ == "iq1m":
            # the f16 scale lives in the top nibble of the four uint16 scale words
            h = 0 if zero else rand_f16_bits(rng)
            for k in range(4):
                w = struct.unpack_from("<H", blk.tobytes(), off + 2 * k)[0]
                w = (w & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12)
                blk[off + 2 * k:off + 2 * k + 2] = np.frombuffer(struct.pack("<H", w), np.uint8)
        else:
            raise ValueError(typ)


# ---- layout references (kinds the package cannot dequantize) --------------------------------

def f16_at(blocks, off):
    return blocks[:, off:off + 2].copy().view(np.float16).astype(np.float32)  # (n, 1)


def ref_q8_1(blocks):
    # 36 B: f16 d, f16 s (= d * sum q, unused by dequantization), 32 x int8; x = d * q
    return f16_at(blocks, 0) * blocks[:, 4:36].copy().view(np.int8).astype(np.float32)


def ref_q8_k(blocks):
    # 292 B: f32 d, 256 x int8, 16 x int16 bsums (unused by dequantization); x = d * q
    d = blocks[:, 0:4].copy().view(np.float32)
    return d * blocks[:, 4:260].copy().view(np.int8).astype(np.float32)


def ref_q1_0(blocks):
    # 18 B: f16 d, 128 bits (element j = bit j%8 of byte j/8); x = bit ? d : -d
    d = f16_at(blocks, 0)
    bits = np.unpackbits(blocks[:, 2:18], axis=1, bitorder="little").astype(bool)
    return np.where(bits, d, -d).astype(np.float32)


def ref_q2_0(blocks):
    # 18 B: f16 d, 64 x 2 bits (element j = bits 2*(j%4).. of byte j/4); x = (q - 1) * d
    d = f16_at(blocks, 0)
    qs = blocks[:, 2:18]
    q = np.stack([(qs >> s) & 3 for s in (0, 2, 4, 6)], axis=2).reshape(len(blocks), 64)
    return (q.astype(np.int32) - 1).astype(np.float32) * d


PLAIN = {"I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64, "F64": np.float64}
LAYOUT_REFS = {"Q8_1": ref_q8_1, "Q8_K": ref_q8_k, "Q1_0": ref_q1_0, "Q2_0": ref_q2_0}


def qtype_of(name):
    return getattr(gguf.GGMLQuantizationType, name, None)


def package_can_dequant(name):
    t = qtype_of(name)
    if t is None:
        return False
    return t in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) or t in gq._type_traits


def package_can_quant(name):
    t = qtype_of(name)
    if t is None:
        return False
    if t in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        return True
    q = gq._type_traits.get(t)
    return q is not None and "quantize_blocks" in q.__dict__


def dequant(k, blocks):
    """(expected float32 values, source string) for an (n, block_bytes) uint8 array."""
    name = k["name"]
    if name in LAYOUT_REFS:
        return LAYOUT_REFS[name](blocks).reshape(-1).astype(np.float32), "numpy layout reference"
    if name in PLAIN:
        with np.errstate(over="ignore"):  # random F64 bits past float range become inf, as in C
            return blocks.reshape(-1).copy().view(PLAIN[name]).astype(np.float32), "numpy layout reference"
    if package_can_dequant(name):
        out = gq.dequantize(blocks.reshape(-1).copy(), qtype_of(name))
        return np.asarray(out, dtype=np.float32).reshape(-1), f"gguf {GGUF_VER} dequantize"
    raise SystemExit(f"gen_vectors: no reference for kind {name}: add a layout reference")


def random_blocks(k, n, rng):
    blocks = rng.integers(0, 256, size=(n, k["bb"]), dtype=np.uint8)
    for i in range(n):
        set_scales(blocks[i], k["name"], rng)
    return blocks


def self_check_offsets(k, rng):
    """Zeroed scale fields must give all-zero output: catches a wrong offset in SCALES."""
    name = k["name"]
    if name not in SCALES or name == "MXFP4":  # e8m0 has no zero
        return
    blocks = rng.integers(0, 256, size=(4, k["bb"]), dtype=np.uint8)
    for i in range(4):
        set_scales(blocks[i], name, rng, zero=True)
    vals, _ = dequant(k, blocks)
    assert np.all(vals == 0), f"{name}: zeroed scales give nonzero values: scale offsets wrong"


def special_floats():
    s = [0.0, -0.0, 1.0, -1.0, 65504.0, 65520.0, 65519.996, 65536.0, 1e30, -1e30,
         2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -26, 2.0 ** -149, 2.0 ** -126,
         3.4028235e38, 1.0009765625, 1.00048828125, 1.000732421875, 1.00146484375,
         1.00390625, 1.001953125, 1.005859375, 0.333333333]
    bits = list(np.array(s, dtype=np.float32).view(np.uint32))
    bits += [0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff, 0x7fffffff,
             0xff800001, 0x7f802000, 0x7f7fffff, 0x7f7f8000, 0x7f7f7fff, 0x00000001, 0x80000001,
             0x007fffff, 0x00008000, 0x00018000, 0x3f808000, 0x3f818000, 0x3f80c000]
    return np.array(bits, dtype=np.uint32)


def dequant_blocks_for(k, rng):
    name = k["name"]
    if name == "F16" or name == "BF16":
        return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.uint8).reshape(-1, 2)  # exhaustive
    if name == "F32":
        u = np.concatenate([special_floats(), rng.integers(0, 2 ** 32, size=1024, dtype=np.uint64).astype(np.uint32)])
        return u.view(np.uint8).reshape(-1, 4)
    if name in PLAIN:
        n = 256 if k["be"] == 1 else 4
        raw = rng.integers(0, 256, size=(n, k["bb"]), dtype=np.uint8)
        if name == "F64":  # mix random bits with ordinary values
            # Powers of ten parsed, not computed: NumPy's vectorized `**` differs by an ulp
            # between releases and CPUs (2.4 changed 5 of these), which made this file stale.
            normal = rng.standard_normal(n // 2)
            tens = np.array([float(f"1e{e}") for e in rng.integers(-40, 40, n // 2)])
            vals = normal * tens
            raw[: n // 2] = vals.astype(np.float64).view(np.uint8).reshape(-1, 8)
        return raw
    nblocks = 8 if k["be"] <= 64 else 4
    return random_blocks(k, nblocks, rng)


def write(path, data, check, stale):
    if check:
        with open(path, "rb") as f:
            if f.read() != data:
                stale.append(os.path.basename(path))
        return
    with open(path, "wb") as f:
        f.write(data)


# ---- quantize inputs --------------------------------------------------------------------------

def quant_inputs(k, rng):
    be = k["be"]
    if be == 1:  # F32 / F16 / BF16: specials, random bits, ordinary values
        u = np.concatenate([special_floats(),
                            rng.integers(0, 2 ** 32, size=512, dtype=np.uint64).astype(np.uint32),
                            (rng.standard_normal(512) * 10.0 ** rng.integers(-8, 6, 512)).astype(np.float32).view(np.uint32)])
        return u.view(np.float32)
    nb = 8 if be <= 64 else 4
    x = rng.standard_normal((nb, be)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-3, 2, size=(nb, 1))).astype(np.float32)
    x[1] = rng.uniform(-1, 1, be).astype(np.float32)
    x[2, rng.integers(0, be)] *= 50.0  # an outlier
    x[3] = 0.0  # an all-zero block
    if nb > 4:
        x[4] = np.abs(x[4])  # all positive: min/max kinds with a positive minimum
        x[5] = np.round(x[5] * 4) / 4  # many exact ties
    return x.reshape(-1).astype(np.float32)


# ---- main -----------------------------------------------------------------------------------

MATMUL = [("F16", 13, 32), ("BF16", 7, 48), ("Q4_0", 13, 96), ("Q5_1", 7, 64), ("Q8_0", 13, 64),
          ("Q4_K", 7, 512), ("Q6_K", 13, 256), ("IQ4_XS", 7, 256), ("IQ2_XXS", 13, 256),
          ("MXFP4", 7, 96), ("TQ2_0", 7, 256)]


def main():
    check = "--check" in sys.argv[1:]
    kinds = parse_kinds()
    by_name = {k["name"]: k for k in kinds}
    stale = []
    summary = {"gguf": [], "layout": []}
    for k in kinds:
        rng = np.random.default_rng(0xB9 + 1000 * k["id"])
        self_check_offsets(k, rng)
        blocks = dequant_blocks_for(k, rng)
        vals, source = dequant(k, blocks)
        if k["role"] in "WA" and k["name"] not in ("F32", "F16", "BF16"):
            assert np.all(np.isfinite(vals)), f"{k['name']}: non-finite values from finite scales"
        assert vals.size == blocks.shape[0] * k["be"]
        summary["gguf" if source.startswith("gguf") else "layout"].append(k["name"])
        data = header(b"BPDQ", k["id"], blocks.shape[0], k["bb"], k["be"], source) + blocks.tobytes() + vals.astype("<f4").tobytes()
        write(os.path.join(OUT, f"dequant_{k['name']}.bin"), data, check, stale)

        if k["role"] in "WA" and package_can_quant(k["name"]):
            x = quant_inputs(k, rng)
            with np.errstate(all="ignore"):
                q = np.asarray(gq.quantize(x.reshape(1, -1), qtype_of(k["name"]))).view(np.uint8).reshape(-1)
            nb = x.size // k["be"]
            assert q.size == nb * k["bb"], (k["name"], q.size)
            data = header(b"BPQZ", k["id"], nb, k["bb"], k["be"], f"gguf {GGUF_VER} quantize") + x.astype("<f4").tobytes() + q.tobytes()
            write(os.path.join(OUT, f"quant_{k['name']}.bin"), data, check, stale)

    for name, rows, cols in MATMUL:
        k = by_name[name]
        rng = np.random.default_rng(0x5EED + k["id"])
        assert cols % k["be"] == 0
        nb = rows * cols // k["be"]
        if k["be"] == 1:  # finite weights of ordinary size
            w = rng.standard_normal(rows * cols).astype(np.float32)
            blocks = np.asarray(gq.quantize(w.reshape(rows, cols), qtype_of(name))).view(np.uint8).reshape(nb, k["bb"])
        else:
            blocks = random_blocks(k, nb, rng)
        wd, source = dequant(k, blocks)
        assert source.startswith("gguf"), name
        wd = wd.reshape(rows, cols).astype(np.float64)
        t = 3
        x = rng.standard_normal((t, cols)).astype(np.float32)
        # Exactly rounded sums (math.fsum; each product of two float32 values is exact in
        # float64), not BLAS: a BLAS dot product's summation order depends on the machine and
        # its thread count, so `--check` failed on a machine other than the one that wrote the
        # files (last-bit differences in 8 of the 11 files).
        xd = x.astype(np.float64)
        y = np.array([[math.fsum(xd[i] * wd[r]) for r in range(rows)] for i in range(t)])
        a = np.array([[math.fsum(np.abs(xd[i]) * np.abs(wd[r])) for r in range(rows)] for i in range(t)])
        data = (header(b"BPMM", k["id"], rows, cols, t, "numpy float64") + blocks.tobytes()
                + x.astype("<f4").tobytes() + y.astype("<f8").tobytes() + a.astype("<f8").tobytes())
        write(os.path.join(OUT, f"matmul_{name}.bin"), data, check, stale)

    print("dequant vs gguf package:", " ".join(summary["gguf"]))
    print("dequant vs layout reference:", " ".join(summary["layout"]))
    if check:
        if stale:
            print("stale vector files:", " ".join(stale))
            return 1
        print("all vector files up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
