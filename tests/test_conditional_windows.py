"""Conditional scores (context read, not scored; the join marked) and sliding windows."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.errors import ContextLengthError, InputError
from seqprob.functional import plan_windows
from seqprob.scoring import stride_sweep
from seqprob.scoring.windows import window_logprobs, window_token_logprobs

from small_models import LINES, gpt, tok  # noqa: F401 - shared fixtures
from budget import examples


@pytest.fixture(scope="module")
def truth():
    return sp.toy_english()


def test_context_rows_are_dropped_and_sum_is_conditional(truth):
    df = sp.score(truth, ["sat on the mat"], context="the cat")
    assert df["token"].tolist() == ["sat", "on", "the", "mat", "</s>"]
    assert df["position"].tolist() == [3, 4, 5, 6, 7] and not df["spans_join"].any()
    full = sp.score(truth, ["the cat sat on the mat"])
    np.testing.assert_allclose(df["logprob"], full["logprob"].iloc[2:])
    assert sp.conditional_logprob(truth, "the cat", "sat on the mat", level="token", eos=True) == \
        pytest.approx(df["logprob"].sum())


def test_a_token_spanning_the_join_is_marked_not_split():
    bpe = sp.BPETokenizer.train(["the cat sat"] * 20, vocab_size=270)
    model = sp.UniformModel(bpe.vocab)
    df = sp.score(model, ["at"], tokenizer=bpe, context="the c", sep="")
    assert df["token"].tolist()[0] == " cat" and df["spans_join"].tolist() == [True, False]
    with pytest.warns(UserWarning, match="spans the join"):
        sp.conditional_logprob(model, "the c", "at", tokenizer=bpe, sep="", level="token")
    with pytest.raises(InputError, match="spans the join"):
        sp.conditional_logprob(model, "the c", "at", tokenizer=bpe, sep="")  # word level


def test_context_longer_than_the_window_needs_a_stride(gpt, tok):
    long_context = " ".join(["the cat sat on the mat"] * 4)  # 24 words > block_size 16
    with pytest.raises(ContextLengthError, match="pass stride="):
        sp.score(gpt, ["the dog sat"], context=long_context)
    df = sp.score(gpt, ["the dog sat"], context=long_context, stride=4)
    assert len(df) == 4 and np.isfinite(df["logprob"]).all()
    with pytest.raises(InputError, match="level must be"):
        sp.conditional_logprob(gpt, "the", "cat", level="char")


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 80), st.integers(2, 12), st.data(), st.booleans())
def test_window_plan_covers_every_row_once_with_enough_context(n, width, data, bos_per_window):
    stride = data.draw(st.integers(1, width - int(bos_per_window)))
    windows = plan_windows(n, width, stride, bos_per_window)
    new_rows = np.concatenate([np.arange(new, end) for _, end, new in windows])
    np.testing.assert_array_equal(new_rows, np.arange(n))  # every row once, in order
    assert windows[-1][1] == n  # the last window is right-aligned
    inner = width - int(bos_per_window)
    for k, (start, end, new) in enumerate(windows):
        assert end - start <= (width if k == 0 else inner)
        if k:
            assert new - start + 1 >= inner - stride + 1  # context of the first new row


def test_windows_match_the_gpt_sliding_window(gpt, tok):
    """Where the plans agree (the last window already ends at T), rows equal GPT.logprobs(stride)."""
    rng = np.random.default_rng(0)
    for stride, n in ((4, 16 + 4 * 5), (16, 48), (1, 20)):
        ids = np.concatenate([[tok.vocab.bos_id], rng.integers(3, len(tok.vocab), n - 1)])
        np.testing.assert_allclose(window_logprobs(gpt, ids, stride=stride), gpt.logprobs(ids, stride=stride),
                                   atol=1e-12)
        tl = window_token_logprobs(gpt, np.append(ids, 2), stride=stride)
        np.testing.assert_allclose(tl, gpt.token_logprobs(np.append(ids, 2), stride=stride), atol=1e-12)


def test_last_window_is_right_aligned_and_every_row_sees_its_window(gpt, tok):
    rng = np.random.default_rng(1)
    ids = np.concatenate([[tok.vocab.bos_id], rng.integers(3, len(tok.vocab), 29)])  # 30 rows, W = 16
    rows = window_logprobs(gpt, ids, stride=6)
    for start, end, new in plan_windows(30, 16, 6):
        for p in range(new, end):
            np.testing.assert_allclose(rows[p], gpt.logprobs(ids[start:p + 1])[-1], atol=1e-12)
    with_bos = window_logprobs(gpt, ids, stride=6, bos_per_window=True)
    start, end, new = plan_windows(30, 16, 6, bos_per_window=True)[-1]
    expected = gpt.logprobs(np.concatenate([[tok.vocab.bos_id], ids[start:end]]))[new - start + 1:]
    np.testing.assert_allclose(with_bos[new:], expected, atol=1e-12)


def test_stride_reaches_score_and_evaluate(gpt, tok):
    text = " ".join(LINES)  # 28 words > block_size 16
    df = sp.score(gpt, [text, "the cat"], stride=5, distribution=True)
    ev = sp.evaluate(gpt, [text, "the cat"], stride=5)
    assert df["logprob"].sum() == pytest.approx(ev.logprob)
    assert len(df) == ev.n_tokens == 29 + 3
    assert sp.perplexity(gpt, [text], stride=5, bos_per_window=True) != pytest.approx(
        sp.perplexity(gpt, [text], stride=5))
    with pytest.raises(InputError, match=r"stride must be an integer in \[1, 16\]"):
        sp.score(gpt, [text], stride=17)
    with pytest.raises(InputError, match=r"\[1, 15\]"):
        sp.evaluate(gpt, [text], stride=16, bos_per_window=True)
    sweep = stride_sweep(gpt, [text], [4, 16])
    assert sweep["stride"].tolist() == [4, 16] and (sweep["context_size"] == 16).all()


def test_models_without_a_context_ignore_the_stride(truth):
    texts = truth.sample(3, seed=0)
    assert sp.perplexity(truth, texts, stride=2) == sp.perplexity(truth, texts)


def test_window_plots(gpt, tok):
    import matplotlib

    matplotlib.use("Agg")
    text = " ".join(LINES)
    df = sp.score({"a": gpt, "b": sp.UniformModel(tok.vocab)}, [text], tokenizer=tok, stride=4,
                  distribution=False)
    ax = sp.plots.nll_by_position(df)
    assert len(ax.lines) == 2 and ax.get_ylabel() == "mean NLL (nats/token)"
    assert len(ax.lines[0].get_xdata()) == 29  # one point per position
    sweep = stride_sweep(gpt, [text], [2, 8, 16], tokenizer=tok)
    ax = sp.plots.perplexity_by_stride(sweep)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), sweep["perplexity"])
    with pytest.raises(InputError, match="needs columns"):
        sp.plots.perplexity_by_stride(sweep.drop(columns="perplexity"))
