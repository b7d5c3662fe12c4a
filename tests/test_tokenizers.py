"""Tokenizers: round-trips, save/load, the BPE trainer against references, offline tiktoken files."""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqprob.errors import (FileFormatError, InputError, NotFittedError, SeqProbError, SeqProbFileError,
                            TokenIdError, TokenizerError, UnknownTokenizerError)
from seqprob.tokenizers import (BPETokenizer, CharTokenizer, TiktokenTokenizer, WhitespaceTokenizer,
                                load_tokenizer)
from seqprob.tokenizers.bpe import train_bpe_ranks
from seqprob.tokenizers.tiktoken_io import (ENDOFTEXT, GPT2_PATTERN, KNOWN_ENCODINGS, build_encoding,
                                            expected_cache_path, parse_tiktoken, read_tiktoken_file,
                                            tiktoken_cache_dir, write_tiktoken_file)

GENESIS = Path(__file__).parent / "fixtures" / "kenlm" / "genesis.train.txt"
CORPUS = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog",
          "Hello, World! It's 2024: naïve café, 東京 ☃ 🐍", "tabs\tand\nnewlines  and   spaces"] * 5
BYTE_RANKS = {bytes([i]): i for i in range(256)}


def _genesis(n_chars: int) -> str:
    with open(GENESIS, encoding="utf-8") as handle:  # a fixture of the repository: always there
        text = handle.read(n_chars)
    assert len(text) == n_chars, f"{GENESIS} is shorter than {n_chars} characters"
    return text


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(CORPUS, vocab_size=256 + 40 + 1)


def _naive_bpe(texts, n_merges, pattern=GPT2_PATTERN, merges=None):
    """tiktoken._educational.bpe_train, restated: recount every pair before each merge.
    ``merges``, if a list, receives the merged pairs in order."""
    import regex

    words = [[bytes([b]) for b in w.encode("utf-8")] for t in texts for w in regex.findall(pattern, t)]
    ranks = dict(BYTE_RANKS)
    for _ in range(n_merges):
        stats = Counter(pair for w in words for pair in zip(w, w[1:]))
        if not stats:
            break
        a, b = max(stats, key=lambda p: stats[p])  # ties: first pair seen in the text
        ranks[a + b] = len(ranks)
        if merges is not None:
            merges.append((a, b))
        merged = []
        for w in words:
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == (a, b):
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged.append(out)
        words = merged
    return ranks


# ----------------------------------------------------------------------------- Char / Whitespace
@given(st.data())
def test_char_round_trip_over_fitted_alphabet(data):
    fitted = data.draw(st.text(min_size=1, max_size=30), label="fit text")
    tok = CharTokenizer.fit([fitted])
    s = data.draw(st.text(alphabet=sorted(set(fitted)), max_size=40), label="s")
    ids = tok.encode(s)
    assert len(ids) == len(s) and tok.vocab.unk_id not in ids
    assert tok.decode(ids) == s


@given(st.text(alphabet="abc", min_size=1, max_size=10), st.text(alphabet="xyz", min_size=1, max_size=5))
def test_char_unseen_characters_become_unk(fitted, unseen):
    tok = CharTokenizer.fit(fitted)
    assert tok.encode(unseen) == [tok.vocab.unk_id] * len(unseen)


_words = st.text(alphabet=st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp", "Cs")),
                 min_size=1, max_size=6).filter(lambda w: w.split() == [w] and w not in ("<s>", "</s>", "<unk>"))


@given(st.data())
def test_whitespace_round_trip_over_vocab(data):
    lines = data.draw(st.lists(st.lists(_words, min_size=1, max_size=5).map(" ".join), min_size=1, max_size=5))
    tok = WhitespaceTokenizer.fit(lines)
    words = [w for line in lines for w in line.split()]
    s = " ".join(data.draw(st.lists(st.sampled_from(words), max_size=8), label="words"))
    assert tok.decode(tok.encode(s)) == s
    messy = "  " + s.replace(" ", " \t\n ") + "\n"  # any whitespace normalizes to single spaces
    assert tok.decode(tok.encode(messy)) == s


