import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import seqprob as sp
from seqprob import scoring
from seqprob.errors import InputError, NotFittedError, SeqProbFileError, TokenIdError

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


@given(st.lists(sentences, min_size=1, max_size=4), st.booleans())
def test_first_token_is_scored_as_p_x1_given_bos(texts, eos):
    """Row 1 of every sequence is P(x_1 | <s>) itself: never dropped, never a 0.0 placeholder."""
    model = sp.JointTable().fit(LINES + texts)
    df = sp.score({"m": model}, texts, eos=eos)
    first_rows = np.exp(model.logprobs([model.vocab.bos_id])[0])
    for seq, text in enumerate(texts):
        first = df[df.seq == seq].iloc[0]
        word = text.split()[0]
        assert first.position == 1 and first.token == word
        assert math.exp(first.logprob) == pytest.approx(first_rows[model.vocab.id(word)])
        assert math.exp(first.logprob) == pytest.approx(sum(l.split()[0] == word for l in LINES + texts)
                                                        / len(LINES + texts))


@given(st.lists(sentences, min_size=1, max_size=6))
def test_batched_equals_one_at_a_time(texts):
    model = sp.JointTable().fit(LINES + texts[::2])
    together = sp.score({"m": model}, texts)
    for seq, text in enumerate(texts):
        alone = sp.score({"m": model}, [text]).drop(columns="seq").reset_index(drop=True)
        part = together[together.seq == seq].drop(columns="seq").reset_index(drop=True)
        pd.testing.assert_frame_equal(alone, part)


@given(st.lists(sentences, min_size=1, max_size=6), st.booleans())
def test_perplexity_is_exp_mean_nll(texts, eos):
    model = sp.JointTable().fit(LINES + texts)  # every text seen: finite, unequal log-probs
    df = sp.score({"m": model}, texts, eos=eos)
    ppl = sp.perplexity(model, texts, eos=eos)
    nll = -np.array([lp for text in texts for lp in model.token_logprobs(
        [model.vocab.bos_id, *model.tokenizer.encode(text)] + ([model.vocab.eos_id] if eos else []))])
    assert ppl == pytest.approx(math.exp(nll.mean()))
    corpus = sp.summarize(df, by="model").iloc[0]
    assert corpus.perplexity == pytest.approx(ppl) and corpus.n_tokens == len(df) == len(nll)
    assert corpus.bits_per_token == pytest.approx(nll.mean() / math.log(2))


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


class _BigVocab:
    """A model with a 50,257-token vocabulary that records the blocks it is asked for."""

    def __init__(self, V=50_257):
        self.vocab = sp.Vocab([f"t{i}" for i in range(V - 3)] + ["<unk>", "<s>", "</s>"])
        self.blocks = []

    def logprobs(self, ids):
        ids = np.asarray(ids)
        self.blocks.append(ids.shape + (len(self.vocab),))
        return np.full(ids.shape + (len(self.vocab),), -math.log(len(self.vocab)), dtype=np.float32)

    def token_logprobs(self, ids):
        ids = np.asarray(ids)
        self.blocks.append(ids[..., 1:].shape)
        return np.full(ids[..., 1:].shape, -math.log(len(self.vocab)))


def test_big_vocabulary_without_distribution_builds_no_v_sized_block():
    model = _BigVocab()
    ids = [list(range(i, i + 40)) for i in range(300)]  # 300 sequences, 12,300 scored tokens
    df = sp.score({"big": model}, ids, distribution=False)
    assert len(df) == 300 * 41 and "entropy_bits" not in df
    assert all(len(shape) == 2 for shape in model.blocks)  # only token_logprobs: (B, T)
    assert max(b * t for b, t in model.blocks) <= scoring.core._MAX_BATCH_TOKENS
    np.testing.assert_allclose(df.logprob, -math.log(len(model.vocab)))


def test_big_vocabulary_with_distribution_keeps_blocks_bounded(monkeypatch):
    monkeypatch.setattr(scoring.core, "_MAX_BLOCK_FLOATS", 2 ** 20)  # 20 positions of 50,257 floats
    model = _BigVocab()
    df = sp.score({"big": model}, [list(range(i, i + 8)) for i in range(20)])
    assert all(len(shape) == 3 for shape in model.blocks) and len(model.blocks) == 10
    assert max(b * t * v for b, t, v in model.blocks) <= scoring.core._MAX_BLOCK_FLOATS
    np.testing.assert_allclose(df.entropy_bits, math.log2(len(model.vocab)), rtol=1e-6)
    assert (df["rank"] == 1).all()


