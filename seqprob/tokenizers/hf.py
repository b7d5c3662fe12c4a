"""Hugging Face ``tokenizer.json`` files (GPT-2, Llama, Qwen2, Mistral ...) through the
``tokenizers`` library.

``tokenizers`` is an optional dependency (``pip install seqprob[hf]``) imported only inside this
module's functions, so ``import seqprob`` never needs it.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from ..errors import FileFormatError, InputError, SeqProbFileError, TokenizerError
from ..vocab import Vocab, check_ids
from .base import Tokenizer, check_text, iter_texts, register_tokenizer

__all__ = ["HFTokenizer", "WORD_BOUNDARIES", "is_hf_tokenizer_json"]

log = logging.getLogger(__name__)

#: Where a tokenizer marks word boundaries (read by word-level scoring):
#: ``leading_space``: a token that starts a word carries the space before it (GPT-2 ``Ġ``,
#: SentencePiece ``▁``); ``trailing``: a word's last token carries an end-of-word mark
#: (``</w>``); ``whole_word``: every token is a whole word; ``none``: unknown / not marked.
WORD_BOUNDARIES = ("leading_space", "trailing", "whole_word", "none")


def _library():
    try:
        import tokenizers
    except ImportError:  # pragma: no cover - the test extra installs it
        raise TokenizerError("HFTokenizer needs the 'tokenizers' package: pip install 'seqprob[hf]'") from None
    return tokenizers


def is_hf_tokenizer_json(data) -> bool:
    """True for the parsed content of a Hugging Face ``tokenizer.json`` (not a seqprob one)."""
    return isinstance(data, dict) and "type" not in data and "model" in data and (
        "pre_tokenizer" in data or "normalizer" in data or "added_tokens" in data)


@register_tokenizer
class HFTokenizer(Tokenizer):
    """A Hugging Face fast tokenizer read from ``tokenizer.json``.

    Parameters
    ----------
    path : str or path
        The ``tokenizer.json`` file, or the folder holding it (a checkpoint folder).
    bos, eos, unk : str, optional
        Special tokens. Default: ``bos_token`` / ``eos_token`` of ``tokenizer_config.json``
        beside the file, else the ``bos_token_id`` / ``eos_token_id`` of ``config.json``;
        ``unk``: default the tokenizer model's own unknown token (Llama-2's ``<unk>``); byte-level
        BPE has none, whatever ``tokenizer_config.json`` says (GPT-2 lists ``<|endoftext|>``
        there, which would make every EOS count as an OOV).
    word_boundary : {"leading_space", "trailing", "whole_word", "none"}, optional
        How tokens mark word boundaries (see :data:`WORD_BOUNDARIES`); detected from the file
        when omitted (ByteLevel or Metaspace / ``▁`` -> leading_space, an ``end_of_word_suffix``
        -> trailing, a WordLevel model -> whole_word, else none).
    vocab_size : int, optional
        Pad the vocabulary to this many ids (a model's embedding table is often larger than
        its tokenizer); padded ids are named ``<|unused_ID|>`` and never produced by ``encode``.
        A smaller size cuts off added tokens past the model's table (Gemma 3's
        ``<image_soft_token>`` is id 262144 of a 262144-row text model): ``encode`` raises
        :class:`~seqprob.errors.InputError` on a text that spells one.

    Notes
    -----
    ``encode`` never adds special tokens (``add_special_tokens=False``): the scoring functions
    add BOS / EOS themselves. Special tokens written in the text itself (``<|endoftext|>``)
    are matched as transformers' ``PreTrainedTokenizerFast`` matches them.

    Examples
    --------
    With a checkpoint's own file (not run here: it needs the file)::

        tok = HFTokenizer("checkpoint/tokenizer.json")
        tok.encode("Hello world"), tok.word_boundary    # ([15496, 995], 'leading_space')
    """

    kind = "hf"

    def __init__(self, path=None, bos: str | None = None, eos: str | None = None,
                 unk: str | None = None, word_boundary: str | None = None,
                 vocab_size: int | None = None):
        self.path = None if path is None else str(path)
        self.bos, self.eos, self.unk = bos, eos, unk
        self.word_boundary_arg = word_boundary
        self.vocab_size = vocab_size
        self.vocab_ = None
        if path is not None:
            file = _tokenizer_file(Path(path))
            text = _read(file)
            self._setup(text, _special_defaults(file.parent), str(file))

    # ------------------------------------------------------------------ building
    def _setup(self, text: str, defaults: dict, source: str) -> None:
        lib = _library()
        try:
            self.backend_ = lib.Tokenizer.from_str(text)
            spec = json.loads(text)
        except Exception as exc:  # the Rust parser raises a plain Exception
            raise FileFormatError(f"{source!r} is not a valid Hugging Face tokenizer.json: "
                                  f"{str(exc)[:200]}", path=source) from None
        self.json_ = text
        self.source_ = source
        tokens = self._tokens({t.get("id") for t in spec.get("added_tokens") or [] if isinstance(t, dict)})
        names = {r: getattr(self, r) or defaults.get(r) for r in ("bos", "eos")}
        names = {r: _token_name(v, tokens) for r, v in names.items()}
        unk = self.unk if self.unk is not None else (spec.get("model") or {}).get("unk_token")
        names["unk"] = unk if unk in set(tokens) else None
        for role in ("bos", "eos", "unk"):
            if getattr(self, role) is not None and getattr(self, role) not in set(tokens):
                raise InputError(f"{role} token {getattr(self, role)!r} is not in {source!r}",
                                 token=getattr(self, role), path=source)
        self.vocab_ = Vocab(tokens, **names)
        self.word_boundary_ = _check_boundary(self.word_boundary_arg) if self.word_boundary_arg \
            else detect_word_boundary(spec)

    def _tokens(self, added: set) -> list:
        """Token strings by id, padded (or cut to the added tokens past) ``vocab_size``."""
        n = self.backend_.get_vocab_size(with_added_tokens=True)
        by_id = {i: t for t, i in self.backend_.get_vocab(with_added_tokens=True).items()}
        size = max(n, max(by_id, default=-1) + 1)
        if self.vocab_size is not None:
            # the smallest size that keeps every id of the model's own vocabulary
            least = 1 + max((i for i in by_id if i not in added), default=-1)
            if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, int) or self.vocab_size < least:
                raise InputError(f"vocab_size must be an integer >= the tokenizer's {least} ids (its added "
                                 f"tokens may be cut off), got {self.vocab_size!r}",
                                 value=self.vocab_size, limit=least)
            size = self.vocab_size
        return [by_id.get(i, f"<|unused_{i}|>") for i in range(size)]

    def _within(self, ids: list, text: str) -> list:
        """``ids``, or InputError when one is an added token cut off by ``vocab_size``."""
        size = len(self.vocab_)
        for i in ids:
            if i >= size:
                raise InputError(f"{text!r:.60} holds the token {self.backend_.id_to_token(i)!r} (id {i}), "
                                 f"past the {size} ids this tokenizer was cut to (vocab_size)",
                                 token=self.backend_.id_to_token(i), limit=size)
        return ids

    @property
    def word_boundary(self) -> str:
        """"leading_space", "trailing", "whole_word" or "none" (see :data:`WORD_BOUNDARIES`)."""
        self.vocab  # noqa: B018 - NotFittedError before loading
        return self.word_boundary_

    # ------------------------------------------------------------------ text <-> ids
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens (no BOS / EOS)."""
        self.vocab  # noqa: B018
        return self._within(list(self.backend_.encode(check_text(text), add_special_tokens=False).ids), text)

    def encode_batch(self, texts) -> list[list[int]]:
        """Encode each text (in one call to the Rust tokenizer)."""
        self.vocab  # noqa: B018
        items = list(iter_texts(texts))
        encodings = self.backend_.encode_batch(items, add_special_tokens=False)
        return [self._within(list(e.ids), text) for e, text in zip(encodings, items)]

    def decode(self, ids) -> str:
        """Text of ``ids`` (special tokens kept as their text, like transformers' ``decode``)."""
        arr = check_ids(ids, len(self.vocab), allow_empty=True).ravel().tolist()
        return self.backend_.decode(arr, skip_special_tokens=False)

    def pieces(self, text: str) -> list[str]:
        """The surface text of each token of ``encode(text)``, from the tokenizer's offsets.

        A character split over several byte tokens shows on the first of them (the others
        get ``""``), so the pieces concatenate to the text the tokens cover. Characters the
        normalizer folds into the one before (NFC: ``"e\u0301"`` -> ``"é"``), which the
        tokenizer's offsets leave out, go to the token of that character.
        """
        self.vocab  # noqa: B018
        enc = self.backend_.encode(check_text(text), add_special_tokens=False)
        out, end, last = [], 0, None  # last: (index, start) of the latest non-empty piece
        for s, e in enc.offsets:
            start = max(s, end)
            if last is not None and start > end and self._folded(text[last[1]:end], text[end:start]):
                out[last[0]] += text[end:start]
            out.append(text[start:e] if e > start else "")
            if e > start:
                last = (len(out) - 1, start)
            end = max(end, e)
        if last is not None and len(text) > end and self._folded(text[last[1]:end], text[end:]):
            out[last[0]] += text[end:]
        return out

    def _folded(self, before: str, gap: str) -> bool:
        """True when the normalizer merges ``gap`` (text no token's offsets cover) into
        ``before``: normalizing them together differs from normalizing each."""
        norm = self.backend_.normalizer
        if norm is None:
            return False
        return norm.normalize_str(before + gap) != norm.normalize_str(before) + norm.normalize_str(gap)

    # ------------------------------------------------------------------ save / load
    def to_dict(self) -> dict:
        v = self.vocab
        return {"tokenizer": json.loads(self.json_), "bos": v.bos, "eos": v.eos, "unk": v.unk,
                "word_boundary": self.word_boundary_, "vocab_size": len(v)}

    @classmethod
    def from_dict(cls, data: dict) -> "HFTokenizer":
        tok = cls(bos=data.get("bos"), eos=data.get("eos"), unk=data.get("unk"),
                  word_boundary=data.get("word_boundary"), vocab_size=data.get("vocab_size"))
        tok._setup(json.dumps(data["tokenizer"], ensure_ascii=False), {}, "<saved HFTokenizer>")
        return tok

    def __repr__(self) -> str:
        size = len(self.vocab_) if self.vocab_ is not None else "unloaded"
        return f"HFTokenizer({self.path!r}, vocab_size={size})"


