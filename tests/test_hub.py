"""Models by their Hugging Face names: resolution through a cache laid out exactly as
huggingface_hub writes it (blobs, symlinked snapshots, refs), revisions, a local path that wins,
bad names, and a cache that loading never writes to. No network: the suite's HF cache is an
empty temporary folder (conftest.py) and each test builds its own."""
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

import seqprob as sp
from seqprob import hub
from seqprob.app.cli import main
from seqprob.errors import InputError, SeqProbError, SeqProbFileError
from seqprob.gpt import GPT

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA = FIXTURES / "hf_models" / "llama_gqa"
SHARDED = FIXTURES / "hf_models" / "sharded"
COMMIT_A, COMMIT_B = "a" * 40, "0123456789abcdef0123456789abcdef01234567"
WEIGHTS = (".json", ".safetensors")


def add_snapshot(cache: Path, name: str, source: Path, commit: str, refs=("main",)) -> Path:
    """Put ``source``'s model files into ``cache`` as huggingface_hub does: each file's content
    in ``blobs/<hash>``, ``snapshots/<commit>/<file>`` a relative symlink to it, and
    ``refs/<ref>`` holding the commit."""
    repo = cache / ("models--" + name.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for f in sorted(source.iterdir()):
        if f.suffix not in WEIGHTS:
            continue
        blob = repo / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.copyfile(f, blob)
        (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "hf-cache"
    root.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    return root


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.is_symlink(), p.lstat().st_mtime_ns, p.lstat().st_size)
            for p in sorted(root.rglob("*"))}


def test_the_suite_cannot_touch_a_real_cache():
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert hub.cache_dir().parent.name == "pytest-hf-home"


def test_a_name_loads_what_its_folder_loads(cache):
    add_snapshot(cache, "org/tiny-llama", LLAMA, COMMIT_A)
    ids = np.load(LLAMA / "ids.npy")
    by_name = sp.load_model("org/tiny-llama")
    by_folder = sp.load_model(LLAMA)
    np.testing.assert_array_equal(by_name.logits(ids), by_folder.logits(ids))
    np.testing.assert_allclose(GPT.from_hf("org/tiny-llama", dtype="float64").logits(ids),
                               np.load(LLAMA / "logits_f64.npy"), atol=1e-9)


def test_a_sharded_snapshot_of_symlinks_loads(cache):
    add_snapshot(cache, "org/sharded", SHARDED, COMMIT_A)
    ids = np.load(SHARDED / "ids.npy")
    np.testing.assert_allclose(GPT.from_hf("org/sharded").logits(ids), np.load(SHARDED / "logits_f32.npy"),
                               atol=1e-4)


FAMILIES = ["qwen3", "gemma2", "gemma2_h20", "gemma3", "gemma3_4x", "olmo2", "phi3", "mistral_sw", "qwen2_sw", "smollm3"]


@pytest.mark.parametrize("variant", FAMILIES)
def test_every_family_loads_by_name_offline_with_exact_numbers(cache, variant):
    """Each family's fixture, laid out as huggingface_hub writes it, loads by its name with
    transformers' float64 logits (the download path is off: HF_HUB_OFFLINE=1)."""
    folder = FIXTURES / "hf_models" / variant
    add_snapshot(cache, f"org/{variant.replace('_', '-')}", folder, COMMIT_B)
    model = GPT.from_hf(f"org/{variant.replace('_', '-')}", dtype="float64")
    ids = np.load(folder / "ids.npy")
    np.testing.assert_allclose(model.logits(ids), np.load(folder / "logits_f64.npy"), atol=1e-9, rtol=0)


def test_revisions_branch_tag_commit_and_prefix(cache):
    add_snapshot(cache, "org/m", LLAMA, COMMIT_A, refs=("main",))
    add_snapshot(cache, "org/m", SHARDED, COMMIT_B, refs=("v1", "dev"))
    assert hub.resolve("org/m").name == COMMIT_A
    assert hub.resolve("org/m", "v1").name == COMMIT_B
    assert hub.resolve("org/m", COMMIT_B).name == COMMIT_B
    assert hub.resolve("org/m", COMMIT_B[:8]).name == COMMIT_B
    assert sp.load_model("org/m", revision="v1").config.n_layer == GPT.from_hf(SHARDED).config.n_layer


def test_a_missing_revision_says_what_is_cached(cache):
    add_snapshot(cache, "org/m", LLAMA, COMMIT_A, refs=("main", "v1"))
    with pytest.raises(hub.RevisionNotCachedError, match="'v2'.*main.*v1") as info:
        sp.load_model("org/m", revision="v2")
    assert info.value.name == "org/m"
    with pytest.raises(hub.RevisionNotCachedError, match="commit"):
        hub.resolve("org/m", COMMIT_B)


def test_a_model_not_in_the_cache_names_the_folder_and_the_command(cache):
    with pytest.raises(hub.ModelNotCachedError) as info:
        sp.load_model("HuggingFaceTB/SmolLM2-135M")
    message = str(info.value)
    assert str(cache / "models--HuggingFaceTB--SmolLM2-135M") in message
    assert "hf download HuggingFaceTB/SmolLM2-135M" in message
    assert isinstance(info.value, SeqProbFileError)