def test_whitespace_kenlm_ids_and_unk():
    tok = WhitespaceTokenizer.fit(["the cat sat", "the dog"])
    v = tok.vocab
    assert (v.unk_id, v.bos_id, v.eos_id, len(v)) == (0, 1, 2, 7)
    assert tok.encode("the cat ran") == [3, 4, 0]
    assert tok.decode([3, 4]) == "the cat"


@given(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=40), st.integers(1, 4))
def test_min_count_keeps_exactly_frequent_words(words, min_count):
    tok = WhitespaceTokenizer.fit([" ".join(words)], min_count=min_count)
    counts = Counter(words)
    for w in "abcdef":
        assert (w in tok.vocab) == (counts[w] >= min_count)
        if counts[w]:
            expected = tok.vocab.id(w) if counts[w] >= min_count else tok.vocab.unk_id
            assert tok.encode(w) == [expected]


@given(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=40), st.integers(1, 4))
def test_char_min_count(chars, min_count):
    tok = CharTokenizer.fit(["".join(chars)], min_count=min_count)
    counts = Counter(chars)
    assert {c for c in "abcdef" if c in tok.vocab} == {c for c, n in counts.items() if n >= min_count}


@pytest.mark.parametrize("cls", [WhitespaceTokenizer, CharTokenizer])
def test_simple_bad_input(cls):
    with pytest.raises(InputError, match="empty"):
        cls.fit([])
    with pytest.raises(InputError, match="empty"):
        cls.fit([""])
    with pytest.raises(InputError, match="min_count"):
        cls.fit(["a b"], min_count=0)
    with pytest.raises(NotFittedError):
        cls().encode("a")
    tok = cls.fit(["a b"])
    with pytest.raises(TokenIdError, match="99"):
        tok.decode([99])
    with pytest.raises(InputError, match="integers"):
        tok.decode([1.5])


@pytest.mark.parametrize("make", [lambda: WhitespaceTokenizer.fit(["a b"]), lambda: CharTokenizer.fit(["ab"]),
                                  lambda: BPETokenizer.train(["ab ab"], vocab_size=258)])
def test_wrong_types_are_input_errors(make):
    tok = make()
    for bad in (None, 5, b"ab", ["a"]):
        with pytest.raises(InputError, match=f"text must be a str, got {type(bad).__name__}"):
            tok.encode(bad)
    with pytest.raises(InputError, match=r"texts\[1\] must be a str, got int"):
        tok.encode_batch(["a", 1])
    fit = getattr(type(tok), "fit", None) or (lambda t: BPETokenizer.train(t, vocab_size=300))
    with pytest.raises(InputError, match="iterable of str, got NoneType"):
        fit(None)
    with pytest.raises(InputError, match=r"\[0\] must be a str, got int"):
        fit([1, 2])


def test_vocab_lookups():
    from seqprob.errors import UnknownTokenError
    from seqprob.vocab import Vocab

    v = Vocab.build(["the", "cat"])
    with pytest.raises(UnknownTokenError, match="'dog'") as info:
        v.id("dog")
    assert isinstance(info.value, KeyError) and isinstance(info.value, InputError)
    assert v.lookup("dog") == v.unk_id
    with pytest.raises(KeyError, match="'dog'"):
        Vocab(["the"], bos=None, eos=None, unk=None).lookup("dog")
    with pytest.raises(InputError, match="duplicate token 'a'"):
        Vocab(["a", "b", "a"], bos=None, eos=None, unk=None)
    with pytest.raises(InputError, match="bos token '<s>' is not in the vocabulary"):
        Vocab(["a"], eos=None, unk=None)


def test_whitespace_refuses_reserved_symbols_and_reads_a_str_as_a_file(tmp_path):
    with pytest.raises(InputError, match="<s>"):
        WhitespaceTokenizer.fit(["a <s> b"])
    with pytest.raises(SeqProbFileError, match=r"'a b': no such file .*\['a b'\]"):
        WhitespaceTokenizer.fit("a b")  # the corpus rule: a str names a file
    path = tmp_path / "c.txt"
    path.write_text("b a\nc\n", encoding="utf-8")
    for name in (str(path), path):
        assert WhitespaceTokenizer.fit(name).vocab == WhitespaceTokenizer.fit(["b a", "c"]).vocab


