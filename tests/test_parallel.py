"""The row-blocked thread pool and the kernels that use it: same numbers at any thread count."""
import os
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqprob import _parallel, nn
from seqprob.nn import _chunks, softmax
from seqprob.errors import InputError
from seqprob.optim import AdamW
from budget import examples


@pytest.fixture
def threads(monkeypatch):
    """Force splitting even tiny arrays (MIN_WORK 1, chunks of 7 elements); yields a setter."""
    monkeypatch.setattr(_parallel, "MIN_WORK", 1)
    monkeypatch.setattr(_chunks, "CHUNK", 7)
    yield _parallel.set_num_threads
    _parallel.set_num_threads(None)


@settings(max_examples=examples(30), deadline=None)
@given(n_rows=st.integers(1, 40), n_threads=st.integers(1, 5))
def test_row_blocks_cover_every_row_once_in_order(n_rows, n_threads):
    _parallel.set_num_threads(n_threads)
    try:
        seen = []
        parts = _parallel.for_row_blocks(lambda lo, hi: list(range(lo, hi)), n_rows, work=10 ** 9)
        for part in parts:
            seen.extend(part)
        assert seen == list(range(n_rows))
        assert len(parts) == min(n_threads, n_rows)
    finally:
        _parallel.set_num_threads(None)


def test_small_work_runs_inline_in_the_caller():
    callers = _parallel.for_row_blocks(lambda lo, hi: threading.current_thread().name, 100, work=10)
    assert callers == [threading.current_thread().name]


def test_nested_calls_run_inline_without_deadlock(threads):
    threads(2)
    inner = _parallel.for_row_blocks(
        lambda lo, hi: len(_parallel.for_row_blocks(lambda a, b: b - a, 10, work=10 ** 9)), 4, work=10 ** 9)
    assert inner == [1, 1]  # each worker ran its inner call as one block


def test_worker_errors_reach_the_caller(threads):
    threads(3)

    def fail_last(lo, hi):
        if hi == 9:
            raise ValueError("block")
        return hi

    with pytest.raises(ValueError, match="block"):
        _parallel.for_row_blocks(fail_last, 9, work=10 ** 9)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_set_num_threads_rejects_bad_counts(bad):
    with pytest.raises(InputError, match="integer >= 1"):
        _parallel.set_num_threads(bad)


def test_thread_count_from_environment(monkeypatch):
    monkeypatch.setenv("SEQPROB_NUM_THREADS", "3")
    _parallel.set_num_threads(None)
    assert _parallel.num_threads() == 3
    monkeypatch.setenv("SEQPROB_NUM_THREADS", "zero")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    _parallel.set_num_threads(None)
    assert _parallel.num_threads() == 2
    monkeypatch.undo()
    _parallel.set_num_threads(None)


