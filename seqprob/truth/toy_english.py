"""``toy_english()``: the default ground-truth language of seqprob, with exact P*.

A deterministic probabilistic finite-state grammar of about 200 words, written for seqprob:

- determiners and singular / plural nouns; present-tense verbs agree in number with their
  subject, also across a relative clause or a prepositional phrase ("the cat that the dogs
  chase sleeps", "the kings near the dog sing"), an agreement a trigram cannot see;
- prepositional phrases ("the cat sat on the mat");
- facts with paired slots ("paris is the capital of france", "the capital of spain is madrid";
  "paris is the capital of spain" has probability 0);
- gender: king/queen, man/woman ... with pronouns and reflexives that agree with the subject
  ("the king said that he sleeps", "the queen saw herself", "the queen is a woman"), so learned
  embeddings can show queen - king ≈ woman - man and cats - cat ≈ dogs - dog.

The spec ships as ``seqprob/data/toy_english.json`` (loaded with :mod:`importlib.resources`);
:func:`toy_english_spec` is the readable source it is generated from
(``python -m seqprob.truth.toy_english`` rewrites the file; a test checks they agree).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from .._io import as_path, atomic_write
from ..checks import check_int
from ..errors import InputError
from .grammar import ProbabilisticGrammar

__all__ = ["toy_english", "toy_english_spec", "agreement_pairs", "AgreementPair", "write_toy_english_json"]

# (masculine singular, masculine plural, feminine singular, feminine plural), most frequent first
HUMANS = [("king", "kings", "queen", "queens"), ("man", "men", "woman", "women"),
          ("boy", "boys", "girl", "girls"), ("prince", "princes", "princess", "princesses"),
          ("father", "fathers", "mother", "mothers"), ("brother", "brothers", "sister", "sisters"),
          ("son", "sons", "daughter", "daughters"), ("uncle", "uncles", "aunt", "aunts"),
          ("husband", "husbands", "wife", "wives"), ("actor", "actors", "actress", "actresses")]
ANIMALS = [("cat", "cats"), ("dog", "dogs"), ("bird", "birds"), ("horse", "horses"), ("mouse", "mice"),
           ("fox", "foxes"), ("rabbit", "rabbits"), ("cow", "cows"), ("duck", "ducks"), ("frog", "frogs"),
           ("bear", "bears"), ("wolf", "wolves"), ("lion", "lions"), ("owl", "owls")]
PLACES = ["mat", "table", "chair", "bed", "box", "house", "garden", "park", "tree", "river", "hill",
          "road", "kitchen", "roof", "floor", "sofa"]
THINGS = [("ball", "balls"), ("book", "books"), ("apple", "apples"), ("cake", "cakes"), ("bone", "bones"),
          ("hat", "hats"), ("cup", "cups"), ("letter", "letters")]
INTRANSITIVE = [("sleeps", "sleep"), ("runs", "run"), ("walks", "walk"), ("sings", "sing"),
                ("laughs", "laugh"), ("dances", "dance"), ("waits", "wait"), ("eats", "eat"),
                ("swims", "swim"), ("plays", "play")]
TRANSITIVE = [("sees", "see"), ("chases", "chase"), ("likes", "like"), ("loves", "love"), ("finds", "find"),
              ("follows", "follow"), ("helps", "help"), ("knows", "know"), ("watches", "watch")]
PAST_INTRANSITIVE = ["sat", "slept", "ran", "walked", "laughed", "waited"]
PAST_TRANSITIVE = ["saw", "liked", "found", "chased", "helped", "watched"]
ADJECTIVES = ["happy", "hungry", "tired", "sad", "small", "big", "old", "young", "angry", "sleepy"]
PREPOSITIONS = ["on", "in", "near", "under", "behind"]
CAPITALS = [("paris", "france"), ("rome", "italy"), ("berlin", "germany"), ("madrid", "spain"),
            ("london", "england"), ("lisbon", "portugal"), ("vienna", "austria"), ("athens", "greece"),
            ("dublin", "ireland"), ("warsaw", "poland")]
SG_DETERMINERS = {"a": 0.55, "this": 0.25, "every": 0.2}
PL_DETERMINERS = {"these": 0.3, "some": 0.3, "two": 0.25, "many": 0.15}

# subject classes: (gender, number); gender m / f (people) or n (animals)
CLASSES = [(g, n) for g in "mfn" for n in ("sg", "pl")]
PRONOUN = {("m", "sg"): "he", ("f", "sg"): "she", ("m", "pl"): "they", ("f", "pl"): "they"}
REFLEXIVE = {("m", "sg"): "himself", ("f", "sg"): "herself", ("n", "sg"): "itself",
             ("m", "pl"): "themselves", ("f", "pl"): "themselves", ("n", "pl"): "themselves"}
PREDICATE = {("m", "sg"): ["man", "boy"], ("f", "sg"): ["woman", "girl"],
             ("m", "pl"): ["men", "boys"], ("f", "pl"): ["women", "girls"]}


def _zipf(items, total: float = 1.0, s: float = 1.0) -> dict:
    """Zipf weights w_k ∝ 1 / k^s over ``items`` (first = most frequent), summing to ``total``."""
    w = np.array([1.0 / (k + 1) ** s for k in range(len(items))])
    return dict(zip(items, (total * w / w.sum()).tolist()))


def _nouns(gender: str, number: str) -> list:
    i = 0 if number == "sg" else 1
    if gender == "n":
        return [a[i] for a in ANIMALS]
    return [h[i + (0 if gender == "m" else 2)] for h in HUMANS]


def _subject_nouns(total: float, numbers=("sg", "pl")) -> dict:
    """Subject noun -> (weight, class): people split evenly by gender, animals Zipfian."""
    share = {"sg": 0.6, "pl": 0.4}
    norm = sum(share[n] for n in numbers)
    out = {}
    for number in numbers:
        part = total * share[number] / norm
        for w, p in _zipf(_nouns("n", number), part * 0.55).items():
            out[w] = (p, ("n", number))
        people = _zipf(list(zip(_nouns("m", number), _nouns("f", number))), part * 0.45, s=0.7)
        for (m, f), p in people.items():
            out[m], out[f] = (p / 2, ("m", number)), (p / 2, ("f", number))
    return out


class _Builder:
    """Collects states as {name: {"stop": p, "arcs": {word: [p, target]}}} and normalizes them."""

    def __init__(self):
        self.states: dict = {}

    def add(self, state: str, word: str, weight: float, target: str) -> None:
        arcs = self.states.setdefault(state, {"stop": 0.0, "arcs": {}})["arcs"]
        if word in arcs and arcs[word][1] != target:
            raise ValueError(f"toy_english: state {state} has word {word!r} twice")  # keeps it deterministic
        arcs[word] = [arcs.get(word, [0.0])[0] + weight, target]

    def add_many(self, state: str, weights: dict, target: str) -> None:
        for word, weight in weights.items():
            self.add(state, word, weight, target)

    def stop(self, state: str, weight: float) -> None:
        self.states.setdefault(state, {"stop": 0.0, "arcs": {}})["stop"] = weight

    def spec(self, start: str) -> dict:
        states = {}
        for name, body in self.states.items():
            total = body["stop"] + sum(p for p, _ in body["arcs"].values())
            states[name] = {"stop": body["stop"] / total,
                            "arcs": [[w, p / total, t] for w, (p, t) in body["arcs"].items()]}
        return {"name": "toy_english", "start": start, "states": states}


def _agree(pairs, number: str) -> list:
    return [p[0 if number == "sg" else 1] for p in pairs]


def _verb_phrase(b: _Builder, state: str, c: tuple, total: float) -> None:
    """Arcs from ``state`` for the main verb of a subject of class ``c`` (weights sum to ``total``)."""
    gender, number = c
    tag = f"{gender}_{number}"
    parts = {"intr": 0.28, "past_intr": 0.27, "trans": 0.14, "past_trans": 0.07, "cop": 0.12, "say": 0.12}
    if gender == "n":
        del parts["say"]
    scale = total / sum(parts.values())
    b.add_many(state, _zipf(_agree(INTRANSITIVE, number), parts["intr"] * scale), "VPEND")
    b.add_many(state, _zipf(PAST_INTRANSITIVE, parts["past_intr"] * scale, s=1.3), "VPEND")
    b.add_many(state, _zipf(_agree(TRANSITIVE, number), parts["trans"] * scale), f"TRANS_{tag}")
    b.add_many(state, _zipf(PAST_TRANSITIVE, parts["past_trans"] * scale), f"TRANS_{tag}")
    cop = ("is", "was") if number == "sg" else ("are", "were")
    b.add_many(state, {cop[0]: parts["cop"] * scale * 0.7, cop[1]: parts["cop"] * scale * 0.3}, f"COP_{tag}")
    if "say" in parts:
        says = "says" if number == "sg" else "say"
        b.add_many(state, {"said": parts["say"] * scale * 0.6, says: parts["say"] * scale * 0.4}, f"SAY_{tag}")


def _class_states(b: _Builder, c: tuple) -> None:
    """States that remember the subject's gender and number until its verb, pronoun, reflexive."""
    gender, number = c
    tag = f"{gender}_{number}"
    b.add(f"SUBJ_{tag}", "that", 0.2, f"RC_{tag}")
    b.add_many(f"SUBJ_{tag}", _zipf(PREPOSITIONS, 0.1), f"SPP_{tag}")
    _verb_phrase(b, f"SUBJ_{tag}", c, 0.7)
    _verb_phrase(b, f"VP_{tag}", c, 1.0)
    b.add(f"RC_{tag}", "the", 0.7, f"RCD_{tag}")  # object relative: that the dogs chase
    b.add_many(f"RC_{tag}", _zipf(_agree(TRANSITIVE, number), 0.3), f"RCS_{tag}")  # that chases the dog
    for inner in ("sg", "pl"):
        nouns = {w: p for w, (p, _) in _subject_nouns(0.5, (inner,)).items()}
        b.add_many(f"RCD_{tag}", nouns, f"RCN_{tag}_{inner}")
        b.add_many(f"RCN_{tag}_{inner}", _zipf(_agree(TRANSITIVE, inner), 0.7), f"VP_{tag}")
        b.add_many(f"RCN_{tag}_{inner}", _zipf(PAST_TRANSITIVE, 0.3), f"VP_{tag}")
    b.add(f"RCS_{tag}", "the", 1.0, f"RCSD_{tag}")
    b.add_many(f"RCSD_{tag}", _object_nouns(), f"VP_{tag}")
    b.add(f"SPP_{tag}", "the", 1.0, f"SPPD_{tag}")
    spp = {**_zipf(PLACES, 0.4), **{w: p for w, (p, _) in _subject_nouns(0.6).items()}}
    b.add_many(f"SPPD_{tag}", spp, f"VP_{tag}")
    b.add(f"TRANS_{tag}", REFLEXIVE[c], 0.12, "VPEND")
    b.add(f"TRANS_{tag}", "the", 0.6, "OBJ_any")
    b.add(f"TRANS_{tag}", "a", 0.16, "OBJ_sg")
    b.add(f"TRANS_{tag}", "some", 0.12, "OBJ_pl")
    b.add_many(f"COP_{tag}", _zipf(ADJECTIVES, 0.8 if gender != "n" else 1.0), "VPEND")
    if gender != "n":
        b.add(f"SAY_{tag}", "that", 1.0, f"SAYT_{tag}")
        b.add(f"SAYT_{tag}", PRONOUN[c], 1.0, f"VP_{tag}")
        if number == "sg":
            b.add(f"COP_{tag}", "a", 0.2, f"COPA_{tag}")
            b.add_many(f"COPA_{tag}", {PREDICATE[c][0]: 0.7, PREDICATE[c][1]: 0.3}, "VPEND")
        else:
            b.add_many(f"COP_{tag}", {PREDICATE[c][0]: 0.14, PREDICATE[c][1]: 0.06}, "VPEND")


