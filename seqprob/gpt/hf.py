"""Import Hugging Face checkpoints: GPT-2, the Llama lineage (Llama, Mistral, Qwen2/3, Gemma 2/3,
OLMo 2, Phi-3, SmolLM3) and GPT-NeoX.

``config.json`` picks the architecture (``model_type``, else ``architectures``) and is read
in both dialects (transformers 5 ``rope_parameters``; 4.x ``rope_theta`` / ``rope_scaling``,
NeoX ``rotary_pct`` / ``rotary_emb_base``), validated field by field before anything is
allocated. Each architecture's tensor names are mapped onto seqprob's one parameter layout
(:mod:`seqprob.gpt.params`): PyTorch ``Linear`` weights ``[out, in]`` are transposed to
``[in, out]``, Q/K/V are fused as ``[q | k | v]`` columns (NeoX's per-head interleaving is
undone), a gated MLP's gate and up as ``[gate | up]``; what each family of the lineage turns
on is :data:`_FAMILIES` (Gemma's (1 + w) norm gains are stored as 1 + w). Single files and sharded checkpoints
(``model.safetensors.index.json``, every shard inside the folder) are read; F32, F16 and
BF16 weights load into float32 or float64. Options that change the numerics and that seqprob
lacks (other RoPE kinds such as ``longrope``, other activations or layer types, ...) are refused.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from .._docs import docs_url
from .._io import as_path
from ..errors import CheckpointError, InputError, SeqProbFileError
from ..registry import register_model_format
from . import safetensors as st
from .config import GPTConfig
from .params import copy_into

__all__ = ["from_hf", "config_from_hf", "ARCHITECTURES"]

_TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")
_REFUSED = ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn")
_SUFFIX = {"weight": "w", "bias": "b"}
_LN_SUFFIX = {"weight": "g", "bias": "b"}

#: model_type -> the HF class it names (``architectures`` entries are accepted too).
ARCHITECTURES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                 "qwen2": "Qwen2ForCausalLM", "gpt_neox": "GPTNeoXForCausalLM", "qwen3": "Qwen3ForCausalLM",
                 "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM", "olmo2": "Olmo2ForCausalLM",
                 "phi3": "Phi3ForCausalLM", "smollm3": "SmolLM3ForCausalLM"}

#: What each family of the Llama lineage changes in the one block (see the models page):
#: norms ("pre" / "sandwich" / "post"), q/k norm, Gemma's (1 + w) norm gains and sqrt(d)
#: embedding scale, which layers slide by default, fused projections (Phi-3).
_FAMILIES = {
    "llama": {}, "mistral": {"slides": "all"}, "qwen2": {"qkv_bias": True, "slides": "max_window_layers"},
    "qwen3": {"qk_norm": "head", "slides": "max_window_layers"},
    "gemma2": {"block_norms": "sandwich", "gemma": True, "slides": "alternate"},
    "gemma3_text": {"block_norms": "sandwich", "gemma": True, "qk_norm": "head", "slides": "pattern"},
    "olmo2": {"block_norms": "post", "qk_norm": "all"},
    "phi3": {"fused": True, "slides": "all"},
    "smollm3": {"slides": "max_window_layers"},
}
_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}


# ----------------------------------------------------------------------------- config.json
def _kind(hf: dict) -> str:
    kind = hf.get("model_type")
    if kind is not None and not isinstance(kind, str):
        raise CheckpointError(f"config.json's model_type must be a string, got {kind!r:.60}", value=kind)
    if kind is None:
        by_class = {v: k for k, v in ARCHITECTURES.items()}
        archs = hf.get("architectures") or []
        kind = next((by_class[a] for a in archs if isinstance(a, str) and a in by_class), None)
        if kind is None and not archs and "n_embd" in hf:
            kind = "gpt2"  # old GPT-2 configs name neither
        if kind is None:
            raise CheckpointError(f"config.json names no supported architecture (architectures={archs!r}); "
                                  f"seqprob reads {sorted(ARCHITECTURES.values())} (see {docs_url('models')})",
                                  value=archs)
    if kind == "gemma3":
        raise CheckpointError("config.json describes a Gemma 3 vision-language model (model_type='gemma3'): "
                              "seqprob reads the text-only Gemma3ForCausalLM checkpoints (model_type="
                              "'gemma3_text', e.g. google/gemma-3-270m, gemma-3-1b-pt)", value=kind)
    if kind not in ARCHITECTURES:
        raise CheckpointError(f"unsupported architecture model_type={kind!r}: seqprob reads "
                              f"{sorted(ARCHITECTURES)} (see {docs_url('models')})", value=kind)
    return kind


def _int(hf: dict, key: str, default=None, kind: str = "") -> int:
    value = hf.get(key, default)
    if value is None:
        raise CheckpointError(f"config.json ({kind}) lacks the field {key!r}", field=key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CheckpointError(f"config.json ({kind}) field {key!r} must be an integer, got {value!r}",
                              field=key, value=value)
    return value


def _num(hf: dict, key: str, default, kind: str = "") -> float:
    value = hf.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CheckpointError(f"config.json ({kind}) field {key!r} must be a number, got {value!r}",
                              field=key, value=value)
    return float(value)


def _flag(hf: dict, key: str, default: bool, kind: str = "") -> bool:
    value = hf.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise CheckpointError(f"config.json ({kind}) field {key!r} must be true or false, got {value!r}",
                              field=key, value=value)
    return value


def _rope(hf: dict, kind: str) -> dict:
    """RoPE fields of either config dialect -> GPTConfig keywords (NeoX's default fraction is
    0.25, as in transformers); Gemma 3's per-layer-type RoPE (5.x ``rope_parameters`` keyed
    by layer type, 4.x ``rope_local_base_freq``) becomes ``rope_local_theta``."""
    params = hf.get("rope_parameters") or {}
    if not isinstance(params, dict):
        raise CheckpointError(f"config.json ({kind}) rope_parameters must be an object, got {params!r}")
    local = hf.get("rope_local_base_freq")
    if params and all(isinstance(v, dict) for v in params.values()):
        unknown = sorted(set(params) - {"full_attention", "sliding_attention"})
        if unknown:
            raise CheckpointError(f"config.json ({kind}) has rope_parameters for layer types {unknown}: "
                                  "seqprob knows 'full_attention' and 'sliding_attention'", option="rope_parameters")
        sliding = params.get("sliding_attention")
        if sliding is not None and sliding.get("rope_type", "default") != "default":
            raise CheckpointError(f"config.json ({kind}) scales the RoPE of the sliding layers "
                                  f"({sliding.get('rope_type')!r}): seqprob scales only the full ones",
                                  option="rope_parameters")
        local = None if sliding is None else sliding.get("rope_theta", local)
        params = params.get("full_attention") or {}
    theta = _num({**hf, **params}, "rope_theta", hf.get("rotary_emb_base", 10000.0), kind)
    frac_keys = {**hf, **params}
    frac = _num(frac_keys, "partial_rotary_factor", hf.get("rotary_pct", 0.25 if kind == "gpt_neox" else 1.0), kind)
    scaling = hf.get("rope_scaling")
    if scaling is None and params.get("rope_type", "default") != "default":
        scaling = params
    if scaling is not None and not isinstance(scaling, dict):
        raise CheckpointError(f"config.json ({kind}) rope_scaling must be an object, got {scaling!r}")
    if scaling is not None:
        rtype = scaling.get("rope_type", scaling.get("type"))
        if rtype not in ("default", "linear", "llama3"):
            raise CheckpointError(f"config.json ({kind}) rope scaling type {rtype!r} is not supported: "
                                  "seqprob implements 'default', 'linear' and 'llama3'", value=rtype)
    out = dict(positions="rotary", rope_theta=theta, rotary_fraction=frac, rope_scaling=scaling)
    if local is not None:
        out["rope_local_theta"] = _num({"rope_local_base_freq": local}, "rope_local_base_freq", None, kind)
    return out


def _windows(hf: dict, kind: str, n_layer: int) -> dict:
    """Sliding-window fields: ``layer_types`` when config.json lists them, else the family's
    rule (Mistral and Phi-3: every layer; Qwen: layers from ``max_window_layers`` on when
    ``use_sliding_window``; Gemma 2: every other layer from the first; Gemma 3: all but
    every ``sliding_window_pattern``-th)."""
    window, types = hf.get("sliding_window"), hf.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layer or any(t not in _LAYER_TYPES for t in types):
            raise CheckpointError(f"config.json ({kind}) layer_types must list 'full_attention' or "
                                  f"'sliding_attention' for each of the {n_layer} layers, got {types!r:.80}",
                                  option="layer_types")
        types = [_LAYER_TYPES[t] for t in types]
    else:
        types = _default_layer_types(hf, kind, n_layer)
    if window is None or "sliding" not in types:
        return {}
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise CheckpointError(f"config.json ({kind}) sliding_window must be an integer >= 1, got {window!r}",
                              option="sliding_window")
    return dict(sliding_window=window, layer_types=tuple(types))


def _default_layer_types(hf: dict, kind: str, n_layer: int) -> list:
    rule = _FAMILIES.get(kind, {}).get("slides")
    if rule == "all":
        return ["sliding"] * n_layer
    if rule == "alternate":
        return ["sliding" if i % 2 == 0 else "full" for i in range(n_layer)]
    if rule == "pattern":
        every = _int(hf, "sliding_window_pattern", 6, kind)
        return ["full" if (i + 1) % every == 0 else "sliding" for i in range(n_layer)]
    if rule == "max_window_layers" and _flag(hf, "use_sliding_window", False, kind):
        first = _int(hf, "max_window_layers", n_layer, kind)
        return ["sliding" if i >= first else "full" for i in range(n_layer)]
    return ["full"] * n_layer


def _gpt2_config(hf: dict) -> dict:
    for key in _REFUSED:
        if hf.get(key):
            raise CheckpointError(f"config option {key}=true is not supported by seqprob's GPT", option=key)
    if not hf.get("scale_attn_weights", True):
        raise CheckpointError("config option scale_attn_weights=false is not supported", option="scale_attn_weights")
    act = hf.get("activation_function", "gelu_new")
    if act not in _TANH_GELUS + ("gelu",):
        raise CheckpointError(f"activation_function {act!r} is not supported: seqprob has the tanh "
                              f"GELU ({', '.join(_TANH_GELUS)}) and the exact 'gelu'", value=act)
    n_embd = _int(hf, "n_embd", kind="gpt2")
    n_inner = hf.get("n_inner")
    if n_inner is not None:
        n_inner = _int(hf, "n_inner", kind="gpt2")
    return dict(vocab_size=_int(hf, "vocab_size", kind="gpt2"),
                block_size=_int(hf, "n_positions", hf.get("n_ctx"), kind="gpt2"),
                n_layer=_int(hf, "n_layer", kind="gpt2"), n_head=_int(hf, "n_head", kind="gpt2"),
                n_embd=n_embd, mlp_hidden=n_inner, bias=True, mlp="gelu" if act == "gelu" else "gelu_tanh",
                tie_weights=_flag(hf, "tie_word_embeddings", True, "gpt2"),
                layer_norm_epsilon=_num(hf, "layer_norm_epsilon", 1e-5, "gpt2"))


def _common(hf: dict, kind: str) -> dict:
    n_embd, n_head = _int(hf, "hidden_size", kind=kind), _int(hf, "num_attention_heads", kind=kind)
    head_dim = hf.get("head_dim")
    head_size = None if head_dim is None or head_dim * n_head == n_embd else _int(hf, "head_dim", kind=kind)
    return dict(head_size=head_size, vocab_size=_int(hf, "vocab_size", kind=kind),
                block_size=_int(hf, "max_position_embeddings", kind=kind),
                n_layer=_int(hf, "num_hidden_layers", kind=kind), n_head=n_head, n_embd=n_embd,
                mlp_hidden=_int(hf, "intermediate_size", kind=kind),
                tie_weights=_flag(hf, "tie_word_embeddings", False, kind))


def _llama_config(hf: dict, kind: str) -> dict:
    """The Llama lineage: Llama, Mistral, Qwen2/3, Gemma 2/3, OLMo 2, Phi-3, SmolLM3."""
    family = _FAMILIES[kind]
    act = hf.get("hidden_activation") or hf.get("hidden_act", "silu")
    mlps = {"silu": "swiglu", **{name: "geglu_tanh" for name in _TANH_GELUS}}
    if act not in mlps:
        raise CheckpointError(f"config.json ({kind}) hidden_act={act!r} is not supported: seqprob's gated "
                              f"MLPs use silu (SwiGLU) or the tanh GELU ({', '.join(_TANH_GELUS)})", value=act)
    out = _common(hf, kind)
    attn_bias = _flag(hf, "attention_bias", False, kind)
    qkv_bias = family.get("qkv_bias", attn_bias)
    out.update(n_kv_head=_int(hf, "num_key_value_heads", out["n_head"], kind), norm="rmsnorm",
               mlp=mlps[act], layer_norm_epsilon=_num(hf, "rms_norm_eps", 1e-6, kind),
               bias=attn_bias and not family.get("qkv_bias"), qkv_bias=qkv_bias,
               mlp_bias=_flag(hf, "mlp_bias", False, kind), qk_norm=family.get("qk_norm"),
               block_norms=family.get("block_norms", "pre"), **_rope(hf, kind),
               **_windows(hf, kind, out["n_layer"]))
    if family.get("gemma"):
        out.update(_gemma(hf, kind, out))
    if kind == "smollm3":
        out["nope_layers"] = _nope_layers(hf, out["n_layer"])
    return out


def _gemma(hf: dict, kind: str, out: dict) -> dict:
    """Gemma's embedding scale sqrt(d), score scale query_pre_attn_scalar^-1/2 and soft-caps."""
    caps = {}
    for key, name in (("attn_logit_softcapping", "attn_softcap"), ("final_logit_softcapping", "final_softcap")):
        if key == "attn_logit_softcapping" and kind == "gemma3_text":
            continue  # transformers' Gemma 3 stores it but never applies it
        if hf.get(key) is not None:
            caps[name] = _num(hf, key, None, kind)
    head = out["head_size"] or out["n_embd"] // out["n_head"]
    scalar = _num(hf, "query_pre_attn_scalar", head, kind)
    return dict(embed_scale=math.sqrt(out["n_embd"]), attn_scale=scalar ** -0.5, tie_weights=_flag(
        hf, "tie_word_embeddings", True, kind), **caps)


