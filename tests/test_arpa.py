"""ARPA files: round trip, the dialects other tools write, and malformed files."""
from __future__ import annotations

import gzip
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from budget import examples
from seqprob.ngram.arpa import ArpaModel, read_arpa, write_arpa
from seqprob.errors import ArpaFormatError, InputError, SeqProbFileError
from seqprob.functional import LN10, logsumexp
from seqprob.ngram import (MLE, AbsoluteDiscount, AddK, DiscountFallbackWarning, KneserNey,
                           ModifiedKneserNey, StupidBackoff, WittenBell)

WRITABLE = [ModifiedKneserNey, KneserNey, WittenBell, AbsoluteDiscount, MLE]
CORPUS = ["the cat sat on the mat", "the dog sat", "a cat saw the dog", "the mat"]

corpora = st.lists(st.lists(st.sampled_from("abcd"), max_size=6).map(" ".join), min_size=1,
                   max_size=8).filter(lambda ls: any(ls))


def _write(tmp_path, text: str, name="m.arpa"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("cls", WRITABLE)
@given(lines=corpora, order=st.integers(1, 4), probe=st.lists(st.sampled_from("abcdz"), max_size=6))
@settings(max_examples=examples(10))
def test_round_trip(tmp_path_factory, cls, lines, order, probe):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountFallbackWarning)
        model = cls(order=order).fit(lines)
    path = write_arpa(model, tmp_path_factory.mktemp("rt") / "m.arpa")
    again = read_arpa(path)
    assert again.vocab.tokens == model.vocab.tokens and again.order == order
    v = model.vocab
    seqs = [np.array([v.bos_id, *model.tokenizer.encode(s), v.eos_id]) for s in lines + [" ".join(probe)]]
    for a, b in zip(model.token_logprobs_many(seqs), again.token_logprobs_many(seqs)):
        np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
        np.testing.assert_allclose(a[np.isfinite(a)] / LN10, b[np.isfinite(b)] / LN10, atol=1e-6)
        assert not np.isfinite(a.sum()) or abs(a.sum() - b.sum()) / LN10 < 1e-6


def test_round_trip_of_an_arpa_model_and_gzip(tmp_path):
    model = WittenBell(order=3).fit(CORPUS)
    first = read_arpa(write_arpa(model, tmp_path / "a.arpa"))
    second_path = tmp_path / "b.arpa.gz"
    with gzip.open(second_path, "wt", encoding="utf-8") as f:
        f.write(write_arpa(first, tmp_path / "b.arpa").read_text())
    second = read_arpa(second_path)
    ids = np.array([1, *model.tokenizer.encode("the cat saw a mat"), 2])
    np.testing.assert_allclose(second.token_logprobs(ids), model.token_logprobs(ids), atol=1e-8)
    assert isinstance(second, ArpaModel) and repr(second).startswith("BackoffTablesModel(order=3")


def test_one_class_for_every_model_made_of_tables(tmp_path):
    """ARPA files, .sqlm files, pruned models and static mixtures are one class (ArpaModel is
    another name of it); each keeps the tokenizer that fits its vocabulary."""
    import seqprob as sp
    from seqprob.ngram import BackoffTablesModel, Mixture, load_ngram, prune_entropy

    wb = WittenBell(order=3).fit(CORPUS)
    kn = KneserNey(order=3, discount=0.5).fit(CORPUS, tokenizer=wb.tokenizer)
    wb.save(tmp_path / "wb.sqlm")
    models = {"arpa": read_arpa(write_arpa(wb, tmp_path / "wb.arpa")), "sqlm": load_ngram(tmp_path / "wb.sqlm"),
              "pruned": prune_entropy(wb, 1e-3), "mixture": Mixture([wb, kn]).to_backoff()}
    assert {type(m) for m in models.values()} == {BackoffTablesModel}
    assert ArpaModel is BackoffTablesModel is sp.ArpaModel
    assert models["pruned"].tokenizer is wb.tokenizer and models["mixture"].tokenizer is wb.tokenizer
    assert models["arpa"].tokenizer.vocab is models["arpa"].vocab and models["arpa"].path.endswith("wb.arpa")
    with pytest.raises(InputError, match="path="):  # the former ArpaModel(tables, vocab, path)
        BackoffTablesModel(wb.tables_, wb.vocab, str(tmp_path / "wb.arpa"))