def _object_nouns(numbers=("sg", "pl")) -> dict:
    things = {}
    if "sg" in numbers:
        things.update(_zipf([t[0] for t in THINGS], 0.2))
    if "pl" in numbers:
        things.update(_zipf([t[1] for t in THINGS], 0.1))
    return {**things, **{w: p for w, (p, _) in _subject_nouns(0.7, numbers).items()}}


def _shared_states(b: _Builder) -> None:
    b.add("S", "the", 0.55, "D_the")
    b.add_many("S", {k: 0.11 * v for k, v in SG_DETERMINERS.items()}, "D_sg")
    b.add_many("S", {k: 0.09 * v for k, v in PL_DETERMINERS.items()}, "D_pl")
    b.add("S", "he", 0.05, "VP_m_sg")
    b.add("S", "she", 0.05, "VP_f_sg")
    for det, numbers in (("D_the", ("sg", "pl")), ("D_sg", ("sg",)), ("D_pl", ("pl",))):
        for word, (p, (g, n)) in _subject_nouns(0.9 if det == "D_the" else 1.0, numbers).items():
            b.add(det, word, p, f"SUBJ_{g}_{n}")
    b.add_many("OBJ_any", _object_nouns(), "VPEND")
    b.add_many("OBJ_sg", _object_nouns(("sg",)), "VPEND")
    b.add_many("OBJ_pl", _object_nouns(("pl",)), "VPEND")
    b.stop("VPEND", 0.45)
    b.add_many("VPEND", _zipf(PREPOSITIONS, 0.55, s=1.3), "PP")
    b.add("PP", "the", 1.0, "PPD")
    b.add_many("PPD", _zipf(PLACES, 1.0), "PPEND")
    b.stop("PPEND", 0.9)
    b.add_many("PPEND", _zipf(PREPOSITIONS, 0.1), "PP")


