"""Small validators for the file formats seqprob reads: every field checked for its JSON type,
its range and its size against a stated limit *before* anything is allocated from it.

Each check raises a :class:`~seqprob.errors.FileFormatError` (or the subclass given as
``error``) whose message names the file, the field, the bad value and the limit. The limits
are listed on the file formats page of the documentation.
"""
from __future__ import annotations

import numbers

from .errors import FileFormatError

__all__ = ["MAX_VOCAB", "MAX_TOKEN_BYTES", "MAX_JSON_BYTES", "typed", "int_in", "check_id_space",
           "type_name"]

#: Largest vocabulary (number of ids) any loader accepts: 2**22 = 4,194,304 (GPT-4o: 201,088).
MAX_VOCAB = 2**22
#: Longest single token accepted in a tokenizer file, in bytes.
MAX_TOKEN_BYTES = 1024
#: Largest JSON file (tokenizer, vocab, manifest, config, grammar) read into memory: 1 GiB.
MAX_JSON_BYTES = 2**30

_NAMES = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "an object",
          bool: "true/false", type(None): "null"}


def type_name(value) -> str:
    """The JSON-ish name of ``value``'s type (``'a list'``, ``'an object'`` ...)."""
    return _NAMES.get(type(value), type(value).__name__)


def typed(value, types, field: str, source: str, error=FileFormatError):
    """``value`` if it is an instance of ``types`` (bool never counts as int); else ``error``."""
    types = types if isinstance(types, tuple) else (types,)
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        wanted = " or ".join(_NAMES.get(t, t.__name__) for t in types)
        raise error(f"{source}: field {field!r} must be {wanted}, got {type_name(value)} "
                    f"{_short(value)}", path=source, field=field)
    return value


def int_in(value, field: str, source: str, lo: int, hi: int, error=FileFormatError) -> int:
    """``value`` as an int if it is an integer in ``[lo, hi]``; else ``error`` naming the limit."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{source}: field {field!r} must be an integer, got {type_name(value)} "
                    f"{_short(value)}", path=source, field=field)
    if not lo <= value <= hi:
        raise error(f"{source}: field {field!r} = {_short(value)} is out of range: must be in "
                    f"[{lo}, {hi}]", path=source, field=field, value=int(value), limit=(lo, hi))
    return int(value)


def check_id_space(max_id: int, n_entries: int, field: str, source: str, error=FileFormatError) -> None:
    """Ids index a table of ``max_id + 1`` rows: at most :data:`MAX_VOCAB`, and no more than
    twice the entries plus 65,536 (a sparse id space would allocate rows for nothing)."""
    limit = min(MAX_VOCAB, 2 * n_entries + 65536)
    if max_id >= limit:
        raise error(f"{source}: field {field!r} holds id {max_id}, but {n_entries} entries allow "
                    f"ids below {limit} (limit: ids < min({MAX_VOCAB}, 2 * entries + 65536))",
                    path=source, field=field, value=max_id, limit=limit)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
