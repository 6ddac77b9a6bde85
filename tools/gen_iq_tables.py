#!/usr/bin/env python3
"""Generate src/kinds/iq_tables.h: the grid, sign and value tables of the IQ weight kinds.

Source of the facts: the `gguf` Python package (llama.cpp's GGUF library, the same package the
dequantization tests are judged against). gguf.quants stores each grid as a hex string with
every grid value packed into a few bits (an index into the class's `grid_map`), plus the IQ2
sign table `ksigns`, the IQ4_NL values `kvalues` and the IQ1 `delta`. This script unpacks them
into the plain form ggml-common.h publishes (one byte per grid value, lowest byte = first
element), so kernels index them the usual way.

Optional cross-check: --check-ggml-common FILE parses ggml's ggml-common.h and fails unless
every table here equals ggml's (e.g. `git -C /work/.mirror/ggml-org+ggml/repo show
HEAD:src/ggml-common.h > /tmp/ggml-common.h`). Two independent publications of the same facts
agreeing is what makes a one-byte typo in a 2048-entry table impossible to ship.

Regenerate:  python3 tools/gen_iq_tables.py > src/kinds/iq_tables.h
Check:       python3 tools/gen_iq_tables.py --check-ggml-common /tmp/ggml-common.h > /dev/null

Output format contract (the CUDA backend includes the header under nvcc; the Vulkan build
script parses it with a regex to emit GLSL arrays): every table is one
    BP_TABLE(type, name, count) = { literal, literal, ... };
declaration with plain decimal or hex literals, and every scalar constant one #define.
"""
import argparse
import re
import sys

import gguf.quants as gq

# name in backplane, gguf class, C type, bytes per grid value
GRIDS = [
    ("bp_iq2xxs_grid", gq.IQ2_XXS, "uint64_t"),
    ("bp_iq2xs_grid", gq.IQ2_XS, "uint64_t"),
    ("bp_iq2s_grid", gq.IQ2_S, "uint64_t"),
    ("bp_iq3xxs_grid", gq.IQ3_XXS, "uint32_t"),
    ("bp_iq3s_grid", gq.IQ3_S, "uint32_t"),
    ("bp_iq1s_grid", gq.IQ1_S, "uint64_t"),
]
# ggml-common.h's names for the cross-check
GGML_NAMES = {
    "bp_iq2xxs_grid": "iq2xxs_grid",
    "bp_iq2xs_grid": "iq2xs_grid",
    "bp_iq2s_grid": "iq2s_grid",
    "bp_iq3xxs_grid": "iq3xxs_grid",
    "bp_iq3s_grid": "iq3s_grid",
    "bp_iq1s_grid": "iq1s_grid",
    "bp_ksigns_iq2xs": "ksigns_iq2xs",
    "bp_kmask_iq2xs": "kmask_iq2xs",
    "bp_kvalues_iq4nl": "kvalues_iq4nl",
}