def _fact_states(b: _Builder) -> None:
    """Paired slots: 'paris is the capital of france', 'paris is in france', 'the capital of france is paris'."""
    cities = _zipf([c for c, _ in CAPITALS], 0.12, s=0.8)
    b.add("D_the", "capital", 0.1, "CAP")
    b.add("CAP", "of", 1.0, "CAPO")
    countries = _zipf([k for _, k in CAPITALS], 1.0, s=0.8)
    for city, country in CAPITALS:
        b.add("S", city, cities[city], f"F_{city}")
        b.add(f"F_{city}", "is", 1.0, f"FI_{city}")
        b.add(f"FI_{city}", "the", 0.7, f"FT_{city}")
        b.add(f"FI_{city}", "in", 0.3, f"FO_{city}")
        b.add(f"FT_{city}", "capital", 1.0, f"FC_{city}")
        b.add(f"FC_{city}", "of", 1.0, f"FO_{city}")
        b.add(f"FO_{city}", country, 1.0, "FEND")
        b.add("CAPO", country, countries[country], f"FR_{country}")
        b.add(f"FR_{country}", "is", 1.0, f"FRI_{country}")
        b.add(f"FRI_{country}", city, 1.0, "FEND")
    b.stop("FEND", 1.0)


def toy_english_spec() -> dict:
    """The declarative spec of :func:`toy_english` (states, arcs, stop probabilities), built from
    the word lists of this module."""
    b = _Builder()
    _shared_states(b)
    for c in CLASSES:
        _class_states(b, c)
    _fact_states(b)
    return b.spec(start="S")


