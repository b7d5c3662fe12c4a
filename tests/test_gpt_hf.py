"""GPT-2 import from Hugging Face checkpoints and the numpy safetensors reader/writer.

The fixtures in tests/fixtures/hf_gpt2/ were written by tests/fixtures/make_hf_gpt2.py with
transformers' GPT2LMHeadModel; no network, no torch needed here.
"""
import json
import mmap
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from seqprob.errors import CheckpointError, InputError, SeqProbFileError
from seqprob.gpt import GPT
from seqprob.gpt.safetensors import load_file, read_header, save_file

HF = Path(__file__).parent / "fixtures" / "hf_gpt2"
VARIANTS = ["tiny", "hub", "untied_bool", "bf16", "tiktoken"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype, tol", [("float32", 1e-4), ("float64", 1e-9)])
def test_logits_match_transformers(variant, dtype, tol):
    folder = HF / variant
    model = GPT.from_hf(folder, dtype=dtype)
    ids = np.load(folder / "ids.npy")
    ref = np.load(folder / ("logits_f32.npy" if dtype == "float32" else "logits_f64.npy"))
    got = model.logits(ids)
    assert got.dtype == np.dtype(dtype)
    assert np.abs(got - ref).max() < tol
    lp = model.logprobs(ids)
    ref_lp = ref - np.log(np.exp(ref - ref.max(-1, keepdims=True)).sum(-1, keepdims=True)) - ref.max(-1, keepdims=True)
    assert np.abs(lp - ref_lp).max() < 2 * tol


def test_config_and_vocab_from_hf():
    model = GPT.from_hf(HF / "untied_bool")
    cfg = model.config
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, cfg.vocab_size) == (3, 4, 16, 10, 37)
    assert not cfg.tie_weights and cfg.layer_norm_epsilon == 1e-6 and "lm_head.w" in model.params
    assert model.vocab.bos_id == model.vocab.eos_id == 36
    tied = GPT.from_hf(HF / "tiny" / "model.safetensors")  # the file itself, config.json beside it
    assert tied.config.tie_weights and "lm_head.w" not in tied.params


def test_cached_sampling_matches_hf_logits():
    folder = HF / "tiny"
    model = GPT.from_hf(folder, dtype="float64")
    ids = np.load(folder / "ids.npy")[0]
    ref = np.load(folder / "logits_f64.npy")[0]
    state = model.start(ids[:3])
    for t in range(3, len(ids)):
        state = model.step(state, int(ids[t]))
        expected = ref[t] - np.log(np.exp(ref[t] - ref[t].max()).sum()) - ref[t].max()
        assert np.abs(state.logprobs - expected).max() < 1e-9


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-4), ("float64", 1e-9)])
def test_tiktoken_file_plus_from_hf_score_text_as_gpt2_does(dtype, tol):
    """A user-supplied .tiktoken encoding + GPT.from_hf, scored end to end through sp.score:
    the ids are those of the real tiktoken, the log-probs those of transformers; the long text
    (40 tokens, context 16) goes through the sliding window."""
    from seqprob.scoring import score
    from seqprob.tokenizers import TiktokenTokenizer

    folder = HF / "tiktoken"
    tok = TiktokenTokenizer(folder / "enc.tiktoken")
    model = GPT.from_hf(folder, dtype=dtype, tokenizer=tok)
    assert model.vocab.bos_id == model.vocab.eos_id == model.config.vocab_size - 1
    texts = json.loads((folder / "texts.json").read_text())
    df = score(model, list(texts.values()), tokenizer=tok)
    for seq, name in enumerate(texts):
        ids = np.load(folder / f"{name}_ids.npy")
        assert tok.encode(texts[name]) == ids[1:-1].tolist()
        rows = df[df.seq == seq]
        assert rows.token_id.tolist() == ids[1:].tolist() and rows.is_eos.tolist()[-1]
        ref = np.load(folder / f"{name}_logprobs_{'f32' if dtype == 'float32' else 'f64'}.npy")
        assert np.abs(rows.logprob.to_numpy() - ref).max() < 2 * tol
    assert len(np.load(folder / "long_ids.npy")) > 2 * model.config.block_size


