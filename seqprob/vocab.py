"""The vocabulary: a bijection between token strings and integer ids, with special tokens."""
from __future__ import annotations

import functools
from typing import Iterable, Sequence

import numpy as np

from ._io import check_text
from ._schema import MAX_VOCAB, typed
from .checks import check_int
from .errors import FileFormatError, InputError, TokenIdError, UnknownTokenError

__all__ = ["Vocab", "BOS", "EOS", "UNK", "check_ids", "check_token_id"]

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


class Vocab:
    """Token strings <-> ids, with the ids of ``<s>`` (BOS, x_0), ``</s>`` (EOS) and ``<unk>``.

    Parameters
    ----------
    tokens : sequence of str
        Token strings in id order; must be unique.
    bos, eos, unk : str or None
        Which tokens play the special roles (``None`` when the vocabulary has no such token).
        ``bos`` and ``eos`` may be the same token (GPT-2's ``<|endoftext|>``).

    Examples
    --------
    >>> v = Vocab.build(["the", "cat"])
    >>> v.unk_id, v.bos_id, v.eos_id, v.id("cat"), len(v)
    (0, 1, 2, 4, 5)
    """

    def __init__(self, tokens: Sequence[str], bos: str | None = BOS, eos: str | None = EOS,
                 unk: str | None = UNK):
        if isinstance(tokens, (str, bytes, dict)):
            raise InputError(f"tokens must be a sequence of token strings, got {type(tokens).__name__} "
                             f"{tokens!r:.40}", value=type(tokens).__name__)
        try:
            self.tokens = tuple(str(t) for t in tokens)
        except TypeError:
            raise InputError(f"tokens must be a sequence of token strings, got {type(tokens).__name__}",
                             value=type(tokens).__name__) from None
        if not self.tokens:
            raise InputError("a vocabulary needs at least one token")
        self._index = {t: i for i, t in enumerate(self.tokens)}
        if len(self._index) != len(self.tokens):
            dup = next(t for i, t in enumerate(self.tokens) if self._index[t] != i)
            raise InputError(f"duplicate token {dup!r} in vocabulary", token=dup)
        self.bos, self.eos, self.unk = bos, eos, unk
        self.bos_id = self._special_id(bos, "bos")
        self.eos_id = self._special_id(eos, "eos")
        self.unk_id = self._special_id(unk, "unk")

    def _special_id(self, token, role):
        if token is None:
            return None
        if not isinstance(token, str):
            raise InputError(f"{role} must be a token string or None, got {type(token).__name__} "
                             f"{token!r:.40}", value=type(token).__name__)
        if token not in self._index:
            raise InputError(f"{role} token {token!r} is not in the vocabulary", token=token)
        return self._index[token]

    @classmethod
    def build(cls, words: Iterable[str], specials: bool = True) -> "Vocab":
        """KenLM's id order: ``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2, then words by first appearance."""
        head = [UNK, BOS, EOS] if specials else []
        seen = dict.fromkeys(head)
        for w in words:
            if w in (UNK, BOS, EOS):
                raise InputError(f"reserved symbol {w!r} inside the text", token=w)
            seen.setdefault(w)
        if specials:
            return cls(list(seen))
        return cls(list(seen), bos=None, eos=None, unk=None)

    @classmethod
    def ids_only(cls, size: int, bos_id: int | None = None, eos_id: int | None = None) -> "Vocab":
        """A vocabulary with no token strings to match: token i is named ``"<i>"`` (a model
        loaded without its tokenizer). Scoring text maps a tokenizer's ids onto it id for id.

        Examples
        --------
        >>> v = Vocab.ids_only(4, bos_id=3, eos_id=3)
        >>> v.tokens, v.bos_id, v.is_ids_only
        (('<0>', '<1>', '<2>', '<3>'), 3, True)
        """
        return _IdsOnlyVocab(size, bos_id, eos_id)

    @property
    def is_ids_only(self) -> bool:
        """True for a vocabulary of :meth:`ids_only` names, which has no strings to match."""
        flag = self.__dict__.get("_ids_only")
        if flag is None:
            flag = self.unk is None and all(t == f"<{i}>" for i, t in enumerate(self.tokens))
            self._ids_only = flag
        return flag

    def same_ids(self, other: "Vocab") -> bool:
        """Whether id i means the same token in ``self`` and ``other``: equal vocabularies, or
        one of them :meth:`ids_only` and both of one size (ids are then taken as they are).

        Examples
        --------
        >>> words = Vocab.build(["a", "b"])
        >>> words.same_ids(Vocab.ids_only(5)), words.same_ids(Vocab.ids_only(6))
        (True, False)
        """
        if self is other:
            return True
        if self.is_ids_only or other.is_ids_only:
            return len(self) == len(other)
        return self == other

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token) -> bool:
        return token in self._index

    def __iter__(self):
        return iter(self.tokens)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.tokens, self.bos, self.eos, self.unk))

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, bos={self.bos!r}, eos={self.eos!r}, unk={self.unk!r})"

    def id(self, token: str) -> int:
        """Id of ``token``; :class:`UnknownTokenError` (a ``KeyError``) if absent."""
        try:
            return self._index[token]
        except KeyError:
            raise UnknownTokenError(f"token {token!r} is not in the vocabulary", token=token) from None

    # ------------------------------------------------ <s> is context, never a next token
    @property
    def never_predicted_id(self) -> int | None:
        """Id of ``<s>`` when it is context only, never a next token; None when there is no
        BOS or it doubles as EOS (GPT-2's ``<|endoftext|>``), which is then predicted.

        The one place that decides it: n-gram tables, ARPA files, the joint table, the grammar
        and sampling all ask here.
        """
        if self.bos_id is None or self.bos_id == self.eos_id:
            return None
        return self.bos_id

    def predictable_mask(self) -> np.ndarray:
        """(V,) bool: True for every token that can be a next token (all but a context-only ``<s>``).

        Examples
        --------
        >>> Vocab(["<s>", "</s>", "<unk>", "a"]).predictable_mask().tolist()
        [False, True, True, True]
        """
        mask = np.ones(len(self), dtype=bool)  # (V,)
        if self.never_predicted_id is not None:
            mask[self.never_predicted_id] = False
        return mask

    def mask_never_predicted(self, rows: np.ndarray, fill) -> np.ndarray:
        """Set the context-only ``<s>`` column of ``rows`` (..., V) to ``fill`` in place (e.g.
        ``-inf`` for log-probabilities, 0 for counts); returns ``rows``."""
        if self.never_predicted_id is not None:
            rows[..., self.never_predicted_id] = fill
        return rows

    def get(self, token: str, default=None):
        """Id of ``token``, or ``default`` when it is not in the vocabulary (like ``dict.get``).

        Examples
        --------
        >>> v = Vocab(["<s>", "</s>", "<unk>", "a"])
        >>> v.get("a"), v.get("zz", -1)
        (3, -1)
        """
        return self._index.get(token, default)

    def lookup(self, token: str) -> int:
        """Id of ``token``, or ``unk_id`` for an unknown token (error if there is no ``<unk>``)."""
        idx = self._index.get(token)
        if idx is not None:
            return idx
        if self.unk_id is None:
            raise UnknownTokenError(f"token {token!r} is not in the vocabulary and it has no <unk>",
                                    token=token)
        return self.unk_id

    def token(self, idx: int) -> str:
        """Token string of id ``idx``."""
        check_ids(np.asarray([idx]), len(self))
        return self.tokens[int(idx)]

    def decode_ids(self, ids) -> list[str]:
        """Token strings of a sequence of ids."""
        arr = check_ids(ids, len(self))
        return [self.tokens[i] for i in arr.ravel().tolist()]

    def to_dict(self) -> dict:
        """JSON-ready form: ``{"tokens": [...], "bos": ..., "eos": ..., "unk": ...}``."""
        return {"tokens": list(self.tokens), "bos": self.bos, "eos": self.eos, "unk": self.unk}

    @classmethod
    def from_dict(cls, data: dict, source: str = "vocabulary data") -> "Vocab":
        """Inverse of :meth:`to_dict`; data off the schema raises :class:`FileFormatError`.

        Schema: ``tokens`` a list of at most ``MAX_VOCAB`` unique, non-empty strings (no lone
        surrogates); ``bos``, ``eos``, ``unk`` each a string among the tokens, or null/absent.
        """
        typed(data, dict, "vocab", source)
        if "tokens" not in data:
            raise FileFormatError(f"{source}: missing field 'tokens'", field="tokens")
        tokens = typed(data["tokens"], list, "tokens", source)
        if len(tokens) > MAX_VOCAB:
            raise FileFormatError(f"{source}: field 'tokens' holds {len(tokens)} tokens, more than the "
                                  f"limit {MAX_VOCAB}", field="tokens", value=len(tokens), limit=MAX_VOCAB)
        for i, token in enumerate(tokens):
            typed(token, str, f"tokens[{i}]", source)
            if not token:
                raise FileFormatError(f"{source}: field 'tokens[{i}]' is the empty string", field=f"tokens[{i}]")
            check_text(token, f"{source}: tokens[{i}]")
        roles = {role: typed(data.get(role), (str, type(None)), role, source) for role in ("bos", "eos", "unk")}
        return cls(tokens, **roles)


