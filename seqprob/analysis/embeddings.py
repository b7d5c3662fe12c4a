"""Token embeddings W_E: PCA in 2-D, nearest neighbours, analogies, gender and number directions.

Works on any model with ``params["wte"]`` (the GPT's token embedding, shape ``(V, C)``).
"""
from __future__ import annotations

import numpy as np

from ..checks import check_int
from ..errors import InputError

__all__ = ["embedding_matrix", "embedding_pca", "nearest_neighbors", "analogy", "direction",
           "default_pairs", "embedding_directions", "GENDER_PAIRS", "IRREGULAR_PLURALS", "COMMON_NOUNS"]

#: (masculine, feminine) pairs looked for in a vocabulary.
GENDER_PAIRS = (("king", "queen"), ("man", "woman"), ("boy", "girl"), ("prince", "princess"),
                ("father", "mother"), ("brother", "sister"), ("son", "daughter"), ("uncle", "aunt"),
                ("husband", "wife"), ("actor", "actress"), ("he", "she"), ("him", "her"),
                ("himself", "herself"), ("his", "her"))

#: (singular, plural) pairs that do not follow the +s / +es rule.
IRREGULAR_PLURALS = (("man", "men"), ("woman", "women"), ("mouse", "mice"), ("wolf", "wolves"),
                     ("wife", "wives"), ("child", "children"), ("person", "people"), ("foot", "feet"))

#: Common nouns whose +s / +es plural is looked for (only nouns: for verbs, +s marks the
#: singular "sleeps", so a word list, not the spelling rule alone, decides).
COMMON_NOUNS = frozenset("""
cat dog bird horse fox rabbit cow duck frog bear lion owl pig sheep goat fish king queen boy girl
prince princess father mother brother sister son daughter uncle aunt husband actor actress
ball book apple cake bone hat cup letter table chair bed box house garden park tree river hill
road kitchen roof floor sofa mat car city friend teacher student doctor farmer baker child
""".split())


def embedding_matrix(model) -> np.ndarray:
    """The token embedding matrix W_E, shape (V, C), as float64."""
    params = getattr(model, "params", None)
    if not isinstance(params, dict) or "wte" not in params:
        raise InputError(f"{type(model).__name__} has no token embeddings (params['wte']): "
                         "embedding analyses need a GPT", model=type(model).__name__)
    return np.asarray(params["wte"], dtype=np.float64)  # (V, C)


def _special_ids(vocab) -> set:
    return {i for i in (vocab.bos_id, vocab.eos_id, vocab.unk_id) if i is not None}


def _ids(model, words) -> list:
    vocab = model.vocab
    out = []
    for w in words:
        if w not in vocab:
            raise InputError(f"{w!r} is not in the model's vocabulary ({len(vocab)} tokens)", token=w)
        out.append(vocab.id(w))
    return out


def embedding_pca(model, tokens=None, exclude_special: bool = True, n_components: int = 2):
    """Project token embeddings on their first principal components.

    Parameters
    ----------
    model : GPT
    tokens : list of str, optional
        Tokens to keep (default: the whole vocabulary); the PCA is fit on these rows.
    exclude_special : bool
        Leave out ``<s>``, ``</s>``, ``<unk>`` (default True).
    n_components : int

    Returns
    -------
    pandas.DataFrame
        token, token_id, pc1 .. pcK; ``attrs["explained_variance_ratio"]`` per component.

    Notes
    -----
    X = W_E[rows] - mean; X = U S Vᵀ; coordinates = X V[:, :K]; explained share = S_k² / sum S².
    Signs are fixed so the largest loading of each component is positive.
    """
    import pandas as pd

    E = embedding_matrix(model)
    vocab = model.vocab
    if tokens is None:
        ids = [i for i in range(len(vocab)) if not (exclude_special and i in _special_ids(vocab))]
    else:
        ids = _ids(model, tokens)
    if len(ids) < 2 or n_components < 1 or n_components > min(len(ids), E.shape[1]):
        raise InputError(f"PCA of {len(ids)} embeddings of size {E.shape[1]} cannot give "
                         f"n_components={n_components}", value=n_components)
    X = E[ids] - E[ids].mean(axis=0)  # (N, C)
    _, S, Vt = np.linalg.svd(X, full_matrices=False)
    signs = np.sign(Vt[np.arange(len(Vt)), np.abs(Vt).argmax(axis=1)])
    Vt = Vt * np.where(signs == 0, 1, signs)[:, None]
    coords = X @ Vt[:n_components].T  # (N, K)
    df = pd.DataFrame({"token": [vocab.tokens[i] for i in ids], "token_id": ids})
    for k in range(n_components):
        df[f"pc{k + 1}"] = coords[:, k]
    total = float((S ** 2).sum()) or 1.0
    df.attrs["explained_variance_ratio"] = [float(s * s / total) for s in S[:n_components]]
    return df


