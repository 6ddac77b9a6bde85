"""Weights and the seam: matvec / GEMM on NumPy arrays, the path that ran, the route probe."""
import ctypes

import numpy as np

from ._core import Error, Handle, check, kind, kinds, _bytes_view, f32_array, fptr, c_int
from ._lib import lib, capture, c_void_p, c_uint64, c_int64, BackendInfo, RouteInfo
from .gguf import Tensor


class Weight(Handle):
    """A rows x cols weight matrix of one kind (GGUF order: ne0 = cols), over bytes the weight
    keeps alive (a Tensor's mapping, or a copy of what you pass). Backends cache their own copies
    (device uploads, repacked layouts) inside it; free() or garbage collection releases them."""
    _free_fn = lib.bp_weight_free
    _what = "weight (or its GGUF file, closed)"

    def __init__(self, kind_, data, rows, cols):
        k = kind(kind_)
        self._owner = None
        if isinstance(data, Tensor):
            data._gguf._require_open()
            self._owner = data._gguf
            ptr, nbytes = data._data, data.nbytes
            self._buf = None
        else:
            self._buf = _bytes_view(data).copy()  # ours: the caller may change theirs
            ptr, nbytes = self._buf.ctypes.data, self._buf.size
        self.kind, self.rows, self.cols = k, c_int(rows, c_int64, "rows"), c_int(cols, c_int64, "cols")
        h = c_void_p()
        check(lib.bp_weight_create(k.id, ptr, nbytes, self.rows, self.cols, ctypes.byref(h)))
        self._h = h
        if self._owner is not None:
            self._owner._weights.add(self)

    @classmethod
    def from_tensor(cls, t):
        """A weight over a 2-D tensor's bytes, zero-copy (the file stays open while it lives)."""
        if len(t.ne) != 2:
            raise Error(3, f"tensor '{t.name}' has {len(t.ne)} dimensions, a weight needs 2")
        return cls(t.kind, t, t.ne[1], t.ne[0])


    def matvec(self, x, backend=None):
        """y = W x (x: cols floats) on the seam's choice, or only on `backend` ("cpu-ref", "cpu",
        "vulkan", ...; one that cannot run the kind raises Error, never silently becomes another)."""
        h = self._handle()
        xa = f32_array(x).reshape(-1)
        if xa.size != self.cols:
            raise Error(3, f"matvec: x has {xa.size} values, the weight has {self.cols} columns")
        y = np.empty(self.rows, dtype=np.float32)
        check(lib.bp_matvec_on(h, backend.encode() if backend else None, fptr(xa), fptr(y)))
        return y

    def gemm(self, x, backend=None):
        """Y = X W^T for X of shape (t, cols): returns (t, rows)."""
        h = self._handle()
        xa = f32_array(x)
        if xa.ndim != 2 or xa.shape[1] != self.cols:
            raise Error(3, f"gemm: X has shape {xa.shape}, expected (t, {self.cols})")
        y = np.empty((xa.shape[0], self.rows), dtype=np.float32)
        check(lib.bp_gemm_on(h, backend.encode() if backend else None, fptr(xa), xa.shape[0], fptr(y)))
        return y

    @property
    def last_path(self):
        """What ran the last matvec/gemm on this weight (on this thread): "CPU avx512 Q4_K"."""
        return lib.bp_weight_last_path(self._handle()).decode("utf-8", "replace")


def _as_weight(w):
    return Weight.from_tensor(w) if isinstance(w, Tensor) else w


def matvec(w, x, backend=None):
    """y = W x for a Weight or a 2-D Tensor."""
    return _as_weight(w).matvec(x, backend)


def gemm(w, x, backend=None):
    """Y = X W^T for a Weight or a 2-D Tensor."""
    return _as_weight(w).gemm(x, backend)


def _text(b):
    return b.decode("utf-8", "replace") if b is not None else None


def backends():
    """Every backend in dispatch order, the CPU last: name, display, compiled, enabled, reason
    (why on or off), device, cpu_implementation, unverified (why its kernels are not proven, or
    None). Asking may run a backend's device probe (once per process)."""
    out = []
    for i in range(lib.bp_backend_count()):
        b = BackendInfo()
        check(lib.bp_backend_info_at(i, ctypes.byref(b)))
        out.append({"name": _text(b.name), "display": _text(b.display), "compiled": bool(b.compiled),
                    "enabled": bool(b.enabled), "reason": _text(b.reason), "device": _text(b.device),
                    "cpu_implementation": bool(b.cpu_implementation), "unverified": _text(b.unverified)})
    return out


def route(kind_, rows, cols, batch=1):
    """Where an op of this kind on a rows x cols weight with `batch` inputs runs now (the rule
    matvec/gemm apply): {"backend", "display", "path", "per_position", "why"}."""
    r = RouteInfo()
    check(lib.bp_route(kind(kind_).id, c_int(rows, c_int64, "rows"), c_int(cols, c_int64, "cols"),
                       c_int(batch, c_int64, "batch"), ctypes.byref(r)))
    return {"backend": _text(r.backend), "display": _text(r.display), "path": _text(r.path),
            "per_position": bool(r.per_position), "why": _text(r.why)}


def probe(rows=4096, cols=4096, batch=512):
    """What `backplane probe` reports: the backends, and per weight kind the route of a decode
    (batch 1) and of a prefill (batch `batch`) of a rows x cols weight:
    {"backends": [...], "kinds": {name: {"decode": route, "prefill": route}}}."""
    return {"backends": backends(),
            "kinds": {k.name: {"decode": route(k, rows, cols, 1), "prefill": route(k, rows, cols, batch)}
                      for k in kinds()}}


def set_backend_preference(name, force=False):
    """Prefer (or with force=True, force) one backend for the process; None clears. Forcing one
    that cannot run raises Error naming why."""
    check(lib.bp_set_backend_preference(name.encode() if name else None, 1 if force else 0))


def strict_mode(on=None):
    """Strict mode (every fallback an error): returns it; with on=True/False sets it."""
    if on is not None:
        lib.bp_set_strict(bool(on))
    return bool(lib.bp_strict_mode())


def fallback_report():
    """How many ops fell back since the process started, from where and why (text)."""
    return capture(lib.bp_fallback_report)


def device_memory():
    """(live bytes, live allocations) the library holds on every device (the allocation ledger)."""
    b, n = c_uint64(), c_uint64()
    lib.bp_device_memory(ctypes.byref(b), ctypes.byref(n))
    return b.value, n.value


def exact_mode(on=None):
    """Exact mode (no reduced-precision matrix units): returns it; with on=True/False sets it."""
    if on is not None:
        lib.bp_set_exact_mode(bool(on))
    return bool(lib.bp_exact_mode())
