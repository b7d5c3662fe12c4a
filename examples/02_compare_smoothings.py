"""Compare n-gram smoothing methods on held-out text, and against the true distribution.
=====================================================================================

An unsmoothed (MLE) n-gram gives probability 0 to any n-gram it never saw, so one unseen
word sequence makes the perplexity infinite. Smoothing moves a little probability to the
unseen; Kneser-Ney does it best. On the toy language we also know the truth: the KL
divergence KL(P* || model) per token says how far each model is from it.

Run:  python examples/02_compare_smoothings.py [--quick] [--order N]
"""
import argparse
import warnings

import pandas as pd

import seqprob as sp
from seqprob.analysis.truth import kl_per_token
from seqprob.ngram import MLE, AbsoluteDiscount, AddK, KneserNey, ModifiedKneserNey, WittenBell
from seqprob.truth import toy_english


def main():
    parser = argparse.ArgumentParser(description=__doc__ and __doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpora (seconds)")
    parser.add_argument("--order", type=int, default=3, help="n-gram order (default 3)")
    args = parser.parse_args()

    truth = toy_english()
    tok = truth.tokenizer                                   # every model scores the same tokens
    train = truth.sample(2000 if args.quick else 50000, seed=0)
    test = truth.sample(200 if args.quick else 2000, seed=1)
    n = args.order
    estimators = {"MLE": MLE(order=n), "add-one": AddK(order=n, k=1.0), "add-0.01": AddK(order=n, k=0.01),
                  "absolute discount": AbsoluteDiscount(order=n), "Witten-Bell": WittenBell(order=n),
                  "Kneser-Ney": KneserNey(order=n), "modified Kneser-Ney": ModifiedKneserNey(order=n)}
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                     # small corpora trigger discount fallbacks
        for name, est in estimators.items():
            model = est.fit(train, tokenizer=tok)
            ev = sp.evaluate(model, test, tokenizer=tok)    # KenLM's figures: ppl incl. / excl. OOVs
            kl = kl_per_token(truth, model, samples=test, tokenizer=tok)
            rows.append({"smoothing": name, "perplexity": ev.perplexity, "bits/token": ev.bits_per_token,
                         "zero-probability tokens": ev.n_zeros, "KL(P*||model) nats/token": kl.per_token})
    h = truth.entropy().per_token
    print(f"order {n}, {len(train)} training sentences, {len(test)} held-out sentences")
    print(f"true entropy: {h:.3f} nats/token = perplexity {2.718281828 ** h:.2f} (no model can do better)\n")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
