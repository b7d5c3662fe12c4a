"""word_scores: alignment of tokens to words, the beginning-of-word correction, bad input."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.errors import InputError
from seqprob.errors import WordAlignmentError
from seqprob.scoring.words import word_scores, word_start_mask

from small_models import LINES, gpt, tok  # noqa: F401 - shared fixtures
from budget import examples

words = st.sampled_from("the cat dog sat on mat king queen".split())
sentences = st.lists(words, min_size=1, max_size=6).map(" ".join)


@pytest.fixture(scope="module")
def bpe():
    return sp.BPETokenizer.train(LINES * 5, vocab_size=290)


@pytest.fixture(scope="module")
def bpe_gpt(bpe):
    cfg = sp.GPTConfig(vocab_size=len(bpe.vocab), block_size=64, n_layer=1, n_head=2, n_embd=16, dtype="float64")
    return sp.GPT(cfg, seed=1, tokenizer=bpe)


def test_word_boundary_defaults_and_setter(bpe, tok):
    assert tok.word_boundary == "whole_word"
    assert sp.CharTokenizer.fit(["ab"]).word_boundary == "none"
    assert bpe.word_boundary == "leading_space"
    other = sp.BPETokenizer.train(LINES, vocab_size=260)
    other.word_boundary = "trailing"
    assert other.word_boundary == "trailing" and bpe.word_boundary == "leading_space"
    with pytest.raises(InputError, match="word_boundary must be one of"):
        other.word_boundary = "sometimes"


@settings(max_examples=examples(15), deadline=None)
@given(st.lists(sentences, min_size=1, max_size=3))
def test_whole_word_tokenizer_gives_the_token_scores(texts):
    model = sp.JointTable().fit(LINES + texts)
    w = word_scores(model, texts)
    s = sp.score(model, texts, distribution=False)
    np.testing.assert_array_equal(w["logprob"].to_numpy(), s["logprob"].to_numpy())
    assert (w["n_tokens"] == 1).all()
    assert w[~w.is_eos]["word"].tolist() == " ".join(texts).split()


@settings(max_examples=examples(15), deadline=None)
@given(st.lists(sentences, min_size=1, max_size=3))
def test_rows_sum_to_joint_logprob_with_correction(bpe_gpt, bpe, texts):
    """The correction terms telescope: the words and </s> of a text add up to its joint log P."""
    w = word_scores(bpe_gpt, texts, tokenizer=bpe)
    for seq, text in enumerate(texts):
        rows = w[w.seq == seq]
        assert rows["word"].tolist() == text.split() + ["</s>"]
        assert rows["logprob"].sum() == pytest.approx(sp.joint_logprob(bpe_gpt, text, tokenizer=bpe), abs=1e-9)
        assert rows["n_tokens"].iloc[:-1].sum() == len(bpe.encode(text))
        assert rows["last_position"].iloc[-2] == len(bpe.encode(text))


def test_correction_changes_word_scores_and_plain_sum_is_the_token_sum(bpe_gpt, bpe):
    text = "the cat sat on the mat"
    fixed = word_scores(bpe_gpt, text, tokenizer=bpe)
    plain = word_scores(bpe_gpt, text, tokenizer=bpe, word_boundary="none")
    tokens = sp.score(bpe_gpt, text, tokenizer=bpe, distribution=False)["logprob"].to_numpy()
    for row in plain[~plain.is_eos].itertuples():
        assert row.logprob == pytest.approx(tokens[row.first_position - 1:row.last_position].sum())
    assert not np.allclose(fixed["logprob"], plain["logprob"])
    assert fixed["logprob"].sum() == pytest.approx(plain["logprob"].sum())  # same total


def test_word_start_mask_marks_leading_space_tokens_and_eos(bpe):
    mask = word_start_mask(bpe.vocab)
    tokens = bpe.vocab.tokens
    assert mask[bpe.vocab.eos_id]
    assert all(mask[i] == tokens[i][:1].isspace() for i in range(len(tokens)) if i != bpe.vocab.eos_id)
    assert mask[bpe.encode(" cat")[0]] and not mask[bpe.encode("cat")[0]]
    assert mask.sum() > 1


def test_char_tokenizer_words_and_regex_words():
    chars = sp.CharTokenizer.fit(LINES)
    model = sp.JointTable().fit(LINES, tokenizer=chars)
    w = word_scores(model, "the cat", tokenizer=chars, eos=False)
    assert w["word"].tolist() == ["the", "cat"] and w["n_tokens"].tolist() == [3, 4]  # " cat"
    w = word_scores(model, "the cat", tokenizer=chars, words=r"c|at|the", eos=False)  # finer words
    assert w["word"].tolist() == ["the", "c", "at"] and w["n_tokens"].tolist() == [3, 2, 2]
    tk = sp.WhitespaceTokenizer.fit(["a cat"])
    with pytest.raises(WordAlignmentError, match="spans two words"):  # one token, two words
        word_scores(sp.UniformModel(tk.vocab), "a cat", tokenizer=tk, words=r"a|c|t")


def test_bad_input_is_named(bpe_gpt, bpe):
    with pytest.raises(WordAlignmentError, match="spans two words or lies outside every word"):
        word_scores(bpe_gpt, "the cat", tokenizer=bpe, words=r"th|e")
    with pytest.raises(WordAlignmentError, match="outside every word"):
        word_scores(bpe_gpt, "the cat, sat", tokenizer=bpe, words=r"\w+")
    with pytest.raises(InputError, match="words must be 'whitespace' or a regex"):
        word_scores(bpe_gpt, "the cat", tokenizer=bpe, words="(")
    with pytest.raises(InputError, match="no words"):
        word_scores(bpe_gpt, "the cat", tokenizer=bpe, words=r"\d+")
    with pytest.raises(InputError, match="tokenizer"):
        word_scores(sp.UniformModel(bpe.vocab), "the cat")


def test_token_spans_from_decoded_prefixes_when_pieces_are_not_surface_strings(bpe):
    """A tokenizer whose pieces carry marks ("Ġcat") is aligned by decoding prefixes."""
    from seqprob.scoring.core import _prefix_spans, token_byte_spans

    class Marked(sp.WhitespaceTokenizer):
        def pieces(self, text):
            return ["Ġ" + w for w in text.split()]

    tk = Marked(sp.WhitespaceTokenizer.fit(LINES).vocab)
    text = "the cat sat"
    np.testing.assert_array_equal(token_byte_spans(tk, text, tk.encode(text)), [[0, 3], [3, 7], [7, 11]])
    ids = bpe.encode(text)
    np.testing.assert_array_equal(_prefix_spans(bpe, text, ids), token_byte_spans(bpe, text, ids))
    w = word_scores(sp.UniformModel(tk.vocab), text, tokenizer=tk)
    assert w["word"].tolist() == ["the", "cat", "sat", "</s>"]


@pytest.fixture(scope="module")
def kn():
    return sp.ngram.KneserNey(order=2, discount=0.5).fit(["a b c", "b c a", "c a b"])


@pytest.mark.parametrize("call, message", [
    (lambda m: word_scores({"kn": m}, ["a \udc80"]), "texts\\[0\\] holds a lone surrogate '\\\\udc80' at character 2"),
    (lambda m: word_scores({"kn": m}, ["a b"], context="x \ud800"), "context holds a lone surrogate"),
    (lambda m: word_scores({"kn": m}, ["a b", "b c"], context=["x", "y \ud800"]), "context\\[1\\] holds a lone"),
    (lambda m: word_scores({"kn": m}, ["a b"], context=5), "context must be an iterable of str, got int"),
    (lambda m: word_scores({"kn": m}, ["a b"], context=[b"x"]), "context\\[0\\] must be a str, got bytes"),
    (lambda m: word_scores({"kn": m}, ["a b", 3]), "texts\\[1\\] must be a str, got int"),
    (lambda m: word_scores({"kn": m}, {"a b": 1}), "texts must be .* got a dict"),
    (lambda m: word_scores({"kn": m}, b"a b"), "texts must be an iterable of str, got bytes: decode it first"),
    (lambda m: sp.conditional_logprob(m, "a", "b \udc80"), "continuation holds a lone surrogate"),
    (lambda m: sp.conditional_logprob(m, "a \ud800", "b", level="token"), "context holds a lone surrogate"),
    (lambda m: sp.conditional_logprob(m, 3, "a"), "context must be a str, got int"),
    (lambda m: sp.conditional_logprob(m, "a", None), "continuation must be a str, got NoneType"),
])
def test_text_policy_for_words_and_conditional(kn, call, message):
    with pytest.raises(InputError, match=message):
        call(kn)


@pytest.mark.parametrize("stride", [-1, 0, "x", True])
def test_bad_stride_is_refused_for_a_model_without_a_context(kn, stride):
    with pytest.raises(InputError, match="stride must be an integer >= 1"):
        word_scores(kn, ["a b"], stride=stride)


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=6).map(" ".join), st.integers(1, 10 ** 6))
@settings(max_examples=examples(20), deadline=None)
def test_a_valid_stride_is_ignored_by_a_model_without_a_context(text, stride):
    model = sp.ngram.KneserNey(order=2, discount=0.5).fit(["a b c", "b c a", "c a b"])
    assert word_scores(model, [text], stride=stride)["logprob"].equals(word_scores(model, [text])["logprob"])
