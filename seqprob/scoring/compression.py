"""Prediction is compression: arithmetic coding with a language model's next-token distributions.

Each line of the text is one sentence: its tokens and ``</s>`` are coded with the model's
distributions ``start([<s>])``, ``step(...)``, the same conditionals :func:`seqprob.evaluate`
scores, so the payload takes about sum(-log2 P) bits, the model's cross-entropy on the text.

Coder: Witten-Neal-Cleary arithmetic coding on exact Python integers (62-bit registers).
Each next-token distribution p (float64, renormalized) is quantized deterministically to
integer frequencies f_v = floor(p_v (2^40 - V)) + 1: every token keeps f_v >= 1 (codable even
when p_v = 0), the total stays <= 2^40, far below the coder's quarter range (2^60), and the
extra cost per token is at most -log2(1 - V / 2^40) bits. Encoder and decoder compute the same
floats from the same calls, so they agree bit-exactly on one machine and library build (a model
whose floats differ between machines would need the same build to decode).

Container (big-endian): magic ``b"SQPZ"``, version (1 byte), model fingerprint (8 bytes: SHA-256
of the vocabulary, tokenizer and the quantized first distribution), number of lines (uint32),
number of coded tokens (uint32), payload length (uint32), CRC-32 of the UTF-8 text (uint32),
then the payload. Data of another model, truncated or corrupt: :class:`CompressedDataError`.
"""
from __future__ import annotations

import hashlib
import re
import struct
import zlib

import numpy as np

from ..errors import FileFormatError, InputError
from .corpus import evaluate

__all__ = ["compress", "decompress", "CompressedDataError", "HEADER_BYTES", "quantize", "code_length_bits",
           "compression_table"]

MAGIC, VERSION = b"SQPZ", 1
_HEADER = struct.Struct(">4sB8sIIII")
#: Bytes of the container header before the payload.
HEADER_BYTES = _HEADER.size
_PRECISION = 62
_FULL, _HALF, _QUARTER = (1 << _PRECISION) - 1, 1 << (_PRECISION - 1), 1 << (_PRECISION - 2)
_TOTAL = 1 << 40


class CompressedDataError(FileFormatError):
    """Compressed data cannot be decoded: not seqprob data, another model, truncated or corrupt."""


def quantize(logprobs) -> np.ndarray:
    """(V+1,) cumulative integer frequencies of a (V,) log-prob row: f_v = floor(p_v (2^40 - V)) + 1."""
    row = np.asarray(logprobs, dtype=np.float64)
    if np.isnan(row).any() or np.isposinf(row).any():
        raise InputError("the model gave a NaN or +inf log-probability: cannot code with it")
    p = np.exp(row - row.max())  # (V,)
    p /= p.sum()
    freq = np.floor(p * float(_TOTAL - len(p))).astype(np.int64) + 1  # (V,) each >= 1
    return np.concatenate([[0], np.cumsum(freq)])  # (V+1,)


def code_length_bits(model, text: str, tokenizer=None) -> float:
    """sum(-log2 q) over the coded tokens, q the quantized probabilities: the payload's size in
    bits up to the coder's few bits of termination."""
    total = 0.0
    for cum, token in _coded_symbols(model, _tokenizer(model, tokenizer), text):
        total -= np.log2((cum[token + 1] - cum[token]) / cum[-1])
    return float(total)


class _Encoder:
    def __init__(self):
        self.low, self.high, self.pending, self.bits = 0, _FULL, 0, []

    def _emit(self, bit: int) -> None:
        self.bits.append(bit)
        self.bits.extend([1 - bit] * self.pending)
        self.pending = 0

    def encode(self, lo: int, hi: int, total: int) -> None:
        span = self.high - self.low + 1
        self.high = self.low + span * hi // total - 1
        self.low = self.low + span * lo // total
        while True:
            if self.high < _HALF:
                self._emit(0)
            elif self.low >= _HALF:
                self._emit(1)
                self.low, self.high = self.low - _HALF, self.high - _HALF
            elif self.low >= _QUARTER and self.high < 3 * _QUARTER:
                self.pending += 1
                self.low, self.high = self.low - _QUARTER, self.high - _QUARTER
            else:
                return
            self.low, self.high = 2 * self.low, 2 * self.high + 1

    def finish(self) -> bytes:
        self.pending += 1
        self._emit(0 if self.low < _QUARTER else 1)
        return np.packbits(np.array(self.bits, dtype=np.uint8)).tobytes()


