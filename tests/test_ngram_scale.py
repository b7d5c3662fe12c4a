"""Bounded-memory n-gram estimation (spilled sorted runs + k-way merge) and the streaming ARPA
writer: bit for bit the in-memory path, on the KenLM fixture corpus and on generated corpora."""
from __future__ import annotations

import errno
import gzip
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqprob.ngram.arpa import write_arpa
from seqprob.ngram.counts import count_ngrams, count_sequences
from seqprob.errors import InputError, MemoryBudgetError, SeqProbFileError
from seqprob.ngram import MLE, KneserNey, ModifiedKneserNey, StupidBackoff, WittenBell, arpa, fit_arpa
from seqprob.ngram import _external
from seqprob.ngram._external import MIN_CHUNK_TOKENS, chunk_plan, min_budget, parse_memory
from seqprob.ngram._stream_mkn import fit_mkn_arpa
from seqprob import _parallel

try:
    from budget import examples  # example budgets that follow the Hypothesis profile
except ImportError:  # a checkout without tests/budget.py
    def examples(n: int) -> int:
        return n

FIX = Path(__file__).parent / "fixtures" / "kenlm"
TRAIN = FIX / "genesis.train.txt"


def _arpa(model, path) -> bytes:
    return write_arpa(model, path).read_bytes()


def _cli_main():
    """The ``seqprob`` console entry point (seqprob.app.cli, or seqprob.app.cli once it moved)."""
    import importlib

    try:
        return importlib.import_module("seqprob.app.cli").main
    except ModuleNotFoundError:
        return importlib.import_module("seqprob.app.cli").main


def count_ngrams_in_memory(chunks, order):
    return count_ngrams(iter(chunks), order, 12, 1, 2)


def _tiny_budget(order: int) -> int:
    """The smallest accepted budget: one chunk of MIN_CHUNK_TOKENS tokens."""
    return min_budget(order)


@pytest.fixture(scope="module")
def train():
    return TRAIN.read_text(encoding="utf-8").splitlines()


@pytest.fixture
def runs_seen(monkeypatch):
    """Record how many sorted runs each bounded fit spilled (the test must force several)."""
    seen = []
    merge = _external.merge_runs

    def spy(runs, *args):
        seen.append(len(runs))
        return merge(runs, *args)
    monkeypatch.setattr(_external, "merge_runs", spy)
    return seen


# --------------------------------------------------------------------------- KenLM fixtures


@pytest.mark.parametrize("order,memory", [(2, "600K"), (3, "1200K"), (4, "4M")])
def test_bounded_fit_writes_the_same_arpa_as_in_memory(order, memory, train, tmp_path, runs_seen):
    ours = ModifiedKneserNey(order=order).fit(train, memory=memory, temp_dir=tmp_path)
    ref = ModifiedKneserNey(order=order).fit(train)
    assert runs_seen[-1] >= 4  # several spills were merged
    assert _arpa(ours, tmp_path / "b.arpa") == _arpa(ref, tmp_path / "a.arpa")
    assert ours.discounts_ == ref.discounts_
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.arpa", "b.arpa"]  # spill files gone


def test_a_budget_that_holds_the_corpus_spills_one_run(train, tmp_path, runs_seen):
    ref = _arpa(ModifiedKneserNey(order=3).fit(train), tmp_path / "a.arpa")
    assert _arpa(ModifiedKneserNey(order=3).fit(train, memory="1G"), tmp_path / "b.arpa") == ref
    fit_arpa(train, tmp_path / "c.arpa", ModifiedKneserNey(order=3), memory="1G")
    assert (tmp_path / "c.arpa").read_bytes() == ref
    assert runs_seen == [1, 1]


def test_bounded_fit_reads_a_gz_file_and_min_count(train, tmp_path, runs_seen):
    gz = tmp_path / "train.txt.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write("\n".join(train) + "\n")
    ours = ModifiedKneserNey(order=3, min_count=2).fit(gz, memory="600K", temp_dir=tmp_path)
    ref = ModifiedKneserNey(order=3, min_count=2).fit(train)
    assert runs_seen[-1] >= 4
    assert ours.vocab == ref.vocab
    assert _arpa(ours, tmp_path / "b.arpa") == _arpa(ref, tmp_path / "a.arpa")


