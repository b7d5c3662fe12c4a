from collections import Counter

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

import seqprob as sp
from seqprob.errors import InputError, TemperatureError, TokenIdError
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


# distinct values at least 1e-3 apart: at T = 1e-300 a gap of 1e-313 is *not* decided by the
# limit T -> 0 (the true softmax is still near uniform), so such rows are not argmax cases
gapped_rows = hnp.arrays(np.float64, st.integers(2, 12), elements=st.integers(-20_000, 20_000).map(lambda i: i / 1000))


@given(gapped_rows)
def test_top_k_one_and_tiny_temperature_are_argmax(row):
    """All the mass on the maximal entries (shared equally by ties), none elsewhere."""
    base = next_token_probs(row)
    for probs, is_max in ((next_token_probs(row, temperature=1e-300), row == row.max()),
                          (next_token_probs(row, top_k=1), base == base.max())):  # ties in probability
        assert (probs[~is_max] == 0).all()
        np.testing.assert_allclose(probs[is_max], 1 / is_max.sum())


@given(hnp.arrays(np.float64, st.integers(2, 12), elements=st.integers(-20, 20).map(float), unique=True),
       st.integers(1, 12), st.floats(0.05, 1.0))
def test_top_k_and_top_p_keep_exactly_their_sets(row, k, p):
    order = np.argsort(-row)
    kept = next_token_probs(row, top_k=k) > 0
    assert set(np.flatnonzero(kept)) == set(order[:k].tolist())  # the k most likely
    base = next_token_probs(row)
    nucleus = np.flatnonzero(next_token_probs(row, top_p=p) > 0)
    mass = np.sort(base[nucleus])
    assert mass.sum() >= p - 1e-9  # reaches p ...
    assert mass[1:].sum() < p + 1e-9  # ... and is the smallest such set of most likely tokens
    assert set(nucleus.tolist()) == set(order[:len(nucleus)].tolist())


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
    for kwargs, needle in [({"top_k": "a"}, "top_k must be an integer >= 1, got 'a'"),
                           ({"top_k": 2.5}, "got 2.5"), ({"max_new_tokens": "3"}, "max_new_tokens"),
                           ({"n": -1}, "n must be an integer >= 0, got -1"), ({"seed": -1}, "seed"),
                           ({"top_p": float("nan")}, "top_p"), ({"temperature": -1}, "got -1")]:
        with pytest.raises(InputError, match=needle):
            sp.sample(table, "", **kwargs)
    with pytest.raises(TokenIdError, match="99"):
        generate(table, [table.vocab.bos_id, 99])
    with pytest.raises(InputError, match="integers"):
        generate(table, [1.5])


def test_numpy_scalars_are_accepted(table):
    assert sp.sample(table, "", top_p=np.float32(0.5), top_k=np.int64(2), seed=np.int64(1), n=np.int32(2)) \
        == sp.sample(table, "", top_p=0.5, top_k=2, seed=1, n=2)
