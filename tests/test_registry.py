"""sp.load_model(path): the registry of model formats and classes."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import seqprob as sp
from seqprob import registry
from seqprob.errors import CheckpointError, InputError, SeqProbFileError

HF_TINY = Path(__file__).parent / "fixtures" / "hf_gpt2" / "tiny"
KENLM = Path(__file__).parent / "fixtures" / "kenlm" / "genesis.o2.arpa.gz"
LINES = ["a b a", "b a b b", "a a b"]


def _tiny_gpt(tok):
    config = sp.GPTConfig(vocab_size=len(tok.vocab), block_size=8, n_layer=1, n_head=1, n_embd=4)
    return sp.GPT(config, seed=3, tokenizer=tok)


def test_each_builtin_format_is_recognised_and_loads_the_same_model(tmp_path):
    tok = sp.WhitespaceTokenizer.fit(LINES)
    with sp.ngram.expected_discount_fallback():
        kn = sp.ngram.KneserNey(order=2).fit(LINES, tokenizer=tok)
    sp.write_arpa(kn, tmp_path / "kn.arpa")
    gpt = _tiny_gpt(tok)
    gpt.save(tmp_path / "ckpt")
    ids = [tok.vocab.bos_id, *tok.encode("a b a")]
    arpa = sp.load_model(tmp_path / "kn.arpa")
    assert isinstance(arpa, sp.ArpaModel)
    np.testing.assert_allclose(arpa.logprobs(ids), kn.logprobs(ids), atol=1e-5)
    loaded = sp.load_model(str(tmp_path / "ckpt"))
    assert type(loaded) is sp.GPT
    np.testing.assert_array_equal(loaded.logprobs(ids), gpt.logprobs(ids))
    assert isinstance(sp.load_model(KENLM), sp.ArpaModel)


def test_hf_folder_and_grammar_and_default(tmp_path):
    assert isinstance(sp.load_model(HF_TINY), sp.GPT)
    spec = tmp_path / "g.json"
    sp.toy_english().to_json(spec)
    assert sp.load_model(spec).vocab == sp.toy_english().vocab
    assert sp.load_model().vocab == sp.default_model().vocab == sp.toy_english().vocab


def test_missing_and_unknown_paths_raise_named_errors(tmp_path):
    with pytest.raises(SeqProbFileError, match="nope.arpa"):
        sp.load_model(tmp_path / "nope.arpa")
    odd = tmp_path / "model.xyz"
    odd.write_text("?")
    with pytest.raises(InputError, match=r"model\.xyz.*arpa.*seqprob-checkpoint"):
        sp.load_model(odd)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="cannot tell"):
        sp.load_model(tmp_path / "empty")


def test_a_user_format_joins_the_registry(tmp_path):
    path = tmp_path / "words.uniform"
    path.write_text("x y z")
    registry.register_model_format("uniform-test", lambda p: p.suffix == ".uniform",
                                   lambda p: sp.UniformModel(sp.WhitespaceTokenizer.fit([p.read_text()]).vocab))
    try:
        model = sp.load_model(path)
        assert isinstance(model, sp.UniformModel) and "y" in model.vocab
    finally:
        registry._FORMATS.pop("uniform-test")
    with pytest.raises(InputError, match="callables"):
        registry.register_model_format("bad", None, print)


def test_binary_ngram_files_are_registered_by_their_module(tmp_path):
    from seqprob.errors import FileFormatError
    from seqprob.ngram import binary

    assert "seqprob.ngram.binary" in registry._BUILTIN_FAMILIES
    assert {f.name: f for f in registry.model_formats()}["sqlm"].load is binary.load_ngram
    model = sp.ngram.WittenBell(order=2).fit(LINES)
    loaded = sp.load_model(model.save(tmp_path / "m.sqlm"))
    assert isinstance(loaded, sp.ArpaModel) and loaded.tables_.sizes() == model.tables_.sizes()
    (tmp_path / "bad.sqlm").write_bytes(b"\0")
    with pytest.raises(FileFormatError, match="not a seqprob n-gram binary"):
        sp.load_model(tmp_path / "bad.sqlm")


def test_checkpoints_name_their_class_and_subclasses_load_as_the_registered_base(tmp_path):
    tok = sp.WhitespaceTokenizer.fit(LINES)

    class MyGPT(sp.GPT):
        pass

    folder = MyGPT(_tiny_gpt(tok).config, seed=0, tokenizer=tok).save(tmp_path / "m")
    assert '"class": "GPT"' in (Path(folder) / "config.json").read_text()
    assert type(sp.load_model(folder)) is sp.GPT
    with pytest.raises(InputError, match="NoSuchModel"):
        registry.model_class("NoSuchModel")
    with pytest.raises(InputError, match="not a registered model class"):
        registry.class_name(dict)


def test_unknown_class_in_a_checkpoint_is_a_checkpoint_error(tmp_path):
    import json

    tok = sp.WhitespaceTokenizer.fit(LINES)
    folder = Path(_tiny_gpt(tok).save(tmp_path / "m"))
    header = json.loads((folder / "config.json").read_text())
    header["class"] = "Martian"
    (folder / "config.json").write_text(json.dumps(header))
    manifest = json.loads((folder / "manifest.json").read_text())
    from seqprob.gpt.checkpoint import _file_facts

    manifest["files"]["config.json"] = _file_facts(folder / "config.json")  # a consistent file
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="Martian"):
        sp.load_model(folder)


def test_the_report_imports_nothing_from_the_cli():
    code = ("import sys, seqprob.app.report; "
            "print(sorted(m for m in sys.modules if m.startswith('seqprob.app.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_library_module_imports_the_application():
    import re

    root = Path(sp.__file__).parent
    imports_app = re.compile(r"^\s*(from\s+(\.+|seqprob\.)app\b|import\s+seqprob\.app\b)", re.M)
    library = [p for p in root.rglob("*.py") if p.parts[len(root.parts)] not in ("app", "__main__.py")]
    assert len(library) > 40
    assert [str(p) for p in library if imports_app.search(p.read_text(encoding="utf-8"))] == []


def test_builtin_format_order_does_not_depend_on_what_was_imported_first():
    """``import seqprob`` is lazy, so modules register their formats in whatever order a
    program uses them; load_model still tries the built-ins in one fixed order."""
    import subprocess
    import sys

    code = ("import importlib, re, sys, tempfile\n"
            "for m in sys.argv[1:]: importlib.import_module(m)\n"
            "import seqprob.registry as r\n"
            "odd = tempfile.NamedTemporaryFile(suffix='.xyz', delete=False).name\n"
            "try: r.load_model(odd)\n"
            "except Exception as e: named = re.findall(r'(?:; |formats: )([a-z-]+): ', str(e))\n"
            "assert named == [f.name for f in r.model_formats()], named\n"
            "print(' '.join(f.name for f in r.model_formats()))\n")
    orders = {subprocess.run([sys.executable, "-c", code, *first], check=True, capture_output=True,
                             text=True).stdout.strip()
              for first in ([], ["seqprob.gpt.hf"], ["seqprob.truth", "seqprob.gpt.checkpoint"])}
    assert orders == {"arpa sqlm grammar seqprob-checkpoint hf"}
