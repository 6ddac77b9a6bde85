"""Loading libbackplane.so and declaring the C functions the binding calls.

The library is found, in order: $BACKPLANE_LIBRARY (a path), the dynamic loader's search
(LD_LIBRARY_PATH, the ldconfig cache: /usr/local/lib after `cmake --install` and `ldconfig`),
then the libdir pkg-config reports for backplane (a prefix install with PKG_CONFIG_PATH set).
The SONAME's number is the ABI this binding was written for.
"""
import ctypes
import os
import subprocess

ABI = 0
SONAME = f"libbackplane.so.{ABI}"


def _candidates():
    env = os.environ.get("BACKPLANE_LIBRARY")
    if env:
        return [env]
    out = [SONAME]
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "backplane"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        if libdir:
            out.append(os.path.join(libdir, SONAME))
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def _load():
    errors = []
    for name in _candidates():
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(f"{name}: {e}")
    raise ImportError("backplane: cannot load the C library (" + "; ".join(errors) + "). Install it "
                      "(README 'Install': cmake --install build, then ldconfig), or point "
                      f"BACKPLANE_LIBRARY at {SONAME}, or LD_LIBRARY_PATH at its folder.")


lib = _load()

c_int, c_uint32, c_int64, c_uint64, c_size_t = ctypes.c_int, ctypes.c_uint32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t
c_char_p, c_void_p, c_bool, c_double, c_float = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_bool, ctypes.c_double, ctypes.c_float
P = ctypes.POINTER
f32p = P(c_float)


class KindInfo(ctypes.Structure):  # bp_kind_info
    _fields_ = [("kind", c_int), ("gguf_id", c_uint32), ("name", c_char_p), ("block_elems", c_uint32),
                ("block_bytes", c_uint32), ("role", c_int), ("can_quantize", c_bool),
                ("bits_per_weight", c_double)]


class GGUFValue(ctypes.Structure):  # bp_gguf_value
    _fields_ = [("type", c_int), ("elem_type", c_int), ("data", c_void_p), ("len", c_uint64),
                ("bytes", c_uint64), ("offset", c_uint64)]


class GGUFTensor(ctypes.Structure):  # bp_gguf_tensor
    _fields_ = [("name", c_char_p), ("kind", c_int), ("kind_info", P(KindInfo)), ("n_dims", c_uint32),
                ("ne", c_int64 * 4), ("n_elems", c_int64), ("bytes", c_size_t), ("offset", c_uint64),
                ("info_offset", c_uint64), ("data", c_void_p)]


class BackendInfo(ctypes.Structure):  # bp_backend_info
    _fields_ = [("name", c_char_p), ("display", c_char_p), ("compiled", c_bool), ("enabled", c_bool),
                ("reason", c_char_p), ("device", c_char_p), ("cpu_implementation", c_bool),
                ("unverified", c_char_p)]


class RouteInfo(ctypes.Structure):  # bp_route_info
    _fields_ = [("backend", ctypes.c_char * 16), ("display", ctypes.c_char * 16), ("path", ctypes.c_char * 128),
                ("per_position", c_bool), ("why", ctypes.c_char * 768)]


class SamplerParams(ctypes.Structure):  # bp_sampler_params
    _fields_ = [("temperature", c_float), ("top_k", ctypes.c_int32), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("frequency_penalty", c_float), ("presence_penalty", c_float),
                ("repeat_last_n", ctypes.c_int32), ("seed", c_uint64)]


class ModelParams(ctypes.Structure):  # bp_model_params
    _fields_ = [("progress", c_void_p), ("progress_user", c_void_p), ("prefetch", c_bool),
                ("release_originals", c_bool)]


class ModelInfo(ctypes.Structure):  # bp_model_info
    _fields_ = [("arch", c_char_p), ("name", c_char_p)] + \
        [(n, c_int64) for n in ("n_vocab", "n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff",
                                "n_ctx_train", "sliding_window", "n_swa_layers", "n_params")] + \
        [("weight_bytes", c_uint64), ("file_bytes", c_uint64), ("tied_output", c_bool)]


