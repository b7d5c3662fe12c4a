"""Parsing and validation of probabilistic grammar specs (plain dicts, JSON, TOML).

A spec is a mapping::

    {"name": "tiny", "start": "S",
     "states": {"S": {"stop": 0.0, "arcs": [["a", 1.0, "A"]]},
                "A": {"stop": 1.0, "arcs": []}}}

Each arc is ``[word, prob, target]`` or ``{"word": ..., "prob": ..., "target": ...}``.
``start`` defaults to the first state listed; ``stop`` defaults to 0.
"""
from __future__ import annotations

import json
import math
import numbers
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._io import as_path
from .._schema import MAX_JSON_BYTES
from ..errors import FileFormatError, GrammarError, InputError, SeqProbFileError
from ..vocab import BOS, EOS, UNK

__all__ = ["ParsedSpec", "parse_spec", "read_spec_file", "TOLERANCE"]

#: How far a state's outgoing probabilities plus its stop probability may be from 1.
TOLERANCE = 1e-9
_RESERVED = (UNK, BOS, EOS)


@dataclass(frozen=True)
class ParsedSpec:
    """A validated spec: state names, start index, arcs ``(src, word, prob, dst)``, stops."""

    name: str
    states: tuple
    start: int
    arcs: tuple
    stops: tuple


