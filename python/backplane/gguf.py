"""GGUF files: metadata, tensors, zero-copy tensor bytes."""
import ctypes
import weakref

import numpy as np

from ._core import Handle, check, fail_null, _kind_from, dequantize
from ._lib import lib, GGUFValue, c_void_p

# bp_gguf_type -> (ctypes scalar, numpy dtype) for fixed-size values.
_SCALARS = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32,
            6: np.float32, 7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}
_STRING, _ARRAY = 8, 9


def _value(v):
    """A Python value for a bp_gguf_value: int/float/bool/str, a NumPy array for arrays of
    numbers, a list for arrays of strings or arrays."""
    if v.type == _STRING:
        s, n = ctypes.c_char_p(), ctypes.c_size_t()
        check(lib.bp_gguf_value_str(ctypes.byref(v), ctypes.byref(s), ctypes.byref(n)))
        return ctypes.string_at(s, n.value).decode("utf-8", "replace")
    if v.type == _ARRAY:
        if v.elem_type in _SCALARS:
            dt = np.dtype(_SCALARS[v.elem_type]).newbyteorder("<")
            return np.frombuffer(ctypes.string_at(v.data, v.len * dt.itemsize), dtype=dt).copy()
        out, prev, elem = [], None, GGUFValue()
        for _ in range(v.len):
            check(lib.bp_gguf_array_next(ctypes.byref(v), ctypes.byref(prev) if prev else None, ctypes.byref(elem)))
            out.append(_value(elem))
            prev, elem = elem, GGUFValue()
        return out
    if v.type == 7:
        b = ctypes.c_bool()
        check(lib.bp_gguf_value_bool(ctypes.byref(v), ctypes.byref(b)))
        return b.value
    if v.type in (6, 12):
        d = ctypes.c_double()
        check(lib.bp_gguf_value_f64(ctypes.byref(v), ctypes.byref(d)))
        return d.value
    if v.type in (1, 3, 5, 11):
        i = ctypes.c_int64()
        check(lib.bp_gguf_value_i64(ctypes.byref(v), ctypes.byref(i)))
        return i.value
    u = ctypes.c_uint64()
    check(lib.bp_gguf_value_u64(ctypes.byref(v), ctypes.byref(u)))
    return u.value


class Tensor:
    """One tensor of an open GGUF file. ne is GGUF order (ne[0] = elements per row); shape is
    NumPy order (rows first). data is the raw bytes as a zero-copy uint8 view of the mapping,
    valid while the file is open, or while a view of it lives (closing the file then only
    closes it for Python: the mapping goes when the last view does)."""

    def __init__(self, gguf, t):
        self._gguf = gguf
        self.name = t.name.decode("utf-8", "replace")
        self.kind = _kind_from(t.kind_info)
        self.ne = tuple(t.ne[i] for i in range(t.n_dims))
        self.shape = tuple(reversed(self.ne))
        self.nbytes = t.bytes
        self.offset = t.offset
        self._data = t.data

    @property
    def data(self):
        self._gguf._require_open()
        buf = (ctypes.c_uint8 * self.nbytes).from_address(self._data)
        a = np.frombuffer(buf, dtype=np.uint8)
        a.flags.writeable = False
        self._gguf._add_view(a)  # the mapping outlives every view (GGUF.free waits for them)
        return a

    def numpy(self):
        """The values as float32 (dequantized by the CPU reference), in NumPy shape."""
        n = 1
        for d in self.ne:
            n *= d
        return dequantize(self.kind, self.data, n).reshape(self.shape)

    def __repr__(self):
        return f"Tensor({self.name!r}, {self.kind.name}, shape={self.shape})"


class GGUF(Handle):
    """A GGUF file, opened and validated by the C library (mmap; bad input raises Error with the
    library's message naming what and where). Use as a context manager, or call close(). Weights
    made from its tensors borrow its mapping: close() frees them first."""

    _free_fn = lib.bp_gguf_close
    _what = "GGUF file"

    def __init__(self, path):
        h = c_void_p()
        check(lib.bp_gguf_open(str(path).encode(), ctypes.byref(h)))
        self._init(h, None)

    @classmethod
    def from_bytes(cls, data):
        """Open a GGUF image held in memory (bytes-like); the bytes are kept alive by the object."""
        self = cls.__new__(cls)
        buf = np.frombuffer(bytes(data), dtype=np.uint8)
        h = c_void_p()
        check(lib.bp_gguf_open_memory(buf.ctypes.data, buf.size, ctypes.byref(h)))
        self._init(h, buf)
        return self

    def _init(self, h, keep):
        self._h, self._keep, self._weights, self._tensors = h, keep, weakref.WeakSet(), None
        self._views = {}  # id -> weakref of the live Tensor.data views (arrays are unhashable)

    def _add_view(self, a):
        views = self._views
        views[id(a)] = weakref.ref(a, lambda r, k=id(a): views.pop(k, None))

    def _require_open(self):
        self._handle()

    def free(self):
        """Close the file; the weights made from its tensors are freed first (they borrow its
        mapping)."""
        if self._h:
            for w in list(self._weights):
                w.free()
            self._weights = weakref.WeakSet()
            views = [v for v in (r() for r in list(self._views.values())) if v is not None]
            if views:
                # A NumPy view from Tensor.data reads the mapping directly: unmapping it now
                # would leave the view over freed memory. Closed for Python at once; the C file
                # (and a from_bytes image) is released when the last view is collected.
                h, keep, left = self._h, self._keep, [len(views)]

                def release_one(keep=keep):  # keep: a from_bytes image lives as long as this
                    left[0] -= 1
                    if left[0] == 0:
                        lib.bp_gguf_close(h)

                for v in views:
                    weakref.finalize(v, release_one)
                self._h, self._views = None, {}
                return
        super().free()

    close = free

    @property
    def version(self):
        self._require_open()
        return lib.bp_gguf_version(self._h)

    @property
    def alignment(self):
        self._require_open()
        return lib.bp_gguf_alignment(self._h)

    @property
    def metadata(self):
        """Every key -> value, in file order."""
        self._require_open()
        out = {}
        for i in range(lib.bp_gguf_kv_count(self._h)):
            v = GGUFValue()
            check(lib.bp_gguf_kv_value(self._h, i, ctypes.byref(v)))
            out[lib.bp_gguf_kv_key(self._h, i).decode("utf-8", "replace")] = _value(v)
        return out

    @property
    def tensors(self):
        """Every tensor, in file order."""
        self._require_open()
        if self._tensors is None:
            self._tensors = [Tensor(self, lib.bp_gguf_tensor_at(self._h, i).contents)
                             for i in range(lib.bp_gguf_tensor_count(self._h))]
        return self._tensors

    def tensor(self, name):
        """The tensor called name; Error (BP_E_NOT_FOUND) when there is none."""
        self._require_open()
        return Tensor(self, fail_null(lib.bp_gguf_find_tensor(self._h, name.encode()), 9).contents)


__all__ = ["GGUF", "Tensor"]
