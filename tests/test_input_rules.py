"""Hostile and careless inputs to the library: each ends in a SeqProbError that names the bad
value and says what would be right; a model, a number or a file is never lost or made up."""
import gzip
import math
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples

import seqprob as sp
from seqprob import _io
from seqprob.errors import (ArpaFormatError, CheckpointError, InputError,
                            SeqProbFileError)
from seqprob.ngram.mixture import MixtureWeightError
from seqprob.vocab import Vocab, check_ids

HF_TIKTOKEN = Path(__file__).parent / "fixtures" / "hf_gpt2" / "tiktoken"
LINES = ["the cat sat on the mat", "a dog sat", "the dog ran"]


@pytest.fixture(scope="module")
def kn():
    with sp.ngram.expected_discount_fallback():
        return sp.ngram.KneserNey(order=2, discount=0.5).fit(LINES)


@pytest.fixture(scope="module")
def gpt():
    return sp.default_model()


# ------------------------------------------------------------------ models that are not models
@pytest.mark.parametrize("fn", [sp.perplexity, sp.evaluate])
@pytest.mark.parametrize("bad, got", [(None, "got None"), (5, "got a int"), ("kn.arpa", "got a str")])
def test_corpus_figures_name_what_is_not_a_model(fn, bad, got):
    with pytest.raises(InputError, match=f"model is not a LanguageModel \\({got}\\)"):
        fn(bad, ["the cat"])


def test_perplexity_and_evaluate_take_a_dict_of_models(kn, gpt):
    models = {"kn": kn, "gpt": gpt}
    ppl = sp.perplexity(models, iter(LINES), tokenizer=gpt.tokenizer)  # an iterator, read once
    assert isinstance(ppl, pd.Series) and list(ppl.index) == ["kn", "gpt"] and ppl.name == "perplexity"
    for name, model in models.items():
        assert ppl[name] == sp.perplexity(model, LINES, tokenizer=gpt.tokenizer)
    table = sp.evaluate(models, LINES, tokenizer=gpt.tokenizer)
    assert list(table.index) == ["kn", "gpt"] and table.index.name == "model"
    assert table.loc["gpt"].to_dict() == sp.evaluate(gpt, LINES).to_dict()
    with pytest.raises(InputError, match="model 'x' is not a LanguageModel \\(got None\\)"):
        sp.perplexity({"gpt": gpt, "x": None}, LINES)
    with pytest.raises(InputError, match="no models"):
        sp.evaluate({}, LINES)


# ------------------------------------------------------------------ items that are not texts
def test_score_names_the_item_that_is_not_a_text(gpt):
    with pytest.raises(InputError, match=r"texts_or_ids\[1\] is None: it must be a str"):
        sp.score({"gpt": gpt}, ["the cat", None])
    with pytest.raises(InputError, match=r"texts_or_ids\[0\] is bytes b'the cat': texts must be str, "
                                         r"decode it first"):
        sp.score({"gpt": gpt}, [b"the cat"])
    with pytest.raises(InputError, match=r"texts_or_ids\[0\] is float 2.5"):
        sp.score(gpt, [2.5])
    with pytest.raises(InputError, match=r"texts_or_ids\[0\] must be integers, got NoneType None at index 1"):
        sp.score(gpt, [[3, None]])
    with pytest.raises(InputError, match="texts_or_ids must be .* got None"):
        sp.score(gpt, None)


@pytest.mark.parametrize("bad, message", [(None, "text_or_ids is None"),
                                          (b"the cat", "text_or_ids is bytes b'the cat'"),
                                          ({"a": 1}, "text_or_ids is dict"),
                                          (3.0, "text_or_ids is float 3.0")])
def test_joint_logprob_names_what_is_not_a_text(gpt, bad, message):
    with pytest.raises(InputError, match=message):
        sp.joint_logprob(gpt, bad)


