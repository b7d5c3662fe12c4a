"""Neural-network layers as pure ``*_forward`` / ``*_backward`` pairs (numpy, no autograd).

Each forward returns its output and a ``cache`` tuple holding what the backward needs; each
backward takes the upstream gradient and that cache and returns the input and parameter
gradients. No state lives here: the model owns parameters and buffers and passes them in.
Optional ``out=`` arguments let a caller reuse preallocated buffers (a speed detail only:
results are the same). Shapes: ``N`` rows (``B*T`` flattened), width ``C``, ``H`` heads.

Examples
--------
>>> x = np.ones((2, 3)); W = np.eye(3); b = np.zeros(3)
>>> y, cache = linear_forward(x, W, b)
>>> dx, dW, db = linear_backward(np.ones((2, 3)), cache)
>>> dx.shape, dW.shape, db.shape
((2, 3), (3, 3), (3,))
"""
from __future__ import annotations

import math

import numpy as np

__all__ = [
    "embedding_forward", "embedding_backward", "layer_norm_forward", "layer_norm_backward",
    "linear_forward", "linear_backward", "gelu_forward", "gelu_backward", "split_heads",
    "attention_forward", "attention_backward", "cross_entropy_forward", "cross_entropy_backward", "cross_entropy_fused",
    "causal_mask", "softmax_inplace", "log_softmax_inplace", "dropout_forward", "dropout_backward",
]

GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


def embedding_forward(ids, W, out=None):
    """Rows of the table: ``out[..., :] = W[ids]``. ids (...,) int, W (V, C) -> (..., C)."""
    return np.take(W, ids, axis=0, out=out), (ids, W.shape[0])


def embedding_backward(dout, cache, out=None):
    """dW[v] = Σ dout over the positions holding id v; adds into ``out`` when given."""
    ids, vocab = cache
    if out is None:
        out = np.zeros((vocab, dout.shape[-1]), dtype=dout.dtype)
    np.add.at(out, ids.ravel(), dout.reshape(-1, dout.shape[-1]))
    return out


def layer_norm_forward(x, g, b, eps=1e-5, out=None, xhat_out=None):
    """LayerNorm over the last axis: biased variance, eps inside the square root.

    ``b`` may be None (no bias). Passing ``xhat_out=out`` saves a buffer when no backward
    will follow (the cached x̂ is then overwritten by y).

    Notes
    -----
    y = (x - mean) / sqrt(var + eps) * g + b.
    """
    mean = x.mean(axis=-1, keepdims=True)
    xhat = np.subtract(x, mean, out=xhat_out)  # (..., C)
    var = np.einsum("...i,...i->...", xhat, xhat)[..., None]
    var *= 1.0 / x.shape[-1]
    var += eps
    rstd = np.sqrt(var, out=var)
    np.divide(1.0, rstd, out=rstd)
    xhat *= rstd
    y = np.multiply(xhat, g, out=out)
    if b is not None:
        y += b
    return y, (xhat, rstd, g)


def layer_norm_backward(dy, cache, out=None):
    """Gradients of LayerNorm: returns (dx, dg, db).

    Notes
    -----
    With ĝ = dy * g: dx = rstd * (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)).
    """
    xhat, rstd, g = cache
    C = xhat.shape[-1]
    rows_dy, rows_xhat = dy.reshape(-1, C), xhat.reshape(-1, C)
    dg = np.einsum("ni,ni->i", rows_dy, rows_xhat)
    db = rows_dy.sum(axis=0)
    dxhat = np.multiply(dy, g, out=out)
    m1 = dxhat.mean(axis=-1, keepdims=True)
    m2 = np.einsum("...i,...i->...", dxhat, xhat)[..., None]
    m2 *= 1.0 / C
    dxhat -= m1
    dxhat -= xhat * m2
    dxhat *= rstd
    return dxhat, dg, db


def linear_forward(x, W, b=None, out=None):
    """y = x @ W + b with W stored ``[in, out]`` (GPT-2's Conv1D layout); x (..., in).

    A C-contiguous x is multiplied as one 2-D GEMM ``(N, in) @ (in, out)``.
    """
    x2 = x.reshape(-1, x.shape[-1])
    out2 = None if out is None else out.reshape(-1, W.shape[1])
    y = np.matmul(x2, W, out=out2)
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], W.shape[1]), (x, W, b is not None)