def test_nan_from_a_model_is_an_error(table):
    class NaNModel(_BigVocab):
        def token_logprobs(self, ids):
            out = super().token_logprobs(ids)
            out[..., 2] = np.nan
            return out

    with pytest.raises(InputError, match="NaN.*sequence 0, scored token 3"):
        sp.score({"nan": NaNModel(10)}, [[3, 4, 5, 6]], distribution=False)


def test_bad_inputs(table):
    with pytest.raises(InputError, match="tokenizer"):
        sp.score(sp.UniformModel(table.vocab), ["the cat"])
    with pytest.raises(InputError):
        sp.score({}, ["the cat"])
    with pytest.raises(InputError, match="empty"):
        sp.summarize(pd.DataFrame())
    with pytest.raises(InputError, match="neither a BOS nor an EOS"):
        vocab = sp.Vocab(["x", "y"], bos=None, eos=None, unk=None)
        sp.score(sp.UniformModel(vocab), [[0, 1]], eos=False)
    with pytest.raises(InputError, match="corpus"):
        sp.evaluate(table, ["", " "])
    with pytest.raises(InputError, match="got None"):
        sp.score(table, None)
    with pytest.raises(InputError, match="'m' .*not a LanguageModel"):
        sp.score({"m": 5}, ["the cat"])
    for unfitted in (sp.ngram.KneserNey(order=2), {"kn": sp.ngram.KneserNey(order=2)}):
        with pytest.raises(NotFittedError, match="KneserNey is not fitted yet"):
            sp.score(unfitted, ["the cat"])  # a model, not fitted: not "not a LanguageModel"
    with pytest.raises(InputError, match="rectangular"):
        sp.score(table, [[[1, 2], [3]]])
    with pytest.raises(InputError, match=r"integers, got float 1.0 at index 0 \(dtype float64\)"):
        sp.score(table, [[1.0, 2.0]])
    with pytest.raises(InputError, match="score()"):
        sp.summarize([1, 2])
    with pytest.raises(SeqProbFileError, match="'the cat sat'.*list of lines"):
        sp.perplexity(table, "the cat sat")
    with pytest.raises(TokenIdError, match="token id 999 out of range: must be in \\[0, 12\\)"):
        sp.score(table, [[1, 2, 999]])


def test_unnormalized_model_perplexity_warns():
    from seqprob.ngram import StupidBackoff

    model = StupidBackoff(order=2).fit(LINES)
    with pytest.warns(UserWarning, match="not a normalized distribution"):
        sp.perplexity(model, LINES[:2])


def _corrupt_arpa(tmp_path, backoff: str):
    """A fitted bigram written as ARPA with the unigram back-off of 'b' replaced by ``backoff``."""
    model = sp.ngram.KneserNey(order=2, discount=0.5).fit(["a b c", "b c a", "c a b"])
    path = tmp_path / "m.arpa"
    sp.write_arpa(model, path)
    lines = path.read_text().splitlines()
    at = [i for i, line in enumerate(lines) if line.split("\t")[1:2] == ["b"]][0]
    lines[at] = "\t".join(lines[at].split("\t")[:2] + [backoff])
    path.write_text("\n".join(lines) + "\n")
    return sp.read_arpa(path)


@pytest.mark.parametrize("backoff", ["400", "250"])
def test_positive_logprob_is_refused_by_every_corpus_figure(tmp_path, backoff):
    """A corrupt back-off (valid syntax) makes P(b | b) > 1: perplexity and evaluate (the
    streamed n-gram path and the token path) refuse it as score does, never a perplexity < 1."""
    model = _corrupt_arpa(tmp_path, backoff)
    for call in (lambda: sp.score(model, ["b b"]), lambda: sp.perplexity(model, ["b b"]),
                 lambda: sp.evaluate(model, ["b b", "a b"]),
                 lambda: sp.perplexity(model, ["b b"], stride=1)):
        with pytest.raises(InputError, match="log-probability must be a number <= 0"):
            call()
    assert sp.perplexity(model, ["a b c"]) > 1  # the sentences that avoid the back-off still score


def test_one_positive_logprob_among_many_is_refused_on_the_streamed_path(tmp_path):
    """The streamed n-gram sums carry the largest token log-prob, so one bad token is caught
    even where the corpus total stays negative."""
    model = _corrupt_arpa(tmp_path, "5")  # P(b | b) = 10**(5 + log P(b)) > 1 on one token
    lines = ["b b"] + ["a b c a b c a b c a b c"] * 200
    v = model.vocab
    per_line = [model.token_logprobs([v.bos_id, *map(v.lookup, line.split()), v.eos_id]) for line in lines]
    assert max(lp.max() for lp in per_line) > 1  # the bad token
    total, n = sum(lp.sum() for lp in per_line), sum(map(len, per_line))
    assert total < 1e-3 * n  # ... which the corpus total does not show
    with pytest.raises(InputError, match="a token log-probability of"):
        sp.evaluate(model, lines)