class _Decoder:
    def __init__(self, payload: bytes):
        self.bits = np.unpackbits(np.frombuffer(payload, dtype=np.uint8)).tolist()
        self.pos, self.low, self.high, self.value = 0, 0, _FULL, 0
        for _ in range(_PRECISION):
            self.value = 2 * self.value + self._next_bit()

    def _next_bit(self) -> int:
        bit = self.bits[self.pos] if self.pos < len(self.bits) else 0
        self.pos += 1
        return bit

    def decode(self, cum: np.ndarray) -> int:
        total = int(cum[-1])
        span = self.high - self.low + 1
        scaled = ((self.value - self.low + 1) * total - 1) // span
        token = int(np.searchsorted(cum, scaled, side="right")) - 1
        lo, hi = int(cum[token]), int(cum[token + 1])
        self.high = self.low + span * hi // total - 1
        self.low = self.low + span * lo // total
        while True:
            if self.high < _HALF:
                pass
            elif self.low >= _HALF:
                self.low, self.high, self.value = self.low - _HALF, self.high - _HALF, self.value - _HALF
            elif self.low >= _QUARTER and self.high < 3 * _QUARTER:
                self.low, self.high, self.value = (self.low - _QUARTER, self.high - _QUARTER,
                                                   self.value - _QUARTER)
            else:
                return token
            self.low, self.high = 2 * self.low, 2 * self.high + 1
            self.value = 2 * self.value + self._next_bit()


def _tokenizer(model, tokenizer):
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tok is None:
        raise InputError("compression needs a tokenizer: pass tokenizer=... or use a model with .tokenizer")
    vocab = model.vocab
    if not vocab.same_ids(tok.vocab):
        raise InputError("the tokenizer's vocabulary is not the model's: compression needs the model's "
                         "own tokenizer")
    if vocab.bos_id is None or vocab.eos_id is None:
        raise InputError("compression needs a vocabulary with <s> and </s> (each line ends with </s>)")
    return tok


def _line_ids(tok, line: str, number: int) -> list:
    ids = tok.encode(line) if line else []
    unk = tok.vocab.unk_id
    decoded = tok.decode(ids)
    if (unk is not None and unk in ids) or decoded != line:
        raise InputError(f"line {number} cannot be coded losslessly by this tokenizer "
                         f"({type(tok).__name__}): {_first_loss(tok, line, decoded)}", line=number)
    return ids


def _first_loss(tok, line: str, decoded: str) -> str:
    """The first word (whole) or run of whitespace of ``line`` that decoding does not give back."""
    if decoded == line:  # the text spells the unknown-word token itself
        return f"the text holds {tok.vocab.unk!r}, the tokenizer's token for unknown words"
    at = next((i for i, (a, b) in enumerate(zip(line, decoded)) if a != b), min(len(line), len(decoded)))
    if at >= len(line):
        return f"it decodes as {decoded!r}"
    part = next(m for m in re.finditer(r"\S+|\s+", line) if m.start() <= at < m.end())
    space = part.group().isspace()
    got = re.match(r"\s*" if space else r"\S*", decoded[part.start():]).group()
    if space:
        return f"the whitespace {part.group()!r} at character {part.start() + 1} decodes as {got!r}"
    return (f"the word {part.group()!r} at character {part.start() + 1} decodes as {got!r}"
            + (" (it is not in the vocabulary)" if got == tok.vocab.unk else ""))


def _coded_symbols(model, tok, text: str):
    """Yield (cumulative frequencies, token) for every coded token, line by line, </s> included."""
    eos, bos = model.vocab.eos_id, model.vocab.bos_id
    for number, line in enumerate(text.split("\n"), start=1):
        state = model.start([bos])
        ids = _line_ids(tok, line, number)
        for k, token in enumerate(ids + [eos]):
            yield quantize(state.logprobs), token
            if k < len(ids):
                state = model.step(state, token)


def fingerprint(model, tokenizer=None) -> bytes:
    """8 bytes identifying the model as the coder sees it: vocabulary, tokenizer, and the
    quantized distribution of the first token."""
    tok = _tokenizer(model, tokenizer)
    h = hashlib.sha256(b"seqprob-compress\x00" + str(tok.kind).encode())
    h.update("\x00".join(model.vocab.tokens).encode("utf-8", "surrogatepass"))
    h.update(quantize(model.start([model.vocab.bos_id]).logprobs).tobytes())
    return h.digest()[:8]


def compress(model, text: str, tokenizer=None) -> bytes:
    """Arithmetic-code ``text`` with ``model``'s next-token distributions.

    Parameters
    ----------
    model : LanguageModel
        Needs ``start``/``step``, ``<s>`` and ``</s>``.
    text : str
        Lines (split on ``"\\n"``), each coded as a sentence ending in ``</s>``; the tokenizer must
        represent every line exactly (else :class:`InputError` naming the line).
    tokenizer : Tokenizer, optional
        Defaults to ``model.tokenizer``; its vocabulary must be the model's.

    Returns
    -------
    bytes
        Header (:data:`HEADER_BYTES` bytes) + payload.

    Notes
    -----
    The payload has at most ceil((L + 2) / 8) bytes, L = sum over coded tokens of -log2 q(x_t),
    q the quantized distribution (:func:`code_length_bits`); and L <= sum -log2 P(x_t | x_<t) +
    n · (-log2(1 - V / 2^40)) for n coded tokens. So the payload is within a byte or so of the
    model's total surprisal / 8 (see the module notes for the container).

    Examples
    --------
    >>> import seqprob as sp
    >>> truth = sp.toy_english()
    >>> data = compress(truth, "the cat sat on the mat")
    >>> decompress(truth, data)
    'the cat sat on the mat'
    """
    if not isinstance(text, str):
        raise InputError(f"compress() takes a str, got {type(text).__name__}", value=type(text).__name__)
    tok = _tokenizer(model, tokenizer)
    encoder, n_tokens = _Encoder(), 0
    for cum, token in _coded_symbols(model, tok, text):
        encoder.encode(int(cum[token]), int(cum[token + 1]), int(cum[-1]))
        n_tokens += 1
    payload = encoder.finish()
    header = _HEADER.pack(MAGIC, VERSION, fingerprint(model, tok), text.count("\n") + 1, n_tokens,
                          len(payload), zlib.crc32(text.encode("utf-8")))
    return header + payload


