"""Dask: fit_dask and evaluate_dask on a partitioned corpus give the single-machine results."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import dask.bag as db
import pytest
from dask.distributed import Client, LocalCluster

from seqprob.arpa import write_arpa
from seqprob.distributed import evaluate_dask
from seqprob.errors import PartitionError
from seqprob.ngram import MLE, ModifiedKneserNey, WittenBell
from seqprob.scoring import evaluate

FIX = Path(__file__).parent / "fixtures" / "kenlm"


@pytest.fixture(scope="module")
def train():
    return (FIX / "genesis.train.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
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

    import seqprob.distributed

    result = doctest.testmod(seqprob.distributed, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