def _nope_layers(hf: dict, n_layer: int):
    """SmolLM3's ``no_rope_layers``: per layer 1 = rotary positions, 0 = none (default: every
    ``no_rope_layer_interval``-th layer has none)."""
    flags = hf.get("no_rope_layers")
    if flags is None:
        every = _int(hf, "no_rope_layer_interval", 4, "smollm3")
        flags = [int((i + 1) % every != 0) for i in range(n_layer)]
    if not isinstance(flags, list) or len(flags) != n_layer or any(f not in (0, 1) for f in flags):
        raise CheckpointError(f"config.json (smollm3) no_rope_layers must list 0 or 1 for each of the "
                              f"{n_layer} layers, got {flags!r:.80}", option="no_rope_layers")
    return tuple(i for i, f in enumerate(flags) if not f) or None


def _neox_config(hf: dict) -> dict:
    act = hf.get("hidden_act", "gelu")
    if act not in _TANH_GELUS + ("gelu",):
        raise CheckpointError(f"config.json (gpt_neox) hidden_act={act!r} is not supported: seqprob has "
                              f"'gelu' and the tanh GELU ({', '.join(_TANH_GELUS)})", value=act)
    out = _common(hf, "gpt_neox")
    out.update(norm="layernorm", mlp="gelu" if act == "gelu" else "gelu_tanh",
               layer_norm_epsilon=_num(hf, "layer_norm_eps", 1e-5, "gpt_neox"),
               bias=_flag(hf, "attention_bias", True, "gpt_neox"),
               parallel_residual=_flag(hf, "use_parallel_residual", True, "gpt_neox"), **_rope(hf, "gpt_neox"))
    return out