def test_refuses_models_without_an_arpa_form(tmp_path):
    with pytest.raises(InputError, match="not a normalized"):
        write_arpa(StupidBackoff(order=2).fit(CORPUS), tmp_path / "s.arpa")
    with pytest.raises(InputError, match="not a back-off model"):
        write_arpa(AddK(order=2).fit(CORPUS), tmp_path / "a.arpa")
    assert list(tmp_path.iterdir()) == []
    write_arpa(AddK(order=1, k=0.5).fit(CORPUS), tmp_path / "a1.arpa")
    with pytest.raises(SeqProbFileError):
        write_arpa(MLE(order=2).fit(CORPUS), tmp_path / "missing" / "m.arpa")


def test_write_failure_keeps_the_old_file(tmp_path, monkeypatch):
    path = write_arpa(MLE(order=1).fit(CORPUS), tmp_path / "m.arpa")
    before = path.read_text()
    import seqprob.ngram.arpa as arpa_mod

    monkeypatch.setattr(arpa_mod, "_section_text", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        write_arpa(MLE(order=2).fit(CORPUS), path)
    assert path.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["m.arpa"]


SRILM = """This file was written by another tool.
some header text

\\data\\
ngram  1=5
ngram 2=4

\\1-grams:
-99\t<s>\t-0.30103
-0.60206 a -0.1
-0.60206\tb
-0.30103\t</s>
-1.0\t<UNK>

\\2-grams:
-0.1\t<s> a
-0.2 a b
-0.3\tb </s>

-0.5\ta a

\\end\\
trailing text is ignored
"""


def test_reads_srilm_dialect(tmp_path):
    model = read_arpa(_write(tmp_path, SRILM))
    v = model.vocab
    assert v.tokens == ("<UNK>", "<s>", "</s>", "a", "b") and v.unk == "<UNK>" and v.unk_id == 0
    assert model.tokenizer.encode("a zz") == [3, 0]
    lp = model.token_logprobs([1, 3, 4, 3, 2]) / LN10
    # <s> a (listed); a b (listed); b a: bow(b)=0 (missing) + p(a); a </s>: bow(a) + p(</s>)
    np.testing.assert_allclose(lp, [-0.1, -0.2, -0.60206, -0.1 - 0.30103])
    assert np.isneginf(model.logprobs([1])[0, 1])  # <s> at -99 or 0: never predicted


@pytest.mark.parametrize("dialect", [
    lambda t: t.replace("0\t<s>", "-99\t<s>"),                       # SRILM's <s>
    lambda t: t.replace("<unk>", "<UNK>"),                             # upper-case unknown word
    lambda t: t.replace("\t<unk>\t0\n", "\t<unk>\n").replace("</s>\t0", "</s>"),  # no back-off = 0
    lambda t: "written by some tool\n\n" + t.replace("\n", "\n\n"),  # text before, blank lines
    lambda t: t.replace("\n", "\r\n"),                                # Windows line ends
    lambda t: "\ufeff" + t,                                            # byte-order mark
    lambda t: t.replace("\t", "  "),                                   # spaces for tabs
])
def test_dialects_read_the_same_model(tmp_path, dialect):
    ref = read_arpa(_write(tmp_path, GOOD, "ref.arpa"))
    other = read_arpa(_write(tmp_path, dialect(GOOD)))
    assert other.tables_.sizes() == ref.tables_.sizes() and other.vocab.unk_id == 0
    seqs = [np.array([1, 3, 2]), np.array([1, 0, 3, 3, 2]), np.array([1, 2])]
    for a, b in zip(ref.token_logprobs_many(seqs), other.token_logprobs_many(seqs)):
        np.testing.assert_array_equal(a, b)
    assert np.isneginf(other.logprobs([1])[0, 1])  # <s> is never predicted


def test_missing_unk_gets_kenlm_substitute(tmp_path):
    text = "\\data\\\nngram 1=3\n\n\\1-grams:\n0\t<s>\n-0.3\t</s>\n-0.3\ta\n\\end\\\n"
    with pytest.warns(UserWarning, match="no <unk>"):
        model = read_arpa(_write(tmp_path, text))
    assert model.token_logprobs([1, 0])[0] / LN10 == pytest.approx(-100)


def test_kenlm_rows_sum_to_one(tmp_path):
    model = read_arpa(write_arpa(KneserNey(order=3).fit(CORPUS), tmp_path / "m.arpa"))
    rows = model.logprobs(np.array([1, 3, 4, 0, 5]))
    np.testing.assert_allclose(logsumexp(rows), 0.0, atol=1e-8)


GOOD = "\\data\\\nngram 1=4\nngram 2=2\n\n\\1-grams:\n-1\t<unk>\t0\n0\t<s>\t-0.2\n-0.5\t</s>\t0\n" \
       "-0.3\ta\t-0.1\n\n\\2-grams:\n-0.2\t<s> a\n-0.1\ta </s>\n\n\\end\\\n"


def test_good_minimal_file(tmp_path):
    assert read_arpa(_write(tmp_path, GOOD)).order == 2


@pytest.mark.parametrize("old, new, line, match", [
    ("ngram 2=2", "ngram 2=3", 3, "declares ngram 2=3 but"),
    ("ngram 1=4", "ngram 1=x", 2, "ngram n=count"),
    ("-0.3\ta\t-0.1", "-0.3\ta\t-0.1\t7", 9, "fields"),
    ("-0.3\ta\t-0.1", "abc\ta\t-0.1", 9, "log10 probability .first field. of this 1-gram line is 'abc', not a number"),
    ("-0.3\ta\t-0.1", "-0.3\ta\tx", 9, "back-off .field 3. of this 1-gram line is 'x', not a number"),
    ("-0.3\ta\t-0.1", "0.3\ta\t-0.1", 9, "probability <= 0"),
    ("-0.3\ta\t-0.1", "nan\ta\t-0.1", 9, "invalid"),
    ("-0.1\ta </s>", "-0.1\ta </s>\t-0.5", 13, "highest order"),
    ("-0.1\ta </s>", "-0.1\tzz </s>", 13, "not a unigram"),
    ("-0.2\t<s> a", "-0.2\ta a", 12, None),
    ("-0.2\t<s> a", "-0.2\ta </s>", 13, "listed twice"),
    ("\\end\\\n", "", 15, "truncated"),
    ("\\data\\", "\\dat\\", 1, "not an ARPA file"),
    ("\\2-grams:", "\\3-grams:", 11, "out of order"),
    ("\\2-grams:", "\\2-gramz:", 11, "unknown section"),
    ("ngram 2=2", "ngram 2=2\nngram 2=2", 4, "count twice"),
    ("ngram 2=2", "ngram 2=2\nngram 4=1", 4, "declares orders"),
    ("ngram 2=2\n", "", 10, "2-grams: is not declared"),
])
def test_malformed_files_name_the_line(tmp_path, old, new, line, match):
    bad = GOOD.replace(old, new, 1)
    if match is None:  # "a a" is fine as an n-gram: the file is valid
        read_arpa(_write(tmp_path, bad))
        return
    with pytest.raises(ArpaFormatError, match=match) as info:
        read_arpa(_write(tmp_path, bad))
    assert info.value.line == line and f"line {line}" in str(info.value)


def test_missing_context_and_non_utf8(tmp_path):
    text = GOOD.replace("ngram 2=2", "ngram 2=2\nngram 3=1").replace("\\end\\", "\\3-grams:\n-0.1\ta a </s>\n\n\\end\\")
    with pytest.raises(ArpaFormatError, match="context 'a a'") as info:
        read_arpa(_write(tmp_path, text))
    assert info.value.line == 17
    path = tmp_path / "bad.arpa"
    path.write_bytes(GOOD.encode().replace(b"-0.3\ta", b"-0.3\t\xff"))
    with pytest.raises(ArpaFormatError, match="UTF-8") as info:
        read_arpa(path)
    assert info.value.line == 9
    with pytest.raises(SeqProbFileError):
        read_arpa(tmp_path / "nope.arpa")
    corrupt = bytearray(gzip.compress(GOOD.encode() * 20))
    corrupt[20:40] = bytes(b ^ 0xFF for b in corrupt[20:40])
    (tmp_path / "bad.arpa.gz").write_bytes(bytes(corrupt))
    with pytest.raises(SeqProbFileError, match="bad.arpa.gz"):
        read_arpa(tmp_path / "bad.arpa.gz")


def test_vocab_that_cannot_be_written(tmp_path):
    from seqprob.tokenizers import CharTokenizer

    lines = ["ab a", "b a"]
    model = WittenBell(order=2).fit(lines, tokenizer=CharTokenizer.fit(lines))  # has a " " token
    with pytest.raises(InputError, match="whitespace"):
        write_arpa(model, tmp_path / "c.arpa")
    assert not (tmp_path / "c.arpa").exists()
