"""compress / decompress: exact round trips, size near the model's cross-entropy, named errors."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.scoring.compression import HEADER_BYTES, CompressedDataError, code_length_bits, quantize
from seqprob.errors import InputError

from small_models import LINES, gpt, tok  # noqa: F401 - shared fixtures
from budget import examples


@pytest.fixture(scope="module")
def truth():
    return sp.toy_english()


@pytest.fixture(scope="module")
def bpe():
    return sp.BPETokenizer.train(LINES * 3, vocab_size=280)


@pytest.fixture(scope="module")
def models(truth, tok, gpt, bpe):
    kn = sp.ngram.WittenBell(order=3).fit(LINES, tokenizer=tok)
    return {"truth": (truth, truth.tokenizer), "gpt": (gpt, tok), "kn": (kn, tok),
            "uniform-bpe": (sp.UniformModel(bpe.vocab), bpe)}


word_lines = st.lists(st.sampled_from("the cat dog sat on mat king saw queen".split()), min_size=0, max_size=8)


@settings(max_examples=examples(25), deadline=None)
@given(st.sampled_from(["gpt", "kn"]), st.lists(word_lines.map(" ".join), min_size=1, max_size=4))
def test_round_trip_word_models(models, name, lines):
    model, tk = models[name]
    text = "\n".join(lines)
    assert sp.decompress(model, sp.compress(model, text, tokenizer=tk), tokenizer=tk) == text


@settings(max_examples=examples(25), deadline=None)
@given(st.text(max_size=40))
def test_round_trip_any_text_with_byte_level_bpe(models, text):
    model, tk = models["uniform-bpe"]
    assert sp.decompress(model, sp.compress(model, text, tokenizer=tk), tokenizer=tk) == text


@settings(max_examples=examples(10), deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40))
def test_size_is_within_two_bits_of_the_quantized_code_length(truth, seed, n):
    """payload <= ceil((L + 2) / 8) bytes, L = sum -log2 q (quantized); and L exceeds P*'s own
    surprisal by at most n_tokens * -log2(1 - V / 2^40) bits: P* is the optimal code."""
    lines = truth.sample(n, seed=seed)
    text = "\n".join(lines)
    data = sp.compress(truth, text)
    L = code_length_bits(truth, text)
    assert len(data) - HEADER_BYTES <= math.ceil((L + 2) / 8)
    ev = sp.evaluate(truth, lines)
    ideal = -ev.logprob / math.log(2)
    eps = -math.log2(1 - len(truth.vocab) / 2 ** 40)
    assert ideal - 1e-6 <= L <= ideal + ev.n_tokens * eps + 1e-6


def test_quantized_frequencies_are_positive_and_deterministic(truth):
    row = truth.start([truth.vocab.bos_id]).logprobs
    cum = quantize(row)
    assert (np.diff(cum) >= 1).all() and cum[-1] <= 2 ** 40
    np.testing.assert_array_equal(cum, quantize(row.copy()))
    with pytest.raises(InputError, match="NaN"):
        quantize(np.array([0.0, np.nan]))


def test_bad_data_is_named(models, truth):
    gpt, tk = models["gpt"]
    data = sp.compress(truth, "the cat sat on the mat\nthe dog")
    with pytest.raises(CompressedDataError, match="another model"):
        sp.decompress(gpt, data, tokenizer=tk)
    with pytest.raises(CompressedDataError, match="truncated"):
        sp.decompress(truth, data[:-1])
    with pytest.raises(CompressedDataError, match="not seqprob compressed data"):
        sp.decompress(truth, b"hello")
    corrupt = bytearray(data)
    corrupt[HEADER_BYTES] ^= 0xFF
    with pytest.raises(CompressedDataError):
        sp.decompress(truth, bytes(corrupt))
    with pytest.raises(InputError, match="losslessly"):
        sp.compress(truth, "the zebra sat")  # <unk>
    with pytest.raises(InputError, match="losslessly"):
        sp.compress(truth, "the  cat")  # two spaces do not survive a word tokenizer
    with pytest.raises(InputError, match="vocabulary is not the model's"):
        sp.compress(truth, "the cat", tokenizer=tk)


def test_a_line_that_cannot_be_coded_names_the_word_whole():
    truth = sp.toy_english()
    word = "supercalifragilisticexpialidocious" * 2
    with pytest.raises(InputError) as info:
        sp.compress(truth, f"the cat sat on the mat the dog sat on the mat {word} the cat")
    assert f"the word {word!r} at character 47 decodes as '<unk>'" in str(info.value)
    with pytest.raises(InputError, match="the whitespace '  ' at character 4 decodes as ' '"):
        sp.compress(truth, "the  cat")
    with pytest.raises(InputError, match="the text holds '<unk>'"):
        sp.compress(truth, "the cat <unk>")
