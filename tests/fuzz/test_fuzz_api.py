"""Public functions given hostile arguments (a strategy per parameter type): each call returns
or raises a SeqProbError; never a raw TypeError, IndexError, numpy error or silent garbage."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqprob as sp
from seqprob import functional as F

from _mutate import outcome

FUZZ = settings(max_examples=int(os.environ.get("SEQPROB_FUZZ_EXAMPLES", 30)), deadline=None,
                derandomize=os.environ.get("SEQPROB_FUZZ_RANDOM") is None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
LINES = ["the cat sat on the mat", "the dog sat on the mat", "a cat saw a dog"]

# ----------------------------------------------------------------------------- strategies
junk = st.sampled_from([None, True, 3.5, float("nan"), float("inf"), -1, 2**70, "", "x", b"x",
                        {"a": 1}, [], [[1], [2, 3]], object(), np.array("s"), np.array([1 + 2j]),
                        np.zeros((2, 0)), Ellipsis])
texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["\ud800", "a\udcff b", "\x00", "the \x00 cat", "  ", "<s>", "</s> the", "é" * 3]),
    st.binary(max_size=8), junk)
corpora = st.one_of(st.lists(texts, max_size=3), texts, junk,
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
ints = st.one_of(st.integers(-3, 12), st.sampled_from([2**63, -(2**63), 10**30]),
                 st.integers(0, 5).map(np.int32), junk)
ids = st.one_of(st.lists(ints, max_size=5), ints, junk,
                st.lists(st.integers(-2, 12), min_size=1, max_size=4).map(np.array),
                st.lists(st.floats(allow_nan=True), max_size=3).map(np.array),
                st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=3), min_size=1, max_size=3))
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**6), junk)
arrays = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=5).map(np.array),
    st.lists(st.floats(-50, 50), min_size=1, max_size=5).map(lambda v: F.log_softmax(np.array(v))),
    st.lists(st.lists(st.floats(-5, 5), min_size=2, max_size=2), min_size=1, max_size=3).map(np.array),
    junk, st.lists(ints, max_size=3))


@pytest.fixture(scope="module")
def models():
    tok = sp.WhitespaceTokenizer.fit(LINES)
    kn = sp.ngram.KneserNey(order=3).fit(LINES, tokenizer=tok)
    gpt = sp.GPT(sp.GPTConfig(vocab_size=len(tok.vocab), block_size=8, n_layer=1, n_head=1, n_embd=8),
                 seed=0, tokenizer=tok)
    return tok, {"kn": kn, "gpt": gpt, "uniform": sp.UniformModel(tok.vocab), "truth": sp.toy_english()}


MODEL_NAMES = ["kn", "gpt", "uniform", "truth"]


def _valid(result):
    """A returned array holds no NaN where a number is promised."""
    arr = result if isinstance(result, np.ndarray) else None
    if arr is not None and arr.dtype.kind == "f":
        assert not np.isnan(arr).any(), "NaN returned instead of an error"
    return result


# ----------------------------------------------------------------------------- models
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_methods_with_hostile_ids(models, name):
    model = models[1][name]

    @FUZZ
    @given(ids, st.sampled_from(["logprobs", "token_logprobs", "start"]))
    def check(arg, method):
        outcome(lambda: _valid(getattr(model, method)(arg)))

    check()


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_step_with_hostile_state_and_id(models, name):
    model = models[1][name]
    good = model.start([model.vocab.bos_id])
    other = models[1]["uniform" if name != "uniform" else "kn"].start([1])

    @FUZZ
    @given(st.one_of(st.just(good), st.just(other), junk), ints)
    def check(state, token):
        outcome(lambda: _valid(model.step(state, token).logprobs))

    check()


def test_step_none_and_a_list_of_ids_are_named_errors(models):
    kn = models[1]["kn"]
    with pytest.raises(sp.errors.InputError, match="state"):
        kn.step(None, 3)
    with pytest.raises(sp.errors.InputError, match="one integer"):
        kn.step(kn.start([1]), [3, 4])


# ----------------------------------------------------------------------------- scoring and sampling
@pytest.mark.parametrize("function", ["perplexity", "evaluate", "score"])
def test_scoring_with_hostile_corpora(models, function):
    tok, by_name = models

    @FUZZ
    @given(st.sampled_from(MODEL_NAMES), corpora, st.one_of(st.none(), st.just(tok), junk))
    def check(name, corpus, tokenizer):
        outcome(getattr(sp, function), by_name[name], corpus, tokenizer=tokenizer)

    check()


def test_perplexity_refuses_dict_none_and_bytes(models):
    tok, by_name = models
    for bad in ({"the cat": 1}, None, b"the cat", [b"the cat"], ["the \ud800 cat"]):
        with pytest.raises(sp.errors.InputError):
            sp.perplexity(by_name["kn"], bad, tokenizer=tok)


def test_sample_with_hostile_arguments(models):
    tok, by_name = models

    @FUZZ
    @given(st.sampled_from(MODEL_NAMES), texts, st.one_of(st.integers(-2, 5), junk), numbers,
           st.one_of(st.none(), st.integers(-1, 30), junk), st.one_of(st.none(), numbers),
           st.one_of(st.integers(0, 2**64), junk))
    def check(name, prompt, n_new, temperature, top_k, top_p, seed):
        outcome(sp.sample, by_name[name], prompt, tokenizer=tok, max_new_tokens=n_new,
                temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)

    check()


class _BadModel:
    """A model that returns +inf, or the wrong shape: scoring must refuse it, not score it."""

    def __init__(self, vocab, value=np.inf, shape_ok=True):
        self.vocab, self.value, self.shape_ok = vocab, value, shape_ok

    def logprobs(self, ids):
        ids = np.asarray(ids)
        shape = ids.shape + (len(self.vocab),) if self.shape_ok else ids.shape
        return np.full(shape, self.value)

    def token_logprobs(self, ids):
        ids = np.asarray(ids)
        return np.full(ids[..., 1:].shape if self.shape_ok else ids.shape, self.value)


@pytest.mark.parametrize("value, shape_ok", [(np.inf, True), (0.5, True), (np.nan, True), (-1.0, False)])
def test_scores_of_a_broken_model_are_refused(models, value, shape_ok):
    tok = models[0]
    model = _BadModel(tok.vocab, value, shape_ok)
    for call in (lambda: sp.perplexity(model, ["the cat"], tokenizer=tok),
                 lambda: sp.score({"m": model}, ["the cat"], tokenizer=tok)):
        with pytest.raises(sp.errors.InputError, match=r"log-probabilit|shape|NaN or \+inf"):
            call()


# ----------------------------------------------------------------------------- functional
@pytest.mark.parametrize("function", ["logsumexp", "log_softmax", "softmax", "entropy"])
def test_functional_with_hostile_arrays(function):
    @FUZZ
    @given(arrays, st.one_of(st.integers(-3, 3), junk))
    def check(x, axis):
        outcome(lambda: _valid(getattr(F, function)(x, axis=axis)))

    check()


def test_entropy_of_logits_that_are_not_log_probabilities_is_an_error():
    with pytest.raises(sp.errors.InputError, match="normalized"):
        F.entropy([5.0, 5.0])
    assert float(F.entropy(np.log([0.5, 0.5]), base=2)) == pytest.approx(1.0)
    assert F.entropy([5.0, 5.0], check_normalized=False) < 0  # the old, meaningless value on request


# ----------------------------------------------------------------------------- tokenizers and vocab
@pytest.mark.parametrize("kind", ["whitespace", "char", "bpe"])
def test_tokenizers_with_hostile_text(kind):
    tok = {"whitespace": lambda: sp.WhitespaceTokenizer.fit(LINES), "char": lambda: sp.CharTokenizer.fit(LINES),
           "bpe": lambda: sp.BPETokenizer.train(LINES, vocab_size=262)}[kind]()

    @FUZZ
    @given(texts, ids, corpora)
    def check(text, some_ids, corpus):
        status, encoded = outcome(tok.encode, text)
        if status == "ok" and kind == "bpe":
            assert tok.decode(encoded) == text
        outcome(tok.decode, some_ids)
        outcome(tok.encode_batch, corpus)
        outcome(type(tok).fit if kind != "bpe" else lambda c: type(tok).train(c, vocab_size=260), corpus)

    check()


def test_lone_surrogates_are_refused_everywhere_text_enters(tmp_path):
    bad = "the \ud800 cat"
    for call in (lambda: sp.WhitespaceTokenizer.fit([bad]), lambda: sp.CharTokenizer.fit(bad),
                 lambda: sp.BPETokenizer.train([bad], vocab_size=260),
                 lambda: sp.WhitespaceTokenizer.fit(LINES).encode(bad),
                 lambda: sp.ngram.MLE(order=2).fit([bad])):
        with pytest.raises(sp.errors.InputError, match="surrogate"):
            call()
    vocab = sp.Vocab(["a", "b\udcff"], bos=None, eos=None, unk=None)  # built directly, bypassing fit
    with pytest.raises(sp.errors.InputError, match="surrogate"):
        sp.WhitespaceTokenizer(vocab).save(tmp_path / "t.json")
    assert not list(tmp_path.iterdir())


def test_nul_is_an_ordinary_character(tmp_path):
    tok = sp.CharTokenizer.fit(["a\x00b"])
    loaded = sp.load_tokenizer(tok.save(tmp_path / "t.json"))
    assert loaded.decode(loaded.encode("b\x00a")) == "b\x00a"
    bpe = sp.BPETokenizer.train(["a\x00b"], vocab_size=258)
    assert bpe.decode(bpe.encode("\x00\x00")) == "\x00\x00"


def test_vocab_with_hostile_tokens():
    @FUZZ
    @given(st.one_of(st.lists(texts, max_size=4), texts, junk), st.one_of(texts, st.none()))
    def check(tokens, special):
        outcome(sp.Vocab, tokens, bos=special, eos=None, unk=None)

    check()
    with pytest.raises(sp.errors.InputError, match="sequence of token strings"):
        sp.Vocab("abc", bos=None, eos=None, unk=None)


def test_bytes_corpus_message_says_decode_it(models):
    tok, by_name = models
    for bad in (b"the cat", [b"the cat"]):
        with pytest.raises(sp.errors.InputError, match="got bytes.*decode it first"):
            sp.perplexity(by_name["kn"], bad, tokenizer=tok)


def test_a_folder_given_as_a_tokenizer_file_is_named_a_folder(tmp_path):
    (tmp_path / "enc.tiktoken").mkdir()
    for call in (lambda: sp.TiktokenTokenizer(tmp_path / "enc.tiktoken"),
                 lambda: sp.load_tokenizer(tmp_path / "enc.tiktoken"), lambda: sp.load_tokenizer(tmp_path)):
        with pytest.raises(sp.errors.SeqProbFileError, match="folder"):
            call()
