"""Looking inside a transformer: attention patterns and the logit lens.

Both read :meth:`GPT.run_with_cache` (logits, attention patterns ``(n_layer, n_head, T, T)``,
residual stream ``(n_layer + 1, T, C)``); any model with ``run_with_cache`` and ``unembed``
works. Models without them (n-grams, the grammar) raise :class:`~seqprob.errors.InputError`.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..functional import log_softmax
from ..protocols import Inspectable

__all__ = ["attention_patterns", "logit_lens"]


def _require(model, methods, what: str) -> None:
    """``model`` must be :class:`~seqprob.protocols.Inspectable` (or, for the attention maps,
    have ``run_with_cache``)."""
    inspectable = isinstance(model, Inspectable) or methods == ["run_with_cache"]
    missing = [m for m in methods if not callable(getattr(model, m, None))]
    if missing or not inspectable:
        raise InputError(f"{what} needs a transformer with {' and '.join(m + '()' for m in methods)}; "
                         f"{type(model).__name__} has no attention or residual stream "
                         f"(missing {', '.join(missing)})", model=type(model).__name__)


def _encode(model, text_or_ids, tokenizer, eos: bool):
    """ids x_0..x_T (BOS first) and the display strings of x_0..x_T."""
    from ..scoring import encode_for_model

    enc = encode_for_model(model, text_or_ids, tokenizer=tokenizer, bos=True, eos=eos)
    bos = model.vocab.tokens[int(enc.ids[0])]
    return enc.ids, [bos, *enc.tokens]


def attention_patterns(model, text_or_ids, tokenizer=None, eos: bool = False):
    """Attention patterns of every layer and head on one text.

    Parameters
    ----------
    model : GPT (anything with ``run_with_cache``)
    text_or_ids : str or sequence of int
        The text (tokenized by ``tokenizer`` or ``model.tokenizer``) or ids without BOS.
    eos : bool
        Append ``</s>`` to the input.

    Returns
    -------
    attn : ndarray, shape (n_layer, n_head, T, T)
        attn[l, h, i, j] = how much position i reads from position j (rows sum to 1, j <= i).
    tokens : list of str
        The T input tokens, ``<s>`` first.

    Notes
    -----
    A_h = softmax(q_i · k_j / sqrt(d_head) + causal mask); x_0 = ``<s>`` is position 0.
    """
    _require(model, ["run_with_cache"], "attention_patterns()")
    ids, tokens = _encode(model, text_or_ids, tokenizer, eos)
    cache = model.run_with_cache(ids)
    attn = np.asarray(cache.attn, dtype=np.float64)  # (L, H, T, T)
    return attn, tokens


def logit_lens(model, text_or_ids, tokenizer=None, eos: bool = True):
    """The logit lens: read the residual stream after every block through the unembedding.

    Parameters
    ----------
    model : GPT (anything with ``run_with_cache`` and ``unembed``)
    text_or_ids : str or sequence of int
    tokenizer : Tokenizer, optional
    eos : bool
        Also predict ``</s>`` after the last token.

    Returns
    -------
    pandas.DataFrame
        One row per (layer, position): ``layer`` (0 = the embeddings, l = after block l, the
        last one is the model's output), ``layer_name``, ``position`` t (of the predicted
        token), ``context`` (x_{t-1}), ``token`` (x_t), ``logprob`` (nats), ``prob``, ``rank``
        (1 = the lens's top guess), ``top_token`` (the lens's top guess).

    Notes
    -----
    p_l(v | x_<t) = softmax(ln_f(r_l[t-1]) W_Uᵀ)_v with r_l the residual stream after block l;
    at l = n_layer this is exactly the model's P(x_t | x_<t).

    Examples
    --------
    >>> from seqprob.gpt import GPT, GPTConfig
    >>> m = GPT(GPTConfig(vocab_size=9, block_size=8, n_layer=2, n_head=2, n_embd=8), bos_id=0, eos_id=1)
    >>> logit_lens(m, [3, 4]).groupby("layer").size().tolist()  # 3 predictions: 3, 4, </s>
    [3, 3, 3]
    """
    import pandas as pd

    _require(model, ["run_with_cache", "unembed"], "logit_lens()")
    ids, tokens = _encode(model, text_or_ids, tokenizer, eos)
    cache = model.run_with_cache(ids[:-1])
    resid = np.asarray(cache.resid)  # (L+1, T, C)
    lp = log_softmax(np.asarray(model.unembed(resid), dtype=np.float64))  # (L+1, T, V)
    target = ids[1:]  # (T,)
    T, n_layers = len(target), resid.shape[0]
    got = np.take_along_axis(lp, np.broadcast_to(target[None, :, None], (n_layers, T, 1)), -1)[..., 0]
    rank = 1 + (lp > got[..., None]).sum(axis=-1)  # (L+1, T)
    top = lp.argmax(axis=-1)  # (L+1, T)
    names = ["embeddings"] + [f"block {i}" for i in range(1, n_layers)]
    layer = np.repeat(np.arange(n_layers), T)
    vocab = model.vocab.tokens
    return pd.DataFrame({
        "layer": layer, "layer_name": [names[i] for i in layer],
        "position": np.tile(np.arange(1, T + 1), n_layers),
        "context": tokens[:-1] * n_layers, "token": tokens[1:] * n_layers,
        "logprob": got.ravel(), "prob": np.exp(got.ravel()), "rank": rank.ravel(),
        "top_token": [vocab[i] for i in top.ravel()]})
