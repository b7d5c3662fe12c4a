"""Word-level scores from any token-level model, with the beginning-of-word correction.

A word is a span of the text (whitespace-separated, or the matches of a regex); its tokens are
the tokens whose non-space bytes lie inside it. The word's log-probability is the sum of its
tokens' log-probs, corrected for tokenizers that mark a word's *start* with its leading space
(Pimentel & Meister, EMNLP 2024): there a word is finished only when the next token starts a
new word (or is ``</s>``), so

    log P(w | c) = sum_{t in w} log P(x_t | x_<t) + log P(B | x_<=last(w)) - log P(B | x_<first(w)),

B = {tokens beginning with a space mark} ∪ {``</s>``}. At the start of the text every token
starts a word, so the first word's second term is log 1 = 0.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from .._io import check_text
from ..errors import InputError, TokenizerError, WordAlignmentError
from ..functional import LN2, LN10, logsumexp
from ..tokenizers.base import iter_texts
from .core import SPACE_BYTES, check_models, encode_for_model, resolve_tokenizer, token_byte_spans
from .windows import window_logprobs

__all__ = ["word_scores", "word_start_mask"]

log = logging.getLogger(__name__)

#: first characters that mark a word-initial token: a space (tiktoken / seqprob BPE display
#: strings), GPT-2's ``Ġ`` (space) and ``Ċ`` (newline) in HF vocabularies, SentencePiece's ``▁``
_WORD_START_MARKS = ("Ġ", "Ċ", "▁")




@dataclass
class _WordSpans:
    words: list            # the word strings
    token_word: np.ndarray  # (T,) index of the word each real token belongs to
    n_context: int = 0     # leading words that belong to the context (not scored)






def _word_matches(text: str, words) -> list:
    """[(start byte, end byte, word)] of the words of ``text``."""
    import regex

    pattern = r"\S+" if words == "whitespace" else words
    try:
        compiled = regex.compile(pattern) if isinstance(pattern, str) else pattern
        found = [(m.start(), m.end(), m.group()) for m in compiled.finditer(text) if m.end() > m.start()]
    except (regex.error, AttributeError, TypeError) as exc:
        raise InputError(f"words must be 'whitespace' or a regex, got {words!r} ({exc})", value=words) from None
    return [(len(text[:a].encode("utf-8")), len(text[:b].encode("utf-8")), w) for a, b, w in found]


def _align(text: str, spans: np.ndarray, raw: bytes, matches: list, trailing: bool) -> np.ndarray:
    """(T,) word index of each token; whitespace-only tokens join the next word (the previous one
    when ``trailing`` or at the end)."""
    starts = np.array([m[0] for m in matches])
    out = np.full(len(spans), -1, dtype=np.int64)
    for t, (a, b) in enumerate(spans.tolist()):
        core = [i for i in range(a, b) if raw[i] not in SPACE_BYTES]
        if not core:
            continue
        w = int(np.searchsorted(starts, core[0], side="right")) - 1
        if w < 0 or core[-1] >= matches[w][1] or core[0] >= matches[w][1]:
            raise WordAlignmentError(
                f"token {raw[a:b].decode('utf-8', 'backslashreplace')!r} (bytes {a}..{b}) of {text!r:.60} "
                "spans two words or lies outside every word: the tokenizer cannot split this text "
                "into the requested words", token=raw[a:b], text=text)
        out[t] = w
    return _fill_spaces(out, trailing)


def _fill_spaces(owner: np.ndarray, trailing: bool) -> np.ndarray:
    """Give whitespace-only tokens (-1) to the following word (the previous one when ``trailing``),
    falling back to the other side at the ends of the text."""
    known = np.flatnonzero(owner >= 0)
    if not len(known):
        return owner
    out = owner.copy()
    for t in np.flatnonzero(owner < 0):
        after, before = known[known > t], known[known < t]
        prefer, other = (before[-1:], after[:1]) if trailing else (after[:1], before[-1:])
        out[t] = owner[prefer[0] if len(prefer) else other[0]]
    return out


def word_start_mask(vocab) -> np.ndarray:
    """(V,) bool: tokens that begin a new word under the leading-space convention, plus ``</s>``.

    A token begins a word when its display string starts with whitespace or with one of
    ``Ġ``, ``Ċ``, ``▁``.
    """
    mask = np.array([bool(s) and (s[0].isspace() or s[0] in _WORD_START_MARKS) for s in vocab.tokens])
    for special in (vocab.bos_id, vocab.unk_id):
        if special is not None:
            mask[special] = False
    if vocab.eos_id is not None:
        mask[vocab.eos_id] = True
    return mask


def _words_of(text: str, tokenizer, ids: list, words, boundary: str, first_byte: int) -> _WordSpans:
    raw = text.encode("utf-8")
    matches = _word_matches(text, words)
    if not matches:
        raise InputError(f"no words in {text!r:.60} (words={words!r})", text=text)
    owner = _align(text, token_byte_spans(tokenizer, text, ids), raw, matches, boundary == "trailing")
    split = [m for m in matches if m[0] < first_byte < m[1]]
    if split:
        raise WordAlignmentError(f"the word {split[0][2]!r} spans the join of context and text",
                                 word=split[0][2])
    n_context = sum(1 for m in matches if m[1] <= first_byte)
    return _WordSpans([m[2] for m in matches], owner, n_context)


def word_scores(models, texts, tokenizer=None, words="whitespace", eos: bool = True, context=None,
                sep: str = " ", word_boundary: str | None = None, stride: int | None = None):
    """Log-probability of every word of every text, exact for leading-space tokenizers.

    Parameters
    ----------
    models : LanguageModel or dict of name -> LanguageModel
    texts : str or list of str
        Checked by the text policy: a dict, bytes, a non-str item or a
        lone surrogate is an :class:`InputError`.
    tokenizer : Tokenizer, optional
        Defaults to each model's ``.tokenizer``. Its :attr:`~seqprob.Tokenizer.word_boundary`
        chooses the correction (``"leading_space"``) or the plain sum (any other value).
    words : "whitespace" or regex
        How the text splits into words: whitespace, or the matches of a regex (str or compiled).
        Every token's non-space bytes must lie inside one word, else :class:`WordAlignmentError`.
    eos : bool
        Add a ``</s>`` row: log P(``</s>`` | text), divided by P(B | text) under the correction,
        so the rows of a text sum to its joint log-probability with ``</s>``.
    context : str or list of str, optional
        Text read before each text (joined with ``sep``) and not scored.
    word_boundary : str, optional
        Overrides the tokenizer's ``word_boundary``.
    stride : int, optional
        Sliding-window stride for texts longer than the model's context (see
        :func:`seqprob.scoring.windows.window_logprobs`).

    Returns
    -------
    pandas.DataFrame
        One row per word: model, seq, word_index, word, logprob, log10prob, surprisal_bits,
        n_tokens, first_position, last_position (token positions as in :func:`score`), is_eos.

    Notes
    -----
    With B = word-initial tokens ∪ {``</s>``} (:func:`word_start_mask`) and leading-space marks,
    log P(w | c) = sum_{t=f}^{l} log P(x_t | x_<t) + log P(B | x_<=l) - log P(B | x_<f)
    (the last term 0 for the first word of the text); otherwise the plain sum.

    Examples
    --------
    >>> import seqprob as sp
    >>> truth = sp.toy_english()
    >>> df = sp.word_scores(truth, "the cat sat")
    >>> df["word"].tolist(), int(df["n_tokens"].sum())
    (['the', 'cat', 'sat', '</s>'], 4)
    """
    import pandas as pd

    models = check_models(models)
    items = [check_text(texts, "texts")] if isinstance(texts, str) else list(iter_texts(texts, "texts"))
    if not items:
        raise InputError("nothing to score: the list of texts is empty")
    contexts = _contexts(context, len(items))
    frames = []
    for name, model in models.items():
        tok = resolve_tokenizer(model, tokenizer)
        if tok is None:
            raise InputError("word_scores needs a tokenizer: pass tokenizer=... or use a model with .tokenizer")
        boundary = word_boundary or tok.word_boundary
        for seq, (item, ctx) in enumerate(zip(items, contexts)):
            frames.append(_score_text(name, model, tok, item, ctx, sep, words, eos, boundary, stride, seq))
    return pd.concat(frames, ignore_index=True)


def _contexts(context, n: int) -> list:
    """One context (None or a checked str) per text."""
    if context is None or isinstance(context, str):
        return [None if context is None else check_text(context, "context")] * n
    context = list(iter_texts(context, "context"))
    if len(context) != n:
        raise InputError(f"context has {len(context)} items for {n} texts", value=len(context), limit=n)
    return context


def _score_text(name, model, tok, text, context, sep, words, eos, boundary, stride, seq):
    import pandas as pd

    full = text if not context else context + sep + text
    first_byte = len(full.encode("utf-8")) - len(text.encode("utf-8"))
    ids = tok.encode(full)
    spans = _words_of(full, tok, ids, words, boundary, first_byte)
    enc = encode_for_model(model, full, tok, bos=True, eos=True)
    token_lp, start_lp = _token_and_start_logprobs(model, enc, boundary == "leading_space", stride)
    return pd.DataFrame(_word_rows(name, seq, spans, token_lp, start_lp, spans.n_context, eos))


def _token_and_start_logprobs(model, enc, leading: bool, stride):
    """(T,) log P(x_t | x_<t) and (T,) log P(B | x_<t) (zeros unless ``leading``), x_T = </s>."""
    rows = window_logprobs(model, enc.ids[:-1], stride=stride)  # (T, V)
    token_lp = np.empty(len(rows))
    start_lp = np.zeros(len(rows))
    mask = word_start_mask(model.vocab) if leading else None
    for i in range(0, len(rows), 1024):
        chunk = np.asarray(rows[i:i + 1024], dtype=np.float64)  # (n, V)
        token_lp[i:i + 1024] = chunk[np.arange(len(chunk)), enc.ids[1 + i:1 + i + len(chunk)]]
        if leading:
            with np.errstate(divide="ignore"):
                start_lp[i:i + 1024] = logsumexp(chunk[:, mask], axis=-1)
    token_lp[enc.impossible] = -np.inf
    if leading:
        start_lp[0] = 0.0  # at the start of the text every token starts a word
    return token_lp, start_lp


def _word_rows(name, seq, spans: _WordSpans, token_lp, start_lp, n_ctx: int, eos: bool) -> dict:
    """Columns of the word table; token t (0-based) is position t+1."""
    owner = spans.token_word  # (T-1,) real tokens
    cols = {k: [] for k in ("word_index", "word", "logprob", "n_tokens", "first_position", "last_position")}
    for w in range(n_ctx, len(spans.words)):
        where = np.flatnonzero(owner == w)
        if not len(where):
            raise WordAlignmentError(f"the word {spans.words[w]!r} got no token", word=spans.words[w])
        first, last = int(where[0]), int(where[-1])
        lp = token_lp[first:last + 1].sum() + start_lp[last + 1] - start_lp[first]
        _append(cols, w - n_ctx, spans.words[w], lp, last - first + 1, first + 1, last + 1)
    if eos:
        T = len(token_lp)
        _append(cols, len(spans.words) - n_ctx, "</s>", token_lp[-1] - start_lp[-1], 1, T, T)
    lp = np.array(cols["logprob"], dtype=np.float64)
    out = {"model": name, "seq": seq, **cols, "logprob": lp, "log10prob": lp / LN10,
           "surprisal_bits": -lp / LN2 + 0.0}
    out["is_eos"] = np.arange(len(lp)) == (len(lp) - 1 if eos else -1)
    order = ["model", "seq", "word_index", "word", "logprob", "log10prob", "surprisal_bits", "n_tokens",
             "first_position", "last_position", "is_eos"]
    return {k: out[k] for k in order}


def _append(cols: dict, index, word, lp, n, first, last) -> None:
    for key, value in zip(("word_index", "word", "logprob", "n_tokens", "first_position", "last_position"),
                          (index, word, float(lp), n, first, last)):
        cols[key].append(value)
