"""Tokenizer and sampler: separate objects beside the model, as in the C API."""
import ctypes

from ctypes import c_int32, c_uint64

from ._core import Handle, check, f32_array, fptr, c_int, c_int_array
from ._lib import lib, SamplerParams, c_void_p
from .gguf import GGUF

_SPECIAL = {"bos": 0, "eos": 1, "unk": 2, "pad": 3, "sep": 4, "eot": 5}
_DECODE_SPECIAL = 1


class Tokenizer(Handle):
    """The tokenizer a GGUF's tokenizer.ggml.* metadata describes (SentencePiece-style,
    byte-level BPE, Gemma 4's BPE or WordPiece), from a GGUF or a path. It copies what it needs: the file may be closed."""
    _free_fn = lib.bp_tokenizer_free
    _what = "tokenizer"

    def __init__(self, source):
        h = c_void_p()
        if isinstance(source, c_void_p):  # a bp_gguf * the C library owns (a model's file)
            check(lib.bp_tokenizer_create(source, ctypes.byref(h)))
        elif isinstance(source, GGUF):
            source._require_open()
            check(lib.bp_tokenizer_create(source._h, ctypes.byref(h)))
        else:
            with GGUF(source) as f:
                check(lib.bp_tokenizer_create(f._h, ctypes.byref(h)))
        self._h = h


    @property
    def model(self):
        """tokenizer.ggml.model: "llama" (SentencePiece-style), "gpt2" (byte-level BPE), "gemma4"
        (BPE on UTF-8) or "bert" (WordPiece)."""
        return lib.bp_tokenizer_model_name(self._handle()).decode()

    @property
    def vocab_size(self):
        return lib.bp_tokenizer_vocab_size(self._handle())

    def special(self, role):
        """The id of a special token ("bos", "eos", "unk", "pad", "sep", "eot"), or -1."""
        return lib.bp_tokenizer_special(self._handle(), _SPECIAL[role])

    def is_eog(self, token):
        """Whether the token ends a generation (EOS, EOT and the other end markers)."""
        return bool(lib.bp_tokenizer_is_eog(self._handle(), c_int(token, c_int32, "token")))

    def encode(self, text, add_special=True, parse_special=False):
        """Token ids of text (str, or bytes taken as they are)."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids, n = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_size_t()
        check(lib.bp_tokenizer_encode_alloc(self._handle(), data, len(data), bool(add_special),
                                            bool(parse_special), ctypes.byref(ids), ctypes.byref(n)))
        try:
            return [ids[i] for i in range(n.value)]
        finally:
            lib.bp_tokens_free(ids)

    def piece(self, token, special=False):
        """The bytes one token stands for (as llama.cpp's token_to_piece gives them)."""
        n = ctypes.c_size_t()
        token = c_int(token, c_int32, "token")
        lib.bp_tokenizer_token_to_piece(self._handle(), token, bool(special), None, 0, ctypes.byref(n))
        buf = ctypes.create_string_buffer(max(n.value, 1))
        check(lib.bp_tokenizer_token_to_piece(self._handle(), token, bool(special), buf, n.value,
                                              ctypes.byref(n)))
        return buf.raw[:n.value]

    def decode(self, ids, special=False):
        """The text of ids (invalid UTF-8 replaced)."""
        arr = c_int_array(ids, c_int32, "ids")
        n = ctypes.c_size_t()
        flags = _DECODE_SPECIAL if special else 0
        lib.bp_tokenizer_decode(self._handle(), arr, len(ids), flags, None, 0, ctypes.byref(n))
        buf = ctypes.create_string_buffer(max(n.value, 1))
        check(lib.bp_tokenizer_decode(self._handle(), arr, len(ids), flags, buf, n.value, ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8", "replace")


class Sampler(Handle):
    """Picks the next token from a logits row: greedy (temperature <= 0), or top-k / top-p /
    min-p / temperature with penalties, in the C library's fixed order; seeded, so the same seed
    and calls give the same tokens. Unset parameters keep the C defaults."""

    _free_fn = lib.bp_sampler_free
    _what = "sampler"

    def __init__(self, n_vocab, **params):
        p = lib.bp_sampler_default_params()
        for k, v in params.items():
            fields = dict(SamplerParams._fields_)
            if k not in fields:
                raise TypeError(f"unknown sampler parameter {k!r}")
            # a ctypes integer field wraps what does not fit (seed=-1 became 2**64 - 1)
            setattr(p, k, c_int(v, fields[k], k) if fields[k] in (c_int32, c_uint64) else v)
        h = c_void_p()
        n_vocab = c_int(n_vocab, c_int32, "n_vocab")
        check(lib.bp_sampler_create(ctypes.byref(p), n_vocab, ctypes.byref(h)))
        self._h, self.n_vocab = h, n_vocab

    def sample(self, logits):
        """One token id drawn from logits (n_vocab floats); not yet accepted."""
        row = f32_array(logits).reshape(-1)
        if row.size != self.n_vocab:
            raise ValueError(f"logits has {row.size} values, the sampler {self.n_vocab}")
        out = ctypes.c_int32()
        check(lib.bp_sampler_sample(self._handle(), fptr(row), ctypes.byref(out)))
        return out.value

    def accept(self, token):
        """Record a token for the repetition penalties."""
        check(lib.bp_sampler_accept(self._handle(), c_int(token, c_int32, "token")))

    def reset(self):
        lib.bp_sampler_reset(self._handle())


__all__ = ["Tokenizer", "Sampler"]
