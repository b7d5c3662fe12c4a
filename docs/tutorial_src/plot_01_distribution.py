r"""
A language model is a probability distribution over sequences
=============================================================

A language model assigns every sequence of tokens a probability, and those probabilities sum
to one over all sequences. seqprob ships a small language whose distribution :math:`P^*` is
known exactly, ``sp.toy_english()``: a probabilistic grammar over 210 words. Sampling from it
gives sentences; scoring a sentence gives its exact probability.
"""
import matplotlib.pyplot as plt
import numpy as np

import seqprob as sp

plt.ion()  # figures show as they are drawn, as in a notebook

truth = sp.toy_english()
for sentence in truth.sample(5, seed=0):
    print(sentence)

# %%
# Every sentence has a probability
# --------------------------------
# :func:`seqprob.joint_logprob` gives :math:`\log P(x_1 \ldots x_T)` in nats (natural log).
# Probabilities of whole sentences are tiny, so seqprob keeps them as log-probabilities.
# A sentence the language cannot produce has probability 0, log-probability ``-inf``.

for text in ["the cat sat on the mat", "the cats laughed", "mat the on sat cat the"]:
    lp = sp.joint_logprob(truth, text)
    print(f"{text!r:32}  log P = {lp:9.3f} nats   P = {np.exp(lp):.3e}")

# %%
# The probabilities sum to one
# ----------------------------
# Sampling many sentences and counting shows the distribution: the most frequent sentences
# are the most probable ones, and their observed frequencies approach :math:`P^*`.

samples = truth.sample(20_000, seed=1)
values, counts = np.unique(samples, return_counts=True)
top = np.argsort(-counts)[:8]
exact = np.exp([sp.joint_logprob(truth, values[i]) for i in top])
fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
ax.barh(range(len(top))[::-1], counts[top] / len(samples), label="observed frequency")
ax.scatter(exact, range(len(top))[::-1], color="k", zorder=3, label="exact P*")
ax.set_yticks(range(len(top))[::-1], [values[i] for i in top])
ax.set_xlabel("probability of the whole sentence")
ax.legend()

# %%
# The sentences are too many to list (clauses nest inside clauses), so the sum cannot be
# checked by adding them up: the 20,000 samples hold far fewer distinct sentences, and those
# carry only part of the mass; the rest is spread thinly over sentences never drawn.

seen_mass = np.exp([sp.joint_logprob(truth, s) for s in values]).sum()
print(f"{len(values):,} distinct sentences among {len(samples):,} samples; "
      f"their total probability: {seen_mass:.3f}")

# %%
# What can be checked is each step: given any prefix, the probabilities of the next token,
# ``</s>`` included, sum to one. ``model.start(ids).logprobs`` is that next-token
# distribution, for the truth as for every seqprob model. Since every conditional sums to
# one and a sentence ends with ``</s>`` with probability one (its expected length is finite,
# printed below), the sentences' probabilities sum to one (the next page turns this into the
# chain rule).

for prefix in ["", "the cat", "the cat sat on the"]:
    ids = [truth.vocab.bos_id] + truth.tokenizer.encode(prefix)  # x_0 = <s>, then the prefix
    p_next = np.exp(truth.start(ids).logprobs)  # (V,) P*(next token | prefix)
    print(f"prefix {prefix!r:22} sum over the next token: {p_next.sum():.12f}")
    assert np.isclose(p_next.sum(), 1.0)

# %%
# The entropy of the language, :math:`H = -\sum_x P^*(x) \log P^*(x)` nats per sentence,
# divided by the expected number of tokens per sentence (``</s>`` included), is how many nats
# a perfect model needs per token on average. No model can do better on text from
# :math:`P^*`; later pages measure how close each model comes.

H = truth.entropy()
print(f"H(P*) = {H.per_sentence:.3f} nats per sentence / {H.expected_tokens:.3f} tokens "
      f"= {H.per_token:.4f} nats per token = {H.per_token / np.log(2):.4f} bits per token "
      f"(exact: {H.exact})")
