import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from seqprob import functional as F
from seqprob.errors import InputError, SeqProbError, TemperatureError

finite = st.floats(-50, 50, allow_nan=False, width=32)
dtypes = st.sampled_from([np.float32, np.float64])


def arrays(dtype=np.float64, min_side=1):
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=3, min_side=min_side, max_side=6),
                      elements=finite)


@given(arrays(), dtypes)
def test_log_softmax_rows_sum_to_one(x, dtype):
    lp = F.log_softmax(x.astype(dtype))
    assert lp.dtype == dtype and lp.shape == x.shape
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.exp(lp.astype(np.float64)).sum(-1), 1.0, atol=tol)
    np.testing.assert_allclose(F.logsumexp(lp.astype(np.float64)), 0.0, atol=tol)


@given(arrays(), st.floats(-1e4, 1e4))
def test_logsumexp_shift_invariance(x, c):
    np.testing.assert_allclose(F.logsumexp(x + c), F.logsumexp(x) + c, rtol=1e-9, atol=1e-9)


def test_logsumexp_no_overflow():
    assert F.logsumexp(np.array([1000.0, 1000.0])) == pytest.approx(1000 + math.log(2))
    assert F.logsumexp(np.array([-np.inf, -np.inf])) == -np.inf


@given(arrays(), st.floats(0.05, 20))
def test_softmax_is_distribution(x, t):
    p = F.softmax(x, temperature=t)
    assert np.all(p >= 0)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-12)


@given(hnp.arrays(np.float64, st.integers(1, 8), elements=finite, unique=True))
def test_temperature_to_zero_is_argmax(x):
    p = F.softmax(x, temperature=1e-300)
    expected = np.zeros_like(x)
    expected[np.argmax(x)] = 1.0
    np.testing.assert_array_equal(p, expected)


def test_temperature_zero_limit_splits_ties_and_float32():
    p = F.softmax(np.array([1.0, 3.0, 3.0], dtype=np.float32), temperature=1e-40)
    np.testing.assert_array_equal(p, [0.0, 0.5, 0.5])


@given(arrays())
def test_temperature_infinity_is_uniform(x):
    p = F.softmax(x, temperature=math.inf)
    np.testing.assert_allclose(p, 1.0 / x.shape[-1])


def test_temperature_inf_ignores_impossible_tokens():
    np.testing.assert_allclose(F.softmax([0.0, -np.inf, 5.0], temperature=math.inf), [0.5, 0.0, 0.5])


@given(hnp.arrays(np.float64, st.integers(2, 8), elements=finite), st.floats(0.1, 10), st.floats(0.1, 10))
def test_higher_temperature_never_lowers_entropy(x, t1, t2):
    lo, hi = sorted((t1, t2))
    h = lambda t: F.entropy(np.log(np.maximum(F.softmax(x, temperature=t), 1e-300)))
    assert h(hi) >= h(lo) - 1e-9


@pytest.mark.parametrize("t", [0, -1, float("nan"), "hot", None])
def test_bad_temperature(t):
    with pytest.raises(TemperatureError) as info:
        F.softmax([1.0, 2.0], temperature=t)
    assert repr(t) in str(info.value) or str(t) in str(info.value)
    assert isinstance(info.value, (ValueError, SeqProbError))


@pytest.mark.parametrize("bad", [[1.0, np.nan], [np.inf, 0.0]])
def test_nan_or_inf_logits_are_errors(bad):
    for fn in (F.log_softmax, F.logsumexp, F.softmax):
        with pytest.raises(InputError, match="NaN or \\+inf"):
            fn(np.array(bad))


def test_empty_and_non_numeric_inputs():
    with pytest.raises(InputError):
        F.log_softmax(np.array([]))
    with pytest.raises(InputError, match="dtype"):
        F.log_softmax(np.array(["a", "b"]))
    with pytest.raises(InputError, match="-inf everywhere"):
        F.log_softmax(np.array([-np.inf, -np.inf]))


def test_entropy_units():
    lp = np.log(np.full(8, 1 / 8))
    assert F.entropy(lp) == pytest.approx(math.log(8))
    assert F.entropy(lp, base=2) == pytest.approx(3.0)
    assert F.entropy(np.array([0.0, -np.inf])) == 0.0
    assert F.nats_to_bits(math.log(2)) == pytest.approx(1.0)
    assert F.bits_to_nats(1.0) == pytest.approx(math.log(2))
    assert F.nats_to_log10(math.log(10)) == pytest.approx(1.0)
    assert F.log10_to_nats(1.0) == pytest.approx(math.log(10))
    assert F.surprisal_bits(math.log(0.25)) == pytest.approx(2.0)
