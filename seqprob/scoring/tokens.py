"""Token scores: one row per scored token (:func:`score`), their sums per sequence or corpus
(:func:`summarize`) and the joint log-probability of one sequence (:func:`joint_logprob`).

The sum of a sequence's ``logprob`` column is its joint log-probability (kenlm's
``full_scores`` convention): log P(x_1 .. x_T [</s>] | x_0) = sum_t log P(x_t | x_<t).
"""
from __future__ import annotations

import numpy as np

from .._io import warn_if_file_name
from ..errors import InputError
from ..functional import LN2, LN10
from ..vocab import Vocab
from .core import (as_items, check_models, drop_context, encode_for_model, encode_with_context,
                   score_batched, x0_id)
from .windows import score_windowed

__all__ = ["score", "summarize", "joint_logprob"]


def score(models, texts_or_ids, tokenizer=None, bos: bool = True, eos: bool = True,
          distribution: bool = True, context=None, sep: str = " ", stride: int | None = None,
          bos_per_window: bool = False):
    """Score every token of every sequence under every model.

    Parameters
    ----------
    models : LanguageModel or dict of name -> LanguageModel
    texts_or_ids : str, list of str, or list of id sequences (in the model's vocabulary,
        without BOS/EOS)
    tokenizer : Tokenizer, optional
        Turns texts into tokens; defaults to each model's own ``.tokenizer``. When the
        model's vocabulary differs, tokens are matched by their strings (unknown -> ``<unk>``,
        or probability 0 when the model has no ``<unk>``).
    bos : bool or str
        Prepend x_0 so the first real token gets P(x_1 | x_0): True uses the model's own start
        token (its BOS, else its EOS: :func:`seqprob.scoring.core.start_id`), a string names the
        token to start from (e.g. ``"<|endoftext|>"``). With ``bos=False`` the first token is
        only context and is not scored. ``df.attrs["x0"]`` records the token per model.
    eos : bool
        Also score P(``</s>`` | sentence) (KenLM's convention: a distribution over sentences).
    distribution : bool
        Also compute ``entropy_bits`` and ``rank``. They need each position's whole next-token
        distribution: a GPT streams the vocabulary (:meth:`seqprob.GPT.token_stats`, in
        ``model.score_budget_bytes`` whatever V, never the (T, V) rows); other models hand over
        their rows in blocks. False skips that work.
    context : str or list of str, optional
        Text read before each text (joined by ``sep``) but not scored: ``context + sep + text`` is
        tokenized as a whole, the context's tokens get no row, and a token straddling the join
        is kept and marked in the extra column ``spans_join`` (see :mod:`seqprob.scoring.conditional`).
    stride, bos_per_window
        Sliding windows for sequences longer than the model's context
        (:mod:`seqprob.scoring.windows`): each window adds ``stride`` scored rows; with
        ``bos_per_window`` every window starts with ``<s>``.

    Returns
    -------
    pandas.DataFrame
        One row per scored token per model: model, seq, position, token, token_id, logprob,
        log10prob, surprisal_bits, [entropy_bits, rank,] is_oov, is_eos. ``position`` t is the
        index of x_t (1 = first real token). ``df.attrs["texts"]`` keeps the texts.

    Notes
    -----
    logprob_t = log P(x_t | x_0 .. x_{t-1}) in nats; surprisal_bits = -logprob / ln 2;
    entropy_bits = -sum_v P(v | x_<t) log2 P(v | x_<t); rank = 1 + #{v : P(v) > P(x_t)}.
    The sum of a sequence's ``logprob`` column is its joint log-probability.

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["the cat sat"])
    >>> df = sp.score({"uniform": sp.UniformModel(tok.vocab)}, ["the cat"], tokenizer=tok)
    >>> df["token"].tolist()
    ['the', 'cat', '</s>']
    """
    import pandas as pd

    models, items = check_models(models), as_items(texts_or_ids)
    frames = []
    for name, model in models.items():
        if context is not None:
            frames.append(_score_in_context(name, model, items, context, sep, tokenizer, bos, eos,
                                            distribution, stride, bos_per_window))
            continue
        encoded = [encode_for_model(model, item, tokenizer, bos, eos, f"texts_or_ids[{i}]")
                   for i, item in enumerate(items)]
        results = score_windowed(model, encoded, distribution, stride, bos_per_window)
        frames.append(_frame(name, encoded, results, bos, model.vocab))
    df = pd.concat(frames, ignore_index=True)
    df.attrs["texts"] = [item if isinstance(item, str) else None for item in items]
    df.attrs["bos"], df.attrs["eos"] = bos, eos
    # which token each model's x_0 was (its BOS, or its EOS where it has no BOS)
    df.attrs["x0"] = {name: model.vocab.tokens[x0_id(model.vocab, bos)] if bos else None
                      for name, model in models.items()}
    return df


def _score_in_context(name, model, items, context, sep, tokenizer, bos, eos, distribution, stride,
                      bos_per_window):
    """One model's frame of continuation rows (see :mod:`seqprob.scoring.conditional`)."""
    contexts = [context] * len(items) if isinstance(context, str) else list(context)
    if len(contexts) != len(items):
        raise InputError(f"context has {len(contexts)} items for {len(items)} texts",
                         value=len(contexts), limit=len(items))
    parts = [encode_with_context(model, item, ctx, sep, tokenizer, bos, eos, stride)
             for item, ctx in zip(items, contexts)]
    encoded = [p[0] for p in parts]
    results = score_windowed(model, encoded, distribution, stride, bos_per_window)
    frame = _frame(name, encoded, results, bos, model.vocab)
    return drop_context(frame, [p[1] for p in parts], [p[2] for p in parts], bos)


