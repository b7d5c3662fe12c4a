"""Sampling from any LanguageModel through its incremental ``start`` / ``step`` interface."""
from __future__ import annotations

import math

import numpy as np

from .errors import InputError
from .functional import softmax

__all__ = ["next_token_probs", "generate", "sample"]


def next_token_probs(logprobs, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> np.ndarray:
    """The distribution a sampler draws from: softmax(u / T), then top-k, then top-p.

    Parameters
    ----------
    logprobs : array_like, shape (V,)
        Log-probabilities (or logits) of the next token.
    temperature : float
        T > 0; T -> 0 is the exact argmax, T = inf uniform over the possible tokens.
    top_k : int, optional
        Keep the k most likely tokens (ties at the k-th value are kept).
    top_p : float, optional
        Nucleus: keep the smallest set of most likely tokens whose mass reaches p, 0 < p <= 1.

    Notes
    -----
    p_v ∝ exp(u_v / T) on the kept set, renormalized to sum to 1.

    Examples
    --------
    >>> next_token_probs(np.log([0.5, 0.3, 0.2]), top_k=2).round(3).tolist()
    [0.625, 0.375, 0.0]
    """
    p = softmax(np.asarray(logprobs, dtype=np.float64), temperature=temperature)  # (V,)
    if top_k is not None:
        if int(top_k) != top_k or top_k < 1:
            raise InputError(f"top_k must be an integer >= 1, got {top_k!r}", value=top_k, limit=1)
        if top_k < p.size:
            kth = np.partition(p, -int(top_k))[-int(top_k)]
            p = np.where(p >= kth, p, 0.0)
    if top_p is not None:
        if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
            raise InputError(f"top_p must be in (0, 1], got {top_p!r}", value=top_p, limit=1.0)
        order = np.argsort(-p, kind="stable")
        cum = np.cumsum(p[order]) / p.sum()
        keep = np.searchsorted(cum, top_p - 1e-12) + 1  # smallest prefix reaching top_p
        p = np.where(np.isin(np.arange(p.size), order[:keep]), p, 0.0)
    return p / p.sum()


def generate(model, prefix_ids, max_new_tokens: int = 50, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, seed=None,
             stop_at_eos: bool = True) -> list[int]:
    """Draw up to ``max_new_tokens`` ids after ``prefix_ids`` (x_0 .. x_t, BOS included).

    Uses ``model.start`` / ``model.step`` (a KV cache for the GPT), a seeded
    ``numpy.random.Generator`` (same seed, same tokens), and never emits ``<s>``. Stops after
    ``</s>`` when ``stop_at_eos`` (the ``</s>`` is not returned).
    """
    if int(max_new_tokens) != max_new_tokens or max_new_tokens < 0:
        raise InputError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}",
                         value=max_new_tokens, limit=0)
    rng = np.random.default_rng(seed)
    vocab = model.vocab
    state = model.start(np.asarray(prefix_ids, dtype=np.int64))
    out: list[int] = []
    for _ in range(int(max_new_tokens)):
        row = np.array(state.logprobs, dtype=np.float64)  # (V,)
        if vocab.bos_id is not None and vocab.bos_id != vocab.eos_id:
            row[vocab.bos_id] = -np.inf
        p = next_token_probs(row, temperature, top_k, top_p)
        token = int(rng.choice(p.size, p=p))
        if stop_at_eos and token == vocab.eos_id:
            break
        out.append(token)
        if len(out) < max_new_tokens:
            state = model.step(state, token)
    return out


def sample(model, prompt: str = "", tokenizer=None, max_new_tokens: int = 50,
           temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
           seed=None, stop_at_eos: bool = True, n: int | None = None):
    """Continue ``prompt`` with text drawn from ``model``.

    Parameters
    ----------
    model : LanguageModel
    prompt : str
        Text to continue ("" starts a sentence from ``<s>``).
    tokenizer : Tokenizer, optional
        Defaults to ``model.tokenizer``.
    max_new_tokens, temperature, top_k, top_p, seed, stop_at_eos
        See :func:`generate`.
    n : int, optional
        Number of samples; ``None`` returns one string, an int returns a list (sample i uses
        the i-th child of ``seed``).

    Returns
    -------
    str or list of str
        The prompt (as the tokenizer sees it) followed by the sampled continuation.

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> s = sample(sp.UniformModel(tok.vocab), "a", tokenizer=tok, seed=0, max_new_tokens=3)
    >>> s == sample(sp.UniformModel(tok.vocab), "a", tokenizer=tok, seed=0, max_new_tokens=3)
    True
    """
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tok is None:
        raise InputError("sample() needs a tokenizer: pass tokenizer=... (or use generate() with ids)")
    if model.vocab.bos_id is None:
        raise InputError("sample() needs a model whose vocabulary has a BOS token")
    prompt_ids = tok.encode(prompt) if prompt else []
    prefix = [model.vocab.bos_id] + list(prompt_ids)
    seeds = [seed] if n is None else np.random.SeedSequence(seed).spawn(int(n))
    texts = [tok.decode(list(prompt_ids) + generate(model, prefix, max_new_tokens, temperature,
                                                    top_k, top_p, s, stop_at_eos)) for s in seeds]
    return texts[0] if n is None else texts
