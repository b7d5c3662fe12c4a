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
NAMES = ["gpt2", "llama3", "qwen2", "llama2", "gpt2_tiny", "gemma3"]
BOUNDARY = {"gpt2": "leading_space", "llama3": "leading_space", "qwen2": "leading_space",
            "llama2": "leading_space", "gpt2_tiny": "none", "gemma3": "leading_space"}


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
    assert tok.vocab.bos_id == exp["bos_token_id"] or (name == "qwen2" and exp["bos_token_id"] is None)
    assert tok.vocab.eos_id == exp["eos_token_id"]
    if name == "qwen2":  # tokenizer_config.json: bos_token null -> config.json bos_token_id
        cfg = json.loads((HF / name / "config.json").read_text())
        assert tok.vocab.bos_id == cfg["bos_token_id"]
    if name in ("llama2", "gemma3"):
        assert tok.vocab.unk_id == exp["unk_token_id"] == {"llama2": 0, "gemma3": 3}[name]
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
