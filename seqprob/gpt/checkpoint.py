"""GPT checkpoints: a folder with the config, the weights, the optimizer and training state.

Layout of a checkpoint folder::

    config.json          {"format": "seqprob.gpt", "format_version": 1, "config": {...},
                          "vocab": {...} (only when there is no tokenizer)}
    model.safetensors    the parameters by name (a tied W_U is stored once, as ``wte``)
    optimizer.json       AdamW hyperparameters and step count (when an optimizer was given)
    optimizer.safetensors  its moments ``m.<name>`` and ``v.<name>``
    tokenizer.json       ``model.tokenizer`` (when set), read back by ``load_tokenizer``
    training.json        ``extra``: JSON data such as the step and the sampler's RNG state
    manifest.json        written last: every file above with its size and SHA-256

Tensors are written as safetensors when :mod:`seqprob.gpt.safetensors` is available, else as
``.npz`` (same names); the loader reads whichever the manifest lists.

Writes are atomic at the folder level: everything goes into a temporary sibling folder,
which then replaces the old checkpoint by two renames, so an interrupted save leaves the
previous checkpoint intact (in the worst case under ``.<name>.old-*`` beside it, which the
loader points to). A folder that exists but is not a seqprob checkpoint is never replaced.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._io import (as_path, atomic_write, make_temp_dir, raise_write_error, remove_temp,
                   resolve_inside)
from .._schema import MAX_JSON_BYTES
from ..errors import CheckpointError, FileFormatError, InputError, SeqProbError, SeqProbFileError
from ..registry import register_model_format
from .params import check_fits, copy_into

__all__ = ["save_checkpoint", "load_checkpoint", "check_replaceable", "Checkpoint", "FORMAT",
           "FORMAT_VERSION"]

log = logging.getLogger(__name__)

FORMAT, FORMAT_VERSION = "seqprob.gpt", 1
_MANIFEST = "manifest.json"


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` returns.

    Attributes
    ----------
    model : GPT
        The model with the saved weights (and tokenizer, if one was saved).
    optimizer_state : dict or None
        An :meth:`AdamW.state_dict` to pass to ``AdamW(model.params).load_state_dict``.
    extra : dict or None
        The JSON ``extra`` given to :func:`save_checkpoint` (training step, RNG state ...).
    path : Path
        The checkpoint folder.
    """

    model: object
    optimizer_state: dict | None = field(default=None, repr=False)
    extra: dict | None = field(default=None, repr=False)
    path: Path | None = None


# ----------------------------------------------------------------------------- tensor files
def _tensor_backend():
    """(extension, write(path, dict), read(path) -> dict): safetensors if available, else npz."""
    try:
        from . import safetensors as st
    except ImportError:
        st = None
    if st is not None and hasattr(st, "save_file") and hasattr(st, "load_file"):
        return ".safetensors", st.save_file, st.load_file
    return ".npz", _save_npz, _load_npz


def _save_npz(tensors: dict, path) -> None:
    with open(path, "wb") as handle:
        np.savez(handle, **tensors)


def _load_npz(path) -> dict:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _read_tensors(path: Path) -> dict:
    try:
        if path.suffix == ".npz":
            return _load_npz(path)
        from . import safetensors as st
        return dict(st.load_file(path))
    except SeqProbError as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"cannot read {str(path)!r}: {exc}", path=str(path)) from exc
    except (OSError, ValueError, KeyError, EOFError) as exc:
        raise CheckpointError(f"cannot read {str(path)!r}: corrupt or truncated ({exc})",
                              path=str(path)) from exc


