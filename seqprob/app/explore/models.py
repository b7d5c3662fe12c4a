"""The models an explorer serves: named once on the command line, shared safely across threads.

A request can only choose among these by name; nothing a request sends is ever loaded.
"""
from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import InputError
from ...protocols import Inspectable, model_tokenizer
from ...scoring.core import start_id

__all__ = ["ServedModel", "serve_model", "load_served", "model_kind", "NAME_PATTERN", "TOY_ENGLISH"]

#: Names a model may have: they travel in JSON and in the page's menus.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
#: The spec that means the exact toy language ``seqprob.toy_english()`` (when no such file exists).
TOY_ENGLISH = "toy_english"


@dataclass
class ServedModel:
    """One model of the explorer.

    Attributes
    ----------
    name : str
        What requests call it.
    model : LanguageModel
    tokenizer : Tokenizer
        The model's own tokenizer.
    lock : threading.Lock
        Held around every call into the model: a GPT reuses preallocated buffers between
        forward passes, so two threads must never run one model at the same time.
    """

    name: str
    model: object
    tokenizer: object
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def kind(self) -> str:
        return model_kind(self.model)

    @functools.cached_property
    def strings(self) -> list:
        """Display string of every model id (the tokenizer's, when it shares the model's vocabulary)."""
        vocab = self.model.vocab
        if self.tokenizer.vocab == vocab:
            return self.tokenizer.token_strings(list(range(len(vocab))))
        return list(vocab.tokens)

    @functools.cached_property
    def tokenizer_key(self) -> str:
        """Equal for models that split every text into the same tokens (same tokenizer class,
        settings and vocabulary): the page compares only such models."""
        import hashlib
        import json

        try:
            settings = self.tokenizer.to_dict()
        except NotImplementedError:  # a tokenizer that cannot describe itself: its vocabulary
            settings = list(self.tokenizer.vocab.tokens)
        state = json.dumps([type(self.tokenizer).__name__, settings], sort_keys=True, default=str)
        return hashlib.sha256(state.encode("utf-8")).hexdigest()[:16]

    def info(self) -> dict:
        """The model's row of ``GET /api/models``."""
        from ...scoring.core import context_size

        model, config = self.model, getattr(self.model, "config", None)
        context = context_size(model)
        if context is None and isinstance(getattr(model, "order", None), int):
            context = model.order - 1  # an n-gram reads the last order - 1 tokens
        inspectable = isinstance(model, Inspectable)
        return {"name": self.name, "kind": self.kind, "class": type(model).__name__,
                "vocab_size": len(model.vocab), "context": context, "inspectable": inspectable,
                "n_layer": getattr(config, "n_layer", None) if inspectable else None,
                "n_head": getattr(config, "n_head", None) if inspectable else None,
                "tokenizer": self.tokenizer_key, "word_boundary": self.tokenizer.word_boundary,
                "separator": " " if self.tokenizer.word_boundary == "whole_word" else "",
                "eos": model.vocab.eos}


def model_kind(model) -> str:
    """"gpt", "ngram", "truth" (an exact language P*), or the class name in lower case."""
    from ...gpt import GPT
    from ...ngram.base import BackoffLanguageModel
    from ...ngram.mixture import Mixture
    from ...truth import ProbabilisticGrammar, TokenizedLanguage

    if isinstance(model, GPT):
        return "gpt"
    if isinstance(model, (BackoffLanguageModel, Mixture)):
        return "ngram"
    if isinstance(model, (ProbabilisticGrammar, TokenizedLanguage)):
        return "truth"
    return type(model).__name__.lower()


def check_name(name) -> str:
    """``name`` if it can name a model here, else :class:`InputError`."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InputError(f"model name {name!r} is not valid: use 1 to 64 letters, digits or . _ + - "
                         "(name a model with NAME=SPEC)", value=name)
    return name


def serve_model(name: str, model, tokenizer=None) -> ServedModel:
    """A :class:`ServedModel`, checked: a valid name, a LanguageModel with a tokenizer and ``<s>``.

    Examples
    --------
    >>> import seqprob as sp
    >>> serve_model("truth", sp.toy_english()).info()["kind"]
    'truth'
    """
    check_name(name)
    if not all(callable(getattr(model, m, None)) for m in ("logprobs", "token_logprobs", "start", "step")):
        raise InputError(f"model {name!r} ({type(model).__name__}) is not a LanguageModel with "
                         "logprobs, token_logprobs, start and step", model=name)
    tok = model_tokenizer(model, tokenizer)
    if tok is None:
        raise InputError(f"model {name!r} ({type(model).__name__}) has no tokenizer of its own: "
                         "the explorer needs one to read typed text", model=name)
    start_id(model.vocab)  # x_0: its BOS, else its EOS; neither: a named error
    return ServedModel(name, model, tok)


def _split_spec(spec: str) -> tuple:
    """``NAME=SPEC`` -> (NAME, SPEC); a bare SPEC is named by its file's stem."""
    name, eq, rest = spec.partition("=")
    if eq and not Path(spec).exists():
        return name, rest
    if spec in ("default", TOY_ENGLISH) and not Path(spec).exists():
        return spec, spec
    path = Path(spec)
    stem = path.name.split(".")[0] if path.name else ""
    return (stem or path.resolve().name), spec


def _load(spec: str):
    from ...registry import load_model
    from ...truth import toy_english

    if spec == TOY_ENGLISH and not Path(spec).exists():
        return toy_english()
    return load_model(spec)


def load_served(specs) -> list:
    """The :class:`ServedModel` of each spec (``NAME=SPEC`` or ``SPEC``), in order.

    A spec is whatever :func:`seqprob.load_model` accepts (a file or folder; ``default`` is the
    shipped GPT), or ``toy_english`` for the exact toy language. No spec: the default model.

    Examples
    --------
    >>> [m.name for m in load_served(["default", "truth=toy_english"])]
    ['default', 'truth']
    """
    specs = list(specs) or ["default"]
    served, seen = [], {}
    for spec in specs:
        name, path = _split_spec(spec)
        if name in seen:
            raise InputError(f"two models are named {name!r} ({seen[name]!r} and {spec!r}): "
                             "name them with NAME=SPEC", value=name)
        seen[name] = spec
        check_name(name)
        served.append(serve_model(name, _load(path)))
    return served
