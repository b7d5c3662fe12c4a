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
import threading

import numpy as np

from . import _parallel

__all__ = [
    "is_column_major", "embedding_forward", "embedding_backward", "layer_norm_forward", "layer_norm_backward",
    "linear_forward", "linear_backward", "gelu_forward", "gelu_backward", "split_heads",
    "attention_forward", "attention_backward", "cross_entropy_forward", "cross_entropy_backward", "cross_entropy_fused",
    "causal_mask", "softmax_inplace", "log_softmax_inplace", "dropout_forward", "dropout_backward",
]

GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715
CHUNK = 1 << 15  # elements per cache-sized piece of a row-blocked elementwise pass (128 KiB float32)
WHOLE_MAX = 1 << 20  # elements up to which one thread runs a pass on the whole array; larger ones
# go chunk by chunk (GELU gradient of 2048 x 1024 2.2x faster chunked). At 2^18 the small forwards
# were within 5% either way, the Llama small training step 0.88-1.03 s against 0.76-0.78 s (A/B, 1 thread)
CHEAP_MIN_WORK = 1 << 20  # per thread, for passes without transcendentals (LayerNorm, bias add):
# below it the GIL hand-offs of many short ufunc calls on two threads cost more than they save


def _rows(a, width):
    """The (N, width) 2-D view of a C-contiguous array, or None (then work on it whole)."""
    return a.reshape(-1, width) if a is not None and a.flags.c_contiguous else None