def test_arpa_written_in_small_blocks_is_the_same_file(train, tmp_path, monkeypatch):
    for model in (ModifiedKneserNey(order=3).fit(train), WittenBell(order=2).fit(train[:200]),
                  MLE(order=2).fit(train[:50])):  # MLE: probability-0 entries written as -99
        expected = _arpa(model, tmp_path / "a.arpa")
        with monkeypatch.context() as patch:
            patch.setattr(arpa, "BLOCK_BYTES", 20_000)  # dozens of blocks per section
            assert _arpa(model, tmp_path / "b.arpa") == expected


def test_cli_fit_with_budget_is_byte_identical(tmp_path, monkeypatch):
    import io
    import sys

    main = _cli_main()
    assert main(["ngram", "fit", str(TRAIN), "-o", str(tmp_path / "a.arpa"), "--order", "3"]) == 0
    assert main(["ngram", "fit", str(TRAIN), "-o", str(tmp_path / "b.arpa"), "--order", "3",
                 "-S", "800K", "-T", str(tmp_path)]) == 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TRAIN.read_bytes())))
    assert main(["ngram", "fit", "-", "-o", str(tmp_path / "c.arpa"), "--order", "3", "-S", "800K",
                 "-T", str(tmp_path), "--smoothing", "wb"]) == 0  # stdin; other smoothings too
    assert main(["ngram", "fit", str(TRAIN), "-o", str(tmp_path / "d.arpa"), "--order", "3",
                 "--smoothing", "wb"]) == 0
    assert (tmp_path / "a.arpa").read_bytes() == (tmp_path / "b.arpa").read_bytes()
    assert (tmp_path / "c.arpa").read_bytes() == (tmp_path / "d.arpa").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.arpa", "b.arpa", "c.arpa", "d.arpa"]


@pytest.mark.parametrize("order,quirk", [(1, False), (2, True), (3, False), (4, True)])
def test_text_to_arpa_without_the_model_is_byte_identical(order, quirk, train, tmp_path, runs_seen):
    ref = _arpa(ModifiedKneserNey(order=order, kenlm_quirk=quirk).fit(train), tmp_path / "a.arpa")
    info = fit_arpa(train, tmp_path / "b.arpa", ModifiedKneserNey(order=order, kenlm_quirk=quirk),
                    memory="1M", temp_dir=tmp_path)
    assert runs_seen[-1] >= 4
    assert (tmp_path / "b.arpa").read_bytes() == ref
    assert info["sizes"] == ModifiedKneserNey(order=order).fit(train).tables_.sizes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.arpa", "b.arpa"]


@pytest.mark.parametrize("threads", [1, 3])
def test_threads_change_nothing_in_the_file(threads, train, tmp_path, runs_seen, monkeypatch):
    """Chunks counted in a pool thread while the next is read, ARPA blocks formatted on
    several threads: the same bytes as the in-memory path at any thread count."""
    from seqprob import _parallel

    ref = _arpa(ModifiedKneserNey(order=4).fit(train), tmp_path / "a.arpa")
    monkeypatch.setattr(arpa, "BLOCK_BYTES", 20_000)  # several blocks in every section
    _parallel.set_num_threads(threads)
    try:
        fit_arpa(train, tmp_path / "b.arpa", ModifiedKneserNey(order=4), memory="1M", temp_dir=tmp_path)
    finally:
        _parallel.set_num_threads(None)
    assert runs_seen[-1] >= 4
    assert (tmp_path / "b.arpa").read_bytes() == ref
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.arpa", "b.arpa"]