def nearest_neighbors(model, tokens, k: int = 5, metric: str = "dot", exclude_special: bool = True):
    """The k tokens whose embeddings score highest against each query token.

    Parameters
    ----------
    model : GPT
    tokens : str or list of str
    k : int
    metric : {"dot", "cosine"}
        ``dot`` = e_q · e_v (what attention and the tied unembedding compute); ``cosine``
        divides by the norms.

    Returns
    -------
    pandas.DataFrame
        query, rank (1 = nearest), neighbor, score.
    """
    import pandas as pd

    if metric not in ("dot", "cosine"):
        raise InputError(f"metric must be 'dot' or 'cosine', got {metric!r}", value=metric)
    check_int("k", k, low=1, whole_floats=True)
    queries = [tokens] if isinstance(tokens, str) else list(tokens)
    if not queries:
        raise InputError("nearest_neighbors() needs at least one query token")
    E = embedding_matrix(model)
    if metric == "cosine":
        E = E / np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
    skip = _special_ids(model.vocab) if exclude_special else set()
    rows = []
    for q, qid in zip(queries, _ids(model, queries)):
        scores = E @ E[qid]  # (V,)
        scores[[qid, *skip]] = -np.inf
        for r, j in enumerate(np.argsort(-scores, kind="stable")[: int(k)], start=1):
            if np.isfinite(scores[j]):
                rows.append({"query": q, "rank": r, "neighbor": model.vocab.tokens[j], "score": float(scores[j])})
    return pd.DataFrame(rows, columns=["query", "rank", "neighbor", "score"])


def analogy(model, a: str, b: str, c: str, k: int = 5, exclude_special: bool = True):
    """Embedding arithmetic: the tokens closest (by cosine) to e_a - e_b + e_c.

    ``analogy(model, "king", "man", "woman")`` asks "king is to man as ? is to woman":
    king - man + woman, which is queen when the embeddings learned a gender direction.

    Parameters
    ----------
    model : GPT
    a, b, c : str
        Tokens of the model's vocabulary; they are excluded from the answers.
    k : int
        Number of candidates.

    Returns
    -------
    pandas.DataFrame
        rank (1 = best), token, cosine; ``attrs["query"]`` = "a - b + c".

    Notes
    -----
    target = e_a - e_b + e_c; cosine(v) = e_v · target / (‖e_v‖ ‖target‖).

    Examples
    --------
    >>> import numpy as np, seqprob as sp
    >>> from seqprob.gpt import GPT, GPTConfig
    >>> tok = sp.WhitespaceTokenizer.fit(["king man woman queen"])
    >>> m = GPT(GPTConfig(vocab_size=len(tok.vocab), block_size=4, n_layer=1, n_head=1, n_embd=4),
    ...         tokenizer=tok)
    >>> analogy(m, "king", "man", "woman", k=1)["token"].tolist()  # the only word left
    ['queen']
    """
    import pandas as pd

    check_int("k", k, low=1, whole_floats=True)
    E = embedding_matrix(model)
    ia, ib, ic = _ids(model, [a, b, c])
    target = E[ia] - E[ib] + E[ic]  # (C,)
    norms = np.linalg.norm(E, axis=1) * max(np.linalg.norm(target), 1e-12)
    cos = (E @ target) / np.maximum(norms, 1e-12)  # (V,)
    excluded = {ia, ib, ic} | (_special_ids(model.vocab) if exclude_special else set())
    cos[list(excluded)] = -np.inf
    order = [j for j in np.argsort(-cos, kind="stable")[: int(k)] if np.isfinite(cos[j])]
    df = pd.DataFrame({"rank": np.arange(1, len(order) + 1),
                       "token": [model.vocab.tokens[j] for j in order], "cosine": cos[order]})
    df.attrs["query"] = f"{a} - {b} + {c}"
    return df


