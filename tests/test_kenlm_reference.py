"""seqprob against KenLM (kpu/kenlm @4cb443e6): lmplz models and query scores of tests/fixtures/kenlm."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from seqprob.ngram.arpa import read_arpa, write_arpa
from seqprob.functional import LN10
from seqprob.ngram import ModifiedKneserNey
from seqprob.scoring import evaluate

FIX = Path(__file__).parent / "fixtures" / "kenlm"
ORDERS = (2, 3, 4)


def _lines(name: str) -> list:
    return (FIX / name).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def train():
    return _lines("genesis.train.txt")


@pytest.fixture(scope="module")
def kenlm_models():
    return {n: read_arpa(FIX / f"genesis.o{n}.arpa.gz") for n in ORDERS}


@pytest.fixture(scope="module")
def mkn_models(train):
    return {n: ModifiedKneserNey(order=n).fit(train) for n in ORDERS}


def _summary(n: int) -> dict:
    out = {}
    for line in _lines(f"exodus.o{n}.summary.txt"):
        key, value = line.rsplit(":", 1)
        out[key.strip()] = float(value)
    return out


@pytest.mark.parametrize("n", ORDERS)
def test_mkn_reproduces_every_ngram_of_lmplz(n, kenlm_models, mkn_models):
    ref, ours = kenlm_models[n].tables_, mkn_models[n].tables_
    assert kenlm_models[n].vocab == mkn_models[n].vocab  # same ids: <unk> <s> </s>, first appearance
    assert ref.sizes() == ours.sizes()
    for m in range(1, n + 1):
        np.testing.assert_array_equal(ref.keys[m - 1], ours.keys[m - 1])  # the same n-gram set
        a, b = ref.logp[m - 1] / LN10, ours.logp[m - 1] / LN10
        np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
        np.testing.assert_allclose(b[np.isfinite(b)], a[np.isfinite(a)], atol=1e-6, rtol=0)
        if m < n:
            np.testing.assert_allclose(ours.logbow[m - 1] / LN10, ref.logbow[m - 1] / LN10, atol=1e-6, rtol=0)


def test_discounts_are_those_lmplz_printed(mkn_models):
    expected = [(0.586863, 1.06291, 1.63827), (0.726084, 1.19616, 1.51556),
                (0.787936, 1.26724, 1.45189), (0.866075, 1.409781, 1.569898)]
    # rows 1-3 are the 3-gram model's; row 4 is the 4-gram model's top order (README table)
    np.testing.assert_allclose(mkn_models[3].discounts_, expected[:3], atol=1e-5)
    np.testing.assert_allclose(mkn_models[4].discounts_[3], expected[3], atol=1e-5)
    np.testing.assert_allclose(mkn_models[4].discounts_[:2], expected[:2], atol=1e-5)


@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("name", ["exodus", "probes"])
def test_read_arpa_sentence_scores_match_kenlm_query(n, name, kenlm_models):
    model = kenlm_models[n]
    lines = _lines("exodus.test.txt" if name == "exodus" else "probes.txt")
    expected = np.loadtxt(FIX / f"{name}.o{n}.sentence_log10.txt")
    v = model.vocab
    seqs = [np.array([v.bos_id, *model.tokenizer.encode(line), v.eos_id]) for line in lines]
    got = np.array([lp.sum() / LN10 for lp in model.token_logprobs_many(seqs)])
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    single = np.array([model.token_logprobs(s).sum() / LN10 for s in seqs[:5]])
    np.testing.assert_allclose(single, got[:5], atol=1e-9)


@pytest.mark.parametrize("n", ORDERS)
def test_fitted_model_scores_match_kenlm_query(n, mkn_models):
    model = mkn_models[n]
    lines = _lines("exodus.test.txt")
    expected = np.loadtxt(FIX / f"exodus.o{n}.sentence_log10.txt")
    v = model.vocab
    seqs = [np.array([v.bos_id, *model.tokenizer.encode(line), v.eos_id]) for line in lines]
    got = np.array([lp.sum() / LN10 for lp in model.token_logprobs_many(seqs)])
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("source", ["arpa", "fitted"])
def test_corpus_perplexities_match_kenlm(n, source, kenlm_models, mkn_models):
    model = kenlm_models[n] if source == "arpa" else mkn_models[n]
    ev = evaluate(model, _lines("exodus.test.txt"), tokenizer=model.tokenizer)
    ref = _summary(n)
    assert ev.n_oov == ref["OOVs"] == 384
    assert ev.n_tokens == ref["Tokens"] == 6606
    assert ev.perplexity == pytest.approx(ref["Perplexity including OOVs"], rel=1e-6)
    assert ev.perplexity_excl_oov == pytest.approx(ref["Perplexity excluding OOVs"], rel=1e-6)


def test_written_arpa_reads_back_as_kenlm_file(tmp_path, mkn_models, kenlm_models):
    path = write_arpa(mkn_models[3], tmp_path / "o3.arpa")
    again = read_arpa(path)
    ref = kenlm_models[3]
    for m in range(1, 4):
        np.testing.assert_array_equal(again.tables_.keys[m - 1], ref.tables_.keys[m - 1])
        a, b = again.tables_.logp[m - 1], ref.tables_.logp[m - 1]
        fin = np.isfinite(a)
        np.testing.assert_allclose(a[fin] / LN10, b[fin] / LN10, atol=1e-5)
    text = path.read_text().splitlines()
    assert text[:4] == ["\\data\\", "ngram 1=2520", "ngram 2=15036", "ngram 3=28619"]
    assert text[-1] == "\\end\\"


def test_kenlm_rows_are_distributions(kenlm_models):
    from seqprob.functional import logsumexp

    model = kenlm_models[3]
    tok = model.tokenizer
    ids = np.array([model.vocab.bos_id, *tok.encode("and god said unto moses , zzz")])
    rows = model.logprobs(ids)
    np.testing.assert_allclose(logsumexp(rows), 0.0, atol=1e-5)  # ARPA values carry ~7 digits


# kpu/kenlm issue 405: lmplz --text test.txt --arpa test.lm -o 2 on this corpus prints these.
ISSUE_405_CORPUS = ["I went to", "I go to", "You went to", "You go to", "Joe went to", "Joe go to",
                    "Anna went ski", "Anna went ski"]
ISSUE_405_UNIGRAMS = {"<unk>": (-1.30103, 0), "<s>": (None, -0.059768215), "</s>": (-1.1249387, 0),
                      "I": (-1.0579919, -0.5228788), "went": (-0.6726411, -0.022929981),
                      "to": (-1.1249387, -0.30103), "go": (-0.82390875, 0),
                      "You": (-1.0579919, -0.5228788), "Joe": (-1.0579919, -0.5228788),
                      "Anna": (-1.0579919, -0.059768215), "ski": (-1.0579919, -0.059768215)}
ISSUE_405_BIGRAMS = {("to", "</s>"): -0.26962152, ("ski", "</s>"): -0.7123581, ("<s>", "I"): -0.9649993,
                     ("I", "went"): -0.383262, ("You", "went"): -0.383262, ("Joe", "went"): -0.383262,
                     ("Anna", "went"): -0.50341624}


def test_kenlm_quirk_reproduces_issue_405():
    model = ModifiedKneserNey(order=2, kenlm_quirk=True).fit(ISSUE_405_CORPUS)
    assert model.count_of_counts_[0] == [4, 3, 1, 1]  # "KenLM prints s.n[1] == 4 and s.n[2] == 3"
    v, t = model.vocab, model.tables_
    for word, (p, bow) in ISSUE_405_UNIGRAMS.items():
        if p is not None:
            assert t.logp[0][v.id(word)] / LN10 == pytest.approx(p, abs=1e-6)
        assert t.logbow[0][v.id(word)] / LN10 == pytest.approx(bow, abs=1e-6)
    for (h, w), p in ISSUE_405_BIGRAMS.items():
        row = t.index(2, [[v.id(h), v.id(w)]])[0]
        assert t.logp[1][row] / LN10 == pytest.approx(p, abs=1e-6)


def test_without_quirk_the_statistics_are_the_true_adjusted_counts():
    model = ModifiedKneserNey(order=2).fit(ISSUE_405_CORPUS)
    assert model.count_of_counts_[0] == [5, 2, 1, 1]  # ski has adjusted count 1 (only "went ski")
    v = model.vocab
    assert model.adjusted_counts_[0][v.id("ski")] == 1


def test_kenlm_quirk_issue_427_statistics():
    corpus = ["r o t", "o a r", "o a t"]
    with pytest.warns(UserWarning, match="fallback"):
        quirky = ModifiedKneserNey(order=2, kenlm_quirk=True).fit(corpus)
    with pytest.warns(UserWarning, match="fallback"):
        exact = ModifiedKneserNey(order=2).fit(corpus)
    assert quirky.count_of_counts_[0][:2] == [0, 5]  # what lmplz computes (kpu/kenlm issue 427)
    assert exact.count_of_counts_[0][:2] == [1, 4]   # what it should be


def test_quirk_changes_nothing_on_the_fixture(train, mkn_models):
    quirky = ModifiedKneserNey(order=3, kenlm_quirk=True).fit(train)
    for m in range(3):
        np.testing.assert_array_equal(quirky.tables_.logp[m], mkn_models[3].tables_.logp[m])
    assert math.isclose(quirky.discounts_[1][0], mkn_models[3].discounts_[1][0])