def _read_header(data: bytes, model, tok) -> tuple:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InputError(f"decompress() takes bytes, got {type(data).__name__}", value=type(data).__name__)
    data = bytes(data)
    if len(data) < HEADER_BYTES or data[:4] != MAGIC:
        raise CompressedDataError(f"not seqprob compressed data (no {MAGIC!r} header; {len(data)} bytes)",
                                  size=len(data))
    magic, version, fp, n_lines, n_tokens, size, crc = _HEADER.unpack_from(data)
    if version != VERSION:
        raise CompressedDataError(f"unsupported format version {version} (this seqprob reads {VERSION})",
                                  value=version, limit=VERSION)
    expected = fingerprint(model, tok)
    if fp != expected:
        raise CompressedDataError(f"the data was compressed with another model (fingerprint {fp.hex()}, "
                                  f"this model {expected.hex()})", value=fp.hex(), limit=expected.hex())
    if len(data) != HEADER_BYTES + size:
        raise CompressedDataError(f"truncated or padded data: the header announces {size} payload bytes, "
                                  f"got {len(data) - HEADER_BYTES}", value=len(data) - HEADER_BYTES, limit=size)
    return n_lines, n_tokens, crc, data[HEADER_BYTES:]


def decompress(model, data: bytes, tokenizer=None) -> str:
    """Inverse of :func:`compress` with the same model and tokenizer.

    Raises
    ------
    CompressedDataError
        Not seqprob data, another model (fingerprint), truncated, or a CRC-32 mismatch.
    """
    tok = _tokenizer(model, tokenizer)
    n_lines, n_tokens, crc, payload = _read_header(data, model, tok)
    decoder, eos, bos = _Decoder(payload), model.vocab.eos_id, model.vocab.bos_id
    lines, done = [], 0
    for _ in range(n_lines):
        state, ids = model.start([bos]), []
        while True:
            if done >= n_tokens:
                raise CompressedDataError("corrupt data: more tokens than the header announces",
                                          limit=n_tokens)
            token = decoder.decode(quantize(state.logprobs))
            done += 1
            if token == eos:
                break
            ids.append(token)
            state = model.step(state, token)
        lines.append(tok.decode(ids))
    text = "\n".join(lines)
    if done != n_tokens or zlib.crc32(text.encode("utf-8")) != crc:
        raise CompressedDataError("checksum mismatch: the decoded text is not the original (corrupt data)",
                                  value=zlib.crc32(text.encode("utf-8")), limit=crc)
    return text


def compression_table(models: dict, texts, tokenizer=None):
    """Compress ``texts`` (one sentence each) with every model: the real code size beside the
    model's cross-entropy (:func:`seqprob.evaluate`), in bits per byte of the text.

    Returns
    -------
    pandas.DataFrame
        Columns model, text_bytes, payload_bytes, bits_per_byte (real code),
        cross_entropy_bits_per_byte (evaluate), round_trip (decompress gave the text back).

    Notes
    -----
    With texts drawn from P*, P* itself gives the shortest expected code (Shannon: the
    expected code length is at least the entropy, reached by coding with the true P*); every
    other model pays its KL divergence from P* in extra bits.

    Examples
    --------
    >>> import seqprob as sp
    >>> truth = sp.toy_english()
    >>> compression_table({"P*": truth}, truth.sample(20, seed=0))["round_trip"].tolist()
    [True]
    """
    import pandas as pd


    lines = [t for t in texts if t]
    text = "\n".join(lines)
    text_bytes = sum(len(t.encode("utf-8")) for t in lines)  # newlines left out, as in evaluate
    rows = []
    for name, model in models.items():
        data = compress(model, text, tokenizer=tokenizer)
        payload = len(data) - HEADER_BYTES
        ev = evaluate(model, lines, tokenizer=tokenizer)
        rows.append((name, text_bytes, payload, 8 * payload / text_bytes, ev.bits_per_byte,
                     decompress(model, data, tokenizer=tokenizer) == text))
    return pd.DataFrame(rows, columns=["model", "text_bytes", "payload_bytes", "bits_per_byte",
                                       "cross_entropy_bits_per_byte", "round_trip"])