def _spec_resource():
    return resources.files("seqprob") / "data" / "toy_english.json"  # one part per "/" (Python 3.10)


def spec_to_json(spec: dict) -> str:
    """JSON text of a grammar spec with one state header and one arc per line (diff-friendly)."""
    lines = ["{", f' "name": {json.dumps(spec["name"])},', f' "start": {json.dumps(spec["start"])},',
             ' "states": {']
    names = list(spec["states"])
    for k, name in enumerate(names):
        body = spec["states"][name]
        arcs = ",\n".join(f"   {json.dumps(arc)}" for arc in body["arcs"])
        tail = "," if k < len(names) - 1 else ""
        lines.append(f'  {json.dumps(name)}: {{"stop": {json.dumps(body["stop"])}, "arcs": [\n{arcs}]}}{tail}')
    lines += [" }", "}", ""]
    return "\n".join(lines)


def write_toy_english_json(path=None):
    """Regenerate ``seqprob/data/toy_english.json`` (or ``path``) from :func:`toy_english_spec`."""
    path = Path(_spec_resource()) if path is None else as_path(path)
    with atomic_write(path) as handle:
        handle.write(spec_to_json(toy_english_spec()))
    path.chmod(0o644)  # package data: readable by everyone
    return path


def toy_english() -> ProbabilisticGrammar:
    """The default ground-truth language: a deterministic grammar with exact P*.

    Examples
    --------
    >>> g = toy_english()
    >>> bool(g.sentence_logprob("the cat sat on the mat") > np.log(1e-4))
    True
    >>> g.sentence_logprob("paris is the capital of spain")
    -inf
    """
    return ProbabilisticGrammar.from_dict(json.loads(_spec_resource().read_text(encoding="utf-8")))