def _frame(name: str, encoded: list, results: list, bos: bool, vocab: Vocab):
    import pandas as pd

    cols: dict = {k: [] for k in ("seq", "position", "token", "token_id", "is_oov", "is_eos")}
    for seq, (enc, res) in enumerate(zip(encoded, results)):
        n = len(enc.tokens)
        cols["seq"].append(np.full(n, seq))
        cols["position"].append(np.arange(1, n + 1) + (0 if bos else 1))
        cols["token"].extend(enc.tokens)
        cols["token_id"].append(enc.ids[1:])
        cols["is_oov"].append(enc.oov)
        cols["is_eos"].append(enc.ids[1:] == (-1 if vocab.eos_id is None else vocab.eos_id))
    data = {"model": name}
    data.update({k: (v if k == "token" else np.concatenate(v)) for k, v in cols.items()})
    lp = np.concatenate([r["logprob"] for r in results])
    data.update(logprob=lp, log10prob=lp / LN10, surprisal_bits=-lp / LN2 + 0.0)
    if "entropy_bits" in results[0]:
        data["entropy_bits"] = np.concatenate([r["entropy_bits"] for r in results])
        data["rank"] = np.concatenate([r["rank"] for r in results])
    df = pd.DataFrame(data)
    order = ["model", "seq", "position", "token", "token_id", "logprob", "log10prob",
             "surprisal_bits", "entropy_bits", "rank", "is_oov", "is_eos"]
    return df[[c for c in order if c in df.columns]]


def summarize(df, by: str = "seq"):
    """Sequence-level (``by="seq"``) or corpus-level (``by="model"``) figures from :func:`score`.

    Returns
    -------
    pandas.DataFrame
        Per model (and sequence): n_tokens, n_oov, logprob (nats), log10prob, perplexity,
        bits_per_token, bits_per_char, bits_per_byte (NaN when the text is unknown).

    Notes
    -----
    perplexity = exp(-sum logprob / n_tokens): token-weighted over the whole group, never a
    mean of per-sentence perplexities. bits_per_char = -sum logprob / (ln 2 · characters).

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> df = sp.score({"u": sp.UniformModel(tok.vocab)}, ["a b", "b"], tokenizer=tok)
    >>> sp.summarize(df, by="model")[["n_tokens", "perplexity"]].round(6).values.tolist()
    [[5.0, 4.0]]
    """
    import pandas as pd

    if df is None or len(df) == 0:
        raise InputError("summarize() got an empty DataFrame: score something first")
    missing = {"model", "seq", "logprob", "is_oov"} - set(getattr(df, "columns", ()))
    if not isinstance(df, pd.DataFrame) or missing:
        raise InputError(f"summarize() needs the DataFrame of score(), got {type(df).__name__} "
                         f"without columns {sorted(missing)}", missing=sorted(missing))
    if by not in ("seq", "model"):
        raise InputError(f"by must be 'seq' or 'model', got {by!r}", value=by)
    lp = df["logprob"].to_numpy(dtype=float)
    bad = np.isnan(lp) | np.isposinf(lp)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"summarize() got log-probability {lp[row]} in row {row}: a log-probability "
                         "must be a number (-inf for probability 0)", value=float(lp[row]), row=row)
    texts = df.attrs.get("texts") or []
    chars = pd.Series([np.nan if t is None else len(t) for t in texts], dtype=float)
    nbytes = pd.Series([np.nan if t is None else len(t.encode("utf-8")) for t in texts], dtype=float)
    keys = ["model", "seq"] if by == "seq" else ["model"]
    g = df.groupby(keys, sort=False)
    out = g.agg(n_tokens=("logprob", "size"), n_oov=("is_oov", "sum"), logprob=("logprob", "sum"))
    if by == "seq":
        seqs = out.index.get_level_values("seq")
        out["n_chars"] = chars.reindex(seqs).to_numpy()
        out["n_bytes"] = nbytes.reindex(seqs).to_numpy()
        out["text"] = [texts[s] if s < len(texts) else None for s in seqs]
    else:
        per_model = df.drop_duplicates(["model", "seq"]).groupby("model", sort=False)["seq"]
        out["n_chars"] = per_model.apply(lambda s: chars.reindex(s).sum(min_count=len(s)))
        out["n_bytes"] = per_model.apply(lambda s: nbytes.reindex(s).sum(min_count=len(s)))
    nll_bits = -out["logprob"] / LN2
    out["log10prob"] = out["logprob"] / LN10
    with np.errstate(over="ignore"):
        out["perplexity"] = np.exp(-out["logprob"] / out["n_tokens"])
    out["bits_per_token"] = nll_bits / out["n_tokens"]
    out["bits_per_char"] = nll_bits / out["n_chars"]
    out["bits_per_byte"] = nll_bits / out["n_bytes"]
    return out.reset_index()


def joint_logprob(model, text_or_ids, tokenizer=None, bos: bool = True, eos: bool = True) -> float:
    """log P(x_1 .. x_T [</s>] | x_0) of one sequence, in nats: the chain-rule sum.

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> round(joint_logprob(sp.UniformModel(tok.vocab), "a b", tokenizer=tok), 4)  # 3 tokens, V'=4
    -4.1589
    """
    if isinstance(text_or_ids, str):
        warn_if_file_name(text_or_ids, "text_or_ids")
    enc = encode_for_model(model, text_or_ids, tokenizer, bos, eos)
    return float(score_batched(model, [enc], with_distribution=False)[0]["logprob"].sum())
