"""Every layer's hand-written backward against float64 central finite differences; the
library's attention and fused cross-entropy against the references of nn_reference."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nn_reference as ref
from budget import examples
from seqprob import nn
from seqprob.nn import linear, softmax

EPS = 1e-6


def numgrad(f, x):
    """Central finite differences of the scalar f() with respect to every entry of x."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + EPS
        hi = f()
        x[idx] = old - EPS
        lo = f()
        x[idx] = old
        g[idx] = (hi - lo) / (2 * EPS)
    return g


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 5))
seeds = st.integers(0, 2**16)


@settings(max_examples=examples(15))
@given(shape=shapes, n_out=st.integers(1, 4), bias=st.booleans(), seed=seeds)
def test_linear_backward(shape, n_out, bias, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    W = rng.standard_normal((shape[-1], n_out))
    b = rng.standard_normal(n_out) if bias else None
    R = rng.standard_normal(shape[:-1] + (n_out,))
    f = lambda: float((nn.linear_forward(x, W, b)[0] * R).sum())  # noqa: E731
    y, cache = nn.linear_forward(x, W, b)
    close(y, x @ W + (0 if b is None else b))
    dx, dW, db = nn.linear_backward(R, cache)
    close(dx, numgrad(f, x))
    close(dW, numgrad(f, W))
    if bias:
        close(db, numgrad(f, b))
    else:
        assert db is None


@settings(max_examples=examples(15))
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(2, 6)), bias=st.booleans(), seed=seeds)
def test_layer_norm_backward(shape, bias, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3 + 1
    g = rng.standard_normal(shape[-1])
    b = rng.standard_normal(shape[-1]) if bias else None
    R = rng.standard_normal(shape)
    f = lambda: float((nn.layer_norm_forward(x, g, b)[0] * R).sum())  # noqa: E731
    y, cache = nn.layer_norm_forward(x, g, b)
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + (0 if b is None else b)
    close(y, ref, 1e-12)
    dx, dg, db = nn.layer_norm_backward(R, cache)
    close(dx, numgrad(f, x), 1e-5)
    close(dg, numgrad(f, g), 1e-5)
    if bias:
        close(db, numgrad(f, b), 1e-5)


@settings(max_examples=examples(15))
@given(shape=shapes, seed=seeds)
def test_gelu_backward(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2
    R = rng.standard_normal(shape)
    f = lambda: float((nn.gelu_forward(x)[0] * R).sum())  # noqa: E731
    y, cache = nn.gelu_forward(x)
    close(y, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), 1e-12)
    close(nn.gelu_backward(R, cache), numgrad(f, x))


@pytest.mark.parametrize("shape", [(3, 5), (70, 1000), (2, 40, 3072)])
def test_gelu_in_place_without_a_tanh_buffer_is_bit_identical(shape):
    """In place and without ``tanh_out`` (the inference MLP) the tanh term lives in a scratch
    per row chunk: the same operations per element as with a whole tanh array, so the same
    bits, for arrays of one chunk and of many (70 x 1000 and 80 x 3072 cross the chunks)."""
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    expected, _ = nn.gelu_forward(x)
    y = x.copy()
    out, cache = nn.gelu_forward(y, out=y)
    assert out is y and cache is None
    np.testing.assert_array_equal(y, expected)


@settings(max_examples=examples(20), deadline=None)
@given(rows=st.integers(1, 400), width=st.integers(1, 40), pad=st.integers(1, 9), at=st.integers(0, 9),
       seed=st.integers(0, 99))
def test_passes_on_columns_of_a_wider_array_are_bit_identical(rows, width, pad, at, seed):
    """The inference workspace keeps buffers side by side as column ranges of one array
    (seqprob.gpt.block.make_workspace): GELU in place, SwiGLU and LayerNorm on such columns
    give the bits they give on a contiguous copy, and write nothing outside them."""
    at = min(at, pad)
    rng = np.random.default_rng(seed)
    wide = rng.standard_normal((2, rows, 2 * width + pad)).astype(np.float32)
    cols = wide[..., at:at + 2 * width]  # (2, rows, 2 width), rows strided
    outside = np.delete(wide, np.s_[at:at + 2 * width], axis=-1).copy()
    dense = cols.copy()
    assert nn._chunks.row_view(cols, 2 * width) is not None  # the chunked path, not the whole-array one
    g, b = rng.standard_normal((2, 2 * width)).astype(np.float32)
    np.testing.assert_array_equal(nn.layer_norm_forward(cols, g, b, out=np.empty_like(dense))[0],
                                  nn.layer_norm_forward(dense, g, b)[0])
    act = np.zeros((2, rows, width + pad), np.float32)
    np.testing.assert_array_equal(nn.swiglu_forward(cols, out=act[..., at:at + width])[0],
                                  nn.swiglu_forward(dense)[0])
    assert not np.delete(act, np.s_[at:at + width], axis=-1).any()
    half = wide[..., at:at + width]
    expected = nn.gelu_forward(half.copy())[0]
    nn.gelu_forward(half, out=half)
    np.testing.assert_array_equal(half, expected)
    np.testing.assert_array_equal(np.delete(wide, np.s_[at:at + 2 * width], axis=-1), outside)


def test_gelu_in_place_matches():
    x = np.linspace(-4, 4, 17)
    expected = nn.gelu_forward(x)[0]
    y = x.copy()
    nn.gelu_forward(y, out=y)
    close(y, expected, 1e-14)


@settings(max_examples=examples(15))
@given(B=st.integers(1, 2), T=st.integers(1, 5), H=st.integers(1, 3), hd=st.integers(1, 3), seed=seeds)
def test_attention_backward(B, T, H, hd, seed):
    """The reference multi-head attention against central differences, then the library's
    grouped-query kernels (one query head per key/value head) against the reference."""
    rng = np.random.default_rng(seed)
    qkv = rng.standard_normal((B, T, 3 * H * hd))
    R = rng.standard_normal((B, T, H * hd))
    y, cache = ref.attention_forward(qkv, H)
    f = lambda: float((ref.attention_forward(qkv, H)[0] * R).sum())  # noqa: E731
    dqkv = ref.attention_backward(R, cache)
    close(dqkv, numgrad(f, qkv))
    got, got_cache = nn.grouped_attention_forward(*ref.split_heads(qkv, H), q_block=2)
    close(got, y, 1e-12)
    for grad, want in zip(nn.grouped_attention_backward(R, got_cache, q_block=2), ref.split_heads(dqkv, H)):
        close(grad, want, 1e-12)


def test_attention_is_causal():
    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((1, 6, 12))
    y1 = nn.grouped_attention_forward(*ref.split_heads(qkv, 2))[0]
    qkv[0, 4:] += 10.0
    y2 = nn.grouped_attention_forward(*ref.split_heads(qkv, 2))[0]
    close(y1[0, :4], y2[0, :4], 1e-14)


@settings(max_examples=examples(15))
@given(N=st.integers(1, 6), V=st.integers(2, 7), masked=st.booleans(), seed=seeds)
def test_cross_entropy_backward(N, V, masked, seed):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((N, V)) * 3
    targets = rng.integers(0, V, N)
    mask = rng.random(N) > 0.3 if masked else None
    loss, cache = ref.cross_entropy_forward(logits, targets, mask)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    w = np.ones(N) if mask is None else mask.astype(float)
    assert loss == pytest.approx(-(logp[np.arange(N), targets] * w).sum() / max(w.sum(), 1), abs=1e-12)
    f = lambda: ref.cross_entropy_forward(logits, targets, mask)[0]  # noqa: E731
    grad = ref.cross_entropy_backward(cache)
    close(grad, numgrad(f, logits))
    fused_loss, fused_grad = nn.cross_entropy_fused(logits.copy(), targets, mask, chunk=2)
    assert fused_loss == pytest.approx(loss, abs=1e-12)
    close(fused_grad, grad, 1e-12)


@settings(max_examples=examples(10))
@given(N=st.integers(1, 8), V=st.integers(1, 5), C=st.integers(1, 3), seed=seeds)
def test_embedding_backward(N, V, C, seed):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((V, C))
    ids = rng.integers(0, V, (1, N))
    R = rng.standard_normal((1, N, C))
    y, cache = nn.embedding_forward(ids, W)
    close(y, W[ids], 0)
    f = lambda: float((nn.embedding_forward(ids, W)[0] * R).sum())  # noqa: E731
    close(nn.embedding_backward(R, cache), numgrad(f, W))


@settings(max_examples=examples(30))
@given(N=st.integers(0, 12), V=st.integers(1, 9), C=st.integers(1, 5), seed=seeds,
       sorted_min=st.sampled_from([0, linear.SORTED_SCATTER_MIN]), negative=st.booleans())
def test_embedding_column_major_table_agrees_with_row_major(N, V, C, seed, sorted_min, negative):
    """A column-major table (the GPT's tied W_U) gathers the same rows and adds the same
    gradient (ids repeated, negative ids as numpy reads them, an ``out`` that already holds
    values, a non-contiguous ``out``) as a row-major one, on both scatter paths."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((V, C))
    W_cols = np.asfortranarray(W)
    ids = rng.integers(-V if negative else 0, V, (2, N))
    R = rng.standard_normal((2, N, C))
    rows, cache = nn.embedding_forward(ids, W)
    out = np.full((N, 2, C), np.nan).transpose(1, 0, 2)  # (2, N, C), not contiguous
    got, cache_cols = nn.embedding_forward(ids, W_cols, out=out)
    assert got is out
    np.testing.assert_array_equal(got, rows)
    start = rng.standard_normal((V, C))
    want = nn.embedding_backward(R, cache, out=start.copy())
    into = np.asfortranarray(start)
    saved, linear.SORTED_SCATTER_MIN = linear.SORTED_SCATTER_MIN, sorted_min
    try:
        assert nn.embedding_backward(R, cache_cols, out=into) is into
    finally:
        linear.SORTED_SCATTER_MIN = saved
    close(into, want, 1e-12)


def test_embedding_forward_refuses_an_out_of_the_wrong_shape():
    W = np.asfortranarray(np.ones((5, 3)))
    for table in (W, np.ascontiguousarray(W)):
        with pytest.raises(ValueError):
            nn.embedding_forward(np.zeros((2, 3), dtype=int), table, out=np.empty((6, 3)))


def test_dropout_scales_and_masks():
    x = np.ones((200, 50))
    y, keep = nn.dropout_forward(x, 0.25, np.random.default_rng(0))
    assert set(np.unique(y)) <= {0.0, 1 / 0.75}
    assert abs((y == 0).mean() - 0.25) < 0.02
    close(nn.dropout_backward(np.ones_like(x), keep), y, 0)
    same, cache = nn.dropout_forward(x, 0.25, None)
    assert same is x and cache is None


def test_softmax_and_log_softmax_inplace():
    rng = np.random.default_rng(1)
    u = rng.standard_normal((3, 5)) * 50
    ref = u - np.log(np.exp(u - u.max(-1, keepdims=True)).sum(-1, keepdims=True)) - u.max(-1, keepdims=True)
    close(nn.log_softmax_inplace(u.copy()), ref, 1e-12)
    p = softmax.softmax_inplace(u.copy())
    close(p.sum(-1), np.ones(3), 1e-12)
    s = np.array([[0.0, -np.inf, -np.inf]])
    close(softmax.softmax_inplace(s), [[1.0, 0.0, 0.0]], 0)


def test_nn_package_imports_go_one_way_and_export_what_the_model_calls():
    """The modules of seqprob.nn import each other without a circle, the package re-exports
    exactly its ``__all__``, and the reference-only layers (multi-head attention on a fused
    qkv, the two-pass cross-entropy) live in the tests, not in the library."""
    import ast
    import graphlib
    from pathlib import Path

    folder = Path(nn.__file__).parent
    graph = {}
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        graph[path.stem] = {node.module for node in ast.walk(tree)
                            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}
    graph.pop("__init__")
    assert set().union(*graph.values()) <= set(graph)
    tuple(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a circle
    assert sorted(nn.__all__) == sorted(name for name in vars(nn) if not name.startswith("_")
                                        and callable(getattr(nn, name)))
    library = {name for module in graph for name in vars(__import__(f"seqprob.nn.{module}", fromlist=["_"]))}
    assert not {"attention_forward", "attention_backward", "split_heads", "cross_entropy_forward",
                "cross_entropy_backward"} & library


# ----------------------------------------------------------------------------- streamed softmax
def _split_points(data, V):
    cuts = sorted(set(data.draw(st.lists(st.integers(1, V - 1), max_size=5)))) if V > 1 else []
    return [0, *cuts, V]


@settings(max_examples=examples(40), deadline=None)
@given(N=st.integers(1, 5), V=st.integers(1, 40), scale=st.floats(0.01, 200), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(["float64", "float32"]), data=st.data())
def test_streamed_softmax_statistics_equal_one_pass(N, V, scale, seed, dtype, data):
    """Folding the logits in blocks cut anywhere gives the log-sum-exp, entropy and count of
    one pass over the whole row (scipy's logsumexp; entropy from the normalized row)."""
    from scipy.special import logsumexp

    u = (np.random.default_rng(seed).standard_normal((N, V)) * scale).astype(dtype)
    above = u[np.arange(N), np.random.default_rng(seed + 1).integers(0, V, N)]
    cuts = _split_points(data, V)
    m1, s1 = np.full(N, -np.inf), np.zeros(N)
    m2, s2, a2, n2 = np.full(N, -np.inf), np.zeros(N), np.zeros(N), np.zeros(N, np.int64)
    for lo, hi in zip(cuts, cuts[1:]):
        nn.logsumexp_update(u[:, lo:hi].copy(), m1, s1)
        nn.softmax_stats_update(u[:, lo:hi].copy(), above, m2, s2, a2, n2)
    u64 = u.astype(np.float64)
    lse = logsumexp(u64, axis=1)
    p = np.exp(u64 - lse[:, None])
    entropy = -(p * np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), 0.0)).sum(1)
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(m1 + np.log(s1), lse, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(m2 + np.log(s2), lse, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(np.log(s2) - a2 / s2, entropy, rtol=tol, atol=tol * max(1.0, scale))
    np.testing.assert_array_equal(n2, (u > above[:, None]).sum(1))


def test_streamed_softmax_statistics_of_a_known_row():
    u = np.log(np.array([[0.5, 0.25, 0.125, 0.125]]))
    m, s, a, n = np.full(1, -np.inf), np.zeros(1), np.zeros(1), np.zeros(1, np.int64)
    for lo, hi in ((0, 1), (1, 3), (3, 4)):
        nn.softmax_stats_update(u[:, lo:hi].copy(), u[:, 2], m, s, a, n)
    assert float(m[0] + np.log(s[0])) == pytest.approx(0.0, abs=1e-15)
    assert float((np.log(s) - a / s)[0] / np.log(2)) == pytest.approx(1.75, abs=1e-14)
    assert int(n[0]) == 2
