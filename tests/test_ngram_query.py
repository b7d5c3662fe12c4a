"""The fast n-gram query path: probing order by order equals the dense reference bit for bit,
and evaluate's block-by-block corpus scoring equals line-by-line scoring."""
from __future__ import annotations

from contract import same_fields
import gzip
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob._io import CorpusFile, read_lines
from seqprob.errors import InputError
from seqprob.ngram import DiscountFallbackWarning, KneserNey, ModifiedKneserNey, _query
from seqprob.ngram._probe import ROW, ProbeIndex, _bucket, score_chain
from seqprob.ngram.tables import BackoffTables
from budget import examples

TRAIN = ["the cat sat on the mat", "the dog sat", "a cat saw the dog", "the mat é", "internationalization é the"]


@st.composite
def back_off_tables(draw):
    """Random prefix-linked tables, not necessarily a normalized or well-formed model: an
    n-gram may be listed without its suffix, a context without back-off weight, log p = -inf."""
    V, N = draw(st.integers(2, 6)), draw(st.integers(1, 4))
    floats = st.floats(-8, 0, allow_nan=False) | st.just(-np.inf)
    keys, logp, logbow = [np.arange(V)], [], []
    for m in range(2, N + 1):
        pairs = len(keys[-1]) * V
        picked = draw(st.sets(st.integers(0, pairs - 1), min_size=1, max_size=min(pairs, 25)))
        keys.append(np.array(sorted(picked), dtype=np.int64))
    for k in keys:
        logp.append(np.array(draw(st.lists(floats, min_size=len(k), max_size=len(k)))))
    for k in keys[:-1]:
        logbow.append(np.array(draw(st.lists(st.floats(-3, 1), min_size=len(k), max_size=len(k)))))
    return BackoffTables(V, keys, logp, logbow)


@given(tables=back_off_tables(), data=st.data())
@settings(max_examples=examples(80), deadline=None)
def test_probing_order_by_order_equals_the_dense_reference(tables, data):
    V = tables.vocab_size
    lengths = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=6))
    stream = np.array(data.draw(st.lists(st.integers(0, V - 1), min_size=sum(lengths), max_size=sum(lengths))))
    starts = np.cumsum(lengths) - lengths
    seg = np.repeat(starts, lengths)
    fast = tables.score_stream(stream, seg)
    np.testing.assert_array_equal(fast, tables.score_stream_reference(stream, seg))
    assert np.isnan(fast[starts]).all()


@pytest.mark.parametrize("cls", [ModifiedKneserNey, KneserNey])
@given(words=st.lists(st.sampled_from(["the", "cat", "dog", "zebra", "é", "mat", "<unk>", "</s>"]), max_size=12),
       order=st.integers(1, 5))
@settings(max_examples=examples(20), deadline=None)
def test_fitted_and_loaded_models_score_like_the_reference(tmp_path_factory, cls, words, order):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountFallbackWarning)
        model = cls(order=order).fit(TRAIN)
    loaded = sp.load_ngram(model.save(tmp_path_factory.mktemp("q") / "m.sqlm"))
    v = model.vocab
    ids = [v.bos_id, *model.tokenizer.encode(" ".join(words)), v.eos_id]
    stream, seg = np.array(ids * 2), np.repeat([0, len(ids)], len(ids))
    ref = model.tables_.score_stream_reference(stream, seg)
    for m in (model, loaded):
        np.testing.assert_array_equal(m.tables_.score_stream(stream, seg), ref)


@given(keys=st.sets(st.integers(0, 2**62), max_size=300), probes=st.lists(st.integers(0, 2**62), max_size=50))
@settings(max_examples=examples(40), deadline=None)
def test_probe_index_finds_every_key_and_nothing_else(keys, probes):
    keys = np.array(sorted(keys), dtype=np.int64)
    logp = -np.arange(len(keys), dtype=np.float64)
    for index in (ProbeIndex.build(keys, logp, logp / 2), ProbeIndex.build(keys, logp)):
        np.testing.assert_array_equal(index.lookup(keys), np.arange(len(keys)))
        queries = np.array(probes, dtype=np.int64)
        expected = np.array([int(np.searchsorted(keys, q)) if q in set(keys.tolist()) else -1 for q in probes])
        np.testing.assert_array_equal(index.lookup(queries), expected.astype(np.int64))
        hit, rec = index.probe(keys)
        assert hit.all() and (rec[:, -2 if rec.shape[1] == 4 else 1].view(np.float64) == logp).all()


