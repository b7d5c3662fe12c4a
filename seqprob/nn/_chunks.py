"""Row chunking of the elementwise passes: an array's (N, width) view, and a pass run over
cache-sized row chunks spread over the thread pool.

Every row is computed by the same operations whatever the split, so a kernel gives the same
values at any chunk size and thread count. The norms and the activations use it; the GEMMs
never do (BLAS has its own threads).
"""
from __future__ import annotations

import numpy as np

from .. import _parallel

CHUNK = 1 << 15  # elements per cache-sized piece of a row-blocked elementwise pass (128 KiB float32)
WHOLE_MAX = 1 << 20  # elements up to which one thread runs a pass on the whole array; larger ones
# go chunk by chunk, read from cache pass after pass (see the performance page, "Design notes")
CHEAP_MIN_WORK = 1 << 20  # per thread, for passes without transcendentals (LayerNorm, bias add):
# below it the GIL hand-offs of many short ufunc calls on two threads cost more than they save


def row_view(a, width):
    """The (N, width) 2-D view of an array made of contiguous rows of ``width``: a
    C-contiguous array, or columns of a wider one (the inference workspace keeps its buffers
    side by side in the rows of one array, see :func:`seqprob.gpt.block.make_workspace`);
    None for any other layout (then work on it whole).

    Examples
    --------
    >>> import numpy as np
    >>> row_view(np.zeros((2, 3, 4)), 4).shape
    (6, 4)
    >>> row_view(np.zeros((2, 3, 6))[..., 2:], 4).strides
    (48, 8)
    >>> row_view(np.zeros((4, 3)).T, 4) is None
    True
    """
    if a is None:
        return None
    if a.flags.c_contiguous:
        return a.reshape(-1, width)
    if a.ndim == 0 or a.shape[-1] != width or a.strides[-1] != a.itemsize:
        return None
    try:
        return np.reshape(a, (-1, width), copy=False)
    except ValueError:  # the leading axes do not merge into one
        return None


def by_chunks(fn, n_rows, width, min_work=None):
    """Run ``fn(lo, hi)`` over cache-sized row chunks, the chunks spread over the thread pool
    (or once over all rows when the work stays on one thread).

    Every row is computed by the same operations whatever the split, so the results do not
    depend on the chunk size or the number of threads. On one thread, arrays larger than
    ``WHOLE_MAX`` elements still run chunk by chunk: a multi-pass kernel (GELU and
    its gradient) then reads each chunk from cache instead of memory, the dozen Python calls
    per chunk costing far less.

    Parameters
    ----------
    fn : callable
        ``fn(lo, hi)`` processes rows ``lo:hi``.
    n_rows, width : int
        Rows and elements per row of the arrays ``fn`` reads.
    min_work : int, optional
        Elements per thread below which the pass stays on one thread
        (default ``_parallel.MIN_WORK``).

    Returns
    -------
    list
        One entry per thread block (what ``fn`` returned, or None for chunked blocks).
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