def _by_chunks(fn, n_rows, width, min_work=None):
    """Run ``fn(lo, hi)`` over cache-sized row chunks, the chunks spread over the thread pool
    (or once over all rows when the work stays on one thread).

    Every row is computed by the same operations whatever the split, so the results do not
    depend on the chunk size or the number of threads. On one thread, arrays larger than
    ``WHOLE_MAX`` elements still run chunk by chunk: a multi-pass kernel (GELU and
    its gradient) then reads each chunk from cache instead of memory (measured 2.2x faster on
    the (2048, 1024) GELU gradient), the dozen Python calls per chunk costing far less.
    """
    step = max(1, CHUNK // max(width, 1))

    def run(lo, hi):
        for a in range(lo, hi, step):
            fn(a, min(a + step, hi))

    if _parallel.num_threads() <= 1 or n_rows * width < 2 * (min_work or _parallel.MIN_WORK):
        if n_rows * width <= WHOLE_MAX:
            return [fn(0, n_rows)]  # one thread, an array in L2: whole-array passes (fewest calls)
        return [run(0, n_rows)]  # one thread, a large array: each pass over a chunk still in cache
    return _parallel.for_row_blocks(run, n_rows, n_rows * width, min_work)


def is_column_major(a) -> bool:
    """Whether ``a`` is a column-major matrix (Fortran order, not also C-contiguous): how the
    GPT stores its unembedding (:func:`seqprob.gpt.params.column_major_names`)."""
    return np.ndim(a) == 2 and a.flags.f_contiguous and not a.flags.c_contiguous


SORTED_SCATTER_MIN = 1 << 22  # table elements from which the column-major scatter sums per id first


def embedding_forward(ids, W, out=None):
    """Rows of the table: ``out[..., :] = W[ids]``. ids (...,) int, W (V, C) -> (..., C).

    A column-major W (a tied unembedding, see :func:`seqprob.gpt.params.column_major_names`)
    is gathered as columns of its C-contiguous transpose, 8-12x the time of a row-major
    gather (``benchmarks/probe_unembedding_layout.py``: 3.2 against 0.41 ms for 2,048 ids
    of a 4096 x 256 table); ``np.take`` over its strided rows was slower still."""
    ids = np.asarray(ids)
    if not is_column_major(W) or ids.dtype.kind not in "iu":
        return np.take(W, ids, axis=0, out=out), (ids, W.shape[0])
    shape = ids.shape + (W.shape[1],)
    if out is None:
        out = np.empty(shape, dtype=W.dtype)
    elif out.shape != shape:
        raise ValueError(f"output array has shape {out.shape}, the gathered rows {shape}")
    rows = W.T[:, ids.reshape(-1)].T  # (N, C), a column-major temporary
    if out.flags.c_contiguous:
        out.reshape(rows.shape)[...] = rows  # a view: no second copy
    else:
        out[...] = rows.reshape(shape)
    return out, (ids, W.shape[0])


def embedding_backward(dout, cache, out=None):
    """dW[v] = Σ dout over the positions holding id v; adds into ``out`` when given.

    Into a large column-major ``out`` (``SORTED_SCATTER_MIN`` elements or more): the rows of
    each id are summed first (sorted, stable), then added once per distinct id through
    ``out.T`` (``np.add.at`` over the strided rows of a 50,257 x 768 table measured 1.4x
    slower; over a 4096 x 256 one 0.8x, so smaller tables keep it)."""
    ids, vocab = cache
    if out is None:
        out = np.zeros((vocab, dout.shape[-1]), dtype=dout.dtype)
    flat_ids, rows = np.ravel(ids), dout.reshape(-1, dout.shape[-1])  # (N,), (N, C)
    if (not is_column_major(out) or out.size < SORTED_SCATTER_MIN or not len(flat_ids)
            or flat_ids.dtype.kind not in "iu" or flat_ids.min() < 0):
        np.add.at(out, flat_ids, rows)  # also what gives negative ids numpy's meaning
        return out
    order = np.argsort(flat_ids, kind="stable")
    sorted_ids = flat_ids[order]
    first = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    sums = np.add.reduceat(rows[order], first, axis=0)  # (U, C)
    out.T[:, sorted_ids[first]] += sums.T
    return out


def layer_norm_forward(x, g, b, eps=1e-5, out=None, xhat_out=None):
    """LayerNorm over the last axis: biased variance, eps inside the square root.

    ``b`` may be None (no bias). Passing ``xhat_out=out`` saves a buffer when no backward
    will follow (the cached x̂ is then overwritten by y). Large inputs are normalized in
    cache-sized row chunks spread over the thread pool (same values).

    Notes
    -----
    y = (x - mean) / sqrt(var + eps) * g + b.
    """
    C = x.shape[-1]
    xhat = np.empty_like(x) if xhat_out is None else xhat_out  # (..., C)
    y = np.empty(x.shape, np.result_type(x, g, *([] if b is None else [b]))) if out is None else out
    rstd = np.empty(x.shape[:-1] + (1,), dtype=x.dtype)  # (..., 1)
    x2, xh2, y2, r2 = _rows(x, C), _rows(xhat, C), _rows(y, C), rstd.reshape(-1, 1)
    if x2 is None or xh2 is None or y2 is None:
        _layer_norm_rows(x, g, b, eps, xhat, rstd, y)
        return y, (xhat, rstd, g)

    def chunk(lo, hi):
        _layer_norm_rows(x2[lo:hi], g, b, eps, xh2[lo:hi], r2[lo:hi], y2[lo:hi])

    _by_chunks(chunk, len(x2), C, CHEAP_MIN_WORK)
    return y, (xhat, rstd, g)


def _layer_norm_rows(x, g, b, eps, xhat, rstd, y):
    """LayerNorm of rows x (n, C) into xhat, rstd (n, 1) and y (xhat may be y)."""
    mean = x.mean(axis=-1, keepdims=True)
    np.subtract(x, mean, out=xhat)  # (n, C)
    var = np.einsum("...i,...i->...", xhat, xhat, out=rstd[..., 0])[..., None]
    var *= 1.0 / x.shape[-1]
    var += eps
    np.sqrt(var, out=var)
    np.divide(1.0, var, out=var)
    xhat *= var
    np.multiply(xhat, g, out=y)
    if b is not None:
        y += b


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
    dx = np.empty_like(dy) if out is None else out
    dx2, dy2, xh2, r2 = _rows(dx, C), _rows(dy, C), _rows(xhat, C), rstd.reshape(-1, 1)
    if dx2 is None or dy2 is None or xh2 is None:
        _layer_norm_dx_rows(dy, g, xhat, rstd, dx)
        return dx, dg, db

    def chunk(lo, hi):
        _layer_norm_dx_rows(dy2[lo:hi], g, xh2[lo:hi], r2[lo:hi], dx2[lo:hi])

    _by_chunks(chunk, len(dx2), C, CHEAP_MIN_WORK)
    return dx, dg, db


def _layer_norm_dx_rows(dy, g, xhat, rstd, dx):
    """dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)), ĝ = dy g, for rows (n, C) (dx may be dy)."""
    C = xhat.shape[-1]
    np.multiply(dy, g, out=dx)
    m1 = dx.mean(axis=-1, keepdims=True)
    m2 = np.einsum("...i,...i->...", dx, xhat)[..., None]
    m2 *= 1.0 / C
    dx -= m1
    dx -= xhat * m2
    dx *= rstd


def linear_forward(x, W, b=None, out=None):
    """y = x @ W + b with W stored ``[in, out]`` (GPT-2's Conv1D layout); x (..., in).

    A C-contiguous x is multiplied as one 2-D GEMM ``(N, in) @ (in, out)``.
    """
    x2 = x.reshape(-1, x.shape[-1])
    out2 = None if out is None else out.reshape(-1, W.shape[1])
    y = np.matmul(x2, W, out=out2)  # (N, out)
    if b is not None:
        _add_rows(y, b)
    return y.reshape(*x.shape[:-1], W.shape[1]), (x, W, b is not None)


def _add_rows(y, b):
    """y += b for rows y (N, n), the rows spread over the thread pool."""
    def add(lo, hi):
        y[lo:hi] += b

    _parallel.for_row_blocks(add, len(y), y.size, CHEAP_MIN_WORK)


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
    no backward follows; the cache holds (x, tanh term). Large inputs run in cache-sized row
    chunks spread over the thread pool (same values).

    Notes
    -----
    gelu(x) = x/2 (1 + tanh(sqrt(2/π) (x + 0.044715 x³))).
    """
    inplace = out is x
    y = np.empty_like(x) if out is None else out
    t = np.empty_like(x) if tanh_out is None else tanh_out
    width = x.shape[-1] if x.ndim else 1
    x2, y2, t2 = _rows(x, width), _rows(y, width), _rows(t, width)
    if x2 is None or y2 is None or t2 is None:
        _gelu_rows(x, y, t, inplace)
    else:
        _by_chunks(lambda lo, hi: _gelu_rows(x2[lo:hi], y2[lo:hi], t2[lo:hi], inplace), len(x2), width)
    return (x, None) if inplace else (y, (x, t))


def _gelu_rows(x, y, t, inplace):
    """GELU of x into y (y may be x), t receiving the tanh term (overwritten if in place)."""
    np.multiply(x, x, out=t)
    t *= GELU_A * GELU_C
    t += GELU_C
    t *= x
    np.tanh(t, out=t)
    if inplace:  # the tanh buffer becomes (1 + t)/2, then x *= it
        t *= 0.5
        t += 0.5
        x *= t
        return
    np.multiply(t, 0.5, out=y)
    y += 0.5
    y *= x


def gelu_backward(dy, cache, out=None):
    """dgelu/dx = (1 + t)/2 + x/2 (1 - t²) sqrt(2/π) (1 + 3·0.044715 x²), t the cached tanh.

    ``out`` may be ``dy`` (in place).
    """
    x, t = cache
    d = np.empty_like(dy) if out is None else out
    width = x.shape[-1] if x.ndim else 1
    arrays = [_rows(a, width) for a in (dy, x, t, d)]
    if any(a is None for a in arrays):
        _gelu_grad_rows(dy, x, t, d)
        return d
    dy2, x2, t2, d2 = arrays
    _by_chunks(lambda lo, hi: _gelu_grad_rows(dy2[lo:hi], x2[lo:hi], t2[lo:hi], d2[lo:hi]), len(d2), width)
    return d


def _gelu_grad_rows(dy, x, t, d):
    inner = x * x
    inner *= 3 * GELU_A * 0.5 * GELU_C
    inner += 0.5 * GELU_C
    inner *= x
    g = np.multiply(t, t)
    np.subtract(1.0, g, out=g)
    g *= inner
    g += 0.5
    g += 0.5 * t
    np.multiply(g, dy, out=d)


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
    """Softmax over the last axis, overwriting ``s`` (-inf entries become 0).

    Large inputs run in row blocks over the thread pool (split along the first axis, so
    ``s`` may be any strided view).
    """
    if s.ndim < 2 or s.size < 2 * _parallel.MIN_WORK:
        return _softmax_rows(s)
    _parallel.for_row_blocks(lambda lo, hi: _softmax_rows(s[lo:hi]), len(s), s.size)
    return s


def _softmax_rows(s):
    m = s.max(axis=-1, keepdims=True)
    s -= m
    np.exp(s, out=s)
    m = s.sum(axis=-1, keepdims=True, out=m)
    s /= m
    return s


def log_softmax_inplace(u, tmp=None):
    """Log-softmax over the last axis, overwriting ``u``; ``tmp`` is an optional scratch buffer
    of ``u``'s shape. Large inputs run in row blocks over the thread pool (same values)."""
    if u.ndim < 2 or u.size < 2 * _parallel.MIN_WORK:
        return _log_softmax_rows(u, tmp)
    _parallel.for_row_blocks(
        lambda lo, hi: _log_softmax_rows(u[lo:hi], None if tmp is None else tmp[lo:hi]), len(u), u.size)
    return u


def _log_softmax_rows(u, tmp=None):
    m = u.max(axis=-1, keepdims=True)
    u -= m
    e = np.exp(u, out=tmp)
    lse = np.log(e.sum(axis=-1, keepdims=True, out=m), out=m)
    u -= lse
    return u


def attention_forward(qkv, n_head, out=None, probs_out=None, q_block=128):
    """Causal multi-head self-attention on a fused qkv (B, T, 3C) -> y (B, T, C).

    Works one sequence and one block of ``q_block`` queries at a time, so the scores stay
    in cache and key blocks entirely above the diagonal are never computed. The cache holds the full probabilities P (B, H, T, T)
    (written into ``probs_out`` when given).

    Notes
    -----
    P = softmax((q / sqrt(hd)) kᵀ + mask) per head, y = P v, heads concatenated.
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    hd = C // n_head
    q, k, v = split_heads(qkv, n_head)  # (B, H, T, hd) strided views
    probs = np.empty((B, n_head, T, T), dtype=qkv.dtype) if probs_out is None else probs_out
    y = np.empty((B, T, C), dtype=qkv.dtype) if out is None else out
    yh = y.reshape(B, T, n_head, hd).transpose(0, 2, 1, 3)  # (B, H, T, hd) view of y
    mask = causal_mask(T, qkv.dtype)
    scale = qkv.dtype.type(1.0 / math.sqrt(hd))
    for b in range(B):  # GEMMs here, on BLAS's own threads; elementwise work row-blocked
        qs = np.multiply(q[b], scale)  # (H, T, hd)
        for q0 in range(0, T, q_block):
            q1 = min(q0 + q_block, T)
            s = np.matmul(qs[:, q0:q1], k[b, :, :q1].transpose(0, 2, 1), out=probs[b, :, q0:q1, :q1])
            _masked_softmax(s, mask[q0:q1, :q1])  # (H, tq, q1)
            np.matmul(s, v[b, :, :q1], out=yh[b, :, q0:q1])
        for q0 in range(0, T - q_block, q_block):
            probs[b, :, q0:q0 + q_block, q0 + q_block:] = 0.0
    return y, (qkv, probs, n_head)


def _masked_softmax(s, mask):
    """softmax(s + mask) in place over the last axis; s (H, tq, tk).

    Runs in the calling thread: between two GEMMs, OpenBLAS's worker threads still spin on
    the other core, and a pool thread competing with them was measured slower than none.
    """
    s += mask
    _softmax_rows(s)


def attention_backward(dy, cache, out=None, scratch=None):
    """Gradient of :func:`attention_forward` with respect to the fused qkv: (B, T, 3C).

    ``scratch`` (B, H, T, T) may receive dP. One sequence at a time: its GEMMs use BLAS's
    threads, its elementwise work runs between them in the calling thread.

    Notes
    -----
    dP = dy vᵀ, dv = Pᵀ dy, dS = P ∘ (dP - Σ_j dP∘P), dq = dS k / sqrt(hd), dk = dSᵀ q / sqrt(hd).
    The scale is applied to dy before dP (dS / sqrt(hd) comes out directly).
    """
    qkv, probs, n_head = cache
    B, T, C3 = qkv.shape
    hd = C3 // (3 * n_head)
    q, k, v = split_heads(qkv, n_head)
    dqkv = np.empty_like(qkv) if out is None else out
    dq, dk, dv = split_heads(dqkv, n_head)
    dyh = dy.reshape(B, T, n_head, hd).transpose(0, 2, 1, 3)  # (B, H, T, hd)
    scale = qkv.dtype.type(1.0 / math.sqrt(hd))
    for b in range(B):
        P = probs[b]  # (H, T, T)
        dS = np.matmul(np.multiply(dyh[b], scale), v[b].transpose(0, 2, 1),
                       out=None if scratch is None else scratch[b])  # (H, T, T) = dP / sqrt(hd)
        np.matmul(P.transpose(0, 2, 1), dyh[b], out=dv[b])
        _softmax_grad(dS, P)
        np.matmul(dS, k[b], out=dq[b])
        np.matmul(dS.transpose(0, 2, 1), q[b], out=dk[b])
    return dqkv


def _softmax_grad(dP, P):
    """dP <- P ∘ (dP - Σ_j dP∘P) in place; (H, T, T), in the calling thread (see
    :func:`_masked_softmax`)."""
    dot = np.einsum("hij,hij->hi", dP, P)[..., None]
    dP -= dot
    dP *= P


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


def cross_entropy_fused(logits, targets, mask=None, chunk=128, count=None):
    """Loss and gradient of :func:`cross_entropy_forward` in one pass over row chunks.

    Overwrites ``logits`` (N, V) with dloss/dlogits (no second (N, V) buffer, each chunk
    stays in cache; the chunks are spread over the thread pool). Returns ``(loss, grad)``;
    same values as the forward/backward pair, the loss summed over the chunks in order.
    ``count`` replaces the number of counted rows as the divisor (a shard of a larger batch
    passes the whole batch's count, so that the shards' losses and gradients add up).
    """
    N = len(targets)
    w = np.ones(N, dtype=logits.dtype) if mask is None else mask.astype(logits.dtype)
    w /= max(float(w.sum()), 1.0) if count is None else count
    starts = list(range(0, N, chunk))

    def chunks(lo, hi):
        return [_cross_entropy_chunk(logits[i:i + chunk], targets[i:i + chunk], w[i:i + chunk])
                for i in starts[lo:hi]]

    parts = _parallel.for_row_blocks(chunks, len(starts), logits.size)
    total = 0.0
    for part in parts:
        for value in part:
            total -= value
    return total, logits


def _cross_entropy_chunk(u, t, wc) -> float:
    """Overwrite logits rows u (n, V) with w (softmax - onehot); returns Σ w log p(target)."""
    rows = np.arange(len(t))
    u -= u.max(axis=-1, keepdims=True)
    picked = u[rows, t]  # u_t - max
    np.exp(u, out=u)
    s = u.sum(axis=-1)
    value = float(np.sum((picked - np.log(s)).astype(np.float64) * wc))  # no BLAS in pool workers
    u *= (wc / s)[:, None]
    u[rows, t] -= wc
    return value


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
            "rms_norm_row", "causal_attention_inference", "log_softmax_row"]


def rms_norm_forward(x, g, eps=1e-6, out=None, xhat_out=None):
    """RMSNorm over the last axis (Llama): no mean subtraction, no bias. With ``out`` alone the
    result is written there and no cache is returned (no backward can follow); with ``out``
    and ``xhat_out`` (training buffers reused between steps) both are written and cached.

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
    if out is not None and xhat_out is None:  # inference: x̂ is not kept
        y = np.multiply(x, rstd, out=out)
        y *= g
        return y, None
    xhat = np.multiply(x, rstd, out=xhat_out)  # (..., C)
    y = np.multiply(xhat, g, out=out)
    return y, (xhat, rstd, g)


def rms_norm_backward(dy, cache, out=None):
    """Gradients of RMSNorm: returns (dx, dg). ``out`` receives dx and may be ``dy``.

    Notes
    -----
    With ĝ = dy * g: dx = rstd * (ĝ - x̂ mean(ĝ x̂)), dg = Σ dy x̂.
    """
    xhat, rstd, g = cache
    C = xhat.shape[-1]
    dg = np.einsum("ni,ni->i", dy.reshape(-1, C), xhat.reshape(-1, C))
    dxhat = np.multiply(dy, g, out=out)
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


def swiglu_forward(gu, out=None, sig_out=None):
    """SwiGLU of a fused ``[gate | up]`` array (..., 2F) -> (..., F): silu(gate) * up.
    ``out`` and ``sig_out`` (..., F) optionally receive the result and the cached σ(gate).

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
    y = np.empty(gu.shape[:-1] + (F,), gu.dtype) if out is None else out
    sig = np.empty_like(y) if sig_out is None else sig_out
    arrays = [_rows(a, w) for a, w in ((gu, 2 * F), (y, F), (sig, F))]
    if gu.ndim < 2 or any(a is None for a in arrays):
        _swiglu_rows(gu, y, sig)
    else:  # large inputs in cache-sized row chunks (same values)
        gu2, y2, sig2 = arrays
        _by_chunks(lambda lo, hi: _swiglu_rows(gu2[lo:hi], y2[lo:hi], sig2[lo:hi]), len(gu2), F)
    return y, (gu, sig)


def _swiglu_rows(gu, y, sig):
    """y = silu(gate) * up and sig = σ(gate) for rows gu = [gate | up] (..., 2F)."""
    F = gu.shape[-1] // 2
    gate, up = gu[..., :F], gu[..., F:]
    np.negative(gate, out=sig)
    with np.errstate(over="ignore"):  # exp(-gate) = inf gives σ = 0, as it should
        np.exp(sig, out=sig)
    sig += 1.0
    np.reciprocal(sig, out=sig)  # σ(gate)
    np.multiply(gate, sig, out=y)
    y *= up


def swiglu_backward(dy, cache, out=None):
    """Gradient with respect to ``[gate | up]``: (..., 2F), written into ``out`` if given.

    Notes
    -----
    d up = dy silu(a); d gate = dy up σ(a) (1 + a (1 - σ(a))).
    """
    gu, sig = cache
    F = gu.shape[-1] // 2
    dgu = np.empty_like(gu) if out is None else out
    arrays = [_rows(a, w) for a, w in ((dy, F), (gu, 2 * F), (sig, F), (dgu, 2 * F))]
    if gu.ndim < 2 or any(a is None for a in arrays):
        _swiglu_grad_rows(dy, gu, sig, dgu)
    else:  # large inputs in cache-sized row chunks (same values)
        dy2, gu2, sig2, dgu2 = arrays
        _by_chunks(lambda lo, hi: _swiglu_grad_rows(dy2[lo:hi], gu2[lo:hi], sig2[lo:hi], dgu2[lo:hi]),
                   len(gu2), F)
    return dgu


def _swiglu_grad_rows(dy, gu, sig, dgu):
    F = gu.shape[-1] // 2
    gate, up = gu[..., :F], gu[..., F:]
    silu = np.multiply(gate, sig, out=dgu[..., :F])  # the gate half is scratch until the end
    np.multiply(dy, silu, out=dgu[..., F:])
    d = np.subtract(1.0, sig)
    d *= gate
    d += 1.0
    d *= sig
    d *= up
    np.multiply(d, dy, out=dgu[..., :F])


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


def causal_attention_inference(q, k, v, out, q_block=128):
    """The values of :func:`grouped_attention_forward` without its probabilities or cache
    (the inference forward): every array it touches stays in cache.

    Parameters
    ----------
    q : (B, H, Tq, hd)
        Queries of the last ``Tq`` positions (``Tq <= Tk``), any strides.
    k, v : (B, Hkv, Tk, hd)
        Keys and values (``H = G Hkv``), any strides.
    out : (B, Tq, H hd)
        Receives the heads concatenated; must be reshapeable to (B, Tq, H, hd) as a view.
    q_block : int
        Queries per block; rows are grouped by blocks starting at multiples of ``q_block``
        (the sums over a row's keys are the same in any split that keeps the blocks).

    Returns
    -------
    out : (B, Tq, H hd)

    Notes
    -----
    Per query head h (key/value head h // G) and block of queries [q0, q1):
    S = q kᵀ[:, :off + q1] / sqrt(hd) (off = Tk - Tq), the causal mask added only to the
    diagonal columns [off + q0, off + q1) (the columns left of them are all visible), then
    P = softmax(S) and y = P v[:off + q1]. One sequence, one query block and as many
    key/value heads (with their G query heads) as keep the block's scores under
    ``SCORE_BLOCK`` elements at a time: the scores stay in L2 instead of a (B, H, Tq, Tk)
    array in memory, the key blocks above the diagonal are never computed, and q, k, v are
    copied into contiguous per-thread buffers (q already scaled when 1/sqrt(hd) is a power
    of two, where (q c) kᵀ = c (q kᵀ) exactly). The operations on each row are those of
    :func:`grouped_attention_forward` (scale, mask, max, subtract, exp, sum, divide, P v).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.standard_normal((1, 2, 5, 4)) for _ in range(3))
    >>> y = causal_attention_inference(q, k, v, out=np.empty((1, 5, 8)), q_block=2)
    >>> bool(np.allclose(y, grouped_attention_forward(q, k, v)[0], atol=1e-12))
    True
    """
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    if out.size == 0:  # no heads or no queries
        return out
    G, qb = H // Hkv, min(q_block, Tq)
    y = np.reshape(out, (B, Tq, Hkv, G, hd), copy=False).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, Tq, hd) view
    qg = q.reshape(B, Hkv, G, Tq, hd)
    scale = 1.0 / math.sqrt(hd)
    exact = math.frexp(scale)[0] == 0.5  # a power of two: fold the scale into q exactly
    step = max(1, SCORE_BLOCK // (G * qb * Tk))  # key/value heads per pass: scores fit in L2
    for b in range(B):
        for g0 in range(0, Hkv, step):
            g1 = min(g0 + step, Hkv)
            bufs = _AttentionBuffers(qg[b, g0:g1], k[b, g0:g1], v[b, g0:g1], scale if exact else None, q_block)
            _attention_blocks(bufs, y[b, g0:g1], q_block, None if exact else scale)
    return out


SCORE_BLOCK = 1 << 18  # elements of one query block's scores (1 MiB float32: stays in L2)


class _AttentionBuffers:
    """Contiguous copies of the queries q (n, G, Tq, hd) (times ``scale`` unless None), keys
    and values (n, 1, Tk, hd) of n key/value heads, and scratch for one block's scores; all
    per-thread buffers reused across calls (the pool's threads live on, each keeps its set)."""

    __slots__ = ("q", "k", "v", "s", "m", "mask")

    def __init__(self, q, k, v, scale, q_block):
        n, G, Tq, hd = q.shape
        Tk, qb = k.shape[1], min(q_block, Tq)
        self.q = _scratch("q", q.shape, q.dtype)
        if scale is None:
            np.copyto(self.q, q)
        else:
            np.multiply(q, scale, out=self.q)
        self.k, self.v = (_scratch(name, (n, 1, Tk, hd), q.dtype) for name in "kv")
        np.copyto(self.k[:, 0], k)
        np.copyto(self.v[:, 0], v)
        self.s = _scratch("s", (n * G * qb * Tk,), q.dtype)  # reshaped per block
        self.m = _scratch("m", (n * G * qb,), q.dtype)  # row max, then row sum
        self.mask = causal_mask(qb, q.dtype)


_THREAD_LOCAL = threading.local()


def _scratch(name, shape, dtype):
    """A reused buffer of this thread (contents undefined), viewed as ``shape``."""
    bufs = getattr(_THREAD_LOCAL, "bufs", None)
    if bufs is None:
        bufs = _THREAD_LOCAL.bufs = {}
    size, key = math.prod(shape), (name, np.dtype(dtype).str)
    if key not in bufs or bufs[key].size < size:
        bufs[key] = np.empty(max(size, 1), dtype)
    return bufs[key][:size].reshape(shape)


def _attention_blocks(bufs, y, q_block, scale):
    """The query blocks of n key/value heads' groups: ``bufs`` -> y (n, G, Tq, hd); ``scale``
    None when already folded into the queries."""
    n, G, Tq, _ = bufs.q.shape
    Tk = bufs.k.shape[2]
    off, kt = Tk - Tq, bufs.k.transpose(0, 1, 3, 2)  # (n, 1, hd, Tk)
    for q0 in range(0, Tq, q_block):
        q1 = min(q0 + q_block, Tq)
        tq, w = q1 - q0, off + q1
        s = np.matmul(bufs.q[:, :, q0:q1], kt[..., :w], out=bufs.s[:n * G * tq * w].reshape(n, G, tq, w))
        if scale is not None:
            s *= scale
        if tq > 1:
            s[..., off + q0:] += bufs.mask[:tq, :tq]
        m = np.max(s, axis=-1, keepdims=True, out=bufs.m[:n * G * tq].reshape(n, G, tq, 1))
        s -= m
        np.exp(s, out=s)
        s /= np.sum(s, axis=-1, keepdims=True, out=m)
        np.matmul(s, bufs.v[:, :, :w], out=y[:, :, q0:q1])  # (n, G, tq, hd)


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


def layer_norm_row(x, g, b, eps=1e-5, out=None, tmp=None, ones=None):
    """:func:`layer_norm_forward` of one vector x (C,) without a cache (the decoding path).

    ``out`` and ``tmp`` (each (C,), ``out`` not ``x``) are optional buffers: six numpy calls.
    With ``ones`` (C,) of ones the mean is the dot product x · 1 / C (one BLAS call, about
    half the cost of numpy's reduction on a short row).
    """
    total = np.add.reduce(x) if ones is None else np.dot(x, ones)
    xc = np.subtract(x, total / len(x), out=out)  # (C,)
    scale = np.multiply(g, 1.0 / math.sqrt(float(np.dot(xc, xc)) / len(x) + eps), out=tmp)
    y = np.multiply(xc, scale, out=xc)
    if b is not None:
        y += b
    return y


def rms_norm_row(x, g, eps=1e-6, out=None, tmp=None):
    """:func:`rms_norm_forward` of one vector x (C,) without a cache (the decoding path)."""
    scale = np.multiply(g, 1.0 / math.sqrt(float(np.dot(x, x)) / len(x) + eps), out=tmp)
    return np.multiply(x, scale, out=out)


def log_softmax_row(u, tmp=None):
    """:func:`log_softmax_inplace` of one vector u (V,), overwriting it (the decoding path):
    the max and the log-sum-exp are scalars, so no (1,)-shaped broadcasts; ``tmp`` (V,) is an
    optional buffer for the exponentials. Same values as the batched kernel.

    Notes
    -----
    log_softmax(u)_v = u_v - m - log Σ_w exp(u_w - m), m = max_w u_w.

    Examples
    --------
    >>> np.exp(log_softmax_row(np.log(np.array([1.0, 3.0])))).round(12).tolist()
    [0.25, 0.75]
    """
    u -= np.maximum.reduce(u)  # NaN propagates to every entry
    u -= np.log(np.add.reduce(np.exp(u, out=tmp)))
    return u


def gelu_row_inplace(u, t):
    """:func:`gelu_forward` of one vector u (F,) in place, ``t`` (F,) a scratch buffer (the
    decoding path: the same operations as the batched kernel, without its row blocking)."""
    _gelu_rows(u, u, t, True)
    return u


def grouped_attention_backward(dy, cache, out=None, q_block=64):
    """Gradients of :func:`grouped_attention_forward`: returns (dq, dk, dv).

    Parameters
    ----------
    dy : (B, Tq, H hd)
        Gradient of the output.
    cache : tuple
        From :func:`grouped_attention_forward`.
    out : (dq, dk, dv), optional
        Arrays (B, H, Tq, hd), (B, Hkv, Tk, hd), (B, Hkv, Tk, hd) receiving the gradients
        (any strides with unit last stride, e.g. views into a fused ``[q | k | v]``
        gradient); an entry None is allocated.
    q_block : int
        Queries (and keys) per block.

    Notes
    -----
    dP = dy vᵀ, dv = Σ_group Pᵀ dy, dS = P ∘ (dP - Σ_j dP∘P) / sqrt(hd), dq = dS k,
    dk = Σ_group dSᵀ q. P is zero above the causal diagonal, so one sequence at a time,
    each query block reads only the keys it sees (dP, dS, dq) and each key block only the
    queries that see it (dv, dk): ~5/8 of the full-square work at T = 4 q_block, and dS
    lives in one (H, Tq, Tk) buffer instead of a (B, H, Tq, Tk) temporary per step.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, kv = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 1, 3, 4))
    >>> _, cache = grouped_attention_forward(q, kv, kv)  # 2 query heads share 1 key/value head
    >>> [g.shape for g in grouped_attention_backward(np.ones((1, 3, 8)), cache)]
    [(1, 2, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4)]
    """
    q, k, v, probs = cache
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G, off = H // Hkv, Tk - Tq
    dq, dk, dv = (None, None, None) if out is None else out
    dq, dk, dv = (np.empty(a.shape, a.dtype) if o is None else o for o, a in ((dq, q), (dk, k), (dv, v)))
    dyg = dy.reshape(B, Tq, Hkv, G, hd).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, Tq, hd)
    qg, pg = q.reshape(B, Hkv, G, Tq, hd), probs.reshape(B, Hkv, G, Tq, Tk)
    dqg = np.reshape(dq, (B, Hkv, G, Tq, hd), copy=False)  # a view (copy=False raises otherwise)
    dS = np.zeros((Hkv, G, Tq, Tk), dtype=dy.dtype)  # one sequence's dP / dS; the cells no
    # block writes (above the diagonal) stay 0 for every sequence, as P is there
    for b in range(B):
        for q0 in range(0, Tq, q_block):  # queries q0..q1 see keys 0..off + q1
            q1 = min(q0 + q_block, Tq)
            s = np.matmul(dyg[b, :, :, q0:q1], v[b, :, None, :off + q1].transpose(0, 1, 3, 2),
                          out=dS[:, :, q0:q1, :off + q1])  # dP (Hkv, G, tq, n)
            _softmax_grad_block(s, pg[b, :, :, q0:q1, :off + q1])
            np.matmul(s, k[b, :, None, :off + q1], out=dqg[b, :, :, q0:q1])
        for k0 in range(0, Tk, q_block):  # keys k0..k1 are seen by queries i0..Tq
            k1, i0 = min(k0 + q_block, Tk), max(k0 - off, 0)
            _grouped_key_grad(pg[b, :, :, i0:, k0:k1], dyg[b, :, :, i0:], dv[b, :, k0:k1])
            _grouped_key_grad(dS[:, :, i0:, k0:k1], qg[b, :, :, i0:], dk[b, :, k0:k1])
    scale = 1.0 / math.sqrt(hd)
    dq *= scale
    dk *= scale
    return dq, dk, dv


def _softmax_grad_block(dP, P):
    """dP <- P ∘ (dP - Σ_j dP∘P) in place, over the last axis (rows of one block)."""
    dot = np.einsum("...ij,...ij->...i", dP, P)[..., None]
    dP -= dot
    dP *= P


def _grouped_key_grad(S, X, out):
    """out (Hkv, kb, hd) = Σ_group Sᵀ X for S (Hkv, G, n, kb), X (Hkv, G, n, hd)."""
    St = S.transpose(0, 1, 3, 2)  # (Hkv, G, kb, n)
    if S.shape[1] == 1:
        np.matmul(St[:, 0], X[:, 0], out=out)
    else:
        np.sum(np.matmul(St, X), axis=1, out=out)
