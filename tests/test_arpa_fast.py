"""The column-at-a-time ARPA reader and writer against the line-by-line originals."""
from __future__ import annotations

import gzip
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from seqprob.ngram import _arpa_fast as fast
from seqprob.ngram import arpa
from seqprob.functional import LN10
from seqprob.ngram import MLE, DiscountFallbackWarning, KneserNey, ModifiedKneserNey, WittenBell
from budget import examples

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"
corpora = st.lists(st.lists(st.sampled_from(["a", "b", "é", "cc", "d"]), max_size=6).map(" ".join),
                   min_size=1, max_size=8).filter(lambda ls: any(ls))


def reference_arpa_text(model) -> str:
    """The line-by-line writer seqprob had before the column writer (the byte reference)."""
    tables, vocab = model._tables(), model.vocab
    names = [bytes(row).rstrip(b"\0").decode() for row in arpa.arpa_names(vocab)]
    V = tables.vocab_size

    def fmt(values):
        return ["-99" if v == -math.inf else f"{v:.10g}" for v in (np.asarray(values) / LN10).tolist()]

    out = ["\\data\\\n"] + [f"ngram {m}={n}\n" for m, n in enumerate(tables.sizes(), 1)]
    texts = names
    for m in range(1, tables.order + 1):
        if m > 1:
            keys = tables.keys[m - 1]
            texts = [f"{texts[p]} {names[w]}" for p, w in zip((keys // V).tolist(), (keys % V).tolist())]
        out.append(f"\n\\{m}-grams:\n")
        probs = fmt(tables.logp[m - 1])
        if m == 1:
            probs[vocab.bos_id] = "0"
        if m == tables.order:
            out += [f"{p}\t{t}\n" for p, t in zip(probs, texts)]
        else:
            out += [f"{p}\t{t}\t{b}\n" for p, t, b in zip(probs, texts, fmt(tables.logbow[m - 1]))]
    out.append("\n\\end\\\n")
    return "".join(out)


def _same_model(a, b) -> None:
    assert a.vocab.tokens == b.vocab.tokens and a.order == b.order
    for x, y in zip(a.tables_.keys + a.tables_.logp + a.tables_.logbow,
                    b.tables_.keys + b.tables_.logp + b.tables_.logbow):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("cls", [ModifiedKneserNey, KneserNey, WittenBell, MLE])
@given(lines=corpora, order=st.integers(1, 4))
@settings(max_examples=examples(8), deadline=None)
def test_writer_is_byte_identical_to_the_line_writer(tmp_path_factory, cls, lines, order):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountFallbackWarning)
        model = cls(order=order).fit(lines)
    path = arpa.write_arpa(model, tmp_path_factory.mktemp("w") / "m.arpa", progress=True)
    assert path.read_bytes() == reference_arpa_text(model).encode()
    _same_model(arpa.read_arpa(path), arpa._read_lines(path.read_bytes(), str(path)))


@pytest.mark.parametrize("order", [2, 3, 4])
def test_kenlm_fixtures_read_and_write_like_the_line_code(tmp_path, order):
    path = FIXTURES / f"genesis.o{order}.arpa.gz"
    fast_model = arpa.read_arpa(path)
    _same_model(fast_model, arpa._read_lines(gzip.decompress(path.read_bytes()), str(path)))
    out = arpa.write_arpa(fast_model, tmp_path / "g.arpa")
    assert out.read_bytes() == reference_arpa_text(fast_model).encode()


EDGE = [0.0, -0.0, -np.inf, np.inf, np.nan, 1e-300, 5e-324, 1e300, 0.5, 9999999999.5, 9999999999.4,
        1e10, 1e9, 123456789.0, 1e-5, 1e-4, 0.0001234567891, 99999.999995, -99.0, 1.5e-13, 1e-14,
        -0.30102999566398120, 2.5e-5, 0.12345678905, -7.000000000049999]


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=50)
       | st.lists(st.floats(-10, 0), max_size=50))
