"""tiktoken encodings, offline: ``.tiktoken`` files parsed by seqprob, named encodings from a cache.

A ``.tiktoken`` file holds one token per line, ``base64(token bytes) rank``. seqprob parses
these files itself (``tiktoken.load.load_tiktoken_bpe`` caches local paths by name and would
serve a stale copy of an edited file) and never downloads anything: a named encoding
(``gpt2``, ``cl100k_base`` ...) is read from the cache file tiktoken itself would use, or an
:class:`~seqprob.errors.UnknownTokenizerError` says how to provide it.

``tiktoken`` is imported only inside the functions that build an encoding, so that
``import seqprob`` does not import it.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from .._io import as_path, atomic_write
from ..errors import (FileFormatError, SeqProbFileError, TokenIdError, TokenizerError,
                      UnknownTokenizerError)
from .._schema import MAX_JSON_BYTES, MAX_TOKEN_BYTES, MAX_VOCAB, check_id_space, int_in, typed
from ..vocab import Vocab, check_ids
from .base import Tokenizer, check_text, iter_texts, register_tokenizer

__all__ = ["TiktokenTokenizer", "EncodingTokenizer", "GPT2_PATTERN", "ENDOFTEXT",
           "KNOWN_ENCODINGS", "parse_tiktoken", "read_tiktoken_file", "write_tiktoken_file",
           "tiktoken_cache_dir", "expected_cache_path", "build_encoding", "token_display_strings"]

log = logging.getLogger(__name__)

ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX, _FIM_MIDDLE, _FIM_SUFFIX = "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

#: GPT-2's pre-tokenization regex, in tiktoken's faster equivalent form (``r50k_pat_str``).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
                   r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
_O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

_BLOB = "https://openaipublic.blob.core.windows.net"
_R50K = (f"{_BLOB}/encodings/r50k_base.tiktoken",
         "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930")
_P50K = (f"{_BLOB}/encodings/p50k_base.tiktoken",
         "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069")
_CL100K = (f"{_BLOB}/encodings/cl100k_base.tiktoken",
           "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7")
_O200K = (f"{_BLOB}/encodings/o200k_base.tiktoken",
          "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")
#: GPT-2's original data-gym merges file (tiktoken's ``gpt2`` reads it; same ranks as r50k_base).
_GPT2_VOCAB_BPE = f"{_BLOB}/gpt-2/encodings/main/vocab.bpe"


def _o200k_harmony_specials() -> dict[str, int]:
    special = {ENDOFTEXT: 199999, _ENDOFPROMPT: 200018, "<|startoftext|>": 199998}
    named = {200002: "<|return|>", 200003: "<|constrain|>", 200005: "<|channel|>",
             200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>"}
    for i in range(200000, 201088):
        special[named.get(i, f"<|reserved_{i}|>")] = i
    return special


#: The named encodings of tiktoken 0.14 (``tiktoken_ext/openai_public.py``): the ``.tiktoken``
#: URL(s) whose cache file is looked up, its sha256, the pattern and the special tokens.
KNOWN_ENCODINGS: dict[str, dict] = {
    "gpt2": {"files": [_R50K], "pattern": GPT2_PATTERN, "special_tokens": {ENDOFTEXT: 50256}},
    "r50k_base": {"files": [_R50K], "pattern": GPT2_PATTERN, "special_tokens": {ENDOFTEXT: 50256}},
    "p50k_base": {"files": [_P50K], "pattern": GPT2_PATTERN, "special_tokens": {ENDOFTEXT: 50256}},
    "p50k_edit": {"files": [_P50K], "pattern": GPT2_PATTERN,
                  "special_tokens": {ENDOFTEXT: 50256, _FIM_PREFIX: 50281, _FIM_MIDDLE: 50282,
                                     _FIM_SUFFIX: 50283}},
    "cl100k_base": {"files": [_CL100K], "pattern": _CL100K_PATTERN,
                    "special_tokens": {ENDOFTEXT: 100257, _FIM_PREFIX: 100258, _FIM_MIDDLE: 100259,
                                       _FIM_SUFFIX: 100260, _ENDOFPROMPT: 100276}},
    "o200k_base": {"files": [_O200K], "pattern": _O200K_PATTERN,
                   "special_tokens": {ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}},
    "o200k_harmony": {"files": [_O200K], "pattern": _O200K_PATTERN,
                      "special_tokens": _o200k_harmony_specials()},
}


# --------------------------------------------------------------------------- .tiktoken files
def parse_tiktoken(data: bytes, source: str = "<bytes>") -> dict[bytes, int]:
    """Parse the content of a ``.tiktoken`` file into ``{token bytes: rank}``.

    Blank lines are skipped; any other line must be ``base64 rank``. A malformed line raises
    :class:`FileFormatError` with its 1-based ``line`` number; so does a repeated token or rank.
    """
    ranks: dict[bytes, int] = {}
    seen_ranks: set[int] = set()
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        token, rank = _parse_line(line, lineno, source)
        if token in ranks or rank in seen_ranks:
            what = f"token {token!r}" if token in ranks else f"rank {rank}"
            raise FileFormatError(f"{source!r} line {lineno}: {what} appears twice",
                                  path=source, line=lineno)
        ranks[token] = rank
        seen_ranks.add(rank)
    if not ranks:
        raise FileFormatError(f"{source!r} holds no tokens (expected lines 'base64 rank')", path=source)
    check_id_space(max(ranks.values()), len(ranks), "rank", repr(source))
    return ranks


def _parse_line(line: bytes, lineno: int, source: str) -> tuple[bytes, int]:
    parts = line.split()
    try:
        if len(parts) != 2:
            raise ValueError(f"expected 2 fields, found {len(parts)}")
        token = base64.b64decode(parts[0], validate=True)
        rank = int(parts[1])
        if not token or len(token) > MAX_TOKEN_BYTES:
            raise ValueError(f"token of {len(token)} bytes (must be 1 to {MAX_TOKEN_BYTES})")
        if not 0 <= rank < MAX_VOCAB:
            raise ValueError(f"rank {rank} out of range [0, {MAX_VOCAB})")
    except (ValueError, binascii.Error) as exc:
        shown = line[:60].decode("utf-8", errors="backslashreplace")
        raise FileFormatError(f"{source!r} line {lineno}: malformed .tiktoken line {shown!r} "
                              f"(expected 'base64 rank'): {exc}", path=source, line=lineno) from None
    return token, rank


def read_tiktoken_file(path) -> dict[bytes, int]:
    """Read and parse a local ``.tiktoken`` file (never cached: an edited file is re-read)."""
    path = str(as_path(path))
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_JSON_BYTES:
                raise FileFormatError(f"tokenizer file {path!r} has {size} bytes, more than the "
                                      f"limit {MAX_JSON_BYTES}", path=path, value=size, limit=MAX_JSON_BYTES)
            data = handle.read()
    except OSError as exc:
        raise SeqProbFileError(f"cannot read tokenizer file {path!r}: {exc.strerror or exc}",
                               path=path) from exc
    return parse_tiktoken(data, source=path)


def write_tiktoken_file(path, ranks: Mapping[bytes, int]) -> Path:
    """Write ``ranks`` as a ``.tiktoken`` file (``base64(bytes) rank`` per line, by rank), atomically."""
    path = as_path(path)
    with atomic_write(path, "wb") as handle:
        for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            handle.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
    return path


def check_ranks(ranks: Mapping[bytes, int], source: str) -> None:
    """Check what tiktoken's Rust core needs: all 256 single bytes, unique ranks (else it panics)."""
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        shown = ", ".join(f"0x{b:02x}" for b in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise TokenizerError(f"{source}: field 'mergeable_ranks': {len(missing)} of the 256 single-byte tokens are missing "
                             f"({shown}); a byte-level encoding needs all 256", missing=missing)
    values = list(ranks.values())
    if len(set(values)) != len(values):
        raise TokenizerError(f"{source}: two tokens share a rank; ranks must be unique")


#: Text a pre-tokenization pattern must split without losing a character (checked on load).
PATTERN_PROBE = ("Hello, World! It's 2024--isn't it?  ünïcödé 日本語 😀\t\ttabs\r\n"
                 "new\nlines \x00nul \u00a0nbsp   trailing  ")


def check_pattern(pattern, name: str, error=TokenizerError) -> None:
    """A pre-tokenization regex must compile and its matches must cover the text they split:
    ``"".join(findall(p, text)) == text`` on :data:`PATTERN_PROBE`, else ``decode(encode(x))``
    would lose characters (and an empty pattern makes tiktoken panic)."""
    import regex

    if not isinstance(pattern, str) or not pattern:
        raise error(f"{name}: pattern must be a non-empty regular expression, got {pattern!r}",
                             pattern=pattern, field="pattern")
    try:
        pieces = regex.findall(pattern, PATTERN_PROBE, timeout=1.0)
    except (regex.error, TimeoutError, RecursionError, OverflowError, ValueError) as exc:
        raise error(f"{name}: invalid pre-tokenization pattern {pattern!r}: {exc}",
                             pattern=pattern, field="pattern") from None
    if not all(isinstance(p, str) for p in pieces) or "".join(pieces) != PATTERN_PROBE:
        raise error(f"{name}: pattern {pattern!r} does not cover every character of a text "
                             f"(its matches drop or reorder text, so decode(encode(x)) != x; groups "
                             f"must be non-capturing)", pattern=pattern, field="pattern")


def check_special_tokens(special, source: str) -> dict[str, int]:
    """Validate a ``{text: id}`` mapping of special tokens (non-empty unique texts, unique ids)."""
    typed(special, dict, "special_tokens", source, error=TokenizerError)
    out = {}
    for text, idx in special.items():
        typed(text, str, "special_tokens key", source, error=TokenizerError)
        check_text(text, f"{source}: special token")
        if not text:
            raise TokenizerError(f"{source}: a special token cannot be the empty string", token="")
        out[text] = int_in(idx, f"special_tokens[{text!r}]", source, 0, MAX_VOCAB - 1, error=TokenizerError)
    if len(set(out.values())) != len(out):
        raise TokenizerError(f"{source}: two special tokens share an id; ids must be unique",
                             field="special_tokens")
    return out


# --------------------------------------------------------------------------- named encodings
def tiktoken_cache_dir() -> Path | None:
    """The folder tiktoken caches encodings in (``None`` when caching is disabled with '')."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return Path(os.environ[var]) if os.environ[var] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def expected_cache_path(url: str) -> Path | None:
    """Where tiktoken keeps its copy of ``url``: ``<cache dir>/sha1(url)``."""
    folder = tiktoken_cache_dir()
    return None if folder is None else folder / hashlib.sha1(url.encode()).hexdigest()


def _load_named_ranks(name: str) -> tuple[dict[bytes, int], str]:
    spec = KNOWN_ENCODINGS[name]
    for url, sha256 in spec["files"]:
        path = expected_cache_path(url)
        if path is not None and path.is_file():
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != sha256:
                log.warning("cached %s (%s) differs from the published file (sha256 %s)", name, path, sha256)
            return parse_tiktoken(data, source=str(path)), str(path)
    if name == "gpt2":
        path = expected_cache_path(_GPT2_VOCAB_BPE)
        if path is not None and path.is_file():
            return _data_gym_ranks(path.read_bytes(), str(path)), str(path)
    raise UnknownTokenizerError(_not_cached_message(name), name=name)


def _not_cached_message(name: str) -> str:
    url = KNOWN_ENCODINGS[name]["files"][0][0]
    where = expected_cache_path(url)
    return (f"tiktoken encoding {name!r} is not available offline (seqprob never downloads). "
            f"Provide it either as a local file: TiktokenTokenizer('path/to/{url.rsplit('/', 1)[-1]}'), "
            f"or put that file (from {url}) in TIKTOKEN_CACHE_DIR under the name "
            f"{hashlib.sha1(url.encode()).hexdigest()} (currently expected at "
            f"{str(where) if where else '<caching disabled>'!r})")


def _data_gym_ranks(data: bytes, source: str) -> dict[bytes, int]:
    """GPT-2's ``vocab.bpe`` merges (data-gym byte alphabet) -> ranks, as tiktoken's gpt2 builds them."""
    order = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    alphabet = {chr(b): b for b in order}
    extra = [b for b in range(256) if b not in alphabet.values()]
    alphabet.update({chr(256 + n): b for n, b in enumerate(extra)})
    ranks = {bytes([b]): i for i, b in enumerate(order + extra)}
    lines = data.decode("utf-8", errors="strict").split("\n")[1:]
    for lineno, line in enumerate(lines, start=2):
        if not line:
            continue
        try:
            first, second = line.split()
            ranks[bytes(alphabet[c] for c in first) + bytes(alphabet[c] for c in second)] = len(ranks)
        except (ValueError, KeyError):
            raise FileFormatError(f"{source!r} line {lineno}: malformed vocab.bpe merge {line[:60]!r}",
                                  path=source, line=lineno) from None
    return ranks


# --------------------------------------------------------------------------- building encodings
def build_encoding(name: str, pattern: str, ranks: Mapping[bytes, int],
                   special_tokens: Mapping[str, int]):
    """A ``tiktoken.Encoding``, after checking what would make tiktoken's Rust core panic."""
    check_ranks(ranks, name)
    check_pattern(pattern, name)
    check_id_space(max([*ranks.values(), *special_tokens.values()]), len(ranks) + len(special_tokens),
                   "special_tokens", name, error=TokenizerError)
    clash = [s for s, i in special_tokens.items() if i in set(ranks.values())]
    if clash:
        raise TokenizerError(f"{name}: special token {clash[0]!r} has id {special_tokens[clash[0]]}, "
                             f"which is already the rank of a byte token", token=clash[0])
    import tiktoken

    try:
        return tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=dict(ranks),
                                 special_tokens=dict(special_tokens))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # tiktoken's PanicException is a BaseException
        raise TokenizerError(f"{name}: tiktoken cannot build this encoding (pattern {pattern!r}): "
                             f"{exc}", pattern=pattern) from None


