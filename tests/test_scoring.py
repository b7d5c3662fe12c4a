import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import seqprob as sp
from seqprob.errors import InputError

LINES = ["the cat sat on the mat", "the dog sat on the log", "a cat ran", "the cat sat"]
words = st.sampled_from("the cat dog sat on mat a ran log".split())
sentences = st.lists(words, min_size=1, max_size=7).map(" ".join)


@pytest.fixture(scope="module")
def table():
    return sp.JointTable().fit(LINES)


@pytest.fixture(scope="module")
def uniform(table):
    return sp.UniformModel(table.vocab)


def test_columns_and_first_token_scored(table, uniform):
    df = sp.score({"table": table, "uniform": uniform}, ["the cat sat"], tokenizer=table.tokenizer)
    assert list(df.columns) == ["model", "seq", "position", "token", "token_id", "logprob", "log10prob",
                                "surprisal_bits", "entropy_bits", "rank", "is_oov", "is_eos"]
    first = df[df.model == "table"].iloc[0]
    assert first.position == 1 and first.token == "the"  # P(x_1 | x_0) is a real conditional
    assert first.logprob == pytest.approx(math.log(3 / 4))
    assert df[df.model == "table"].is_eos.tolist() == [False, False, False, True]
    np.testing.assert_allclose(df.surprisal_bits, -df.logprob / math.log(2))
    np.testing.assert_allclose(df.log10prob, df.logprob / math.log(10))


@given(st.lists(sentences, min_size=1, max_size=5), st.booleans())
def test_sum_of_token_logprobs_is_joint(texts, eos):
    model = sp.JointTable().fit(LINES + texts[:1])
    df = sp.score({"m": model}, texts, eos=eos)
    for seq, text in enumerate(texts):
        joint = sp.joint_logprob(model, text, eos=eos)
        total = df[df.seq == seq].logprob.sum()
        assert total == joint or math.isclose(total, joint, abs_tol=1e-12)
        assert (df.seq == seq).sum() == len(text.split()) + int(eos)  # never a dropped token


@given(st.lists(sentences, min_size=1, max_size=6))
def test_batched_equals_one_at_a_time(texts):
    model = sp.JointTable().fit(LINES + texts[::2])
    together = sp.score({"m": model}, texts)
    for seq, text in enumerate(texts):
        alone = sp.score({"m": model}, [text]).drop(columns="seq").reset_index(drop=True)
        part = together[together.seq == seq].drop(columns="seq").reset_index(drop=True)
        pd.testing.assert_frame_equal(alone, part)


@given(st.lists(sentences, min_size=1, max_size=6))
def test_perplexity_is_exp_mean_nll(texts):
    model = sp.UniformModel(sp.JointTable().fit(LINES).vocab)
    tok = sp.WhitespaceTokenizer(model.vocab)
    df = sp.score({"u": model}, texts, tokenizer=tok)
    ppl = sp.perplexity(model, texts, tokenizer=tok)
    assert ppl == pytest.approx(math.exp(-df.logprob.mean()))
    corpus = sp.summarize(df, by="model").iloc[0]
    assert corpus.perplexity == pytest.approx(ppl)
    assert corpus.n_tokens == len(df)


def test_perplexity_is_token_weighted_not_mean_of_sentences(table):
    texts = ["the cat sat on the mat", "a cat ran"]
    df = sp.score({"t": table}, texts)
    per_sentence = sp.summarize(df)
    corpus = sp.summarize(df, by="model")
    expected = math.exp(-df.logprob.sum() / len(df))
    assert corpus.perplexity.iloc[0] == pytest.approx(expected)
    assert expected != pytest.approx(per_sentence.perplexity.mean())


def test_summarize_figures(table, uniform):
    df = sp.score({"u": uniform}, ["the cat sat"], tokenizer=table.tokenizer)
    row = sp.summarize(df).iloc[0]
    n = 4
    assert row.n_tokens == n and row.text == "the cat sat"
    assert row.logprob == pytest.approx(n * -math.log(len(uniform.vocab) - 1))
    assert row.bits_per_token == pytest.approx(math.log2(len(uniform.vocab) - 1))
    assert row.bits_per_char == pytest.approx(-row.logprob / math.log(2) / len("the cat sat"))
    assert row.bits_per_byte == row.bits_per_char  # ASCII


def test_oov_named_and_scored_as_unk(table, uniform):
    df = sp.score({"u": uniform}, ["the cat sat zx oj squid"], tokenizer=table.tokenizer)
    oov = df[df.is_oov]
    assert oov.token.tolist() == ["zx", "oj", "squid"]
    assert (oov.token_id == table.vocab.unk_id).all()


def test_scoring_ids_and_bos_false(table):
    tok = table.tokenizer
    ids = tok.encode("the cat sat")
    by_ids = sp.score(table, [ids])
    by_text = sp.score(table, ["the cat sat"])
    np.testing.assert_allclose(by_ids.logprob, by_text.logprob)
    no_bos = sp.score(table, ["the cat sat"], bos=False)
    assert no_bos.position.tolist() == [2, 3, 4] and no_bos.token.tolist() == ["cat", "sat", "</s>"]


def test_vocab_mismatch_is_remapped_by_string(table):
    other = sp.WhitespaceTokenizer.fit(["sat cat the zx"])
    df = sp.score({"t": table}, ["the cat zx"], tokenizer=other)
    assert df.token.tolist() == ["the", "cat", "zx", "</s>"]
    assert df.is_oov.tolist() == [False, False, True, False]


def test_distribution_flag_and_evaluate(table):
    df = sp.score(table, LINES, distribution=False)
    assert "entropy_bits" not in df.columns and "rank" not in df.columns
    ev = sp.evaluate(table, LINES + [""])
    assert ev.n_sentences == 4 and ev.n_skipped_empty == 1
    assert ev.n_tokens == sum(len(l.split()) + 1 for l in LINES) == ev.n_words + 4
    assert ev.perplexity == pytest.approx(math.exp(-df.logprob.sum() / len(df)))
    assert ev.ppl == pytest.approx(ev.perplexity)  # no OOVs, no zeros: SRILM ppl == KenLM
    assert ev.ppl1 > ev.ppl


def test_evaluate_zero_probability_is_named(table):
    ev = sp.evaluate(table, ["the mat sat"])
    assert ev.perplexity == math.inf and ev.n_zeros >= 1
    assert ev.zero_prob_tokens[0][2] in {"mat", "sat", "</s>"}


def test_entropy_and_rank_columns(table):
    df = sp.score(table, ["the cat sat"])
    first = df.iloc[0]  # P(the)=3/4, P(a)=1/4
    expected = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert first.entropy_bits == pytest.approx(expected) and first["rank"] == 1


@pytest.mark.parametrize("bad", ["", "   ", []])
def test_empty_inputs(table, bad):
    with pytest.raises(InputError):
        sp.score(table, bad if bad == [] else [bad])


def test_bad_inputs(table):
    with pytest.raises(InputError, match="tokenizer"):
        sp.score(sp.UniformModel(table.vocab), ["the cat"])
    with pytest.raises(InputError):
        sp.score({}, ["the cat"])
    with pytest.raises(sp.TokenIdError):
        sp.score(table, [[1, 2, 999]])
    with pytest.raises(InputError, match="empty"):
        sp.summarize(pd.DataFrame())
    with pytest.raises(InputError, match="no BOS"):
        vocab = sp.Vocab(["x", "y"], bos=None, eos=None, unk=None)
        sp.score(sp.UniformModel(vocab), [[0, 1]])
    with pytest.raises(InputError, match="corpus"):
        sp.evaluate(table, ["", " "])