def _copy(tmp_path, variant="tiny") -> Path:
    dst = tmp_path / variant
    shutil.copytree(HF / variant, dst)
    return dst


@pytest.mark.parametrize("option", ["scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"])
def test_unsupported_options_are_refused(tmp_path, option):
    folder = _copy(tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    cfg[option] = True
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=option):
        GPT.from_hf(folder)


@pytest.mark.parametrize("change, text", [
    ({"activation_function": "relu"}, "relu"),
    ({"n_inner": 7}, "n_inner=7"),
    ({"model_type": "llama"}, "llama"),
    ({"n_head": 3}, "not divisible"),
])
def test_bad_configs_are_refused(tmp_path, change, text):
    folder = _copy(tmp_path)
    cfg = {**json.loads((folder / "config.json").read_text()), **change}
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=text):
        GPT.from_hf(folder)


def test_truncated_and_mismatched_files(tmp_path):
    folder = _copy(tmp_path)
    path = folder / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[:-100])
    with pytest.raises(CheckpointError, match="truncated"):
        GPT.from_hf(folder)
    path.write_bytes(data[:5])
    with pytest.raises(CheckpointError, match="truncated"):
        GPT.from_hf(folder)
    path.write_bytes(struct.pack("<Q", 10**9) + data[8:])
    with pytest.raises(CheckpointError, match="header length"):
        GPT.from_hf(folder)
    tensors = load_file(HF / "tiny" / "model.safetensors")
    del tensors["transformer.h.1.mlp.c_fc.bias"]
    save_file(tensors, path)
    with pytest.raises(CheckpointError, match="h.1.mlp.c_fc.b"):
        GPT.from_hf(folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "n_embd": 32, "n_head": 2}))
    with pytest.raises(CheckpointError):
        GPT.from_hf(folder)


def test_missing_files(tmp_path):
    with pytest.raises(SeqProbFileError):
        GPT.from_hf(tmp_path / "nope")
    (tmp_path / "config.json").write_text(json.dumps(json.loads((HF / "tiny" / "config.json").read_text())))
    with pytest.raises(SeqProbFileError, match="no model.safetensors"):
        GPT.from_hf(tmp_path)


def test_nan_weights_refused(tmp_path):
    folder = _copy(tmp_path)
    tensors = load_file(folder / "model.safetensors")
    tensors["transformer.wpe.weight"][0, 0] = np.nan
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="wpe"):
        GPT.from_hf(folder)


def test_tokenizer_vocab_size_checked():
    from seqprob.tokenizers import CharTokenizer
    with pytest.raises(InputError, match="vocabulary has"):
        GPT.from_hf(HF / "tiny", tokenizer=CharTokenizer.fit(["ab"]))


# ----------------------------------------------------------------------------- safetensors
dtypes = st.sampled_from(["float32", "float64", "float16", "int64", "int32", "uint8", "bool", "int8"])


@settings(max_examples=examples(25))
@given(spec=st.lists(st.tuples(dtypes, st.lists(st.integers(0, 4), max_size=3)), min_size=1, max_size=4),
       seed=st.integers(0, 100))
def test_safetensors_round_trip(tmp_path_factory, spec, seed):
    rng = np.random.default_rng(seed)
    tensors = {f"t{i}": (rng.standard_normal(shape) * 5).astype(dt) for i, (dt, shape) in enumerate(spec)}
    path = tmp_path_factory.mktemp("st") / "x.safetensors"
    save_file(tensors, path, metadata={"format": "np"})
    for mapped in (False, True):  # read into fresh arrays, or views on a memory map
        back = load_file(path, mapped=mapped)
        assert list(back) == list(tensors)
        for k, v in tensors.items():
            assert back[k].dtype == v.dtype and back[k].shape == v.shape
            np.testing.assert_array_equal(back[k], v)
    header, start = read_header(path)
    assert header["__metadata__"] == {"format": "np"} and start % 8 == 0