def token_display_strings(ranks: Mapping[bytes, int], special_tokens: Mapping[str, int]) -> list[str]:
    """Unique display strings in id order: token bytes as UTF-8 (``\\xNN`` for partial
    characters), special tokens as themselves, unused ids as ``<|unused_ID|>``."""
    size = 1 + max(max(ranks.values()), max(special_tokens.values(), default=-1))
    by_id: dict[int, bytes] = {rank: token for token, rank in ranks.items()}
    taken = set(special_tokens)
    specials = {i: s for s, i in special_tokens.items()}
    out = []
    for i in range(size):
        if i in specials:
            out.append(specials[i])
            continue
        token = by_id.get(i)
        text = f"<|unused_{i}|>" if token is None else token.decode("utf-8", errors="backslashreplace")
        for candidate in (text, repr(token), f"{text}#{i}"):
            if candidate not in taken:
                text = candidate
                break
        taken.add(text)
        out.append(text)
    return out


def _special_map(special_tokens, first_free: int) -> dict[str, int]:
    """Special tokens as ``{text: id}``; a plain sequence gets ids from ``first_free`` on."""
    if special_tokens is None:
        return {}
    if isinstance(special_tokens, str):
        special_tokens = [special_tokens]
    if isinstance(special_tokens, Mapping):
        return check_special_tokens(dict(special_tokens), "special_tokens")
    out = {}
    for text in special_tokens:
        typed(text, str, "special_tokens item", "special_tokens", error=TokenizerError)
        out.setdefault(text, first_free + len(out))
    return check_special_tokens(out, "special_tokens")


