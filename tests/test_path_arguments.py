"""Every public function that takes a file name refuses what is not one (None, a number, a
list) with an InputError naming what it got: not Python's TypeError from os.fspath, and not
a file called 'None'."""
import numpy as np
import pytest

import seqprob as sp
from seqprob.errors import InputError
from seqprob.gpt import GPT, GPTConfig, safetensors
from seqprob.gpt.checkpoint import load_checkpoint, save_checkpoint
from seqprob.ngram.binary import save_ngram
from seqprob.tokenizers.tiktoken_io import read_tiktoken_file, write_tiktoken_file


def _kn():
    return sp.ngram.KneserNey(order=2, discount=0.5).fit(["a b", "b a"])


READERS = {
    "read_arpa": sp.read_arpa,
    "load_ngram": sp.load_ngram,
    "GPT.load": GPT.load,
    "GPT.from_hf": GPT.from_hf,
    "load_checkpoint": load_checkpoint,
    "load_tokenizer": sp.load_tokenizer,
    "safetensors.load_file": safetensors.load_file,
    "safetensors.read_header": safetensors.read_header,
    "read_tiktoken_file": read_tiktoken_file,
    "ProbabilisticGrammar.from_json": sp.ProbabilisticGrammar.from_json,
    "ProbabilisticGrammar.from_toml": sp.ProbabilisticGrammar.from_toml,
}
WRITERS = {
    "write_arpa": lambda path: sp.write_arpa(_kn(), path),
    "save_ngram": lambda path: save_ngram(_kn(), path),
    "save_checkpoint": lambda path: save_checkpoint(GPT(GPTConfig.preset("tiny")), path),
    "Tokenizer.save": lambda path: sp.CharTokenizer("ab").save(path),
    "write_tiktoken_file": lambda path: write_tiktoken_file(path, {b"a": 0}),
    "safetensors.save_file": lambda path: safetensors.save_file({"x": np.zeros(2, np.float32)}, path),
    "ProbabilisticGrammar.to_json": lambda path: sp.toy_english().to_json(path),
    "fit_arpa": lambda path: sp.ngram.fit_arpa(["a b", "b a"], path, memory="1M"),
}


@pytest.mark.parametrize("bad", [None, 3, ["model.arpa"]], ids=["None", "int", "list"])
@pytest.mark.parametrize("name", sorted({**READERS, **WRITERS}))
def test_a_file_name_that_is_not_one_is_an_input_error(name, bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing called "None" or "3" may be read or written here
    fn = {**READERS, **WRITERS}[name]
    with pytest.raises(InputError, match=f"got {type(bad).__name__}"):
        fn(bad)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", sorted(READERS))
def test_an_empty_file_name_is_an_input_error(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not "cannot read '.': Is a directory"
    with pytest.raises(InputError, match="empty file name"):
        READERS[name]("")


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_writer_given_an_empty_file_name_writes_nothing(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an empty name must not become "." (the current folder)
    with pytest.raises(InputError, match="empty file name"):
        WRITERS[name]("")
    assert list(tmp_path.iterdir()) == []


def test_load_model_none_is_still_the_default_model():
    assert sp.load_model(None) is not None
    with pytest.raises(InputError, match="got int"):
        sp.load_model(3)


@pytest.mark.parametrize("call", [
    lambda: GPTConfig.preset("tiny", n_layers=2),
    lambda: GPTConfig.preset("tiny").replace(heads=2),
    lambda: GPTConfig.preset(["tiny"]),
])
def test_config_keywords_that_are_not_fields_are_input_errors(call):
    """A misspelt field (n_layers for n_layer) is named, with the fields it could be."""
    with pytest.raises(InputError) as info:
        call()
    assert "n_layer" in str(info.value) or "unknown preset" in str(info.value)


def test_config_subclasses_keep_their_own_fields():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class MyConfig(GPTConfig):
        extra: int = 0

    assert MyConfig.preset("tiny", extra=3).extra == 3
    assert MyConfig.preset("tiny").replace(extra=4).extra == 4
    with pytest.raises(InputError, match="MyConfig.replace: no such field 'extr'"):
        MyConfig.preset("tiny").replace(extr=4)


def test_config_replace_and_preset_still_take_real_fields():
    cfg = GPTConfig.preset("tiny", n_layer=3).replace(n_head=1)
    assert (cfg.n_layer, cfg.n_head) == (3, 1)
    assert np.dtype(cfg.dtype) == np.float32
