"""The one model contract, checked the same way on every kind of model seqprob has.

The model contract: every row is a distribution (also for unseen contexts), the chain rule (summed over
all V^T sequences the probabilities add up to 1; with </s> over all sentences up to a length
plus the unfinished mass), causality, batched == unbatched, cached == uncached.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from budget import examples
import seqprob as sp
from seqprob import ngram

from contract import (check_batched_equals_unbatched, check_causal, check_incremental,
                      check_rows_sum_to_one, check_token_logprobs_gather, random_prefix,
                      total_mass_fixed_length, total_mass_with_eos)

CORPUS = ["a b a", "b b", "a", "b a c", "c c a b"]
GRAMMAR = {
    "start": "S",
    "states": {
        "S": {"stop": 0.0, "arcs": [["a", 0.6, "A"], ["b", 0.4, "B"]]},
        "A": {"stop": 0.5, "arcs": [["c", 0.5, "S"]]},
        "B": {"stop": 0.3, "arcs": [["a", 0.7, "A"]]},
    },
}


def _gpt(tok):
    cfg = sp.GPTConfig(vocab_size=len(tok.vocab), block_size=8, n_layer=1, n_head=2, n_embd=8,
                       dtype="float64")
    return sp.GPT(cfg, seed=3, tokenizer=tok)


def _arpa(tok, tmp_path_factory):
    path = tmp_path_factory.mktemp("arpa") / "kn.arpa"
    sp.write_arpa(ngram.ModifiedKneserNey(order=3, discount_fallback=(0.5, 1.0, 1.5)).fit(CORPUS, tokenizer=tok), path)
    return sp.read_arpa(path)


def _grammar_from_spec():
    from seqprob.truth import ProbabilisticGrammar

    return ProbabilisticGrammar.from_dict(GRAMMAR)


MODELS = {
    "uniform": lambda tok, f: sp.UniformModel(tok.vocab),
    "joint-table": lambda tok, f: sp.JointTable().fit(CORPUS, tokenizer=tok),
    "mle-2": lambda tok, f: ngram.MLE(order=2).fit(CORPUS, tokenizer=tok),
    "addk-2": lambda tok, f: ngram.AddK(order=2, k=0.5).fit(CORPUS, tokenizer=tok),
    "abs-3": lambda tok, f: ngram.AbsoluteDiscount(order=3).fit(CORPUS, tokenizer=tok),
    "wb-3": lambda tok, f: ngram.WittenBell(order=3).fit(CORPUS, tokenizer=tok),
    "kn-3": lambda tok, f: ngram.KneserNey(order=3).fit(CORPUS, tokenizer=tok),
    "mkn-3": lambda tok, f: ngram.ModifiedKneserNey(order=3, discount_fallback=(0.5, 1.0, 1.5)).fit(CORPUS, tokenizer=tok),
    "arpa-mkn-3": _arpa,
    "gpt": lambda tok, f: _gpt(tok),
}


@pytest.fixture(scope="module", params=list(MODELS) + ["grammar"])
def model(request, tmp_path_factory):
    import warnings

    if request.param == "grammar":
        return _grammar_from_spec()
    tok = sp.WhitespaceTokenizer.fit(CORPUS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MODELS[request.param](tok, tmp_path_factory)


@settings(max_examples=examples(15))
@given(seed=st.integers(0, 10_000), length=st.integers(2, 7))
def test_rows_gather_causal_batched_cached(model, seed, length):
    rng = np.random.default_rng(seed)
    ids = random_prefix(model, rng, length)  # includes contexts never seen in training
    check_rows_sum_to_one(model, ids)
    check_token_logprobs_gather(model, ids)
    check_causal(model, ids, int(rng.integers(1, length)), int(rng.choice([2, 3, 4])))
    check_batched_equals_unbatched(model, [ids, random_prefix(model, rng, length)])
    check_incremental(model, ids)


def test_chain_rule_all_sequences_of_fixed_length(model):
    assert total_mass_fixed_length(model, 3) == pytest.approx(1.0, abs=1e-9)


def test_chain_rule_all_sentences_plus_unfinished_mass(model):
    assert total_mass_with_eos(model, 3) == pytest.approx(1.0, abs=1e-9)


def test_first_token_is_scored(model):
    tok = getattr(model, "tokenizer", None) or sp.WhitespaceTokenizer(model.vocab)
    df = sp.score({"m": model}, ["a c"], tokenizer=tok)
    assert df.position.tolist()[0] == 1 and df.token.tolist()[0] == "a"
    first = model.vocab.lookup("a") if "a" in model.vocab or model.vocab.unk_id is not None else None
    if first is None:  # no "a" and no <unk>: P(a | <s>) = 0, shown as -inf with the token named
        assert df.logprob.iloc[0] == -np.inf
    else:  # the real conditional P(x_1 | x_0) from the model's full row, never a placeholder
        expected = model.logprobs([model.vocab.bos_id])[0][first]
        assert df.logprob.iloc[0] == pytest.approx(expected, rel=1e-6, abs=1e-9)