def default_pairs(vocab) -> dict:
    """Gender (masculine, feminine) and number (singular, plural) pairs present in ``vocab``.

    Number pairs: :data:`IRREGULAR_PLURALS` plus w -> w+"s" / w+"es" for the words of
    :data:`COMMON_NOUNS` (verbs are left out: their +s form is the singular).
    """
    gender = [(m, f) for m, f in GENDER_PAIRS if m in vocab and f in vocab]
    gender = [p for i, p in enumerate(gender) if p[1] not in {q[1] for q in gender[:i]}]
    number = [(s, p) for s, p in IRREGULAR_PLURALS if s in vocab and p in vocab]
    seen = {w for pair in number for w in pair}
    for w in vocab.tokens:
        if w not in COMMON_NOUNS or w in seen:
            continue
        for plural in (w + "s", w + "es"):
            if plural in vocab and plural not in seen:
                number.append((w, plural))
                seen.update((w, plural))
                break
    return {"gender": gender, "number": number}


def direction(model, pairs) -> np.ndarray:
    """Unit vector of the mean difference e_second - e_first over ``pairs``, shape (C,).

    Notes
    -----
    d = mean_i (e_{b_i} - e_{a_i}); returned as d / ‖d‖.
    """
    pairs = list(pairs)
    if not pairs:
        raise InputError("direction() needs at least one (first, second) pair of tokens")
    E = embedding_matrix(model)
    a = _ids(model, [p[0] for p in pairs])
    b = _ids(model, [p[1] for p in pairs])
    d = (E[b] - E[a]).mean(axis=0)  # (C,)
    norm = np.linalg.norm(d)
    if norm == 0:
        raise InputError("the pairs' differences cancel out: the direction is zero")
    return d / norm


def embedding_directions(model, gender_pairs=None, number_pairs=None, max_pairs: int | None = 12):
    """Project the tokens of gender and number pairs on the gender and number directions.

    Parameters
    ----------
    model : GPT
    gender_pairs : list of (masculine, feminine), optional
        Default: :data:`GENDER_PAIRS` present in the vocabulary.
    number_pairs : list of (singular, plural), optional
        Default: the (singular, plural) pairs found by :func:`default_pairs`.
    max_pairs : int or None
        Rows for at most this many pairs of each kind (the directions use all pairs).

    Returns
    -------
    pandas.DataFrame
        token, kind ("gender" or "number": the pair it came from), partner, gender, number
        (projections e_v · d on the two unit directions, in embedding units);
        ``attrs["pairs"]``, ``attrs["cosine_between_directions"]`` and
        ``attrs["pair_consistency"]`` (mean cosine of each pair's difference with its direction).

    Notes
    -----
    d_gender = unit(mean(e_fem - e_masc)), d_number = unit(mean(e_plural - e_singular)).
    """
    import pandas as pd

    found = default_pairs(model.vocab)
    gp = found["gender"] if gender_pairs is None else list(gender_pairs)
    npairs = found["number"] if number_pairs is None else list(number_pairs)
    if not gp or not npairs:
        raise InputError(f"the vocabulary needs gender and number pairs: found {len(gp)} gender "
                         f"and {len(npairs)} number pairs (pass gender_pairs= / number_pairs=)")
    E = embedding_matrix(model)
    dg, dn = direction(model, gp), direction(model, npairs)
    rows = []
    for kind, pairs in (("gender", gp), ("number", npairs)):
        for first, second in pairs[:max_pairs]:
            for tok, partner in ((first, second), (second, first)):
                e = E[model.vocab.id(tok)]
                rows.append({"token": tok, "kind": kind, "partner": partner,
                             "gender": float(e @ dg), "number": float(e @ dn)})
    df = pd.DataFrame(rows)
    df.attrs["pairs"] = {"gender": gp[:max_pairs], "number": npairs[:max_pairs]}
    df.attrs["cosine_between_directions"] = float(dg @ dn)
    df.attrs["pair_consistency"] = {k: _consistency(E, model, p, d) for k, p, d in
                                    (("gender", gp, dg), ("number", npairs, dn))}
    return df


def _consistency(E, model, pairs, d) -> float:
    diffs = np.stack([E[model.vocab.id(b)] - E[model.vocab.id(a)] for a, b in pairs])  # (P, C)
    norms = np.maximum(np.linalg.norm(diffs, axis=1), 1e-12)
    return float(((diffs @ d) / norms).mean())
