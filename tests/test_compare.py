"""compare: bootstrap intervals (coverage checked on P*), paired differences, bad input."""
import math
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.scoring.comparison import bootstrap_ratio
from seqprob.errors import InputError

from budget import examples


@pytest.fixture(scope="module")
def truth():
    return sp.toy_english()


def test_interval_coverage_on_p_star(truth):
    """Corpora drawn from P*: the 95% interval of bits per token covers P*'s exact entropy rate
    (the ratio of expectations the estimator targets) in 95% of corpora, within binomial error."""
    target = truth.entropy().per_token / math.log(2)  # exact (deterministic grammar), bits/token
    n_corpora, size = 200, 300  # at 80 sentences the percentile interval undercovers (0.90, measured)
    ids = truth.sample_ids(n_corpora * size, seed=0)
    nll = -truth._joint_logprobs(ids) / math.log(2)  # (n,) bits per sentence
    tokens = np.array([len(s) + 1 for s in ids], dtype=float)
    covered = 0
    for k in range(n_corpora):
        part = slice(k * size, (k + 1) * size)
        _, low, high = bootstrap_ratio(nll[part], tokens[part], n_boot=250, seed=k)
        covered += low <= target <= high
    rate, se = covered / n_corpora, math.sqrt(0.95 * 0.05 / n_corpora)
    assert abs(rate - 0.95) <= 3 * se, rate  # within 3 binomial standard errors


def test_compare_models_and_pairs(truth):
    texts = truth.sample(60, seed=1)
    kn = sp.ngram.ModifiedKneserNey(order=2).fit(truth.sample(500, seed=2), tokenizer=truth.tokenizer)
    cmp = sp.compare({"truth": truth, "kn2": kn, "same": truth}, texts, tokenizer=truth.tokenizer,
                     n_boot=300, seed=0)
    m = cmp.models.set_index("model")
    assert m.loc["truth", "perplexity"] == pytest.approx(sp.perplexity(truth, texts))
    assert m.loc["truth", "bits_per_byte"] == pytest.approx(sp.evaluate(truth, texts).bits_per_byte)
    for name in m.index:
        assert m.loc[name, "perplexity_low"] <= m.loc[name, "perplexity"] <= m.loc[name, "perplexity_high"]
    pairs = cmp.pairs.set_index(["model_a", "model_b"])
    tk = pairs.loc[("truth", "kn2")]
    assert tk.metric == "bits_per_token" and tk.difference < 0 and tk.high < 0 and tk.p_value < 0.05
    same = pairs.loc[("truth", "same")]
    assert same.difference == 0 and same.low == same.high == 0 and same.p_value == 1.0
    again = sp.compare({"truth": truth, "kn2": kn}, texts, n_boot=300, seed=0)
    assert again.pairs.iloc[0].to_dict() == cmp.pairs.iloc[0].to_dict()  # seeded


def test_bad_input(truth):
    with pytest.raises(InputError, match=r"n_boot must be an integer in \[100, 1000000\]"):
        sp.compare(truth, truth.sample(5, seed=0), n_boot=99)
    with pytest.raises(InputError, match="at least 2 texts"):
        sp.compare(truth, ["the cat sat"], n_boot=100)
    with pytest.raises(InputError, match="confidence"):
        sp.compare(truth, truth.sample(5, seed=0), confidence=1.5)


C = ["a b c", "b c a", "c a b"]


@pytest.fixture(scope="module")
def kn():
    return sp.ngram.KneserNey(order=2, discount=0.5).fit(C)


def test_n_boot_has_limits(kn):
    from seqprob.scoring.comparison import MAX_BOOT

    with pytest.raises(InputError, match=f"n_boot must be an integer in \\[100, {MAX_BOOT}\\], got {10**12}"):
        sp.compare(kn, ["a b", "b c"], n_boot=10 ** 12)
    with pytest.raises(InputError, match="n_boot must be an integer in "):
        bootstrap_ratio([1.0, 2.0], [1.0, 1.0], n_boot=MAX_BOOT + 1)