class ContextParams(ctypes.Structure):  # bp_context_params
    _fields_ = [("n_ctx", c_int64), ("kv_kind", c_int), ("n_batch", c_int64), ("n_seq_max", ctypes.c_int32),
                ("device_budget", ctypes.c_uint64)]


# Every struct the binding mirrors, by C name: tests compare sizes and offsets with the C compiler's.
STRUCTS = {"bp_kind_info": KindInfo, "bp_gguf_value": GGUFValue, "bp_gguf_tensor": GGUFTensor,
           "bp_backend_info": BackendInfo, "bp_route_info": RouteInfo, "bp_sampler_params": SamplerParams,
           "bp_model_params": ModelParams, "bp_model_info": ModelInfo, "bp_context_params": ContextParams}

# name: (restype, argtypes). bp_status is an int.
_PROTOTYPES = {
    "bp_version": (c_char_p, []),
    "bp_status_name": (c_char_p, [c_int]),
    "bp_last_error": (c_char_p, []),
    "bp_clear_error": (None, []),
    "bp_kind_table_size": (c_int, []),
    "bp_kind_at": (P(KindInfo), [c_int]),
    "bp_kind_lookup": (P(KindInfo), [c_uint32]),
    "bp_kind_by_name": (P(KindInfo), [c_char_p]),
    "bp_kind_row_bytes": (c_int, [c_int, c_int64, P(c_size_t)]),
    "bp_dequantize": (c_int, [c_int, c_void_p, c_size_t, f32p, c_int64]),
    "bp_quantize": (c_int, [c_int, f32p, c_int64, c_void_p, c_size_t]),
    "bp_weight_create": (c_int, [c_int, c_void_p, c_size_t, c_int64, c_int64, P(c_void_p)]),
    "bp_weight_free": (None, [c_void_p]),
    "bp_matvec_on": (c_int, [c_void_p, c_char_p, f32p, f32p]),
    "bp_gemm_on": (c_int, [c_void_p, c_char_p, f32p, c_int64, f32p]),
    "bp_weight_last_path": (c_char_p, [c_void_p]),
    "bp_exact_mode": (c_bool, []),
    "bp_set_exact_mode": (None, [c_bool]),
    "bp_fallback_report": (None, [c_void_p]),
    "bp_device_memory": (None, [P(c_uint64), P(c_uint64)]),
    "bp_backend_count": (c_int, []),
    "bp_backend_info_at": (c_int, [c_int, P(BackendInfo)]),
    "bp_route": (c_int, [c_int, c_int64, c_int64, c_int64, P(RouteInfo)]),
    "bp_set_backend_preference": (c_int, [c_char_p, c_int]),
    "bp_backend_preference": (c_char_p, [P(c_int)]),
    "bp_strict_mode": (c_bool, []),
    "bp_set_strict": (None, [c_bool]),
    "bp_tokenizer_create": (c_int, [c_void_p, P(c_void_p)]),
    "bp_tokenizer_free": (None, [c_void_p]),
    "bp_tokenizer_vocab_size": (ctypes.c_int32, [c_void_p]),
    "bp_tokenizer_special": (ctypes.c_int32, [c_void_p, c_int]),
    "bp_tokenizer_is_eog": (c_bool, [c_void_p, ctypes.c_int32]),
    "bp_tokenizer_model_name": (c_char_p, [c_void_p]),
    "bp_tokenizer_encode_alloc": (c_int, [c_void_p, c_char_p, c_size_t, c_bool, c_bool,
                                          P(P(ctypes.c_int32)), P(c_size_t)]),
    "bp_tokens_free": (None, [P(ctypes.c_int32)]),
    "bp_tokenizer_token_to_piece": (c_int, [c_void_p, ctypes.c_int32, c_bool, c_char_p, c_size_t, P(c_size_t)]),
    "bp_tokenizer_decode": (c_int, [c_void_p, P(ctypes.c_int32), c_size_t, ctypes.c_uint, c_char_p, c_size_t,
                                    P(c_size_t)]),
    "bp_sampler_default_params": (SamplerParams, []),
    "bp_sampler_create": (c_int, [P(SamplerParams), ctypes.c_int32, P(c_void_p)]),
    "bp_sampler_free": (None, [c_void_p]),
    "bp_sampler_sample": (c_int, [c_void_p, f32p, P(ctypes.c_int32)]),
    "bp_sampler_accept": (c_int, [c_void_p, ctypes.c_int32]),
    "bp_sampler_reset": (None, [c_void_p]),
    "bp_model_default_params": (ModelParams, []),
    "bp_model_load": (c_int, [c_char_p, P(ModelParams), P(c_void_p)]),
    "bp_model_free": (None, [c_void_p]),
    "bp_model_get_info": (c_int, [c_void_p, P(ModelInfo)]),
    "bp_model_gguf": (c_void_p, [c_void_p]),
    "bp_context_default_params": (ContextParams, []),
    "bp_context_create": (c_int, [c_void_p, P(ContextParams), P(c_void_p)]),
    "bp_context_free": (None, [c_void_p]),
    "bp_context_eval": (c_int, [c_void_p, P(ctypes.c_int32), c_int64, c_int64]),
    "bp_context_logits": (f32p, [c_void_p, c_int64]),
    "bp_context_pos": (c_int64, [c_void_p]),
    "bp_context_n_ctx": (c_int64, [c_void_p]),
    "bp_context_truncate": (c_int, [c_void_p, c_int64]),
    "bp_gguf_open": (c_int, [c_char_p, P(c_void_p)]),
    "bp_gguf_open_memory": (c_int, [c_void_p, c_size_t, P(c_void_p)]),
    "bp_gguf_close": (None, [c_void_p]),
    "bp_gguf_version": (c_uint32, [c_void_p]),
    "bp_gguf_alignment": (c_uint32, [c_void_p]),
    "bp_gguf_data_offset": (c_uint64, [c_void_p]),
    "bp_gguf_file_size": (c_uint64, [c_void_p]),
    "bp_gguf_kv_count": (c_int64, [c_void_p]),
    "bp_gguf_kv_key": (c_char_p, [c_void_p, c_int64]),
    "bp_gguf_kv_value": (c_int, [c_void_p, c_int64, P(GGUFValue)]),
    "bp_gguf_value_u64": (c_int, [P(GGUFValue), P(c_uint64)]),
    "bp_gguf_value_i64": (c_int, [P(GGUFValue), P(c_int64)]),
    "bp_gguf_value_f64": (c_int, [P(GGUFValue), P(c_double)]),
    "bp_gguf_value_bool": (c_int, [P(GGUFValue), P(c_bool)]),
    "bp_gguf_value_str": (c_int, [P(GGUFValue), P(c_char_p), P(c_size_t)]),
    "bp_gguf_array_next": (c_int, [P(GGUFValue), P(GGUFValue), P(GGUFValue)]),
    "bp_gguf_tensor_count": (c_int64, [c_void_p]),
    "bp_gguf_tensor_at": (P(GGUFTensor), [c_void_p, c_int64]),
    "bp_gguf_find_tensor": (P(GGUFTensor), [c_void_p, c_char_p]),
}
for _name, (_res, _args) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args

# libc, for capturing FILE* reports into a string (open_memstream is POSIX 2008).
libc = ctypes.CDLL(None)
libc.open_memstream.restype = c_void_p
libc.open_memstream.argtypes = [P(ctypes.c_void_p), P(c_size_t)]
libc.fclose.argtypes = [c_void_p]
libc.free.argtypes = [c_void_p]


def capture(fn, *args):
    """Call fn(*args, FILE *) and return what it wrote, as text."""
    buf, size = c_void_p(), c_size_t()
    fp = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not fp:
        raise MemoryError("open_memstream failed")
    try:
        fn(*args, fp)
    finally:
        libc.fclose(fp)
    try:
        return ctypes.string_at(buf, size.value).decode("utf-8", "replace")
    finally:
        libc.free(buf)
