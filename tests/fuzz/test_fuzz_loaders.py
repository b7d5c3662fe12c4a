"""Fuzzing every loader of the formats of docs/formats.md: tokenizer JSON, ``.tiktoken``,
vocabulary, safetensors, checkpoint manifest, grammar specs. Each mutation of a valid file
must load to a working object or raise a SeqProbError naming the field; nothing else."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import seqprob as sp
from seqprob.gpt import safetensors as st
from seqprob.gpt.checkpoint import load_checkpoint, save_checkpoint
from seqprob.tokenizers import load_tokenizer
from seqprob.truth import ProbabilisticGrammar

from _mutate import dumps, mutated_bytes, mutated_json, outcome

FUZZ = settings(max_examples=int(os.environ.get("SEQPROB_FUZZ_EXAMPLES", 30)), deadline=None,
                derandomize=os.environ.get("SEQPROB_FUZZ_RANDOM") is None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
PROBE = "hello wörld \x00 😀  the cat"
CORPUS = ["the cat sat on the mat", "the dog ate the cat's food", "héllo wörld 123"] * 4


def _named_field(exc, description: str, tree) -> None:
    """A schema error names the file's field: the key mutated or one above it."""
    text = str(exc)
    try:
        path = json.loads(description.split(" at ", 1)[1].replace("'", '"')) if " at " in description else []
    except ValueError:  # a key holding a quote: nothing to compare
        path = []
    keys = [k for k in path if isinstance(k, str)]
    if keys:
        assert any(k in text for k in keys) or "JSON" in text or "vocab" in text or "token" in text, (
            f"{text!r} does not name any of {keys}")


@pytest.fixture(scope="module")
def tokenizers():
    bpe = sp.BPETokenizer.train(CORPUS, vocab_size=270)
    return {"whitespace": sp.WhitespaceTokenizer.fit(CORPUS), "char": sp.CharTokenizer.fit(CORPUS),
            "bpe": bpe}


def _use(tok):
    """A loaded tokenizer must work: encode, decode, and round-trip where it promises to."""
    ids = tok.encode(PROBE)
    text = tok.decode(ids)
    if isinstance(tok, sp.BPETokenizer):
        assert text == PROBE
    return tok


@pytest.mark.parametrize("kind", ["whitespace", "char", "bpe"])
def test_tokenizer_json_mutations(kind, tokenizers, tmp_path_factory):
    valid = json.loads(tokenizers[kind].save(tmp_path_factory.mktemp("t") / "t.json").read_text())
    folder = tmp_path_factory.mktemp("m")

    @FUZZ
    @given(mutated_json(valid))
    def check(mutation):
        tree, description = mutation
        path = folder / "t.json"
        path.write_text(dumps(tree))
        status, value = outcome(lambda: _use(load_tokenizer(path)))
        if status == "error":
            _named_field(value, description, tree)

    check()


def test_tiktoken_json_mutations(tokenizers, tmp_path):
    file = tokenizers["bpe"].save(tmp_path / "r.tiktoken")
    valid = json.loads(sp.TiktokenTokenizer(file).save(tmp_path / "t.json").read_text())

    @FUZZ
    @given(mutated_json(valid))
    def check(mutation):
        (tmp_path / "m.json").write_text(dumps(mutation[0]))
        outcome(lambda: _use(load_tokenizer(tmp_path / "m.json")))

    check()


def test_tiktoken_file_mutations(tokenizers, tmp_path):
    valid = tokenizers["bpe"].save(tmp_path / "r.tiktoken").read_bytes()

    @FUZZ
    @given(mutated_bytes(valid))
    def check(mutation):
        (tmp_path / "m.tiktoken").write_bytes(mutation[0])
        outcome(lambda: _use(sp.TiktokenTokenizer(tmp_path / "m.tiktoken")))

    check()


def test_tokenizer_json_bytes_mutations(tokenizers, tmp_path):
    valid = tokenizers["bpe"].save(tmp_path / "t.json").read_bytes()

    @FUZZ
    @given(mutated_bytes(valid))
    def check(mutation):
        (tmp_path / "m.json").write_bytes(mutation[0])
        outcome(lambda: _use(load_tokenizer(tmp_path / "m.json")))

    check()


@pytest.mark.parametrize("bad, field", [
    ({"type": []}, "type"),
    ({"type": "bpe", "name": "x", "pattern": "", "mergeable_ranks": [], "special_tokens": {}}, "pattern"),
    ({"type": "whitespace", "vocab": {"tokens": "abc", "bos": None, "eos": None, "unk": None}}, "tokens"),
    ([], "type"),
])
def test_tokenizer_schema_errors_name_the_field(bad, field, tmp_path):
    (tmp_path / "t.json").write_text(json.dumps(bad))
    with pytest.raises(sp.errors.SeqProbError, match=field):
        load_tokenizer(tmp_path / "t.json")