@settings(max_examples=examples(200), deadline=None)
def test_format_g10_is_c_printf(values):
    x = np.array(values + EDGE, dtype=np.float64)
    assert fast.squeeze(fast.format_g10(x), b"\n") == "".join(f"{v:.10g}\n" for v in x.tolist()).encode()


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40)
       | st.lists(st.floats(-10, 0), max_size=40), st.integers(0, 255))
@settings(max_examples=examples(100), deadline=None)
def test_format_g10_into_a_column_slice_is_the_same_text(values, junk):
    """The streamed writer formats into a column slice of its row matrix (strided rows, old
    bytes in it): the same text, the padding zeroed, the columns around it untouched."""
    x = np.array(values + EDGE, dtype=np.float64)
    rows = np.full((len(x), 24), junk, dtype=np.uint8)
    got = fast.format_g10(x, out=rows[:, 3:3 + fast.G10_WIDTH])
    assert np.array_equal(got, fast.format_g10(x))
    assert (rows[:, :3] == junk).all() and (rows[:, 3 + fast.G10_WIDTH:] == junk).all()


def test_name_words_hold_a_name_and_its_separator_in_whole_words():
    names = fast.name_matrix(["a", "1234567", "12345678", "é"])  # (4, 8): 1234567 + sep fills 8
    words = fast.name_words(names, b"\t")
    assert words.shape == (4, 2) and words.dtype == np.uint64
    text = fast.squeeze(words.view(np.uint8).reshape(4, 16))
    assert text == "a\t1234567\t12345678\té\t".encode()
    assert fast.name_words(fast.name_matrix(["ab", "c"]), b" ").shape == (2, 1)


LAYOUTS = {"kenlm": ("\t", "\t", "\n"), "spaces": (" ", " ", "\n"), "crlf": ("\t", " ", "\r\n"),
           "ragged": ("  \t", "\t ", " \n")}


@given(st.lists(st.tuples(st.floats(allow_nan=False, allow_infinity=False), st.booleans()), min_size=1,
                max_size=30),
       st.sampled_from(["{:.10g}", "{!r}", "{:.3e}", "{:.20f}", "{:+.6f}", "{:.17e}"]),
       st.sampled_from(sorted(LAYOUTS)))
@settings(max_examples=examples(150), deadline=None)
def test_number_columns_equal_python_float(rows, form, layout):
    """Every layout's numbers are Python's float of their text, a back-off or none per line."""
    sep, word_sep, end = LAYOUTS[layout]
    texts = [(form.format(-abs(p)), form.format(b) if has else None) for (p, has), b in
             zip(rows, [x for x, _ in rows[::-1]])]
    lines = [f"{p}{sep}a{word_sep}b" + (f"{sep}{b}" if b is not None else "") + end for p, b in texts]
    section = ("\n" + "".join(lines)).encode()
    buf, starts, ends, first, count = fast.tokenize(section)
    has_bow = count == 4
    try:
        probs, bows = arpa._number_columns(section, buf, starts, ends, first, has_bow, 2)
    except arpa._Unusual:  # handed to the line reader
        return
    np.testing.assert_array_equal(probs, [float(p) for p, _ in texts])
    np.testing.assert_array_equal(bows[has_bow], [float(b) for _, b in texts if b is not None])


@pytest.mark.parametrize("text", ["inf", "nan", "NA", "1_0", "0x1p3", "1e", "--1", ".", "1-2", "1.5D3"])
def test_number_columns_hand_over_what_python_decides(text):
    section = f"\n-1 a b {text}\n-2 b a -1\n".encode()
    buf, starts, ends, first, count = fast.tokenize(section)
    try:
        probs, bows = arpa._number_columns(section, buf, starts, ends, first, count == 4, 2)
    except arpa._Unusual:
        return
    assert np.isnan(bows[0]) or bows[0] == np.inf  # refused by the caller: the line reader decides


GOOD = "\\data\\\nngram 1=5\nngram 2=3\n\n\\1-grams:\n-1\t<unk>\t0\n0\t<s>\t-0.2\n-0.5\t</s>\t0\n" \
       "-0.3\ta\t-0.1\n-0.4\tb\n\n\\2-grams:\n-0.2\t<s> a\n-0.1\ta </s>\n-0.7\ta b\n\n\\end\\\n"