@given(st.lists(_words, min_size=1, max_size=8), st.text(max_size=20))
def test_simple_save_load_identical(tmp_path_factory, words, probe):
    folder = tmp_path_factory.mktemp("tok")
    for tok in (WhitespaceTokenizer.fit([" ".join(words)]), CharTokenizer.fit(words)):
        path = tok.save(folder / f"{tok.kind}.json")
        back = load_tokenizer(path)
        assert type(back) is type(tok) and back.vocab == tok.vocab
        text = " ".join(words) + " " + probe
        assert back.encode(text) == tok.encode(text)


# ----------------------------------------------------------------------------- BPE trainer
@given(st.lists(st.text(alphabet="ab cé\n'1", max_size=25), min_size=1, max_size=4).filter(lambda t: any(t)),
       st.integers(0, 25))
def test_trainer_equals_naive_reference(texts, n_merges):
    assert train_bpe_ranks(texts, n_merges) == _naive_bpe(texts, n_merges)


def test_trainer_equals_tiktoken_educational():
    edu = pytest.importorskip("tiktoken._educational")
    data = _genesis(6000) + " Naïve café: 東京 ☃ 🐍, 12345 'll 've"
    ours = BPETokenizer.train(data, vocab_size=256 + 150 + 1).mergeable_ranks_
    assert ours == edu.bpe_train(data=data, vocab_size=256 + 150, pat_str=GPT2_PATTERN, visualise=None)


@given(st.integers(257, 256 + 40 + 1))
def test_vocab_size_is_exact(bpe_size):
    tok = BPETokenizer.train(CORPUS, vocab_size=bpe_size)
    assert len(tok.vocab) == bpe_size
    assert tok.n_merges == bpe_size - 256 - 1 == len(tok.mergeable_ranks_) - 256
    assert sorted(tok.mergeable_ranks_.values()) == list(range(256 + tok.n_merges))


def test_trainer_stops_early_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="seqprob.tokenizers.bpe"):
        tok = BPETokenizer.train(["ab"], vocab_size=300)
    assert tok.n_merges == 1 and "stopped after 1 of 43 merges" in caplog.text


def test_trainer_counts_each_pretoken_with_its_frequency():
    # pre-tokens "xy" x1, " xy" x2, " zw" x1: c(x,y) = 3 > c(" ",x) = 2 > c(z,w) = c(" ",z) = 1
    ranks = BPETokenizer.train(["xy xy xy zw"], vocab_size=256 + 3 + 1).mergeable_ranks_
    assert [t for t, r in sorted(ranks.items(), key=lambda kv: kv[1])][256:] == [b"xy", b" xy", b" z"]


# ----------------------------------------------------------------------------- BPE tokenizer
@given(st.text(max_size=60))
def test_bpe_round_trip_any_text(bpe, s):
    assert bpe.decode(bpe.encode(s)) == s


@given(st.text(max_size=40))
def test_bpe_special_text_is_ordinary(bpe, s):
    text = s + ENDOFTEXT + s
    ids = bpe.encode(text)
    assert bpe.vocab.eos_id not in ids
    assert bpe.decode(ids) == text


def test_bpe_vocab_and_specials(bpe):
    v = bpe.vocab
    assert v.bos == v.eos == ENDOFTEXT and v.bos_id == v.eos_id == len(v) - 1 and v.unk_id is None
    assert len(set(v.tokens)) == len(v)
    assert bpe.decode([v.eos_id]) == ENDOFTEXT
    dragon = bpe.encode("龍")  # not in the corpus: three byte tokens, each part of a character
    assert bpe.token_strings(dragon) == ["\\xe9", "\\xbe", "\\x8d"]
    assert bpe.decode(dragon[:1]) == "\ufffd" and bpe.decode(dragon) == "龍"
    assert bpe.encode_batch(CORPUS[:4]) == [bpe.encode(t) for t in CORPUS[:4]]