# ----------------------------------------------------------------------------- saving
def save_checkpoint(model, path, optimizer=None, extra: dict | None = None) -> Path:
    """Write ``model`` (and optionally its optimizer and training state) to folder ``path``.

    Parameters
    ----------
    model : GPT
        Its ``config``, ``params`` and ``tokenizer`` (if set) are saved.
    path : str or Path
        The checkpoint folder; replaced atomically if it already holds a checkpoint.
    optimizer : AdamW, optional
        Its ``state_dict()`` is saved so that training resumes exactly.
    extra : dict, optional
        JSON-serializable data saved as ``training.json`` (e.g. step, RNG state, history).

    Returns
    -------
    Path
        The checkpoint folder.

    Examples
    --------
    >>> import tempfile, seqprob.gpt as g
    >>> model = g.GPT(g.GPTConfig(vocab_size=9, block_size=4, n_layer=1, n_head=1, n_embd=4))
    >>> folder = save_checkpoint(model, tempfile.mkdtemp() + "/ckpt")
    >>> sorted(p.name for p in folder.iterdir())[:2]
    ['config.json', 'manifest.json']
    """
    path = as_path(path)
    _check_finite_params(model)
    try:
        check_replaceable(path)
        tmp = make_temp_dir(path)  # .NAME.seqprob-tmp-PID-RANDOM; stale ones of dead pids removed
    except SeqProbError:
        raise
    except (OSError, ValueError) as exc:  # e.g. a name too long for the file system, a NUL byte
        raise SeqProbFileError(f"cannot write {str(path)!r}: {exc}", path=str(path)) from exc
    try:
        _write_files(tmp, model, optimizer, extra)
        _swap_in(tmp, path)
    except BaseException as exc:
        # OSError -> SeqProbFileError, lone surrogate -> InputError; a temp that stays is named
        raise_write_error(exc, path, remove_temp(tmp))
        raise
    log.info("saved checkpoint %s", path)
    return path


def check_replaceable(path) -> None:
    """Raise SeqProbFileError unless ``path`` is absent, an empty folder or a checkpoint."""
    path = as_path(path)
    if path.exists() and not path.is_dir():
        raise SeqProbFileError(f"checkpoint path {str(path)!r} exists and is not a folder",
                               path=str(path))
    if path.is_dir() and any(path.iterdir()) and not (path / _MANIFEST).exists():
        raise SeqProbFileError(f"folder {str(path)!r} is not empty and holds no seqprob checkpoint "
                               f"({_MANIFEST}); refusing to replace it", path=str(path))


def _check_finite_params(model) -> None:
    for name, value in model.params.items():
        if not np.isfinite(value).all():
            raise InputError(f"parameter {name!r} holds NaN or inf: refusing to save a corrupt "
                             f"checkpoint", name=name)


def _write_files(folder: Path, model, optimizer, extra) -> None:
    ext, write, _ = _tensor_backend()
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "class": _class_name(model),
              "config": model.config.to_dict()}
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        header["vocab"] = model.vocab.to_dict()
    files = {"config.json": header}
    write({k: np.ascontiguousarray(v) for k, v in model.params.items()}, folder / f"model{ext}")
    if optimizer is not None:
        state = optimizer.state_dict()
        tensors = {f"{k}.{n}": a for k in ("m", "v") for n, a in state.pop(k).items()}
        write(tensors, folder / f"optimizer{ext}")
        files["optimizer.json"] = {**state, "type": type(optimizer).__name__}
    if extra is not None:
        files["training.json"] = extra
    for name, data in files.items():
        try:
            text = json.dumps(data, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InputError(f"cannot save {name}: not JSON-serializable ({exc})") from exc
        (folder / name).write_text(text, encoding="utf-8")
    if tokenizer is not None:
        tokenizer.save(folder / "tokenizer.json")
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION,
                "files": {p.name: _file_facts(p) for p in sorted(folder.iterdir())}}
    with atomic_write(folder / _MANIFEST) as handle:
        json.dump(manifest, handle, indent=1)
    _fsync_dir(folder)