@pytest.mark.parametrize("name", ["../x", "a/b/c", "", "org/", "/abs/x", "-a/b", "a/b..c", "a b/c", "a/.x"])
def test_malformed_names_are_refused_by_name(cache, name):
    with pytest.raises(SeqProbError, match="not a Hugging Face model name|does not exist"):
        sp.load_model(name) if name else hub.check_name(name)
    with pytest.raises(InputError, match="not a Hugging Face model name"):
        hub.check_name(name)


@pytest.mark.parametrize("revision", ["", "../main", "a b", 3])
def test_malformed_revisions_are_refused(cache, revision):
    add_snapshot(cache, "org/m", LLAMA, COMMIT_A)
    with pytest.raises(InputError, match="revision"):
        hub.resolve("org/m", revision)


def test_a_local_folder_of_that_name_wins(cache, tmp_path, monkeypatch):
    add_snapshot(cache, "org/m", SHARDED, COMMIT_A)
    local = tmp_path / "org" / "m"
    shutil.copytree(LLAMA, local)
    monkeypatch.chdir(tmp_path)
    assert sp.load_model("org/m").config == GPT.from_hf(LLAMA).config  # not the cached sharded model
    with pytest.raises(InputError, match="local path"):
        sp.load_model("org/m", revision="main")


def test_loading_never_writes_into_the_cache(cache):
    add_snapshot(cache, "org/m", LLAMA, COMMIT_A)
    before = _tree(cache)
    sp.load_model("org/m")
    with pytest.raises(SeqProbError):
        sp.load_model("org/m", revision="nope")
    with pytest.raises(SeqProbError):
        sp.load_model("org/other")
    assert _tree(cache) == before


def test_a_snapshot_with_a_missing_shard_is_named(cache):
    snapshot = add_snapshot(cache, "org/sharded", SHARDED, COMMIT_A)
    blob = (snapshot / "model-00003-of-00007.safetensors").resolve()
    blob.unlink()  # an interrupted download: the symlink dangles
    with pytest.raises(SeqProbError, match="model-00003-of-00007"):
        GPT.from_hf("org/sharded")


def test_the_cache_folder_follows_huggingface_hub(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub.cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "direct"))
    assert hub.cache_dir() == tmp_path / "direct"
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"


PART = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9_]{0,10}[A-Za-z0-9])?", fullmatch=True)


@given(PART, PART)
def test_well_formed_names_map_to_their_cache_folder(org, name):
    full = f"{org}/{name}"
    assert hub.is_hub_name(full)
    assert hub.repo_folder(full, Path("/c")) == Path("/c") / f"models--{org}--{name}"


@given(st.text(max_size=30))
def test_a_name_is_never_a_path_outside_the_cache(text):
    if hub.is_hub_name(text):
        folder = hub.repo_folder(text, Path("/c"))
        assert folder.parent == Path("/c") and ".." not in folder.parts


def test_the_cli_takes_a_name_and_a_revision(cache, capsys):
    add_snapshot(cache, "org/m", LLAMA, COMMIT_A, refs=("main", "v1"))
    assert main(["score", "<1> <2> <3>", "--model", "org/m", "--revision", "v1", "--tokenizer", "word",
                 "--format", "csv"]) == 0
    assert "logprob" in capsys.readouterr().out
    assert main(["score", "<1> <2>", "--model", "org/m", "--tokenizer", "word", "--bos-token", "<5>",
                 "--format", "csv", "--no-eos"]) == 0
    assert capsys.readouterr().out.count("\n") == 3  # header + two scored tokens, x_1 included
    assert main(["score", "x", "--model", "org/m", "--revision", "v9"]) == 2
    assert "not at revision 'v9'" in capsys.readouterr().err
    assert main(["score", "x", "--revision", "v1"]) == 2
    assert "--revision" in capsys.readouterr().err


def test_evaluate_dask_ships_the_name_not_the_weights(cache):
    """Each worker loads a named model from its own cache: the task graph holds the name."""
    import pickle

    import dask
    import dask.bag as db

    add_snapshot(cache, "org/m", LLAMA, COMMIT_A, refs=("main", "v1"))
    model = sp.load_model("org/m")
    lines = ["<1> <2> <3>", "<4> <5>", "<2> <2> <7> <9>"]
    word = _word_tokenizer(model)
    bag = db.from_sequence(lines, npartitions=2)
    with dask.config.set(scheduler="synchronous"):
        ev = sp.evaluate_dask("org/m", bag, tokenizer=word, revision="v1")
    ref = sp.evaluate(model, lines, tokenizer=word)
    assert ev.n_tokens == ref.n_tokens
    assert ev.logprob == pytest.approx(ref.logprob, rel=1e-6)  # float32: batches round apart
    weights = sum(a.nbytes for a in model.params.values())
    assert len(pickle.dumps(("org/m", "v1"))) < weights / 100
    from seqprob.scoring.corpus import _pinned
    assert _pinned("org/m", "v1") == COMMIT_A  # workers get the commit, not a branch that may move
    with pytest.raises(InputError, match="revision"):
        sp.evaluate_dask(model, bag, tokenizer=word, revision="v1")


def _word_tokenizer(model):
    from seqprob.app.cli._loading import resolve_tokenizer

    return resolve_tokenizer("word", model)