def test_bpe_encodes_like_tiktoken(bpe):
    import tiktoken

    enc = tiktoken.Encoding(name="ref", pat_str=GPT2_PATTERN, mergeable_ranks=bpe.mergeable_ranks_,
                            special_tokens={ENDOFTEXT: len(bpe.mergeable_ranks_)})
    for text in CORPUS[:5]:
        assert bpe.encode(text) == enc.encode_ordinary(text)


def test_display_strings_unique_even_when_they_collide():
    ranks = dict(BYTE_RANKS)
    ranks[b"\\xff"] = 256  # displays like the single byte 0xff
    ranks[b"<|endoftext|>"] = 257  # displays like the special token
    tok = BPETokenizer(ranks)
    assert len(set(tok.vocab.tokens)) == len(tok.vocab) == 259
    assert tok.vocab.tokens[255] == "\\xff" and tok.vocab.tokens[258] == ENDOFTEXT
    assert tok.decode(tok.encode("<|endoftext|>\\xff")) == "<|endoftext|>\\xff"


def test_bpe_custom_and_no_special_tokens():
    tok = BPETokenizer.train(CORPUS, vocab_size=256 + 5, special_tokens=())
    assert tok.vocab.bos_id is None and tok.n_merges == 5
    tok = BPETokenizer.train(CORPUS, vocab_size=256 + 5 + 2, special_tokens=[ENDOFTEXT, "<|pad|>"])
    assert tok.vocab.token(len(tok.vocab) - 1) == "<|pad|>" and tok.n_merges == 5


@given(st.text(max_size=40))
def test_bpe_save_load_identical(tmp_path_factory, bpe, s):
    folder = tmp_path_factory.mktemp("bpe")
    from_json = load_tokenizer(bpe.save(folder / "bpe.json"))
    from_tiktoken = load_tokenizer(bpe.save(folder / "bpe.tiktoken"))
    assert isinstance(from_json, BPETokenizer) and isinstance(from_tiktoken, TiktokenTokenizer)
    assert from_json.vocab == bpe.vocab == from_tiktoken.vocab
    assert from_json.encode(s) == bpe.encode(s) == from_tiktoken.encode(s)


@pytest.mark.parametrize("bad", [0, 255, 256])
def test_bpe_vocab_size_too_small(bad):
    with pytest.raises(InputError, match="vocab_size") as info:
        BPETokenizer.train(CORPUS, vocab_size=bad)
    assert "257" in str(info.value)


@pytest.mark.parametrize("bad", [300.0, 256.5, "300", True, None])
def test_bpe_vocab_size_not_an_integer(bad):
    """A float (even a whole one) is not a size: the message says integer, not 'too small'."""
    with pytest.raises(InputError, match=f"vocab_size must be an integer, got {bad!r}"):
        BPETokenizer.train(CORPUS, vocab_size=bad)


@pytest.mark.parametrize("texts", ["", [], [""], ["", ""]])
def test_bpe_empty_text(texts):
    with pytest.raises(InputError, match="empty"):
        BPETokenizer.train(texts, vocab_size=300)


def test_bpe_bad_pattern_and_texts():
    with pytest.raises(InputError, match="pattern"):
        BPETokenizer.train(CORPUS, vocab_size=300, pattern="(unclosed")
    with pytest.raises(InputError, match="str"):
        BPETokenizer.train([b"bytes"], vocab_size=300)
    with pytest.raises(NotFittedError):
        BPETokenizer().encode("a")


def test_bpe_decode_bad_ids(bpe):
    with pytest.raises(TokenIdError, match=str(len(bpe.vocab))):
        bpe.decode([len(bpe.vocab)])
    with pytest.raises(TokenIdError):
        bpe.decode([-1])


# ----------------------------------------------------------------------------- .tiktoken files
@given(st.dictionaries(st.binary(min_size=2, max_size=6), st.just(0), max_size=20))
def test_tiktoken_file_round_trip(tmp_path_factory, extra):
    ranks = dict(BYTE_RANKS)
    for token in extra:
        ranks.setdefault(token, len(ranks))
    path = write_tiktoken_file(tmp_path_factory.mktemp("tt") / "x.tiktoken", ranks)
    assert read_tiktoken_file(path) == ranks