def _prob(value, state: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise GrammarError(f"state {state!r}: {what} must be a number, got {value!r}", state=state, value=value)
    p = float(value)
    if math.isnan(p) or p < 0 or p > 1 + TOLERANCE:
        raise GrammarError(f"state {state!r}: {what} = {value!r} is not a probability in [0, 1]",
                           state=state, value=value, limit=(0.0, 1.0))
    return p


def _word(value, state: str) -> str:
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise GrammarError(f"state {state!r}: arc word {value!r} must be a non-empty string without "
                           f"whitespace", state=state, value=value)
    if not value.isascii() and not value.encode("utf-8", "surrogatepass").decode("utf-8", "ignore") == value:
        raise GrammarError(f"state {state!r}: arc word {value!r} holds a lone surrogate (not valid "
                           f"Unicode text: it cannot be written as UTF-8)", state=state, value=value)
    if value in _RESERVED:
        raise GrammarError(f"state {state!r}: arc word {value!r} is reserved ({', '.join(_RESERVED)})",
                           state=state, value=value)
    return value


def _arc(raw, state: str, index: dict) -> tuple:
    if isinstance(raw, Mapping):
        try:
            word, prob, target = raw["word"], raw["prob"], raw["target"]
        except KeyError as exc:
            raise GrammarError(f"state {state!r}: arc {dict(raw)!r} lacks key {exc}", state=state) from None
    elif isinstance(raw, Sequence) and not isinstance(raw, str) and len(raw) == 3:
        word, prob, target = raw
    else:
        raise GrammarError(f"state {state!r}: arc {raw!r} must be [word, prob, target] or a table with "
                           f"word, prob, target", state=state, value=raw)
    if not isinstance(target, str) or target not in index:
        raise GrammarError(f"state {state!r}: arc {word!r} goes to unknown state {target!r}",
                           state=state, target=target)
    return (index[state], _word(word, state), _prob(prob, state, f"probability of arc {word!r}"),
            index[target])


def _state_entries(body, name: str, index: dict) -> tuple[list, float]:
    if not isinstance(body, Mapping):
        raise GrammarError(f"state {name!r}: must be a table with 'arcs' and 'stop', got {body!r}", state=name)
    unknown = set(body) - {"arcs", "stop"}
    if unknown:
        raise GrammarError(f"state {name!r}: unknown keys {sorted(unknown)} (allowed: arcs, stop)", state=name)
    raw_arcs = body.get("arcs", [])
    if isinstance(raw_arcs, (str, Mapping)) or not isinstance(raw_arcs, Sequence):
        raise GrammarError(f"state {name!r}: 'arcs' must be a list, got {raw_arcs!r}", state=name)
    arcs = [_arc(raw, name, index) for raw in raw_arcs]
    stop = _prob(body.get("stop", 0.0), name, "stop probability")
    total = math.fsum([a[2] for a in arcs]) + stop
    if abs(total - 1.0) > TOLERANCE:
        raise GrammarError(f"state {name!r}: outgoing probabilities plus stop sum to {total!r}, "
                           f"must be 1 (tolerance {TOLERANCE})", state=name, value=total, limit=1.0)
    return arcs, stop


def _check_states(spec) -> tuple[list, dict]:
    if not isinstance(spec, Mapping):
        raise GrammarError(f"a grammar spec must be a mapping with 'states', got {type(spec).__name__}")
    states = spec.get("states")
    if not isinstance(states, Mapping) or not states:
        raise GrammarError("a grammar spec needs a non-empty 'states' table")
    names = list(states)
    for name in names:
        if not isinstance(name, str) or not name:
            raise GrammarError(f"state names must be non-empty strings, got {name!r}", state=name)
    return names, {n: i for i, n in enumerate(names)}


def _reachable(n: int, edges: list, seeds: list) -> set:
    succ: dict = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    seen, todo = set(seeds), deque(seeds)
    while todo:
        for nxt in succ.get(todo.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _check_graph(names: list, start: int, arcs: list, stops: list) -> None:
    edges = [(a[0], a[3]) for a in arcs if a[2] > 0]
    forward = _reachable(len(names), edges, [start])
    for i, name in enumerate(names):
        if i not in forward:
            raise GrammarError(f"state {name!r} is unreachable from the start state {names[start]!r}",
                               state=name)
    backward = _reachable(len(names), [(b, a) for a, b in edges], [i for i, s in enumerate(stops) if s > 0])
    for i, name in enumerate(names):
        if i not in backward:
            raise GrammarError(f"state {name!r} cannot reach the end of a sentence (a dead end: no path "
                               f"to a state with a stop probability > 0)", state=name)


#: Largest grammar: states x (words + 3 specials) cells of its (S, V) emission table (8 bytes each).
MAX_CELLS = 2**27


def _check_size(n_states: int, n_words: int) -> None:
    cells = n_states * (n_words + 3)
    if cells > MAX_CELLS:
        raise GrammarError(f"grammar too large: {n_states} states x {n_words + 3} tokens = {cells} cells "
                           f"of its emission table ({cells * 8 / 2**30:.1f} GiB), limit {MAX_CELLS}",
                           value=cells, limit=MAX_CELLS)


def parse_spec(spec) -> ParsedSpec:
    """Validate a spec mapping; raise :class:`GrammarError` naming the offending state."""
    names, index = _check_states(spec)
    start = spec.get("start", names[0])
    if not isinstance(start, str) or start not in index:
        raise GrammarError(f"start state {start!r} is not one of the states", state=start)
    arcs, stops = [], []
    for name in names:
        state_arcs, stop = _state_entries(spec["states"][name], name, index)
        arcs.extend(state_arcs)
        stops.append(stop)
    if not any(a[2] > 0 for a in arcs):
        raise GrammarError(f"the grammar has an empty vocabulary: no arc with a word and a probability > 0 "
                           f"(start state {start!r})", state=start)
    _check_graph(names, index[start], arcs, stops)
    _check_size(len(names), len({a[1] for a in arcs}))
    return ParsedSpec(name=str(spec.get("name", "grammar")), states=tuple(names), start=index[start],
                      arcs=tuple(arcs), stops=tuple(stops))


def read_spec_file(path, fmt: str):
    """Read a spec from a JSON or TOML file; errors name the file."""
    path = as_path(path)
    if fmt == "toml" and sys.version_info < (3, 11):
        raise InputError(f"reading TOML grammar {str(path)!r} needs Python 3.11+ (tomllib); "
                         f"use ProbabilisticGrammar.from_json on Python 3.10", path=str(path))
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise FileFormatError(f"grammar file {str(path)!r} has {path.stat().st_size} bytes, more than "
                                  f"the limit {MAX_JSON_BYTES}", path=str(path), limit=MAX_JSON_BYTES)
        data = path.read_bytes()
    except OSError as exc:
        raise SeqProbFileError(f"cannot read grammar file {str(path)!r}: {exc.strerror or exc}",
                               path=str(path)) from exc
    try:
        if fmt == "toml":
            import tomllib
            return tomllib.loads(data.decode("utf-8"))
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # JSON/TOMLDecodeError are ValueErrors
        raise FileFormatError(f"grammar file {str(path)!r} is not valid {fmt.upper()}: {exc}",
                              path=str(path)) from exc
