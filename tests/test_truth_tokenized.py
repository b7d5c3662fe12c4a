"""truth.tokenized: the exact token-level P* under a byte-level BPE, and word_scores proved on it."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.errors import TokenizerError
from seqprob.functional import logsumexp
from seqprob.truth.tokenized import check_word_separable
from budget import examples


@pytest.fixture(scope="module")
def truth():
    return sp.toy_english()


@pytest.fixture(scope="module")
def bpe(truth):
    return sp.BPETokenizer.train(truth.sample(1500, seed=0), vocab_size=400)


@pytest.fixture(scope="module")
def induced(truth, bpe):
    return sp.truth.tokenized(truth, bpe)


def _words(truth):
    return [w for w in truth.vocab.tokens if w not in ("<s>", "</s>", "<unk>")]


def test_word_separable_assumption_holds(truth, bpe):
    """GPT-2 pre-tokenization splits a sentence into w_1, " w_2", ...: encode(sentence) is the
    concatenation of its words' spellings, so no token crosses a word boundary."""
    check_word_separable(bpe, _words(truth))
    for sentence in truth.sample(200, seed=3):
        first, *rest = sentence.split()
        joined = bpe.encode(first) + [i for w in rest for i in bpe.encode(" " + w)]
        assert bpe.encode(sentence) == joined


def test_a_pattern_that_splits_words_is_refused(truth):
    chars = sp.BPETokenizer.train(["the cat"], vocab_size=260, pattern=r" |[^ ]")
    with pytest.raises(TokenizerError, match="pre-tokenizer splits"):
        sp.truth.tokenized(truth, chars)
    with pytest.raises(TokenizerError, match="byte-level BPE"):
        sp.truth.tokenized(truth, truth.tokenizer)


@settings(max_examples=examples(12), deadline=None)
@given(st.integers(0, 10_000))
def test_word_scores_equal_p_star_word_logprobs(truth, bpe, induced, seed):
    sentences = truth.sample(4, seed=seed)
    exact = sp.score(truth, sentences, distribution=False)["logprob"].to_numpy()
    corrected = sp.word_scores(induced, sentences, tokenizer=bpe)
    np.testing.assert_allclose(corrected["logprob"].to_numpy(), exact, rtol=0, atol=1e-9)
    plain = sp.word_scores(induced, sentences, tokenizer=bpe, word_boundary="none")
    assert np.abs(plain["logprob"].to_numpy() - exact).max() > 1e-3  # the naive sum is biased


@settings(max_examples=examples(12), deadline=None)
@given(st.integers(0, 10_000))
def test_rows_are_distributions_and_sum_to_sentence_logprob(truth, bpe, induced, seed):
    sentence = truth.sample(1, seed=seed)[0]
    ids = np.array([bpe.vocab.bos_id] + bpe.encode(sentence) + [bpe.vocab.eos_id])
    rows = induced.logprobs(ids)  # (T+1, V), the row after </s> included
    np.testing.assert_allclose(logsumexp(rows, axis=-1), 0.0, atol=1e-12)
    df = sp.score(induced, [sentence], tokenizer=bpe, distribution=False)
    assert df["logprob"].sum() == pytest.approx(truth.sentence_logprob(sentence), abs=1e-9)
    state = induced.start(ids[:1])
    for t in range(1, len(ids)):  # cached (start/step) == uncached (logprobs)
        np.testing.assert_allclose(state.logprobs, rows[t - 1], atol=1e-12)
        state = induced.step(state, int(ids[t]))


def test_conditional_word_logprob_is_exact_at_the_join(truth, bpe, induced):
    context, rest = "the cat", "sat on the mat"
    expected = truth.sentence_logprob(context + " " + rest) - truth.sentence_logprob(context, eos=False)
    got = sp.conditional_logprob(induced, context, rest, tokenizer=bpe, eos=True)
    assert got == pytest.approx(expected, abs=1e-9)
    without_eos = sp.conditional_logprob(induced, context, rest, tokenizer=bpe)
    expected_no_eos = sp.conditional_logprob(truth, context, rest)
    assert without_eos == pytest.approx(expected_no_eos, abs=1e-9)


def test_impossible_tokens_get_zero_and_rows_stay_distributions(truth, bpe, induced):
    ids = np.array([bpe.vocab.bos_id] + bpe.encode("the zebra"))  # not a word of the grammar
    lp = induced.token_logprobs(ids)
    assert np.isneginf(lp).any()
    np.testing.assert_allclose(logsumexp(induced.logprobs(ids), axis=-1), 0.0, atol=1e-12)
