#!/usr/bin/env python3
"""Load a file written by our GGUF writer (tests/test_gguf_write.c, write_fresh) with the gguf
package's GGUFReader, an independent reader, and check every value and tensor it holds.

    python3 tests/gguf/check_writer.py FILE.gguf     # exit 0 when everything matches

Keep EXPECT in step with write_fresh() in tests/test_gguf_write.c."""
import sys

import numpy as np

from gguf import GGUFReader, GGUFValueType as T

EXPECT = {
    "w.u8": (T.UINT8, 250),
    "w.i8": (T.INT8, -7),
    "w.u16": (T.UINT16, 60000),
    "w.i16": (T.INT16, -30000),
    "w.u32": (T.UINT32, 4000000001),
    "w.i32": (T.INT32, -123456789),
    "w.f32": (T.FLOAT32, 0.375),
    "w.bool": (T.BOOL, True),
    "w.u64": (T.UINT64, 17000000000000000001),
    "w.i64": (T.INT64, -8000000000000000001),
    "w.f64": (T.FLOAT64, 1.0e-200),
    "w.str": (T.STRING, "backplane \u2713"),
    "w.arr_i32": (T.ARRAY, [3, -1, 4, -1, 5]),
    "w.arr_f32": (T.ARRAY, [0.5, 1.5]),
    "w.arr_str": (T.ARRAY, ["x", "", "yz"]),
    "general.alignment": (T.UINT32, 64),
}


def main(path):
    r = GGUFReader(path)
    bad = []
    keys = [f.name for f in r.fields.values()]
    for key, (typ, want) in EXPECT.items():
        f = r.fields.get(key)
        if f is None:
            bad.append("missing key %s" % key)
            continue
        if f.types[0] != typ:
            bad.append("%s: type %s, want %s" % (key, f.types[0].name, typ.name))
            continue
        got = f.contents()
        if isinstance(want, float):
            ok = got == np.float32(want) if typ == T.FLOAT32 else got == want
        else:
            ok = got == want
        if not ok:
            bad.append("%s: %r, want %r" % (key, got, want))
    extra = {k for k in keys if not k.startswith("GGUF.")} - set(EXPECT)  # GGUF.* are its header fields
    if extra:
        bad.append("unexpected keys %s" % sorted(extra))
    if r.alignment != 64:
        bad.append("alignment %d" % r.alignment)
    tensors = {t.name: t for t in r.tensors}
    # w.f32: 3 rows x 4 columns holding 0..11; w.q8: the Q8_0 block bytes 0..33 repeated twice.
    t = tensors.get("w.f32")
    if t is None or t.tensor_type.name != "F32" or list(t.shape) != [4, 3] or \
            not np.array_equal(np.asarray(t.data).ravel(), np.arange(12, dtype=np.float32)):
        bad.append("tensor w.f32 wrong: %r" % (None if t is None else (t.tensor_type.name, list(t.shape))))
    t = tensors.get("w.q8")
    if t is None or t.tensor_type.name != "Q8_0" or list(t.shape) != [32, 2] or \
            not np.array_equal(np.asarray(t.data).view(np.uint8).ravel(), np.tile(np.arange(34, dtype=np.uint8), 2)):
        bad.append("tensor w.q8 wrong")
    if len(tensors) != 2:
        bad.append("%d tensors" % len(tensors))
    for b in bad:
        print("check_writer: " + b, file=sys.stderr)
    if not bad:
        print("check_writer: %s loads in GGUFReader: %d keys, %d tensors match" % (path, len(keys), len(tensors)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
