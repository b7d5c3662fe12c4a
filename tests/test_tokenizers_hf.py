"""HFTokenizer against transformers' PreTrainedTokenizerFast on the same tokenizer.json files.

The files and the expected ids come from tests/fixtures/make_hf_tokenizers.py (run with a
Python that has transformers); this test needs only the ``tokenizers`` library.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.errors import FileFormatError, InputError, SeqProbError, SeqProbFileError
from seqprob.tokenizers.hf import HFTokenizer
from budget import examples

FIXTURES = Path(__file__).parent / "fixtures"
HF = FIXTURES / "hf_tokenizers"
EXPECTED = json.loads((HF / "expected.json").read_text(encoding="utf-8"))
NAMES = ["gpt2", "llama3", "qwen2", "llama2", "gpt2_tiny", "gemma3", "qwen3"]
BOUNDARY = {"gpt2": "leading_space", "llama3": "leading_space", "qwen2": "leading_space",
            "llama2": "leading_space", "gpt2_tiny": "none", "gemma3": "leading_space", "qwen3": "leading_space"}
NO_BOS = ("qwen2", "qwen3")  # tokenizer_config.json: bos_token null -> config.json bos_token_id
UNK = {"llama2": 0, "gemma3": 3}  # the others are byte-level BPE, which has no unknown token


@pytest.fixture(scope="module", params=NAMES)
def case(request):
    name = request.param
    return name, HFTokenizer(HF / name / "tokenizer.json"), EXPECTED[name]


def test_ids_match_transformers(case):
    name, tok, exp = case
    assert len(tok.vocab) == exp["vocab_size"]
    for c in exp["cases"]:
        assert tok.encode(c["text"]) == c["ids"], (name, c["text"])
        assert tok.token_strings(c["ids"]) == c["tokens"]
        assert tok.decode(c["ids"]) == c["decoded"]
    assert tok.encode_batch([c["text"] for c in exp["cases"]]) == [c["ids"] for c in exp["cases"]]


def test_special_tokens_match_transformers(case):
    name, tok, exp = case
    assert tok.vocab.bos_id == exp["bos_token_id"] or (name in NO_BOS and exp["bos_token_id"] is None)
    assert tok.vocab.eos_id == exp["eos_token_id"]
    if name in NO_BOS:
        cfg = json.loads((HF / name / "config.json").read_text())
        assert tok.vocab.bos_id == cfg["bos_token_id"]
    if name in UNK:
        assert tok.vocab.unk_id == exp["unk_token_id"] == UNK[name]
    else:  # byte-level BPE has no unknown token (GPT-2's config names <|endoftext|>, not an OOV)
        assert tok.vocab.unk_id is None


def test_word_boundary_detected(case):
    name, tok, _ = case
    assert tok.word_boundary == BOUNDARY[name]


def test_pieces_cover_the_text(case):
    name, tok, exp = case
    for c in exp["cases"]:
        pieces = tok.pieces(c["text"])
        assert len(pieces) == len(c["ids"])
        if name != "gpt2_tiny":  # the tiny one drops characters it cannot encode
            assert "".join(pieces) == c["text"], (name, c["text"])


def test_save_and_load_roundtrip(case, tmp_path):
    name, tok, exp = case
    path = tok.save(tmp_path / "tok.json")
    back = sp.load_tokenizer(path)
    assert isinstance(back, HFTokenizer)
    assert back.vocab.tokens == tok.vocab.tokens
    assert (back.vocab.bos_id, back.vocab.eos_id, back.vocab.unk_id) == (
        tok.vocab.bos_id, tok.vocab.eos_id, tok.vocab.unk_id)
    assert back.word_boundary == tok.word_boundary
    for c in exp["cases"]:
        assert back.encode(c["text"]) == c["ids"]


@settings(max_examples=examples(40), deadline=None)
@given(text=st.text(max_size=40))
def test_byte_level_roundtrip_any_text(text):
    tok = _cached("llama3")
    assert tok.decode(tok.encode(text)) == text


_CACHE = {}


def _cached(name):
    if name not in _CACHE:
        _CACHE[name] = HFTokenizer(HF / name)
    return _CACHE[name]


def test_load_tokenizer_reads_raw_hf_json():
    tok = sp.load_tokenizer(HF / "gpt2" / "tokenizer.json")
    assert isinstance(tok, HFTokenizer) and tok.vocab.bos == "<|endoftext|>"


def test_constructor_overrides(tmp_path):
    tok = HFTokenizer(HF / "gpt2_tiny", word_boundary="leading_space", bos="the", vocab_size=64)
    assert tok.word_boundary == "leading_space" and tok.vocab.bos == "the" and len(tok.vocab) == 64
    assert tok.vocab.tokens[63] == "<|unused_63|>"
    with pytest.raises(InputError):
        HFTokenizer(HF / "gpt2_tiny", word_boundary="left")
    with pytest.raises(InputError):
        HFTokenizer(HF / "gpt2_tiny", bos="<nope>")
    with pytest.raises(InputError):
        HFTokenizer(HF / "gpt2_tiny", vocab_size=10)


@pytest.mark.parametrize("content", ["{not json", '{"model": {"type": "BPE", "vocab": 3}}',
                                     '{"version": "1.0", "model": {"type": "Nope"}, "added_tokens": []}'])
def test_bad_tokenizer_json(tmp_path, content):
    path = tmp_path / "tokenizer.json"
    path.write_text(content)
    with pytest.raises(FileFormatError) as info:
        HFTokenizer(path)
    assert isinstance(info.value, SeqProbError) and str(path) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(SeqProbFileError):
        HFTokenizer(tmp_path)


def test_cli_scores_hf_folder_with_tokenizer_json(tmp_path, capsys):
    from seqprob.app.cli import main
    from seqprob.gpt import GPT

    folder = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "hf_gpt2" / "tiny", folder)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(HF / "gpt2_tiny" / f, folder / f)
    assert main(["score", "--model", str(folder), "--format", "json", "the cat sat on the mat"]) == 0
    rows = json.loads(capsys.readouterr().out)
    tok = HFTokenizer(folder)
    ids = tok.encode("the cat sat on the mat")
    assert [r["token_id"] for r in rows] == ids + [tok.vocab.eos_id]
    model = GPT.from_hf(folder, tokenizer=tok)
    seq = np.array([tok.vocab.bos_id] + ids + [tok.vocab.eos_id])
    np.testing.assert_allclose([r["logprob"] for r in rows], model.token_logprobs(seq), rtol=1e-5, atol=1e-6)


def test_import_seqprob_does_not_import_tokenizers():
    import subprocess
    import sys

    code = "import sys, seqprob; assert 'tokenizers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)


def test_special_tokens_map_names_bos_when_tokenizer_config_does_not(tmp_path):
    import json
    import shutil

    src = Path(__file__).parent / "fixtures" / "hf_tokenizers" / "qwen2"
    shutil.copy(src / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": None, "eos_token": "<|im_end|>"}))
    (tmp_path / "special_tokens_map.json").write_text(json.dumps({"bos_token": {"content": "<|endoftext|>"}}))
    tok = HFTokenizer(tmp_path / "tokenizer.json")
    assert tok.vocab.bos == "<|endoftext|>" and tok.vocab.eos == "<|im_end|>"


# ---------------------------------------------------------------- Gemma 3 and Qwen3 layouts
def test_folder_tokenizer_gemma3_cuts_the_image_token_off():
    """gemma-3-1b / 270m: config.json's vocab_size is one short of the tokenizer
    (<image_soft_token> is the id past the text model's table)."""
    from seqprob.tokenizers.hf import folder_tokenizer

    cfg = json.loads((HF / "gemma3" / "config.json").read_text())
    tok = folder_tokenizer(HF / "gemma3")
    assert len(tok.vocab) == cfg["vocab_size"] == EXPECTED["gemma3"]["vocab_size"] - 1
    assert (tok.vocab.bos, tok.vocab.eos, tok.vocab.unk) == ("<bos>", "<eos>", "<unk>")
    assert (tok.vocab.bos_id, tok.vocab.eos_id, tok.vocab.unk_id) == (2, 1, 3) == (cfg["bos_token_id"], 1, 3)
    for c in EXPECTED["gemma3"]["cases"]:
        assert tok.encode(c["text"]) == c["ids"]
    with pytest.raises(InputError, match="image_soft_token"):
        tok.encode("an image: <image_soft_token>")
    with pytest.raises(InputError):
        HFTokenizer(HF / "gemma3", vocab_size=100)  # would cut pieces of the model's vocabulary


def test_folder_tokenizer_qwen3_has_no_bos_in_the_tokenizer():
    """Qwen3: tokenizer_config.json says bos_token null; config.json's bos_token_id names
    <|endoftext|>, its vocab_size pads the tokenizer."""
    from seqprob.tokenizers.hf import folder_tokenizer

    cfg = json.loads((HF / "qwen3" / "config.json").read_text())
    tok = folder_tokenizer(HF / "qwen3")
    assert len(tok.vocab) == cfg["vocab_size"] > EXPECTED["qwen3"]["vocab_size"]
    assert EXPECTED["qwen3"]["bos_token_id"] is None  # transformers: the tokenizer has no BOS
    assert (tok.vocab.bos, tok.vocab.eos, tok.vocab.unk) == ("<|endoftext|>", "<|im_end|>", None)
    assert (tok.vocab.bos_id, tok.vocab.eos_id) == (cfg["bos_token_id"], cfg["eos_token_id"])
    think = tok.encode("<think>\nhmm\n</think>")
    assert tok.token_strings([think[0], think[-1]]) == ["<think>", "</think>"]


def test_gemma3_special_tokens_map_names_bos_eos(tmp_path):
    """A tokenizer_config.json without the names: special_tokens_map.json's {"content": ...}."""
    for f in ("tokenizer.json", "special_tokens_map.json"):
        shutil.copy(HF / "gemma3" / f, tmp_path / f)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True}))
    tok = HFTokenizer(tmp_path)
    assert (tok.vocab.bos, tok.vocab.eos, tok.vocab.unk) == ("<bos>", "<eos>", "<unk>")