def linear_backward(dy, cache, dW_out=None, db_out=None, dx_out=None):
    """Returns (dx, dW, db): dx = dy Wᵀ, dW = xᵀ dy, db = Σ dy (None without bias)."""
    x, W, has_bias = cache
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    dW = np.matmul(x2.T, dy2, out=dW_out)
    db = np.sum(dy2, axis=0, out=db_out) if has_bias else None
    dx_out2 = None if dx_out is None else dx_out.reshape(-1, W.shape[0])
    dx = np.matmul(dy2, W.T, out=dx_out2).reshape(x.shape)
    return dx, dW, db


def gelu_forward(x, out=None, tanh_out=None):
    """GELU, tanh approximation (GPT-2's ``gelu_new``). ``out`` may be ``x`` (in place) when
    no backward follows; the cache holds (x, tanh term).

    Notes
    -----
    gelu(x) = x/2 (1 + tanh(sqrt(2/π) (x + 0.044715 x³))).
    """
    t = np.multiply(x, x, out=tanh_out)
    t *= GELU_A * GELU_C
    t += GELU_C
    t *= x
    np.tanh(t, out=t)
    if out is x:  # in place: the tanh buffer becomes (1 + t)/2, then x *= it
        t *= 0.5
        t += 0.5
        x *= t
        return x, None
    y = np.multiply(t, 0.5, out=out)
    y += 0.5
    y *= x
    return y, (x, t)


def gelu_backward(dy, cache, out=None):
    """dgelu/dx = (1 + t)/2 + x/2 (1 - t²) sqrt(2/π) (1 + 3·0.044715 x²), t the cached tanh."""
    x, t = cache
    inner = x * x
    inner *= 3 * GELU_A * 0.5 * GELU_C
    inner += 0.5 * GELU_C
    inner *= x
    d = np.multiply(t, t, out=out)
    np.subtract(1.0, d, out=d)
    d *= inner
    d += 0.5
    d += 0.5 * t
    d *= dy
    return d


def split_heads(qkv, n_head):
    """Views q, k, v of shape (B, H, T, hd) into a fused (B, T, 3C) ``[q | k | v]`` array."""
    B, T, C3 = qkv.shape
    hd = C3 // (3 * n_head)
    q, k, v = qkv.reshape(B, T, 3, n_head, hd).transpose(2, 0, 3, 1, 4)
    return q, k, v


_MASKS: dict = {}


def causal_mask(T, dtype, offset=0):
    """(T, T + offset) additive mask: 0 where key j <= query i + offset, -inf above."""
    key = (T, offset, np.dtype(dtype).str)
    if key not in _MASKS:
        if len(_MASKS) > 32:
            _MASKS.clear()
        m = np.triu(np.full((T, T + offset), -np.inf, dtype=dtype), k=1 + offset)
        m.flags.writeable = False
        _MASKS[key] = m
    return _MASKS[key]


def softmax_inplace(s):
    """Softmax over the last axis, overwriting ``s`` (-inf entries become 0)."""
    m = s.max(axis=-1, keepdims=True)
    s -= m
    np.exp(s, out=s)
    m = s.sum(axis=-1, keepdims=True, out=m)
    s /= m
    return s


def log_softmax_inplace(u, tmp=None):
    """Log-softmax over the last axis, overwriting ``u``; ``tmp`` is an optional scratch buffer."""
    m = u.max(axis=-1, keepdims=True)
    u -= m
    e = np.exp(u, out=tmp)
    lse = np.log(e.sum(axis=-1, keepdims=True, out=m), out=m)
    u -= lse
    return u


