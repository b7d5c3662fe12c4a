r"""
Perplexity, bits per byte, and the distance to the truth
========================================================

How good is a model? On held-out text :math:`x` of :math:`N` tokens,

* the **cross-entropy** is :math:`-\frac{1}{N} \sum_t \log P_\theta(x_t \mid x_{<t})` nats per
  token, the average surprisal;
* the **perplexity** is its exponential: the number of equally likely tokens the model
  hesitates between, on average (lower is better);
* **bits per byte** divides the total surprisal in bits (each line's ``</s>`` included) by
  the text's size in UTF-8 bytes (without the newlines), so that models with different
  tokenizers can be compared.

On text from a language whose :math:`P^*` is known, the cross-entropy of :math:`P^*` itself is
the floor, and the gap to it is the KL divergence :math:`\mathrm{KL}(P^* \| P_\theta)` per token:
how many extra nats the model pays for not being the truth.
"""
import warnings

import matplotlib.pyplot as plt

import seqprob as sp

plt.ion()
warnings.filterwarnings("ignore", category=sp.ngram.DiscountFallbackWarning)  # tiny corpora

truth = sp.toy_english()
tok = truth.tokenizer
train, test = truth.sample(5_000, seed=0), truth.sample(500, seed=1)
models = {
    "uniform": sp.UniformModel(truth.vocab),
    "Kneser-Ney, order 2": sp.ngram.ModifiedKneserNey(order=2).fit(train, tokenizer=tok),
    "Kneser-Ney, order 4": sp.ngram.ModifiedKneserNey(order=4).fit(train, tokenizer=tok),
    "GPT (shipped)": sp.default_model(),
    "truth P*": truth,
}
for name, model in models.items():
    ev = sp.evaluate(model, test, tokenizer=tok)
    print(f"{name:20} perplexity {ev.perplexity:8.3f}   {ev.bits_per_token:6.3f} bits/token   "
          f"{ev.bits_per_byte:6.3f} bits/byte")

# %%
# Perplexity depends on the tokenizer; bits per byte does not
# -----------------------------------------------------------
# A model that predicts one *character* at a time has a perplexity per character, not per
# word: a much smaller number that says nothing about which model is better. Bits per byte
# counts the whole text's surprisal against its size, whatever the tokens, so the two can be
# compared: the character model's low perplexity hides a worse model.

chars = sp.CharTokenizer.fit(train)
char_model = sp.ngram.ModifiedKneserNey(order=8).fit(train, tokenizer=chars)
for name, model, tokenizer in [("characters, order 8", char_model, chars),
                               ("Kneser-Ney, order 4", models["Kneser-Ney, order 4"], tok),
                               ("truth P*", truth, tok)]:
    ev = sp.evaluate(model, test, tokenizer=tokenizer)
    print(f"{name:20} {ev.n_tokens:6,} tokens   perplexity {ev.perplexity:6.3f}   "
          f"{ev.bits_per_byte:6.3f} bits/byte")

# %%
# The distance to the truth
# -------------------------
# :func:`seqprob.analysis.kl_per_token` estimates :math:`\mathrm{KL}(P^* \| P_\theta)` per
# token on sentences sampled from :math:`P^*`, with a confidence interval. It is 0 for the
# truth itself, and no model can go below it.

names, kls, lows, highs = [], [], [], []
for name, model in models.items():
    if name == "uniform":
        continue
    kl = sp.analysis.kl_per_token(truth, model, n=1_000, seed=2)
    names.append(name)
    kls.append(kl.per_token)
    lows.append(kl.per_token - kl.ci_low)
    highs.append(kl.ci_high - kl.per_token)
    print(f"{name:20} KL(P* || model) = {kl.per_token:.4f} nats/token "
          f"[{kl.ci_low:.4f}, {kl.ci_high:.4f}]")

fig, ax = plt.subplots(figsize=(7, 3), layout="constrained")
ax.barh(names[::-1], kls[::-1], xerr=[lows[::-1], highs[::-1]], capsize=3)
ax.set_xlabel("KL(P* || model), nats per token (95% interval)")

# %%
# Sampling: the distribution, run forwards
# ----------------------------------------
# A model that is close to :math:`P^*` also *generates* text that looks like samples of
# :math:`P^*`. Each sampled sentence is a walk through the chain rule, one conditional at a
# time, and its probability under the truth says whether the language could have produced it.

gpt = models["GPT (shipped)"]
kn2 = models["Kneser-Ney, order 2"]
for name, model in [("GPT", gpt), ("Kneser-Ney 2", kn2)]:
    for text in sp.sample(model, tokenizer=tok, n=4, seed=3, max_new_tokens=20):
        lp = sp.joint_logprob(truth, text)
        verdict = "impossible under P*" if lp == float("-inf") else f"log P* = {lp:7.2f}"
        print(f"{name:13} {text!r:55} {verdict}")
