"""Row-blocked work over a small thread pool, for the elementwise parts of the nn kernels.

numpy releases the GIL inside ufunc loops, reductions and BLAS calls, so splitting a large
array into row blocks and running the same numpy expression on each block in its own thread
uses every core, where a plain ufunc runs on one. Each row is computed by exactly the same
operations whatever the split, so results do not depend on the number of threads (only
reductions *across* rows would, and the kernels keep those single-threaded).

The thread count is, in order: :func:`set_num_threads`, the environment variables
``SEQPROB_NUM_THREADS``, ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, then the number of
CPUs this process may run on. Work smaller than ``min_work`` elements per thread runs inline
in the calling thread (a task hand-off costs tens of microseconds); so does work submitted
from inside a pool worker (no nested blocking, no deadlock).

The functions given to :func:`for_row_blocks` must not call BLAS (``matmul``, ``dot``):
OpenBLAS called from two threads at once, each wanting its own worker threads, was measured
20x slower than one call on BLAS's threads. The kernels keep their GEMMs in the calling
thread and hand only ufunc / reduction work to the pool.

Whole passes can instead be split once (:func:`run_tasks`): each thread runs its share of a
forward or training step, BLAS included, under :data:`one_blas_thread` (threadpoolctl
limits BLAS to one thread and restores the user's setting afterwards); the per-op splits
inside the tasks then run inline. See the performance page of the documentation.

Examples
--------
>>> import numpy as np
>>> x = np.arange(12.0).reshape(4, 3)
>>> _ = for_row_blocks(lambda lo, hi: np.multiply(x[lo:hi], 2.0, out=x[lo:hi]), 4, work=12)
>>> float(x.sum())
132.0
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait

from .checks import check_int

__all__ = ["num_threads", "set_num_threads", "for_row_blocks", "run_tasks", "blas_controller",
           "one_blas_thread", "OneBlasThread", "row_threads", "shard_threads", "shard_bounds", "map_ordered"]

MIN_WORK = 1 << 15  # elements per thread below which a split does not pay
_ENV_VARS = ("SEQPROB_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_state = {"threads": None, "pool": None, "pid": None}
_local = threading.local()


def _from_env() -> int:
    for var in _ENV_VARS:
        value = os.environ.get(var, "").strip()
        if value.isdigit() and int(value) >= 1:
            return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1


def num_threads() -> int:
    """Number of threads the kernels split their elementwise work over (>= 1)."""
    if _state["threads"] is None:
        _state["threads"] = _from_env()
    return _state["threads"]


def set_num_threads(n: int | None, blas: bool = True) -> None:
    """Use ``n`` threads in seqprob's kernels: for their elementwise work (this module's pool)
    and, with ``blas``, for BLAS (numpy's matrix products, through threadpoolctl).

    Parameters
    ----------
    n : int or None
        Threads (>= 1); None goes back to the environment (``SEQPROB_NUM_THREADS``,
        ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, else the CPUs this process may use) and
        gives BLAS back the setting it had before the first call.
    blas : bool
        Also set BLAS's threads (default). False leaves BLAS as it is.

    Examples
    --------
    >>> import seqprob as sp
    >>> sp.set_num_threads(1)      # everything in the calling thread
    >>> num_threads()
    1
    >>> sp.set_num_threads(None)   # back to the environment
    """
    if n is not None:
        check_int("number of threads", n, low=1)
    _state["threads"] = n
    if blas:
        _limit_blas(n)


_blas_limit = {"limiter": None}


def _limit_blas(n: int | None) -> None:
    """BLAS on ``n`` threads until the next call; None restores what it was before."""
    from threadpoolctl import ThreadpoolController

    if _blas_limit["limiter"] is not None:
        _blas_limit["limiter"].restore_original_limits()
        _blas_limit["limiter"] = None
    if n is not None:
        _blas_limit["limiter"] = ThreadpoolController().limit(limits=n, user_api="blas")


def _pool(workers: int) -> ThreadPoolExecutor:
    pool = _state["pool"]
    if pool is None or _state["pid"] != os.getpid() or pool._max_workers < workers:
        # a forked child inherits the pool object but not its threads: make a new one
        pool = _state["pool"] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="seqprob")
        _state["pid"] = os.getpid()
    return pool


def _worker(fn, lo, hi):
    _local.inside = True
    try:
        return fn(lo, hi)
    finally:
        _local.inside = False


def for_row_blocks(fn, n_rows: int, work: int, min_work: int | None = None) -> list:
    """Call ``fn(lo, hi)`` on contiguous row ranges covering ``range(n_rows)``; their results.

    ``work`` is the total number of elements touched (sets how many threads pay off). The
    first block runs in the calling thread, the others in the pool; results come back in
    row order. With one thread (or little work) this is just ``[fn(0, n_rows)]``.
    """
    threads = min(num_threads(), n_rows, max(1, work // (min_work or MIN_WORK)))
    if threads <= 1 or getattr(_local, "inside", False):
        return [fn(0, n_rows)]
    bounds = [n_rows * i // threads for i in range(threads + 1)]
    pool = _pool(threads - 1)
    futures = [pool.submit(_worker, fn, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
    try:
        first = _worker(fn, bounds[0], bounds[1])
    finally:  # never return (or raise) while a worker may still write into the arrays
        wait(futures)
    return [first] + [f.result() for f in futures]


# ----------------------------------------------------------------------------- whole-pass sharding
# A forward (or forward + backward) pass over a batch can instead be split once, by batch rows:
# each thread runs the whole pass on its shard with BLAS on one thread and the per-op splitting
# above inline. One fork/join per pass instead of one per op, and every op runs in parallel.

_blas = {"controller": None, "key": None}

# scipy ships its own OpenBLAS, loaded by these modules (not by ``import scipy``); ``import
# seqprob`` is lazy, so it may appear after the controllers were made: they are made again then.
_SCIPY_BLAS_MODULES = ("scipy.linalg", "scipy.special")


def _blas_key() -> tuple:
    """What the found BLAS libraries depend on: the process and whether scipy's is loaded
    (a few dict lookups: checked on every decoding step)."""
    return os.getpid(), any(name in sys.modules for name in _SCIPY_BLAS_MODULES)


def blas_controller():
    """The threadpoolctl controller of the loaded OpenBLAS libraries, or None.

    None when threadpoolctl is not installed or numpy's BLAS is not OpenBLAS (then the
    callers keep the per-op path, which never changes BLAS settings). Made once per process:
    threadpoolctl's scan of the loaded libraries costs milliseconds.
    """
    key = _blas_key()
    if _blas["key"] != key:
        _blas["controller"], _blas["key"] = _find_openblas(), key
    return _blas["controller"]


def _find_openblas():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return None
    import numpy  # noqa: F401  (its BLAS must be loaded to be found)
    controller = ThreadpoolController().select(internal_api="openblas")
    return controller if controller.lib_controllers else None


class OneBlasThread:
    """Context manager: BLAS on one thread while decoding steps run, the previous setting
    restored when the last concurrent step ends (threadpoolctl's controllers, found once).

    The setting is process-wide: BLAS calls of other threads during a step also run on one.
    Per step it costs one query of each library's thread count (its ``get_num_threads``,
    bound once); a library already on one thread is neither set nor restored.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._depth, self._saved, self._libs, self._key = 0, [], None, None

    def _controllers(self) -> list:
        key = _blas_key()
        if self._libs is None or self._key != key:
            from threadpoolctl import ThreadpoolController
            self._libs = [(lib.get_num_threads, lib.set_num_threads) for lib in
                          ThreadpoolController().select(user_api="blas").lib_controllers]
            self._key = key
        return self._libs

    def __enter__(self):
        with self._lock:
            if self._depth == 0:
                self._saved = [(set_num, n) for get_num, set_num in self._controllers()
                               if (n := get_num()) is not None and n != 1]
                for set_num, _ in self._saved:
                    set_num(1)
            self._depth += 1

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                for set_num, n in self._saved:
                    set_num(n)


