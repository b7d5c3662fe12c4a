"""evaluate on n-gram models: the streamed, vectorized corpus path equals the line-by-line one."""
from __future__ import annotations

from contract import same_fields
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.ngram import MLE, KneserNey, WittenBell
from seqprob.ngram import _query
from budget import examples

TRAIN = ["the cat sat on the mat", "the dog sat", "a cat saw the dog", "the mat é"]
words = st.sampled_from(["the", "cat", "dog", "zebra", "é", "<unk>", "<s>", "mat", "sat"])
texts = st.lists(st.lists(words, max_size=7).map(" ".join)
                 | st.sampled_from(["", "  ", "the\u00a0cat", "dog\x0bsat", "\tthe  cat "]),
                 min_size=1, max_size=12)


_same = same_fields  # the shared check of tests/contract.py


@pytest.mark.parametrize("cls", [KneserNey, WittenBell, MLE])
@given(lines=texts, eos=st.booleans(), chunk=st.sampled_from([1, 16, 1 << 22]))
@settings(max_examples=examples(25), deadline=None)
def test_streamed_evaluate_equals_line_by_line(cls, lines, eos, chunk):
    if not any(line.strip() for line in lines):
        lines = lines + ["the cat"]
    model = cls(order=3).fit(TRAIN)
    saved, _query.BLOCK_BYTES = _query.BLOCK_BYTES, chunk
    try:
        fast = sp.evaluate(model, iter(lines), eos=eos)  # an iterator: read once
    finally:
        _query.BLOCK_BYTES = saved
    slow = sp.evaluate(model, lines, tokenizer=sp.WhitespaceTokenizer(model.vocab), eos=eos)
    _same(fast, slow)


def test_stream_is_used_and_reads_files(tmp_path):
    model = KneserNey(order=2).fit(TRAIN)
    assert model.corpus_sums(iter(["the cat"])) is not None
    other = sp.WhitespaceTokenizer.fit(TRAIN)
    assert sp.ngram.KneserNey(order=2).fit(TRAIN, tokenizer=sp.CharTokenizer.fit(TRAIN)).corpus_sums(iter([])) is None
    path = tmp_path / "test.txt"
    path.write_text("the cat\n\nzebra dog\n", encoding="utf-8")
    _same(sp.evaluate(model, path), sp.evaluate(model, ["the cat", "", "zebra dog"], tokenizer=other))
    with pytest.raises(sp.errors.InputError, match="no non-empty lines"):
        sp.evaluate(model, iter(["", " "]))
    with pytest.raises(sp.errors.SeqProbFileError):
        sp.evaluate(model, tmp_path / "missing.txt")


def test_zero_probability_tokens_are_named():
    model = MLE(order=2).fit(TRAIN)
    ev = sp.evaluate(model, ["the cat", "cat the dog"])
    assert ev.zero_prob_tokens[0] == (0, 3, "</s>") and ev.perplexity == np.inf  # "cat </s>": unseen
    assert ev.zero_prob_tokens == sp.evaluate(model, ["the cat", "cat the dog"],
                                              tokenizer=sp.WhitespaceTokenizer(model.vocab)).zero_prob_tokens


def test_the_streamed_scorer_probes_tables_only_for_models_that_score_by_them():
    """A class says whether its log-probs are its tables' (``scores_from_tables``); a subclass
    that scores otherwise is scored by its own ``_score_stream``, never by the tables."""
    from seqprob.ngram import AddK, BackoffTablesModel

    model = KneserNey(order=2).fit(TRAIN)
    assert model.scores_from_tables and sp.read_arpa.__module__ == "seqprob.ngram.arpa"
    assert not AddK.scores_from_tables

    class Halved(BackoffTablesModel):  # overrides scoring without touching the flag
        def _score_stream(self, stream, seg):
            return super()._score_stream(stream, seg) / 2

    assert not Halved.scores_from_tables
    halved = Halved(model.tables_, model.vocab, model.tokenizer)
    lines = ["the cat sat", "a dog"]
    assert math.isclose(sp.evaluate(halved, lines).logprob, sp.evaluate(model, lines).logprob / 2,
                        rel_tol=1e-12)