def check_token_id(token_id, vocab_size: int, name: str = "token_id") -> int:
    """One token id: an integer (Python or numpy, not bool) in [0, vocab_size).

    Examples
    --------
    >>> check_token_id(np.int64(2), 3)
    2
    """
    try:
        scalar = np.ndim(token_id) == 0
    except ValueError:  # ragged nested lists
        scalar = False
    if isinstance(token_id, (bool, np.bool_)) or not scalar:
        shown = f"{type(token_id).__name__} {token_id!r:.40}"
        raise InputError(f"{name} must be one integer token id, got {shown}", value=shown)
    return int(check_ids(np.asarray([token_id]), vocab_size, name=name)[0])


def _first_non_integer(ids, arr: np.ndarray) -> str:
    """Where an id sequence that is not of integer dtype goes wrong, for the message: the
    first item of the original ``ids`` (numpy turns [0, "3"] into strings throughout)."""
    items = np.ndenumerate(arr)
    if isinstance(ids, (list, tuple)):
        items = _walk(ids, ())
    for index, value in items:
        value = value.item() if isinstance(value, np.generic) else value
        if isinstance(value, bool) or not isinstance(value, int):
            where = index[0] if len(index) == 1 else index
            return f"{type(value).__name__} {repr(value)[:40]} at index {where} (dtype {arr.dtype})"
    return f"dtype {arr.dtype}"