@settings(max_examples=examples(30))
@given(st.lists(st.integers(0, 9), min_size=1, max_size=12), st.data())
def test_check_ids_names_the_first_item_that_is_not_an_integer(ids, data):
    index = data.draw(st.integers(0, len(ids)))
    bad = data.draw(st.sampled_from([None, "3", 2.5, b"x"]))
    ids = ids[:index] + [bad] + ids[index:]
    with pytest.raises(InputError, match=f"got {type(bad).__name__} .* at index {index} "):
        check_ids(ids, 10)


# ------------------------------------------------------------------ numbers of the wrong kind
def test_mixture_weights_must_be_numbers_not_strings(kn):
    with pytest.raises(MixtureWeightError, match="weights must be numbers"):
        sp.Mixture([kn, kn], weights=[0.5, "0.5"])
    with pytest.raises(MixtureWeightError, match="weights must be numbers"):
        sp.Mixture([kn, kn], weights=[True, False])


def test_stride_is_checked_even_when_the_text_fits(gpt):
    for fn in (sp.score, sp.word_scores):
        with pytest.raises(InputError, match="stride must be an integer in \\[1, 32\\].*got 1.5"):
            fn(gpt, ["the cat"], stride=1.5)


# ------------------------------------------------------------------ files where folders are meant
def test_a_file_of_a_checkpoint_points_at_its_folder(tmp_path):
    model = sp.GPT(sp.GPTConfig.preset("tiny"), seed=0)
    folder = model.save(tmp_path / "ckpt")
    for name in ("config.json", "model.safetensors", "manifest.json"):
        with pytest.raises(SeqProbFileError, match=f"is a file, not a folder .*pass the folder that "
                                                   f"holds it, '{folder}'"):
            sp.GPT.load(folder / name)
        with pytest.raises(InputError, match=f"one file of the model folder '{folder}': pass the folder"):
            sp.load_model(folder / name)
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(SeqProbFileError, match="is a file, not a folder: a checkpoint is the folder"):
        sp.GPT.load(other)
    with pytest.raises(SeqProbFileError, match="is a file, not a Hugging Face checkpoint: pass its folder"):
        sp.GPT.from_hf(other)


# ------------------------------------------------------------------ damaged files
def _saved_weights(tmp_path) -> Path:
    sp.gpt.safetensors.save_file({"a": np.arange(40, dtype=np.float32).reshape(4, 10),
                                  "b": np.ones(7, np.float64)}, tmp_path / "w.safetensors")
    return tmp_path / "w.safetensors"


@settings(max_examples=examples(25))
@given(cut=st.integers(1, 40 * 4 + 7 * 8))
def test_a_truncated_safetensors_file_says_so(tmp_path_factory, cut):
    path = _saved_weights(tmp_path_factory.mktemp("st"))
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    with pytest.raises(CheckpointError, match=f"shorter than its header declares: .*\\({cut} missing: "
                                              "a truncated download or copy\\?\\)"):
        sp.gpt.safetensors.load_file(path)


def test_a_truncated_checkpoint_says_so_through_from_hf(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    for f in HF_TIKTOKEN.iterdir():
        if f.name in ("config.json", "model.safetensors"):
            (folder / f.name).write_bytes(f.read_bytes())
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match="shorter than its header declares.*100 missing"):
        sp.GPT.from_hf(folder)


@pytest.mark.parametrize("unigrams", ["", "-0.5\t<s>\n"])
def test_an_arpa_file_without_unigrams_is_refused(tmp_path, unigrams):
    count = unigrams.count("\n")
    path = tmp_path / "empty.arpa"
    path.write_text(f"\\data\\\nngram 1={count}\n\n\\1-grams:\n{unigrams}\n\\end\\\n")
    with pytest.raises(ArpaFormatError, match=f"lists no unigram that can be predicted \\(ngram 1={count}"):
        sp.read_arpa(path)
    with gzip.open(tmp_path / "empty.arpa.gz", "wt") as handle:
        handle.write(path.read_text())
    with pytest.raises(ArpaFormatError, match="no unigram"):
        sp.load_model(tmp_path / "empty.arpa.gz")


