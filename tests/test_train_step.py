"""The training step's speed pieces (docs/performance.md, "What the training step does"):
the causal-block attention backward, the chunked one-thread kernels and the arrays reused
between steps, each against the composition of the reference ops it replaces."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqprob import _parallel, nn
from seqprob.nn import _chunks
from seqprob.gpt import backward
from seqprob.gpt.block import TrainBuffers, block_backward, block_forward
from budget import examples
from test_gpt_arch import arch_model, archs

seeds = st.integers(0, 10_000)


@pytest.fixture(autouse=True)
def one_thread():
    _parallel.set_num_threads(1)
    yield
    _parallel.set_num_threads(None)


def reference_attention_backward(dy, q, k, v, P):
    """Full-square dP, dS, dq, dk, dv of grouped attention (the formulas of the docstring)."""
    B, H, Tq, hd = q.shape
    Hkv = k.shape[1]
    G = H // Hkv
    kr, vr = np.repeat(k, G, axis=1), np.repeat(v, G, axis=1)  # (B, H, Tk, hd)
    dyh = dy.reshape(B, Tq, H, hd).transpose(0, 2, 1, 3)
    dP = dyh @ vr.transpose(0, 1, 3, 2)  # (B, H, Tq, Tk)
    dS = P * (dP - (dP * P).sum(-1, keepdims=True)) / math.sqrt(hd)
    dq, dk, dv = dS @ kr, dS.transpose(0, 1, 3, 2) @ q, P.transpose(0, 1, 3, 2) @ dyh
    fold = lambda a: a.reshape(B, Hkv, G, *a.shape[2:]).sum(axis=2)  # noqa: E731
    return dq, fold(dk), fold(dv)


@settings(max_examples=examples(30), deadline=None)
@given(seed=seeds, B=st.integers(1, 2), Hkv=st.integers(1, 2), G=st.integers(1, 3),
       Tq=st.integers(1, 7), cached=st.integers(0, 3), q_block=st.integers(1, 5), into_views=st.booleans())
def test_blocked_attention_backward_equals_full_square(seed, B, Hkv, G, Tq, cached, q_block, into_views):
    rng = np.random.default_rng(seed)
    hd, H, Tk = 3, Hkv * G, Tq + cached  # cached > 0: queries after a key/value prefix
    q = rng.standard_normal((B, H, Tq, hd))
    k, v = rng.standard_normal((B, Hkv, Tk, hd)), rng.standard_normal((B, Hkv, Tk, hd))
    dy = rng.standard_normal((B, Tq, H * hd))
    _, cache = nn.grouped_attention_forward(q, k, v, q_block=2)
    out = None
    if into_views:  # strided views, as block._attention_backward passes into dqkv
        fused = np.full((B, Tk, H + 2 * Hkv, hd), np.nan)
        out = (fused[:, :Tq, :H].transpose(0, 2, 1, 3), fused[:, :, H:H + Hkv].transpose(0, 2, 1, 3),
               fused[:, :, H + Hkv:].transpose(0, 2, 1, 3))
    got = nn.grouped_attention_backward(dy, cache, out=out, q_block=q_block)
    for g, want in zip(got, reference_attention_backward(dy, q, k, v, cache[3])):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
    if into_views:
        assert all(g is o for g, o in zip(got, out))


def force_chunks(monkeypatch, chunk):
    """Make one thread run every kernel chunk by chunk, ``chunk`` elements a piece."""
    monkeypatch.setattr(_chunks, "WHOLE_MAX", 0)
    monkeypatch.setattr(_chunks, "CHUNK", chunk)


@settings(max_examples=examples(20), deadline=None)
@given(seed=seeds, rows=st.integers(1, 9), F=st.integers(1, 6), chunk=st.integers(1, 40))
def test_chunked_swiglu_and_gelu_equal_the_composition(seed, rows, F, chunk):
    rng = np.random.default_rng(seed)
    gu, dy = 2 * rng.standard_normal((rows, 2 * F)), rng.standard_normal((rows, F))
    with pytest.MonkeyPatch.context() as mp:
        force_chunks(mp, chunk)
        y, cache = nn.swiglu_forward(gu)
        dgu = nn.swiglu_backward(dy, cache)
        x = gu[:, :F].copy()
        gy, gcache = nn.gelu_forward(x)
        dx = nn.gelu_backward(dy, gcache)
    a, u = gu[:, :F], gu[:, F:]
    s = 1.0 / (1.0 + np.exp(-a))
    np.testing.assert_allclose(y, a * s * u, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dgu[:, F:], dy * a * s, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dgu[:, :F], dy * u * s * (1 + a * (1 - s)), rtol=1e-12, atol=1e-12)
    # chunked GELU is the whole-array kernel, row for row
    whole_y, whole_cache = nn.gelu_forward(x)
    np.testing.assert_array_equal(gy, whole_y)
    np.testing.assert_array_equal(dx, nn.gelu_backward(dy, whole_cache))


def test_rms_norm_with_training_buffers_equals_allocating():
    rng = np.random.default_rng(0)
    x, g, dy = rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal((3, 5))
    y, cache = nn.rms_norm_forward(x, g, 1e-5)
    y2, cache2 = nn.rms_norm_forward(x, g, 1e-5, out=np.empty_like(x), xhat_out=np.empty_like(x))
    np.testing.assert_array_equal(y2, y)
    dx, dg = nn.rms_norm_backward(dy, cache)
    dx2, dg2 = nn.rms_norm_backward(dy.copy(), cache2, out=None)
    buf = dy.copy()
    dx3, _ = nn.rms_norm_backward(buf, cache2, out=buf)  # in place
    assert dx3 is buf
    for got in (dx2, dx3):
        np.testing.assert_array_equal(got, dx)
    np.testing.assert_array_equal(dg2, dg)


@settings(max_examples=examples(25), deadline=None)
@given(a=archs, B=st.integers(1, 3), T=st.integers(1, 6))
def test_block_with_buffers_and_scratch_equals_plain(a, B, T):
    model = arch_model(a)
    cfg, p = model.config, model._block_params[0]
    rng = np.random.default_rng(a["seed"])
    x = rng.standard_normal((B, T, cfg.n_embd))
    dy = rng.standard_normal(x.shape)
    y, cache = block_forward(x.copy(), p, cfg, model._ropes[0])
    g = {k: np.zeros_like(v) for k, v in p.items()}
    dx = block_backward(dy.copy(), cache, g, cfg, model._ropes[0])
    buffers, scratch = TrainBuffers(x.dtype), TrainBuffers(x.dtype)
    for _ in range(2):  # the second round reuses every array
        y2, cache2 = block_forward(x.copy(), p, cfg, model._ropes[0], buffers=buffers)
        g2 = {k: np.full_like(v, np.nan) for k, v in p.items()}
        dx2 = block_backward(dy.copy(), cache2, g2, cfg, model._ropes[0], scratch=scratch)
        np.testing.assert_allclose(y2, y, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(dx2, dx, rtol=1e-12, atol=1e-12)
        for k in g:
            np.testing.assert_allclose(g2[k], g[k], rtol=1e-12, atol=1e-12, err_msg=k)


@settings(max_examples=examples(15), deadline=None)
@given(a=archs, shapes=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 5)), min_size=2, max_size=4))
def test_steps_reusing_buffers_equal_fresh_steps(a, shapes):
    """Steps of changing batch shapes on one model (arrays reused or reshaped) give what a
    fresh model gives on each batch alone; release_buffers drops them."""
    kept = arch_model(a)
    rng = np.random.default_rng(a["seed"])
    for B, T in shapes:
        batch = rng.integers(0, 11, size=(B, T + 1))
        loss, grads = kept.loss_and_grads(batch)
        fresh_loss, fresh = arch_model(a).loss_and_grads(batch)
        assert loss == pytest.approx(fresh_loss, rel=1e-13)
        for k in fresh:
            np.testing.assert_allclose(grads[k], fresh[k], rtol=1e-12, atol=1e-13, err_msg=k)
    assert "_train_buffers" in kept.__dict__
    backward.release_buffers(kept)
    assert "_train_buffers" not in kept.__dict__
    kept.loss_and_grads(rng.integers(0, 11, size=(2, 4)))


def test_a_step_touches_no_new_memory_after_the_first():
    """The arrays of a step are the ones of the previous step (same shape): none is allocated."""
    a = {"norm": "layernorm", "mlp": "gelu_tanh", "positions": "learned", "rotary_fraction": 1.0,
         "rope_scaling": None, "kv": 4, "bias": True, "qkv_bias": None, "mlp_bias": None,
         "parallel_residual": False, "tie_weights": True, "mlp_hidden": None, "seed": 0}
    model = arch_model(a)
    batch = np.random.default_rng(0).integers(0, 11, size=(2, 6))
    model.loss_and_grads(batch)
    before = [{k: v for k, v in b.arrays.items()} for b in model.__dict__["_train_buffers"][0]]
    model.loss_and_grads(batch)
    after = model.__dict__["_train_buffers"][0]
    assert all(b.arrays[k] is v for b, old in zip(after, before) for k, v in old.items())
    assert [set(b.arrays) for b in after] == [set(b) for b in before]
