"""The GPT over several threads (seqprob/_parallel.py run_tasks, GPT._forward_rows, the stage
split of seqprob/gpt/stages.py, backward.loss_and_grads): same numbers as one thread, BLAS
setting restored, errors propagate."""
import functools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqprob import _parallel
from seqprob.gpt import GPT, GPTConfig, backward, stages
from seqprob.gpt import model as gpt_model
from budget import examples
from test_gpt_arch import arch_model, archs

@pytest.fixture(autouse=True)
def shard_everything(monkeypatch):
    """Shard even the tiny test models; restore the thread count afterwards."""
    monkeypatch.setattr(gpt_model, "MIN_SHARD_WORK", 1)
    monkeypatch.setattr(backward, "MIN_SHARD_WORK", 1)
    monkeypatch.setattr(gpt_model, "MIN_STAGE_ROWS", 1)
    yield
    _parallel.set_num_threads(None)


@pytest.fixture
def shard_calls(monkeypatch):
    """Counts the sharded passes (so a test can tell that sharding really happened)."""
    calls = []
    real = _parallel.run_tasks

    def spy(tasks):
        tasks = list(tasks)
        calls.append(len(tasks))
        return real(tasks)

    monkeypatch.setattr(_parallel, "run_tasks", spy)
    return calls


def blas_threads():
    return [lib["num_threads"] for lib in _parallel.blas_controller().info()]


