r"""
Softmax and temperature
=======================

A transformer does not output probabilities directly: for the next position it outputs one
real number per vocabulary entry, the *logits* :math:`u`. Softmax turns them into a
distribution,

.. math::

   P(x_t = v \mid x_{<t}) = \frac{e^{u_v / T}}{\sum_w e^{u_w / T}},

where the temperature :math:`T` (1 for the model's own distribution) reshapes it before
sampling: :math:`T \to 0` keeps only the most likely token (argmax), :math:`T > 1` flattens the
distribution towards uniform.
"""
import matplotlib.pyplot as plt
import numpy as np

import seqprob as sp
from seqprob.sampling import next_token_probs

plt.ion()

gpt = sp.default_model()
tok = gpt.tokenizer
prefix = "the cat sat on the"
ids = [gpt.vocab.bos_id] + tok.encode(prefix)  # x_0 = <s>, then the prefix
logprobs = gpt.start(ids).logprobs  # (V,) log P(next | prefix), already log-softmaxed
top = np.argsort(-logprobs)[:5]
for v in top:
    print(f"{gpt.vocab.token(v)!r:10} P = {np.exp(logprobs[v]):.4f}")

# %%
# Softmax is invariant to adding a constant to every logit, so the model's log-probabilities
# are themselves logits of the same distribution. Dividing by :math:`T` changes it:

for T in (0.01, 0.5, 1.0, 2.0, 10.0):
    p = next_token_probs(logprobs, temperature=T)
    H = -np.sum(p[p > 0] * np.log2(p[p > 0]))
    print(f"T = {T:5}: P(top token) = {p[top[0]]:.4f}, entropy = {H:.3f} bits")

# %%
# The next-token bars at three temperatures: the same ranking, a sharper or flatter
# distribution.

ax = sp.plots.next_token(logprobs, tokens=gpt.vocab, temperatures=(0.5, 1.0, 2.0), k=8)

# %%
# Sampling at a temperature
# -------------------------
# :func:`seqprob.sample` draws each token from the tempered distribution, one step of the
# chain rule at a time. Low temperatures repeat the likeliest continuation; high ones wander.

for T in (0.1, 1.0, 3.0):
    print(f"T = {T}:", sp.sample(gpt, prompt="the cat", temperature=T, seed=0, max_new_tokens=12))
