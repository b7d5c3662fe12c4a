"""Llama, Qwen2 and GPT-NeoX import: logits, gradients and cached decoding against HF
transformers, plus the refusals. Fixtures: tests/fixtures/make_hf_models.py (no torch here)."""
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from seqprob.errors import CheckpointError, SeqProbFileError
from seqprob.gpt import GPT
from seqprob.gpt.hf import _params, config_from_hf

HF = Path(__file__).parent / "fixtures" / "hf_models"
FAMILIES = ["qwen3", "gemma2", "gemma2_h20", "gemma3", "gemma3_4x", "olmo2", "phi3", "mistral_sw", "qwen2_sw", "smollm3"]
VARIANTS = ["llama_gqa", "llama_mqa_l3", "llama_hub4", "qwen2", "neox", "neox_seq4", "llama_bias", "sharded",
            "bf16", "neox_bf16"] + FAMILIES
BF16_VARIANTS = ["bf16", "neox_bf16"]  # every tensor stored as BF16 (Llama; NeoX's fused, per-head q|k|v)


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


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_decode_equals_uncached_forward(variant):
    model = GPT.from_hf(HF / variant, dtype="float64")
    ids = np.load(HF / variant / "ids.npy")[0]
    state, rows = model.start(ids[:1]), []
    rows.append(state.logprobs)
    for tok in ids[1:]:
        state = model.step(state, int(tok))
        rows.append(state.logprobs)
    np.testing.assert_allclose(np.array(rows), model.logprobs(ids), atol=1e-10)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_match_pytorch_autograd(variant):
    """HF's own float64 autograd gradients, mapped to seqprob's layout by the importer."""
    folder = HF / variant
    model = GPT.from_hf(folder, dtype="float64")
    z = np.load(folder / "grads.npz")
    loss, grads = model.loss_and_grads(z["batch"])
    assert loss == pytest.approx(float(z["loss"]), abs=1e-12)
    hf = json.loads((folder / "config.json").read_text())
    ref = _params(hf["model_type"], {k[5:]: z[k] for k in z.files if k.startswith("grad/")}, {},
                  model.config, hf, dest={k: np.zeros_like(v) for k, v in model.params.items()}, gradients=True)
    assert sorted(ref) == sorted(grads)
    for name, value in ref.items():
        np.testing.assert_allclose(grads[name], value, atol=1e-10, err_msg=name)


def test_configs_of_each_dialect():
    gqa = GPT.from_hf(HF / "llama_gqa").config
    got = (gqa.norm, gqa.mlp, gqa.positions, gqa.kv_heads, gqa.tie_weights)
    assert got == ("rmsnorm", "swiglu", "rotary", 2, False)
    hub4 = GPT.from_hf(HF / "llama_hub4").config
    assert hub4.rope_theta == 500.0 and hub4.rope_scaling_dict == {"rope_type": "linear", "factor": 2.0}
    neox = GPT.from_hf(HF / "neox_seq4").config
    assert neox.rotary_fraction == 0.5 and not neox.parallel_residual and neox.mlp == "gelu"
    qwen = GPT.from_hf(HF / "qwen2").config
    assert qwen.has_qkv_bias and not qwen.bias and not qwen.has_mlp_bias


def _copy(tmp_path, variant="llama_gqa") -> Path:
    dst = tmp_path / variant
    shutil.copytree(HF / variant, dst)
    return dst


