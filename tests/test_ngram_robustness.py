"""Robustness of the n-gram path: a NUL word in training text, and damaged ``.sqlm`` files
loaded without ``verify=True``."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from seqprob.app.cli import main
from seqprob.errors import FileFormatError, SeqProbError
from seqprob.ngram import DiscountFallbackWarning, KneserNey
from seqprob.ngram._probe import KEY, ProbeIndex
from seqprob.ngram._sqlm import _PREFIX, SlotHash
from seqprob.ngram.binary import load_ngram
from budget import examples

NUL = "\x00"


def _fit(lines, order=2, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountFallbackWarning)
        return KneserNey(order=order, **kw).fit(lines)


def _assert_same_model(a, b, fresh: str):
    """Same counts and tables; the vocabularies differ only by ``fresh`` standing for NUL."""
    assert [fresh if t == NUL else t for t in a.vocab.tokens] == list(b.vocab.tokens)
    for x, y in zip(a.counts_.keys + a.counts_.counts, b.counts_.keys + b.counts_.counts):
        np.testing.assert_array_equal(x, y)
    ta, tb = a.tables_, b.tables_
    for x, y in zip(ta.keys + ta.logp + ta.logbow, tb.keys + tb.logp + tb.logbow):
        np.testing.assert_array_equal(x, y)


# ---------------------------------------------------------------------------- NUL words


def _replaced(lines, fresh: str) -> list:
    """``lines`` with every NUL word (not a NUL inside a word) replaced by ``fresh``."""
    return [" ".join(fresh if w == NUL else w for w in line.split()) for line in lines]


@pytest.mark.parametrize("lines", [["a\x00b c", NUL], [NUL + " a"], [NUL], ["a b", "c \x00 \x00 d", ""]])
def test_a_nul_word_is_an_ordinary_word(lines):
    model = _fit(lines)
    n_nul = sum(line.split().count(NUL) for line in lines)
    assert NUL in model.vocab.tokens
    unigram = model.counts_.counts[0][model.counts_.keys[0] == model.vocab.tokens.index(NUL)]
    assert unigram.tolist() == [n_nul]
    _assert_same_model(model, _fit(_replaced(lines, "ZZ")), "ZZ")


def test_nul_word_vocab_order_and_scores():
    model = _fit([NUL + " a"])
    assert list(model.vocab) == ["<unk>", "<s>", "</s>", NUL, "a"]
    other = _fit(["ZZ a"])
    np.testing.assert_array_equal(model.token_logprobs([1, 3, 4, 2]), other.token_logprobs([1, 3, 4, 2]))


def test_cli_fit_keeps_a_nul_word(tmp_path, capsys):
    corpus = tmp_path / "nul.txt"
    corpus.write_bytes(b"a \x00 b\nc\n")
    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "m.sqlm")]) == 0
    assert NUL in load_ngram(tmp_path / "m.sqlm", verify=True).vocab.tokens
    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "m.arpa")]) == 2
    assert "NUL" in capsys.readouterr().err  # ARPA cannot hold it: said so, not a vocab_size error


words = st.sampled_from(["a", "b", "c\x00", NUL, "\x00\x00"])
corpora = st.lists(st.lists(words, max_size=6).map(" ".join), min_size=1, max_size=10)


@given(lines=corpora, order=st.integers(1, 3), chunk_chars=st.sampled_from([1, 7, 1 << 20]))
@settings(max_examples=examples(20), deadline=None)
def test_a_fresh_word_standing_for_nul_gives_the_same_model(lines, order, chunk_chars):
    if not any(line.split() for line in lines):
        return  # no words: refused either way
    nul = _fit(lines, order, chunk_chars=chunk_chars)
    fresh = _fit(_replaced(lines, "Q"), order, chunk_chars=chunk_chars)
    _assert_same_model(nul, fresh, "Q")


# ---------------------------------------------------------------------------- damaged .sqlm


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(60)] + ["é", "日本"]
    lines = [" ".join(rng.choice(vocab, rng.integers(1, 12))) for _ in range(300)]
    path = _fit(lines, order=3).save(tmp_path_factory.mktemp("sqlm") / "m.sqlm")
    return path, lines


def _sections(data: bytes) -> dict:
    _, _, length, _ = _PREFIX.unpack(data[: _PREFIX.size])
    meta = json.loads(data[_PREFIX.size: _PREFIX.size + length])
    return {s["name"]: s for s in meta["sections"]}


def _damage(saved, tmp_path, section: str, edit) -> str:
    """A copy of the file with ``edit(view)`` applied to a writable view of one section."""
    path, _ = saved
    data = bytearray(path.read_bytes())
    s = _sections(bytes(data))[section]
    view = np.frombuffer(data, dtype=np.uint8, count=s["nbytes"], offset=s["offset"])
    edit(view.view(np.dtype(s["dtype"])).reshape(s["shape"]))
    out = tmp_path / "damaged.sqlm"
    out.write_bytes(bytes(data))
    return str(out)


def _score(path, lines):
    model = load_ngram(path)
    v = model.vocab
    seqs = [np.array([v.bos_id, *model.tokenizer.encode(t), v.eos_id]) for t in lines]
    model.logprobs(seqs[0])
    return model.token_logprobs_many(seqs)


def _set(index, value):
    def edit(a):
        a[index] = value
    return edit


def test_damaged_vocabulary_bytes(saved, tmp_path):
    path = _damage(saved, tmp_path, "vocab.utf8", _set(20, 0xFF))
    with pytest.raises(FileFormatError, match=r"damaged\.sqlm.*UTF-8.*verify=True"):
        load_ngram(path)
    path = _damage(saved, tmp_path, "vocab.utf8", _set(slice(None), ord("w")))  # equal tokens
    with pytest.raises(FileFormatError, match="corrupted vocabulary"):
        load_ngram(path)
    path = _damage(saved, tmp_path, "vocab.offsets", _set(3, 10**12))
    with pytest.raises(FileFormatError, match="vocabulary offsets"):
        load_ngram(path)


@pytest.mark.parametrize("value", [np.nan, 1.0, np.inf])
def test_damaged_unigram_floats(saved, tmp_path, value):
    with pytest.raises(FileFormatError, match="unigram log-probability.*verify=True"):
        load_ngram(_damage(saved, tmp_path, "logp.1", _set(5, value)))
    if value != 1.0:  # a positive back-off weight is legal
        with pytest.raises(FileFormatError, match="back-off weight"):
            load_ngram(_damage(saved, tmp_path, "logbow.1", _set(5, value)))


@pytest.mark.parametrize("value", [2**30 - 1, -2])
def test_damaged_bucket_entries_all_buckets(saved, tmp_path, value):
    path = _damage(saved, tmp_path, "buckets.3", _set(slice(None), value))
    with pytest.raises(FileFormatError, match=r"damaged\.sqlm.*corrupted n-gram query records.*verify=True"):
        _score(path, saved[1][:20])


@pytest.mark.parametrize("past_end", [5, -1])
def test_damaged_end_of_a_shared_bucket(saved, tmp_path, past_end):
    """The next bucket's entry bounds the ragged gather: past the records (IndexError before),
    or before the bucket's first record (a negative np.repeat; a large one allocates GiBs)."""
    path, _ = saved
    index = load_ngram(path).tables_.probe_index(3)
    shared = np.flatnonzero((index.buckets & 1)[:-1])[0]  # a bucket of several, not the last
    lo = int(index.buckets[shared] >> 1)
    query = index.records[lo + 1, KEY]  # its second record: read by the walk
    n = len(index.records)
    bad = (n + past_end) << 1 if past_end > 0 else 0
    damaged = _damage(saved, tmp_path, "buckets.3", _set(shared + 1, bad))
    with pytest.raises(FileFormatError, match="bucket"):
        load_ngram(damaged).tables_.probe_index(3).probe(np.array([query]))


