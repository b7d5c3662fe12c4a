"""
The transformer f_θ, and where its parameters are
=================================================

The network computes the logits of the next token from the tokens so far,
:math:`u_t = f_\\theta(x_0 \\ldots x_{t-1})`, in four stages:

1. **embedding**: each token id becomes a vector of :math:`d` numbers, a row of
   :math:`W_E` (:math:`V \\times d`), plus a position vector;
2. **attention** (in every layer, several heads): each position mixes in information from
   earlier positions, weighted by how well its *query* matches their *keys*;
3. **MLP** (in every layer): each position's vector goes through a wider layer and back;
4. **unembedding**: the last vector times :math:`W_U` (:math:`d \\times V`) gives the logits,
   softmax gives :math:`P_\\theta(x_t \\mid x_{<t})`.

seqprob's GPT is this, in numpy. The model that ships with seqprob is tiny: 2 layers, 4 heads,
:math:`d = 64`.
"""
import matplotlib.pyplot as plt
import numpy as np

import seqprob as sp
from seqprob.gpt import GPTConfig

plt.ion()

gpt = sp.default_model()
print(gpt.config)
ids = [gpt.vocab.bos_id] + gpt.tokenizer.encode("the cat sat on the mat")
cache = gpt.run_with_cache(ids)
print("residual stream after each layer (layers + 1, T, d):", cache.resid.shape)
print("attention probabilities (layers, heads, T, T):     ", cache.attn.shape)
print("logits (T, V):                                     ", cache.logits.shape)

# %%
# Attention: who looks at whom
# ----------------------------
# Each row of an attention pattern is a distribution over the earlier positions (the mask
# keeps the future out: the model may only condition on :math:`x_{<t}`, as the chain rule
# says).

fig = sp.plots.attention(gpt, text="the cat sat on the mat", tokenizer=gpt.tokenizer, layers=[0])

# %%
# Counting parameters by matrix category
# --------------------------------------
# :meth:`seqprob.GPTConfig.param_counts` counts the weights of a configuration from its
# shapes, without allocating them. For the shipped model:

print(gpt.config.param_counts().to_string(index=False))

# %%
# GPT-3, counted two ways
# -----------------------
# GPT-3 (175B) has :math:`d = 12288`, 96 layers of 96 heads of width 128, a vocabulary of
# 50,257, a context of 2,048 and an MLP 4x as wide. seqprob's preset counts it as a GPT-2-style
# model is stored: W_E tied to W_U (counted once), learned positions, biases and norms included.

gpt3 = GPTConfig.preset("gpt3")
ours = gpt3.param_counts()
print(ours.to_string(index=False))

# %%
# The count in the 3Blue1Brown chapter on transformers organizes the same weights per head:
# each of the 96 heads of each of the 96 layers has its own query, key and value matrices
# (:math:`d \times 128` each), each layer has one output matrix and the MLP's two, and the
# embedding and unembedding are counted apart (untied); biases, norms and positions are left
# out. That gives the ~28,000 matrices and 175,181,291,520 weights it names.

d, L, H, V = gpt3.n_embd, gpt3.n_layer, gpt3.n_head, gpt3.vocab_size
d_head, d_mlp = d // H, 4 * d  # each head works in a 128-wide slice; the MLP is 4x as wide
# the preset is the published GPT-3 175B configuration
assert (d, L, H, d_head, V, gpt3.block_size) == (12288, 96, 96, 128, 50257, 2048)
per_head = {"query": d * d_head, "key": d * d_head, "value": d * d_head}
per_layer = {"attention output": d * d, "MLP up": d * d_mlp, "MLP down": d_mlp * d}
rows = [("embedding W_E", 1, V * d)]
rows += [(f"{name} (per head)", L * H, n) for name, n in per_head.items()]
rows += [(name, L, n) for name, n in per_layer.items()]
rows += [("unembedding W_U", 1, d * V)]
n_matrices = sum(count for _, count, _ in rows)
n_weights = sum(count * size for _, count, size in rows)
for name, count, size in rows:
    print(f"{name:24} {count:6,} matrices x {size:13,} = {count * size:17,}")
print(f"{'total':24} {n_matrices:6,} matrices       {'':13}   {n_weights:17,}")
assert n_matrices == 27_938
assert n_weights == 175_181_291_520

# %%
# The two conventions differ by what they count, not by the network: the per-head query, key
# and value matrices are the columns of seqprob's :math:`W_Q, W_K, W_V` (96 heads x 128 =
# 12,288), and the untied :math:`W_U` adds one more :math:`V \times d` matrix where seqprob's
# preset ties it to :math:`W_E`.

tied = ours.set_index("category")["params"]
no_bias_no_pos = (tied["embedding W_E"] + 4 * L * d * d + 2 * L * d * d_mlp)
print(f"seqprob preset (tied, biases, norms, positions): {int(tied['total']):,}")
print(f"without biases, norms, positions:                {no_bias_no_pos:,}")
print(f"... plus an untied W_U:                          {no_bias_no_pos + V * d:,}")
assert no_bias_no_pos + V * d == n_weights

# %%
# Where the weights are, as a share of the whole: two thirds in the MLPs, one third in
# attention, well under one percent in the embedding.

shares = ours[ours["category"] != "total"].set_index("category")["params"]
fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
bars = ax.barh(shares.index[::-1], shares.values[::-1] / shares.sum() * 100)
ax.bar_label(bars, fmt="%.2f%%", padding=2)  # W_U is 0: the preset ties it to W_E
ax.margins(x=0.12)  # room for the labels
ax.set_xlabel("% of GPT-3's parameters")