def _edit(folder: Path, **change) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(change)
    (folder / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("change, text", [
    (dict(model_type="mamba"), "unsupported architecture model_type='mamba'"),
    (dict(model_type=None, architectures=["T5ForConditionalGeneration"]), "no supported architecture"),
    (dict(hidden_act="gelu"), "hidden_act='gelu'"),
    (dict(model_type="mistral", sliding_window=0), "sliding_window must be an integer >= 1"),
    (dict(layer_types=["chunked_attention", "full_attention"]), "layer_types must list"),
    (dict(layer_types=["sliding_attention"]), "layer_types must list"),
    (dict(model_type="gemma3"), "vision-language"),
    (dict(model_type="phi3", rope_scaling={"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}),
     "'longrope' is not supported"),
    (dict(model_type="smollm3", no_rope_layers=[1, 2]), "no_rope_layers must list 0 or 1"),
    (dict(model_type="gemma3_text", rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4},
                                                     "chunked_attention": {}}), "layer types"),
    (dict(model_type="gemma3_text", rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4},
                                                     "sliding_attention": {"rope_type": "linear", "factor": 2.0}}),
     "sliding layers"),
    (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}), "'yarn' is not supported"),
    (dict(num_key_value_heads=3), "not divisible by n_kv_head=3"),
    (dict(head_dim=8), r"q_proj.weight.* config.json needs \(32, 16\)"),
    (dict(vocab_size=10 ** 12), "exceeds the limit 16777216"),
    (dict(hidden_size="16"), "'hidden_size' must be an integer"),
    (dict(tie_word_embeddings="no"), "must be true or false"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.3}), "even integer"),
    (dict(intermediate_size=30), r"gate_proj.weight.* has shape \(24, 16\), config.json needs \(30, 16\)"),
])
def test_bad_configs_are_refused(tmp_path, change, text):
    folder = _copy(tmp_path)
    _edit(folder, **change)
    with pytest.raises(CheckpointError, match=text):
        GPT.from_hf(folder)


def test_bad_dtype_is_named():
    from seqprob.errors import InputError
    with pytest.raises(InputError, match="float16"):
        GPT.from_hf(HF / "llama_gqa", dtype="float16")


def test_config_json_that_is_a_list(tmp_path):
    folder = _copy(tmp_path)
    (folder / "config.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="JSON object, got a list"):
        GPT.from_hf(folder)
    with pytest.raises(CheckpointError, match="JSON object"):
        config_from_hf([])


def test_missing_and_misshapen_tensors_are_named(tmp_path):
    from seqprob.gpt.safetensors import load_file, save_file
    folder = _copy(tmp_path, "qwen2")
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.layers.1.self_attn.k_proj.bias"]
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="'model.layers.1.self_attn.k_proj.bias' is missing"):
        GPT.from_hf(folder)
    tensors = load_file(HF / "qwen2" / "model.safetensors")
    tensors["model.layers.0.mlp.up_proj.weight"] = tensors["model.layers.0.mlp.up_proj.weight"][:5]
    save_file(tensors, folder / "model.safetensors")
    where = r"'model.layers.0.mlp.up_proj.weight' in 'model.safetensors' has shape \(5, 16\)"
    with pytest.raises(CheckpointError, match=where):
        GPT.from_hf(folder)
    tensors = load_file(HF / "qwen2" / "model.safetensors")
    tensors["model.layers.0.self_attn.q_norm.weight"] = np.ones(4, np.float32)
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="does not use.*q_norm"):
        GPT.from_hf(folder)


def _index(folder: Path) -> dict:
    return json.loads((folder / "model.safetensors.index.json").read_text())


@pytest.mark.parametrize("shard", ["../x.safetensors", "/etc/passwd", "sub/../../y.safetensors", ""])
def test_shards_must_stay_inside_the_folder(tmp_path, shard):
    folder = _copy(tmp_path, "sharded")
    index = _index(folder)
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = shard
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="shard"):
        GPT.from_hf(folder)


def test_symlinked_shard_pointing_outside_is_refused(tmp_path):
    folder = _copy(tmp_path, "sharded")
    name = sorted(p.name for p in folder.glob("model-*.safetensors"))[0]
    outside = tmp_path / "outside.safetensors"
    (folder / name).rename(outside)
    os.symlink(outside, folder / name)
    with pytest.raises(CheckpointError, match="outside the model folder"):
        GPT.from_hf(folder)


def test_missing_shard_is_named(tmp_path):
    folder = _copy(tmp_path, "sharded")
    name = sorted(p.name for p in folder.glob("model-*.safetensors"))[-1]
    (folder / name).unlink()
    with pytest.raises(CheckpointError, match=f"missing shard '{name}'"):
        GPT.from_hf(folder)