def test_damaged_record_rows(saved, tmp_path):
    path, lines = saved
    index = load_ngram(path).tables_.probe_index(2)
    damaged = _damage(saved, tmp_path, "probe.2", _set((slice(None), 1), 10**9))  # every row
    with pytest.raises(FileFormatError, match="row"):
        load_ngram(damaged).tables_.probe_index(2).lookup(index.records[:-1, KEY])
    with pytest.raises(FileFormatError, match="row"):
        _score(damaged, lines[:20])


@pytest.mark.parametrize("section", ["buckets.2", "buckets.3", "probe.2", "probe.3", "vocab.utf8",
                                     "vocab.offsets", "logp.1", "logbow.1", "keys.2"])
def test_random_damage_gives_a_seqprob_error_or_a_result(saved, tmp_path, section):
    """Without verify=True a damaged file may score wrongly, but never crashes in numpy."""
    rng = np.random.default_rng(sum(map(ord, section)))
    path, lines = saved
    data = path.read_bytes()
    s = _sections(data)[section]
    for _ in range(40):
        damaged = bytearray(data)
        for i in rng.integers(0, s["nbytes"], rng.integers(1, 4)):
            damaged[s["offset"] + int(i)] ^= int(rng.integers(1, 256))
        (tmp_path / "d.sqlm").write_bytes(bytes(damaged))
        try:
            _score(tmp_path / "d.sqlm", lines[:40] + ["w1 unseen w2"])
        except SeqProbError:
            pass


def test_damaged_slot_hash_rows():
    keys = np.array([3, 10, 42])
    h = SlotHash.build(keys)
    h.slots = np.full_like(h.slots, 7)  # a row past the keys (the sentinel is row 3)
    with pytest.raises(FileFormatError, match="slot"):
        h.lookup(np.array([42]))


def test_in_memory_probe_index_is_unchanged():
    idx = ProbeIndex.build(np.array([3, 10, 42]), np.log([0.5, 0.25, 0.25]), np.zeros(3))
    assert idx.lookup(np.array([42, 5, 3])).tolist() == [2, -1, 0]
