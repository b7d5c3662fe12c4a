"""n-gram estimators: the LanguageModel contract, the properties of each estimator, bad input."""
from __future__ import annotations

import gzip
import io
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from budget import examples
import contract
from seqprob.errors import InputError, NotFittedError, SeqProbError, SeqProbFileError
from seqprob.functional import logsumexp
from seqprob.ngram import (MLE, AbsoluteDiscount, AddK, DiscountFallbackWarning, KneserNey, Laplace,
                           ModifiedKneserNey, StupidBackoff, WittenBell)
from seqprob.tokenizers import CharTokenizer, WhitespaceTokenizer

SMOOTHED = [ModifiedKneserNey, KneserNey, WittenBell, AbsoluteDiscount, AddK, Laplace]
NORMALIZED = SMOOTHED + [MLE]
ALL = NORMALIZED + [StupidBackoff]

CORPUS = ["the cat sat on the mat", "the dog sat", "a cat saw the dog", "", "the mat"] * 3

sentences = st.lists(st.lists(st.sampled_from("abcd"), max_size=6).map(" ".join), min_size=1, max_size=8)
corpora = sentences.filter(lambda lines: any(line for line in lines))


@pytest.fixture(autouse=True)
def _quiet_fallback():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountFallbackWarning)
        yield


def fit(cls, lines, order, **kw):
    return cls(order=order, **kw).fit(lines)


def all_contexts(model, max_len):
    """Every prefix <s> x_1 .. x_k (k < max_len) over the predictable tokens."""
    v = model.vocab
    toks = [i for i in contract.predictable_ids(model) if i != v.eos_id]
    for k in range(max_len):
        for s in itertools.product(toks, repeat=k):
            yield np.array([v.bos_id, *s])


# ----------------------------------------------------------------------------- contract


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_contract(cls, order, rng):
    model = fit(cls, CORPUS, order)
    ids = contract.random_prefix(model, rng, 9)
    if model.normalized:
        contract.check_rows_sum_to_one(model, ids)
    contract.check_token_logprobs_gather(model, ids)
    contract.check_batched_equals_unbatched(model, [ids, contract.random_prefix(model, rng, 9)])
    contract.check_causal(model, ids, 5, 3)
    contract.check_incremental(model, ids)
    many = model.token_logprobs_many([ids, ids[:4]])
    np.testing.assert_allclose(many[0], model.token_logprobs(ids), atol=1e-12)
    np.testing.assert_allclose(many[1], model.token_logprobs(ids[:4]), atol=1e-12)


@pytest.mark.parametrize("cls", ALL)
def test_bos_is_never_predicted(cls):
    model = fit(cls, CORPUS, 3)
    v = model.vocab
    rows = model.logprobs(np.array([v.bos_id, v.id("the"), v.id("cat")]))
    assert np.isneginf(rows[:, v.bos_id]).all()


@pytest.mark.parametrize("cls", ALL)
def test_not_fitted(cls):
    with pytest.raises(NotFittedError):
        cls(order=2).logprobs([1, 3])
    with pytest.raises(NotFittedError):
        cls(order=2).tokenizer  # noqa: B018


# ----------------------------------------------------------------------------- properties


@pytest.mark.parametrize("cls", NORMALIZED)
@given(lines=corpora, order=st.integers(1, 4), data=st.data())
@settings(max_examples=examples(15))
def test_rows_sum_to_one_in_seen_and_unseen_contexts(cls, lines, order, data):
    model = fit(cls, lines, order)
    V = len(model.vocab)
    preds = contract.predictable_ids(model)
    ctx = data.draw(st.lists(st.sampled_from(preds), max_size=5))  # mostly unseen contexts
    ids = np.array([model.vocab.bos_id, *ctx])
    rows = model.logprobs(ids)
    assert rows.shape == (len(ids), V) and not np.isnan(rows).any()
    np.testing.assert_allclose(logsumexp(rows), 0.0, atol=1e-9)
    for line in lines[:3]:  # seen contexts
        seen = np.array([model.vocab.bos_id, *model.tokenizer.encode(line)])
        np.testing.assert_allclose(logsumexp(model.logprobs(seen)), 0.0, atol=1e-9)


@pytest.mark.parametrize("cls", SMOOTHED)
@given(lines=corpora, order=st.integers(1, 4), data=st.data())
@settings(max_examples=examples(15))
def test_every_in_vocab_token_has_finite_logprob(cls, lines, order, data):
    model = fit(cls, lines, order)
    preds = contract.predictable_ids(model)
    ctx = data.draw(st.lists(st.sampled_from(preds), min_size=1, max_size=6))
    rows = model.logprobs(np.array([model.vocab.bos_id, *ctx]))
    assert np.isfinite(rows[:, preds]).all()