def _tokenizer_file(path: Path) -> Path:
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise SeqProbFileError(f"no tokenizer.json at {str(path)!r}", path=str(path))
    return file


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except OSError as exc:
        raise SeqProbFileError(f"cannot read {str(file)!r}: {exc.strerror or exc}", path=str(file)) from exc
    except UnicodeDecodeError:
        raise FileFormatError(f"{str(file)!r} is not UTF-8 text", path=str(file)) from None


def _special_defaults(folder: Path) -> dict:
    """bos / eos / unk names (or ids) from tokenizer_config.json, then special_tokens_map.json,
    then config.json."""
    out: dict = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        cfg = _json_or_empty(folder / name)
        for role in ("bos", "eos", "unk"):
            value = cfg.get(f"{role}_token")
            if isinstance(value, dict):  # AddedToken form {"content": ..., ...}
                value = value.get("content")
            if isinstance(value, str) and role not in out:
                out[role] = value
    model_cfg = _json_or_empty(folder / "config.json")
    for role in ("bos", "eos"):
        value = model_cfg.get(f"{role}_token_id")
        if isinstance(value, list) and value:
            value = value[0]
        if role not in out and isinstance(value, int) and not isinstance(value, bool):
            out[role] = value
    return out


def _json_or_empty(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FileFormatError(f"cannot parse {str(path)!r}: {exc}", path=str(path)) from None
    return data if isinstance(data, dict) else {}


def _token_name(value, tokens: list):
    """A special token given by name or by id (config.json) -> its name, or None."""
    if isinstance(value, int):
        return tokens[value] if 0 <= value < len(tokens) else None
    return value if value in set(tokens) else None


def _check_boundary(value: str) -> str:
    if value not in WORD_BOUNDARIES:
        raise InputError(f"word_boundary must be one of {WORD_BOUNDARIES}, got {value!r}", value=value)
    return value


def _components(node) -> list:
    """A normalizer / pre-tokenizer node and, for a Sequence, its parts (flattened)."""
    if not isinstance(node, dict):
        return []
    parts = [node]
    for key in ("normalizers", "pretokenizers"):
        for child in node.get(key) or []:
            parts.extend(_components(child))
    return parts


def detect_word_boundary(spec: dict) -> str:
    """Guess :data:`WORD_BOUNDARIES` from a parsed tokenizer.json (see :class:`HFTokenizer`)."""
    parts = _components(spec.get("pre_tokenizer")) + _components(spec.get("normalizer"))
    types = {p.get("type") for p in parts}
    if "ByteLevel" in types or "Metaspace" in types:
        return "leading_space"
    if any(p.get("type") in ("Replace", "Prepend") and "▁" in json.dumps(p, ensure_ascii=False) for p in parts):
        return "leading_space"
    model = spec.get("model") or {}
    if model.get("end_of_word_suffix"):
        return "trailing"
    if model.get("type") == "WordLevel":
        return "whole_word"
    return "none"


def folder_tokenizer(folder) -> "HFTokenizer | None":
    """The ``tokenizer.json`` of a Hugging Face model folder, padded to ``config.json``'s
    ``vocab_size`` (models often have more rows than the tokenizer has tokens; Gemma 3's text
    models one row fewer: its last added token is cut off), or None."""
    folder = Path(folder)
    if not (folder / "tokenizer.json").is_file():
        return None
    size = _json_or_empty(folder / "config.json").get("vocab_size")
    return HFTokenizer(folder, vocab_size=size if isinstance(size, int) and size > 0 else None)
