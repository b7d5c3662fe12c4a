"""Distances to the truth: cross-entropy, KL(P* || P_θ) per token, agreement test."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from seqprob.analysis.truth import (agreement_test, cross_entropy, kl_per_token, sentence_logprobs,
                                    true_entropy)
from seqprob.base import BaseLanguageModel
from seqprob.errors import InputError
from seqprob.table import UniformModel
from seqprob.truth import ProbabilisticGrammar, toy_english
from seqprob.truth.toy_english import INTRANSITIVE
from seqprob.vocab import Vocab


@pytest.fixture(scope="module")
def truth():
    return toy_english()


@pytest.fixture(scope="module")
def held_out(truth):
    return truth.sample(3000, seed=11)


class Smoothed(BaseLanguageModel):
    """(1 - eps) P* + eps uniform over words and </s>: close to the truth, never zero."""

    def __init__(self, truth, eps):
        self.truth, self.eps, self.vocab_, self.tokenizer = truth, eps, truth.vocab, truth.tokenizer
        self._uniform = truth._uniform

    def _logprobs(self, batch):
        rows = self.truth.logprobs(batch)  # (B, T, V)
        return np.logaddexp(np.log1p(-self.eps) + rows, math.log(self.eps) + self._uniform)


class PrefersSingular(BaseLanguageModel):
    """Ignores the subject: always gives the singular verb forms more probability."""

    def __init__(self, vocab):
        self.vocab_ = vocab
        row = np.full(len(vocab), 1.0)
        row[vocab.bos_id] = 0.0
        for sg, _ in INTRANSITIVE:
            row[vocab.id(sg)] = 3.0
        with np.errstate(divide="ignore"):
            self._row = np.log(row / row.sum())

    def _logprobs(self, batch):
        return np.broadcast_to(self._row, batch.shape + self._row.shape).copy()


def test_kl_of_the_truth_with_itself_is_exactly_zero(truth):
    kl = kl_per_token(truth, truth, n=500, seed=0)
    assert kl.per_token == 0.0 and kl.stderr == 0.0 and kl.ci == (0.0, 0.0)
    assert kl.n_samples == 500 and kl.cross_entropy_per_token == kl.entropy_per_token


def test_kl_of_uniform_model_matches_closed_form(truth, held_out):
    """log U(x) = -L log V' for every x, so KL per token = log V' - H(P*) per token exactly."""
    uniform = UniformModel(truth.vocab)  # V' = V minus <s>
    kl = kl_per_token(truth, uniform, samples=held_out, tokenizer=truth.tokenizer, confidence=0.99)
    exact = math.log(len(truth.vocab) - 1) - truth.entropy().per_token
    assert kl.ci_low <= exact <= kl.ci_high
    assert kl.cross_entropy_per_token == pytest.approx(math.log(len(truth.vocab) - 1), rel=1e-12)
    assert kl.per_token == pytest.approx(kl.cross_entropy_per_token - kl.entropy_per_token, abs=1e-12)


def test_kl_grows_with_distance_and_ci_is_sane(truth, held_out):
    near, far = Smoothed(truth, 0.01), Smoothed(truth, 0.3)
    kl_near = kl_per_token(truth, near, samples=held_out[:1000])
    kl_far = kl_per_token(truth, far, samples=held_out[:1000])
    assert 0 < kl_near.per_token < kl_far.per_token
    assert kl_near.ci_low < kl_near.per_token < kl_near.ci_high
    assert kl_near.per_token_bits == pytest.approx(kl_near.per_token / math.log(2))
    # sampled and given samples agree for the same seed
    assert kl_per_token(truth, near, n=300, seed=4).per_token == \
        kl_per_token(truth, near, samples=truth.sample(300, seed=4)).per_token


def test_kl_is_infinite_when_the_model_misses_a_sentence(truth):
    other = ProbabilisticGrammar({"states": {"S": {"stop": 0.5, "arcs": [["the", 0.5, "S"]]}}})
    kl = kl_per_token(truth, other, n=50, seed=0)  # its own tokenizer: other words are <unk>, P = 0
    assert kl.per_token == math.inf and kl.stderr == math.inf


def test_cross_entropy_of_truth_estimates_the_true_entropy(truth, held_out):
    ce = cross_entropy(truth, held_out)
    h = true_entropy(truth)
    assert h.exact
    lo, hi = ce.ci
    assert lo - 1e-9 <= h.per_token <= hi + 1e-9 or abs(ce.per_token - h.per_token) < 4 * ce.per_token_stderr
    assert float(ce) == ce.per_token and ce.n_sentences == len(held_out)
    assert ce.n_tokens == sum(len(s.split()) + 1 for s in held_out)
    assert ce.perplexity == pytest.approx(math.exp(ce.per_token))


def test_cross_entropy_with_unknown_words_is_inf_not_a_crash(truth):
    ce = cross_entropy(truth, ["the cat sat on the mat", "the cat sat zx oj squid"])
    assert ce.per_token == math.inf and ce.per_token_stderr == math.inf


@settings(max_examples=examples(15))
@given(st.lists(st.integers(0, 299), min_size=1, max_size=12))
def test_sentence_logprobs_batched_equals_one_by_one(indices):
    truth = toy_english()
    pool = truth.sample(300, seed=3)
    chosen = [pool[i] for i in indices]
    logp, tokens = sentence_logprobs(truth, chosen)
    for s, lp, n in zip(chosen, logp, tokens):
        assert lp == pytest.approx(truth.sentence_logprob(s), abs=1e-10) and n == len(s.split()) + 1
    no_eos, n_no_eos = sentence_logprobs(truth, chosen, eos=False)
    assert (n_no_eos == tokens - 1).all() and (no_eos >= logp - 1e-12).all()


def test_agreement_of_truth_is_perfect(truth):
    result = agreement_test(truth, n=120, seed=0)
    assert result.accuracy == 1.0 and result.n_pairs == 120 and result.ci_high == 1.0
    assert set(result.table.columns) >= {"prefix", "correct", "wrong", "logprob_correct", "logprob_wrong",
                                         "margin", "is_correct", "kind", "attractor"}
    assert np.isneginf(result.table["logprob_wrong"]).all()


def test_agreement_of_a_subject_blind_model_is_chance(truth):
    result = agreement_test(PrefersSingular(truth.vocab), tokenizer=truth.tokenizer, n=200, seed=1)
    assert result.accuracy == 0.5  # half the subjects are singular
    assert result.ci_low < 0.5 < result.ci_high


def test_agreement_ties_count_as_wrong_and_tuples_work(truth):
    uniform = UniformModel(truth.vocab)
    result = agreement_test(uniform, [("the cat that the dogs chase", "sleeps", "sleep")], tokenizer=truth.tokenizer)
    assert result.accuracy == 0.0 and result.table.loc[0, "margin"] == 0.0


def test_agreement_with_trigram_baseline(truth):
    ngram = pytest.importorskip("seqprob.ngram")
    train = truth.sample(20_000, seed=0)
    with warnings.catch_warnings():  # unigram count-of-counts of a 210-word language: fallback discounts
        warnings.simplefilter("ignore", getattr(ngram, "DiscountFallbackWarning", UserWarning))
        tri = ngram.ModifiedKneserNey(order=3).fit(train, tokenizer=truth.tokenizer)
    result = agreement_test(tri, n=300, seed=0)
    assert 0.2 < result.accuracy < 0.85  # the verb's context is the attractor, not the subject
    kl = kl_per_token(truth, tri, n=1000, seed=1)
    assert 0 < kl.per_token < math.inf


def test_bad_inputs(truth):
    uniform = UniformModel(truth.vocab)
    with pytest.raises(InputError, match="tokenizer"):
        cross_entropy(uniform, ["the cat"])
    with pytest.raises(InputError, match="single string"):
        cross_entropy(truth, "the cat")
    with pytest.raises(InputError, match="at least one"):
        cross_entropy(truth, [])
    with pytest.raises(InputError, match="confidence"):
        kl_per_token(truth, truth, n=10, confidence=1.5)
    with pytest.raises(InputError, match="prefix, correct, wrong"):
        agreement_test(truth, [("the cat", "sleeps")])
    with pytest.raises(InputError, match="at least one pair"):
        agreement_test(truth, [])
    no_bos = UniformModel(Vocab(["<unk>", "</s>", "a"], bos=None))
    with pytest.raises(InputError, match="<s>"):
        cross_entropy(no_bos, ["a"], tokenizer=truth.tokenizer)
