"""The tokenizer interface and the registry used to save / load any tokenizer."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .._io import as_path, atomic_write
from .._io import check_text  # the text policy, re-exported for tokenizers
from ..errors import (FileFormatError, InputError, SeqProbError, SeqProbFileError,
                      UnknownTokenizerError, fitted)
from .._schema import MAX_JSON_BYTES
from ..vocab import Vocab, check_ids

__all__ = ["Tokenizer", "load_tokenizer", "register_tokenizer", "check_text", "iter_texts",
           "WORD_BOUNDARIES"]

#: How a tokenizer marks where words start or end (see :attr:`Tokenizer.word_boundary`).
WORD_BOUNDARIES = ("leading_space", "trailing", "whole_word", "none")

_REGISTRY: dict[str, type] = {}


def iter_texts(texts, what: str = "texts"):
    """Yield the items of ``texts``, checking that it is iterable and that each item is a str."""
    if isinstance(texts, (bytes, bytearray, memoryview)):
        raise InputError(f"{what} must be an iterable of str, got {type(texts).__name__}: decode "
                         f"it first (e.g. data.decode('utf-8').splitlines())", value=type(texts).__name__)
    if isinstance(texts, dict):
        raise InputError(f"{what} must be an iterable of str (a list of lines), got a dict",
                         value="dict")
    try:
        items = iter(texts)
    except TypeError:
        raise InputError(f"{what} must be an iterable of str, got {type(texts).__name__}",
                         value=type(texts).__name__) from None
    for i, text in enumerate(items):
        yield check_text(text, f"{what}[{i}]")


def register_tokenizer(cls):
    """Class decorator: make ``cls`` loadable by :func:`load_tokenizer` under ``cls.kind``."""
    _REGISTRY[cls.kind] = cls
    return cls


class Tokenizer:
    """Text <-> token ids. ``encode`` never adds BOS/EOS: the scoring functions add them.

    Subclasses define ``kind`` (the name saved in JSON), ``encode``, ``decode``,
    ``to_dict`` and ``from_dict``.
    """

    kind = "base"
    #: Class default of :attr:`word_boundary`; an instance may override it by assignment.
    default_word_boundary = "none"

    @property
    def word_boundary(self) -> str:
        """How tokens mark word boundaries, one of :data:`WORD_BOUNDARIES`.

        ``"leading_space"``: a token that starts a word carries the space before it (GPT-2
        ``Ġ``, SentencePiece ``▁``), so a word is over only once the *next* token starts a new
        word: :func:`seqprob.word_scores` applies the beginning-of-word correction.
        ``"trailing"`` (end-of-word marks), ``"whole_word"`` (one token per word) and ``"none"``
        (no marks, e.g. characters): word scores are the plain sum of the word's tokens.
        Settable (``tok.word_boundary = "trailing"``); not saved with the tokenizer.
        """
        return getattr(self, "_word_boundary", None) or self.default_word_boundary

    @word_boundary.setter
    def word_boundary(self, value: str) -> None:
        if value not in WORD_BOUNDARIES:
            raise InputError(f"word_boundary must be one of {WORD_BOUNDARIES}, got {value!r}",
                             value=value, limit=WORD_BOUNDARIES)
        self._word_boundary = value

    @property
    def vocab(self) -> Vocab:
        """The :class:`Vocab` (``bos_id``, ``eos_id``, ``unk_id``, ``len``); error before fit/train."""
        return fitted(self, "vocab_", hint="fit or train it first")

    def encode(self, text: str) -> list[int]:  # pragma: no cover - abstract
        """Token ids of ``text``, without BOS/EOS."""
        raise NotImplementedError

    def decode(self, ids) -> str:  # pragma: no cover - abstract
        """Text of ``ids``: ``decode(encode(s)) == s`` wherever the tokenizer can represent s."""
        raise NotImplementedError

    def encode_batch(self, texts) -> list[list[int]]:
        """Encode each text of ``texts``."""
        return [self.encode(t) for t in iter_texts(texts)]

    def token_strings(self, ids) -> list[str]:
        """Display string of each id (a byte-level token may be part of a UTF-8 character);
        an empty sequence gives an empty list."""
        tokens = self.vocab.tokens
        return [tokens[i] for i in check_ids(ids, len(tokens), allow_empty=True).ravel().tolist()]

    def tokenize(self, text: str) -> list[str]:
        """The display strings of the tokens of ``text``."""
        return self.token_strings(self.encode(text))

    def pieces(self, text: str) -> list[str]:
        """The surface pieces of ``text``, one per id of ``encode(text)``.

        Unlike :meth:`tokenize`, an unknown word shows as itself, not as ``<unk>``, so
        scoring tables can name the words a model has never seen.
        """
        return self.tokenize(text)

    def to_dict(self) -> dict:  # pragma: no cover - abstract
        """JSON-ready settings and learned state (what :meth:`save` writes besides ``type``)."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: dict) -> "Tokenizer":  # pragma: no cover - abstract
        """Inverse of :meth:`to_dict`."""
        raise NotImplementedError

    def save(self, path) -> Path:
        """Write the tokenizer as JSON (atomically) and return the path."""
        path = as_path(path)
        with atomic_write(path) as handle:
            json.dump({"type": self.kind, **self.to_dict()}, handle, ensure_ascii=False)
        return path

    @classmethod
    def load(cls, path) -> "Tokenizer":
        """Load a tokenizer saved by :meth:`save` (any kind)."""
        return load_tokenizer(path)

    def __repr__(self) -> str:
        size = len(self.vocab_) if getattr(self, "vocab_", None) is not None else "unfitted"
        return f"{type(self).__name__}(vocab_size={size})"