def config_from_hf(hf: dict, dtype: str = "float32") -> GPTConfig:
    """GPTConfig of a HF ``config.json`` dict; unsupported options raise CheckpointError.

    Examples
    --------
    >>> cfg = config_from_hf({"model_type": "llama", "vocab_size": 32, "hidden_size": 16,
    ...     "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4,
    ...     "num_key_value_heads": 2, "max_position_embeddings": 64})
    >>> cfg.norm, cfg.mlp, cfg.kv_heads, cfg.tie_weights
    ('rmsnorm', 'swiglu', 2, False)
    """
    if not isinstance(hf, dict):
        raise CheckpointError(f"config.json must hold a JSON object, got a {type(hf).__name__}",
                              value=type(hf).__name__)
    kind = _kind(hf)
    if kind == "gpt2":
        fields = _gpt2_config(hf)
    elif kind == "gpt_neox":
        fields = _neox_config(hf)
    else:
        fields = _llama_config(hf, kind)
    try:
        return GPTConfig(dtype=dtype, **fields)
    except InputError as exc:
        raise CheckpointError(f"config.json ({kind}) describes a model seqprob cannot build: {exc}") from None


# ----------------------------------------------------------------------------- files
def _files_root(folder: Path) -> Path:
    """Where the files of a model folder may live once symlinks are followed: the folder
    itself, or for a snapshot of the Hugging Face cache (``models--ORG--NAME/snapshots/<commit>``,
    whose files are symlinks into ``../../blobs``) its repository folder."""
    if folder.parent.name == "snapshots" and (folder.parent.parent / "blobs").is_dir():
        return folder.parent.parent.resolve()
    return folder.resolve()


