import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

import seqprob as sp
from seqprob.errors import InputError, TemperatureError
from seqprob.sampling import generate, next_token_probs

LINES = ["a b", "a b", "a c", "b"]
logit_rows = hnp.arrays(np.float64, st.integers(2, 12), elements=st.floats(-20, 20))


@pytest.fixture(scope="module")
def table():
    return sp.JointTable().fit(LINES)


def test_same_seed_same_sample(table):
    a = sp.sample(table, "", seed=3, n=5)
    assert a == sp.sample(table, "", seed=3, n=5)
    assert set(a) <= set(LINES)


def test_samples_follow_the_model(table):
    draws = Counter(sp.sample(table, "", seed=0, n=400))
    observed = [draws[s] for s in ("a b", "a c", "b")]
    expected = [400 * 0.5, 400 * 0.25, 400 * 0.25]
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_prompt_is_continued(table):
    assert sp.sample(table, "a", seed=1, temperature=1e-9) == "a b"  # argmax after "a"


def test_stop_at_eos_and_max_tokens(table):
    ids = generate(table, [table.vocab.bos_id], max_new_tokens=10, seed=0, stop_at_eos=False)
    assert len(ids) == 10
    assert table.vocab.bos_id not in ids
    assert generate(table, [table.vocab.bos_id], max_new_tokens=0) == []


@given(logit_rows, st.floats(0.1, 5), st.integers(1, 12), st.floats(0.05, 1.0))
def test_filters_give_a_distribution(row, t, k, p):
    probs = next_token_probs(row, temperature=t, top_k=k, top_p=p)
    assert probs.sum() == pytest.approx(1.0) and (probs >= 0).all()
    assert (probs > 0).sum() <= max(k, 1) + np.sum(row == np.sort(row)[-min(k, row.size)])


@given(logit_rows)
def test_top_k_one_and_tiny_temperature_are_argmax(row):
    for probs in (next_token_probs(row, temperature=1e-12),):
        assert probs[np.argmax(row)] > 0
        assert probs.sum() == pytest.approx(1.0)
    assert next_token_probs(row, top_k=1)[np.argmax(row)] >= 1 / row.size


def test_top_p_keeps_the_nucleus():
    probs = next_token_probs(np.log([0.5, 0.3, 0.15, 0.05]), top_p=0.8)
    np.testing.assert_allclose(probs, [0.625, 0.375, 0, 0])
    probs = next_token_probs(np.log([0.5, 0.3, 0.15, 0.05]), top_p=0.81)
    assert (probs > 0).sum() == 3


def test_bad_arguments(table):
    with pytest.raises(TemperatureError):
        sp.sample(table, "", temperature=0)
    with pytest.raises(InputError, match="top_k"):
        sp.sample(table, "", top_k=0)
    with pytest.raises(InputError, match="top_p"):
        sp.sample(table, "", top_p=1.5)
    with pytest.raises(InputError, match="max_new_tokens"):
        sp.sample(table, "", max_new_tokens=-1)
    with pytest.raises(InputError, match="tokenizer"):
        sp.sample(sp.UniformModel(table.vocab), "a")