@given(lines=corpora, order=st.integers(1, 4))
@settings(max_examples=examples(25))
def test_mle_equals_count_ratios(lines, order):
    model = fit(MLE, lines, order)
    c, v = model.counts_, model.vocab
    for line in lines:
        ids = [v.bos_id, *model.tokenizer.encode(line), v.eos_id]
        got = np.exp(model.token_logprobs(np.array(ids)))
        for t in range(1, len(ids)):
            h = ids[max(0, t - order + 1): t]
            num = c.count(h + [ids[t]])
            den = sum(c.count(h + [w]) for w in range(len(v))) if h else c.n_tokens
            assert got[t - 1] == pytest.approx(num / den, rel=1e-12)


def test_mle_unseen_event_is_zero_and_unseen_context_backs_off():
    model = MLE(order=2).fit(["a b", "a a"])
    v = model.vocab
    assert np.isneginf(model.token_logprobs([v.bos_id, v.id("b")])[0])  # "<s> b" never seen
    lp = model.token_logprobs([v.bos_id, v.id("a"), v.id("b"), v.id("b")])
    assert np.isneginf(lp[2])  # after "b" only </s> was seen
    # an unseen context (<unk>) uses the unigram relative frequencies: still a distribution
    row = model.logprobs([v.bos_id, v.unk_id])[-1]
    assert logsumexp(row) == pytest.approx(0.0)
    assert np.exp(row[v.id("a")]) == pytest.approx(3 / 6)


@pytest.mark.parametrize("cls", NORMALIZED)
@given(lines=corpora, order=st.integers(1, 3))
@settings(max_examples=examples(8))
def test_chain_rule_over_all_sentences(cls, lines, order):
    """sum_{k <= L} sum_{w in W^k} P(w </s>) + sum_{w in W^{L+1}} P(w) == 1."""
    model = fit(cls, lines, order)
    v = model.vocab
    words = [i for i in contract.predictable_ids(model) if i != v.eos_id]
    assume(len(words) <= 5)
    L = 2
    finished = [np.array([v.bos_id, *s, v.eos_id]) for k in range(L + 1)
                for s in itertools.product(words, repeat=k)]
    unfinished = [np.array([v.bos_id, *s]) for s in itertools.product(words, repeat=L + 1)]
    total = sum(np.exp(lp.sum()) for lp in model.token_logprobs_many(finished + unfinished))
    assert total == pytest.approx(1.0, abs=1e-9)


def test_fit_builds_the_whitespace_tokenizer_kenlm_order():
    model = ModifiedKneserNey(order=2).fit(CORPUS)
    assert model.vocab == WhitespaceTokenizer.fit(CORPUS).vocab
    assert model.vocab.tokens[:4] == ("<unk>", "<s>", "</s>", "the")
    assert model.tokenizer is model.tokenizer_


@pytest.mark.parametrize("chunk", [1, 7, 40])
def test_fit_invariant_to_chunking(chunk):
    whole = ModifiedKneserNey(order=3).fit(CORPUS)
    parts = ModifiedKneserNey(order=3, chunk_chars=chunk).fit(CORPUS)
    assert whole.vocab == parts.vocab
    for a, b in zip(whole.tables_.logp, parts.tables_.logp):
        np.testing.assert_array_equal(a, b)


def test_fit_reads_a_one_pass_iterable_and_a_path(tmp_path):
    whole = WittenBell(order=3).fit(CORPUS)
    once = WittenBell(order=3, chunk_chars=10).fit(line for line in CORPUS)
    path = tmp_path / "corpus.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(CORPUS) + "\n")
    from_path = WittenBell(order=3).fit(path)
    for other in (once, from_path):
        assert other.vocab == whole.vocab and other.counts_.n_sentences == len(CORPUS)
        for a, b in zip(whole.tables_.logp, other.tables_.logp):
            np.testing.assert_array_equal(a, b)
    from_str = WittenBell(order=3).fit(str(path))  # the corpus rule: a str names a file
    for a, b in zip(whole.tables_.logp, from_str.tables_.logp):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("progress, shown", [(True, True), (False, False), (None, False)])
