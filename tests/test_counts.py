"""Vectorized n-gram counting: exact counts, continuation counts, invariance to chunking."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, strategies as st

from seqprob.ngram.counts import count_ngrams, count_sequences, padded_stream
from seqprob.errors import InputError

BOS, EOS = 1, 2

corpora = st.lists(st.lists(st.integers(3, 7), max_size=7), min_size=1, max_size=10)


def brute_force(sentences, order):
    """Counter per order of every window of <s> w.. </s> not ending on the <s>."""
    out = {m: Counter() for m in range(1, order + 1)}
    for s in sentences:
        padded = [BOS, *s, EOS]
        for end in range(1, len(padded)):
            for m in range(1, order + 1):
                if end - m + 1 >= 0:
                    out[m][tuple(padded[end - m + 1: end + 1])] += 1
    return out


def as_dict(counts, m):
    words = counts.words(m)
    return {tuple(w): int(c) for w, c in zip(words.tolist(), counts.counts[m - 1].tolist()) if c > 0}


def test_padded_stream_layout():
    stream, start = padded_stream(np.array([5, 6, 7]), np.array([2, 0, 1]), BOS, EOS)
    assert stream.tolist() == [1, 5, 6, 2, 1, 2, 1, 7, 2]
    assert start.tolist() == [0, 0, 0, 0, 4, 4, 6, 6, 6]


def test_small_example():
    c = count_sequences([[3, 4], [3]], order=3, vocab_size=5)
    assert c.count([3]) == 2 and c.count([1]) == 0  # <s> is context, never counted as predicted
    assert c.count([1, 3]) == 2 and c.count([3, 2]) == 1 and c.count([1, 3, 4]) == 1
    assert c.count([1, 3, 2]) == 1 and c.count([4, 3]) == 0
    assert c.n_sentences == 2 and c.n_tokens == 5
    assert c.sizes() == [5, 4, 3]


@given(corpora, st.integers(1, 5))
def test_counts_equal_brute_force(sentences, order):
    c = count_sequences(sentences, order=order, vocab_size=8)
    expected = brute_force(sentences, order)
    for m in range(1, order + 1):
        assert as_dict(c, m) == dict(expected[m])
        if m > 1:
            assert np.all(np.diff(c.keys[m - 1]) > 0)  # sorted, unique


@given(corpora, st.integers(2, 4))
def test_continuation_counts_are_distinct_left_words(sentences, order):
    c = count_sequences(sentences, order=order, vocab_size=8)
    higher = brute_force(sentences, order)
    for m in range(1, order):
        left = Counter(g[1:] for g in higher[m + 1])
        cont = c.continuation(m)
        for g, row in zip(map(tuple, c.words(m).tolist()), range(len(cont))):
            assert cont[row] == left.get(g, 0)


@given(corpora, st.integers(1, 4), st.integers(1, 30), st.integers(2, 4))
def test_counts_invariant_to_chunking(sentences, order, chunk, merge_every):
    whole = count_sequences(sentences, order=order, vocab_size=8, chunk_tokens=1 << 30)
    chunks = []
    for i in range(0, len(sentences), max(1, chunk % len(sentences) or 1)):
        part = sentences[i: i + max(1, chunk % len(sentences) or 1)]
        flat = np.array([w for s in part for w in s], dtype=np.int64)
        chunks.append((flat, np.array([len(s) for s in part])))
    merged = count_ngrams(chunks, order, vocab_size=8, merge_every=merge_every)
    for m in range(1, order + 1):
        np.testing.assert_array_equal(whole.keys[m - 1], merged.keys[m - 1])
        np.testing.assert_array_equal(whole.counts[m - 1], merged.counts[m - 1])
        if m > 1:
            np.testing.assert_array_equal(whole.suffix[m - 1], merged.suffix[m - 1])
    assert (whole.n_sentences, whole.n_tokens) == (merged.n_sentences, merged.n_tokens)


def test_chunks_are_read_lazily_and_merged_in_bounded_batches(monkeypatch):
    """Never more than ``merge_every`` chunk tables wait to be merged; chunks are pulled one at
    a time from a generator (a corpus larger than memory is never held whole)."""
    import seqprob.ngram.counts as counts_mod

    sizes, merges_before_pull = [], []
    real_merge = counts_mod.merge_counts

    def spy(parts, vocab_size):
        sizes.append(len(parts))
        return real_merge(parts, vocab_size)

    def chunks():
        for i in range(20):
            merges_before_pull.append(len(sizes))
            yield np.array([3 + i % 4, 4]), np.array([2])

    monkeypatch.setattr(counts_mod, "merge_counts", spy)
    c = count_ngrams(chunks(), 2, vocab_size=8, merge_every=3)
    assert max(sizes) <= 3 and len(sizes) >= 9
    assert merges_before_pull[-1] >= 9  # merged while reading, not after reading everything
    assert c.n_sentences == 20 and c.count([4, 2]) == 20


def test_growing_vocabulary_between_chunks():
    chunks = [(np.array([3, 4]), np.array([2])), (np.array([5, 3, 6]), np.array([3]))]
    c = count_ngrams(chunks, 2, vocab_size=lambda: 7)
    assert c.vocab_size == 7 and c.count([6, 2]) == 1 and c.count([4, 2]) == 1 and c.count([1, 5]) == 1


def test_index_of_unseen_is_minus_one():
    c = count_sequences([[3, 4]], order=2, vocab_size=5)
    assert c.index(2, [[3, 4], [4, 3]]).tolist()[1] == -1
    assert c.count([9, 9, 9]) == 0


@pytest.mark.parametrize("order", [0, 11, -1, 2.5, "3", True])
def test_bad_order(order):
    with pytest.raises(InputError, match="order"):
        count_sequences([[3]], order=order, vocab_size=5)


def test_empty_corpus():
    with pytest.raises(InputError, match="empty corpus"):
        count_sequences([], order=2, vocab_size=5)
