"""Fuzzing the loaders owned by other parts of seqprob (written against today's API; they
check the ARPA reader, ``GPT.from_hf`` and the checkpoint's config after their validation
lands): every mutation loads or raises a SeqProbError, nothing else escapes."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seqprob as sp
from seqprob.gpt import safetensors
from seqprob.gpt.checkpoint import load_checkpoint, save_checkpoint

from _mutate import dumps, mutated_bytes, mutated_json, outcome

FUZZ = settings(max_examples=int(os.environ.get("SEQPROB_FUZZ_EXAMPLES", 30)), deadline=None,
                derandomize=os.environ.get("SEQPROB_FUZZ_RANDOM") is None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
HF_TINY = Path(__file__).resolve().parents[1] / "fixtures" / "hf_gpt2" / "tiny"
LINES = ["the cat sat on the mat", "the dog sat on the mat", "a cat saw a dog"]


# ----------------------------------------------------------------------------- ARPA
@st.composite
def arpa_mutations(draw, text: bytes):
    """Line-level mutations: cut at a section, huge or negative counts, duplicated or
    reordered lines, a bad number, non-UTF-8 bytes."""
    lines = text.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(["cut", "count", "dup", "number", "junk", "swap", "bytes"]))
    if kind == "cut":
        sections = [k for k, line in enumerate(lines) if line.startswith(b"\\")] or [i]
        lines = lines[:draw(st.sampled_from(sections)) + draw(st.integers(0, 2))]
    elif kind == "count":
        counts = [k for k, line in enumerate(lines) if line.startswith(b"ngram ")] or [i]
        k = draw(st.sampled_from(counts))
        value = draw(st.sampled_from([b"0", b"-1", b"99999999999", b"1e9", b"x", b""]))
        lines[k] = lines[k].split(b"=")[0] + b"=" + value
    elif kind == "dup":
        lines.insert(i, lines[i])
    elif kind == "number":
        fields = lines[i].split(b"\t")
        fields[0] = draw(st.sampled_from([b"nan", b"inf", b"1e400", b"-1e400", b"+5", b"", b"--1"]))
        lines[i] = b"\t".join(fields)
    elif kind == "junk":
        lines[i] = draw(st.sampled_from([b"\xff\xfe", b"\x00", b"-1\t<s> <s> <s> <s> <s>", b"-1", b"\t\t"]))
    elif kind == "swap":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        return draw(mutated_bytes(text))[0]
    return b"\n".join(lines)


def test_arpa_mutations(tmp_path):
    tok = sp.WhitespaceTokenizer.fit(LINES)
    path = sp.write_arpa(sp.ngram.KneserNey(order=3).fit(LINES, tokenizer=tok), tmp_path / "m.arpa")
    text = Path(path).read_bytes()

    @FUZZ
    @given(arpa_mutations(text))
    def check(data):
        (tmp_path / "x.arpa").write_bytes(data)
        status, model = outcome(sp.read_arpa, tmp_path / "x.arpa")
        if status == "ok":
            outcome(model.logprobs, [model.vocab.bos_id])

    check()


# ----------------------------------------------------------------------------- Hugging Face import
def _hf_copy(dst: Path) -> Path:
    dst.mkdir(exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(HF_TINY / name, dst / name)
    return dst


def test_hf_config_mutations(tmp_path):
    folder = _hf_copy(tmp_path / "hf")
    valid = json.loads((HF_TINY / "config.json").read_text())

    @FUZZ
    @given(mutated_json(valid))
    def check(mutation):
        (folder / "config.json").write_text(dumps(mutation[0]))
        outcome(sp.GPT.from_hf, folder)

    check()


@pytest.mark.parametrize("config", [[], [1, 2], "gpt2", {"vocab_size": 10**12, "n_embd": 4, "n_layer": 1,
                                                           "n_head": 1, "n_positions": 4}])
def test_hf_config_of_the_wrong_shape_or_size(tmp_path, config):
    folder = _hf_copy(tmp_path / "hf")
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(sp.errors.SeqProbError):
        sp.GPT.from_hf(folder)


def test_hf_shard_index_cannot_point_outside_the_folder(tmp_path):
    folder = _hf_copy(tmp_path / "hf")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / "model.safetensors").rename(elsewhere / "model.safetensors")
    header = safetensors.read_header(elsewhere / "model.safetensors")[0]
    weight_map = {name: "../elsewhere/model.safetensors" for name in header if name != "__metadata__"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(sp.errors.SeqProbError, match="escapes|outside"):
        sp.GPT.from_hf(folder)


def test_hf_shard_index_mutations(tmp_path):
    folder = _hf_copy(tmp_path / "hf")
    header = safetensors.read_header(folder / "model.safetensors")[0]
    valid = {"metadata": {"total_size": 1}, "weight_map": {n: "model.safetensors" for n in header
                                                           if n != "__metadata__"}}

    @FUZZ
    @given(mutated_json(valid))
    def check(mutation):
        (folder / "model.safetensors.index.json").write_text(dumps(mutation[0]))
        outcome(sp.GPT.from_hf, folder)

    check()


# ----------------------------------------------------------------------------- checkpoint config
def test_checkpoint_config_mutations(tmp_path):
    model = sp.GPT(sp.GPTConfig(vocab_size=9, block_size=4, n_layer=1, n_head=1, n_embd=4), seed=0)
    folder = save_checkpoint(model, tmp_path / "ck")
    valid = json.loads((folder / "config.json").read_text())
    manifest = json.loads((folder / "manifest.json").read_text())

    @FUZZ
    @given(mutated_json(valid))
    def check(mutation):
        data = dumps(mutation[0]).encode()
        (folder / "config.json").write_bytes(data)
        facts = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        (folder / "manifest.json").write_text(json.dumps(
            {**manifest, "files": {**manifest["files"], "config.json": facts}}))
        outcome(load_checkpoint, folder)

    check()


@pytest.mark.parametrize("kwargs", [{"bias": "no"}, {"vocab_size": 10**12}, {"n_head": 0}, {"dtype": "int8"}])
def test_gpt_config_validates_its_fields(kwargs):
    base = dict(vocab_size=9, block_size=4, n_layer=1, n_head=1, n_embd=4)
    with pytest.raises(sp.errors.SeqProbError):
        sp.GPTConfig(**{**base, **kwargs})
