"""The memory-mapped binary n-gram format: exact round trip, O(1) load, and damaged files."""
from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.ngram.arpa import read_arpa, write_arpa
from seqprob.app.cli import main
from seqprob.errors import FileFormatError, InputError, SeqProbFileError
from seqprob.ngram import DiscountFallbackWarning, KneserNey, ModifiedKneserNey, StupidBackoff, WittenBell
from seqprob.ngram._sqlm import MAGIC, SlotHash
from seqprob.ngram.binary import load_ngram, save_ngram
from budget import examples

CORPUS = ["the cat sat on the mat", "the dog sat", "a cat saw the dog", "the mat"]
corpora = st.lists(st.lists(st.sampled_from(["a", "b", "c", "dé"]), max_size=6).map(" ".join),
                   min_size=1, max_size=8).filter(lambda ls: any(ls))


def _seqs(model, lines):
    v = model.vocab
    return [np.array([v.bos_id, *model.tokenizer.encode(s), v.eos_id]) for s in lines]


@pytest.mark.parametrize("cls", [ModifiedKneserNey, KneserNey, WittenBell, StupidBackoff])
@given(lines=corpora, order=st.integers(1, 4), probe=st.lists(st.sampled_from("abz"), max_size=5),
       use_hash=st.booleans())
@settings(max_examples=examples(8), deadline=None)
def test_saved_model_scores_exactly_like_the_original(tmp_path_factory, cls, lines, order, probe, use_hash):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountFallbackWarning)
        model = cls(order=order).fit(lines)
    path = model.save(tmp_path_factory.mktemp("b") / "m.sqlm", hash=use_hash)
    loaded = sp.load_ngram(path, verify=True)
    assert loaded.vocab.tokens == model.vocab.tokens and loaded.order == order
    seqs = _seqs(model, lines + [" ".join(probe) or "a"])
    for a, b in zip(model.token_logprobs_many(seqs), loaded.token_logprobs_many(seqs)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.logprobs(seqs[0]), loaded.logprobs(seqs[0]))
    assert not loaded.tables_.keys[-1].flags.writeable  # a read-only view of the mapped file


def test_arpa_to_binary_to_arpa_is_byte_identical(tmp_path):
    arpa = write_arpa(KneserNey(order=3).fit(CORPUS), tmp_path / "m.arpa")
    assert main(["ngram", "build-binary", str(arpa), str(tmp_path / "m.sqlm")]) == 0
    again = write_arpa(load_ngram(tmp_path / "m.sqlm"), tmp_path / "again.arpa")
    assert again.read_bytes() == arpa.read_bytes()
    from seqprob.app.cli._common import load_model

    assert load_model(str(tmp_path / "m.sqlm")).order == 3


def test_cli_fit_writes_the_binary_for_a_sqlm_name(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "m.sqlm"), "--smoothing", "wb"]) == 0
    assert load_ngram(tmp_path / "m.sqlm", verify=True).order == 3


def test_slot_hash_finds_every_key_and_nothing_else():
    keys = np.unique(np.random.default_rng(0).integers(0, 10**12, 5000))
    h = SlotHash.build(keys)
    np.testing.assert_array_equal(h.lookup(keys), np.arange(len(keys)))
    assert (h.lookup(keys + 1)[~np.isin(keys + 1, keys)] == -1).all()


def _saved(tmp_path):
    return KneserNey(order=3).fit(CORPUS).save(tmp_path / "m.sqlm")


def test_truncated_foreign_and_other_version_files(tmp_path):
    path = _saved(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "cut.sqlm"
    cut.write_bytes(data[: len(data) - 100])
    with pytest.raises(FileFormatError, match="truncated"):
        load_ngram(cut)
    cut.write_bytes(data[:30])
    with pytest.raises(FileFormatError, match="header"):
        load_ngram(cut)
    cut.write_bytes(data[:5])
    with pytest.raises(FileFormatError, match="shorter"):
        load_ngram(cut)
    foreign = tmp_path / "f.sqlm"
    foreign.write_bytes(b"\\data\\\nngram 1=3\n" + bytes(100))
    with pytest.raises(FileFormatError, match="not a seqprob n-gram binary"):
        load_ngram(foreign)
    other = tmp_path / "v2.sqlm"
    other.write_bytes(MAGIC + struct.pack("<I", 2) + data[12:])
    with pytest.raises(FileFormatError, match="version 2"):
        load_ngram(other)
    with pytest.raises(SeqProbFileError):
        load_ngram(tmp_path / "missing.sqlm")


def test_verify_finds_a_damaged_section(tmp_path):
    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # inside the last section, not the header
    path.write_bytes(bytes(data))
    load_ngram(path)  # O(1) load does not read the sections
    with pytest.raises(FileFormatError, match="CRC-32"):
        load_ngram(path, verify=True)
    header = bytearray(data)
    header[30] ^= 0x01
    path.write_bytes(bytes(header))
    with pytest.raises(FileFormatError, match="damaged"):
        load_ngram(path)


def test_failed_save_leaves_no_file(tmp_path, monkeypatch):
    import seqprob.ngram._sqlm as sqlm

    model = KneserNey(order=2).fit(CORPUS)
    monkeypatch.setattr(sqlm, "_layout", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        model.save(tmp_path / "m.sqlm")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputError):
        save_ngram(sp.UniformModel(model.vocab), tmp_path / "u.sqlm")


def test_loaded_model_scores_text_and_arpa_cli(tmp_path):
    model = read_arpa(write_arpa(KneserNey(order=3).fit(CORPUS), tmp_path / "m.arpa"))
    loaded = load_ngram(model.save(tmp_path / "m.sqlm"))
    test = ["the cat sat", "a dog saw zebras"]
    assert sp.perplexity(loaded, test) == sp.perplexity(model, test)


def test_stupid_backoff_keeps_its_scores_and_says_they_are_not_probabilities(tmp_path):
    """A .sqlm of stupid back-off scores like the model and loads with normalized False (so
    perplexity warns and write_arpa refuses it); other models' files stay as they were."""
    from seqprob.ngram import StupidBackoff, WittenBell

    model = StupidBackoff(order=3, alpha=0.4).fit(CORPUS)
    loaded = load_ngram(model.save(tmp_path / "s.sqlm"))
    ids = [1, *model.tokenizer.encode("the cat sat on"), 2]
    np.testing.assert_array_equal(model.token_logprobs(ids), loaded.token_logprobs(ids))
    assert loaded.normalized is False
    with pytest.raises(InputError, match="not a normalized distribution"):
        write_arpa(loaded, tmp_path / "s.arpa")
    normal = load_ngram(WittenBell(order=2).fit(CORPUS).save(tmp_path / "w.sqlm"))
    assert getattr(normal, "normalized", True) is True
    assert b"normalized" not in (tmp_path / "w.sqlm").read_bytes()[:4096]
