"""Scoring streams the vocabulary: GPT.token_stats and functional.target_stats give the numbers
of the full (T, V) path without building it, whatever the chunk size."""
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, strategies as st

import seqprob as sp
from seqprob import functional
from seqprob.errors import SeqProbError
from seqprob.functional import LN2, target_stats
from seqprob.gpt import GPT, GPTConfig
from seqprob.protocols import StreamingScorer
from seqprob.scoring.core import RowsOnly

V = 97
LLAMA = dict(norm="rmsnorm", mlp="swiglu", positions="rotary", bias=False, tie_weights=False, n_kv_head=2)
# float64 rows agree to rounding; float32 rows may round differently by how many rows one
# BLAS product has (a chunk of 1 row against all rows at once).
TOL = {"float64": 1e-12, "float32": 2e-5}


def _model(dtype="float64", family="gpt2", block_size=48, vocab_size=V):
    extra = LLAMA if family == "llama" else {}
    cfg = GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=2, n_head=4, n_embd=32,
                    dtype=dtype, **extra)
    return GPT(cfg)




def _direct(rows, targets):
    """The three numbers by their definitions, row by row, in float64."""
    rows = np.asarray(rows, dtype=np.float64)
    lp = rows[np.arange(len(rows)), targets]
    p = np.exp(rows)
    plogp = np.where(p > 0, p * np.where(np.isfinite(rows), rows, 0.0), 0.0)
    return lp, -plogp.sum(axis=1), 1 + (rows > lp[:, None]).sum(axis=1)


@st.composite
def _rows(draw):
    n, v = draw(st.integers(1, 12)), draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, v)) * draw(st.sampled_from([0.1, 1.0, 20.0]))
    logits = np.round(logits, draw(st.sampled_from([0, 1, 6])))  # rounding makes ties
    logits[rng.random((n, v)) < draw(st.sampled_from([0.0, 0.3]))] = -np.inf
    logits[np.arange(n), rng.integers(0, v, size=n)] = 0.0  # every row keeps a finite entry
    targets = rng.integers(0, v, size=n)
    return functional.log_softmax(logits, axis=-1), targets


