r"""
The chain rule, with a start token
==================================

A distribution over all sequences cannot be written down as a table (next page), but the
chain rule factors it into one conditional per token:

.. math::

   P(x_1 \ldots x_T) = P(x_1 \mid x_0)\, P(x_2 \mid x_0 x_1) \cdots P(x_T \mid x_0 \ldots x_{T-1})

with :math:`x_0` a start token (``<s>``), so that the first token is a conditional too, and
an end token ``</s>`` whose probability says "the sentence stops here". A language model is
then one function: *given the tokens so far, what comes next?*
"""
import matplotlib.pyplot as plt
import numpy as np

import seqprob as sp

plt.ion()

truth = sp.toy_english()
text = "the cat sat on the mat"
df = sp.score(truth, text)
print(df[["position", "token", "logprob", "surprisal_bits", "rank"]].to_string(index=False))

# %%
# The joint probability is the product of the conditionals
# --------------------------------------------------------
# In log space the product is a sum: the per-token ``logprob`` column adds up, exactly, to
# the sentence's log-probability.

print("sum of the per-token log-probs:", df["logprob"].sum())
print("joint log-probability:          ", sp.joint_logprob(truth, text))
assert np.isclose(df["logprob"].sum(), sp.joint_logprob(truth, text))

# %%
# Surprisal, token by token
# -------------------------
# The surprisal of a token is :math:`-\log_2 P(x_t \mid x_{<t})` bits: how unexpected it
# was. Summed, it is the sentence's information content. The same sentence under the small
# GPT that ships with seqprob (trained on samples of this language) comes close to the
# truth, token by token.

gpt = sp.default_model()
both = sp.score({"truth P*": truth, "gpt": gpt}, text, tokenizer=truth.tokenizer)
ax = sp.plots.surprisal(both)

# %%
# The running sum of log-probabilities is the log-probability of each prefix: the chain
# rule, drawn.

ax = sp.plots.cumulative_logprob(both, unit="bits")