@pytest.mark.parametrize("total", [np.nan, np.inf])
def test_streamed_sums_with_nan_or_plus_inf_are_refused(monkeypatch, total):
    model = sp.ngram.KneserNey(order=2, discount=0.5).fit(["a b c", "b c a"])
    real = model.corpus_sums

    def broken(lines, eos=True):
        sums = real(lines, eos)
        return None if sums is None else {**sums, "logprob": total}

    monkeypatch.setattr(model, "corpus_sums", broken)
    with pytest.raises(InputError, match=f"total log-probability of {total}"):
        sp.evaluate(model, ["a b"])


def test_summarize_refuses_nan_and_plus_inf(table):
    df = sp.score(table, ["the cat sat"], distribution=False)
    for bad in (np.nan, np.inf):
        broken = df.copy()
        broken.loc[1, "logprob"] = bad
        with pytest.raises(InputError, match=f"log-probability {bad} in row 1"):
            sp.summarize(broken)


@pytest.mark.parametrize("bad", [{"the cat": 1}, b"the cat", bytearray(b"ab")])
def test_score_refuses_a_dict_or_bytes_where_texts_are_expected(table, bad):
    with pytest.raises(InputError, match=f"got a {type(bad).__name__}"):
        sp.score({"t": table}, bad)


@pytest.mark.parametrize("stride", [-1, 0, "x", 1.5, True])
def test_bad_stride_is_refused_for_a_model_without_a_context(table, stride):
    with pytest.raises(InputError, match="stride must be an integer >= 1"):
        sp.score(table, ["the cat"], stride=stride)
    with pytest.raises(InputError, match="stride must be an integer >= 1"):
        sp.perplexity(table, ["the cat"], stride=stride)


@pytest.mark.parametrize("stride", [0, "x"])
def test_the_window_functions_refuse_a_bad_stride_for_a_model_without_a_context(table, stride):
    """The check lives in seqprob.scoring.windows: every caller, public or not, gets it."""
    from seqprob.scoring.windows import window_logprobs
    with pytest.raises(InputError, match="stride must be an integer >= 1"):
        window_logprobs(table, [0, 1], stride=stride)


@given(st.integers(1, 10 ** 9))
def test_any_positive_stride_is_ignored_by_a_model_without_a_context(stride):
    table = sp.JointTable().fit(LINES)
    plain = sp.score(table, ["the cat sat"], distribution=False)["logprob"]
    assert sp.score(table, ["the cat sat"], distribution=False, stride=stride)["logprob"].equals(plain)


def test_a_model_without_bos_starts_from_its_eos():
    """x_0 for a vocabulary without BOS (Qwen, GPT-NeoX style): its EOS, as lm-evaluation-
    harness's rolling log-likelihood does; the first token is scored, and the table says so."""
    vocab = sp.Vocab(["a", "b", "<|endoftext|>"], bos=None, eos="<|endoftext|>", unk=None)
    model = sp.UniformModel(vocab)
    df = sp.score(model, [[0, 1]], eos=False)
    assert df["position"].tolist() == [1, 2]  # x_1 is scored
    np.testing.assert_allclose(df["logprob"], np.log(1 / 3))
    assert df.attrs["x0"] == {"model": "<|endoftext|>"} or list(df.attrs["x0"].values()) == ["<|endoftext|>"]
    assert sp.joint_logprob(model, [0, 1], eos=False) == pytest.approx(2 * np.log(1 / 3))
    assert sp.score(model, [[0, 1]], bos=False, eos=False)["position"].tolist() == [2]


def test_the_user_names_x0():
    vocab = sp.Vocab(["<s>", "a", "b", "<|endoftext|>"], bos="<s>", eos="<|endoftext|>", unk=None)
    model = sp.UniformModel(vocab)
    df = sp.score(model, [[1, 2]], bos="<|endoftext|>", eos=False)
    assert list(df.attrs["x0"].values()) == ["<|endoftext|>"] and df["position"].tolist() == [1, 2]
    assert list(sp.score(model, [[1, 2]], eos=False).attrs["x0"].values()) == ["<s>"]
    with pytest.raises(InputError, match="not a token"):
        sp.score(model, [[1, 2]], bos="<nope>")
    with pytest.raises(InputError, match="bos must be"):
        sp.score(model, [[1, 2]], bos=3)