def _walk(items, prefix: tuple):
    for i, value in enumerate(items):
        if isinstance(value, (list, tuple)):
            yield from _walk(value, (*prefix, i))
        else:
            yield (*prefix, i), value


def check_ids(ids, vocab_size: int, name: str = "ids", allow_empty: bool = False) -> np.ndarray:
    """Validate token ids: an integer array with every id in [0, vocab_size).

    Returns the ids as an ``int64`` array. Floats that hold integers are refused: a float id
    is almost always a bug upstream. Ragged nested lists raise :class:`InputError`.

    Examples
    --------
    >>> check_ids([1, 2], 3).tolist()
    [1, 2]
    """
    try:
        arr = np.asarray(ids)
    except ValueError as exc:  # ragged nested sequences
        raise InputError(f"{name} must be a rectangular array of integers: {exc}") from None
    if arr.dtype == object or arr.dtype.kind not in "iu":
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{name} must be integers, got {_first_non_integer(ids, arr)}",
                             dtype=str(arr.dtype))
    if arr.size == 0 and not allow_empty:
        raise InputError(f"{name} is empty: need at least one token id", shape=arr.shape)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            raise TokenIdError(f"token id {bad} out of range: must be in [0, {vocab_size})",
                               value=bad, limit=vocab_size)
    return arr.astype(np.int64, copy=False)


class _IdsOnlyVocab(Vocab):
    """:meth:`Vocab.ids_only`: the names ``"<i>"`` and their index are built on first use.

    A model loaded without its tokenizer is scored by ids, which never reads the names: built
    eagerly they would hold ~130 bytes per token (6 MiB at GPT-2's 50,257 tokens, 33 MiB at
    262,144) for nothing.
    """

    def __init__(self, size: int, bos_id: int | None = None, eos_id: int | None = None):
        self._size = check_int("size", size, low=1)
        self.bos_id, self.eos_id = (None if idx is None else check_int(f"{role}_id", idx)
                                    for role, idx in (("bos", bos_id), ("eos", eos_id)))
        for role, idx in (("bos", self.bos_id), ("eos", self.eos_id)):
            if idx is not None and not 0 <= idx < self._size:  # Vocab's own message for it
                raise InputError(f"{role} token {f'<{idx}>'!r} is not in the vocabulary", token=f"<{idx}>")
        name = (lambda i: None if i is None else f"<{i}>")
        self.bos, self.eos, self.unk, self.unk_id = name(self.bos_id), name(self.eos_id), None, None
        self._ids_only = True

    @functools.cached_property
    def tokens(self) -> tuple:
        return tuple(f"<{i}>" for i in range(self._size))

    @functools.cached_property
    def _index(self) -> dict:
        return {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return self._size