#: The one BLAS limiter (``with one_blas_thread: ...``), shared by every caller: passes and
#: decoding steps may run in several threads at once.
one_blas_thread = OneBlasThread()


def row_threads() -> int:
    """How many threads a :func:`for_row_blocks` call made here would use at most: 1 inside
    a pool worker or a task of :func:`run_tasks` (it runs inline), else :func:`num_threads`."""
    return 1 if getattr(_local, "inside", False) else num_threads()


def shard_threads(n_items: int, work: int, min_work: int) -> int:
    """How many shards a pass over ``n_items`` independent items should use: the thread
    count, at most one per item and per ``min_work`` of ``work``; 1 (no sharding) inside a
    pool worker or when BLAS threads cannot be controlled."""
    n = min(num_threads(), n_items, work // max(min_work, 1))
    if n <= 1 or getattr(_local, "inside", False) or blas_controller() is None:
        return 1
    return n


def shard_bounds(n_items: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous ``(lo, hi)`` ranges of nearly equal size covering ``range(n_items)``."""
    bounds = [n_items * i // n_shards for i in range(n_shards + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _inline(task):
    previous = getattr(_local, "inside", False)
    _local.inside = True  # nested for_row_blocks calls run in this thread
    try:
        return task()
    finally:
        _local.inside = previous


def run_tasks(tasks) -> list:
    """Run the zero-argument callables ``tasks`` at once, the first in the calling thread and
    the others in the pool, each with the per-op splitting inline; their results in order.

    Returns only after every task has finished; the first exception (in task order) is then
    raised. Call it under :func:`single_threaded_blas` when the tasks use BLAS.
    """
    tasks = list(tasks)
    if len(tasks) == 1:
        return [_inline(tasks[0])]
    pool = _pool(len(tasks) - 1)
    futures = [pool.submit(_inline, task) for task in tasks[1:]]
    try:
        first = _inline(tasks[0])
    finally:  # never return (or raise) while a worker may still write into shared arrays
        wait(futures)
    return [first] + [f.result() for f in futures]


def map_ordered(fn, items, ahead: int | None = None):
    """Yield ``fn(item)`` for each of ``items`` in order, up to ``ahead`` calls at a time on
    the pool (default: :func:`num_threads`).

    A pipeline for independent blocks of numpy work: the calls run in pool threads while the
    calling thread produces the next items (reading, tokenizing) and consumes earlier results
    (writing). At most ``ahead`` calls are in flight and one produced item waits, so memory
    holds about ``ahead + 1`` blocks. With one thread (or from inside a pool worker) this is
    a plain ``map`` in the calling thread. If the caller stops early (an exception in
    ``items`` or in the consumer, ``close()``), calls not yet started are cancelled and running
    ones are waited for before the exception goes on.

    Examples
    --------
    >>> list(map_ordered(lambda x: x * x, range(5), ahead=2))
    [0, 1, 4, 9, 16]
    """
    ahead = num_threads() if ahead is None else ahead
    if num_threads() <= 1 or ahead < 1 or getattr(_local, "inside", False):
        yield from map(fn, items)
        return
    pool, pending = _pool(ahead), []
    try:
        with short_gil_slices():
            for item in items:
                if len(pending) >= ahead:
                    yield pending.pop(0).result()
                pending.append(pool.submit(_call_inside, fn, item))
            while pending:
                yield pending.pop(0).result()
    finally:
        for f in pending:
            f.cancel()
        wait(pending)


GIL_SLICE_S = 0.0005  # the switch interval while a pipeline runs (Python's default: 0.005 s)
_slices = {"depth": 0, "saved": None}
_slices_lock = threading.Lock()


@contextlib.contextmanager
def short_gil_slices():
    """Lower Python's GIL switch interval to :data:`GIL_SLICE_S` while pipelined work runs,
    then restore it.

    A pool thread that runs numpy (which releases the GIL inside each call) needs the GIL back
    between calls; while the calling thread runs pure Python (splitting text, formatting), it
    gets it only when that thread's 5 ms time slice ends. Over the few hundred numpy calls of
    counting a chunk that is ~0.5 s of waiting. Measured on the n-gram fit (4M words, 2 cores,
    one in-process run each): the counting stage ended at 2.56 s instead of 3.01 s. Nested and
    concurrent uses restore the value seen first.
    """
    with _slices_lock:
        if _slices["depth"] == 0:
            _slices["saved"] = sys.getswitchinterval()
            sys.setswitchinterval(min(_slices["saved"], GIL_SLICE_S))
        _slices["depth"] += 1
    try:
        yield
    finally:
        with _slices_lock:
            _slices["depth"] -= 1
            if _slices["depth"] == 0:
                sys.setswitchinterval(_slices["saved"])


def _call_inside(fn, item):
    _local.inside = True
    try:
        return fn(item)
    finally:
        _local.inside = False
