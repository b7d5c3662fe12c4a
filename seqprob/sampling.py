"""Sampling from any LanguageModel through its incremental ``start`` / ``step`` interface."""
from __future__ import annotations

import numpy as np

from ._io import check_text
from .checks import check_int, check_real, check_seed
from .errors import InputError
from .functional import softmax
from .protocols import model_tokenizer
from .vocab import check_ids

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
    row = np.asarray(logprobs)
    p = softmax(row.astype(np.float64) if row.dtype.kind in "iuf" else row, temperature=temperature)  # (V,)
    if top_k is not None:
        k = check_int("top_k", top_k, low=1)
        if k < p.size:
            kth = np.partition(p, -k)[-k]
            p = np.where(p >= kth, p, 0.0)
    if top_p is not None:
        check_real("top_p", top_p, low=0, high=1, low_open=True)
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
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, low=0)
    rng = check_seed(seed)
    vocab = model.vocab
    state = model.start(check_ids(prefix_ids, len(vocab), name="prefix_ids"))
    out: list[int] = []
    for _ in range(max_new_tokens):
        row = np.array(state.logprobs, dtype=np.float64)  # (V,)
        vocab.mask_never_predicted(row, -np.inf)
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
    tok = model_tokenizer(model, tokenizer)
    if tok is None:
        raise InputError("sample() needs a tokenizer: pass tokenizer=... (or use generate() with ids)")
    if model.vocab.bos_id is None:
        raise InputError("sample() needs a model whose vocabulary has a BOS token")
    if not model.vocab.same_ids(tok.vocab):  # its ids would be read as other tokens
        raise InputError(f"the tokenizer's vocabulary ({len(tok.vocab)} tokens) is not the model's "
                         f"({len(model.vocab)}): sampling needs the model's own tokenizer",
                         value=len(tok.vocab), limit=len(model.vocab))
    prompt = check_text(prompt, "prompt")
    prompt_ids = tok.encode(prompt) if prompt else []
    prefix = [model.vocab.bos_id] + list(prompt_ids)
    # sample i uses the i-th child of SeedSequence(seed) (the seed is checked by check_seed)
    seeds = [seed] if n is None else check_seed(seed).bit_generator.seed_seq.spawn(check_int("n", n, low=0))
    texts = [tok.decode(list(prompt_ids) + generate(model, prefix, max_new_tokens, temperature,
                                                    top_k, top_p, s, stop_at_eos)) for s in seeds]
    return texts[0] if n is None else texts