class EncodingTokenizer(Tokenizer):
    """Shared machinery of the tokenizers backed by a ``tiktoken.Encoding``.

    Attributes (after building): ``encoding_`` (the ``tiktoken.Encoding``), ``mergeable_ranks_``
    (``{bytes: rank}``), ``special_tokens_`` (``{text: id}``), ``pattern_`` and ``vocab_``: one
    display string per id; ``<|endoftext|>``, when present, is both BOS and EOS (GPT-2's
    convention) and there is no ``<unk>`` (a byte-level encoding represents every text).
    """

    kind = "encoding"
    #: byte-level BPE with a GPT-2-style pattern: a word's first token carries its leading space
    default_word_boundary = "leading_space"

    def _set_encoding(self, name: str, pattern: str, ranks: Mapping[bytes, int],
                      special_tokens: Mapping[str, int]) -> None:
        self.encoding_ = build_encoding(name, pattern, ranks, special_tokens)
        self.mergeable_ranks_ = dict(ranks)
        self.special_tokens_ = dict(special_tokens)
        self.pattern_ = pattern
        eot = ENDOFTEXT if ENDOFTEXT in special_tokens else None
        self.vocab_ = Vocab(token_display_strings(ranks, special_tokens), bos=eot, eos=eot, unk=None)

    @property
    def n_merges(self) -> int:
        """Number of merged (multi-byte) tokens: mergeable ranks minus the 256 single bytes."""
        self.vocab  # raises NotFittedError when unbuilt
        return len(self.mergeable_ranks_) - 256

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token text is encoded as ordinary text; never raises)."""
        self.vocab
        return self.encoding_.encode_ordinary(check_text(text))

    def encode_batch(self, texts) -> list[list[int]]:
        """Token ids of each text, encoded in parallel by tiktoken."""
        self.vocab
        return self.encoding_.encode_ordinary_batch(list(iter_texts(texts)))

    def decode_bytes(self, ids) -> bytes:
        """The bytes of ``ids``, concatenated (special tokens as their text)."""
        arr = check_ids(ids, len(self.vocab), allow_empty=True)
        try:
            return self.encoding_.decode_bytes(arr.ravel().tolist())
        except KeyError:
            valid = set(self.mergeable_ranks_.values()) | set(self.special_tokens_.values())
            bad = next(i for i in arr.ravel().tolist() if i not in valid)
            raise TokenIdError(f"token id {bad} is unused by encoding {self.encoding_.name!r}",
                               value=bad, limit=len(self.vocab)) from None

    def decode(self, ids) -> str:
        """Text of ``ids``: bytes decoded as UTF-8 (``U+FFFD`` only where ids split a character)."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def to_dict(self) -> dict:
        ranks = sorted(self.mergeable_ranks_.items(), key=lambda kv: kv[1])
        return {"name": self.encoding_.name, "pattern": self.pattern_,
                "mergeable_ranks": [[base64.b64encode(t).decode("ascii"), r] for t, r in ranks],
                "special_tokens": self.special_tokens_}

    @staticmethod
    def _ranks_from_dict(data: dict, source: str = "tokenizer JSON") -> dict[bytes, int]:
        """``mergeable_ranks``: a list of ``[base64 token, rank]``, tokens and ranks unique."""
        entries = typed(_field(data, "mergeable_ranks", source), list, "mergeable_ranks", source)
        if len(entries) > MAX_VOCAB:
            raise FileFormatError(f"{source}: {len(entries)} mergeable_ranks, more than the limit "
                                  f"{MAX_VOCAB}", field="mergeable_ranks", limit=MAX_VOCAB)
        ranks: dict[bytes, int] = {}
        seen: set[int] = set()
        for i, entry in enumerate(entries):
            where = f"mergeable_ranks[{i}]"
            if not isinstance(entry, list) or len(entry) != 2:
                raise FileFormatError(f"{source}: field {where!r} must be a [base64 token, rank] pair, "
                                      f"got {entry!r:.60}", field=where)
            token, rank = _b64_token(entry[0], where, source), int_in(entry[1], where, source, 0, MAX_VOCAB - 1)
            if token in ranks or rank in seen:
                what = f"token {token!r}" if token in ranks else f"rank {rank}"
                raise FileFormatError(f"{source}: field {where!r}: {what} appears twice", field=where)
            ranks[token] = rank
            seen.add(rank)
        if ranks:
            check_id_space(max(seen), len(ranks), "mergeable_ranks", source)
        return ranks

    @classmethod
    def _checked_fields(cls, data: dict, source: str = "tokenizer JSON") -> tuple:
        """(name, pattern, ranks, special tokens) of a saved encoding, each validated."""
        name = typed(_field(data, "name", source), str, "name", source)
        pattern = typed(_field(data, "pattern", source), str, "pattern", source)
        check_pattern(pattern, source, error=FileFormatError)
        specials = check_special_tokens(_field(data, "special_tokens", source), source)
        return name, pattern, cls._ranks_from_dict(data, source), specials

    def save(self, path) -> Path:
        """Write as JSON, or as ``.tiktoken`` (ranks only: pattern and special tokens are not
        kept; loading uses GPT-2's pattern and ``<|endoftext|>`` after the last rank)."""
        if Path(path).suffix == ".tiktoken":
            self.vocab
            return write_tiktoken_file(path, self.mergeable_ranks_)
        return super().save(path)