def load_tokenizer(path) -> Tokenizer:
    """Load any tokenizer from a JSON file written by ``Tokenizer.save``, a ``.tiktoken`` file, or a
    Hugging Face ``tokenizer.json`` (an :class:`~seqprob.tokenizers.hf.HFTokenizer`)."""
    path = as_path(path)
    if path.suffix == ".tiktoken":
        return _REGISTRY["tiktoken"](str(path))
    text = _read_json_text(path)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FileFormatError(f"tokenizer file {str(path)!r} is not valid JSON ({exc})",
                              path=str(path)) from None
    if isinstance(data, dict) and "type" not in data and "model" in data:  # a Hugging Face tokenizer.json
        return _REGISTRY["hf"](path)
    if not isinstance(data, dict) or "type" not in data:
        raise FileFormatError(f"tokenizer file {str(path)!r} is not a seqprob tokenizer JSON: expected "
                              f"an object with a 'type' field", path=str(path), field="type")
    kind = data["type"]
    if not isinstance(kind, str):
        raise FileFormatError(f"tokenizer file {str(path)!r}: field 'type' must be a string, got "
                              f"{type(kind).__name__} {kind!r:.40}", path=str(path), field="type")
    if kind not in _REGISTRY:
        raise UnknownTokenizerError(f"unknown tokenizer type {kind!r} in {str(path)!r}; "
                                    f"known: {sorted(_REGISTRY)}", name=kind)
    try:
        return _REGISTRY[kind].from_dict(data)
    except SeqProbError as exc:  # same error, naming the file
        raise type(exc)(f"tokenizer file {str(path)!r}: {exc.message}",
                        **{**exc.data, "path": str(path)}) from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FileFormatError(f"malformed {kind} tokenizer file {str(path)!r}: {type(exc).__name__} "
                              f"{exc}", path=str(path)) from exc


def _read_json_text(path: Path) -> str:
    """The UTF-8 text of a JSON file no larger than ``MAX_JSON_BYTES``."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_JSON_BYTES:
                raise FileFormatError(f"tokenizer file {str(path)!r} has {size} bytes, more than the "
                                      f"limit {MAX_JSON_BYTES}", path=str(path), value=size,
                                      limit=MAX_JSON_BYTES)
            raw = handle.read()
    except OSError as exc:
        what = "is a folder, not a file" if path.is_dir() else (exc.strerror or str(exc))
        raise SeqProbFileError(f"cannot read tokenizer file {str(path)!r}: {what}",
                               path=str(path)) from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileFormatError(f"tokenizer file {str(path)!r} is not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start})", path=str(path)) from None
