"""Errors, the version, the kind table and the reference (de)quantizers."""
import ctypes
import operator
from dataclasses import dataclass

import numpy as np

from ._lib import lib, f32p


class Error(Exception):
    """A backplane call failed: status is the bp_status name ("BP_E_FORMAT"), code its value, and
    the message is the C library's bp_last_error() text for that failure."""

    def __init__(self, code, message):
        self.code = int(code)
        self.status = lib.bp_status_name(self.code).decode()
        self.message = message
        super().__init__(f"{message} ({self.status})" if message else self.status)


def check(code):
    """Raise Error carrying bp_last_error() when a bp_status is not BP_OK."""
    if code != 0:
        raise Error(code, lib.bp_last_error().decode("utf-8", "replace"))


def fail_null(ptr, code):
    """Lookups that return a pointer record an error and return NULL: raise it with the status
    the C function documents for that case (BP_E_KIND = 2, BP_E_NOT_FOUND = 9)."""
    if not ptr:
        raise Error(code, lib.bp_last_error().decode("utf-8", "replace"))
    return ptr


class Handle:
    """A C object a Python object owns: released once, by free(), at the end of a `with` block, or
    by garbage collection. Subclasses name the C function that releases it (_free_fn)."""
    _h = None
    _free_fn = None
    _what = "object"

    def free(self):
        if self._h:
            type(self)._free_fn(self._h)
            self._h = None

    def __del__(self):
        self.free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def _handle(self):
        if not self._h:
            raise ValueError(f"{self._what} is freed")
        return self._h


# The C integer types the binding passes, and their ranges: ctypes wraps an out-of-range Python
# int silently (token 2**32 + 20 became 20, truncate(2**64) emptied the cache), so every integer
# is checked here first.
_RANGES = {ctypes.c_int32: (-2**31, 2**31 - 1), ctypes.c_uint32: (0, 2**32 - 1),
           ctypes.c_int64: (-2**63, 2**63 - 1), ctypes.c_uint64: (0, 2**64 - 1)}


def c_int(value, ctype, what):
    """value as a Python int inside ctype's range: TypeError for a non-integer (3.5, "3"),
    OverflowError naming what and the range otherwise."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None
    lo, hi = _RANGES[ctype]
    if not lo <= v <= hi:
        raise OverflowError(f"{what} = {v} is outside the range of a C {ctype.__name__[2:]} ({lo}..{hi})")
    return v


def c_int_array(values, ctype, what):
    """A ctypes array of values, each checked as c_int checks it (the index named)."""
    values = list(values)
    return (ctype * len(values))(*(c_int(v, ctype, f"{what}[{i}]") for i, v in enumerate(values)))


def version():
    """The C library's version, bp_version() (the CMake project version)."""
    return lib.bp_version().decode()


_ROLES = {0: "weight", 1: "activation", 2: "data"}


@dataclass(frozen=True)
class Kind:
    """One row of the kind table (include/backplane_kinds.def)."""
    name: str
    id: int
    block_elems: int
    block_bytes: int
    role: str
    can_quantize: bool
    bits_per_weight: float

    def row_bytes(self, n):
        """Bytes of one row of n elements (n a whole number of blocks)."""
        out = ctypes.c_size_t()
        check(lib.bp_kind_row_bytes(self.id, c_int(n, ctypes.c_int64, "n"), ctypes.byref(out)))
        return out.value


def _kind_from(p):
    k = p.contents
    return Kind(k.name.decode(), k.gguf_id, k.block_elems, k.block_bytes, _ROLES.get(k.role, "?"),
                bool(k.can_quantize), k.bits_per_weight)


def kinds(all=False):
    """The weight kinds (all=True: every row, activation and data kinds too), in GGUF id order."""
    out = [_kind_from(lib.bp_kind_at(i)) for i in range(lib.bp_kind_table_size())]
    return out if all else [k for k in out if k.role == "weight"]


def kind(key):
    """A Kind by GGUF name ("Q4_K") or GGUF type id (12); a Kind is returned as is."""
    if isinstance(key, Kind):
        return key
    if isinstance(key, str):
        return _kind_from(fail_null(lib.bp_kind_by_name(key.encode()), 2))
    return _kind_from(fail_null(lib.bp_kind_lookup(c_int(key, ctypes.c_uint32, "kind id")), 2))


def _bytes_view(data):
    """A C-contiguous uint8 array over data (bytes, bytearray, memoryview or an array), no copy
    where possible; the caller keeps the returned array alive while C uses its pointer."""
    a = np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else np.asarray(data)
    return np.ascontiguousarray(a).view(np.uint8).reshape(-1)


def f32_array(x):
    """x as a C-contiguous float32 array (a copy only when x is not one already)."""
    return np.ascontiguousarray(x, dtype=np.float32)


def fptr(a):
    return a.ctypes.data_as(f32p)


def dequantize(kind_, data, n=None):
    """The n values encoded in data (bytes of kind kind_), as float32: the CPU reference."""
    k = kind(kind_)
    buf = _bytes_view(data)
    if n is None:
        n = buf.size // k.block_bytes * k.block_elems
    n = c_int(n, ctypes.c_int64, "n")
    if n < 0:
        raise ValueError(f"dequantize: n = {n} is negative")
    out = np.empty(n, dtype=np.float32)
    check(lib.bp_dequantize(k.id, buf.ctypes.data, buf.size, fptr(out), n))
    return out


def quantize(kind_, x):
    """Encode the float32 values x (a whole number of blocks) as kind_: returns uint8 bytes."""
    k = kind(kind_)
    xa = f32_array(x).reshape(-1)
    out = np.empty(k.row_bytes(xa.size), dtype=np.uint8)
    check(lib.bp_quantize(k.id, fptr(xa), xa.size, out.ctypes.data, out.size))
    return out