def test_bpe_file_with_special_tokens_list_duplicates_huge_rank_or_lossy_pattern(tokenizers, tmp_path):
    valid = {"type": "bpe", **tokenizers["bpe"].to_dict()}
    ranks = valid["mergeable_ranks"]
    cases = {"special_tokens": {**valid, "special_tokens": ["<|endoftext|>"]},
             "appears twice": {**valid, "mergeable_ranks": ranks + [ranks[-1]]},
             "mergeable_ranks": {**valid, "mergeable_ranks": ranks[:-1] + [[ranks[-1][0], 10**9]]},
             "does not cover": {**valid, "pattern": r"\w+"}}
    for message, data in cases.items():
        (tmp_path / "t.json").write_text(json.dumps(data))
        with pytest.raises(sp.errors.SeqProbError, match=message):
            load_tokenizer(tmp_path / "t.json")


def test_tiktoken_rank_beyond_the_limit_is_an_error_not_an_allocation(tmp_path):
    lines = [base64.b64encode(bytes([b])) + b" %d" % b for b in range(255)]
    (tmp_path / "x.tiktoken").write_bytes(b"\n".join(lines + [b"/w== 100000000"]))
    with pytest.raises(sp.errors.FileFormatError, match="100000000"):
        sp.TiktokenTokenizer(tmp_path / "x.tiktoken")


# ----------------------------------------------------------------------------- vocabulary
def test_vocab_dict_mutations():
    valid = sp.Vocab.build(["the", "cat"]).to_dict()

    @FUZZ
    @given(mutated_json(valid))
    def check(mutation):
        status, vocab = outcome(sp.Vocab.from_dict, mutation[0])
        if status == "ok":
            assert all(isinstance(t, str) and t for t in vocab.tokens)

    check()


# ----------------------------------------------------------------------------- safetensors
def _safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


@pytest.fixture(scope="module")
def safetensors_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("st") / "a.safetensors"
    st.save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.arange(3, dtype=np.int64),
                  "e": np.zeros((0, 4), np.float16), "s": np.array(2.5)}, path, metadata={"k": "v"})
    header, start = st.read_header(path)
    return path.read_bytes(), header, start


def test_safetensors_header_mutations(safetensors_file, tmp_path):
    raw, header, start = safetensors_file

    @FUZZ
    @given(mutated_json(header))
    def check(mutation):
        (tmp_path / "m.safetensors").write_bytes(_safetensors_bytes(mutation[0], raw[start:]))
        status, tensors = outcome(st.load_file, tmp_path / "m.safetensors")
        if status == "ok":
            assert all(isinstance(v, np.ndarray) for v in tensors.values())

    check()


def test_safetensors_byte_mutations(safetensors_file, tmp_path):
    raw = safetensors_file[0]

    @FUZZ
    @given(mutated_bytes(raw))
    def check(mutation):
        (tmp_path / "m.safetensors").write_bytes(mutation[0])
        outcome(st.load_file, tmp_path / "m.safetensors")

    check()


@pytest.mark.parametrize("entry, field", [
    ({"dtype": [], "shape": [3], "data_offsets": [0, 12]}, "dtype"),
    ({"dtype": {}, "shape": [3], "data_offsets": [0, 12]}, "dtype"),
    ({"dtype": "F32", "shape": [3], "data_offsets": "ab"}, "data_offsets"),
    ({"dtype": "F32", "shape": [-1, -3], "data_offsets": [0, 12]}, "shape"),
    ({"dtype": "F32", "shape": [1.5], "data_offsets": [0, 12]}, "shape"),
    ({"dtype": "F32", "shape": [2**62, 4], "data_offsets": [0, 0]}, "shape"),  # past 2**40 elements
    ({"dtype": "F32", "shape": [2**30, 4], "data_offsets": [0, 0]}, "needs"),
    ({"dtype": "F32", "shape": [3], "data_offsets": [8, 20]}, "data_offsets"),
])
def test_safetensors_entry_errors_name_the_field(entry, field, tmp_path):
    (tmp_path / "b.safetensors").write_bytes(_safetensors_bytes({"w": entry}, b"\0" * 12))
    with pytest.raises(sp.errors.CheckpointError, match=field):
        st.load_file(tmp_path / "b.safetensors")