@functools.cache
def blas_rows_do_not_depend_on_the_row_count():
    """Whether this BLAS gives a row of a float32 GEMM the same bits in a 300-row and a 150-row
    call. OpenBLAS's kernels differ: some do (so the split forward is bit-identical), some
    (0.3.31 Haswell kernels on AMD EPYC) round a row differently by the row count."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 32), dtype=np.float32)
    b = rng.standard_normal((32, 96), dtype=np.float32)
    return np.array_equal(a @ b, np.concatenate([a[:150] @ b, a[150:] @ b]))


def assert_same_as_one_thread(many, one):
    """Bit-identical where the BLAS rounds a row whatever the row count, else float32 rounding."""
    exact = blas_rows_do_not_depend_on_the_row_count()
    for x, y in zip(one, many):
        if exact:
            np.testing.assert_array_equal(y, x)
        else:
            np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5)


def forward_outputs(model, ids, threads):
    _parallel.set_num_threads(threads)
    return model.logprobs(ids), model.token_logprobs(ids), model.logits(ids)


@settings(max_examples=examples(25), deadline=None)
@given(a=archs, B=st.integers(1, 5), T=st.integers(2, 6), threads=st.integers(2, 3))
def test_sharded_forward_equals_one_thread(a, B, T, threads):
    model = arch_model(a)
    ids = np.random.default_rng(a["seed"]).integers(0, 11, size=(B, T))
    one = forward_outputs(model, ids, 1)
    many = forward_outputs(model, ids, threads)
    for x, y in zip(one, many):
        np.testing.assert_allclose(y, x, rtol=1e-12, atol=1e-12)


def test_sharded_forward_is_bit_identical_on_a_real_shape(shard_calls):
    cfg = GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=4, n_embd=32)  # float32
    model = GPT(cfg, seed=3)
    ids = np.random.default_rng(0).integers(0, 64, size=(4, 32))
    one = forward_outputs(model, ids, 1)
    assert shard_calls == []
    many = forward_outputs(model, ids, 2)
    assert shard_calls == [2, 2, 2]
    assert_same_as_one_thread(many, one)


def grads_at(model, batch, mask, threads):
    _parallel.set_num_threads(threads)
    loss, grads = model.loss_and_grads(batch, mask)
    return loss, model.flat_grads_.copy()


@settings(max_examples=examples(25), deadline=None)
@given(a=archs, B=st.integers(2, 5), T=st.integers(1, 5), threads=st.integers(2, 3),
       masked=st.booleans())
def test_sharded_training_step_equals_one_thread(a, B, T, threads, masked):
    model = arch_model(a)
    rng = np.random.default_rng(a["seed"])
    batch = rng.integers(0, 11, size=(B, T + 1))
    mask = rng.random((B, T)) < 0.6 if masked else None
    loss1, g1 = grads_at(model, batch, mask, 1)
    loss2, g2 = grads_at(model, batch, mask, threads)
    assert loss2 == pytest.approx(loss1, rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(g2, g1, rtol=1e-12, atol=1e-12 * np.abs(g1).max())


def test_sharded_training_weights_every_target_by_the_whole_batch(shard_calls):
    """A shard with no counted target still adds nothing; the mean is over the whole batch."""
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8, dtype="float64"))
    batch = np.random.default_rng(1).integers(0, 13, size=(4, 9))
    mask = np.zeros((4, 8), bool)
    mask[:2, :5] = True  # every counted target in the first shard
    loss1, g1 = grads_at(model, batch, mask, 1)
    loss2, g2 = grads_at(model, batch, mask, 2)
    assert shard_calls == [2]
    assert loss2 == pytest.approx(loss1, rel=1e-13)
    np.testing.assert_allclose(g2, g1, rtol=1e-12, atol=1e-15)


def test_dropout_with_an_rng_keeps_the_unsharded_path(shard_calls):
    cfg = GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8, dropout=0.2, dtype="float64")
    model = GPT(cfg, seed=0)
    batch = np.random.default_rng(1).integers(0, 13, size=(4, 9))
    _parallel.set_num_threads(2)
    loss2, _ = model.loss_and_grads(batch, rng=np.random.default_rng(5))
    _parallel.set_num_threads(1)
    loss1, _ = model.loss_and_grads(batch, rng=np.random.default_rng(5))
    assert shard_calls == [] and loss1 == loss2


def test_blas_threads_are_restored_after_a_sharded_pass(shard_calls):
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8))
    seen = []
    real = model._pick_logprobs
    model._pick_logprobs = lambda *args, **kw: (seen.append(blas_threads()), real(*args, **kw))[1]
    _parallel.set_num_threads(2)
    with _parallel.blas_controller().limit(limits=3):  # the user's setting
        model.token_logprobs(np.zeros((2, 8), int))  # two sequences: a shard each
        model.token_logprobs(np.zeros((1, 8), int))  # one sequence: the stage split
        model.loss_and_grads(np.zeros((2, 9), int))
        assert set(blas_threads()) == {3}
    assert shard_calls == [2, 2, 2]
    assert seen and all(set(s) == {1} for s in seen)  # one BLAS thread inside the shards


@pytest.mark.parametrize("where", ["batch", "stages", "training"])
def test_an_error_in_a_shard_reaches_the_caller_and_blas_is_restored(monkeypatch, where):
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=8))
    before = blas_threads()

    def failing_on(real, arg, size):
        def run(*args, **kwargs):
            if len(args[arg]) == size:
                raise ValueError("shard failed")
            return real(*args, **kwargs)
        return run

    if where == "batch":  # shards of 2 and 3 sequences of 7 inputs: 14 and 21 rows
        model._pick_logprobs = failing_on(model._pick_logprobs, 0, 21)
        call = lambda: model.token_logprobs(np.zeros((5, 8), int))
    elif where == "stages":  # rows 0-2 and 3-6: the second thread fails, the first waits at a barrier
        monkeypatch.setattr(stages, "_rows_after_attention", lambda *a: 1 / 0 if a[4] == 3 else None)
        call = lambda: model.token_logprobs(np.zeros((1, 7), int))
    else:
        monkeypatch.setattr(backward, "_forward_backward", failing_on(backward._forward_backward, 1, 3))
        call = lambda: model.loss_and_grads(np.zeros((5, 9), int))
    _parallel.set_num_threads(2)
    with pytest.raises(ZeroDivisionError if where == "stages" else ValueError):
        call()
    assert blas_threads() == before


@settings(max_examples=examples(25), deadline=None)
@given(a=archs, T=st.integers(2, 6), threads=st.integers(2, 3), q_block=st.sampled_from([1, 2, 128]))
def test_stage_split_of_one_sequence_equals_one_thread(a, T, threads, q_block):
    """Attention split over key/value heads (kv >= threads) or query rows (kv < threads)."""
    model = arch_model(a)
    ids = np.random.default_rng(a["seed"]).integers(0, 11, size=(1, T))
    one = forward_outputs(model, ids, 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stages, "Q_BLOCK", q_block)
        many = forward_outputs(model, ids, threads)
    for x, y in zip(one, many):
        np.testing.assert_allclose(y, x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kv_heads", [1, 4])
def test_stage_split_is_bit_identical_on_a_real_shape(shard_calls, kv_heads):
    cfg = GPTConfig.preset("llama-small", vocab_size=64, block_size=300, n_layer=2, n_head=4,
                           n_kv_head=kv_heads, n_embd=32, mlp_hidden=48)  # float32, rotary, SwiGLU
    model = GPT(cfg, seed=3)
    ids = np.random.default_rng(0).integers(0, 64, size=(1, 300))  # query rows split at 256
    one = forward_outputs(model, ids, 1)
    many = forward_outputs(model, ids, 2)
    assert shard_calls == [2, 2, 2]
    assert_same_as_one_thread(many, one)


def test_attention_parts_cover_heads_or_rows_once():
    cfg = GPTConfig(vocab_size=5, block_size=1024, n_layer=1, n_head=4, n_embd=8)
    assert stages._attention_parts(cfg, 1024, 2) == [("heads", 0, 2), ("heads", 2, 4)]
    parts = stages._attention_parts(cfg, 1024, 8)  # fewer heads than threads: query rows
    assert [p[0] for p in parts] == ["rows"] * 8
    assert parts[0][1] == 0 and parts[-1][2] == 1024
    assert all(p[2] == q[1] and p[2] % stages.Q_BLOCK == 0 for p, q in zip(parts, parts[1:]))
    assert parts[0][2] - parts[0][1] > parts[-1][2] - parts[-1][1]  # early rows are cheaper


def test_without_openblas_the_per_op_path_runs(monkeypatch, shard_calls):
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8, dtype="float64"))
    ids = np.random.default_rng(0).integers(0, 13, size=(3, 8))
    expected = forward_outputs(model, ids, 1)[0]
    monkeypatch.setitem(_parallel._blas, "controller", None)
    monkeypatch.setitem(_parallel._blas, "pid", os.getpid())
    np.testing.assert_array_equal(forward_outputs(model, ids, 2)[0], expected)
    assert shard_calls == []


@settings(max_examples=examples(20), deadline=None)
@given(n_tasks=st.integers(1, 4), threads=st.integers(1, 3))
def test_run_tasks_returns_results_in_order_with_inner_splitting_inline(n_tasks, threads):
    _parallel.set_num_threads(threads)
    tasks = [lambda i=i: (i, len(_parallel.for_row_blocks(lambda lo, hi: 0, 10, work=10 ** 9)))
             for i in range(n_tasks)]
    assert _parallel.run_tasks(tasks) == [(i, 1) for i in range(n_tasks)]
    assert not getattr(_parallel._local, "inside", False)  # the caller's flag is restored


@pytest.mark.parametrize("n_shards,n_items", [(1, 1), (2, 5), (3, 3), (3, 10)])
def test_shard_bounds_cover_the_items_once(n_shards, n_items):
    bounds = _parallel.shard_bounds(n_items, n_shards)
    assert [i for lo, hi in bounds for i in range(lo, hi)] == list(range(n_items))
    assert max(hi - lo for lo, hi in bounds) - min(hi - lo for lo, hi in bounds) <= 1