def _shard_path(folder: Path, name) -> Path:
    """A shard file named in the index, which must resolve to a file inside ``folder``."""
    index = folder / "model.safetensors.index.json"
    if not isinstance(name, str) or not name or os.path.isabs(name) or "\0" in name or len(name) > 4096:
        raise CheckpointError(f"{str(index)!r} names a shard {name!r}: shards must be relative "
                              "paths inside the model folder", path=str(index), shard=name)
    try:
        path = (folder / name).resolve()
        inside = Path(os.path.normpath(folder / name)).is_relative_to(os.path.normpath(folder)) \
            and path.is_relative_to(_files_root(folder))
        is_file = inside and path.is_file()  # nothing outside the folder is even looked at
    except OSError as exc:  # e.g. a name past the file system's length limit
        raise CheckpointError(f"{str(index)!r} names a shard {name[:60]!r} that cannot be opened: "
                              f"{exc.strerror or exc}", path=str(index), shard=name) from None
    if not inside:
        raise CheckpointError(f"{str(index)!r} names a shard {name!r} that resolves to {str(path)!r}, "
                              "outside the model folder", path=str(index), shard=name)
    if not is_file:
        raise CheckpointError(f"missing shard {name!r} (listed in {str(index)!r})", path=str(index), shard=name)
    return path


def _shards(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            files = sorted(set(weight_map.values()), key=str)
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, UnicodeDecodeError,
                RecursionError) as exc:
            raise CheckpointError(f"malformed {str(index)!r}: {exc}", path=str(index)) from None
        return [_shard_path(folder, f) for f in files]
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    hint = " (only pytorch_model.bin: convert it to safetensors)" if (folder / "pytorch_model.bin").exists() else ""
    raise SeqProbFileError(f"no model.safetensors in {str(folder)!r}{hint}", path=str(folder))