@pytest.mark.parametrize("dialect", [
    lambda t: t, lambda t: t.replace("\t", " "), lambda t: t.replace("\n", "\r\n"),
    lambda t: t.replace("0\t<s>", "-99\t<s>"), lambda t: t.replace("<unk>", "<UNK>"),
    lambda t: "text \\ before\n \\ with backslashes\n" + t.replace("\n", "\n\n"),
    lambda t: t.replace("-0.3\ta", "-0.3\x0b a"),           # vertical tab: line reader
    lambda t: t.replace("-0.3\ta", "-3e-1\ta").replace("-0.4", "-.4"),
    lambda t: t.replace("-0.7\ta b", "-inf\ta b"),            # -inf: probability 0
    lambda t: t.replace("\\end\\\n", "\\end\\"),
    lambda t: t.replace("\ta\t", "\t\u00e9\u00e8\t").replace(" a", " \u00e9\u00e8").replace("a ", "\u00e9\u00e8 "),
])
def test_dialects_read_alike_by_both_readers(tmp_path, dialect):
    text = dialect(GOOD)
    path = tmp_path / "d.arpa"
    path.write_text(text, encoding="utf-8", newline="")
    by_columns = arpa._read_fast(path.read_bytes(), str(path), False)
    assert (by_columns is None) == ("\x0b" in text)  # the columns read all the others
    _same_model(arpa.read_arpa(path), arpa._read_lines(path.read_bytes(), str(path)))


def test_word_ids_match_bytes_exactly():
    index = fast.VocabIndex(["<unk>", "<s>", "</s>", "a", "ab", "abcdefgh", "abcdefghi", "é"])
    text = b"\nabcdefghi ab a abcdefgh abcdefgX abcdefghij \xc3\xa9 b\n"
    buf, starts, ends, *_ = fast.tokenize(text)
    assert fast.word_ids(index, buf, starts, ends).tolist() == [6, 4, 3, 5, -1, -1, 7, -1]


def test_docstring_examples_of_the_io_modules():
    import doctest

    from seqprob.ngram import binary

    for module in (fast, arpa, binary):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
        assert result.attempted > 0


def _outcome(read, path):
    try:
        return read(path)
    except Exception as exc:  # noqa: BLE001 - the type and message are what is compared
        return (type(exc), str(exc))


@given(edits=st.lists(st.tuples(st.integers(0, len(GOOD)), st.integers(0, 3),
                                st.sampled_from(["", "0", "-", ".", "e", "1", " ", "\t", "\n", "\r\n",
                                                 "a", "b", "\\", "\x0b", "é", "inf", "nan", "9"])),
                      min_size=1, max_size=4))
@settings(max_examples=examples(150), deadline=None)
def test_damaged_files_get_the_line_readers_verdict(tmp_path_factory, edits):
    text = GOOD
    for at, cut, insert in edits:
        text = text[:at] + insert + text[at + cut:]
    path = tmp_path_factory.mktemp("fz") / "f.arpa"
    path.write_text(text, encoding="utf-8", newline="")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast_result = _outcome(arpa.read_arpa, path)
        slow_result = _outcome(lambda p: arpa._read_lines(p.read_bytes(), str(p)), path)
    if isinstance(slow_result, tuple) or isinstance(fast_result, tuple):
        assert fast_result == slow_result
    else:
        _same_model(fast_result, slow_result)


def test_a_token_with_a_nul_character_is_refused(tmp_path):
    from seqprob.errors import InputError
    from seqprob.tokenizers import WhitespaceTokenizer
    from seqprob.vocab import Vocab

    tok = WhitespaceTokenizer(Vocab(["<unk>", "<s>", "</s>", "a\0b", "c"]))
    model = WittenBell(order=2).fit(["a\0b c"], tokenizer=tok)
    with pytest.raises(InputError, match="NUL"):
        arpa.write_arpa(model, tmp_path / "m.arpa")
    assert list(tmp_path.iterdir()) == []
