"""nn pairs of modern decoders: RMSNorm, exact GELU, SwiGLU, rotary, grouped-query attention.
Each backward against float64 central differences; invariants as properties."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nn_reference as ref
from budget import examples
from seqprob import nn


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = f()
        flat[i] = old - eps
        lo = f()
        flat[i] = old
        gflat[i] = (hi - lo) / (2 * eps)
    return g


seeds = st.integers(0, 10_000)


@settings(max_examples=examples(20), deadline=None)
@given(seed=seeds, C=st.integers(1, 6))
def test_rms_norm_backward(seed, C):
    rng = np.random.default_rng(seed)
    x, g, w = rng.standard_normal((2, 3, C)), rng.standard_normal(C), rng.standard_normal((2, 3, C))
    y, cache = nn.rms_norm_forward(x, g, 1e-5)
    dx, dg = nn.rms_norm_backward(w, cache)
    loss = lambda: float((nn.rms_norm_forward(x, g, 1e-5)[0] * w).sum())  # noqa: E731
    np.testing.assert_allclose(dx, numeric_grad(loss, x), atol=1e-6)
    np.testing.assert_allclose(dg, numeric_grad(loss, g), atol=1e-6)
    row = nn.rms_norm_row(x[0, 0], g, 1e-5)
    np.testing.assert_allclose(row, y[0, 0], atol=1e-14)


@settings(max_examples=examples(20), deadline=None)
@given(seed=seeds)
def test_gelu_erf_and_swiglu_backward(seed):
    rng = np.random.default_rng(seed)
    x, w = 3 * rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    _, cache = nn.gelu_erf_forward(x)
    loss = lambda: float((nn.gelu_erf_forward(x)[0] * w).sum())  # noqa: E731
    np.testing.assert_allclose(nn.gelu_erf_backward(w, cache), numeric_grad(loss, x), atol=1e-6)
    w2 = w[:, :2]
    _, cache = nn.swiglu_forward(x)
    loss = lambda: float((nn.swiglu_forward(x)[0] * w2).sum())  # noqa: E731
    np.testing.assert_allclose(nn.swiglu_backward(w2, cache), numeric_grad(loss, x), atol=1e-6)


def test_gelu_erf_known_values_and_swiglu_extremes():
    y, _ = nn.gelu_erf_forward(np.array([-1.0, 0.0, 1.0]))
    np.testing.assert_allclose(y, [-0.15865525393145707, 0.0, 0.8413447460685429], atol=1e-15)
    y, _ = nn.swiglu_forward(np.array([[-1000.0, 1000.0, 2.0, 3.0]], dtype=np.float32))
    assert np.isfinite(y).all() and y[0, 0] == 0.0 and y[0, 1] == pytest.approx(3000.0)


@settings(max_examples=examples(20), deadline=None)
@given(seed=seeds, r=st.integers(1, 3), extra=st.integers(0, 2))
def test_rotary_is_a_rotation_and_its_backward_the_inverse(seed, r, extra):
    rng = np.random.default_rng(seed)
    hd, T = 2 * r + extra, 5
    x = rng.standard_normal((2, T, hd))
    ang = rng.standard_normal((T, r)) * 3
    cos, sin = np.cos(ang), np.sin(ang)
    y = nn.rotary_forward(x, cos, sin)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), atol=1e-12)
    np.testing.assert_allclose(nn.rotary_backward(y, cos, sin), x, atol=1e-12)
    np.testing.assert_array_equal(y[..., 2 * r:], x[..., 2 * r:])


@settings(max_examples=examples(15), deadline=None)
@given(seed=seeds, B=st.integers(1, 2), Hkv=st.integers(1, 2), G=st.integers(1, 3), T=st.integers(1, 5))
def test_grouped_attention_backward_and_group_sharing(seed, B, Hkv, G, T):
    rng = np.random.default_rng(seed)
    hd, H = 3, Hkv * G
    q = rng.standard_normal((B, H, T, hd))
    k, v = rng.standard_normal((B, Hkv, T, hd)), rng.standard_normal((B, Hkv, T, hd))
    w = rng.standard_normal((B, T, H * hd))
    y, cache = nn.grouped_attention_forward(q, k, v, q_block=2)
    dq, dk, dv = nn.grouped_attention_backward(w, cache)
    loss = lambda: float((nn.grouped_attention_forward(q, k, v, q_block=2)[0] * w).sum())  # noqa: E731
    for got, arr in ((dq, q), (dk, k), (dv, v)):
        np.testing.assert_allclose(got, numeric_grad(loss, arr), atol=1e-6)
    # repeating each kv head G times gives multi-head attention (the reference); the gradient of
    # a shared kv head is the sum over its group
    kr, vr = np.repeat(k, G, axis=1), np.repeat(v, G, axis=1)
    qkv = np.concatenate([z.transpose(0, 2, 1, 3).reshape(B, T, H * hd) for z in (q, kr, vr)], axis=-1)
    want, ref_cache = ref.attention_forward(qkv, H)
    np.testing.assert_allclose(y, want, atol=1e-12)
    ref_dq, ref_dk, ref_dv = ref.split_heads(ref.attention_backward(w, ref_cache), H)
    fold = lambda a: a.reshape(B, Hkv, G, T, hd).sum(axis=2)  # noqa: E731
    for got, want in ((dq, ref_dq), (dk, fold(ref_dk)), (dv, fold(ref_dv))):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_one_query_decoding_path_equals_the_general_path():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((1, 4, 1, 3)), rng.standard_normal((1, 2, 6, 3)), rng.standard_normal((1, 2, 6, 3))
    fast = nn.grouped_attention_forward(q, k, v, out=np.empty((1, 1, 12)))[0]
    general, _ = nn.grouped_attention_forward(q, k, v)
    np.testing.assert_allclose(fast, general, atol=1e-14)


def _naive_attention(q, k, v, scale, window, softcap):
    """Loops over heads and positions: softmax(cap(scale q kᵀ) + band mask) v, query head h
    reading key/value head h // G."""
    B, H, T, hd = q.shape
    G = H // k.shape[1]
    y = np.zeros((B, T, H * hd))
    for b in range(B):
        for h in range(H):
            s = scale * q[b, h] @ k[b, h // G].T
            if softcap is not None:
                s = softcap * np.tanh(s / softcap)
            i, j = np.indices(s.shape)
            s[(j > i) | ((j <= i - window) if window is not None else False)] = -np.inf
            p = np.exp(s - s.max(1, keepdims=True))
            y[b, :, h * hd:(h + 1) * hd] = (p / p.sum(1, keepdims=True)) @ v[b, h // G]
    return y


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 999), T=st.integers(1, 9), G=st.sampled_from([1, 2]), window=st.sampled_from([None, 1, 2, 4, 20]),
       softcap=st.sampled_from([None, 1.5]), scale=st.sampled_from([None, 0.3]), q_block=st.integers(1, 4))
