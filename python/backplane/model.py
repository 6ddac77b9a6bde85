"""The model runner: load a GGUF transformer, evaluate tokens with a KV cache, read logits, and
generate text (tokenizer + sampler + context: the loop of examples/generate.c)."""
import ctypes
import weakref

import numpy as np

from ._core import Handle, check, kind, c_int, c_int_array
from ._lib import lib, c_void_p, ModelInfo
from .tokenizer import Tokenizer, Sampler


class Generation(tuple):
    """What Model.generate made: unpacks as (text, ids); .stop says why it stopped ("end of
    generation", "token limit", "context full"), .text and .ids name the two parts."""

    def __new__(cls, text, ids, stop):
        self = super().__new__(cls, (text, ids))
        self.stop = stop
        return self

    text = property(lambda self: self[0])
    ids = property(lambda self: self[1])


class Model(Handle):
    """A GGUF model, loaded and validated by the C library (weights stay in the file's mapping).
    A bad file raises Error naming the architecture, tensor or key that is wrong. Its contexts
    depend on it: free() (or the end of a `with` block) frees every context of the model
    first, so a context used after that raises ValueError instead of reading freed memory."""
    _free_fn = lib.bp_model_free
    _what = "model"
    _tokenizer = None

    def __init__(self, path, prefetch=True):
        self._contexts = weakref.WeakSet()
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
        """Free the model, its contexts first (they would read its weights after it)."""
        if self._h:
            for c in list(self._contexts):
                c.free()
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
        """prompt's continuation, up to n tokens, an end-of-generation token or a full context:
        a Generation, which unpacks as (text, ids) and says why it stopped in .stop. Greedy by
        default (temperature <= 0); other sampler settings as keywords. A prompt that does not
        fit the context raises Error before anything is generated."""
        n = c_int(n, ctypes.c_int64, "n")
        tok = self.tokenizer
        ids, stop = [], "token limit"
        with self.context(n_ctx) as ctx, \
                Sampler(self.info["n_vocab"], temperature=temperature, seed=seed, **sampling) as sampler:
            logits = ctx.eval(tok.encode(prompt))[-1]
            while len(ids) < n:
                t = sampler.sample(logits)
                if tok.is_eog(t):
                    stop = "end of generation"
                    break
                ids.append(t)
                sampler.accept(t)
                if len(ids) == n:
                    break  # its logits are not needed
                if ctx.pos >= ctx.n_ctx:
                    stop = "context full"  # what was made is returned, not lost to an error
                    break
                logits = ctx.eval([t])[-1]
        return Generation(b"".join(tok.piece(t) for t in ids).decode("utf-8", "replace"), ids, stop)


class Context(Handle):
    """The KV cache and activations of one sequence over a Model (which it keeps alive; freeing
    the model frees it first). Integers are checked against the C types before the call, and a
    call that raises leaves the cache as it was."""
    _free_fn = lib.bp_context_free
    _what = "context (or its model, freed)"

    def __init__(self, model, n_ctx=0, kv_kind=None, n_batch=0):
        p = lib.bp_context_default_params()
        if n_ctx:
            p.n_ctx = c_int(n_ctx, ctypes.c_int64, "n_ctx")
        if kv_kind is not None:
            p.kv_kind = kind(kv_kind).id
        if n_batch:
            p.n_batch = c_int(n_batch, ctypes.c_int64, "n_batch")
        h = c_void_p()
        check(lib.bp_context_create(model._handle(), ctypes.byref(p), ctypes.byref(h)))
        self._h, self.model = h, model
        model._contexts.add(self)

    def eval(self, tokens, n_out=1):
        """Append tokens; the logits of the last n_out of them, shape (n_out, n_vocab)
        (0 <= n_out <= len(tokens); n_out 0 gives shape (0, n_vocab))."""
        arr = c_int_array(tokens, ctypes.c_int32, "tokens")
        n_out = c_int(n_out, ctypes.c_int64, "n_out")
        if not 0 <= n_out <= len(arr):
            raise ValueError(f"n_out = {n_out} with {len(arr)} tokens (need 0 <= n_out <= len(tokens))")
        h = self._handle()
        nv = self.model.info["n_vocab"]
        check(lib.bp_context_eval(h, arr, len(arr), n_out))
        out = np.empty((n_out, nv), dtype=np.float32)
        for j in range(n_out):
            out[j] = np.ctypeslib.as_array(lib.bp_context_logits(h, j), shape=(nv,))
        return out

    @property
    def pos(self):
        """Tokens in the cache."""
        return lib.bp_context_pos(self._handle())

    @property
    def n_ctx(self):
        """The cache's capacity in tokens."""
        return lib.bp_context_n_ctx(self._handle())

    def truncate(self, n):
        """Forget positions >= n."""
        check(lib.bp_context_truncate(self._handle(), c_int(n, ctypes.c_int64, "n")))