def test_progress_bar(capsys, progress, shown):
    """progress=True draws a tqdm bar of counted lines on stderr; None: only on a terminal."""
    WittenBell(order=2, chunk_chars=5, progress=progress).fit(CORPUS)
    err = capsys.readouterr().err
    assert ("counting n-grams" in err) == shown
    if shown:
        assert f"/{len(CORPUS)} " in err  # a sized input gets a total (n/15 lines)


def test_min_count_maps_rare_words_to_unk():
    model = WittenBell(order=2, min_count=2).fit(CORPUS + ["zebra once"])
    assert "zebra" not in model.vocab and "the" in model.vocab
    assert model.vocab == WhitespaceTokenizer.fit(CORPUS + ["zebra once"], min_count=2).vocab
    v = model.vocab
    assert model.counts_.count([v.unk_id]) == 2  # counted in the higher orders ...
    lp = model.token_logprobs([v.bos_id, v.unk_id, v.unk_id, v.eos_id])
    assert np.isfinite(lp).all()


def test_other_tokenizers_work():
    tok = CharTokenizer.fit(CORPUS)
    model = ModifiedKneserNey(order=4).fit(CORPUS, tokenizer=tok)
    assert model.vocab is tok.vocab and model.tokenizer is tok
    ids = np.array([tok.vocab.bos_id, *tok.encode("the cat"), tok.vocab.eos_id])
    assert np.isfinite(model.token_logprobs(ids)).all()
    contract.check_rows_sum_to_one(model, ids[:-1])


def test_given_whitespace_tokenizer_maps_unknown_words_to_unk():
    tok = WhitespaceTokenizer.fit(["the cat"])
    model = KneserNey(order=2).fit(["the dog", "the cat"], tokenizer=tok)
    assert model.counts_.count([tok.vocab.id("the"), tok.vocab.unk_id]) == 1


def test_refit_resets():
    model = WittenBell(order=2).fit(["a b"])
    model.fit(["c d e"])
    assert "a" not in model.vocab and "e" in model.vocab


def test_repr_and_params():
    m = ModifiedKneserNey(order=4, kenlm_quirk=True)
    assert repr(m) == "ModifiedKneserNey(order=4, kenlm_quirk=True)"
    assert m.get_params()["order"] == 4 and "discount_fallback" in m.get_params()


# ----------------------------------------------------------------------------- estimator formulas


def test_addk_formula():
    model = AddK(order=2, k=0.5).fit(["a b", "a"])
    v = model.vocab
    Vp = len(v) - 1  # every token but <s>
    lp = model.token_logprobs([v.bos_id, v.id("a"), v.id("b"), v.eos_id])
    c_a = 2  # "a" is followed twice: by b and </s>
    np.testing.assert_allclose(np.exp(lp), [(2 + .5) / (2 + .5 * Vp), (1 + .5) / (c_a + .5 * Vp),
                                            (1 + .5) / (1 + .5 * Vp)])
    unseen_ctx = model.logprobs([v.bos_id, v.unk_id])[-1]
    np.testing.assert_allclose(np.exp(unseen_ctx[v.eos_id]), 1 / Vp)
    assert Laplace(order=2).fit(["a b"]).k == 1.0


def test_witten_bell_formula():
    model = WittenBell(order=2).fit(["a b", "a a"])
    v = model.vocab
    uni = np.exp(model.logprobs([v.unk_id])[0])  # an unseen context: the unigram row
    # unigram: counts a=3, b=1, </s>=2 (N=6, 3 types), floor over V' = 4 (<unk> a b </s>)
    floor = 3 / (6 + 3) / 4
    assert uni[v.id("a")] == pytest.approx(3 / 9 + floor)
    assert uni[v.unk_id] == pytest.approx(floor)
    p = np.exp(model.token_logprobs([v.bos_id, v.id("a"), v.id("b")])[1])
    assert p == pytest.approx((1 + 3 * uni[v.id("b")]) / (3 + 3))  # c(a .) = 3, N1+(a .) = 3


def test_stupid_backoff_scores():
    model = StupidBackoff(order=2, alpha=0.4).fit(["a b", "a a"])
    v = model.vocab
    assert model.normalized is False
    lp = np.exp(model.token_logprobs([v.bos_id, v.id("b"), v.id("b")]))
    np.testing.assert_allclose(lp, [0.4 * 1 / 6, 0.4 * 1 / 6])  # both back off once to c(b)/N


def test_kneser_ney_discount_estimate():
    model = KneserNey(order=2).fit(CORPUS[:5])
    t1, t2 = model.count_of_counts_[1][:2]
    assert model.discounts_[1] == pytest.approx(t1 / (t1 + 2 * t2))


