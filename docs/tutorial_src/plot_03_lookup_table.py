r"""
The lookup table that cannot be stored, and the n-gram tables that can
======================================================================

A table with one row per sequence would need :math:`V^T` rows: with a vocabulary of 50,257
tokens (GPT-2's) and sequences of 100 tokens that is about :math:`10^{470}` rows, against
:math:`10^{80}` atoms in the observable universe. The chain rule replaces it by conditionals,
and an n-gram model approximates each conditional by looking only at the last
:math:`n - 1` tokens, a table that counting can fill.
"""
import warnings
from collections import Counter
from itertools import pairwise

import matplotlib.pyplot as plt
import numpy as np

import seqprob as sp

plt.ion()

print(f"log10 rows, V = 50,257, T = 100: {sp.lookup_table_size(50_257, 100):.1f}")
ax = sp.plots.lookup_table(vocab_sizes=(27, 1000, 50_257), max_length=100)

# %%
# Counting n-grams
# ----------------
# An n-gram model estimates :math:`P(x_t \mid x_{t-n+1} \ldots x_{t-1})` from counts in a
# training corpus. Which words follow "cat" in 2,000 sentences of the toy language, and how
# often? The bigram maximum-likelihood estimate (MLE) is the count ratio
# :math:`P(w \mid \text{cat}) = c(\text{cat}\ w) / \sum_{w'} c(\text{cat}\ w')`, and
# seqprob's ``MLE(order=2)`` gives exactly those numbers.

truth = sp.toy_english()
train, test = truth.sample(2_000, seed=0), truth.sample(300, seed=1)
tok = truth.tokenizer
after_cat = Counter(nxt for sentence in train
                    for word, nxt in pairwise(sentence.split() + ["</s>"]) if word == "cat")
total = sum(after_cat.values())
bigram = sp.ngram.MLE(order=2).fit(train, tokenizer=tok)
ids = [tok.vocab.bos_id] + tok.encode("the cat")  # x_0 = <s>, then the context
p_next = np.exp(bigram.start(ids).logprobs)  # (V,) P_MLE(next | cat)
for word, count in after_cat.most_common(6):
    p = p_next[tok.vocab.id(word)]
    print(f"c(cat {word:>6}) = {count:3}   {count:3} / {total} = {count / total:.4f}   MLE: {p:.4f}")
    assert np.isclose(p, count / total)

# %%
# The count ratio gives probability 0 to anything unseen: one unseen pair makes a held-out
# sentence impossible and the perplexity infinite.

for order in (1, 2, 3, 4):
    mle = sp.ngram.MLE(order=order).fit(train, tokenizer=tok)
    ev = sp.evaluate(mle, test, tokenizer=tok)
    print(f"MLE order {order}: held-out perplexity {ev.perplexity:6.3f}, "
          f"{ev.n_zeros} of {ev.n_tokens} tokens with probability 0")

# %%
# Even the unigram table fails: a held-out word that never occurs in the 2,000 training
# sentences gets probability 0.

# %%
# Sparsity: the longer the context, the emptier the table
# -------------------------------------------------------
# The share of held-out n-grams never seen in training grows with the order: the table has
# more rows than the corpus can fill.

# Kneser-Ney's discounts come from how many n-grams occur once, twice, ...; on so small a
# corpus the unigram counts cannot give them, and seqprob (like KenLM's lmplz) says so and
# uses fixed fallback discounts. The warning is expected here.
warnings.filterwarnings("ignore", category=sp.ngram.DiscountFallbackWarning)
curve = sp.analysis.sparsity_curve(train, test, orders=(1, 2, 3, 4, 5), tokenizer=tok)
print(curve.to_string(index=False))
ax = sp.plots.sparsity(curve)

# %%
# Smoothing
# ---------
# Smoothing moves a little probability to what was never seen. Add-k adds a pseudo-count to
# every entry; Kneser-Ney discounts each count and backs off to a lower order that counts in
# how many contexts a word appears. Perplexity is :math:`\exp` of the average negative
# log-probability per token, lower is better; the true language sets the floor.

models = {"add-1, order 3": sp.ngram.AddK(order=3, k=1.0),
          "add-0.01, order 3": sp.ngram.AddK(order=3, k=0.01),
          "Kneser-Ney, order 3": sp.ngram.ModifiedKneserNey(order=3),
          "Kneser-Ney, order 5": sp.ngram.ModifiedKneserNey(order=5)}
for name, model in models.items():
    model.fit(train, tokenizer=tok)
    print(f"{name:22} perplexity {sp.perplexity(model, test, tokenizer=tok):7.3f}")
print(f"{'truth P*':22} perplexity {sp.perplexity(truth, test):7.3f}")
