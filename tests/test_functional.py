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


extreme = st.sampled_from(["plain", "huge", "neginf", "tie"])


def _extreme_row(kind, dtype):
    big = float(np.finfo(dtype).max) * 0.9
    return np.asarray({"plain": [0.0, 1.0], "huge": [-big, big], "neginf": [-np.inf, 2.0],
                       "tie": [3.0, 3.0]}[kind], dtype=dtype)


@given(arrays(min_side=2).filter(lambda a: a.ndim == 2), extreme, st.floats(1e-30, 1e3), dtypes)
def test_softmax_rows_are_independent(x, row, t, dtype):
    """Each row's softmax depends on that row only, even next to a row that overflows."""
    x = x[:, :2].astype(dtype)
    stacked = np.vstack([x, _extreme_row(row, dtype)])
    p = F.softmax(stacked, temperature=t)
    for i in range(len(stacked)):
        np.testing.assert_array_equal(p[i], F.softmax(stacked[i], temperature=t))
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-6)


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=3, max_side=5), elements=finite),
       st.floats(0.1, 10))
def test_softmax_along_any_axis(x, t):
    for axis in range(x.ndim):
        p = F.softmax(x, temperature=t, axis=axis)
        last = F.softmax(np.moveaxis(x, axis, -1), temperature=t)
        np.testing.assert_allclose(p, np.moveaxis(last, -1, axis))
        np.testing.assert_allclose(np.exp(F.log_softmax(x, axis=axis)), F.softmax(x, axis=axis))


@given(hnp.arrays(np.float64, st.integers(2, 8), elements=finite, unique=True), st.floats(1e-3, 1.0))
def test_lower_temperature_concentrates_on_the_argmax(x, t):
    """T -> 0 approaches argmax monotonically: the top probability never drops as T falls."""
    top = np.argmax(x)
    assert F.softmax(x, temperature=t / 2)[top] >= F.softmax(x, temperature=t)[top] - 1e-12


def test_extreme_values_give_no_warning_and_no_nan():
    with np.errstate(all="raise"):
        assert F.logsumexp(np.array([-1.7e308, 1.7e308])) == 1.7e308
        np.testing.assert_array_equal(F.log_softmax(np.array([-1.7e308, 1.7e308])), [-np.inf, 0.0])
        np.testing.assert_array_equal(F.softmax(np.array([1.0, 2.0], np.float16), temperature=1e-10), [0, 1])


def test_bad_axis_scalar_and_nan_entropy():
    with pytest.raises(InputError, match="axis 5"):
        F.logsumexp(np.zeros((2, 3)), axis=5)
    with pytest.raises(InputError, match="scalar"):
        F.softmax(3.0)
    with pytest.raises(InputError, match=r"shape \(0, 3\)"):
        F.softmax(np.zeros((0, 3)), axis=0)
    with pytest.raises(InputError, match="NaN"):
        F.entropy([np.nan, 0.0])
