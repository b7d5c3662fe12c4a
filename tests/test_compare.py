"""compare: bootstrap intervals (coverage checked on P*), paired differences, bad input."""
import math

import numpy as np
import pytest

import seqprob as sp
from seqprob.compare import bootstrap_ratio
from seqprob.errors import InputError


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
    with pytest.raises(InputError, match="n_boot must be an integer >= 100"):
        sp.compare(truth, truth.sample(5, seed=0), n_boot=99)
    with pytest.raises(InputError, match="at least 2 texts"):
        sp.compare(truth, ["the cat sat"], n_boot=100)
    with pytest.raises(InputError, match="confidence"):
        sp.compare(truth, truth.sample(5, seed=0), confidence=1.5)