def _read_all(files: list[Path], skip) -> tuple[dict, dict, set]:
    """name -> array of every tensor in ``files`` (skipping ``skip(name)``; views on the
    mapped files, BF16 ones as raw bits), name -> file, and the names of the BF16 tensors."""
    tensors, where, bf16 = {}, {}, set()
    for file in files:
        for key, value in st.load_file(file, skip=skip, mapped=True, bf16=bf16).items():
            if key in tensors:
                raise CheckpointError(f"tensor {key!r} is in both {where[key]!r} and {file.name!r}",
                                      name=key)
            tensors[key], where[key] = value, file.name
    return tensors, where, bf16


class _Params(dict):
    """Parameters by seqprob name, each copied into the model's own array as it is set (the
    value kept is that array): a tensor decoded from BF16 or transposed from the file is
    dropped at once, so loading holds the model plus about one tensor, not a second model.
    A name the model lacks, or a shape it does not have, is kept as given for
    ``load_params`` to refuse by name."""

    def __init__(self, dest: dict):
        super().__init__()
        self.dest = dest

    def __setitem__(self, name, value):
        target = self.dest.get(name)
        if target is not None and value is not target and np.shape(value) == target.shape:
            copy_into(target, value, release=st.release)  # file pages dropped stripe by stripe
            st.release(value)  # a view of the mapped file: its pages are not needed again
            value = target
        super().__setitem__(name, value)


def _read_config(folder: Path) -> dict:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except OSError as exc:
        raise SeqProbFileError(f"cannot read {str(folder / 'config.json')!r}: {exc.strerror or exc}",
                               path=str(folder)) from exc
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise CheckpointError(f"malformed config.json in {str(folder)!r}: {exc}", path=str(folder)) from None


# ----------------------------------------------------------------------------- GPT-2 names
def _gpt2_name(key: str) -> str | None:
    """seqprob parameter name of a HF GPT-2 tensor name; None for tensors to skip."""
    if key.startswith("transformer."):
        key = key[len("transformer."):]
    parts = key.split(".")
    if key in ("wte.weight", "wpe.weight"):
        return parts[0]
    if key == "lm_head.weight":
        return "lm_head.w"
    if parts[0] == "ln_f" and len(parts) == 2:
        return f"ln_f.{_LN_SUFFIX.get(parts[1], parts[1])}"
    if parts[0] == "h" and len(parts) >= 4:
        if parts[-1] in ("masked_bias",) or (parts[2] == "attn" and len(parts) == 4 and parts[3] == "bias"):
            return None  # causal-mask buffers
        table = _LN_SUFFIX if parts[2].startswith("ln_") else _SUFFIX
        return ".".join(parts[:-1] + [table.get(parts[-1], parts[-1])])
    return key


_SIZE_FIELDS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner")


def _gpt2_params(tensors: dict, where: dict, config, hf: dict, dest: dict, bf16=frozenset()) -> dict:
    from .params import param_shapes
    shapes = param_shapes(config)
    out = _Params(dest)
    for key, value in tensors.items():
        name = _gpt2_name(key)
        if name in shapes and tuple(value.shape) != shapes[name]:
            sizes = ", ".join(f"{k}={hf[k]}" for k in _SIZE_FIELDS if k in hf)
            raise CheckpointError(f"tensor {key!r} in {where.get(key)!r} has shape {tuple(value.shape)}, "
                                  f"config.json ({sizes}) needs {shapes[name]}", name=key)
        # decoded only to be copied into the model (a tied lm_head is dropped as it is)
        out[name] = _decode_bf16(value) if key in bf16 and name in dest else value
    return out


# ----------------------------------------------------------------------------- Llama, Qwen2, NeoX
class _Taker:
    """Pops HF tensors by name, checking presence and shape against the config."""

    def __init__(self, tensors: dict, where: dict, kind: str, bf16=frozenset()):
        self.tensors, self.where, self.kind, self.bf16 = tensors, where, kind, bf16

    def __call__(self, name: str, shape: tuple, optional: bool = False, decode: bool = True):
        if name not in self.tensors:
            if optional:
                return None
            raise CheckpointError(f"tensor {name!r} is missing from the {self.kind} checkpoint "
                                  f"(config.json needs it, shape {shape})", name=name)
        value = self.tensors.pop(name)
        if tuple(value.shape) != tuple(shape):
            raise CheckpointError(f"tensor {name!r} in {self.where.get(name)!r} has shape {tuple(value.shape)}, "
                                  f"config.json needs {tuple(shape)}", name=name, shape=tuple(value.shape))
        return _decode_bf16(value) if decode and name in self.bf16 else value


def _decode_bf16(raw: np.ndarray) -> np.ndarray:
    """float32 values of raw BF16 bits; the raw view's mapped pages are dropped after."""
    values = st.bf16_to_float32(raw)
    st.release(raw)
    return values


def _fused(out: np.ndarray, parts: list) -> np.ndarray:
    """``parts`` side by side along the last axis, written into ``out`` (the model's own
    array: no concatenated copy for ``load_params`` to copy again)."""
    lo = 0
    for part in parts:
        copy_into(out[..., lo:lo + part.shape[-1]], part, release=st.release)  # a transposed part: in tiles
        st.release(part)
        lo += part.shape[-1]
    return out