@given(st.text(max_size=60))
def test_tiktoken_file_tokenizer_round_trip(tmp_path_factory, bpe, s):
    path = write_tiktoken_file(tmp_path_factory.mktemp("tt") / "mine.tiktoken", bpe.mergeable_ranks_)
    tok = TiktokenTokenizer(path)
    assert tok.decode(tok.encode(s)) == s
    assert tok.encode(s) == bpe.encode(s)


def test_tiktoken_file_is_reread_after_edit(tmp_path):
    path = tmp_path / "e.tiktoken"
    write_tiktoken_file(path, BYTE_RANKS)
    assert len(TiktokenTokenizer(path).encode("ab")) == 2
    write_tiktoken_file(path, {**BYTE_RANKS, b"ab": 256})
    assert TiktokenTokenizer(path).encode("ab") == [256]


def _line(token: bytes, rank) -> bytes:
    return base64.b64encode(token) + b" " + str(rank).encode()


@pytest.mark.parametrize("bad_line", [b"QQ==", b"QQ== 1 2", b"!!notbase64 300", b"QUI= x", b"QUI= -3",
                                      _line(b"\x00", 999), _line(b"zz", 0)])
def test_malformed_tiktoken_line_names_the_line(tmp_path, bad_line):
    lines = [_line(t, r) for t, r in BYTE_RANKS.items()]
    lines.insert(10, bad_line)
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(FileFormatError, match="line 11") as info:
        TiktokenTokenizer(path)
    assert info.value.line == 11


def test_tiktoken_file_missing_bytes_and_empty(tmp_path):
    path = tmp_path / "partial.tiktoken"
    write_tiktoken_file(path, {t: r for t, r in BYTE_RANKS.items() if t not in (b"a", b"\xff")})
    with pytest.raises(TokenizerError, match="2 of the 256") as info:
        TiktokenTokenizer(path)
    assert "0x61" in str(info.value) and "0xff" in str(info.value)
    (tmp_path / "empty.tiktoken").write_bytes(b"\n\n")
    with pytest.raises(FileFormatError, match="no tokens"):
        TiktokenTokenizer(tmp_path / "empty.tiktoken")


def test_unreadable_tokenizer_files(tmp_path):
    with pytest.raises(SeqProbFileError, match="does not exist"):
        TiktokenTokenizer(tmp_path / "missing.tiktoken")
    with pytest.raises(SeqProbFileError, match="cannot read"):
        read_tiktoken_file(tmp_path)  # a folder
    with pytest.raises(SeqProbFileError, match="missing.json"):
        load_tokenizer(tmp_path / "missing.json")
    (tmp_path / "latin1.json").write_bytes(b"\xff\xfe{")
    (tmp_path / "notjson.json").write_text("{not json")
    (tmp_path / "notype.json").write_text('{"vocab": {}}')
    (tmp_path / "badvocab.json").write_text('{"type": "char", "vocab": {"tokens": ["a", "a"]}}')
    (tmp_path / "badranks.json").write_text('{"type": "bpe", "name": "x", "pattern": "x", '
                                            '"mergeable_ranks": [["!!", 0]], "special_tokens": {}}')
    for name in ("latin1", "notjson", "notype", "badranks"):
        with pytest.raises(FileFormatError, match=name):
            load_tokenizer(tmp_path / f"{name}.json")
    with pytest.raises(InputError, match="duplicate token 'a'"):
        load_tokenizer(tmp_path / "badvocab.json")
    (tmp_path / "kind.json").write_text('{"type": "sentencepiece"}')
    with pytest.raises(UnknownTokenizerError, match="sentencepiece"):
        load_tokenizer(tmp_path / "kind.json")


def test_build_encoding_guards_tiktoken_panics():
    with pytest.raises(TokenizerError, match="256"):
        build_encoding("x", GPT2_PATTERN, {b"a": 0}, {})
    with pytest.raises(TokenizerError, match="share a rank"):
        build_encoding("x", GPT2_PATTERN, {**BYTE_RANKS, b"ab": 5}, {})
    with pytest.raises(TokenizerError, match="already the rank"):
        build_encoding("x", GPT2_PATTERN, BYTE_RANKS, {ENDOFTEXT: 7})
    with pytest.raises(TokenizerError, match="pattern"):
        build_encoding("x", "(unclosed", BYTE_RANKS, {})


