"""The corpus of the n-gram benchmarks: seeded synthetic Zipf-Markov text.

20,000 word types, Zipf(1.1) unigrams; each next word comes with probability 0.6 from its
predecessor's 64 favourite successors, Zipf(1.2) over them, else from the unigram
distribution; sentence lengths geometric with mean 20. It has the long-tailed n-gram
statistics of real text and needs no download.
"""
from __future__ import annotations

import numpy as np


def make_corpus(n_tokens: int, vocab: int = 20_000, seed: int = 0) -> list:
    """Seeded Zipf-Markov sentences with about ``n_tokens`` words."""
    rng = np.random.default_rng(seed)
    uni = 1.0 / np.arange(1, vocab + 1) ** 1.1
    uni /= uni.sum()
    succ = rng.choice(vocab, size=(vocab, 64), p=uni)
    sp = 1.0 / np.arange(1, 65) ** 1.2
    sp /= sp.sum()
    lengths = np.maximum(1, rng.geometric(1 / 20, size=n_tokens // 10))
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), n_tokens) + 1]
    toks = np.zeros((len(lengths), lengths.max()), dtype=np.int64)
    toks[:, 0] = rng.choice(vocab, size=len(lengths), p=uni)
    for t in range(1, toks.shape[1]):
        markov = rng.random(len(lengths)) < 0.6
        nxt = succ[toks[:, t - 1], rng.choice(64, size=len(lengths), p=sp)]
        toks[:, t] = np.where(markov, nxt, rng.choice(vocab, size=len(lengths), p=uni))
    words = np.array([f"w{i}" for i in range(vocab)])
    return [" ".join(words[toks[i, :n]]) for i, n in enumerate(lengths)]