def _llama_params(tensors: dict, where: dict, config, kind: str, dest: dict, bf16=frozenset(),
                  gradients: bool = False) -> dict:
    """The Llama lineage's tensors by seqprob name. Gemma stores its norm gains as w in
    x (1 + w): they become 1 + w here (in float64, then the model's dtype: the float32 sum
    HF computes), except for ``gradients`` (d/dw = d/dg)."""
    take = _Taker(tensors, where, kind, bf16)
    family = _FAMILIES[kind]
    C = config.n_embd
    norm = _gemma_gain if family.get("gemma") and not gradients else (lambda value: value)
    out = _Params(dest)
    out["wte"] = take("model.embed_tokens.weight", (config.vocab_size, C))
    out["ln_f.g"] = norm(take("model.norm.weight", (C,)))
    for i in range(config.n_layer):
        pre, dst = f"model.layers.{i}.", f"h.{i}."
        for src, name in _norm_names(config):
            out[dst + name + ".g"] = norm(take(pre + src + ".weight", (C,)))
        _attention_params(take, out, dest, config, pre + "self_attn.", dst, family, norm)
        _mlp_params(take, out, dest, config, pre + "mlp.", dst, family)
    _lm_head(out, take, "lm_head.weight", config)
    return out


def _gemma_gain(value: np.ndarray) -> np.ndarray:
    return value.astype(np.float64) + 1.0


def _norm_names(config) -> list:
    """(HF name, seqprob name) of each block norm: Llama's input / post_attention (before the
    MLP); Gemma's four; OLMo 2's two after attention and MLP."""
    if config.block_norms == "sandwich":
        return [("input_layernorm", "ln_1"), ("post_attention_layernorm", "ln_attn"),
                ("pre_feedforward_layernorm", "ln_2"), ("post_feedforward_layernorm", "ln_mlp")]
    if config.block_norms == "post":
        return [("post_attention_layernorm", "ln_attn"), ("post_feedforward_layernorm", "ln_mlp")]
    return [("input_layernorm", "ln_1"), ("post_attention_layernorm", "ln_2")]


def _attention_params(take, out, dest, config, attn: str, dst: str, family: dict, norm) -> None:
    C, hd = config.n_embd, config.head_dim
    nq, nk = config.n_head * hd, config.kv_heads * hd
    if family.get("fused"):  # Phi-3: one [q | k | v] matrix
        out[dst + "attn.c_attn.w"] = take(attn + "qkv_proj.weight", (nq + 2 * nk, C)).T
    else:
        q, k, v = (take(attn + f"{n}_proj.weight", (w, C)) for n, w in (("q", nq), ("k", nk), ("v", nk)))
        out[dst + "attn.c_attn.w"] = _fused(dest[dst + "attn.c_attn.w"], [q.T, k.T, v.T])  # (C, nq + 2 nk)
        del q, k, v  # read once: the file's arrays go as soon as they are copied
    if config.has_qkv_bias:
        out[dst + "attn.c_attn.b"] = np.concatenate(
            [take(attn + f"{n}_proj.bias", (w,)) for n, w in (("q", nq), ("k", nk), ("v", nk))])
    if config.qk_norm is not None:
        qn, kn = (hd, hd) if config.qk_norm == "head" else (nq, nk)
        out[dst + "attn.q_norm.g"] = norm(take(attn + "q_norm.weight", (qn,)))
        out[dst + "attn.k_norm.g"] = norm(take(attn + "k_norm.weight", (kn,)))
    out[dst + "attn.c_proj.w"] = take(attn + "o_proj.weight", (C, nq)).T
    if config.bias:
        out[dst + "attn.c_proj.b"] = take(attn + "o_proj.bias", (C,))


def _mlp_params(take, out, dest, config, mlp: str, dst: str, family: dict) -> None:
    C, F = config.n_embd, config.mlp_width
    if family.get("fused"):  # Phi-3: one [gate | up] matrix
        out[dst + "mlp.c_fc.w"] = take(mlp + "gate_up_proj.weight", (2 * F, C)).T
    else:
        gate, up = take(mlp + "gate_proj.weight", (F, C)), take(mlp + "up_proj.weight", (F, C))
        out[dst + "mlp.c_fc.w"] = _fused(dest[dst + "mlp.c_fc.w"], [gate.T, up.T])  # (C, 2F)
    out[dst + "mlp.c_proj.w"] = take(mlp + "down_proj.weight", (C, F)).T
    if config.has_mlp_bias:
        out[dst + "mlp.c_fc.b"] = np.concatenate([take(mlp + "gate_proj.bias", (F,)),
                                                  take(mlp + "up_proj.bias", (F,))])
        out[dst + "mlp.c_proj.b"] = take(mlp + "down_proj.bias", (C,))


