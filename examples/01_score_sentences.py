"""Score three sentences token by token under the true language, an n-gram model and a GPT.
========================================================================================

A language model is a probability distribution over sequences. By the chain rule,

    P(x_1 .. x_T) = P(x_1 | <s>) P(x_2 | <s> x_1) ... P(</s> | <s> x_1 .. x_T),

so scoring a sentence means asking the model, token by token, "how likely was this next
token?". The toy language of seqprob knows the exact probabilities (P*), so we can see how
close the models come.

Run:  python examples/01_score_sentences.py [--quick] [--out DIR]
"""
import argparse
from pathlib import Path

import seqprob as sp
from seqprob.ngram import ModifiedKneserNey
from seqprob.truth import toy_english

from _shared import shipped_model

SENTENCES = ["the cat sat on the mat",          # likely
             "the cat sat zx oj squid",         # impossible: "zx" is not a word of the language
             "paris is the capital of france"]  # a fact the language knows


def main():
    parser = argparse.ArgumentParser(description=__doc__ and __doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small training sample (seconds)")
    parser.add_argument("--out", help="folder to save the figure in (PNG)")
    args = parser.parse_args()

    truth = toy_english()                                  # the exact source P*
    train = truth.sample(1000 if args.quick else 20000, seed=0)
    kn3 = ModifiedKneserNey(order=3).fit(train, tokenizer=truth.tokenizer)
    models = {"truth P*": truth, "kn3": kn3}
    gpt = shipped_model()
    if gpt is not None:
        models["gpt"] = gpt

    # One row per model, sentence and token: logprob (nats), surprisal_bits, rank, ...
    df = sp.score(models, SENTENCES, tokenizer=truth.tokenizer)
    cols = ["model", "seq", "token", "logprob", "surprisal_bits", "rank"]
    print(df[cols].to_string(index=False))

    # Sentence level: the sum of the log-probs is the joint log-probability (-inf = impossible).
    print()
    print(sp.summarize(df)[["model", "text", "n_tokens", "logprob", "perplexity"]].to_string(index=False))

    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        fig = sp.plots.sentence_comparison(df)             # surprisal bars + running sum
        fig.savefig(out / "sentences.png", dpi=100)
        print(f"\nfigure: {out / 'sentences.png'}")


if __name__ == "__main__":
    main()