def test_bf16_is_decoded_to_float32(tmp_path):
    values = np.array([1.0, -2.5, 0.15625, 3.0e38], dtype=np.float32)
    raw = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    header = json.dumps({"x": {"dtype": "BF16", "shape": [4], "data_offsets": [0, len(raw)]}}).encode()
    path = tmp_path / "b.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + raw)
    out, mapped = load_file(path)["x"], load_file(path, mapped=True)["x"]
    assert out.dtype == mapped.dtype == np.float32
    np.testing.assert_allclose(out, values, rtol=1e-2)
    np.testing.assert_array_equal(mapped, out)


def test_a_file_cut_after_its_header_was_read_is_refused_when_mapped(tmp_path, monkeypatch):
    """The header is checked against the file's size first; a file that shrinks before the
    map is made gets a CheckpointError naming it, never a view past its end."""
    import seqprob.gpt.safetensors as stmod

    path = tmp_path / "cut.safetensors"
    save_file({"a": np.arange(4, dtype=np.float32), "b": np.arange(1000, dtype=np.float32)}, path)
    real = stmod.read_header

    def header_then_cut(p):
        result = real(p)
        with open(p, "r+b") as handle:
            handle.truncate(path.stat().st_size - 100)
        return result
    monkeypatch.setattr(stmod, "read_header", header_then_cut)
    with pytest.raises(CheckpointError, match="ended inside a tensor"):
        load_file(path, mapped=True)


def test_a_file_that_cannot_be_mapped_is_read(tmp_path, monkeypatch):
    path = tmp_path / "plain.safetensors"
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, np.float64)}
    save_file(tensors, path)

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")  # what mmap says on a file system without it
    monkeypatch.setattr(mmap, "mmap", refuse)
    back = load_file(path, mapped=True)
    for k, v in tensors.items():
        np.testing.assert_array_equal(back[k], v)
        assert back[k].flags.writeable  # read into its own array, not a view of a map


def test_released_pages_of_a_mapped_file_read_the_same_values(tmp_path):
    """safetensors.release drops a mapped view's pages once it is copied (from_hf's loading
    stays near the model's own size); reading the view again maps them back from the file.
    On arrays that are not views of a map it does nothing."""
    from seqprob.gpt.safetensors import release
    path = tmp_path / "r.safetensors"
    rng = np.random.default_rng(0)
    tensors = {"a": rng.standard_normal((300, 7)).astype(np.float32), "b": rng.standard_normal(5000)}
    save_file(tensors, path)
    from seqprob.gpt.safetensors import _mapped_range
    mapped = load_file(path, mapped=True)
    origin = np.frombuffer(_mapped_range(mapped["b"])[0], np.uint8).ctypes.data
    for view in (mapped["a"].T, mapped["a"][10:20], mapped["b"]):
        data, start, stop = _mapped_range(view)  # whole pages covering the view's bytes
        assert start % mmap.PAGESIZE == 0 and (stop % mmap.PAGESIZE == 0 or stop == len(data))
        assert origin + start <= view.ctypes.data and view.ctypes.data + view.nbytes <= origin + stop
        release(view)
    for k, v in tensors.items():
        np.testing.assert_array_equal(mapped[k], v)
    own = tensors["b"].copy()
    assert _mapped_range(own) is None and _mapped_range(mapped["a"][:0]) is None
    release(own)
    np.testing.assert_array_equal(own, tensors["b"])


@settings(max_examples=examples(40), deadline=None)
@given(rows=st.integers(1, 700), cols=st.integers(1, 300), src=st.sampled_from("CF"), dst=st.sampled_from("CF"),
       tile=st.sampled_from([3, 64, 256]))
def test_copy_into_releases_each_stripe_once_copied(rows, cols, src, dst, tile):
    """copy_into(dest, value, release=...) hands ``release`` contiguous stripes of a
    contiguous ``value`` (rows of a C array, columns of a transposed one) that cover it once,
    each after its values are in ``dest``: a loader drops a tensor's file pages as it goes."""
    from seqprob.gpt import params

    value = np.asarray(np.random.default_rng(rows * cols).standard_normal((rows, cols)), order=src)
    dest = np.zeros((rows, cols), order=dst)
    released = []

    def release(part):
        assert part.flags.c_contiguous or part.flags.f_contiguous
        lo = (part.ctypes.data - value.ctypes.data) // value.itemsize  # where it starts in value's memory
        flat = value.ravel(order="K")
        np.testing.assert_array_equal(part.ravel(order="K"), flat[lo: lo + part.size])
        np.testing.assert_array_equal(dest[np.isin(value, part)], value[np.isin(value, part)])  # copied first
        released.append((lo, part.size))

    params.copy_into(dest, value, tile=tile, release=release)
    np.testing.assert_array_equal(dest, value)
    released.sort()
    assert sum(n for _, n in released) == value.size
    assert all(a + n == b for (a, n), (b, _) in zip(released, released[1:]))  # no gap, no overlap