@given(_rows())
def test_target_stats_is_the_definition(case):
    rows, targets = case
    got = target_stats(rows, targets)
    lp, ent, rank = _direct(rows, targets)
    np.testing.assert_array_equal(got.logprob, lp)
    np.testing.assert_allclose(got.entropy, ent, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(got.rank, rank)  # a tie ranks with the token


@given(_rows(), st.integers(1, 64))
def test_target_stats_does_not_depend_on_its_block(case, block_floats):
    rows, targets = case
    whole = target_stats(rows, targets)
    try:
        old, functional.STATS_BLOCK_FLOATS = functional.STATS_BLOCK_FLOATS, block_floats
        blocked = target_stats(rows, targets)
    finally:
        functional.STATS_BLOCK_FLOATS = old
    for a, b in zip(whole, blocked):
        np.testing.assert_array_equal(a, b)


def test_target_stats_names_a_nan_row():
    rows = np.log(np.full((2, 4), 0.25))
    rows[1, 2] = np.nan
    with pytest.raises(SeqProbError, match="NaN|non-finite|finite"):
        target_stats(rows, np.array([0, 1]))


MODELS = {(d, f): _model(d, f) for d in ("float32", "float64") for f in ("gpt2", "llama")}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("family", ["gpt2", "llama"])
@given(T=st.integers(1, 47), B=st.integers(1, 3), budget=st.sampled_from([1, 7 * V * 8, 10 ** 9]),
       seed=st.integers(0, 1000))
def test_token_stats_are_the_rows_numbers(dtype, family, T, B, budget, seed):
    model = MODELS[dtype, family]
    ids = np.random.default_rng(seed).integers(0, V, size=(B, T + 1))
    ref = target_stats(model.logprobs(ids[:, :-1]).reshape(B * T, V), ids[:, 1:].reshape(-1))
    got = model.token_stats(ids, budget_bytes=budget)  # chunk 1 row, 7 rows, all rows
    assert all(a.shape == (B, T) for a in got)
    np.testing.assert_allclose(got.logprob.reshape(-1), ref.logprob, rtol=0, atol=TOL[dtype])
    np.testing.assert_allclose(got.entropy.reshape(-1), ref.entropy, rtol=0, atol=TOL[dtype])
    if dtype == "float64":
        np.testing.assert_array_equal(got.rank.reshape(-1), ref.rank)
    else:  # a near-tie may flip under float32 rounding, never more than that
        assert np.abs(got.rank.reshape(-1) - ref.rank).max() <= 1
    one = model.token_stats(ids[0], budget_bytes=budget)
    assert one.logprob.shape == (T,)
    # the log-probs of the two streamed paths are one number, bit for bit (sp.score with and
    # without the distribution columns, sp.joint_logprob)
    model.score_budget_bytes = budget
    try:
        np.testing.assert_array_equal(got.logprob, model.token_logprobs(ids))
    finally:
        del model.score_budget_bytes


def test_token_stats_chunking_keeps_float64_numbers():
    model = MODELS["float64", "llama"]
    ids = np.random.default_rng(3).integers(0, V, size=(2, 41))
    runs = [model.token_stats(ids, budget_bytes=b) for b in (1, 3 * V * 8, 40 * V * 8, 10 ** 9)]
    for other in runs[1:]:
        np.testing.assert_allclose(other.logprob, runs[0].logprob, rtol=0, atol=1e-13)
        np.testing.assert_allclose(other.entropy, runs[0].entropy, rtol=0, atol=1e-13)
        np.testing.assert_array_equal(other.rank, runs[0].rank)


def test_token_stats_slides_over_long_sequences():
    model = _model("float64", "llama", block_size=16)
    ids = np.random.default_rng(4).integers(0, V, size=60)
    got = model.token_stats(ids, stride=8, budget_bytes=5 * V * 8)
    rows = model.logprobs(ids[:-1], stride=8)  # (59, V)
    ref = target_stats(rows, ids[1:])
    np.testing.assert_allclose(got.logprob, ref.logprob, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.entropy, ref.entropy, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got.rank, ref.rank)


@pytest.mark.parametrize("budget", [0, -5, 2.5, "1M"])
def test_token_stats_refuses_a_bad_budget(budget):
    with pytest.raises(SeqProbError, match="budget_bytes"):
        MODELS["float64", "gpt2"].token_stats([0, 1, 2], budget_bytes=budget)


def test_a_gpt_is_a_streaming_scorer_and_the_wrapper_is_not():
    model = MODELS["float32", "gpt2"]
    assert isinstance(model, StreamingScorer)
    assert not isinstance(RowsOnly(model), StreamingScorer)
    assert not isinstance(sp.toy_english(), StreamingScorer)  # scored from its rows


def _ids_texts(rng, lengths):
    return [rng.integers(1, V, size=n).tolist() for n in lengths]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_score_streams_and_gives_the_full_rows_table(dtype):
    model = MODELS[dtype, "llama"]
    texts = _ids_texts(np.random.default_rng(5), [2, 9, 30, 17])  # a batch with padding
    streamed = sp.score(model, texts, bos=False, eos=False)
    full = sp.score(RowsOnly(model), texts, bos=False, eos=False)
    assert list(streamed.columns) == list(full.columns)
    assert "entropy_bits" in streamed and "rank" in streamed
    tol = TOL[dtype]
    for col in ("logprob", "surprisal_bits", "entropy_bits"):
        np.testing.assert_allclose(streamed[col], full[col], rtol=0, atol=tol / LN2 + tol)
    if dtype == "float64":
        np.testing.assert_array_equal(streamed["rank"], full["rank"])


def test_score_windowed_streams_long_texts():
    model = _model("float64", "gpt2", block_size=12)
    texts = _ids_texts(np.random.default_rng(6), [40, 5])
    streamed = sp.score(model, texts, bos=False, eos=False, stride=4)
    full = sp.score(RowsOnly(model), texts, bos=False, eos=False, stride=4)
    for col in ("logprob", "entropy_bits"):
        np.testing.assert_allclose(streamed[col], full[col], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(streamed["rank"], full["rank"])


def test_streamed_scoring_never_holds_the_t_by_v_rows():
    """Peak traced memory of token_stats is far below one (T, V) float32 block."""
    vocab, T = 20_000, 512
    model = _model("float32", "gpt2", block_size=T, vocab_size=vocab)
    ids = np.random.default_rng(7).integers(0, vocab, size=T + 1)
    model.token_stats(ids[:9], budget_bytes=1 << 16)  # warm: lazily built caches are not scoring
    tracemalloc.start()
    try:
        model.token_stats(ids, budget_bytes=1 << 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    full_rows = T * vocab * 4  # 41 MB
    assert peak < full_rows / 4, (peak, full_rows)