# ------------------------------------------------------------------ nothing lost, nothing unnamed
def test_a_temporary_that_cannot_be_removed_is_named(tmp_path, monkeypatch, kn):
    """The folder turns read-only after the temporary was made: the old file stays, and the
    error names the temporary left behind (root ignores permissions, so both the rename and
    the clean-up are made to fail)."""
    target = tmp_path / "kn.arpa"
    sp.write_arpa(kn, target)
    before = target.read_bytes()

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_io.os, "replace", denied)
    monkeypatch.setattr(Path, "unlink", denied)
    with pytest.raises(SeqProbFileError, match="Permission denied; the temporary '.*seqprob-tmp-.*' could "
                                               "not be removed and was left behind") as info:
        sp.write_arpa(kn, target)
    monkeypatch.undo()
    left = Path(info.value.left_behind)
    assert left.exists() and left.parent == tmp_path and target.read_bytes() == before
    left.unlink()


def test_a_temporary_that_is_removed_is_not_mentioned(tmp_path, monkeypatch, kn):
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_io.os, "replace", denied)
    with pytest.raises(SeqProbFileError) as info:
        sp.write_arpa(kn, tmp_path / "kn.arpa")
    assert "left behind" not in str(info.value) and info.value.left_behind is None
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ ids that are the model's ids
@pytest.fixture(scope="module")
def ids_only_gpt():
    return sp.GPT.from_hf(HF_TIKTOKEN)  # no tokenizer.json: a vocabulary of ids only


def test_a_tokenizer_of_the_model_size_is_used_id_for_id(ids_only_gpt):
    tok = sp.TiktokenTokenizer(HF_TIKTOKEN / "enc.tiktoken")
    assert ids_only_gpt.vocab.is_ids_only and len(tok.vocab) == len(ids_only_gpt.vocab)
    text = "the cat sat on the mat"
    df = sp.score(ids_only_gpt, [text], tokenizer=tok)
    attached = sp.score(sp.GPT.from_hf(HF_TIKTOKEN, tokenizer=tok), [text])
    np.testing.assert_array_equal(df["logprob"], attached["logprob"])
    np.testing.assert_array_equal(df["token_id"], attached["token_id"])
    assert np.isfinite(df["logprob"]).all() and not df["is_oov"].any()
    assert df["token"].iloc[-1] == "<|endoftext|>"
    assert sp.joint_logprob(ids_only_gpt, text, tokenizer=tok) == pytest.approx(df["logprob"].sum())


def test_a_tokenizer_whose_ids_cannot_be_trusted_is_refused(ids_only_gpt):
    words = sp.WhitespaceTokenizer.fit(["the cat sat"])
    with pytest.raises(InputError, match="the tokenizer has 6 tokens and the model 275.*cannot be "
                                         "trusted"):
        sp.score(ids_only_gpt, ["the cat"], tokenizer=words)
    with pytest.raises(InputError, match="is not the model's"):
        sp.sample(ids_only_gpt, "the", tokenizer=words, seed=0)


@given(st.integers(1, 40), st.integers(1, 40))
def test_same_ids_is_symmetric_and_needs_one_size(a, b):
    words = Vocab.build([f"w{i}" for i in range(a)])
    ids = Vocab.ids_only(b + 3)
    assert words.same_ids(ids) == ids.same_ids(words) == (a == b)
    assert words.same_ids(Vocab.build([f"w{i}" for i in range(a)]))
    assert not words.same_ids(Vocab.build([f"v{i}" for i in range(a)]))