def test_from_hf_drops_a_large_tensors_file_pages_stripe_by_stripe(monkeypatch):
    """The tied W_U (the file's row-major wte copied column-major) is released in stripes, not
    whole at the end: its file pages and the model's copy are never both resident (GPT-2-124M:
    peak RSS while loading 667 -> 533 MiB for 475 MiB of weights)."""
    from seqprob.gpt import safetensors

    sizes, real = [], safetensors.release
    monkeypatch.setattr(safetensors, "release", lambda view: (sizes.append(view.nbytes), real(view))[1])
    monkeypatch.setattr("seqprob.gpt.params.STRIPE_BYTES", 256)
    model = GPT.from_hf(HF / "tiny")
    wte = model.params["wte"].nbytes
    assert sum(1 for n in sizes if n < wte) > 2  # the stripes of wte (and of the other tensors)


@pytest.mark.parametrize("normal_pages", [False, True])
def test_from_hf_keeps_no_view_of_the_file(monkeypatch, normal_pages):
    """from_hf maps the file and copies every tensor: the parameters are the model's own
    writable arrays, none of them a view of the mapped file (also when the model's own
    buffer is an anonymous map: params.allocate's normal pages, forced here for a tiny model)."""
    from seqprob.gpt import params, safetensors

    if normal_pages:
        monkeypatch.setattr(params, "SMALL_PAGES_MIN", 1)
    model = GPT.from_hf(HF / "tiny")
    for name, value in model.params.items():
        assert value.flags.writeable, name
        base = value
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        owner = getattr(base, "obj", base)  # frombuffer: a memoryview of the map
        assert isinstance(owner, mmap.mmap) == normal_pages, name
        assert not isinstance(owner, mmap.mmap) or owner not in safetensors._FILE_MAPS, name
    if normal_pages:  # release() leaves maps that are not load_file's alone: no zeroed weights
        before = {k: v.copy() for k, v in model.params.items()}
        for value in model.params.values():
            safetensors.release(value)
        for name, value in model.params.items():
            np.testing.assert_array_equal(value, before[name], err_msg=name)


@pytest.mark.parametrize("shape", [[0, 2 ** 62, 2 ** 62], [0, 2 ** 64], [2 ** 41, 0], [0, 2 ** 21, 2 ** 21]])
def test_empty_tensors_with_impossible_shapes_are_refused(tmp_path, shape):
    """Zero bytes match a zero-size shape, but numpy cannot make (and no model has) an axis
    past 2**40 or a shape past 2**40 elements without its empty axes: named, not a raw error."""
    header = json.dumps({"x": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}).encode()
    path = tmp_path / "e.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    for mapped in (False, True):
        with pytest.raises(CheckpointError, match="'shape'|2\\*\\*40 elements"):
            load_file(path, mapped=mapped)


def test_an_empty_tensor_of_a_possible_shape_loads(tmp_path):
    header = json.dumps({"x": {"dtype": "F32", "shape": [0, 2 ** 20, 2 ** 20], "data_offsets": [0, 0]}}).encode()
    path = tmp_path / "f.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    assert load_file(path)["x"].shape == (0, 2 ** 20, 2 ** 20)


def test_unknown_dtype_and_bad_header(tmp_path):
    header = json.dumps({"x": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}).encode()
    path = tmp_path / "c.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0")
    with pytest.raises(CheckpointError, match="F8_E4M3"):
        load_file(path)
    path.write_bytes(struct.pack("<Q", 3) + b"{x}")
    with pytest.raises(CheckpointError, match="malformed"):
        load_file(path)
