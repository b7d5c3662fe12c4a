"""Load "whatever this path is": a registry of model file formats and model classes.

Each model family joins the registry where its loader lives (``seqprob.ngram.arpa``,
``seqprob.ngram.binary``, ``seqprob.gpt.checkpoint``, ``seqprob.gpt.hf``,
``seqprob.truth.grammar``), the way each tokenizer joins
:func:`seqprob.tokenizers.register_tokenizer`:

* :func:`register_model_format` adds a *format*: a name, a ``recognise(path) -> bool`` test
  and a ``load(path) -> LanguageModel`` function. :func:`load_model` asks the formats in
  registration order and loads with the first that recognises the path.
* :func:`register_model_class` adds a model *class* by name, so that a checkpoint reader
  builds the class named in the file without importing the module that defines it.

This module imports nothing of seqprob but :mod:`seqprob.errors`, :mod:`seqprob._io` and
:mod:`seqprob.hub` (names in the Hugging Face cache), so any family module can register
itself with it; :func:`load_model` imports the built-in families lazily.

Examples
--------
>>> import seqprob as sp
>>> sorted(f.name for f in sp.registry.model_formats())
['arpa', 'grammar', 'hf', 'seqprob-checkpoint', 'sqlm']
>>> sp.load_model().vocab == sp.toy_english().vocab     # no path: the shipped default model
True
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ._io import as_path
from . import hub
from .errors import InputError, SeqProbFileError

__all__ = ["ModelFormat", "register_model_format", "model_formats", "load_model", "local_or_cached",
           "register_model_class", "model_class", "class_name", "default_model", "default_model_dir"]

#: Modules whose import registers a format or class (imported before any lookup).
_BUILTIN_FAMILIES = ("seqprob.gpt", "seqprob.gpt.checkpoint", "seqprob.gpt.hf", "seqprob.ngram.arpa",
                     "seqprob.ngram.binary", "seqprob.truth.grammar")


#: Files that are parts of a model folder, never a model of their own (a grammar is a .json
#: too): named alone, they point at their folder.
_FOLDER_FILES = ("config.json", "manifest.json", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json", "generation_config.json", "model.safetensors.index.json")


@dataclass(frozen=True)
class ModelFormat:
    """One way of storing a model: how to recognise its files and how to load them."""

    name: str
    recognise: Callable[[Path], bool]
    load: Callable[[Path], object]
    description: str = ""


_FORMATS: dict[str, ModelFormat] = {}
_CLASSES: dict[str, type] = {}


def register_model_format(name: str, recognise, load, description: str = "") -> ModelFormat:
    """Add (or replace, by ``name``) a model format that :func:`load_model` can load.

    Parameters
    ----------
    name : str
        Short name, e.g. ``"arpa"``.
    recognise : callable
        ``recognise(path: Path) -> bool``: cheap (suffix, a marker file); must not raise.
    load : callable
        ``load(path: Path) -> LanguageModel``; raises a ``SeqProbError`` on a bad file.
    description : str
        One line for error messages and the docs.

    Returns
    -------
    ModelFormat

    Examples
    --------
    >>> import seqprob as sp
    >>> fmt = sp.registry.register_model_format(
    ...     "uniform-txt", lambda p: p.name.endswith(".uniform"),
    ...     lambda p: sp.UniformModel(sp.WhitespaceTokenizer.fit([p.read_text()]).vocab), "a word list")
    >>> fmt.name in [f.name for f in sp.registry.model_formats()]
    True
    >>> _ = sp.registry._FORMATS.pop("uniform-txt")
    """
    if not name or not isinstance(name, str):
        raise InputError(f"a model format needs a non-empty name, got {name!r}", value=name)
    if not callable(recognise) or not callable(load):
        raise InputError(f"model format {name!r}: recognise and load must be callables", value=name)
    fmt = ModelFormat(name, recognise, load, description)
    _FORMATS[name] = fmt
    return fmt


def register_model_class(cls: type, name: str | None = None) -> type:
    """Add a model class under ``name`` (default ``cls.__name__``); usable as a decorator."""
    _CLASSES[name or cls.__name__] = cls
    return cls


def class_name(cls: type) -> str:
    """The registered name of ``cls`` or of its nearest registered base class (for writing
    files that :func:`model_class` reads back)."""
    _import_builtins()
    by_class = {c: n for n, c in _CLASSES.items()}
    for base in cls.__mro__:
        if base in by_class:
            return by_class[base]
    raise InputError(f"{cls.__name__} is not a registered model class nor derived from one "
                     f"(known: {sorted(_CLASSES)})", value=cls.__name__)


def _import_builtins() -> None:
    for module in _BUILTIN_FAMILIES:
        importlib.import_module(module)


#: The order in which load_model tries the built-in formats, whichever module was imported
#: first (``import seqprob`` imports nothing until used); formats users register come after.
_BUILTIN_ORDER = ("arpa", "sqlm", "grammar", "seqprob-checkpoint", "hf")


def model_formats() -> list:
    """The registered :class:`ModelFormat` objects, in the order :func:`load_model` tries them."""
    _import_builtins()
    rank = {name: i for i, name in enumerate(_BUILTIN_ORDER)}
    return sorted(_FORMATS.values(), key=lambda fmt: rank.get(fmt.name, len(rank)))  # stable


def model_class(name: str) -> type:
    """The model class registered as ``name`` (e.g. ``"GPT"``)."""
    _import_builtins()
    try:
        return _CLASSES[name]
    except KeyError:
        raise InputError(f"no model class {name!r} is registered (known: {sorted(_CLASSES)}); "
                         "add it with seqprob.registry.register_model_class", value=name) from None


def load_model(path=None, revision: str | None = None):
    """Load the model stored at ``path``, whatever its format (see :func:`model_formats`).

    Parameters
    ----------
    path : str or PathLike, optional
        An ARPA file (``.arpa``, ``.arpa.gz``), a seqprob GPT checkpoint folder, a Hugging Face
        transformers folder (GPT-2, Llama, Mistral, Qwen2, GPT-NeoX), a grammar spec
        (``.json``/``.toml``), a binary n-gram file (``.sqlm``), or any format a user registered.
        Or a Hugging Face model name ``"ORG/NAME"`` (e.g. ``"HuggingFaceTB/SmolLM2-135M"``),
        found in the local Hugging Face cache (:func:`seqprob.hub.resolve`) when no local file
        or folder has that name: a local path wins. ``None`` or ``"default"`` (when no such
        file exists): :func:`default_model`.
    revision : str, optional
        With a model name: the branch, tag or commit hash of the snapshot (default ``"main"``).

    Returns
    -------
    LanguageModel

    Raises
    ------
    SeqProbFileError
        ``path`` does not exist (:class:`seqprob.hub.ModelNotCachedError` for a name that is
        not in the cache, :class:`~seqprob.hub.RevisionNotCachedError` for a missing revision).
    InputError
        No registered format recognises ``path``; the message lists the formats.

    Examples
    --------
    >>> import seqprob as sp, tempfile, os
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> with sp.ngram.expected_discount_fallback():
    ...     kn = sp.ngram.KneserNey(order=2).fit(["a b", "b a", "a a b"], tokenizer=tok)
    >>> path = os.path.join(tempfile.mkdtemp(), "kn2.arpa")
    >>> _ = sp.write_arpa(kn, path)
    >>> type(sp.load_model(path)).__name__
    'BackoffTablesModel'
    """
    if path is None or (str(path) == "default" and not os.path.exists("default")):
        return default_model()
    p = local_or_cached(path, revision)
    formats = model_formats()
    if p.name in _FOLDER_FILES:
        _refuse_part_of_folder(p, formats)
    for fmt in formats:
        if fmt.recognise(p):
            return fmt.load(p)
    _refuse_part_of_folder(p, formats)
    known = "; ".join(f"{f.name}: {f.description}" for f in formats)
    raise InputError(f"cannot tell what kind of model {str(path)!r} is; known formats: {known}",
                     path=str(path))


def local_or_cached(path, revision: str | None = None) -> Path:
    """The local file or folder ``path``, else the Hugging Face cache's snapshot of the model
    named ``path`` (``"ORG/NAME"``) at ``revision``."""
    p = as_path(path)
    if p.exists():
        if revision is not None:
            raise InputError(f"revision={revision!r} applies to Hugging Face model names, and "
                             f"{str(path)!r} is a local path (a local path wins over the cache)",
                             value=revision)
        return p
    if hub.is_hub_name(str(path)):
        return hub.resolve(str(path), revision)
    raise SeqProbFileError(f"model {str(p)!r} does not exist (neither a local path nor a Hugging "
                           f"Face name ORG/NAME)", path=str(p))


def _refuse_part_of_folder(path: Path, formats: list) -> None:
    """InputError when ``path`` is a file inside a folder that is a model (a checkpoint's
    config.json or weights): the folder is what loads."""
    if path.is_file() and any(f.recognise(path.parent) for f in formats):
        raise InputError(f"{str(path)!r} is one file of the model folder {str(path.parent)!r}: "
                         f"pass the folder itself", path=str(path), folder=str(path.parent))


def default_model_dir():
    """The folder of the shipped default model (package data; an importlib ``Traversable``)."""
    from importlib import resources

    return resources.files("seqprob") / "data" / "default_gpt"


def default_model():
    """The shipped GPT trained on ``toy_english()``; ``model.tokenizer`` is the grammar's word
    tokenizer, so the true language, n-grams and the GPT score the same tokens.

    Its training recipe is :data:`seqprob.app.defaults.DEFAULT_RECIPE`.

    Raises
    ------
    SeqProbFileError
        The installation lacks the model's files.

    Examples
    --------
    >>> import seqprob as sp
    >>> model = sp.default_model()
    >>> model.tokenizer.vocab == sp.toy_english().vocab
    True
    """
    from importlib import resources

    folder = default_model_dir()
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise SeqProbFileError(
            f"the default model is missing from the installation ({folder}); rebuild it with "
            "'python analysis/train_default_model.py' or run 'seqprob demo --retrain'", path=str(folder))
    with resources.as_file(folder) as path:
        return load_model(path)