@pytest.mark.parametrize("crowd", [5, 40])  # read at once, or step by step (> 33 in a bucket)
def test_a_crowded_bucket_is_walked_to_its_end(crowd):
    from seqprob.ngram._probe import _bucket

    pool = np.random.default_rng(crowd).integers(0, 2**62, 200_000)
    shift = np.uint64(64 - 8)  # 60-127 keys: 2**8 buckets
    home = _bucket(pool, shift)
    keys = np.unique(np.concatenate([pool[home == home[0]][:crowd], pool[home != home[0]][:60]]))
    index = ProbeIndex.build(keys, np.zeros(len(keys)), np.zeros(len(keys)))
    assert index.bits == 8 and index.longest >= crowd
    np.testing.assert_array_equal(index.lookup(keys[::-1]), np.arange(len(keys))[::-1])
    assert (index.lookup(pool[home == home[0]][crowd:crowd + 5]) == -1).all()  # same bucket, absent


_same = same_fields  # the shared check of tests/contract.py


words = st.sampled_from(["the", "cat", "dog", "zebra", "é", "<unk>", "<s>", "mat", "internationalization",
                         "internationalizatiom", "ab\x01c", "12345678", "123456789"])
gaps = st.sampled_from([" ", "  ", "\t", " \r", "\u00a0", "\x0b", "\u3000"])
lines = st.lists(st.tuples(st.lists(words, max_size=6), gaps), max_size=10).map(
    lambda ls: [g.join(ws) for ws, g in ls])


@given(text=lines, eos=st.booleans(), block=st.sampled_from([1, 7, 64, 1 << 20]), crlf=st.booleans(),
       ends=st.booleans(), gz=st.booleans())
@settings(max_examples=examples(40), deadline=None)
def test_corpus_files_score_block_by_block_like_line_by_line(tmp_path_factory, text, eos, block, crlf, ends, gz):
    text = text + ["the cat", "  "]
    body = ("\r\n" if crlf else "\n").join(text) + ("\n" if ends else "")
    path = tmp_path_factory.mktemp("c") / ("t.txt.gz" if gz else "t.txt")
    (gzip.open if gz else open)(path, "wb").write(body.encode("utf-8"))
    model = KneserNey(order=3).fit(TRAIN)
    saved, _query.BLOCK_BYTES = _query.BLOCK_BYTES, block
    try:
        fast = sp.evaluate(model, path, eos=eos)
    finally:
        _query.BLOCK_BYTES = saved
    slow = sp.evaluate(model, list(read_lines(path)), tokenizer=sp.WhitespaceTokenizer(model.vocab), eos=eos)
    _same(fast, slow)
    _same(sp.evaluate(model, iter(text + ["a\nb"]), eos=eos),
          sp.evaluate(model, text + ["a\nb"], tokenizer=sp.WhitespaceTokenizer(model.vocab), eos=eos))


@given(lines=st.lists(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12), max_size=8))
@settings(max_examples=examples(40), deadline=None)
def test_blocks_of_any_text_are_split_like_str_split(tmp_path_factory, lines):
    lines = [line.replace("\n", " ").replace("\r", " ") for line in lines] + ["w"]
    path = tmp_path_factory.mktemp("u") / "t.txt"
    path.write_bytes("\n".join(lines).encode("utf-8"))
    model = KneserNey(order=2).fit(TRAIN + [" ".join(lines)])
    _same(sp.evaluate(model, path), sp.evaluate(model, lines, tokenizer=sp.WhitespaceTokenizer(model.vocab)))


def test_corpus_file_blocks_keep_lines_whole_and_name_a_bad_line(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"a b\nc d e\n" + b"x" * 50 + b"\nlast")
    blocks = list(CorpusFile(path).blocks(4))
    assert b"".join(blocks) == path.read_bytes()
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and blocks[-1] == b"last"
    path.write_bytes(b"a\nb\nc \xff d\ne\n")
    with pytest.raises(InputError) as slow:
        list(read_lines(path))
    for size in (1, 3, 1 << 20):
        with pytest.raises(InputError) as fast:
            list(CorpusFile(path).blocks(size))
        assert str(fast.value) == str(slow.value) and "line 3" in str(fast.value)
    model = KneserNey(order=2).fit(TRAIN)
    with pytest.raises(InputError, match="line 3"):
        sp.evaluate(model, path)


