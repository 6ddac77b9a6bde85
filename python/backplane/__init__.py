"""backplane: quantized (GGUF) transformer inference through one accelerator seam.

ctypes over the installed C library (libbackplane.so.0): see the top-level README's
"Use from Python". Every failure raises backplane.Error with the C library's message."""
from ._core import Error, Kind, kinds, kind, version, dequantize, quantize
from .gguf import GGUF, Tensor
from .tokenizer import Tokenizer, Sampler
from .model import Model, Context, Generation
from .seam import (Weight, matvec, gemm, backends, route, probe, set_backend_preference, strict_mode,
                   fallback_report, device_memory, exact_mode)

__version__ = version()

__all__ = ["Model", "Context", "Generation", "Tokenizer", "Sampler", "Error", "Kind", "kinds", "kind", "version", "dequantize", "quantize", "GGUF", "Tensor",
           "Weight", "matvec", "gemm", "backends", "route", "probe", "set_backend_preference", "strict_mode",
           "fallback_report", "device_memory", "exact_mode"]