def test_pool_works_in_a_forked_child(threads):
    threads(2)
    _parallel.for_row_blocks(lambda lo, hi: None, 4, work=10 ** 9)  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # child: the inherited pool has no threads; a new one must be made
        ok = _parallel.for_row_blocks(lambda lo, hi: hi - lo, 4, work=10 ** 9) == [2, 2]
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# ----------------------------------------------------------------------------- kernels
def _run_kernels(seed, shape, dtype):
    rng = np.random.default_rng(seed)
    N, C = shape
    x = rng.standard_normal((2, N, C)).astype(dtype)
    g, b = rng.standard_normal(C).astype(dtype), rng.standard_normal(C).astype(dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)
    out = {}
    y, cache = nn.layer_norm_forward(x, g, b)
    out["ln"], out["ln_bwd"] = y, nn.layer_norm_backward(dy, cache)[0]
    u, cache = nn.gelu_forward(x)
    out["gelu"], out["gelu_bwd"] = u, nn.gelu_backward(dy, cache)
    out["gelu_inplace"] = x.copy()
    nn.gelu_forward(out["gelu_inplace"], out=out["gelu_inplace"])
    np.testing.assert_allclose(out["gelu_inplace"], u, rtol=1e-6, atol=1e-6)
    z = x.copy()
    out["softmax"] = softmax.softmax_inplace(z)
    out["log_softmax"] = nn.log_softmax_inplace(x.copy().reshape(-1, C), tmp=np.empty((2 * N, C), dtype))
    q, kv = rng.standard_normal((2, 4, N, 2)).astype(dtype), rng.standard_normal((2, 2, 2, N, 2)).astype(dtype)
    att, cache = nn.grouped_attention_forward(q, kv[0], kv[1], q_block=3)
    dq, dk, dv = nn.grouped_attention_backward(rng.standard_normal(att.shape).astype(dtype), cache, q_block=3)
    out["attn"], out["attn_dq"], out["attn_dk"], out["attn_dv"] = att, dq, dk, dv
    logits, targets = x.reshape(-1, C).copy(), rng.integers(0, C, 2 * N)
    loss, grad = nn.cross_entropy_fused(logits, targets, chunk=3)
    out["xent"], out["xent_grad"] = np.array(loss), grad
    out["linear"] = nn.linear_forward(x, rng.standard_normal((C, 5)).astype(dtype), np.ones(5, dtype))[0]
    return out


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 16), n=st.integers(1, 20), c=st.integers(2, 9),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_kernels_give_identical_numbers_at_any_thread_count(threads, seed, n, c, dtype):
    threads(1)
    one = _run_kernels(seed, (n, c), dtype)
    threads(3)
    three = _run_kernels(seed, (n, c), dtype)
    for name in one:
        np.testing.assert_array_equal(one[name], three[name], err_msg=name)


def test_adamw_update_identical_at_any_thread_count(threads, monkeypatch):
    import seqprob.optim as optim

    monkeypatch.setattr(optim, "_CHUNK", 5)  # many chunks, decay spans crossing chunk borders
    results = []
    for n in (1, 3):
        threads(n)
        flat = np.arange(40, dtype=np.float64) / 7
        params = {"a.w": flat[:12].reshape(3, 4), "b": flat[12:17], "c.w": flat[17:40].reshape(23, 1)}
        grads_flat = np.sin(np.arange(40.0))
        grads = {"a.w": grads_flat[:12].reshape(3, 4), "b": grads_flat[12:17], "c.w": grads_flat[17:40].reshape(23, 1)}
        opt = AdamW(params, lr=0.1, weight_decay=0.5)
        for _ in range(3):
            opt.step(grads)
        results.append(flat.copy())
    np.testing.assert_array_equal(results[0], results[1])


# --------------------------------------------------------------------------- map_ordered


@settings(max_examples=examples(20), deadline=None)
@given(n=st.integers(0, 30), n_threads=st.integers(1, 4), ahead=st.integers(1, 4))
def test_map_ordered_yields_every_result_in_order(n, n_threads, ahead):
    _parallel.set_num_threads(n_threads)
    try:
        assert list(_parallel.map_ordered(lambda x: x * x, range(n), ahead=ahead)) == [
            x * x for x in range(n)]
    finally:
        _parallel.set_num_threads(None)


def test_map_ordered_keeps_at_most_ahead_calls_in_flight(threads):
    threads(4)
    lock, state = threading.Lock(), {"now": 0, "most": 0}

    def work(x):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        threading.Event().wait(0.002)
        with lock:
            state["now"] -= 1
        return x

    assert list(_parallel.map_ordered(work, range(20), ahead=2)) == list(range(20))
    assert state["most"] <= 2


def test_map_ordered_runs_inline_with_one_thread(threads):
    threads(1)
    names = set(_parallel.map_ordered(lambda x: threading.current_thread().name, range(5)))
    assert names == {threading.current_thread().name}