@pytest.mark.parametrize("rows", [1, 7, 64, 1000])
def test_redraws_in_chunks_equal_the_whole_matrix(monkeypatch, rows):
    """Past WHOLE_BOOT_BYTES the redraw counts are drawn again in row chunks for each product:
    the same counts as one whole draw, so the same intervals, in bounded memory."""
    C = sys.modules["seqprob.scoring.comparison"]

    x = np.random.default_rng(1).random(50)
    whole = C._Redraws(50, 300, seed=4)
    assert whole._whole is not None
    monkeypatch.setattr(C, "WHOLE_BOOT_BYTES", rows * 8 * 50)
    chunked = C._Redraws(50, 300, seed=4)
    assert chunked._whole is None or rows >= 300
    for j in range(0, 50, 7):  # a one-hot product reads a column of counts exactly
        np.testing.assert_array_equal(chunked @ np.eye(50)[j], whole._whole[:, j])
    np.testing.assert_allclose(chunked @ x, whole @ x, rtol=1e-13)  # BLAS may sum other blocks
    np.testing.assert_array_equal(chunked @ x, chunked @ x)  # the same counts every time
    assert bootstrap_ratio(x, x + 1, n_boot=300, seed=4) == pytest.approx(
        bootstrap_ratio(x, x + 1, n_boot=300, seed=4, weights=whole._whole), rel=1e-13)


def test_compare_is_the_same_with_chunked_redraws(kn, monkeypatch):
    C = sys.modules["seqprob.scoring.comparison"]

    texts = ["a b", "b c", "c a b", "a a", "b"] * 4
    before = sp.compare(kn, texts, n_boot=200, seed=0).models
    monkeypatch.setattr(C, "WHOLE_BOOT_BYTES", 8 * len(texts) * 3)  # 3 replicates a chunk
    pd.testing.assert_frame_equal(sp.compare(kn, texts, n_boot=200, seed=0).models, before)


def test_compare_draws_the_redraws_once_however_many_models(kn, monkeypatch):
    """Chunked redraws are drawn again for every product: compare makes one product of every
    model's columns, so three models (three rows, three pairs) cost one pass of draws."""
    C = sys.modules["seqprob.scoring.comparison"]
    texts = ["a b", "b c", "c a b", "a a", "b"] * 4
    models = {"kn": kn, "wb": sp.ngram.WittenBell(order=2).fit(["a b c", "b c a", "c a b"]),
              "ad": sp.ngram.AbsoluteDiscount(order=2, discount=0.5).fit(["a b c", "b c a", "c a b"])}
    monkeypatch.setattr(C, "WHOLE_BOOT_BYTES", 8 * len(texts) * 40)  # 40 replicates a chunk
    draws = []
    real = C._Redraws._draw
    monkeypatch.setattr(C._Redraws, "_draw", lambda self, rng, rows: draws.append(rows) or real(self, rng, rows))
    cmp = sp.compare(models, texts, n_boot=200, seed=0)
    assert len(cmp.models) == 3 and len(cmp.pairs) == 3
    assert draws == [40] * 5  # one pass of 200 replicates in chunks of 40


def test_a_model_with_probability_zero_is_named_not_nan(kn):
    mle = sp.ngram.MLE(order=2).fit(C)
    with pytest.raises(InputError, match="model 'mle' assigns probability 0 to token 'zz' \\(text 0, position 1\\)"):
        sp.compare({"kn": kn, "mle": mle}, ["zz", "a b"], n_boot=100, seed=0)
    cmp = sp.compare({"kn": kn, "mle": mle}, ["a b", "b c a"], n_boot=100, seed=0)
    assert np.isfinite(cmp.models.drop(columns="model").to_numpy(dtype=float)).all()
    assert np.isfinite(cmp.pairs[["difference", "low", "high", "p_value"]].to_numpy(dtype=float)).all()


