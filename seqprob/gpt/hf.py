"""Import a Hugging Face GPT-2 checkpoint (``config.json`` + ``model.safetensors``).

Handles the optional ``transformer.`` prefix, GPT-2's Conv1D ``[in, out]`` weights (the same
layout seqprob uses, so nothing is transposed), the fused ``c_attn``, the attention-mask
buffers (skipped), sharded checkpoints (``model.safetensors.index.json``) and a tied or
separate ``lm_head``. Options that change the numerics and are not implemented are refused.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import CheckpointError, InputError, SeqProbFileError
from . import safetensors as st
from .config import GPTConfig

__all__ = ["from_hf", "config_from_hf"]

_TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")
_REFUSED = ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn")
_SUFFIX = {"weight": "w", "bias": "b"}
_LN_SUFFIX = {"weight": "g", "bias": "b"}


def config_from_hf(hf: dict, dtype: str = "float32") -> GPTConfig:
    """GPTConfig of a GPT-2 ``config.json`` dict; unsupported options raise CheckpointError."""
    if hf.get("model_type", "gpt2") != "gpt2":
        raise CheckpointError(f"model_type {hf.get('model_type')!r} is not GPT-2", value=hf.get("model_type"))
    for key in _REFUSED:
        if hf.get(key):
            raise CheckpointError(f"config option {key}=true is not supported by seqprob's GPT", option=key)
    if not hf.get("scale_attn_weights", True):
        raise CheckpointError("config option scale_attn_weights=false is not supported", option="scale_attn_weights")
    act = hf.get("activation_function", "gelu_new")
    if act not in _TANH_GELUS:
        raise CheckpointError(f"activation_function {act!r} is not supported: seqprob uses the tanh "
                              f"GELU ({', '.join(_TANH_GELUS)})", value=act)
    try:
        n_embd = int(hf["n_embd"])
        n_inner = hf.get("n_inner")
        if n_inner is not None and int(n_inner) != 4 * n_embd:
            raise CheckpointError(f"n_inner={n_inner} is not supported: the MLP width must be 4*n_embd={4 * n_embd}",
                                  value=n_inner)
        return GPTConfig(vocab_size=int(hf["vocab_size"]), block_size=int(hf.get("n_positions", hf.get("n_ctx"))),
                         n_layer=int(hf["n_layer"]), n_head=int(hf["n_head"]), n_embd=n_embd, bias=True,
                         tie_weights=bool(hf.get("tie_word_embeddings", True)), dtype=dtype,
                         layer_norm_epsilon=float(hf.get("layer_norm_epsilon", 1e-5)))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"config.json lacks or has a bad GPT-2 field: {exc}") from None
    except InputError as exc:
        raise CheckpointError(f"config.json describes an invalid model: {exc}") from None


def _hf_name(key: str) -> str | None:
    """seqprob parameter name of a HF tensor name; None for tensors to skip."""
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


def _shards(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CheckpointError(f"malformed {str(index)!r}: {exc}", path=str(index)) from None
        return [folder / f for f in files]
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    hint = " (only pytorch_model.bin: convert it to safetensors)" if (folder / "pytorch_model.bin").exists() else ""
    raise SeqProbFileError(f"no model.safetensors in {str(folder)!r}{hint}", path=str(folder))


def _read_tensors(files: list[Path]) -> dict:
    tensors = {}
    for file in files:
        for key, value in st.load_file(file, skip=lambda k: _hf_name(k) is None).items():
            tensors[_hf_name(key)] = value
    return tensors


def from_hf(path, dtype: str = "float32", tokenizer=None, cls=None):
    """Build a :class:`~seqprob.gpt.GPT` from a Hugging Face GPT-2 checkpoint folder.

    Parameters
    ----------
    path : str or Path
        Folder with ``config.json`` and ``model.safetensors`` (or shards + index), or the
        ``.safetensors`` file itself with ``config.json`` beside it.
    dtype : {"float32", "float64"}
        Weights are converted to this dtype (float64 reproduces HF's float64 logits to 1e-9).
    tokenizer : Tokenizer, optional
        E.g. ``TiktokenTokenizer("gpt2")``; its vocabulary must have ``vocab_size`` tokens.

    Returns
    -------
    GPT
        Without a tokenizer the vocabulary is synthetic (``"<i>"``), with BOS/EOS set from
        ``bos_token_id`` / ``eos_token_id`` of the config (GPT-2: 50256, ``<|endoftext|>``).
    """
    from ..registry import model_class

    cls = cls or model_class("GPT")
    path = Path(os.fspath(path))
    folder = path.parent if path.is_file() else path
    if not folder.is_dir():
        raise SeqProbFileError(f"no such checkpoint folder {str(path)!r}", path=str(path))
    try:
        hf = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except OSError as exc:
        raise SeqProbFileError(f"cannot read {str(folder / 'config.json')!r}: {exc.strerror or exc}",
                               path=str(folder)) from exc
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"malformed config.json in {str(folder)!r}: {exc}", path=str(folder)) from None
    config = config_from_hf(hf, dtype=dtype)
    files = [path] if path.is_file() else _shards(folder)
    tensors = _read_tensors(files)
    if config.tie_weights:
        tensors.pop("lm_head.w", None)
    special = {k: hf.get(k) for k in ("bos_token_id", "eos_token_id")}
    special = {k: v if isinstance(v, int) and 0 <= v < config.vocab_size else None for k, v in special.items()}
    model = cls(config, seed=0, bos_id=special["bos_token_id"], eos_id=special["eos_token_id"])
    _check_finite(tensors)
    model.load_params(tensors, strict=True)
    if tokenizer is not None:
        model.tokenizer = tokenizer
    return model


def _check_finite(tensors: dict) -> None:
    for name, value in tensors.items():
        if not np.issubdtype(value.dtype, np.floating):
            raise CheckpointError(f"tensor {name!r} has dtype {value.dtype}, expected floats", name=name)
        if not np.isfinite(value).all():
            raise CheckpointError(f"tensor {name!r} holds NaN or inf values", name=name)


# ------------------------------------------------ this family joins the model registry
from ..registry import register_model_format  # noqa: E402  (a leaf module: no cycle)


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


register_model_format("hf-gpt2", _is_hf_folder, _load_hf_folder,
                      "Hugging Face GPT-2 folder (config.json + model.safetensors)")