def test_map_ordered_errors_wait_for_running_calls(threads):
    """An error in a call, or in the items, reaches the caller only after no call still runs
    (a caller that removes files on error must not race a worker writing them)."""
    threads(3)
    running = {"n": 0}
    lock = threading.Lock()

    def work(x):
        with lock:
            running["n"] += 1
        try:
            threading.Event().wait(0.01)
            if x == 3:
                raise ValueError("call 3")
            return x
        finally:
            with lock:
                running["n"] -= 1

    with pytest.raises(ValueError, match="call 3"):
        list(_parallel.map_ordered(work, range(10)))
    assert running["n"] == 0

    def items():
        yield from range(4)
        raise KeyError("item 4")

    with pytest.raises(KeyError, match="item 4"):
        list(_parallel.map_ordered(work, items(), ahead=3))
    assert running["n"] == 0


def test_set_num_threads_is_public_and_sets_blas_too():
    """sp.set_num_threads(n) sets the pool and BLAS; None gives both back what they had."""
    import seqprob as sp
    from threadpoolctl import threadpool_info

    def blas():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas()
    try:
        sp.set_num_threads(1)
        assert _parallel.num_threads() == 1 and set(blas()) == {1}
        sp.set_num_threads(3, blas=False)
        assert _parallel.num_threads() == 3 and set(blas()) == {1}
    finally:
        sp.set_num_threads(None)
    assert blas() == before
    with pytest.raises(InputError, match="number of threads must be an integer >= 1, got 0"):
        sp.set_num_threads(0)


def test_dir_of_the_package_shows_the_public_face():
    import seqprob as sp

    names = dir(sp)
    assert {"set_num_threads", "Evaluation", "Comparison", "evaluate_dask", "scoring", "plots"} <= set(names)
    assert not [n for n in names if n.startswith("_") and n != "__version__"]
    assert all(hasattr(sp, n) for n in names)


def test_pipelines_shorten_the_gil_slice_and_restore_it(threads):
    """While map_ordered runs, the switch interval is GIL_SLICE_S (a pool thread running numpy
    gets the GIL back quickly); afterwards, on success or error, the caller's value is back."""
    import sys

    threads(2)
    before = sys.getswitchinterval()
    seen = list(_parallel.map_ordered(lambda x: sys.getswitchinterval(), range(4)))
    assert seen == [_parallel.GIL_SLICE_S] * 4
    assert sys.getswitchinterval() == before
    with _parallel.short_gil_slices():
        with _parallel.short_gil_slices():  # nested: the outer value is restored once, at the end
            pass
        assert sys.getswitchinterval() == _parallel.GIL_SLICE_S
    assert sys.getswitchinterval() == before

    def fail(x):
        raise ValueError("call")

    with pytest.raises(ValueError):
        list(_parallel.map_ordered(fail, range(4)))
    assert sys.getswitchinterval() == before


def test_importing_the_package_loads_only_numpy():
    """``import seqprob`` is lazy (PEP 562): scipy, pandas, matplotlib and the GPT load only
    when a name that needs them is used, and every public name still resolves."""
    import subprocess
    import sys

    code = ("import sys, seqprob\n"
            "heavy = [m for m in ('scipy', 'pandas', 'matplotlib', 'seqprob.gpt', 'seqprob.truth') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "assert seqprob.score.__module__.startswith('seqprob.scoring') and seqprob.GPT.__name__ == 'GPT'\n"
            "assert all(getattr(seqprob, n) is not None for n in seqprob.__all__)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_blas_thread_also_limits_a_blas_loaded_after_first_use():
    """scipy brings its own OpenBLAS, loaded only by scipy.linalg / scipy.special; with the
    package imported lazily that may happen after the first decoding step built the
    controllers, and the step after must limit it too."""
    import subprocess
    import sys

    code = ("import numpy as np\n"
            "from seqprob import _parallel\n"
            "from threadpoolctl import threadpool_info\n"
            "with _parallel.one_blas_thread: pass\n"
            "import scipy.linalg\n"
            "blas = lambda: [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']\n"
            "assert len(blas()) >= 1\n"
            "with _parallel.blas_controller().limit(limits=2):\n"
            "    with _parallel.one_blas_thread:\n"
            "        inside = blas()\n"
            "    assert set(blas()) == {2}, blas()\n"
            "assert set(inside) == {1}, inside\n")
    subprocess.run([sys.executable, "-c", code], check=True)