def test_no_weights_file(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(HF / "llama_gqa" / "config.json", folder)
    with pytest.raises(SeqProbFileError, match="no model.safetensors"):
        GPT.from_hf(folder)


def test_f16_weights_load(tmp_path):
    from seqprob.gpt.safetensors import load_file, save_file
    folder = _copy(tmp_path)
    tensors = load_file(folder / "model.safetensors")
    save_file({k: v.astype(np.float16) for k, v in tensors.items()}, folder / "model.safetensors")
    model = GPT.from_hf(folder, dtype="float64")
    assert model.params["wte"].dtype == np.float64
    np.testing.assert_array_equal(model.params["wte"], tensors["model.embed_tokens.weight"].astype(np.float16))


def test_f64_values_beyond_the_float32_range_are_refused_by_name(tmp_path):
    """Finite in the file (float64 1e300), inf once cast to float32: a CheckpointError naming
    the file's tensor before anything is copied (also one that goes into a fused parameter),
    and dtype='float64' loads it."""
    from seqprob.gpt.safetensors import load_file, save_file
    folder = _copy(tmp_path)
    tensors = {k: v.astype(np.float64) for k, v in load_file(folder / "model.safetensors").items()}
    tensors["model.layers.0.self_attn.k_proj.weight"][0, 0] = 1e300  # part of the fused q|k|v
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"'model.layers.0.self_attn.k_proj.weight' holds values beyond the range of float32"):
        GPT.from_hf(folder)
    assert np.isfinite(GPT.from_hf(folder, dtype="float64").params["h.0.attn.c_attn.w"]).all()


@pytest.mark.parametrize("variant", BF16_VARIANTS)
def test_bf16_fixtures_hold_only_bf16_tensors(variant):
    """The references were computed from the BF16-rounded weights; the file must hold them as BF16."""
    from seqprob.gpt.safetensors import read_header
    header, _ = read_header(HF / variant / "model.safetensors")
    dtypes = {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}
    assert dtypes and set(dtypes.values()) == {"BF16"}, dtypes


@pytest.mark.parametrize("variant, name", [("bf16", "model.layers.0.mlp.down_proj.weight"),
                                           ("neox_bf16", "gpt_neox.layers.1.attention.query_key_value.weight")])
@pytest.mark.parametrize("bits, what", [(0x7FC0, "NaN"), (0xFF80, "-inf"), (0x7F80, "inf")])
def test_bf16_nan_and_inf_are_refused_from_the_raw_bits(tmp_path, variant, name, bits, what):
    """BF16 tensors stay undecoded until they are copied; the NaN/inf check reads their bits
    (exponent all ones) and names the tensor, whatever the value is."""
    from seqprob.gpt.safetensors import read_header
    folder = _copy(tmp_path, variant)
    path = folder / "model.safetensors"
    header, start = read_header(path)
    assert header[name]["dtype"] == "BF16"
    raw = bytearray(path.read_bytes())
    at = start + header[name]["data_offsets"][0] + 2 * 7  # the 8th element
    raw[at:at + 2] = bits.to_bytes(2, "little")
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=re.escape(repr(name)) + " holds NaN or inf"):
        GPT.from_hf(folder)