def _file_facts(path: Path) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def _fsync_dir(folder: Path) -> None:
    for p in folder.iterdir():
        with open(p, "rb") as handle:
            os.fsync(handle.fileno())
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_in(tmp: Path, path: Path) -> None:
    """Replace ``path`` by ``tmp`` (the old one is moved aside first, then deleted)."""
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=tmp.parent))
        old.rmdir()
        os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        if old is not None:  # put the previous checkpoint back where it was
            os.replace(old, path)
        raise
    if old is not None and remove_temp(old) is not None:
        log.warning("the previous checkpoint was replaced, but its old copy %s could not be "
                    "removed: delete it by hand", old)


# ----------------------------------------------------------------------------- loading
def load_checkpoint(path, model=None, dtype: str | None = None, check=None) -> Checkpoint:
    """Read a checkpoint folder written by :func:`save_checkpoint`.

    Parameters
    ----------
    path : str or Path
        The checkpoint folder.
    model : GPT, optional
        Load the weights into this model (its config must equal the saved one) instead of
        building a new one.
    dtype : {"float32", "float64"}, optional
        Build the model in this dtype instead of the saved one (weights are cast).
    check : callable, optional
        ``check(optimizer_state, extra)``, called once every file is read and verified and
        before anything is written into ``model``: it may raise to refuse the checkpoint,
        which then leaves ``model`` as it was (resuming a training run uses it).

    Returns
    -------
    Checkpoint
        ``.model``, ``.optimizer_state`` (or None), ``.extra`` (or None), ``.path``.

    Raises
    ------
    CheckpointError
        A file is missing, truncated or corrupt (size or SHA-256 differs from the manifest),
        or the config, parameter names or shapes do not match.

    Examples
    --------
    >>> import tempfile, seqprob.gpt as g
    >>> model = g.GPT(g.GPTConfig(vocab_size=9, block_size=4, n_layer=1, n_head=1, n_embd=4))
    >>> folder = save_checkpoint(model, tempfile.mkdtemp() + "/ckpt", extra={"step": 7})
    >>> ckpt = load_checkpoint(folder)
    >>> ckpt.extra, ckpt.model.config == model.config
    ({'step': 7}, True)
    """
    from ..tokenizers import load_tokenizer
    from .config import GPTConfig

    path = _check_folder(as_path(path))
    manifest = _read_manifest(path)
    header = _read_json(path, "config.json", manifest)
    try:
        config = GPTConfig.from_dict(header["config"])
        if dtype is not None:
            config = config.replace(dtype=dtype)
    except (KeyError, TypeError, ValueError, InputError) as exc:
        raise CheckpointError(f"{str(path / 'config.json')!r}: invalid config ({type(exc).__name__}: {exc})",
                              path=str(path)) from exc
    if model is None:
        model = _model_class(header, path)(config, seed=0, **_vocab_kwargs(header))
    else:
        _check_same_config(model.config, config, path)
    tokenizer = load_tokenizer(path / "tokenizer.json") if "tokenizer.json" in manifest else None
    weights = _read_tensors(_tensor_file(path, "model", manifest))
    opt_state = None
    if "optimizer.json" in manifest:
        opt_state = _read_json(path, "optimizer.json", manifest)
        moments = _read_tensors(_tensor_file(path, "optimizer", manifest))
        for key in ("m", "v"):
            opt_state[key] = {n[len(key) + 1:]: a for n, a in moments.items() if n.startswith(key + ".")}
    extra = (_read_json(path, "training.json", manifest, want_object=False)
             if "training.json" in manifest else None)
    _check_weights(model, weights, path)
    if check is not None:
        check(opt_state, extra)
    for name, value in weights.items():  # every refusal is behind: the model changes from here
        copy_into(model.params[name], value)
    if tokenizer is not None:
        model.tokenizer = tokenizer
    return Checkpoint(model=model, optimizer_state=opt_state, extra=extra, path=path)


def _class_name(model) -> str:
    from ..registry import class_name

    return class_name(type(model))