def test_pieces_keep_what_nfc_folds():
    """NFC composes "e" + U+0301 into one character whose offsets leave the mark out: the
    pieces still spell the text."""
    tok = _cached("qwen3")
    for text in ["e\u0301", "cafe\u0301 A\u030a x", "\u1100\u1161 jamo"]:
        pieces = tok.pieces(text)
        assert "".join(pieces) == text and len(pieces) == len(tok.encode(text))


_MARKERS = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<|im_start|>", "<|im_end|>",
            "<|endoftext|>", "<think>", "</think>", "▁"]
_RUNS = st.builds(lambda c, n: c * n, st.sampled_from([" ", "\n", "\t", "\r\n", " \t", "\u00a0", "\u3000"]),
                  st.integers(1, 9))
_TEXTS = st.lists(st.one_of(st.text(max_size=8), _RUNS, st.sampled_from(_MARKERS)), max_size=8).map("".join)


@pytest.mark.parametrize("name", ["gemma3", "qwen3"])
@settings(max_examples=examples(40), deadline=None)
@given(text=_TEXTS)
def test_matches_the_tokenizers_library_on_any_text(name, text):
    """Random unicode with whitespace runs and special tokens: the ids of the ``tokenizers``
    library (never its post-processor's BOS), pieces that spell the text, and decode giving
    the text back (Gemma: byte fallback, spaces for "▁"; Qwen3: NFC)."""
    import unicodedata

    from tokenizers import Tokenizer as Rust

    tok = _cached(name)
    if name not in _RUST:
        _RUST[name] = Rust.from_file(str(HF / name / "tokenizer.json"))
    ids = tok.encode(text)
    assert ids == _RUST[name].encode(text, add_special_tokens=False).ids
    assert tok.encode_batch([text, text]) == [ids, ids]
    pieces = tok.pieces(text)
    assert len(pieces) == len(ids) and "".join(pieces) == text
    want = text.replace("▁", " ") if name == "gemma3" else unicodedata.normalize("NFC", text)
    assert tok.decode(ids) == want


_RUST = {}