def _neox_params(tensors: dict, where: dict, config, dest: dict, bf16=frozenset()) -> dict:
    take = _Taker(tensors, where, "gpt_neox", bf16)
    C, F, H, hd, b = config.n_embd, config.mlp_width, config.n_head, config.head_dim, config.bias
    out = _Params(dest)
    out["wte"] = take("gpt_neox.embed_in.weight", (config.vocab_size, C))
    out["ln_f.g"] = take("gpt_neox.final_layer_norm.weight", (C,))
    out["ln_f.b"] = take("gpt_neox.final_layer_norm.bias", (C,))
    for i in range(config.n_layer):
        pre, dst = f"gpt_neox.layers.{i}.", f"h.{i}."
        for src, name in (("input_layernorm", "ln_1"), ("post_attention_layernorm", "ln_2")):
            out[dst + name + ".g"] = take(pre + src + ".weight", (C,))
            out[dst + name + ".b"] = take(pre + src + ".bias", (C,))
        w = take(pre + "attention.query_key_value.weight", (3 * C, C)).reshape(H, 3, hd, C)
        qkv = out[dst + "attn.c_attn.w"] = dest[dst + "attn.c_attn.w"]  # (C, 3C) [q|k|v], the model's array
        qkv.reshape(C, 3, H, hd)[...] = w.transpose(3, 1, 0, 2)  # per-head -> [q|k|v], one strided copy
        st.release(w)
        if b:
            bias = take(pre + "attention.query_key_value.bias", (3 * C,)).reshape(H, 3, hd)
            out[dst + "attn.c_attn.b"] = bias.transpose(1, 0, 2).reshape(3 * C)
        pairs = (("attention.dense", "attn.c_proj", (C, C)), ("mlp.dense_h_to_4h", "mlp.c_fc", (F, C)),
                 ("mlp.dense_4h_to_h", "mlp.c_proj", (C, F)))
        for src, name, shape in pairs:
            out[dst + name + ".w"] = take(pre + src + ".weight", shape).T
            if b:
                out[dst + name + ".b"] = take(pre + src + ".bias", (shape[0],))
    # Pythia on the hub and transformers' save_pretrained: embed_out; the module itself: lm_head
    _lm_head(out, take, "lm_head.weight" if "lm_head.weight" in tensors else "embed_out.weight", config)
    return out


def _lm_head(out: dict, take, name: str, config) -> None:
    head = take(name, (config.vocab_size, config.n_embd), optional=config.tie_weights,
                decode=not config.tie_weights)  # a tied head is dropped: not worth decoding
    if not config.tie_weights:
        out["lm_head.w"] = head


_SKIP = {"gpt2": lambda k: _gpt2_name(k) is None,
         "llama": lambda k: k.endswith("rotary_emb.inv_freq"),
         "gpt_neox": lambda k: k.endswith(("attention.bias", "attention.masked_bias", "rotary_emb.inv_freq"))}


def _params(kind: str, tensors: dict, where: dict, config, hf: dict, dest: dict, bf16=frozenset(),
            gradients: bool = False) -> dict:
    """Parameters by seqprob name, copied into ``dest`` (the model's own arrays) as they come;
    ``bf16`` names the tensors still in raw BF16 bits; ``gradients``: the tensors are
    gradients (mapped without Gemma's 1 + w)."""
    if kind == "gpt2":
        return _gpt2_params(tensors, where, config, hf, dest, bf16)
    out = _neox_params(tensors, where, config, dest, bf16) if kind == "gpt_neox" else \
        _llama_params(tensors, where, config, kind, dest, bf16, gradients)
    if tensors:
        names = sorted(tensors)
        raise CheckpointError(f"the {kind} checkpoint has tensors seqprob does not use: {names[:5]} "
                              "(an option seqprob lacks?)", unexpected=names)
    return out


