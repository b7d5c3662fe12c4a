"""The dense layers: ``linear`` (y = x W + b) and ``embedding`` (rows of a table), each a
``*_forward`` / ``*_backward`` pair, and the layout test of a column-major table.

Examples
--------
>>> import numpy as np
>>> x = np.ones((2, 3)); W = np.eye(3); b = np.zeros(3)
>>> y, cache = linear_forward(x, W, b)
>>> dx, dW, db = linear_backward(np.ones((2, 3)), cache)
>>> dx.shape, dW.shape, db.shape
((2, 3), (3, 3), (3,))
"""
from __future__ import annotations

import numpy as np

from .. import _parallel
from ._chunks import CHEAP_MIN_WORK

__all__ = ["is_column_major", "embedding_forward", "embedding_backward", "linear_forward", "linear_backward"]

SORTED_SCATTER_MIN = 1 << 22  # table elements from which the column-major scatter sums per id first


def is_column_major(a) -> bool:
    """Whether ``a`` is a column-major matrix (Fortran order, not also C-contiguous): how the
    GPT stores its unembedding (:func:`seqprob.gpt.params.column_major_names`).

    Examples
    --------
    >>> is_column_major(np.asfortranarray(np.ones((2, 3)))), is_column_major(np.ones((2, 3)))
    (True, False)
    """
    return np.ndim(a) == 2 and a.flags.f_contiguous and not a.flags.c_contiguous


def embedding_forward(ids, W, out=None):
    """Rows of the table: ``out[..., :] = W[ids]``. ids (...,) int, W (V, C) -> (..., C).

    A column-major W (a tied unembedding, see :func:`seqprob.gpt.params.column_major_names`)
    is gathered as columns of its C-contiguous transpose (about 8x the time of a row-major
    gather, still cheap beside the forward; ``np.take`` over its strided rows is slower).

    Returns
    -------
    out : (..., C)
    cache : tuple
        (ids, V) for :func:`embedding_backward`.

    Notes
    -----
    y[n] = W[ids[n]], a one-hot product: y = onehot(ids) W.
    """
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
    ``out.T`` (faster than ``np.add.at`` over the strided rows of a large table; a small
    one keeps ``np.add.at``).

    Notes
    -----
    dW = onehot(ids)ᵀ dout: dW[v] = Σ_{n: ids[n] = v} dout[n].
    """
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


def linear_forward(x, W, b=None, out=None):
    """y = x @ W + b with W stored ``[in, out]`` (GPT-2's Conv1D layout); x (..., in).

    A C-contiguous x is multiplied as one 2-D GEMM ``(N, in) @ (in, out)``.

    Returns
    -------
    y : (..., out)
    cache : tuple
        (x, W, has_bias) for :func:`linear_backward`.

    Notes
    -----
    y = x W + b.
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
    """Returns (dx, dW, db); ``dW_out``, ``db_out`` and ``dx_out`` optionally receive them.

    Notes
    -----
    dx = dy Wᵀ, dW = xᵀ dy, db = Σ dy over the rows (None without bias).
    """
    x, W, has_bias = cache
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    dW = np.matmul(x2.T, dy2, out=dW_out)
    db = np.sum(dy2, axis=0, out=db_out) if has_bias else None
    dx_out2 = None if dx_out is None else dx_out.reshape(-1, W.shape[0])
    dx = np.matmul(dy2, W.T, out=dx_out2).reshape(x.shape)
    return dx, dW, db