def test_safetensors_overlapping_or_duplicate_tensors(tmp_path):
    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    shifted = {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}
    (tmp_path / "o.safetensors").write_bytes(_safetensors_bytes({"a": entry, "b": shifted}, b"\0" * 12))
    with pytest.raises(sp.errors.CheckpointError, match="overlap"):
        st.load_file(tmp_path / "o.safetensors")
    raw = b'{"a": %s, "a": %s}' % (json.dumps(entry).encode(), json.dumps(entry).encode())
    (tmp_path / "d.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 8)
    with pytest.raises(sp.errors.CheckpointError, match="twice"):
        st.load_file(tmp_path / "d.safetensors")


# ----------------------------------------------------------------------------- checkpoint manifest
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    model = sp.GPT(sp.GPTConfig(vocab_size=9, block_size=4, n_layer=1, n_head=1, n_embd=4), seed=0)
    return save_checkpoint(model, tmp_path_factory.mktemp("ck") / "ck", extra={"step": 3})


def _copy_checkpoint(src, dst):
    dst.mkdir(exist_ok=True)
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_checkpoint_manifest_mutations(checkpoint, tmp_path):
    folder = _copy_checkpoint(checkpoint, tmp_path / "ck")
    valid = json.loads((checkpoint / "manifest.json").read_text())
    (tmp_path / "outside.json").write_text("{}")

    @FUZZ
    @given(mutated_json(valid))
    def check(mutation):
        (folder / "manifest.json").write_text(dumps(mutation[0]))
        outcome(load_checkpoint, folder)

    check()


def test_checkpoint_manifest_cannot_point_outside_the_folder(checkpoint, tmp_path):
    folder = _copy_checkpoint(checkpoint, tmp_path / "ck")
    outside = tmp_path / "secret.txt"
    outside.write_text("not yours")
    manifest = json.loads((folder / "manifest.json").read_text())
    facts = {"bytes": outside.stat().st_size, "sha256": hashlib.sha256(outside.read_bytes()).hexdigest()}
    for name in ("../secret.txt", str(outside)):
        (folder / "manifest.json").write_text(json.dumps({**manifest, "files": {**manifest["files"], name: facts}}))
        with pytest.raises(sp.errors.CheckpointError, match="escapes"):
            load_checkpoint(folder)
    (folder / "link.txt").symlink_to(outside)
    (folder / "manifest.json").write_text(json.dumps({**manifest, "files": {**manifest["files"], "link.txt": facts}}))
    with pytest.raises(sp.errors.CheckpointError, match="escapes"):
        load_checkpoint(folder)


@pytest.mark.parametrize("files", [["config.json"], {"config.json": []}, {}, "x"])
def test_checkpoint_manifest_files_of_the_wrong_type(checkpoint, tmp_path, files):
    folder = _copy_checkpoint(checkpoint, tmp_path / "ck")
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "files": files}))
    with pytest.raises(sp.errors.CheckpointError, match="files|config.json"):
        load_checkpoint(folder)


def test_checkpoint_weights_mutations(checkpoint, tmp_path):
    """Byte mutations of model.safetensors with a manifest that matches them: the
    safetensors validation itself must catch what the checksum would otherwise hide."""
    folder = _copy_checkpoint(checkpoint, tmp_path / "ck")
    raw = (checkpoint / "model.safetensors").read_bytes()
    manifest = json.loads((checkpoint / "manifest.json").read_text())

    @FUZZ
    @given(mutated_bytes(raw))
    def check(mutation):
        data = mutation[0]
        (folder / "model.safetensors").write_bytes(data)
        facts = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        (folder / "manifest.json").write_text(json.dumps(
            {**manifest, "files": {**manifest["files"], "model.safetensors": facts}}))
        outcome(load_checkpoint, folder)

    check()


# ----------------------------------------------------------------------------- grammar specs
GRAMMAR = {"name": "tiny", "start": "S",
           "states": {"S": {"stop": 0.0, "arcs": [["a", 0.5, "A"], {"word": "b", "prob": 0.5, "target": "A"}]},
                      "A": {"stop": 0.5, "arcs": [["c", 0.5, "S"]]}}}


def test_grammar_spec_mutations(tmp_path):
    @FUZZ
    @given(mutated_json(GRAMMAR))
    def check(mutation):
        (tmp_path / "g.json").write_text(dumps(mutation[0]))
        status, grammar = outcome(ProbabilisticGrammar.from_json, tmp_path / "g.json")
        if status == "ok":
            assert np.isfinite(grammar.logprobs([grammar.vocab.bos_id])).any()

    check()


def test_grammar_spec_byte_mutations(tmp_path):
    valid = json.dumps(GRAMMAR).encode()

    @FUZZ
    @given(mutated_bytes(valid))
    def check(mutation):
        (tmp_path / "g.json").write_bytes(mutation[0])
        outcome(ProbabilisticGrammar.from_json, tmp_path / "g.json")

    check()


def test_grammar_too_large_for_memory_is_refused(monkeypatch):
    from seqprob.truth import _spec

    words = [f"w{i}" for i in range(300)]
    spec = {"states": {"S": {"stop": 0.5, "arcs": [[w, 0.5 / len(words), "S"] for w in words]}}}
    assert len(_spec.parse_spec(spec).arcs) == 300
    monkeypatch.setattr(_spec, "MAX_CELLS", 300)  # 1 state x 303 tokens: checked before any table
    with pytest.raises(sp.errors.GrammarError, match="too large.*limit 300"):
        _spec.parse_spec(spec)
