"""Structured mutations of valid files, shared by the fuzz tests.

A mutation keeps most of a valid file and breaks one thing: a value replaced by one of the
wrong JSON type or out of range, a key deleted or added, a list entry duplicated, the bytes
truncated or spliced with non-UTF-8. A loader must answer each with a correct object or a
``SeqProbError``; anything else (``TypeError``, ``MemoryError``, a tiktoken panic, which is a
``BaseException``) is a bug.
"""
from __future__ import annotations

import copy
import json

from hypothesis import strategies as st

from seqprob.errors import SeqProbError

#: Values that break a schema: wrong types, huge and negative numbers, odd strings.
HOSTILE_VALUES = [
    None, True, False, 0, -1, 1, 3, 2**31, 10**9, 10**12, 2**64, -(10**12), 1.5, -0.0, 1e308,
    float("nan"), float("inf"), "", "x", "\ud800", "\x00", "../../etc/passwd", "F32", "<s>",
    [], [1], [1, 2], [-1, 3], [0, 10**12], ["a", "a"], [[]], {}, {"a": 1}, {"": None},
]


def paths(tree, prefix=()):
    """Every path (tuple of keys / indexes) to a value inside a JSON tree, the root included."""
    yield prefix
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from paths(value, prefix + (key,))
    elif isinstance(tree, list):
        for i, value in enumerate(tree[:6]):  # the first few entries stand for the rest
            yield from paths(value, prefix + (i,))


def _get(tree, path):
    for key in path:
        tree = tree[key]
    return tree


@st.composite
def mutated_json(draw, valid):
    """``(mutated tree, description)``: one structural change to a copy of ``valid``."""
    tree = copy.deepcopy(valid)
    all_paths = list(paths(tree))
    path = draw(st.sampled_from(all_paths))
    kind = draw(st.sampled_from(["replace", "replace", "delete", "extra", "duplicate", "truncate"]))
    if not path:
        kind = "replace"
    parent = _get(tree, path[:-1]) if path else None
    key = path[-1] if path else None
    if kind == "replace":
        value = draw(st.sampled_from(HOSTILE_VALUES))
        if not path:
            return value, f"root <- {value!r}"
        parent[key] = value
    elif kind == "delete":
        del parent[key]
    elif kind == "extra":
        target = _get(tree, path)
        if isinstance(target, dict):
            target["unexpected_key"] = draw(st.sampled_from(HOSTILE_VALUES))
        elif isinstance(target, list):
            target.append(draw(st.sampled_from(HOSTILE_VALUES)))
        else:
            parent[key] = [target, target]
    elif kind == "duplicate":
        if isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            parent[key] = copy.deepcopy(parent)  # a self-similar nesting
    else:  # truncate a list or string value
        target = _get(tree, path)
        if isinstance(target, (list, str)):
            parent[key] = target[: draw(st.integers(0, max(0, len(target) - 1)))]
        else:
            del parent[key]
    return tree, f"{kind} at {list(path)!r}"


@st.composite
def mutated_bytes(draw, valid: bytes):
    """``(bytes, description)``: truncation, a non-UTF-8 splice, a flipped or repeated span."""
    n = len(valid)
    kind = draw(st.sampled_from(["truncate", "non_utf8", "flip", "repeat", "zero_fill"]))
    at = draw(st.integers(0, max(0, n - 1)))
    if kind == "truncate":
        return valid[:at], f"truncated at {at}"
    if kind == "non_utf8":
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xfe\xff"]))
        return valid[:at] + junk + valid[at:], f"{junk!r} at {at}"
    if kind == "flip":
        return valid[:at] + bytes([valid[at] ^ (1 << draw(st.integers(0, 7)))]) + valid[at + 1:], f"flip at {at}"
    if kind == "repeat":
        end = draw(st.integers(at, min(n, at + 64)))
        return valid[:end] + valid[at:end] + valid[end:], f"repeat {at}:{end}"
    return valid[:at] + b"\x00" * min(16, n - at) + valid[at + 16:], f"zeros at {at}"


def dumps(tree) -> str:
    """JSON text of ``tree`` (NaN/inf written as JSON5 words, as Python's json does)."""
    return json.dumps(tree, ensure_ascii=True)


def outcome(load, *args, **kwargs):
    """Call a loader; return ``("ok", obj)`` or ``("error", exc)`` for a SeqProbError.

    Any other exception (BaseException included: tiktoken panics are BaseExceptions) fails
    the test with the mutation shown by Hypothesis.
    """
    try:
        return "ok", load(*args, **kwargs)
    except SeqProbError as exc:
        assert str(exc).strip(), f"empty message from {type(exc).__name__}"
        return "error", exc
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the point of the test
        raise AssertionError(f"{type(exc).__name__} escaped instead of a SeqProbError: {exc}") from exc
