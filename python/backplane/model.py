"""The model runner: load a GGUF transformer, evaluate tokens with a KV cache, read logits, and
generate text (tokenizer + sampler + context: the loop of examples/generate.c)."""
import ctypes

import numpy as np

from ._core import Handle, check, kind
from ._lib import lib, c_void_p, ModelInfo
from .tokenizer import Tokenizer, Sampler


class Model(Handle):
    """A GGUF model, loaded and validated by the C library (weights stay in the file's mapping).
    A bad file raises Error naming the architecture, tensor or key that is wrong."""
    _free_fn = lib.bp_model_free
    _what = "model"
    _tokenizer = None

    def __init__(self, path, prefetch=True):
        p = lib.bp_model_default_params()
        p.prefetch = bool(prefetch)
        h = c_void_p()
        check(lib.bp_model_load(str(path).encode(), ctypes.byref(p), ctypes.byref(h)))
        self._h = h
        i = ModelInfo()
        check(lib.bp_model_get_info(h, ctypes.byref(i)))
        self.info = {n: (v.decode() if isinstance(v, bytes) else v)
                     for n, v in ((n, getattr(i, n)) for n, _ in ModelInfo._fields_)}

    def free(self):
        if self._tokenizer is not None:
            self._tokenizer.free()
        super().free()

    @property
    def tokenizer(self):
        """The tokenizer of the model's own vocabulary."""
        if self._tokenizer is None:
            self._tokenizer = Tokenizer(c_void_p(lib.bp_model_gguf(self._handle())))
        return self._tokenizer

    def context(self, n_ctx=0, kv_kind=None, n_batch=0):
        """A KV cache over this model (n_ctx 0: the training context, capped at 4096)."""
        return Context(self, n_ctx, kv_kind, n_batch)

    def generate(self, prompt, n=32, temperature=0.0, seed=0, n_ctx=0, **sampling):
        """prompt's continuation, up to n tokens or an end-of-generation token: (text, ids).
        Greedy by default (temperature <= 0); other sampler settings as keywords."""
        tok = self.tokenizer
        ids = []
        with self.context(n_ctx) as ctx, \
                Sampler(self.info["n_vocab"], temperature=temperature, seed=seed, **sampling) as sampler:
            logits = ctx.eval(tok.encode(prompt))[-1]
            while len(ids) < n:
                t = sampler.sample(logits)
                if tok.is_eog(t):
                    break
                ids.append(t)
                sampler.accept(t)
                logits = ctx.eval([t])[-1]
        return b"".join(tok.piece(t) for t in ids).decode("utf-8", "replace"), ids


class Context(Handle):
    """The KV cache and activations of one sequence over a Model (kept alive by it)."""
    _free_fn = lib.bp_context_free
    _what = "context"

    def __init__(self, model, n_ctx=0, kv_kind=None, n_batch=0):
        p = lib.bp_context_default_params()
        if n_ctx:
            p.n_ctx = int(n_ctx)
        if kv_kind is not None:
            p.kv_kind = kind(kv_kind).id
        if n_batch:
            p.n_batch = int(n_batch)
        h = c_void_p()
        check(lib.bp_context_create(model._handle(), ctypes.byref(p), ctypes.byref(h)))
        self._h, self.model = h, model

    def eval(self, tokens, n_out=1):
        """Append tokens; the logits of the last n_out of them, shape (n_out, n_vocab)."""
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        check(lib.bp_context_eval(self._handle(), arr, len(tokens), int(n_out)))
        nv = self.model.info["n_vocab"]
        return np.stack([np.ctypeslib.as_array(lib.bp_context_logits(self._h, j), shape=(nv,)).copy()
                         for j in range(n_out)])

    @property
    def pos(self):
        """Tokens in the cache."""
        return lib.bp_context_pos(self._handle())

    def truncate(self, n):
        """Forget positions >= n."""
        check(lib.bp_context_truncate(self._handle(), int(n)))
