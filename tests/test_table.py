import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import seqprob as sp
from seqprob.errors import InputError, NotFittedError, TokenIdError

from contract import (check_batched_equals_unbatched, check_causal, check_incremental,
                      check_rows_sum_to_one, check_token_logprobs_gather, random_prefix,
                      total_mass_fixed_length, total_mass_with_eos)

words = st.sampled_from(["a", "b", "c"])
corpora = st.lists(st.lists(words, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=8)


def test_lookup_table_size():
    assert sp.lookup_table_size(50_000, 100) == pytest.approx(469.897, abs=1e-3)
    assert round(sp.lookup_table_size(50_000, 100), 1) == 469.9
    assert sp.lookup_table_size(50_000, 100) > sp.table.ATOMS_IN_UNIVERSE_LOG10
    assert sp.lookup_table_size(2, 10) == pytest.approx(10 * math.log10(2))
    for bad in [(0, 3), (2.5, 3), (10, -1), ("a", 3), (float("nan"), 3), (10, float("inf")), (None, 3),
                (True, 3)]:
        with pytest.raises(InputError, match="must be an integer") as info:
            sp.lookup_table_size(*bad)
        assert repr(bad[0] if bad[1] == 3 else bad[1]) in str(info.value)


@given(st.integers(2, 6), st.integers(1, 3))
def test_uniform_model_contract(n_words, length):
    vocab = sp.Vocab.build([f"w{i}" for i in range(n_words)])
    model = sp.UniformModel(vocab)
    rng = np.random.default_rng(n_words)
    ids = random_prefix(model, rng, 4)
    check_rows_sum_to_one(model, ids)
    check_token_logprobs_gather(model, ids)
    check_incremental(model, ids)
    assert total_mass_fixed_length(model, length) == pytest.approx(1.0)
    # its perplexity on any text is V' (the predictable tokens)
    tok = sp.WhitespaceTokenizer(vocab)
    assert sp.perplexity(model, ["w0 w1", "w1"], tokenizer=tok) == pytest.approx(len(vocab) - 1)


@given(corpora)
def test_joint_table_reproduces_sentence_frequencies(lines):
    table = sp.JointTable().fit(lines)
    tok = table.tokenizer
    for line in set(lines):
        expected = lines.count(line) / len(lines)
        assert math.exp(sp.joint_logprob(table, line)) == pytest.approx(expected)
    # the sentence probabilities of the table sum to exactly 1
    total = sum(math.exp(sp.joint_logprob(table, line, tokenizer=tok)) for line in set(lines))
    assert total == pytest.approx(1.0)


@given(corpora, st.integers(0, 1000))
def test_joint_table_contract(lines, seed):
    table = sp.JointTable().fit(lines)
    rng = np.random.default_rng(seed)
    ids = random_prefix(table, rng, 5)
    check_rows_sum_to_one(table, ids)
    check_token_logprobs_gather(table, ids)
    check_incremental(table, ids)
    check_causal(table, ids, 3, int(rng.integers(2, len(table.vocab))))
    check_batched_equals_unbatched(table, [ids, random_prefix(table, rng, 5)])


@given(corpora, st.integers(1, 3))
def test_joint_table_chain_rule_over_all_sequences(lines, length):
    """exp(joint) summed over all V^T sequences is 1, and over all sentences up to a length
    (with </s>) plus the unfinished mass is 1: the chain rule of the table's conditionals."""
    table = sp.JointTable().fit(lines)
    assert total_mass_fixed_length(table, length) == pytest.approx(1.0, abs=1e-12)
    assert total_mass_with_eos(table, length - 1) == pytest.approx(1.0, abs=1e-12)


def test_joint_table_chain_rule_sums_to_one():
    table = sp.JointTable().fit(["a b", "a", "b b", "a b"])
    assert total_mass_with_eos(table, 2) == pytest.approx(1.0)
    assert total_mass_fixed_length(table, 2) == pytest.approx(1.0)


def test_joint_table_unseen_sequence_is_impossible():
    table = sp.JointTable().fit(["the cat sat on the mat"])
    assert sp.joint_logprob(table, "the cat sat on the mat") == 0.0
    assert sp.joint_logprob(table, "the mat sat on the cat") == -math.inf
    df = sp.score({"table": table}, ["the cat sat zx oj squid"])
    assert df["is_oov"].sum() == 3 and df["token"].tolist()[3] == "zx"
    assert sp.summarize(df)["perplexity"].iloc[0] == math.inf


def test_joint_table_errors():
    with pytest.raises(NotFittedError):
        sp.JointTable().logprobs([1, 2])
    with pytest.raises(InputError, match="empty"):
        sp.JointTable().fit([])
    with pytest.raises(InputError, match="reserved"):
        sp.JointTable().fit(["a <s> b"])
    with pytest.raises(InputError, match="NoneType"):
        sp.JointTable().fit(None)
    with pytest.raises(InputError, match=r"lines\[1\] must be a str, got int"):
        sp.JointTable().fit(["a", 7])
    table = sp.JointTable().fit(["a b"])
    with pytest.raises(TokenIdError, match="out of range"):
        table.logprobs([1, 99])
    with pytest.raises(InputError, match="integers"):
        table.logprobs(np.array([1.0, 2.0]))
    with pytest.raises(InputError, match=r"\(2, 2, 2\)"):
        table.logprobs(np.zeros((2, 2, 2), dtype=int))
    with pytest.raises(InputError, match="rectangular"):
        table.logprobs([[1, 3], [1]])
    with pytest.raises(InputError, match="at least 2"):
        table.token_logprobs([1])
