"""GPT checkpoints (seqprob.gpt.checkpoint): round trips, atomicity, corrupt and mismatched files."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from seqprob.errors import CheckpointError, SeqProbFileError
from seqprob.gpt import GPT, GPTConfig
from seqprob.gpt import checkpoint as ck
from seqprob.optim import AdamW
from seqprob.tokenizers import CharTokenizer

CFG = GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8)


def tensor_file(folder, stem="model"):
    return next(p for p in folder.iterdir() if p.stem == stem and p.suffix in (".safetensors", ".npz"))


def rewrite_tensors(folder, stem, change):
    """Rewrite a tensor file through ``change(dict)`` and update the manifest (a 'valid' edit)."""
    path = tensor_file(folder, stem)
    tensors = change(ck._read_tensors(path))
    _, write, _ = ck._tensor_backend()
    if path.suffix == ".npz":
        ck._save_npz(tensors, path)
    else:
        write(tensors, path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][path.name] = ck._file_facts(path)
    (folder / "manifest.json").write_text(json.dumps(manifest))


@settings(max_examples=examples(8))
@given(seed=st.integers(0, 1000), dtype=st.sampled_from(["float32", "float64"]),
       tie=st.booleans(), bias=st.booleans())
def test_round_trip_params_config(tmp_path_factory, seed, dtype, tie, bias):
    cfg = CFG.replace(dtype=dtype, tie_weights=tie, bias=bias)
    model = GPT(cfg, seed=seed)
    folder = ck.save_checkpoint(model, tmp_path_factory.mktemp("c") / "ckpt", extra={"step": 3})
    loaded = ck.load_checkpoint(folder)
    assert loaded.model.config == cfg and loaded.extra == {"step": 3}
    assert loaded.optimizer_state is None
    assert list(loaded.model.params) == list(model.params)
    for name, value in model.params.items():
        assert loaded.model.params[name].dtype == value.dtype
        np.testing.assert_array_equal(loaded.model.params[name], value)
    assert loaded.model.vocab == model.vocab


def test_tokenizer_and_optimizer_round_trip(tmp_path):
    tok = CharTokenizer.fit(["abcdefghij"])
    model = GPT(CFG, seed=1, tokenizer=tok)
    opt = AdamW(model.params, lr=1e-2, weight_decay=0.1)
    rng = np.random.default_rng(0)
    opt.step({n: rng.normal(size=a.shape) for n, a in model.params.items()})
    ck.save_checkpoint(model, tmp_path / "c", optimizer=opt)
    loaded = ck.load_checkpoint(tmp_path / "c")
    assert loaded.model.tokenizer.encode("cab") == tok.encode("cab")
    state = opt.state_dict()
    got = loaded.optimizer_state
    assert got["step"] == 1 and got["lr"] == 1e-2 and got["decay"] == state["decay"]
    for n in model.params:
        np.testing.assert_array_equal(got["m"][n], state["m"][n])
        np.testing.assert_array_equal(got["v"][n], state["v"][n])
    AdamW(loaded.model.params).load_state_dict(got)  # accepted as is


def test_load_into_model_and_dtype_override(tmp_path):
    model = GPT(CFG, seed=2)
    ck.save_checkpoint(model, tmp_path / "c")
    target = GPT(CFG, seed=9)
    ck.load_checkpoint(tmp_path / "c", model=target)
    np.testing.assert_array_equal(target.flat_params_, model.flat_params_)
    as64 = ck.load_checkpoint(tmp_path / "c", dtype="float64").model
    assert as64.config.dtype == "float64"
    np.testing.assert_array_equal(as64.params["wte"], model.params["wte"].astype(np.float64))


def test_different_config_is_named(tmp_path):
    ck.save_checkpoint(GPT(CFG), tmp_path / "c")
    with pytest.raises(CheckpointError, match=r"n_embd: checkpoint 8, model 16"):
        ck.load_checkpoint(tmp_path / "c", model=GPT(CFG.replace(n_embd=16)))


def test_overwrite_replaces_atomically(tmp_path):
    a, b = GPT(CFG, seed=1), GPT(CFG, seed=2)
    ck.save_checkpoint(a, tmp_path / "c")
    ck.save_checkpoint(b, tmp_path / "c")
    np.testing.assert_array_equal(ck.load_checkpoint(tmp_path / "c").model.flat_params_,
                                  b.flat_params_)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]  # no temporary folders left


def test_failed_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    good = GPT(CFG, seed=1)
    ck.save_checkpoint(good, tmp_path / "c")

    class Boom(Exception):
        pass

    def explode(*args, **kwargs):
        raise Boom

    monkeypatch.setattr(ck, "_fsync_dir", explode)
    with pytest.raises(Boom):
        ck.save_checkpoint(GPT(CFG, seed=2), tmp_path / "c")
    np.testing.assert_array_equal(ck.load_checkpoint(tmp_path / "c").model.flat_params_,
                                  good.flat_params_)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_failed_final_rename_puts_the_previous_checkpoint_back(tmp_path, monkeypatch):
    """The old folder is moved aside before the new one is renamed in; if that second rename
    fails, the old one goes back to its name (nothing left only under .c.old-*)."""
    import os
    good = GPT(CFG, seed=1)
    ck.save_checkpoint(good, tmp_path / "c")
    real = os.replace

    def no_space_for_the_new_one(src, dst):
        if str(dst) == str(tmp_path / "c") and ".old-" not in str(src):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", no_space_for_the_new_one)
    with pytest.raises((OSError, SeqProbFileError)):
        ck.save_checkpoint(GPT(CFG, seed=2), tmp_path / "c")
    monkeypatch.setattr(os, "replace", real)
    np.testing.assert_array_equal(ck.load_checkpoint(tmp_path / "c").model.flat_params_, good.flat_params_)
    assert not list(tmp_path.glob(".c.old-*"))


def test_float64_weights_beyond_the_float32_range_are_refused(saved):
    """A float64 1e300 is finite in the file but inf in a float32 model: refused at load, by name."""
    rewrite_tensors(saved, "model", lambda t: {k: (np.full(v.shape, 1e300) if k == "ln_f.g" else v)
                                               for k, v in t.items()})
    with pytest.raises(CheckpointError, match=r"'ln_f.g' holds values beyond the range of float32"):
        ck.load_checkpoint(saved)
    assert ck.load_checkpoint(saved, dtype="float64").model.params["ln_f.g"][0] == 1e300


def test_load_params_refuses_values_that_overflow_the_model_dtype():
    """Every array is checked before any is copied: a refused load leaves the model as it was."""
    model = GPT(CFG)
    before = model.flat_params_.copy()
    new = {name: np.ones_like(value) for name, value in model.params.items()}
    new["wte"] = np.full(model.params["wte"].shape, -1e39)
    with pytest.raises(CheckpointError, match="'wte' holds values beyond the range of float32"):
        model.load_params(new)
    np.testing.assert_array_equal(model.flat_params_, before)


def test_a_refused_checkpoint_leaves_the_model_it_was_loaded_into_as_it_was(saved):
    rewrite_tensors(saved, "model", lambda t: {k: (np.full(v.shape, 1e300) if k == "ln_f.g" else v + 1)
                                               for k, v in t.items()})
    model = GPT(CFG, seed=9)
    before = model.flat_params_.copy()
    with pytest.raises(CheckpointError, match="'ln_f.g'"):
        ck.load_checkpoint(saved, model=model)
    np.testing.assert_array_equal(model.flat_params_, before)


@pytest.mark.parametrize("name", ["x" * 300, "a\0b"])
def test_paths_the_file_system_refuses_are_named(tmp_path, name):
    with pytest.raises(SeqProbFileError, match="cannot write"):
        ck.save_checkpoint(GPT(CFG), str(tmp_path) + "/" + name)
    assert list(tmp_path.iterdir()) == []


def test_refuses_to_replace_a_non_checkpoint_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("precious")
    with pytest.raises(SeqProbFileError, match="refusing"):
        ck.save_checkpoint(GPT(CFG), tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "precious"


def test_refuses_nan_weights(tmp_path):
    model = GPT(CFG)
    model.params["h.0.mlp.c_fc.w"][0, 0] = np.nan
    with pytest.raises(Exception, match="h.0.mlp.c_fc.w"):
        ck.save_checkpoint(model, tmp_path / "c")
    assert not (tmp_path / "c").exists()


@pytest.fixture
def saved(tmp_path):
    model = GPT(CFG, seed=3)
    opt = AdamW(model.params)
    return ck.save_checkpoint(model, tmp_path / "c", optimizer=opt, extra={"step": 0})


def test_truncated_file(saved):
    path = tensor_file(saved)
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(CheckpointError, match=rf"{path.name}.*bytes.*truncated"):
        ck.load_checkpoint(saved)


def test_flipped_byte(saved):
    path = tensor_file(saved, "optimizer")
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="SHA-256"):
        ck.load_checkpoint(saved)


def test_missing_files(saved):
    (saved / "training.json").unlink()
    with pytest.raises(CheckpointError, match="training.json.*missing"):
        ck.load_checkpoint(saved)
    (saved / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="manifest"):
        ck.load_checkpoint(saved)
    with pytest.raises(SeqProbFileError, match="does not exist"):
        ck.load_checkpoint(saved.parent / "nope")


def test_missing_key_and_wrong_shape(saved):
    rewrite_tensors(saved, "model", lambda t: {k: v for k, v in t.items() if k != "h.0.attn.c_attn.b"})
    with pytest.raises(CheckpointError, match="h.0.attn.c_attn.b"):
        ck.load_checkpoint(saved)
    rewrite_tensors(saved, "model", lambda t: {**t, "h.0.attn.c_attn.b": np.zeros(5, np.float32)})
    with pytest.raises(CheckpointError, match=r"'h.0.attn.c_attn.b' has shape \(5,\)"):
        ck.load_checkpoint(saved)


def test_optimizer_state_mismatch(saved):
    rewrite_tensors(saved, "optimizer", lambda t: {k: v for k, v in t.items() if k != "v.wpe"})
    state = ck.load_checkpoint(saved).optimizer_state
    with pytest.raises(CheckpointError, match="'wpe'"):
        AdamW(GPT(CFG).params).load_state_dict(state)


def test_bad_config_json(saved):
    cfg_path = saved / "config.json"
    data = json.loads(cfg_path.read_text())
    data["config"]["n_head"] = 3  # 8 is not divisible by 3
    cfg_path.write_text(json.dumps(data))
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["files"]["config.json"] = ck._file_facts(cfg_path)
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="n_head"):
        ck.load_checkpoint(saved)


@settings(max_examples=examples(40), deadline=None)
@given(shape=st.tuples(st.integers(1, 70), st.integers(1, 40)), dest_order=st.sampled_from("CF"),
       source=st.sampled_from(["C", "F", "T", "slice"]), tile=st.integers(1, 80), data=st.data())
def test_copy_into_any_memory_order_equals_an_assignment(shape, dest_order, source, tile, data):
    """params.copy_into (the tiled copy behind load_params, checkpoints and from_hf)
    writes what ``dest[...] = value`` writes, into any destination order or column slice."""
    from seqprob.gpt.params import copy_into

    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    value = {"C": lambda: rng.standard_normal(shape),
             "F": lambda: np.asfortranarray(rng.standard_normal(shape)),
             "T": lambda: rng.standard_normal(shape[::-1]).T,  # HF's (out, in) read as (in, out)
             "slice": lambda: rng.standard_normal((shape[0], shape[1] + 3))[:, 1:-2]}[source]()
    whole = np.zeros((shape[0], shape[1] + 4), order=dest_order)
    dest = whole[:, 2:-2] if data.draw(st.booleans()) else np.zeros(shape, order=dest_order)
    before = whole.copy()
    copy_into(dest, value, tile=tile)
    np.testing.assert_array_equal(dest, value)
    if dest.base is whole:  # the columns around a slice are untouched
        np.testing.assert_array_equal(whole[:, :2], before[:, :2])
        np.testing.assert_array_equal(whole[:, -2:], before[:, -2:])