def unpack_grid(cls):
    """Rows of grid values (as the numbers in grid_map) from the class's packed hex string.

    Mirrors gguf's own init_grid: two hex digits make one byte; each byte holds 8//bits values
    in equal fields, lowest first (so 3-bit indices sit in 4-bit fields); each value is an
    index into grid_map."""
    n_rows, n_cols = cls.grid_shape
    nmap = len(cls.grid_map)
    bits = max(1, (nmap - 1).bit_length())
    per_byte = 8 // bits
    raw = bytes.fromhex(cls.grid_hex.decode("ascii"))
    vals = []
    for byte in raw:
        for k in range(per_byte):
            vals.append(cls.grid_map[(byte >> (k * (8 // per_byte))) & ((1 << bits) - 1)])
    assert len(vals) == n_rows * n_cols, (cls.__name__, len(vals))
    return [vals[r * n_cols:(r + 1) * n_cols] for r in range(n_rows)]


def pack_row(row):
    """One grid row as an integer: element j in byte j (little end first), values as int8."""
    v = 0
    for j, x in enumerate(row):
        v |= (int(x) & 0xFF) << (8 * j)
    return v


def build():
    tables = []  # (ctype, name, values, hex_digits or 0 for decimal)
    for name, cls, ctype in GRIDS:
        rows = unpack_grid(cls)
        digits = 16 if ctype == "uint64_t" else 8
        tables.append((ctype, name, [pack_row(r) for r in rows], digits))
    ksigns = list(gq.IQ2_XXS.ksigns)
    assert len(ksigns) == 128
    tables.append(("uint8_t", "bp_ksigns_iq2xs", ksigns, 0))
    tables.append(("uint8_t", "bp_kmask_iq2xs", [1 << j for j in range(8)], 0))
    tables.append(("int8_t", "bp_kvalues_iq4nl", list(gq.IQ4_NL.kvalues), 0))
    assert float(gq.IQ1_S.delta) == 0.125 and float(gq.IQ1_M.delta) == 0.125
    defines = [
        ("BP_IQ1S_DELTA", "0.125f", "IQ1_S: every grid value is shifted by +-delta (qh bit 15)"),
        ("BP_IQ1M_DELTA", "0.125f", "IQ1_M: the same shift, one sign bit per group of 8"),
    ]
    return tables, defines


def parse_ggml_common(path):
    text = open(path).read()
    out = {}
    pat = re.compile(r"GGML_TABLE_BEGIN\((\w+),\s*(\w+),\s*(\w+)\)(.*?)GGML_TABLE_END\(\)", re.S)
    for m in pat.finditer(text):
        name = m.group(2)
        if name in out:  # the first (C) definition; later ones are GPU variants
            continue
        nums = re.findall(r"-?0x[0-9a-fA-F]+|-?\d+", m.group(4))
        out[name] = [int(x, 0) for x in nums]
    return out


def check_against_ggml(tables, path):
    ggml = parse_ggml_common(path)
    bad = 0
    for ctype, name, values, _ in tables:
        ref = ggml.get(GGML_NAMES[name])
        if ref is None:
            print(f"check: {GGML_NAMES[name]} not found in {path}", file=sys.stderr)
            bad += 1
            continue
        if ref != values:
            diff = sum(1 for a, b in zip(ref, values) if a != b) + abs(len(ref) - len(values))
            print(f"check: {name} differs from ggml's {GGML_NAMES[name]} in {diff} entries",
                  file=sys.stderr)
            bad += 1
        else:
            print(f"check: {name} == ggml {GGML_NAMES[name]} ({len(values)} entries)",
                  file=sys.stderr)
    if bad:
        sys.exit(1)


def fmt(v, digits):
    return f"0x{v:0{digits}x}" if digits else str(v)


def emit(tables, defines, out):
    w = out.write
    w("/* GENERATED by tools/gen_iq_tables.py -- do not edit; regenerate with\n"
      " *     python3 tools/gen_iq_tables.py > src/kinds/iq_tables.h\n"
      " *\n"
      " * Grid, sign and value tables of the IQ weight kinds (IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S\n"
      " * IQ1_S IQ1_M IQ4_NL IQ4_XS). Source: the `gguf` Python package (gguf.quants: the grids'\n"
      " * packed hex strings, IQ2_XXS.ksigns, IQ4_NL.kvalues, IQ1_S.delta), unpacked to the layout\n"
      " * ggml-common.h publishes: one byte per grid value, element j in byte j (lowest first);\n"
      " * IQ1_S grid bytes are int8 (0xff = -1). The script's --check-ggml-common option verifies\n"
      " * every table equals ggml-common.h's.\n"
      " *\n"
      " * Format contract: also included by the CUDA backend (nvcc) and regex-parsed by the Vulkan\n"
      " * build script, so every table is exactly one BP_TABLE(type, name, count) = { ... };\n"
      " * with plain literals, and every scalar a #define. Define BP_TABLE before including to\n"
      " * change the storage class (e.g. __device__ for CUDA).\n"
      " */\n")
    w("#ifndef BP_IQ_TABLES_H\n#define BP_IQ_TABLES_H\n\n#include <stdint.h>\n\n")
    w("#ifndef BP_TABLE\n#define BP_TABLE(type, name, count) static const type name[count]\n#endif\n\n")
    for name, value, why in defines:
        w(f"/* {why} */\n#define {name} {value}\n")
    w("\n")
    for ctype, name, values, digits in tables:
        w(f"BP_TABLE({ctype}, {name}, {len(values)}) = {{\n")
        per_line = 4 if digits == 16 else 8 if digits == 8 else 16
        for i in range(0, len(values), per_line):
            w("    " + ", ".join(fmt(v, digits) for v in values[i:i + per_line]) + ",\n")
        w("};\n\n")
    w("#endif\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check-ggml-common", metavar="FILE",
                    help="fail unless every table equals ggml-common.h's")
    args = ap.parse_args()
    tables, defines = build()
    if args.check_ggml_common:
        check_against_ggml(tables, args.check_ggml_common)
    emit(tables, defines, sys.stdout)


if __name__ == "__main__":
    main()