@pytest.mark.parametrize("numer, denom, message", [
    ([1, 2, 3], [1, 2], "same length, got 3 and 2"),
    ([], [], "numer must be a non-empty 1-D sequence"),
    (["a"], ["b"], "numer must be a non-empty 1-D sequence"),
    (None, None, "numer must be a non-empty 1-D sequence"),
    ([1, 2], None, "denom must be a non-empty 1-D sequence"),
    ([[1, 2]], [[1, 2]], "numer must be a non-empty 1-D sequence"),
    ([[1, 2], [3]], [1, 2], "numer must be a non-empty 1-D sequence"),  # ragged
    ([1, 2], [0, 0], "denominators must be >= 0 with a positive sum, got denom\\[0\\] = 0.0 and a sum of 0.0"),
    ([1, 2], [1, -1], "got denom\\[1\\] = -1.0"),
    ([np.nan, 1], [1, 1], "numer\\[0\\] is nan: every value must be a finite number"),
    ([1, 1], [1, np.inf], "denom\\[1\\] is inf"),
])
def test_bootstrap_ratio_bad_input(numer, denom, message):
    with pytest.raises(InputError, match=message):
        bootstrap_ratio(numer, denom, n_boot=100, seed=0)


def test_bootstrap_ratio_takes_bools_and_zero_denominators():
    """A 0/1 mask of correct answers over items, and items with a denominator 0, are fine as
    long as no replicate draws only zero denominators (then the ratio is undefined: refused)."""
    rng = np.random.default_rng(0)
    correct = rng.random(200) < 0.7
    est, low, high = bootstrap_ratio(correct, np.ones(200), n_boot=300, seed=0)
    assert est == correct.mean() and low <= est <= high
    denom = np.where(np.arange(200) % 5 == 0, 0.0, 1.0)
    est, low, high = bootstrap_ratio(correct * denom, denom, n_boot=300, seed=0)
    assert low <= est <= high
    with pytest.raises(InputError, match="drew only items whose denominator is 0"):
        bootstrap_ratio([1.0, 0.0], [1.0, 0.0], n_boot=300, seed=0)  # [item 2, item 2] happens


def test_a_generator_seed_gives_independent_replicates_each_call():
    x = np.random.default_rng(1).random(40)
    g = np.random.default_rng(7)
    first, second = (bootstrap_ratio(x, x + 1, n_boot=200, seed=g) for _ in range(2))
    assert first[1:] != second[1:]  # the generator moved on
    assert bootstrap_ratio(x, x + 1, n_boot=200, seed=7) == bootstrap_ratio(x, x + 1, n_boot=200, seed=7)


def test_bootstrap_ratio_weights_of_the_wrong_shape():
    with pytest.raises(InputError, match="weights must have shape \\(n_boot, 2\\)"):
        bootstrap_ratio([1.0, 2.0], [1.0, 1.0], n_boot=100, weights=np.ones((100, 3)))


@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(1e-3, 1e6)), min_size=1, max_size=30),
       st.integers(0, 2 ** 32))
@settings(max_examples=examples(50), deadline=None)
def test_bootstrap_ratio_is_finite_and_brackets_nothing_nan(pairs, seed):
    numer, denom = map(np.array, zip(*pairs))
    est, low, high = bootstrap_ratio(numer, denom, n_boot=100, seed=seed)
    assert est == pytest.approx(numer.sum() / denom.sum())
    assert all(map(math.isfinite, (est, low, high))) and low <= high
    assert (numer / denom).min() * (1 - 1e-9) <= low and high <= (numer / denom).max() * (1 + 1e-9)


@pytest.mark.parametrize("texts, message", [(None, "NoneType"), ({"a b": 1, "b c": 2}, "got a dict"),
                                            (["a b", b"b c"], "texts\\[1\\] must be a str, got bytes")])
def test_compare_refuses_texts_that_are_not_lines(kn, texts, message):
    with pytest.raises(InputError, match=message):
        sp.compare(kn, texts, n_boot=100)


@pytest.mark.parametrize("seed", ["x", -1, 1.5])
def test_compare_seed_is_checked_like_sample(kn, seed):
    with pytest.raises(InputError, match="seed must be None, an integer >= 0"):
        sp.compare(kn, ["a b", "b c"], n_boot=100, seed=seed)