def from_hf(path, dtype: str = "float32", tokenizer=None, cls=None, revision: str | None = None):
    """Build a :class:`~seqprob.gpt.GPT` from a Hugging Face checkpoint folder.

    Parameters
    ----------
    path : str or Path
        Folder with ``config.json`` and ``model.safetensors`` (or shards + index), or the
        ``.safetensors`` file itself with ``config.json`` beside it. Supported: the classes
        of :data:`ARCHITECTURES` (GPT-2, Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3 text,
        OLMo 2, Phi-3, SmolLM3, GPT-NeoX/Pythia).
    dtype : {"float32", "float64"}
        Weights (F32, F16 or BF16 in the file) are converted to this dtype (float64
        reproduces HF's float64 logits to 1e-9).
    tokenizer : Tokenizer, optional
        E.g. ``TiktokenTokenizer("gpt2")``; its vocabulary must have ``vocab_size`` tokens.
    revision : str, optional
        When ``path`` is a Hugging Face model name (``"ORG/NAME"``, looked up in the local
        Hugging Face cache if no local path has that name): the branch, tag or commit hash.

    Returns
    -------
    GPT
        Without a tokenizer the vocabulary is synthetic (``"<i>"``), with BOS/EOS set from
        ``bos_token_id`` / ``eos_token_id`` of the config (GPT-2: 50256, ``<|endoftext|>``).

    Raises
    ------
    CheckpointError
        An unsupported architecture or option, a bad config.json field, a missing or
        misplaced shard, a missing tensor or one whose shape disagrees with the config.
    SeqProbFileError
        No such folder, or no weights file.
    """
    from ..registry import local_or_cached, model_class

    cls = cls or model_class("GPT")
    if dtype not in ("float32", "float64"):
        raise InputError(f"dtype must be 'float32' or 'float64', got {dtype!r}", value=dtype)
    path = as_path(path)
    path = local_or_cached(path, revision)
    folder = path.parent if path.is_file() else path
    if not folder.is_dir():
        raise SeqProbFileError(f"no such checkpoint folder {str(path)!r}", path=str(path))
    if path.is_file() and path.suffix != ".safetensors":
        raise SeqProbFileError(f"{str(path)!r} is a file, not a Hugging Face checkpoint: pass its "
                               f"folder (config.json + model.safetensors) or its .safetensors file",
                               path=str(path))
    hf = _read_config(folder)
    config = config_from_hf(hf, dtype=dtype)
    files = [path] if path.is_file() else _shards(folder)
    tensors, where, bf16 = _read_all(files, _SKIP.get(_kind(hf), _SKIP["llama"]))
    _check_finite(tensors, bf16, config.dtype)
    special = {k: hf.get(k) for k in ("bos_token_id", "eos_token_id")}
    special = {k: v if isinstance(v, int) and 0 <= v < config.vocab_size else None for k, v in special.items()}
    model = cls(config, seed=0, _init=False, bos_id=special["bos_token_id"], eos_id=special["eos_token_id"])
    # every tensor is copied into the model's arrays as it is taken (fused q|k|v and gate|up
    # written straight there); a BF16 one is decoded just before, and dropped just after
    params = _params(_kind(hf), tensors, where, config, hf, dest=model.params, bf16=bf16)
    del tensors  # the file's arrays; ``params`` holds what the model keeps
    if config.tie_weights:
        params.pop("lm_head.w", None)
    model.load_params(params, strict=True)  # every parameter: nothing is left at zero
    if tokenizer is not None:
        model.tokenizer = tokenizer
    return model


def _check_finite(tensors: dict, bf16=frozenset(), dtype="float32") -> None:
    """CheckpointError unless every tensor holds finite floats that fit the model's ``dtype``
    (a float64 1e300 would become inf in float32), before anything is copied."""
    limit = float(np.finfo(dtype).max)
    for name, value in tensors.items():
        if name in bf16:  # BF16 has float32's exponent range: finite is enough
            finite, top = _bf16_finite(value), 0.0
        elif not np.issubdtype(value.dtype, np.floating):
            raise CheckpointError(f"tensor {name!r} has dtype {value.dtype}, expected floats", name=name)
        else:  # NaN propagates through min and max, an inf is one of them: two passes, no (N,) mask
            lo, hi = (float(value.min()), float(value.max())) if value.size else (0.0, 0.0)
            finite, top = math.isfinite(lo) and math.isfinite(hi), max(-lo, hi)
        if not finite:
            raise CheckpointError(f"tensor {name!r} holds NaN or inf values", name=name)
        if top > limit:
            raise CheckpointError(f"tensor {name!r} holds values beyond the range of {np.dtype(dtype)} "
                                  f"(|x| <= {limit:.4g}); load it with dtype='float64'", name=name, limit=limit)
        st.release(value)  # read again when it is copied: no need to keep every page mapped


def _bf16_finite(raw: np.ndarray, chunk: int = 1 << 20) -> bool:
    """No NaN or inf among BF16 bits (exponent all ones: bits 0x7F80), in chunks (no mask
    the size of the tensor)."""
    flat = raw.reshape(-1)
    for lo in range(0, flat.size, chunk):
        if np.any(np.bitwise_and(flat[lo:lo + chunk], 0x7F80) == 0x7F80):
            return False
    return True


# ------------------------------------------------ this family joins the model registry
def _is_hf_folder(path: Path) -> bool:
    folder = path.parent if path.is_file() and path.suffix == ".safetensors" else path
    if not (folder / "config.json").is_file() or (folder / "manifest.json").exists():
        return False
    return any(folder.glob("*.safetensors"))


def _load_hf_folder(path):
    """An HF checkpoint with the folder's ``tokenizer.json`` (when present) as its tokenizer."""
    from ..tokenizers.hf import folder_tokenizer

    path = Path(path)
    folder = path.parent if path.is_file() else path
    return from_hf(path, tokenizer=folder_tokenizer(folder))


register_model_format("hf", _is_hf_folder, _load_hf_folder,
                      "Hugging Face transformers folder of a GPT-2, Llama, Mistral, Qwen2/3, Gemma 2/3, "
                      "OLMo 2, Phi-3, SmolLM3 or GPT-NeoX model (config.json + *.safetensors)")