def test_merged_runs_are_deleted_once_their_order_is_merged(tmp_path):
    """After the merge the spill folder holds the merged tables, not the runs as well."""
    rng = np.random.default_rng(3)
    chunks = [(rng.integers(3, 12, size=40), np.full(8, 5)) for _ in range(6)]  # 6 runs
    with _external.SpillDir(tmp_path) as spill:
        counts = _external.count_bounded(iter(chunks), 4, 12, 1, 2, 1 << 16, spill)
        left = sorted(p.name for p in spill.path.iterdir())
        assert left == sorted(f"merged.{w}{m}.bin" for w in ("keys", "counts", "suffix")
                              for m in (2, 3, 4))
        ref = count_ngrams_in_memory(chunks, 4)
        for m in range(2, 5):
            assert np.array_equal(counts.keys[m - 1], ref.keys[m - 1])
            assert np.array_equal(counts.counts[m - 1], ref.counts[m - 1])


def test_text_to_arpa_refuses_pruning(tmp_path):
    model = ModifiedKneserNey(order=2)
    model.prune = (0, 1)  # lmplz --prune: needs the whole tables, so the streamed path refuses it
    with pytest.raises(InputError, match="does not prune"):
        fit_mkn_arpa(model, ["a b", "b a"], tmp_path / "m.arpa", memory="1M", temp_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_text_to_arpa_failure_leaves_nothing(tmp_path):
    out = tmp_path / "m.arpa"
    with pytest.raises(InputError, match="could not estimate"):  # tiny data, no fallback
        fit_arpa(["a b", "b a"], out, ModifiedKneserNey(order=2, discount_fallback=None),
                 memory=_tiny_budget(2), temp_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- generated corpora

_words = st.lists(st.sampled_from("a b c d e f g".split()), min_size=0, max_size=9)
_corpus = st.lists(_words.map(" ".join), min_size=1, max_size=60)


@settings(max_examples=examples(25), deadline=None)
@given(corpus=_corpus, order=st.integers(1, 4))
def test_bounded_counts_equal_in_memory_counts(corpus, order):
    seqs = [[3 + "abcdefg".index(w) for w in line.split()] for line in corpus]
    ref = count_sequences(seqs, order, vocab_size=10)
    with _external.SpillDir() as spill:
        chunks = [(np.array(s, dtype=np.int64), np.array([len(s)])) for s in seqs]  # one run a line
        got = _external.count_bounded(chunks, order, 10, 1, 2, budget=2048, spill=spill)
        for m in range(order):
            np.testing.assert_array_equal(got.keys[m], ref.keys[m])
            np.testing.assert_array_equal(got.counts[m], ref.counts[m])
            if m:
                np.testing.assert_array_equal(got.suffix[m], ref.suffix[m])
        assert (got.n_sentences, got.n_tokens) == (ref.n_sentences, ref.n_tokens)


@settings(max_examples=examples(15), deadline=None)
@given(corpus=_corpus.filter(lambda c: sum(len(x.split()) for x in c) > 0), order=st.integers(1, 3),
       estimator=st.sampled_from([ModifiedKneserNey, KneserNey, WittenBell]))
def test_bounded_fit_at_the_smallest_budget_is_bit_identical(corpus, order, estimator, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bounded")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # discount fallback on tiny corpora: same in both paths
        ref = estimator(order=order).fit(corpus)
        ours = estimator(order=order).fit(corpus, memory=_tiny_budget(order), temp_dir=tmp)
    assert _arpa(ours, tmp / "b.arpa") == _arpa(ref, tmp / "a.arpa")
    if estimator is ModifiedKneserNey:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_arpa(corpus, tmp / "c.arpa", estimator(order=order), memory=_tiny_budget(order), temp_dir=tmp)
        assert (tmp / "c.arpa").read_bytes() == (tmp / "a.arpa").read_bytes()
        (tmp / "c.arpa").unlink()
    assert sorted(p.name for p in tmp.iterdir()) == ["a.arpa", "b.arpa"]


# --------------------------------------------------------------------------- bad input


def test_memory_budget_parsing():
    assert parse_memory("1G") == 1 << 30
    assert parse_memory("512m") == 512 << 20
    assert parse_memory("2KiB") == 2048
    assert parse_memory(1000) == 1000
    for bad in ("lots", "-1G", "0", 0, "1X"):
        with pytest.raises(MemoryBudgetError, match="memory budget"):
            parse_memory(bad)


def test_budget_below_one_chunk_is_refused_before_reading(tmp_path):
    need = _tiny_budget(3)
    with pytest.raises(MemoryBudgetError, match=str(need)) as err:
        ModifiedKneserNey(order=3).fit(iter(["a b"]), memory=need - 1, temp_dir=tmp_path)
    assert err.value.limit == need
    assert chunk_plan(need, 3).chunk_tokens == MIN_CHUNK_TOKENS
    assert list(tmp_path.iterdir()) == []


def test_temp_dir_that_cannot_hold_files(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(SeqProbFileError, match="temp directory"):
        ModifiedKneserNey(order=2).fit(["a b"], memory="1M", temp_dir=not_a_dir)
    with pytest.raises(SeqProbFileError, match="temp directory"):
        ModifiedKneserNey(order=2).fit(["a b"], memory="1M", temp_dir=tmp_path / "missing")


def test_full_disk_while_spilling_is_named_and_cleaned_up(tmp_path, monkeypatch, train):
    calls = {"n": 0}
    save = np.save

    def full_after_a_while(path, arr):
        calls["n"] += 1
        if calls["n"] > 10:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return save(path, arr)
    monkeypatch.setattr(_external.np, "save", full_after_a_while)
    model = ModifiedKneserNey(order=3)
    with pytest.raises(SeqProbFileError, match="No space left"):
        model.fit(train, memory="600K", temp_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # every spill file removed
    assert not hasattr(model, "tables_")


def test_bad_text_midway_removes_spill_files(tmp_path):
    lines = ["a b c"] * 200 + ["a <s> b"]
    with pytest.raises(InputError, match="line 201"):
        ModifiedKneserNey(order=2).fit(lines, memory=_tiny_budget(2), temp_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_temp_dir_needs_a_budget(tmp_path):
    with pytest.raises(InputError, match="temp_dir"):
        ModifiedKneserNey(order=2).fit(["a b"], temp_dir=tmp_path)


def test_cli_bad_budget_leaves_no_output(tmp_path, capsys):
    main = _cli_main()
    out = tmp_path / "m.arpa"
    assert main(["ngram", "fit", str(TRAIN), "-o", str(out), "-S", "1K"]) != 0
    assert "memory budget" in capsys.readouterr().err
    assert not out.exists()


def test_docstring_examples():
    import doctest

    from seqprob.ngram import _stream_mkn

    for module in (_external, _stream_mkn):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# --------------------------------------------------------------------------- fit_arpa


def test_fit_arpa_reads_a_file_named_by_a_str_and_leaves_the_estimator_alone(train, tmp_path):
    ref = _arpa(ModifiedKneserNey(order=3).fit(train), tmp_path / "a.arpa")
    lm = ModifiedKneserNey(order=3)
    info = fit_arpa(str(TRAIN), tmp_path / "b.arpa", lm)  # the corpus rule: a str names a file
    assert (tmp_path / "b.arpa").read_bytes() == ref
    assert not hasattr(lm, "tables_")  # a copy was fitted
    full = ModifiedKneserNey(order=3).fit(train)
    assert info == {"sizes": full.tables_.sizes(), "n_sentences": full.counts_.n_sentences,
                    "n_tokens": full.counts_.n_tokens, "discounts": full.discounts_}
    streamed = fit_arpa(str(TRAIN), tmp_path / "c.arpa", lm, memory="1M", temp_dir=tmp_path)
    assert streamed == info and (tmp_path / "c.arpa").read_bytes() == ref  # one discount choice
    assert fit_arpa(train, tmp_path / "d.arpa")["sizes"] == full.tables_.sizes()  # default: mkn, order 3
    assert (tmp_path / "d.arpa").read_bytes() == ref


@pytest.mark.parametrize("model", [ModifiedKneserNey(order=3, prune=(0, 1)), WittenBell(order=3)],
                         ids=["mkn-prune", "wb"])
def test_fit_arpa_with_a_budget_builds_what_it_cannot_stream(model, train, tmp_path):
    ref = _arpa(type(model)(**model.get_params()).fit(train), tmp_path / "a.arpa")
    fit_arpa(train, tmp_path / "b.arpa", model, memory="1M", temp_dir=tmp_path)
    assert (tmp_path / "b.arpa").read_bytes() == ref
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.arpa", "b.arpa"]


@pytest.mark.parametrize("model, match", [(None, None), ("mkn", "got str"),
                                          (ModifiedKneserNey(order=0), "order"),
                                          (StupidBackoff(order=2), "not a normalized")])
def test_fit_arpa_refuses_before_reading_the_corpus(model, match, tmp_path):
    def corpus():
        raise AssertionError("the corpus was read")
        yield "a b"

    if model is None:
        with pytest.raises(InputError, match="got NoneType"):  # a path that is not one
            fit_arpa(corpus(), None)
    else:
        with pytest.raises(InputError, match=match):
            fit_arpa(corpus(), tmp_path / "m.arpa", model)
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=examples(30), deadline=None)
@given(runs=st.lists(st.lists(st.integers(0, 40), max_size=30).map(sorted), min_size=1, max_size=5))
def test_unique_of_sorted_runs_is_np_unique(runs):
    """The merge's run-aware unique (a stable argsort, numpy's timsort) gives np.unique's
    distinct keys and inverse for any concatenation of sorted runs, duplicates included."""
    keys = np.concatenate([np.array(r, dtype=np.int64) for r in runs])
    uniq, inv = _external._unique_of_sorted_runs(keys)
    ref_uniq, ref_inv = np.unique(keys, return_inverse=True)
    np.testing.assert_array_equal(uniq, ref_uniq)
    np.testing.assert_array_equal(inv, ref_inv.ravel())


@pytest.mark.parametrize("threads", [1, 3])
def test_merge_in_many_rounds_is_the_same_at_any_thread_count(threads, monkeypatch):
    """The k-way merge runs its rounds on the pool (rounds merged ahead, written in order):
    with 16-row blocks, 7 runs and any number of threads, the merged tables are exactly the
    in-memory counts."""
    rng = np.random.default_rng(11)
    chunks = [(rng.integers(3, 12, size=300), np.full(30, 10)) for _ in range(7)]
    rounds, merge_round = [], _external._merge_round
    monkeypatch.setattr(_external, "_merge_round", lambda item: rounds.append(1) or merge_round(item))
    _parallel.set_num_threads(threads)
    try:
        with _external.SpillDir() as spill:
            got = _external.count_bounded(iter(chunks), 4, 12, 1, 2, budget=1 << 14, spill=spill)
            assert len(rounds) > 30  # many rounds, not one per order
            ref = count_ngrams_in_memory(chunks, 4)
            for m in range(2, 5):
                np.testing.assert_array_equal(got.keys[m - 1], ref.keys[m - 1])
                np.testing.assert_array_equal(got.counts[m - 1], ref.counts[m - 1])
                np.testing.assert_array_equal(got.suffix[m - 1], ref.suffix[m - 1])
    finally:
        _parallel.set_num_threads(None)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_chunks_counted_at_once_share_the_plans_chunk(threads):
    """With n threads, n chunks are counted at once, each 1/n of the one-thread chunk (the same
    memory); never smaller than MIN_CHUNK_TOKENS: at the smallest budget one chunk at a time."""
    _parallel.set_num_threads(1)
    try:
        whole = chunk_plan("64M", 5)
        _parallel.set_num_threads(threads)
        plan, tiny = chunk_plan("64M", 5), chunk_plan(min_budget(5), 5)
    finally:
        _parallel.set_num_threads(None)
    assert whole.in_flight == 1 and plan.in_flight == threads
    assert plan.chunk_tokens == whole.chunk_tokens // threads
    assert plan.chunk_chars * threads <= whole.chunk_chars
    assert tiny.in_flight == 1 and tiny.chunk_tokens == MIN_CHUNK_TOKENS