def _model_class(header: dict, path: Path) -> type:
    """The class named in ``config.json`` (``"GPT"`` for files written before it was recorded)."""
    from ..registry import model_class

    try:
        return model_class(header.get("class", "GPT"))
    except InputError as exc:
        raise CheckpointError(f"{str(path)!r}: {exc}", path=str(path)) from None


def _check_folder(path: Path) -> Path:
    if path.is_dir():
        return path
    if path.exists():
        inside = " (a file of the checkpoint: pass the folder that holds it, " \
                 f"{str(path.parent)!r})" if (path.parent / _MANIFEST).is_file() else ""
        raise SeqProbFileError(f"checkpoint {str(path)!r} is a file, not a folder{inside}: a "
                               "checkpoint is the folder that model.save / save_checkpoint wrote",
                               path=str(path))
    leftovers = sorted(path.parent.glob(f".{path.name}.old-*")) if path.parent.is_dir() else []
    hint = (f"; an interrupted save left the previous checkpoint at {str(leftovers[-1])!r}"
            if leftovers else "")
    raise SeqProbFileError(f"checkpoint folder {str(path)!r} does not exist{hint}", path=str(path))


def _read_manifest(path: Path) -> dict:
    """The manifest's ``files`` table, checked against the schema (the file formats page), every
    listed file resolved inside the folder and verified (size, SHA-256)."""
    file = path / _MANIFEST
    if not file.exists():
        raise CheckpointError(f"{str(path)!r} has no {_MANIFEST}: not a seqprob checkpoint, or its "
                              f"save did not finish", path=str(path))
    data = _load_json_file(file)
    if not isinstance(data, dict):
        raise CheckpointError(f"{str(file)!r} must hold a JSON object, got {type(data).__name__}",
                              path=str(file))
    if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{str(file)!r}: format {data.get('format')!r:.40} version "
                              f"{data.get('format_version')!r:.20}, expected {FORMAT!r} version "
                              f"{FORMAT_VERSION}", path=str(file), field="format")
    files = data.get("files")
    if not isinstance(files, dict) or not files:
        raise CheckpointError(f"{str(file)!r}: field 'files' must be a non-empty object "
                              f"{{name: {{bytes, sha256}}}}, got {files!r:.60}", path=str(file), field="files")
    for name, facts in files.items():
        _verify_file(_listed_file(path, name, file), facts, file)
    return files


def _listed_file(path: Path, name: str, manifest: Path) -> Path:
    """A file the manifest lists: a plain name, resolved inside the checkpoint folder."""
    try:
        target = resolve_inside(path, name, what="manifest entry")
    except FileFormatError as exc:
        raise CheckpointError(f"{str(manifest)!r}: {exc}", path=str(manifest), field="files") from None
    if len(Path(name).parts) != 1:
        raise CheckpointError(f"{str(manifest)!r}: entry {name!r} must be a plain file name",
                              path=str(manifest), field="files")
    return target


def _load_json_file(file: Path):
    """Parse a JSON file of at most ``MAX_JSON_BYTES``; CheckpointError when it is not JSON."""
    try:
        if file.stat().st_size > MAX_JSON_BYTES:
            raise CheckpointError(f"{str(file)!r} has {file.stat().st_size} bytes, more than the limit "
                                  f"{MAX_JSON_BYTES}", path=str(file), limit=MAX_JSON_BYTES)
        return json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SeqProbFileError(f"cannot read {str(file)!r}: {exc.strerror or exc}", path=str(file)) from exc
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{str(file)!r} is not valid JSON ({exc})", path=str(file)) from None