@pytest.mark.parametrize("variant", BF16_VARIANTS)
def test_bf16_raw_path_loads_exactly_the_decoded_weights(variant):
    """from_hf (BF16 kept as raw bits, decoded one tensor at a time) gives bit for bit what the
    importer gives from tensors decoded up front; NeoX's per-head interleaved q|k|v is checked
    against a mapping written out here."""
    from seqprob.gpt.safetensors import load_file
    folder = HF / variant
    model = GPT.from_hf(folder, dtype="float64")
    decoded = load_file(folder / "model.safetensors")
    hf = json.loads((folder / "config.json").read_text())
    ref = _params(hf["model_type"], dict(decoded), {}, model.config, hf,
                  dest={k: np.zeros_like(v) for k, v in model.params.items()})
    assert sorted(ref) == sorted(model.params)
    for name, value in ref.items():
        np.testing.assert_array_equal(model.params[name], value, err_msg=name)
    if hf["model_type"] == "gpt_neox":
        C, H = model.config.n_embd, model.config.n_head
        for i in range(model.config.n_layer):
            pre = f"gpt_neox.layers.{i}.attention.query_key_value."
            w = decoded[pre + "weight"].reshape(H, 3, C // H, C)  # rows: head, then q|k|v, then dim
            b = decoded[pre + "bias"].reshape(H, 3, C // H)
            for j in range(3):
                np.testing.assert_array_equal(model.params[f"h.{i}.attn.c_attn.w"][:, j * C:(j + 1) * C],
                                              w[:, j].reshape(C, C).T)
                np.testing.assert_array_equal(model.params[f"h.{i}.attn.c_attn.b"][j * C:(j + 1) * C],
                                              b[:, j].reshape(C))


@pytest.mark.parametrize("variant", BF16_VARIANTS)
def test_bf16_tensors_come_raw_when_asked_and_decode_to_the_same_values(variant):
    from seqprob.gpt.safetensors import bf16_to_float32, load_file
    path = HF / variant / "model.safetensors"
    for mapped in (False, True):
        names = set()
        raw, decoded = load_file(path, mapped=mapped, bf16=names), load_file(path, mapped=mapped)
        assert names == set(raw)  # every tensor of these fixtures is BF16
        for k in raw:
            if k in names:
                assert raw[k].dtype == np.uint16 and decoded[k].dtype == np.float32
                np.testing.assert_array_equal(bf16_to_float32(raw[k]), decoded[k])
                # BF16 is the top half of a float32: decoded independently of the library
                by_hand = (raw[k].astype(np.uint32) << 16).view(np.float32)
                np.testing.assert_array_equal(by_hand, decoded[k])
            else:
                np.testing.assert_array_equal(raw[k], decoded[k])


def test_params_are_copied_into_the_model_as_they_are_set():
    """from_hf's parameter dict writes each tensor through to the model's own array (so a
    decoded or transposed tensor can go at once); what the model lacks or cannot hold is
    kept as given, for load_params to refuse by name."""
    from seqprob.gpt.hf import _Params
    dest = {"w": np.zeros((2, 3), np.float64), "g": np.zeros(3, np.float64)}
    params = _Params(dest)
    params["w"] = np.arange(6, dtype=np.float32).reshape(3, 2).T  # a transposed float32 view
    params["g"] = np.ones(4)  # the wrong shape
    params["x"] = np.ones(2)  # not a parameter
    assert params["w"] is dest["w"]
    np.testing.assert_array_equal(dest["w"], np.arange(6).reshape(3, 2).T)
    assert params["g"].shape == (4,) and not dest["g"].any() and params["x"].shape == (2,)


def test_bf16_bit_check_reads_every_chunk():
    from seqprob.gpt.hf import _bf16_finite
    raw = np.full(11, 0x3F80, np.uint16)  # 1.0
    assert _bf16_finite(raw, chunk=4)
    for at in (0, 5, 10):
        bad = raw.copy()
        bad[at] = 0xFFC1  # a negative NaN with a payload
        assert not _bf16_finite(bad, chunk=4)


def test_a_tensor_in_two_shards_is_refused(tmp_path):
    from seqprob.gpt.safetensors import load_file, save_file
    folder = _copy(tmp_path)
    tensors = load_file(folder / "model.safetensors")
    names = sorted(tensors)
    save_file({k: tensors[k] for k in names[:3]}, folder / "a.safetensors")
    save_file({k: tensors[k] for k in names[2:]}, folder / "b.safetensors")
    (folder / "model.safetensors").unlink()
    index = {"weight_map": {k: ("a" if k in names[:3] else "b") + ".safetensors" for k in names}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=f"{names[2]!r} is in both"):
        GPT.from_hf(folder)


@pytest.mark.parametrize("change, match", [
    ({"model_type": ["llama"]}, "model_type must be a string"),
    ({"layer_types": 5}, "layer_types must list"),
])
def test_config_values_of_the_wrong_type_are_named(tmp_path, change, match):
    folder = _copy(tmp_path)
    _edit(folder, **change)
    with pytest.raises(CheckpointError, match=match):
        GPT.from_hf(folder)


def test_a_deeply_nested_config_or_index_is_malformed_not_a_recursion_error(tmp_path):
    folder = _copy(tmp_path)
    deep = "[" * 100_000 + "]" * 100_000
    (folder / "config.json").write_text(deep)
    with pytest.raises(CheckpointError, match="malformed config.json"):
        GPT.from_hf(folder)


@pytest.mark.parametrize("shard", ["a\0b.safetensors", "x" * 5000 + ".safetensors", "y" * 300 + ".safetensors"])
def test_shard_names_that_cannot_be_files_are_named(tmp_path, shard):
    folder = _copy(tmp_path, "sharded")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = shard
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="shard"):
        GPT.from_hf(folder)


def test_unembed_of_no_rows_is_empty():
    model = GPT.from_hf(HF / "llama_gqa")
    out = model.unembed(np.zeros((0, model.config.n_embd), np.float32))
    assert out.shape == (0, model.config.vocab_size)


def test_what_each_family_turns_on():
    """The options each family's config.json maps to (the models page's table)."""
    cfg = {v: GPT.from_hf(HF / v).config for v in FAMILIES}
    assert cfg["qwen3"].qk_norm == "head" and cfg["qwen3"].head_dim == 8 and cfg["qwen3"].n_embd == 16
    g2 = cfg["gemma2"]
    assert (g2.block_norms, g2.mlp, g2.attn_softcap, g2.final_softcap, g2.layer_types) == \
        ("sandwich", "geglu_tanh", 2.0, 3.0, ("sliding", "full", "sliding"))
    assert g2.embed_scale == 4.0 and g2.attn_scale == pytest.approx(6 ** -0.5) and g2.tie_weights
    for v in ("gemma3", "gemma3_4x"):  # both dialects: the same model
        g3 = cfg[v]
        assert (g3.qk_norm, g3.rope_local_theta, g3.rope_theta, g3.rope_scaling_dict, g3.layer_types) == \
            ("head", 10.0, 1000.0, {"rope_type": "linear", "factor": 2.0}, ("sliding", "sliding", "full"))
    assert (cfg["olmo2"].block_norms, cfg["olmo2"].qk_norm) == ("post", "all")
    assert cfg["mistral_sw"].layer_types == ("sliding",) * 3 and cfg["mistral_sw"].sliding_window == 4
    assert cfg["qwen2_sw"].layer_types == ("full", "sliding", "sliding")
    assert cfg["smollm3"].nope_layers == (1,)
    assert cfg["phi3"].sliding_window is None and cfg["phi3"].mlp == "swiglu"


@pytest.mark.parametrize("variant", ["gemma2", "olmo2", "qwen3"])
def test_param_counts_of_a_family_equal_the_checkpoint(variant):
    """param_counts() of the imported config counts exactly the checkpoint's tensors."""
    from seqprob.gpt.safetensors import load_file
    model = GPT.from_hf(HF / variant)
    n = sum(v.size for v in load_file(HF / variant / "model.safetensors").values())
    if model.config.tie_weights and "lm_head.weight" in load_file(HF / variant / "model.safetensors"):
        n -= model.config.vocab_size * model.config.n_embd
    assert int(model.config.param_counts()["params"].iloc[-1]) == model.n_params() == n


def test_gemma3_ignores_the_attention_softcap_as_transformers_does(tmp_path):
    """Gemma 3's config may carry attn_logit_softcapping, which transformers never applies."""
    folder = _copy(tmp_path, "gemma3")
    _edit(folder, attn_logit_softcapping=2.0)
    model = GPT.from_hf(folder, dtype="float64")
    assert model.config.attn_softcap is None
    ids = np.load(folder / "ids.npy")
    np.testing.assert_allclose(model.logits(ids), np.load(folder / "logits_f64.npy"), atol=1e-9, rtol=0)


def test_gemma_embedding_scale_of_a_width_without_an_exact_root():
    """gemma2_h20 (hidden 20: sqrt(20) is not a float32 number; fixture made independently of
    gemma2, with its own float64 patches) matches in both dtypes."""
    cfg = GPT.from_hf(HF / "gemma2_h20").config
    assert cfg.n_embd == 20 and cfg.embed_scale == pytest.approx(20 ** 0.5)