def test_user_discounts_are_used():
    model = ModifiedKneserNey(order=2, discounts=[(0.5, 1, 1.5), (0.6, 1.1, 1.2)]).fit(CORPUS)
    assert model.discounts_ == [(0.5, 1.0, 1.5), (0.6, 1.1, 1.2)]
    assert AbsoluteDiscount(order=2, discount=0.3).fit(CORPUS).discounts_ == [0.3, 0.3]


def test_discount_fallback_warns_and_can_be_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DiscountFallbackWarning)
        with pytest.raises(DiscountFallbackWarning, match="discount_fallback"):
            ModifiedKneserNey(order=2).fit(["a b", "a b"])
    with pytest.raises(InputError, match="could not estimate"):
        ModifiedKneserNey(order=2, discount_fallback=None).fit(["a b", "a b"])
    with pytest.raises(InputError, match="could not estimate"):
        KneserNey(order=2, discount_fallback=None).fit(["a", "a"])


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("lines, match", [([], "empty corpus"), (["", "  "], "no words"),
                                           (["a <s> b"], "reserved symbol '<s>'"),
                                           (["a", "b </s>"], "line 2"), (["<unk> a"], "reserved")])
def test_bad_corpus(cls, lines, match):
    with pytest.raises(InputError, match=match):
        cls(order=2).fit(lines)


def test_bad_lines():
    with pytest.raises(SeqProbFileError, match=r"'a b c': no such file .*pass a list of lines"):
        MLE(order=2).fit("a b c")
    with pytest.raises(InputError, match="bytes b'a b c': decode it first"):
        MLE(order=2).fit(b"a b c")
    with pytest.raises(InputError, match="line 2: not valid UTF-8"):
        MLE(order=2).fit([b"a b", b"\xff\xfe"])
    with pytest.raises(InputError, match="must be str"):
        MLE(order=2).fit([1, 2])


def test_bad_lines_and_tokenizer_objects():
    with pytest.raises(InputError, match="iterable of lines, got NoneType"):
        MLE(order=2).fit(None)
    with pytest.raises(InputError, match="tokenizer must be a seqprob Tokenizer"):
        MLE(order=2).fit(["a b"], tokenizer="whitespace")  # a str has .encode, but no vocab


def test_failed_fit_leaves_the_model_unfitted():
    model = ModifiedKneserNey(order=2).fit(CORPUS)  # warns and falls back
    assert model.discounts_ and model.counts_
    model.discount_fallback = None
    with pytest.raises(InputError, match="could not estimate"):
        model.fit(["a b", "a b"])  # too little data for discounts, fallback refused
    learned = [n for n in vars(model) if n.endswith("_") and not n.startswith("_")]
    assert learned == []  # nothing of either fit is left half-set
    with pytest.raises(NotFittedError):
        model.logprobs([1, 3])


def test_reserved_symbol_through_a_tokenizer():
    tok = WhitespaceTokenizer.fit(["a b"])
    with pytest.raises(InputError, match="reserved symbol '</s>'"):
        MLE(order=2).fit(["a </s> b"], tokenizer=tok)


@pytest.mark.parametrize("kwargs, match", [
    ({"order": 0}, "order"), ({"order": 11}, "order"), ({"order": 2.0}, "order"),
    ({"min_count": 0}, "min_count"), ({"k": 0}, "k must"), ({"k": -1}, "k must"),
    ({"k": float("nan")}, "k must")])
def test_bad_settings(kwargs, match):
    cls = AddK if "k" in kwargs else ModifiedKneserNey
    with pytest.raises(InputError, match=match):
        cls(**kwargs).fit(CORPUS)


@pytest.mark.parametrize("make", [
    lambda: ModifiedKneserNey(order=2, discounts=[(0.5, 1, 1.5)]),
    lambda: ModifiedKneserNey(order=2, discounts=[(0.5, 3, 1.5)] * 2),
    lambda: ModifiedKneserNey(order=2, discount_fallback=(0, 1, 1)),
    lambda: KneserNey(order=2, discount=1.5), lambda: AbsoluteDiscount(order=2, discount=[0.5]),
    lambda: StupidBackoff(order=2, alpha=2), lambda: ModifiedKneserNey(order=2, discounts=3),
    lambda: ModifiedKneserNey(order=2, discounts="0.5")])
def test_bad_discounts(make):
    with pytest.raises(InputError):
        make().fit(CORPUS)