def _verify_file(file: Path, facts, manifest: Path = None) -> None:
    nbytes = facts.get("bytes") if isinstance(facts, dict) else None
    sha = facts.get("sha256") if isinstance(facts, dict) else None
    if (not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0 or not isinstance(sha, str)
            or len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha)):
        raise CheckpointError(f"{str(manifest or file)!r}: entry for {file.name!r} must be "
                              f"{{'bytes': integer >= 0, 'sha256': 64 hex digits}}, got {facts!r:.80}",
                              path=str(file), field=f"files[{file.name!r}]")
    if not file.is_file():
        what = "is not a file" if file.exists() else "is missing"
        raise CheckpointError(f"checkpoint file {str(file)!r} {what}", path=str(file))
    size = file.stat().st_size
    if size != nbytes:
        raise CheckpointError(f"checkpoint file {str(file)!r} has {size} bytes, the manifest says "
                              f"{nbytes} (truncated or replaced)", path=str(file),
                              value=size, limit=nbytes)
    if _file_facts(file)["sha256"] != sha:
        raise CheckpointError(f"checkpoint file {str(file)!r} is corrupt: its SHA-256 differs from "
                              f"the manifest", path=str(file))


def _read_json(path: Path, name: str, manifest: dict, want_object: bool = True):
    if name not in manifest:
        raise CheckpointError(f"checkpoint {str(path)!r} has no {name}", path=str(path))
    data = _load_json_file(path / name)
    if want_object and not isinstance(data, dict):
        raise CheckpointError(f"{str(path / name)!r} must hold a JSON object, got "
                              f"{type(data).__name__}", path=str(path / name))
    return data


def _tensor_file(path: Path, stem: str, manifest: dict) -> Path:
    for ext in (".safetensors", ".npz"):
        if stem + ext in manifest:
            return path / (stem + ext)
    raise CheckpointError(f"checkpoint {str(path)!r} has no {stem}.safetensors or {stem}.npz",
                          path=str(path))


def _vocab_kwargs(header: dict) -> dict:
    if "vocab" not in header:
        return {}
    from ..vocab import Vocab
    try:
        return {"vocab": Vocab.from_dict(header["vocab"])}
    except (KeyError, TypeError, SeqProbError) as exc:
        raise CheckpointError(f"invalid vocabulary in config.json ({exc})", field="vocab") from exc


def _check_same_config(have, saved, path: Path) -> None:
    if have == saved:
        return
    diffs = [f"{k}: checkpoint {v!r}, model {getattr(have, k)!r}"
             for k, v in saved.to_dict().items() if getattr(have, k) != v]
    raise CheckpointError(f"checkpoint {str(path)!r} was saved from a different config ("
                          + "; ".join(diffs) + ")", path=str(path), differences=diffs)


def _check_weights(model, weights: dict, path: Path) -> None:
    """CheckpointError unless every saved tensor can go into ``model`` (names, shapes, finite
    floats within its dtype's range); nothing is copied."""
    params = model.params
    missing = [n for n in params if n not in weights]
    unexpected = [n for n in weights if n not in params]
    if missing or unexpected:
        raise CheckpointError(f"checkpoint {str(path)!r} does not match the config: missing "
                              f"parameters {missing[:5]}, unexpected {unexpected[:5]}",
                              missing=missing, unexpected=unexpected)
    for name, value in weights.items():
        if value.shape != params[name].shape:
            raise CheckpointError(f"parameter {name!r} has shape {value.shape} in the checkpoint, "
                                  f"the config needs {params[name].shape}", name=name)
        if not np.issubdtype(value.dtype, np.floating) or not np.isfinite(value).all():
            raise CheckpointError(f"parameter {name!r} in the checkpoint is not finite floats "
                                  f"(dtype {value.dtype})", name=name)
        check_fits(params[name], value, name)


# ------------------------------------------------ this family joins the model registry
def _is_checkpoint(path: Path) -> bool:
    return path.is_dir() and (path / _MANIFEST).is_file() and (path / "config.json").is_file()


register_model_format("seqprob-checkpoint", _is_checkpoint, lambda path: load_checkpoint(path).model,
                      "seqprob GPT checkpoint folder (manifest.json + config.json + weights)")