def test_zero_probability_tokens_are_named_from_files(tmp_path):
    model = sp.ngram.MLE(order=2).fit(TRAIN)
    path = tmp_path / "t.txt"
    path.write_text("\nthe cat\n\ncat the dog\n", encoding="utf-8")
    ev = sp.evaluate(model, path)
    assert ev.zero_prob_tokens == sp.evaluate(model, ["the cat", "cat the dog"],
                                              tokenizer=sp.WhitespaceTokenizer(model.vocab)).zero_prob_tokens
    assert ev.zero_prob_tokens[0] == (0, 3, "</s>") and ev.n_skipped_empty == 2


def test_word_index_matches_whole_words_only():
    names = ["<unk>", "<s>", "</s>", "a", "ab", "abcdefgh", "abcdefghi", "é", "a\0b"]
    index = _query.WordIndex(names)
    data = "abcdefghi ab a abcdefgh abcdefgX abcdefghij é b abc".encode()
    _, starts, ends = _query._fields(np.frombuffer(data, dtype=np.uint8))
    assert index.ids(data, starts, ends).tolist() == [6, 4, 3, 5, -1, -1, 7, -1, -1]
    assert index.long_ids.tolist() == [6, 8]  # "a\0b" is not read as the integer of "a b"


def test_score_chain_docstring_model_and_empty_streams():
    t = BackoffTables(3, [np.arange(3)], [np.log([0.5, 0.25, 0.25])], [])
    assert score_chain(t, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).shape == (0,)
    model = KneserNey(order=3).fit(TRAIN)
    assert model.tables_.score_stream(np.array([1]), np.array([0])).tolist() == [pytest.approx(np.nan, nan_ok=True)]


def test_replaced_probabilities_rebuild_the_probe_records():
    tables = KneserNey(order=3).fit(TRAIN).tables_
    stream, seg = np.array([1, 3, 4, 5, 2]), np.zeros(5, dtype=np.int64)
    before = tables.score_stream(stream, seg)
    tables.logbow[1] = tables.logbow[1] - 0.5  # a new array, as recompute_backoffs assigns it
    tables.logp[2] = tables.logp[2] - 0.25
    after = tables.score_stream(stream, seg)
    np.testing.assert_array_equal(after, tables.score_stream_reference(stream, seg))
    assert not np.array_equal(before, after, equal_nan=True)


def test_word_index_finds_every_name_also_in_shared_slots():
    rng = np.random.default_rng(3)
    names = sorted({"".join(rng.choice(list("abcdé"), size=rng.integers(1, 12))) for _ in range(3000)})
    index = _query.WordIndex(names, likeliness=-np.arange(len(names), dtype=float))
    assert (index.direct < 0).any()  # some names share a slot: the ProbeIndex path is used
    data = " ".join(names + ["zz", "abcdéabcdéx"]).encode()
    _, starts, ends = _query._fields(np.frombuffer(data, dtype=np.uint8))
    assert index.ids(data, starts, ends).tolist() == list(range(len(names))) + [-1, -1]


def test_threads_give_the_same_figures(tmp_path):
    from seqprob import _parallel

    path = tmp_path / "t.txt"
    path.write_text("\n".join(["the cat sat", "", "cat the zebra é", "the mat"] * 40), encoding="utf-8")
    model = sp.ngram.MLE(order=2).fit(TRAIN)  # zero-probability tokens in many blocks
    saved_threads, saved_block = _parallel._state["threads"], _query.BLOCK_BYTES
    try:
        _query.BLOCK_BYTES = 64
        figures = []
        for threads in (1, 3):
            _parallel.set_num_threads(threads)
            figures.append(sp.evaluate(model, path).to_dict())
    finally:
        _parallel.set_num_threads(saved_threads)
        _query.BLOCK_BYTES = saved_block
    assert figures[0] == figures[1] and len(figures[0]["zero_prob_tokens"]) == 20
    slow = sp.evaluate(model, list(read_lines(path)), tokenizer=sp.WhitespaceTokenizer(model.vocab))
    assert figures[0]["zero_prob_tokens"] == slow.zero_prob_tokens