@dataclass(frozen=True)
class AgreementPair:
    """A subject-verb agreement context: ``prefix`` then ``correct`` (grammatical) vs ``wrong``."""

    prefix: str
    correct: str
    wrong: str
    kind: str  # "object_relative", "subject_relative" or "pp"
    attractor: str  # "match" or "mismatch": number of the noun next to the verb vs the subject


def agreement_pairs(n: int = 200, seed=0, kinds=("object_relative", "subject_relative", "pp"),
                    attractor: str = "any") -> list:
    """Minimal pairs where the subject and its verb are separated by a relative clause or a PP.

    E.g. ``AgreementPair("the cat that the dogs chase", "sleeps", "sleep", ...)``. Half the
    subjects are singular; ``attractor`` = "mismatch" / "match" / "any" sets whether the noun
    in between has the other number, the same number, or either (half each).
    A trigram sees only the last two words, so it cannot tell which form is right.
    """
    if attractor not in ("any", "match", "mismatch"):
        raise InputError(f"attractor must be 'any', 'match' or 'mismatch', got {attractor!r}", value=attractor)
    bad = set(kinds) - {"object_relative", "subject_relative", "pp"}
    if bad or not kinds:
        raise InputError(f"unknown agreement kinds {sorted(bad)}: use object_relative, subject_relative, pp")
    check_int("n", n, low=1)
    rng = np.random.default_rng(seed)
    return [_one_pair(rng, i, kinds, attractor) for i in range(n)]


def _one_pair(rng, i: int, kinds, attractor: str) -> AgreementPair:
    number = ("sg", "pl")[i % 2]
    other = "pl" if number == "sg" else "sg"
    mismatch = {"any": bool(rng.integers(2)), "match": False, "mismatch": True}[attractor]
    inner = other if mismatch else number
    gender = str(rng.choice(["m", "f", "n"]))
    pick = lambda items: str(items[rng.integers(len(items))])  # noqa: E731
    subject, noun = pick(_nouns(gender, number)), pick(_nouns(str(rng.choice(["m", "f", "n"])), inner))
    kind = str(rng.choice(list(kinds)))
    if kind == "object_relative":
        prefix = f"the {subject} that the {noun} {pick(_agree(TRANSITIVE, inner))}"
    elif kind == "subject_relative":
        prefix = f"the {subject} that {pick(_agree(TRANSITIVE, number))} the {noun}"
    else:
        prefix = f"the {subject} {pick(PREPOSITIONS)} the {noun}"
    verb = INTRANSITIVE[rng.integers(len(INTRANSITIVE))]
    correct, wrong = (verb[0], verb[1]) if number == "sg" else (verb[1], verb[0])
    return AgreementPair(prefix=prefix, correct=correct, wrong=wrong, kind=kind,
                         attractor="mismatch" if mismatch else "match")


if __name__ == "__main__":  # pragma: no cover - regenerates the shipped spec
    sys.stdout.write(f"{write_toy_english_json(sys.argv[1] if len(sys.argv) > 1 else None)}\n")