def attention_forward(qkv, n_head, out=None, probs_out=None, q_block=128):
    """Causal multi-head self-attention on a fused qkv (B, T, 3C) -> y (B, T, C).

    Works one sequence and one block of ``q_block`` queries at a time, so the scores stay
    in cache and key blocks entirely above the diagonal are never computed. The cache holds
    the full probabilities P (B, H, T, T) (written into ``probs_out`` when given).

    Notes
    -----
    P = softmax(q kᵀ / sqrt(hd) + mask) per head, y = P v, heads concatenated.
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    hd = C // n_head
    q, k, v = split_heads(qkv, n_head)  # (B, H, T, hd) strided views
    probs = np.empty((B, n_head, T, T), dtype=qkv.dtype) if probs_out is None else probs_out
    y = np.empty((B, T, C), dtype=qkv.dtype) if out is None else out
    yh = y.reshape(B, T, n_head, hd).transpose(0, 2, 1, 3)  # (B, H, T, hd) view of y
    mask = causal_mask(T, qkv.dtype)
    for b in range(B):
        for q0 in range(0, T, q_block):
            q1 = min(q0 + q_block, T)
            s = np.matmul(q[b, :, q0:q1], k[b, :, :q1].transpose(0, 2, 1), out=probs[b, :, q0:q1, :q1])
            s *= 1.0 / math.sqrt(hd)
            s += mask[q0:q1, :q1]
            softmax_inplace(s)  # (H, tq, q1)
            np.matmul(s, v[b, :, :q1], out=yh[b, :, q0:q1])
        for q0 in range(0, T - q_block, q_block):
            probs[b, :, q0:q0 + q_block, q0 + q_block:] = 0.0
    return y, (qkv, probs, n_head)


def attention_backward(dy, cache, out=None, scratch=None):
    """Gradient of :func:`attention_forward` with respect to the fused qkv: (B, T, 3C).

    Notes
    -----
    dP = dy vᵀ, dv = Pᵀ dy, dS = P ∘ (dP - Σ_j dP∘P), dq = dS k / sqrt(hd), dk = dSᵀ q / sqrt(hd).
    """
    qkv, probs, n_head = cache
    B, T, C3 = qkv.shape
    hd = C3 // (3 * n_head)
    q, k, v = split_heads(qkv, n_head)
    dqkv = np.empty_like(qkv) if out is None else out
    dq, dk, dv = split_heads(dqkv, n_head)
    dyh = dy.reshape(B, T, n_head, hd).transpose(0, 2, 1, 3)  # (B, H, T, hd)
    dP = np.matmul(dyh, v.transpose(0, 1, 3, 2), out=scratch)  # (B, H, T, T)
    np.matmul(probs.transpose(0, 1, 3, 2), dyh, out=dv)
    dot = np.einsum("bhij,bhij->bhi", dP, probs)[..., None]
    dP -= dot
    dP *= probs
    dP *= 1.0 / math.sqrt(hd)
    np.matmul(dP, k, out=dq)
    np.matmul(dP.transpose(0, 1, 3, 2), q, out=dk)
    return dqkv


def cross_entropy_forward(logits, targets, mask=None, inplace=False):
    """Mean negative log-likelihood of ``targets`` under softmax(logits).

    Parameters
    ----------
    logits : (N, V) float
    targets : (N,) int
    mask : (N,) bool, optional
        Only rows where mask is True count (padding); the mean is over those rows.
    inplace : bool
        Overwrite ``logits`` with the log-probabilities (saves an (N, V) buffer).

    Notes
    -----
    loss = -(1/n) Σ_i log softmax(u_i)[y_i], n = number of counted rows.
    """
    logp = log_softmax_inplace(logits if inplace else logits.copy())
    picked = np.take_along_axis(logp, targets[:, None], axis=-1)[:, 0]  # (N,)
    weights = np.ones(len(targets), dtype=logp.dtype) if mask is None else mask.astype(logp.dtype)
    count = max(float(weights.sum()), 1.0)
    loss = -float(np.dot(picked.astype(np.float64), weights)) / count
    return loss, (logp, targets, weights / count)


def cross_entropy_backward(cache, inplace=False):
    """dloss/dlogits = w_i (softmax(u_i) - onehot(y_i)); overwrites the cached log-probs if inplace."""
    logp, targets, w = cache
    grad = np.exp(logp, out=logp if inplace else None)
    grad[np.arange(len(targets)), targets] -= 1.0
    grad *= w[:, None]
    return grad


def cross_entropy_fused(logits, targets, mask=None, chunk=128):
    """Loss and gradient of :func:`cross_entropy_forward` in one pass over row chunks.

    Overwrites ``logits`` (N, V) with dloss/dlogits (no second (N, V) buffer, each chunk
    stays in cache). Returns ``(loss, grad)``; same values as the forward/backward pair.
    """
    N = len(targets)
    w = np.ones(N, dtype=logits.dtype) if mask is None else mask.astype(logits.dtype)
    w /= max(float(w.sum()), 1.0)
    total = 0.0
    for i in range(0, N, chunk):
        u, t, wc = logits[i:i + chunk], targets[i:i + chunk], w[i:i + chunk]
        rows = np.arange(len(t))
        u -= u.max(axis=-1, keepdims=True)
        picked = u[rows, t]  # u_t - max
        np.exp(u, out=u)
        s = u.sum(axis=-1)
        total -= float(np.dot((picked - np.log(s)).astype(np.float64), wc))
        u *= (wc / s)[:, None]
        u[rows, t] -= wc
    return total, logits


def dropout_forward(x, p, rng):
    """Inverted dropout: zero each entry with probability p, scale the rest by 1/(1-p).

    ``rng`` None or p == 0 is the identity (evaluation); the cache is the scaled keep-mask.
    """
    if rng is None or p == 0.0:
        return x, None
    keep = (rng.random(x.shape) >= p).astype(x.dtype)
    keep *= 1.0 / (1.0 - p)
    return x * keep, keep


def dropout_backward(dy, cache):
    """dx = dy * mask / (1 - p) (the identity when no dropout was applied)."""
    return dy if cache is None else dy * cache


# --------------------------------------------------------------------------- modern decoders
# Pairs for Llama / Qwen2 / GPT-NeoX style blocks: RMSNorm, exact GELU, SwiGLU, rotary
# positions and grouped-query attention (GPT-2's multi-head attention is the case G = 1).

__all__ += ["rms_norm_forward", "rms_norm_backward", "gelu_erf_forward", "gelu_erf_backward",
            "swiglu_forward", "swiglu_backward", "rotary_forward", "rotary_backward",
            "grouped_attention_forward", "grouped_attention_backward", "layer_norm_row",
            "rms_norm_row"]


def rms_norm_forward(x, g, eps=1e-6, out=None):
    """RMSNorm over the last axis (Llama): no mean subtraction, no bias. With ``out`` the
    result is written there and no cache is returned (no backward can follow).

    Notes
    -----
    y = x / sqrt(mean(x²) + eps) * g.

    Examples
    --------
    >>> y, _ = rms_norm_forward(np.array([[3.0, 4.0]]), np.ones(2), eps=0.0)
    >>> np.round(y, 4).tolist()
    [[0.8485, 1.1314]]
    """
    ms = np.einsum("...i,...i->...", x, x)[..., None]  # (..., 1)
    ms *= 1.0 / x.shape[-1]
    ms += eps
    rstd = np.sqrt(ms, out=ms)
    np.divide(1.0, rstd, out=rstd)
    if out is not None:  # inference: x̂ is not kept
        y = np.multiply(x, rstd, out=out)
        y *= g
        return y, None
    xhat = x * rstd  # (..., C)
    y = xhat * g
    return y, (xhat, rstd, g)


def rms_norm_backward(dy, cache):
    """Gradients of RMSNorm: returns (dx, dg).

    Notes
    -----
    With ĝ = dy * g: dx = rstd * (ĝ - x̂ mean(ĝ x̂)), dg = Σ dy x̂.
    """
    xhat, rstd, g = cache
    C = xhat.shape[-1]
    dg = np.einsum("ni,ni->i", dy.reshape(-1, C), xhat.reshape(-1, C))
    dxhat = dy * g
    m = np.einsum("...i,...i->...", dxhat, xhat)[..., None]
    m *= 1.0 / C
    dxhat -= xhat * m
    dxhat *= rstd
    return dxhat, dg


def gelu_erf_forward(x, out=None):
    """Exact GELU (GPT-NeoX, BERT): x Φ(x) with the normal CDF Φ. ``out`` may be ``x``
    when no backward follows.

    Notes
    -----
    gelu(x) = x/2 (1 + erf(x / sqrt(2))); its derivative is Φ(x) + x φ(x).
    """
    from scipy.special import erf
    phi = erf(x * (1.0 / math.sqrt(2.0)))  # (...,)
    phi *= 0.5
    phi += 0.5
    cache = None if out is x else (x, phi)
    return np.multiply(x, phi, out=out), cache


def gelu_erf_backward(dy, cache):
    """dgelu/dx = Φ(x) + x exp(-x²/2) / sqrt(2π), Φ the cached normal CDF."""
    x, phi = cache
    d = np.exp(-0.5 * x * x)
    d *= x * (1.0 / math.sqrt(2.0 * math.pi))
    d += phi
    d *= dy
    return d


def swiglu_forward(gu, out=None):
    """SwiGLU of a fused ``[gate | up]`` array (..., 2F) -> (..., F): silu(gate) * up.

    Notes
    -----
    silu(a) = a σ(a), σ(a) = 1 / (1 + exp(-a)); Llama's MLP is down(silu(gate(x)) * up(x)).

    Examples
    --------
    >>> y, _ = swiglu_forward(np.array([[0.0, 2.0]]))
    >>> y.tolist()
    [[0.0]]
    """
    F = gu.shape[-1] // 2
    gate, up = gu[..., :F], gu[..., F:]
    sig = np.negative(gate)
    with np.errstate(over="ignore"):  # exp(-gate) = inf gives σ = 0, as it should
        np.exp(sig, out=sig)
    sig += 1.0
    np.reciprocal(sig, out=sig)  # σ(gate)
    y = np.multiply(gate, sig, out=out)
    y *= up
    return y, (gu, sig)


def swiglu_backward(dy, cache):
    """Gradient with respect to ``[gate | up]``: (..., 2F).

    Notes
    -----
    d up = dy silu(a); d gate = dy up σ(a) (1 + a (1 - σ(a))).
    """
    gu, sig = cache
    F = gu.shape[-1] // 2
    gate, up = gu[..., :F], gu[..., F:]
    dgu = np.empty_like(gu)
    silu = gate * sig
    np.multiply(dy, silu, out=dgu[..., F:])
    d = np.subtract(1.0, sig)
    d *= gate
    d += 1.0
    d *= sig
    d *= up
    np.multiply(d, dy, out=dgu[..., :F])
    return dgu


def rotary_forward(x, cos, sin, out=None):
    """Rotary position embedding (HF "rotate_half" convention) of the first ``2 r`` dims.

    Parameters
    ----------
    x : (..., T, hd)
    cos, sin : (T, r)
        cos(p θ_i), sin(p θ_i) of each position p and frequency θ_i; dims ``2 r .. hd`` pass
        through unchanged (GPT-NeoX partial rotary).

    Notes
    -----
    With x₁ = x[..., :r], x₂ = x[..., r:2r]: y₁ = x₁ cos - x₂ sin, y₂ = x₂ cos + x₁ sin
    (= x cos + rotate_half(x) sin). The backward is the rotation by -θ.
    """
    r = cos.shape[-1]
    y = np.empty(x.shape, dtype=x.dtype) if out is None else out
    x1, x2 = x[..., :r], x[..., r:2 * r]
    np.multiply(x1, cos, out=y[..., :r])
    y[..., :r] -= x2 * sin
    np.multiply(x2, cos, out=y[..., r:2 * r])
    y[..., r:2 * r] += x1 * sin
    if 2 * r < x.shape[-1]:
        y[..., 2 * r:] = x[..., 2 * r:]
    return y


def rotary_backward(dy, cos, sin, out=None):
    """Gradient of :func:`rotary_forward` (the inverse rotation applied to ``dy``)."""
    return rotary_forward(dy, cos, -sin, out=out)


def grouped_attention_forward(q, k, v, out=None, probs_out=None, q_block=128):
    """Causal grouped-query attention: query head h reads key/value head h // G.

    Parameters
    ----------
    q : (B, H, Tq, hd)
        Queries of the last ``Tq`` positions (``Tq <= Tk``; decoding passes Tq = 1).
    k, v : (B, Hkv, Tk, hd)
        H = G Hkv (G = 1: multi-head attention, Hkv = 1: multi-query attention).
    out : (B, Tq, H hd), optional
    probs_out : (B, H, Tq, Tk), optional
        Receives the attention probabilities (zero above the diagonal).

    Returns
    -------
    y : (B, Tq, H hd)
        Heads concatenated.
    cache : tuple
        For :func:`grouped_attention_backward` (None in the decoding case B = Tq = 1 with
        ``out`` given and no ``probs_out``).

    Notes
    -----
    P = softmax(q kᵀ / sqrt(hd) + causal mask), y = P v, per query head with its group's k, v.
    Works one sequence and ``q_block`` queries at a time, so key blocks entirely above the
    diagonal are never computed.
    """
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G, off = H // Hkv, Tk - Tq
    if B == 1 and Tq == 1 and out is not None and probs_out is None:  # decoding: no cache
        return _attention_one_query(q, k, v, out), None
    probs = np.empty((B, H, Tq, Tk), dtype=q.dtype) if probs_out is None else probs_out
    y = np.empty((B, Tq, H * hd), dtype=q.dtype) if out is None else out
    # views (copy=False raises rather than silently writing into a copy)
    yg = np.reshape(y, (B, Tq, Hkv, G, hd), copy=False).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, Tq, hd)
    qg = q.reshape(B, Hkv, G, Tq, hd)
    pg = np.reshape(probs, (B, Hkv, G, Tq, Tk), copy=False)
    kt = k.transpose(0, 1, 3, 2)[:, :, None]  # (B, Hkv, 1, hd, Tk)
    vg = v[:, :, None]  # (B, Hkv, 1, Tk, hd)
    mask = causal_mask(Tq, q.dtype, offset=off) if Tq > 1 else None
    for b in range(B):
        for q0 in range(0, Tq, q_block):
            q1 = min(q0 + q_block, Tq)
            s = np.matmul(qg[b, :, :, q0:q1], kt[b, ..., :off + q1], out=pg[b, :, :, q0:q1, :off + q1])
            s *= 1.0 / math.sqrt(hd)
            if mask is not None:
                s += mask[q0:q1, :off + q1]
            softmax_inplace(s)  # (Hkv, G, tq, off + q1)
            np.matmul(s, vg[b, ..., :off + q1, :], out=yg[b, :, :, q0:q1])
            pg[b, :, :, q0:q1, off + q1:] = 0.0
    return y, (q, k, v, probs)


def _attention_one_query(q, k, v, out):
    """The decoding case of :func:`grouped_attention_forward` (B = Tq = 1: nothing is masked),
    with as few numpy calls as possible (batch-1 decoding is overhead-bound)."""
    _, H, _, hd = q.shape
    Hkv = k.shape[1]
    s = np.matmul(q.reshape(Hkv, H // Hkv, hd), k[0].transpose(0, 2, 1))  # (Hkv, G, Tk)
    s *= 1.0 / math.sqrt(hd)
    softmax_inplace(s)
    y = np.matmul(s, v[0])  # (Hkv, G, hd)
    out[...] = y.reshape(out.shape)
    return out


def layer_norm_row(x, g, b, eps=1e-5):
    """:func:`layer_norm_forward` of one vector x (C,) without a cache (the decoding path)."""
    xc = x - np.add.reduce(x) / len(x)
    y = xc * (g * (1.0 / math.sqrt(float(np.dot(xc, xc)) / len(x) + eps)))
    if b is not None:
        y += b
    return y


def rms_norm_row(x, g, eps=1e-6):
    """:func:`rms_norm_forward` of one vector x (C,) without a cache (the decoding path)."""
    return x * (g * (1.0 / math.sqrt(float(np.dot(x, x)) / len(x) + eps)))


def grouped_attention_backward(dy, cache):
    """Gradients of :func:`grouped_attention_forward`: returns (dq, dk, dv).

    Notes
    -----
    dP = dy vᵀ, dv = Σ_group Pᵀ dy, dS = P ∘ (dP - Σ_j dP∘P) / sqrt(hd), dq = dS k,
    dk = Σ_group dSᵀ q.
    """
    q, k, v, probs = cache
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G = H // Hkv
    dyg = dy.reshape(B, Tq, Hkv, G, hd).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, Tq, hd)
    pg = probs.reshape(B, Hkv, G, Tq, Tk)
    dP = np.matmul(dyg, v.transpose(0, 1, 3, 2)[:, :, None])  # (B, Hkv, G, Tq, Tk)
    dv = np.matmul(pg.transpose(0, 1, 2, 4, 3), dyg)  # (B, Hkv, G, Tk, hd)
    dot = np.einsum("bkgij,bkgij->bkgi", dP, pg)[..., None]
    dP -= dot
    dP *= pg
    dP *= 1.0 / math.sqrt(hd)
    dq = np.matmul(dP, k[:, :, None]).reshape(B, H, Tq, hd)
    dk = np.matmul(dP.transpose(0, 1, 2, 4, 3), q.reshape(B, Hkv, G, Tq, hd))  # (B, Hkv, G, Tk, hd)
    if G > 1:
        return dq, dk.sum(axis=2), dv.sum(axis=2)
    return dq, dk[:, :, 0], dv[:, :, 0]