@given(tables=back_off_tables(), data=st.data())
@settings(max_examples=examples(40), deadline=None)
def test_a_history_mask_scores_like_the_offsets(tables, data):
    """score_chain of the bool mask ``offset >= 1`` (the corpus blocks' form) equals the
    reference of the segments' offsets, bit for bit."""
    V = tables.vocab_size
    lengths = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=6))
    stream = np.array(data.draw(st.lists(st.integers(0, V - 1), min_size=sum(lengths), max_size=sum(lengths))))
    starts = np.cumsum(lengths) - lengths
    has_history = np.ones(len(stream), dtype=bool)
    has_history[starts] = False
    np.testing.assert_array_equal(score_chain(tables, stream, has_history),
                                  tables.score_stream_reference(stream, np.repeat(starts, lengths)))


@given(keys=st.sets(st.integers(0, 2**62), min_size=1, max_size=300), spread=st.integers(-4, 1),
       probes=st.lists(st.integers(0, 2**62), max_size=30))
@settings(max_examples=examples(40), deadline=None)
def test_crowded_buckets_are_walked_to_their_ends(keys, spread, probes):
    """With fewer buckets than keys (spread < 0: several records per bucket), every key is
    still found, and no other."""
    keys = np.array(sorted(keys), dtype=np.int64)
    spread = max(spread, 1 - int(len(keys) - 1).bit_length())  # at least 2 buckets
    index = ProbeIndex.build(keys, -np.arange(len(keys), dtype=np.float64), np.zeros(len(keys)), spread=spread)
    np.testing.assert_array_equal(index.lookup(keys[::-1]), np.arange(len(keys))[::-1])
    queries = np.array(probes, dtype=np.int64)
    known = set(keys.tolist())
    expected = [int(np.searchsorted(keys, q)) if q in known else -1 for q in probes]
    assert index.lookup(queries).tolist() == expected


@given(names=st.lists(st.text("ab\u00e9c", min_size=1, max_size=10), min_size=1, max_size=60, unique=True),
       rank=st.randoms(use_true_random=False), words=st.lists(st.text("ab\u00e9cd", min_size=1, max_size=10),
                                                               max_size=20))
@settings(max_examples=examples(40), deadline=None)
def test_word_index_agrees_with_a_dict_whatever_shares_a_slot(names, rank, words):
    """Ids equal a dict's for names and other words, whichever name of a shared slot is the likeliest."""
    likeliness = np.array([rank.random() for _ in names])
    index = _query.WordIndex(names, likeliness)
    index.shift = np.uint64(64 - 3)  # 8 slots for up to 60 names: shared slots everywhere
    index.direct = index._direct_table(index.packed[index.short.records[:-1, ROW]],
                                       index.short.records[:-1, ROW], likeliness[index.short.records[:-1, ROW]],
                                       len(names))
    text = names + words
    data = " ".join(text).encode()
    _, starts, ends = _query._fields(np.frombuffer(data, dtype=np.uint8))
    lookup = {n: i for i, n in enumerate(names)}
    assert index.ids(data, starts, ends).tolist() == [lookup.get(w, -1) for w in text]
    short = index.short.records[:-1, ROW]
    slot = _bucket(index.packed[short], index.shift)
    for s in np.unique(slot):  # each slot holds a likeliest name (read without probing); ties may go either way
        held = int(index.direct[s] & (2**31 - 1))
        assert held in short[slot == s].tolist()
        assert likeliness[held] == likeliness[short[slot == s]].max()


@given(text=st.lists(st.lists(st.sampled_from(["the", "cat", "dog", "zebra", "mat", "<unk>", "sat"]), max_size=6)
                     .map(" ".join), min_size=1, max_size=8),
       eos=st.booleans(), block=st.sampled_from([1, 16, 1 << 20]))
@settings(max_examples=examples(30), deadline=None)
def test_blocks_with_zero_probabilities_sum_like_line_by_line(tmp_path_factory, text, eos, block):
    """MLE gives probability 0 to unseen events and to <unk>: the block sums (total -inf, the
    OOV-free and the kept sums, the zero tokens) equal the line-by-line figures."""
    text = text + ["the zebra"]  # one non-blank line at least
    path = tmp_path_factory.mktemp("z") / "t.txt"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    model = sp.ngram.MLE(order=2).fit(TRAIN)
    saved, _query.BLOCK_BYTES = _query.BLOCK_BYTES, block
    try:
        fast = sp.evaluate(model, path, eos=eos)
    finally:
        _query.BLOCK_BYTES = saved
    _same(fast, sp.evaluate(model, text, tokenizer=sp.WhitespaceTokenizer(model.vocab), eos=eos))