def test_token_logprobs_many_needs_a_list_of_sequences():
    model = KneserNey(order=2, discount=0.5).fit(CORPUS)
    for bad in (None, 5, "a b"):
        with pytest.raises(InputError, match="list of 1-D id sequences"):
            model.token_logprobs_many(bad)


def test_min_count_with_a_tokenizer_is_refused():
    with pytest.raises(InputError, match="min_count"):
        MLE(order=2, min_count=2).fit(CORPUS, tokenizer=WhitespaceTokenizer.fit(CORPUS))


def test_errors_are_seqprob_errors():
    assert issubclass(InputError, SeqProbError)


# ----------------------------------------------------------------------------- CLI


def _main(argv):
    from seqprob.app.cli import main

    return main(argv)


def test_cli_fit_writes_arpa(tmp_path, capsys):
    corpus = tmp_path / "c.txt.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        f.write("\n".join(CORPUS) + "\n")
    out = tmp_path / "m.arpa"
    assert _main(["ngram", "fit", str(corpus), "--order", "3", "-o", str(out)]) == 0
    from seqprob.ngram.arpa import read_arpa

    arpa = read_arpa(out)
    ref = ModifiedKneserNey(order=3).fit(CORPUS)
    ids = np.array([1, *ref.tokenizer.encode("the cat sat"), 2])
    np.testing.assert_allclose(arpa.token_logprobs(ids), ref.token_logprobs(ids), atol=1e-8)
    assert "wrote" in capsys.readouterr().err


@pytest.mark.parametrize("smoothing", ["kn", "wb", "abs", "mle"])
def test_cli_other_smoothings(tmp_path, smoothing):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS))
    assert _main(["ngram", "fit", str(corpus), "--order", "2", "--smoothing", smoothing,
                  "-o", str(tmp_path / "m.arpa")]) == 0


def test_cli_stdin(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("a b\nb a\n".encode())))
    assert _main(["ngram", "fit", "-", "--order", "1", "--smoothing", "addk", "--k", "0.5",
                  "-o", str(tmp_path / "m.arpa")]) == 0
    assert (tmp_path / "m.arpa").read_text().startswith("\\data\\")


@pytest.mark.parametrize("args, match", [
    (["--smoothing", "stupid"], "not a probability distribution"),
    (["--smoothing", "addk", "--order", "2"], "not a back-off model"),
    (["--order", "11"], "order must be in"), (["--smoothing", "addk", "--order", "1", "--k", "0"], "k must")])
def test_cli_refuses_and_writes_nothing(tmp_path, capsys, args, match):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS))
    out = tmp_path / "m.arpa"
    assert _main(["ngram", "fit", str(corpus), "-o", str(out), *args]) == 2
    assert match in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == [corpus]


def test_cli_discount_fallback_is_one_warning_line(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b\nb a\n")
    assert _main(["ngram", "fit", str(corpus), "--order", "2", "-o", str(tmp_path / "m.arpa")]) == 0
    err = capsys.readouterr().err
    assert "seqprob ngram fit: warning: could not estimate modified Kneser-Ney" in err
    assert "model.fit(" not in err  # no Python source excerpt
    assert _main(["ngram", "fit", str(corpus), "--order", "2", "--no-discount-fallback",
                  "-o", str(tmp_path / "n.arpa")]) == 2
    assert "could not estimate" in capsys.readouterr().err and not (tmp_path / "n.arpa").exists()


def test_cli_ppl_reports_skipped_blank_lines(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(CORPUS))
    model = tmp_path / "m.arpa"
    assert _main(["ngram", "fit", str(corpus), "--order", "2", "--smoothing", "wb", "-o", str(model)]) == 0
    test = tmp_path / "t.txt"
    test.write_text("the cat\n\nzebra sat\n")
    capsys.readouterr()
    assert _main(["ppl", "--model", str(model), str(test), "--format", "csv"]) == 0
    rows = dict(line.rsplit(",", 1) for line in capsys.readouterr().out.splitlines()[1:])
    assert rows["sentences"] == "2" and rows["words"] == "4" and rows["OOVs"] == "1"
    assert rows["blank lines skipped"] == "1"


def test_cli_bad_corpus_leaves_no_file(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"a b\n\xff\n")
    out = tmp_path / "m.arpa"
    assert _main(["ngram", "fit", str(corpus), "-o", str(out)]) == 2
    assert "UTF-8" in capsys.readouterr().err and not out.exists()