def test_attention_options_match_a_loop_and_their_gradients(seed, T, G, window, softcap, scale, q_block):
    """Score scale, sliding window and soft-cap: training forward, inference forward and the
    one-query path against a loop; the backward against finite differences."""
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((2, 2 * G, T, 3)), rng.standard_normal((2, 2, T, 3)), rng.standard_normal((2, 2, T, 3))
    opts = dict(scale=scale, window=window, softcap=softcap)
    want = _naive_attention(q, k, v, 1 / np.sqrt(3) if scale is None else scale, window, softcap)
    y, cache = nn.grouped_attention_forward(q, k, v, q_block=q_block, **opts)
    np.testing.assert_allclose(y, want, atol=1e-12)
    y2 = nn.causal_attention_inference(q, k, v, out=np.empty_like(y), q_block=q_block, **opts)
    np.testing.assert_allclose(y2, want, atol=1e-12)
    last = nn.grouped_attention_forward(q[:1, :, -1:], k[:1], v[:1], out=np.empty((1, 1, 2 * G * 3)), **opts)[0]
    np.testing.assert_allclose(last[0, 0], want[0, -1], atol=1e-12)
    dy = rng.standard_normal(y.shape)
    dq, dk, dv = nn.grouped_attention_backward(dy, cache, q_block=q_block)

    def loss(q_, k_, v_):
        return float((nn.grouped_attention_forward(q_, k_, v_, **opts)[0] * dy).sum())

    np.testing.assert_allclose(dq, numeric_grad(lambda: loss(q, k, v), q), atol=1e-6)
    np.testing.assert_allclose(dk, numeric_grad(lambda: loss(q, k, v), k), atol=1e-6)
    np.testing.assert_allclose(dv, numeric_grad(lambda: loss(q, k, v), v), atol=1e-6)


@settings(max_examples=examples(20), deadline=None)
@given(seed=st.integers(0, 999), cap=st.floats(0.5, 5.0))
def test_geglu_and_softcap_backward_match_finite_differences(seed, cap):
    rng = np.random.default_rng(seed)
    gu, dy = rng.standard_normal((3, 8)), rng.standard_normal((3, 4))
    y, cache = nn.geglu_forward(gu)
    np.testing.assert_allclose(y, nn.gelu_forward(gu[:, :4])[0] * gu[:, 4:], atol=1e-15)
    np.testing.assert_allclose(nn.geglu_backward(dy, cache),
                               numeric_grad(lambda: float((nn.geglu_forward(gu)[0] * dy).sum()), gu), atol=1e-7)
    x, d = 4 * rng.standard_normal(5), rng.standard_normal(5)
    capped = nn.softcap_forward(x, cap)
    assert np.all(np.abs(capped) <= cap)
    np.testing.assert_allclose(nn.softcap_backward(d, capped, cap),
                               numeric_grad(lambda: float((nn.softcap_forward(x, cap) * d).sum()), x), atol=1e-7)
