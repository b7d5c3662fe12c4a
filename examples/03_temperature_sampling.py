"""Temperature, top-k and top-p: how the next-token distribution is reshaped before sampling.
==========================================================================================

Sampling draws the next token from softmax(log P / T). T < 1 sharpens the distribution
(T -> 0 is the argmax: always the most likely token), T > 1 flattens it (T -> infinity is
uniform). top-k keeps the k most likely tokens; top-p keeps the smallest set whose
probability reaches p. The entropy (bits) measures how spread out the distribution is.

Run:  python examples/03_temperature_sampling.py [--quick] [--prompt TEXT] [--out DIR]
"""
import argparse
from pathlib import Path

import numpy as np

import seqprob as sp
from seqprob.ngram import ModifiedKneserNey
from seqprob.sampling import next_token_probs
from seqprob.truth import toy_english

from _shared import shipped_model


def main():
    parser = argparse.ArgumentParser(description=__doc__ and __doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small model (seconds)")
    parser.add_argument("--prompt", default="the cat", help="text to continue (default 'the cat')")
    parser.add_argument("--out", help="folder to save the figure in (PNG)")
    args = parser.parse_args()

    truth = toy_english()
    model = None if args.quick else shipped_model()
    if model is None:                                       # a trigram is enough to see the effect
        model = ModifiedKneserNey(order=3).fit(truth.sample(2000 if args.quick else 20000, seed=0),
                                               tokenizer=truth.tokenizer)
    tok = truth.tokenizer
    prefix = [model.vocab.bos_id] + tok.encode(args.prompt)  # x_0 = <s>, then the prompt
    row = model.start(prefix).logprobs                      # log P(next | prompt), shape (V,)

    print(f'next token after "{args.prompt}":')
    for t in (0.01, 0.5, 1.0, 2.0):
        p = next_token_probs(row, temperature=t)
        h = -(p[p > 0] * np.log2(p[p > 0])).sum()
        top = np.argsort(-p)[:4]
        shown = ", ".join(f"{model.vocab.tokens[i]} {p[i]:.2f}" for i in top)
        print(f"  T = {t:<4}  entropy {h:5.2f} bits   {shown}")

    print("\nsamples (same seed for every setting):")
    for kw in ({"temperature": 0.5}, {"temperature": 1.0}, {"temperature": 1.5},
               {"temperature": 1.0, "top_k": 3}, {"temperature": 1.0, "top_p": 0.5}):
        text = sp.sample(model, args.prompt, tokenizer=tok, max_new_tokens=15, seed=0, **kw)
        print(f"  {str(kw):<35} {text}")

    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        ax = sp.plots.next_token(row, model.vocab, temperatures=(0.5, 1.0, 2.0), k=10)
        ax.figure.savefig(out / "next_token.png", dpi=100)
        print(f"\nfigure: {out / 'next_token.png'}")


if __name__ == "__main__":
    main()