# ----------------------------------------------------------------------------- named encodings
def test_unknown_name_lists_known_names():
    with pytest.raises(UnknownTokenizerError, match="cl100k_base") as info:
        TiktokenTokenizer("gpt5_base")
    assert isinstance(info.value, KeyError) and "gpt5_base" in str(info.value)


@pytest.mark.parametrize("name", sorted(KNOWN_ENCODINGS))
def test_named_encoding_not_cached_says_how_to_provide_it(tmp_path, monkeypatch, name):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(UnknownTokenizerError) as info:
        TiktokenTokenizer(name)
    url = KNOWN_ENCODINGS[name]["files"][0][0]
    msg = str(info.value)
    assert name in msg and url in msg and "TIKTOKEN_CACHE_DIR" in msg and ".tiktoken" in msg
    assert hashlib.sha1(url.encode()).hexdigest() in msg


def _fake_cache(tmp_path, monkeypatch, ranks, url=KNOWN_ENCODINGS["r50k_base"]["files"][0][0]):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    write_tiktoken_file(tmp_path / hashlib.sha1(url.encode()).hexdigest(), ranks)


@pytest.mark.parametrize("name", ["gpt2", "r50k_base"])
def test_named_encoding_from_fake_cache(tmp_path, monkeypatch, bpe, name):
    _fake_cache(tmp_path, monkeypatch, bpe.mergeable_ranks_)
    tok = TiktokenTokenizer(name)
    assert tok.vocab.bos == tok.vocab.eos == ENDOFTEXT and tok.vocab.eos_id == 50256
    assert len(tok.vocab) == 50257 and tok.encoding_.name == name
    for text in CORPUS[:5]:
        assert tok.encode(text) == bpe.encode(text) and tok.decode(tok.encode(text)) == text
    with pytest.raises(TokenIdError, match="unused"):
        tok.decode([1000])
    # saved by name, loaded back from the cache; an edited pattern is saved in full
    path = tok.save(tmp_path / "named.json")
    assert json.loads(path.read_text()) == {"type": "tiktoken", "name": name}
    assert load_tokenizer(path).encode(CORPUS[3]) == tok.encode(CORPUS[3])
    custom = TiktokenTokenizer(name, pattern=r"\S+|\s+")
    assert "mergeable_ranks" in json.loads(custom.save(tmp_path / "custom.json").read_text())
    assert load_tokenizer(tmp_path / "custom.json").encode(CORPUS[3]) == custom.encode(CORPUS[3])


def test_named_cache_file_is_the_one_tiktoken_reads(tmp_path, monkeypatch):
    import tiktoken.load

    url = KNOWN_ENCODINGS["cl100k_base"]["files"][0][0]
    _fake_cache(tmp_path, monkeypatch, BYTE_RANKS, url)

    def no_download(blobpath):
        raise AssertionError(f"tiktoken would download {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    assert tiktoken.load.read_file_cached(url) == (tmp_path / expected_cache_path(url).name).read_bytes()
    assert expected_cache_path(url).parent == tmp_path


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    assert tiktoken_cache_dir().name == "data-gym-cache"
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path / "dg"))
    assert tiktoken_cache_dir() == tmp_path / "dg"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tt"))
    assert tiktoken_cache_dir() == tmp_path / "tt"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert tiktoken_cache_dir() is None and expected_cache_path("u") is None


