"""Dask: fit_dask and evaluate_dask on a partitioned corpus give the single-machine results."""
from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

import dask
import dask.bag as db
import numpy as np
import pytest
from dask.distributed import Client, LocalCluster
from hypothesis import HealthCheck, given, settings, strategies as st

from budget import examples
from seqprob.ngram.arpa import write_arpa
from seqprob.scoring import evaluate_dask
from seqprob.errors import InputError, PartitionError
from seqprob.ngram import MLE, DiscountFallbackWarning, ModifiedKneserNey, WittenBell
from seqprob.ngram._dask_mkn import bucket_of
from seqprob.scoring import evaluate

FIX = Path(__file__).parent / "fixtures" / "kenlm"


@pytest.fixture(scope="module")
def train():
    return (FIX / "genesis.train.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("dask")  # dask's scratch space and locks, not in /tmp
    with warnings.catch_warnings(), dask.config.set({"temporary-directory": str(scratch)}):
        warnings.simplefilter("ignore")  # dask's own deprecation chatter
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                          dashboard_address=None) as cluster, Client(cluster) as c:
            yield c


def _files(lines, tmp_path, n: int) -> list:
    size = -(-len(lines) // n)
    paths = []
    for i in range(n):
        p = tmp_path / f"part{i}.txt"
        p.write_text("".join(x + "\n" for x in lines[i * size:(i + 1) * size]), encoding="utf-8")
        paths.append(p)
    return paths


def test_fit_dask_on_a_cluster_writes_the_same_arpa(train, tmp_path, client):
    ref = write_arpa(ModifiedKneserNey(order=3).fit(train), tmp_path / "a.arpa").read_bytes()
    files = _files(train, tmp_path, 5)
    ours = ModifiedKneserNey(order=3).fit_dask(files, split_every=2)  # a 3-level merge tree
    assert write_arpa(ours, tmp_path / "b.arpa").read_bytes() == ref
    bag = db.from_sequence(train, npartitions=4)
    assert write_arpa(ModifiedKneserNey(order=3).fit_dask(bag), tmp_path / "c.arpa").read_bytes() == ref


def test_fit_dask_min_count_and_other_estimators(train, tmp_path, client):
    bag = db.from_sequence(train[:400] + [""] * 3, npartitions=3)
    for model in (ModifiedKneserNey(order=2, min_count=2), WittenBell(order=3)):
        ref = type(model)(**model.get_params()).fit(train[:400] + [""] * 3)
        ours = model.fit_dask(bag)
        assert ours.vocab == ref.vocab
        assert write_arpa(ours, tmp_path / "b.arpa").read_bytes() == \
            write_arpa(ref, tmp_path / "a.arpa").read_bytes()


def test_a_failing_partition_is_named(train, tmp_path, client):
    files = _files(train[:100], tmp_path, 2)
    with pytest.raises(PartitionError, match="partition 2 failed.*missing") as err:
        ModifiedKneserNey(order=2).fit_dask(files + [tmp_path / "missing.txt"])
    assert err.value.partition == 2
    bad = db.from_sequence(["a b", "c d", "e <s> f"], npartitions=3)
    with pytest.raises(PartitionError, match="partition 2 failed.*reserved symbol '<s>'"):
        ModifiedKneserNey(order=2).fit_dask(bad)


def test_evaluate_dask_sums_partitions(train, client):
    test = (FIX / "exodus.test.txt").read_text(encoding="utf-8").splitlines()
    for model, lines in ((ModifiedKneserNey(order=3).fit(train), test),
                         (MLE(order=2).fit(train), test[:40])):  # MLE: zero-probability tokens
        ref = evaluate(model, lines)
        got = evaluate_dask(model, db.from_sequence(lines + [""], npartitions=3))
        for name, value in ref.to_dict().items():
            if name == "n_skipped_empty":
                assert got.n_skipped_empty == value + 1
            elif isinstance(value, float):
                assert math.isclose(getattr(got, name), value, rel_tol=1e-12), name
            else:
                assert getattr(got, name) == value, name


def test_fit_dask_mle_with_a_binary_merge_tree(train, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = MLE(order=2).fit(train[:300])
    bag = db.from_sequence(train[:300], npartitions=2)
    ours = MLE(order=2).fit_dask(bag, split_every=2)
    assert write_arpa(ours, tmp_path / "b.arpa").read_bytes() == write_arpa(ref, tmp_path / "a.arpa").read_bytes()


def test_docstring_examples(client):
    import doctest

    import seqprob.scoring.corpus

    result = doctest.testmod(seqprob.scoring.corpus, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# ----------------------------------------------------------------- map/reduce estimation (MKN)


def _bag_of_parts(parts: list):
    """A bag whose partitions are exactly ``parts`` (lists of lines; empty ones allowed)."""
    return db.from_delayed([dask.delayed(list)(p) for p in parts])


def _same_model(ref, got) -> None:
    assert got.vocab == ref.vocab
    assert got.discounts_ == ref.discounts_ and got.count_of_counts_ == ref.count_of_counts_
    for name in ("keys", "counts"):
        for x, y in zip(getattr(ref.counts_, name), getattr(got.counts_, name)):
            assert np.array_equal(x, y), name
    for x, y in zip(ref.counts_.suffix[1:], got.counts_.suffix[1:]):
        assert np.array_equal(x, y)
    for x, y in zip(ref.adjusted_counts_, got.adjusted_counts_):
        assert np.array_equal(x, y)
    assert (got.counts_.n_sentences, got.counts_.n_tokens) == (ref.counts_.n_sentences, ref.counts_.n_tokens)
    for x, y in zip(ref.tables_.logp + ref.tables_.logbow, got.tables_.logp + got.tables_.logbow):
        assert x.tobytes() == y.tobytes()  # bit for bit, -inf included


_sentences = st.lists(st.lists(st.sampled_from("abcdefg"), max_size=7).map(" ".join),
                      min_size=1, max_size=30)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=_sentences, cuts=st.lists(st.integers(0, 30), max_size=4),
       order=st.integers(2, 4), buckets=st.integers(1, 4))
def test_map_reduce_mkn_is_bit_for_bit_the_single_machine_fit(lines, cuts, order, buckets):
    bounds = [0] + sorted(min(c, len(lines)) for c in cuts) + [len(lines)]
    parts = [lines[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]  # some may be empty
    with warnings.catch_warnings(), dask.config.set(scheduler="synchronous"):
        warnings.simplefilter("ignore", DiscountFallbackWarning)
        try:
            ref = ModifiedKneserNey(order=order).fit(lines)
        except InputError:  # no words at all: the Dask fit refuses it too
            with pytest.raises(InputError):
                ModifiedKneserNey(order=order).fit_dask(_bag_of_parts(parts), buckets=buckets)
            return
        got = ModifiedKneserNey(order=order).fit_dask(_bag_of_parts(parts), buckets=buckets)
    _same_model(ref, got)
    with tempfile.TemporaryDirectory() as tmp:
        a = write_arpa(ref, Path(tmp) / "a.arpa").read_bytes()
        assert write_arpa(got, Path(tmp) / "b.arpa").read_bytes() == a


def test_map_reduce_on_the_cluster_order_5_with_many_buckets(train, tmp_path, client):
    ref = ModifiedKneserNey(order=5).fit(train)
    got = ModifiedKneserNey(order=5).fit_dask(_files(train, tmp_path, 3), buckets=7)
    _same_model(ref, got)
    assert write_arpa(got, tmp_path / "b.arpa").read_bytes() == \
        write_arpa(ref, tmp_path / "a.arpa").read_bytes()


def test_the_driver_neither_merges_nor_adjusts_all_ngrams(train, monkeypatch):
    import seqprob.ngram._dask
    import seqprob.ngram.kneser_ney

    def forbidden(*args, **kwargs):
        raise AssertionError("the map/reduce path must not merge or adjust whole tables")

    ref = ModifiedKneserNey(order=3).fit(train[:300])
    for module, name in ((seqprob.ngram.kneser_ney, "adjusted_counts"),  # (a partition's own
                         (seqprob.ngram._dask, "merge_counts")):  # chunks are merged where it is)
        monkeypatch.setattr(module, name, forbidden)
    with dask.config.set(scheduler="synchronous"):
        got = ModifiedKneserNey(order=3).fit_dask(db.from_sequence(train[:300], npartitions=3))
    _same_model(ref, got)


def test_prune_and_kenlm_quirk_are_estimated_on_the_driver_and_still_equal(train, tmp_path):
    lines = train[:300]
    with dask.config.set(scheduler="synchronous"):
        for params in ({"prune": [0, 1]}, {"kenlm_quirk": True}, {"order": 1}):
            params = {"order": 2, **params}
            ref = ModifiedKneserNey(**params).fit(lines)
            got = ModifiedKneserNey(**params).fit_dask(db.from_sequence(lines, npartitions=2))
            assert write_arpa(got, tmp_path / "b.arpa").read_bytes() == \
                write_arpa(ref, tmp_path / "a.arpa").read_bytes(), params


def test_map_reduce_with_a_given_tokenizer_and_min_count(train, tmp_path):
    lines = train[:300]
    with dask.config.set(scheduler="synchronous"):
        ref = ModifiedKneserNey(order=3, min_count=2).fit(lines)
        got = ModifiedKneserNey(order=3, min_count=2).fit_dask(db.from_sequence(lines, npartitions=3))
        _same_model(ref, got)
        ref2 = ModifiedKneserNey(order=3).fit(lines, tokenizer=ref.tokenizer)
        got2 = ModifiedKneserNey(order=3).fit_dask(db.from_sequence(lines, npartitions=2),
                                                   tokenizer=ref.tokenizer, buckets=2)
        _same_model(ref2, got2)


def test_fit_dask_bad_settings_and_corpora_are_named():
    bag = db.from_sequence(["a b"], npartitions=1)
    with pytest.raises(InputError, match="buckets"):
        ModifiedKneserNey(order=2).fit_dask(bag, buckets=0)
    with pytest.raises(InputError, match="split_every"):
        ModifiedKneserNey(order=2).fit_dask(bag, split_every=1)
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(InputError, match="empty corpus"):
            ModifiedKneserNey(order=3).fit_dask(_bag_of_parts([[], []]))
        with pytest.raises(InputError, match="no words"):
            ModifiedKneserNey(order=3).fit_dask(_bag_of_parts([[""], ["", ""]]))
        m = ModifiedKneserNey(order=2)
        with pytest.raises(PartitionError, match="partition 1 failed.*reserved symbol"):
            m.fit_dask(_bag_of_parts([["a b"], ["</s> a"]]), buckets=2)
        assert not hasattr(m, "tables_")  # a failed fit leaves the model unfitted


@given(st.lists(st.lists(st.integers(0, 50), min_size=2, max_size=2), min_size=1, max_size=20),
       st.integers(1, 9))
def test_bucket_of_puts_equal_rows_together(rows, n):
    words = np.array(rows + rows[::-1], dtype=np.int64)
    b = bucket_of(words, n)
    assert ((0 <= b) & (b < n)).all()
    assert np.array_equal(b[: len(rows)], b[len(rows):][::-1])


def test_every_partition_is_read_and_counted_once_per_pass(train, monkeypatch):
    import seqprob.ngram._dask_mkn as mr

    calls = []
    original = mr._count_split
    monkeypatch.setattr(mr, "_count_split", lambda part, *a: calls.append(1) or original(part, *a))
    with dask.config.set(scheduler="synchronous"):
        bag = db.from_sequence(train[:200], npartitions=3)
        ModifiedKneserNey(order=3).fit_dask(bag, buckets=2)
    assert len(calls) == bag.npartitions  # persisted: the statistics and the context step do not recount