@register_tokenizer
class TiktokenTokenizer(EncodingTokenizer):
    """A tiktoken encoding by name (``cl100k_base`` ...) or from a local ``.tiktoken`` file.

    Parameters
    ----------
    name_or_path : str or path
        A local ``.tiktoken`` file (parsed by seqprob), or one of :data:`KNOWN_ENCODINGS`, read
        from tiktoken's cache (``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else
        ``<tmp>/data-gym-cache``, file name ``sha1(url)``). Nothing is ever downloaded.
    pattern : str, optional
        Pre-tokenization regex. Default: the named encoding's; for a file, the pattern of the
        encoding named by the file's stem if known (``cl100k_base.tiktoken``), else GPT-2's.
    special_tokens : mapping or sequence of str, optional
        ``{text: id}``, or texts given ids after the last rank. Default: the named encoding's;
        for a file, as for ``pattern``, else ``<|endoftext|>`` after the last rank.

    Examples
    --------
    With a file of your own (not run here: it needs the file)::

        tok = TiktokenTokenizer("my_bpe.tiktoken")
        tok.decode(tok.encode("hello world"))          # 'hello world'
    """

    kind = "tiktoken"

    def __init__(self, name_or_path=None, pattern: str | None = None,
                 special_tokens: Mapping[str, int] | Sequence[str] | None = None):
        self.name_or_path = None if name_or_path is None else str(name_or_path)
        self.pattern = pattern
        self.special_tokens = special_tokens
        self.source_ = None
        self.named_ = False
        self.vocab_ = None
        if name_or_path is not None:
            self._load(self.name_or_path)

    def _load(self, spec: str) -> None:
        path = Path(spec)
        if path.is_file():
            ranks, name, self.source_ = read_tiktoken_file(path), path.stem, str(path)
        elif spec in KNOWN_ENCODINGS:
            (ranks, self.source_), name = _load_named_ranks(spec), spec
            self.named_ = True
        elif path.exists():
            raise SeqProbFileError(f"tokenizer file {spec!r} is a folder (or not a regular file), not "
                                   f"a .tiktoken file", path=spec)
        elif path.suffix or os.sep in spec or "/" in spec:
            raise SeqProbFileError(f"tokenizer file {spec!r} does not exist (known tiktoken "
                                   f"encoding names: {', '.join(KNOWN_ENCODINGS)})", path=spec)
        else:
            raise UnknownTokenizerError(f"unknown tiktoken encoding {spec!r}: known names are "
                                        f"{', '.join(KNOWN_ENCODINGS)}, or give a .tiktoken file path",
                                        name=spec)
        known = KNOWN_ENCODINGS.get(name, {})
        pattern = self.pattern or known.get("pattern", GPT2_PATTERN)
        first_free = max(ranks.values()) + 1
        specials = (_special_map(self.special_tokens, first_free) if self.special_tokens is not None
                    else dict(known.get("special_tokens", {ENDOFTEXT: first_free})))
        self._set_encoding(name, pattern, ranks, specials)

    def to_dict(self) -> dict:
        if self.named_:
            named = KNOWN_ENCODINGS[self.name_or_path]
            if self.pattern_ == named["pattern"] and self.special_tokens_ == named["special_tokens"]:
                return {"name": self.name_or_path}  # re-read from the cache on load
        return super().to_dict()

    @classmethod
    def from_dict(cls, data: dict) -> "TiktokenTokenizer":
        if "mergeable_ranks" not in data:
            name = typed(_field(data, "name", "tokenizer JSON"), str, "name", "tokenizer JSON")
            if name not in KNOWN_ENCODINGS:
                raise UnknownTokenizerError(f"tokenizer JSON: unknown tiktoken encoding {name!r} "
                                            f"(known: {', '.join(KNOWN_ENCODINGS)})", name=name)
            return cls(name)
        tok = cls()
        tok._set_encoding(*cls._checked_fields(data))
        return tok


def _field(data: dict, key: str, source: str):
    if key not in data:
        raise FileFormatError(f"{source}: missing field {key!r}", field=key, path=source)
    return data[key]


def _b64_token(value, field: str, source: str) -> bytes:
    typed(value, str, field, source)
    try:
        token = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise FileFormatError(f"{source}: field {field!r}: {value!r:.60} is not base64", field=field) from None
    if not 1 <= len(token) <= MAX_TOKEN_BYTES:
        raise FileFormatError(f"{source}: field {field!r}: a token of {len(token)} bytes (must be 1 "
                              f"to {MAX_TOKEN_BYTES})", field=field, limit=MAX_TOKEN_BYTES)
    return token