@given(size=st.integers(1, 60), bos=st.none() | st.integers(0, 70), eos=st.none() | st.integers(0, 70))
def test_an_ids_only_vocabulary_is_the_vocabulary_of_its_names(size, bos, eos):
    """Vocab.ids_only builds its names "<i>" only when asked (scoring by ids never asks):
    it behaves as the eager vocabulary of those names, bad special ids raising the same."""
    name = lambda i: None if i is None else f"<{i}>"  # noqa: E731
    try:
        eager = Vocab([f"<{i}>" for i in range(size)], bos=name(bos), eos=name(eos), unk=None)
    except InputError as exc:
        with pytest.raises(InputError, match=re.escape(str(exc))):
            Vocab.ids_only(size, bos, eos)
        return
    lazy = Vocab.ids_only(size, bos, eos)
    assert len(lazy) == size and "tokens" not in vars(lazy)  # nothing built yet
    assert (lazy.bos_id, lazy.eos_id, lazy.unk_id) == (eager.bos_id, eager.eos_id, eager.unk_id)
    assert lazy.never_predicted_id == eager.never_predicted_id and lazy.is_ids_only and eager.is_ids_only
    assert lazy == eager and hash(lazy) == hash(eager) and lazy.to_dict() == eager.to_dict()
    assert lazy.id(f"<{size - 1}>") == size - 1 and lazy.get("<x>") is None and f"<{size}>" not in lazy
    assert lazy.decode_ids([0, size - 1]) == eager.decode_ids([0, size - 1])
    assert Vocab.from_dict(lazy.to_dict()) == lazy


@pytest.mark.parametrize("args, match", [((2.5,), "size must be an integer >= 1, got 2.5"),
                                         ((0,), "size must be an integer >= 1, got 0"),
                                         ((True,), "size must be an integer >= 1, got True"),
                                         ((4, 1.5), "bos_id must be an integer, got 1.5"),
                                         ((4, None, 4), "eos token '<4>' is not in the vocabulary")])
def test_an_ids_only_vocabulary_refuses_sizes_and_ids_that_are_not_whole_numbers(args, match):
    with pytest.raises(InputError, match=re.escape(match)):
        Vocab.ids_only(*args)


def test_an_ids_only_vocabulary_of_a_large_model_costs_nothing_until_used():
    """262,144 names ("<i>") and their index would be ~33 MB held by every model loaded
    without its tokenizer."""
    import tracemalloc

    tracemalloc.start()
    vocab = Vocab.ids_only(262_144, bos_id=2, eos_id=1)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert held < 10_000 and len(vocab) == 262_144 and vocab.token(262_143) == "<262143>"


# ------------------------------------------------------------------ one rule for corpus arguments
def test_a_str_names_a_file_where_a_corpus_is_read(tmp_path, gpt):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    with sp.ngram.expected_discount_fallback():
        from_list = sp.ngram.KneserNey(order=2, discount=0.5).fit(LINES)
        for name in (str(path), path):
            from_file = sp.ngram.KneserNey(order=2, discount=0.5).fit(name)
            assert from_file.vocab == from_list.vocab
            assert sp.perplexity(from_file, name) == sp.perplexity(from_list, LINES)
    assert sp.JointTable().fit(str(path)).n_sequences_ == len(LINES)
    with pytest.raises(SeqProbFileError, match="no such file .*pass a list of lines"):
        sp.evaluate(gpt, "the cat sat")


def test_a_str_is_one_text_where_texts_are_scored(tmp_path, gpt, monkeypatch):
    path = tmp_path / "texts.txt"
    path.write_text("the cat sat\n\n a dog ran \n", encoding="utf-8")
    from_path = sp.score(gpt, path)
    assert from_path.equals(sp.score(gpt, ["the cat sat", "a dog ran"]))
    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserWarning, match=r"'texts.txt' is read as a text, but it is also the name of "
                                         r"a file: pass pathlib.Path\('texts.txt'\)"):
        sp.score(gpt, "texts.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sp.score(gpt, "the cat")  # not a file name: no warning


def test_write_arpa_gzips_a_gz_name(tmp_path, kn):
    """write_arpa('m.arpa.gz') writes gzip (KenLM's convention), not plain text under a .gz name."""
    plain, packed = sp.write_arpa(kn, tmp_path / "m.arpa"), sp.write_arpa(kn, tmp_path / "m.arpa.gz")
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    back = sp.read_arpa(packed)
    np.testing.assert_array_equal(back.token_logprobs([1, 3, 4, 2]), sp.read_arpa(plain).token_logprobs([1, 3, 4, 2]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.arpa", "m.arpa.gz"]