def test_gpt2_from_cached_data_gym_merges(tmp_path, monkeypatch):
    """tiktoken's gpt2 reads GPT-2's vocab.bpe; seqprob reads the cached copy the same way."""
    import tiktoken.load

    merges = []
    ranks_by_data_gym = _to_data_gym_order(_naive_bpe(CORPUS, 30, merges=merges))
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    to_char = {b: chr(b) for b in printable}
    to_char.update({b: chr(256 + n) for n, b in enumerate(b for b in range(256) if b not in printable)})
    vocab_bpe = "#version: 0.2\n" + "".join(f"{''.join(to_char[c] for c in a)} {''.join(to_char[c] for c in b)}\n"
                                            for a, b in merges)
    encoder = {"".join(to_char[c] for c in t): r for t, r in ranks_by_data_gym.items()}
    (tmp_path / "vocab.bpe").write_text(vocab_bpe, encoding="utf-8")
    (tmp_path / "encoder.json").write_text(json.dumps(encoder), encoding="utf-8")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    try:
        expected = tiktoken.load.data_gym_to_mergeable_bpe_ranks(str(tmp_path / "vocab.bpe"),
                                                                 str(tmp_path / "encoder.json"))
    except ImportError:  # the reference: older tiktoken reads even local files through blobfile
        pytest.skip("tiktoken.load (the reference) needs blobfile in this version of tiktoken")
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    url = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe"
    (cache / hashlib.sha1(url.encode()).hexdigest()).write_text(vocab_bpe, encoding="utf-8")
    assert TiktokenTokenizer("gpt2").mergeable_ranks_ == expected


def _to_data_gym_order(ranks):
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    order = printable + [b for b in range(256) if b not in printable]
    out = {bytes([b]): i for i, b in enumerate(order)}
    out.update({t: r for t, r in ranks.items() if len(t) > 1})
    return out


def test_known_encodings_match_tiktoken_ext(monkeypatch):
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: dict(BYTE_RANKS))
    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: dict(BYTE_RANKS))
    for name, spec in KNOWN_ENCODINGS.items():
        theirs = openai_public.ENCODING_CONSTRUCTORS[name]()
        assert theirs["pat_str"] == spec["pattern"], name
        assert theirs["special_tokens"] == spec["special_tokens"], name


def test_gpt2_and_r50k_share_ranks_urls():
    assert KNOWN_ENCODINGS["gpt2"]["files"] == KNOWN_ENCODINGS["r50k_base"]["files"]


def test_errors_are_seqprob_errors():
    for exc in (UnknownTokenizerError, FileFormatError, SeqProbFileError, TokenizerError):
        assert issubclass(exc, SeqProbError)


def test_parse_tiktoken_blank_lines_and_duplicates():
    data = b"\n".join(_line(t, r) for t, r in BYTE_RANKS.items()) + b"\n\n"
    assert parse_tiktoken(data) == BYTE_RANKS
    with pytest.raises(FileFormatError, match="appears twice"):
        parse_tiktoken(data + _line(b"a", 300))


# ----------------------------------------------------------------------------- lazy import, CLI
def test_import_does_not_load_tiktoken_or_matplotlib():
    code = ("import seqprob, seqprob.tokenizers, sys; "
            "print(*[m in sys.modules for m in ('tiktoken', 'matplotlib', 'regex')]); "
            "print(len(seqprob.__all__), all(hasattr(seqprob, n) for n in seqprob.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    loaded, (n_names, all_there) = out.stdout.splitlines()[0].split(), out.stdout.splitlines()[1].split()
    assert loaded == ["False", "False", "False"]
    assert all_there == "True" and int(n_names) <= 50  # a small, importable public API (submodules hold the rest)


def test_cli_tokenize_formats(capsys, tmp_path, bpe):
    from seqprob.app.cli import main

    assert main(["tokenize", "the cat sat", "the dog", "--tokenizer", "word", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["token"] for r in rows] == ["the", "cat", "sat", "the", "dog"]
    assert [r["seq"] for r in rows] == [0, 0, 0, 1, 1] and rows[3]["token_id"] == rows[0]["token_id"]
    assert main(["tokenize", "ab", "-t", "char", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "seq,position,token_id,token"
    path = bpe.save(tmp_path / "bpe.json")
    assert main(["tokenize", "the cat ☃", "-t", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["seq", "position", "token_id", "token"] and len(out) == 1 + len(bpe.encode("the cat ☃"))


@pytest.mark.parametrize("spec,needle", [("gpt5_base", "gpt5_base"), ("missing.json", "missing.json")])
def test_cli_tokenize_bad_tokenizer(capsys, spec, needle):
    from seqprob.app.cli import main

    assert main(["tokenize", "x", "--tokenizer", spec]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
